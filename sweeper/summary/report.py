"""Orchestration: read a sweep once (records), compute (statistics, findings), render (tables, figures) into a
folder, and write the summary back to the sweep's parent run. `write_report` needs no tracking server: it renders a
snapshot, read from MLflow or built by hand.
"""

from __future__ import annotations

import dataclasses
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from mlflow.tracking import MlflowClient

from nmt_core.family.registry import bound_of
from nmt_core.training.evaluate import PairedBootstrap, bleu_options
from sweeper.space.design import digest
from sweeper.space.spec import SignificanceSpec, read_section
from sweeper.summary.best_heatmaps import log_best_heatmaps
from sweeper.summary.choose import choose_on_objective
from sweeper.summary.combine import combine
from sweeper.summary.costs import cost_table
from sweeper.summary.data import read_data, write_data
from sweeper.summary.figures import STRIP, draw_figures, figure_data, importance_sections
from sweeper.summary.findings import add_findings
from sweeper.summary.headline import headline
from sweeper.summary.metric_table import metric_table
from sweeper.summary.pareto import pareto_front
from sweeper.summary.plots import pareto_plot
from sweeper.summary.records import SummaryError, SweepSnapshot, read_artifacts, read_trials
from sweeper.summary.sequential import design_lines, read_design, scores_by_row
from sweeper.summary.statistics import Summary, TrialStatistics, alignment_table, build_summary
from sweeper.summary.tables import (
    marks_line,
    power_lines,
    render_alignment,
    render_convergence,
    render_costs,
    render_csv,
    render_latex,
    render_markdown,
    render_metrics,
    render_metrics_csv,
    render_metrics_latex,
    render_pareto,
    render_pbt_schedules,
    shown_rows,
)
from sweeper.summary.tau_epochs import render_observed_epochs, render_tau_epochs
from sweeper.summary.translations_page import PAGE, write_page
from sweeper.tracking.metrics import NOTE, PARETO_TAG, SUMMARY_DIR
from sweeper.tracking.mlflow_tables import csv_table, mark_tables, write_table
from sweeper.tracking.mlflow_view import artifact_page, described, described_links


def summarize(
    name: str,
    tracking_uri: str,
    out: Path,
    formats: list[str],
    resamples: int | None = None,
    run_id: str | None = None,
    added: tuple[tuple[str, str | None], ...] = (),
    chosen: tuple[str, ...] = (),
) -> Summary:
    """Write summary.md (+ csv / tex), figures, and log them to the sweep's parent run; the trials of the `added`
    sweeps ((name, parent run), None for its newest; in the same store) join the sweep's where their settings
    allow (combine), and each row keeps the trials at its `chosen` settings' best mean objective (choose).

    Everything comes from MLflow: the trials' metrics and histories, their translations and the references
    they were scored against; no corpus is read.
    """
    client = MlflowClient(tracking_uri)
    with tempfile.TemporaryDirectory() as tmp:
        snapshot = read_trials(client, name, run_id, Path(tmp))
        if added:
            others = [
                read_trials(client, other, other_run, Path(tmp) / f"added-{i}", "--with")
                for i, (other, other_run) in enumerate(added)
            ]
            snapshot = combine(snapshot, others, chosen)
        if chosen:
            snapshot = choose_on_objective(snapshot, chosen)
        snapshot = read_artifacts(client, snapshot, Path(tmp) / "trials")  # of the trials kept only
    summary = write_report(snapshot, out, formats, resamples)
    # the variants the BLEU table shows: a 1,000-row table's every variant drawn and logged one by one takes minutes
    best_only = snapshot.space.tracking.plots == "best"  # `all`: every trial drew its own; `none`: nobody draws
    heatmaps = log_best_heatmaps(client, shown_rows(summary), snapshot.space.objective) if best_only else []
    if heatmaps:  # drawn into the best trials' runs (tracking.plots: best), so summary.md says where
        with (out / "summary.md").open("a", encoding="utf-8") as markdown:
            markdown.write("\n" + "\n".join(heatmaps))
    tag_pareto(client, summary)
    page = write_page(client, snapshot, summary, out)
    client.log_artifacts(snapshot.parent_id, str(out), SUMMARY_DIR)
    log_bleu_table(client, snapshot.parent_id, summary)
    describe(client, tracking_uri, snapshot, summary, out, page)
    return summary


def tag_pareto(client: MlflowClient, summary: Summary) -> None:
    """Several objectives: each trial's run tagged with its row's place (front, dominated, or dominated by means
    only), the first column of the sweep's saved view, so that MLflow's table shows the front."""
    for point in summary.pareto.points if summary.pareto else []:
        for record in point.row.records:
            client.set_tag(record.run_id, PARETO_TAG, point.status)


def describe(client: MlflowClient, uri: str, snapshot: SweepSnapshot, summary: Summary, out: Path, page: bool) -> None:
    """The parent run's description (parent_note), with its links: the saved views, summary.md and, where it was
    written, translations.html (artifact pages MLflow previews)."""
    parent = snapshot.parent_id
    pages = described_links(client, uri, parent)
    experiment_id = client.get_run(parent).info.experiment_id

    def artifact(name: str) -> str:
        return described(uri, artifact_page(experiment_id, parent, f"{SUMMARY_DIR}/{name}"))

    links = NoteLinks(pages.runs, pages.translations, pages.trials, artifact("summary.md"), page and artifact(PAGE))
    client.set_tag(parent, NOTE, parent_note(snapshot, summary, figure_links(parent, out), links))


BLEU_TABLE = "bleu_table.json"  # the BLEU table as an MLflow table, beside summary.md in the parent's artifacts


def log_bleu_table(client: MlflowClient, run_id: str, summary: Summary) -> None:
    """The BLEU table (as bleu_table.csv has it) as an MLflow table of the parent run: its artifact view shows a
    table, not text. The other artifacts get no such twin: the figures and summary.md show in the parent's
    description, a trial's numbers in the runs table, and results.parquet of a large sweep would be no small
    preview."""
    with tempfile.TemporaryDirectory() as tmp:
        write_table(*csv_table(render_csv(summary)), Path(tmp) / BLEU_TABLE)
        client.log_artifact(run_id, str(Path(tmp) / BLEU_TABLE), SUMMARY_DIR)
    mark_tables(client, run_id, [f"{SUMMARY_DIR}/{BLEU_TABLE}"])


def figure_links(run_id: str, out: Path) -> str:
    """The summary's figures as images in the parent run's description: MLflow's UI renders the description's
    markdown, and a relative `get-artifact` link (the route its own artifact view reads a file through, below any
    static prefix) shows the figure logged under summary/."""
    return "".join(
        f"![{path.stem}](get-artifact?path={quote(f'{SUMMARY_DIR}/{path.name}', safe='')}&run_uuid={run_id})\n"
        for path in sorted(out.glob("*.png"), key=lambda path: (path.name != STRIP, path.name))  # the spread first
    )


def significance_of(snapshot: SweepSnapshot, resamples: int | None) -> SignificanceSpec:
    """The space's significance test; `sweeper summarize --resamples` overrides its resamples."""
    significance = snapshot.space.significance
    if resamples is None:
        return significance
    return read_section("significance", {**vars(significance), "resamples": resamples}, "sweeper summarize --resamples")


def compute(snapshot: SweepSnapshot, significance: SignificanceSpec) -> Summary:
    """The BLEU table with its tests, the findings, and a note on the trials left out."""
    records = snapshot.records
    bleu = bleu_options(records[0].config)
    extracted = None  # a designed sweep's trials' statistics, which its looks read again
    if snapshot.space.design.declared:
        extracted = TrialStatistics(
            PairedBootstrap(snapshot.references, significance.resamples, **bleu), snapshot.translations
        )
    summary = build_summary(
        records, snapshot.translations, snapshot.references, snapshot.space.baseline, bleu, significance, extracted
    )
    add_findings(summary)
    if extracted:
        read_designed(snapshot, summary, extracted)
    lowercase = bleu["lowercase"]
    summary.metric_table = metric_table(summary, snapshot.references, snapshot.translations, significance, lowercase)
    summary.notes += snapshot.choices
    if snapshot.left_out:
        summary.notes.append(
            f"{sum(snapshot.left_out.values())} trial(s) left out of every table and figure: "
            + ", ".join(f"{n} {why}" for why, n in snapshot.left_out.items())
        )
    return summary


def read_designed(snapshot: SweepSnapshot, summary: Summary, extracted: TrialStatistics) -> None:
    """A designed sweep's primary comparisons, read at its looks on `extracted`'s resamples; none where the design
    differs from the one its parent run froze (the space or the tag changed after the first result)."""
    design = snapshot.space.design
    summary.design_changed = snapshot.design_digest != digest(design)
    if summary.design_changed:
        return
    objective = snapshot.space.objective
    summary.design = read_design(summary.rows, design, scores_by_row(extracted), (objective.metric, objective.mode))


def write_report(snapshot: SweepSnapshot, out: Path, formats: list[str], resamples: int | None = None) -> Summary:
    """summary.md, the figures and the BLEU table in `formats` (csv, latex) into `out`, from the snapshot alone, and
    the data they came from (out/data: summarize_data recomputes all of it from there)."""
    significance = significance_of(snapshot, resamples)
    summary = compute(snapshot, significance)
    out.mkdir(parents=True, exist_ok=True)
    write_data(snapshot, out)
    sections = [
        *changed_head(summary),
        f"# Sweep `{snapshot.name}`\n",
        f"MLflow parent run `{snapshot.parent_id}` ({snapshot.parent_status}); "
        f"{len(snapshot.records)} finished trials{added_note(snapshot)}.\n",
        *verdict_head(summary, "below, with the BLEU table"),
        "## BLEU (secondary comparisons)\n" if summary.design else "## BLEU\n",
        render_markdown(summary),
        *render_convergence(summary.convergence),
    ]
    if summary.metric_table is not None:
        sections += ["## chrF and TER\n", render_metrics(summary, summary.metric_table)]
    if (costs := cost_table(summary)) is not None:
        sections += ["## Compute\n", render_costs(summary, costs)]
    if snapshot.alignment and any(row.is_baseline for row in summary.rows):
        table = alignment_table(summary, snapshot.alignment, significance)
        sections += ["## Attention and word alignment\n", render_alignment(summary, table)]
    if summary.conclusion:
        sections.append("## What this sweep shows, and what it cannot\n\n" + summary.conclusion)
    sections += render_tau_epochs(
        [
            (row.label, bound_of(row.records[0].config.attention), [r.curves for r in row.records])
            for row in summary.rows
        ]
    )
    sections += render_observed_epochs([(row.label, [r.curves for r in row.records]) for row in summary.rows])
    sections += pareto_sections(summary, snapshot.space.objectives, out)
    sections += draw_figures(figure_data(summary, snapshot.traces), out)
    objective = snapshot.space.objective
    sections += importance_sections(snapshot.records, objective.metric, objective.mode, out)
    sections += render_pbt_schedules(snapshot.records)
    (out / "summary.md").write_text("\n".join(sections), encoding="utf-8")
    if "csv" in formats:
        (out / "bleu_table.csv").write_text(render_csv(summary), encoding="utf-8")
    if "latex" in formats:
        (out / "bleu_table.tex").write_text(render_latex(summary), encoding="utf-8")
    write_metric_tables(summary, out, formats)
    return summary


def pareto_sections(summary: Summary, objectives: tuple, out: Path) -> list[str]:
    """A sweep with several objectives: its Pareto front as a table, and a figure of the first two objectives."""
    if len(objectives) < 2:
        return []
    front = summary.pareto = pareto_front(summary, objectives)
    shown = [(p.row.label, *p.means[:2], *p.stds[:2], p.status) for p in front.points]
    if shown:
        pareto_plot(shown, tuple(f"{o.metric} ({o.mode})" for o in objectives[:2]), out / "pareto_front.png")
    return ["## Pareto front\n", render_pareto(front, "pareto_front.png" if shown else None)]


def write_metric_tables(summary: Summary, out: Path, formats: list[str]) -> None:
    """metrics_table.csv and .tex beside bleu_table's (chrF and TER), where the trials logged them."""
    table = summary.metric_table
    if table is not None and "csv" in formats:
        (out / "metrics_table.csv").write_text(render_metrics_csv(summary, table), encoding="utf-8")
    if table is not None and "latex" in formats:
        (out / "metrics_table.tex").write_text(render_metrics_latex(summary, table), encoding="utf-8")


def verdict_head(summary: Summary, where: str, fenced: bool = True) -> list[str]:
    """The verdict under its heading (sweeper.summary.headline): a designed sweep's primary comparisons, else each
    variant against its baseline, then the variants' table and the warnings a line each, `where` in full."""
    title = "## Primary comparisons (the design's, read at its looks)\n" if summary.design else "## Verdict\n"
    return [title, "\n".join(headline(summary, where, fenced)) + "\n"]


def changed_head(summary: Summary) -> list[str]:
    """The summary's first line where the design changed after the sweep's first result."""
    return [design_lines([], changed=True)[0] + "\n"] if summary.design_changed else []


def summarize_data(name: str, data: Path, out: Path, formats: list[str], resamples: int | None = None) -> Summary:
    """`sweeper summarize NAME --from-data DIR`: every table and figure again from a summary's data/ alone."""
    snapshot = read_data(data)
    if snapshot.name != name:
        raise SummaryError(f"{data} holds the data of sweep {snapshot.name!r}, not {name!r}")
    return write_report(snapshot, out, formats, resamples)


def added_note(snapshot: SweepSnapshot) -> str:
    """Where a combined summary's trials came from, beside the trial count."""
    return "".join(
        f", with those of sweep `{name}` (parent run `{parent}`, {status})" for name, parent, status in snapshot.added
    )


MAX_NOTE = 8000  # characters of a tag's value MLflow keeps (mlflow.utils.validation.MAX_TAG_VAL_LENGTH)
FULL_SUMMARY = "Figures and the full summary: artifacts, summary/summary.md"
ROUTE_NOTE = (
    "\n\nOpened on Traces, or the runs called Evaluations? MLflow 3.17 shows its GenAI side unless the link says "
    "`workflowType=machine_learning` (the links here do): pick **Model training** at the top of the sidebar."
)


@dataclass(frozen=True)
class NoteLinks:
    """The pages the parent run's description links to, one line below the verdict (those not written: empty)."""

    compare: str = ""  # the comparison: the saved view the sweep's link opens
    translations: str | None = None  # every trial's translations side by side (MLflow's evaluation view)
    trials: str | None = None  # every trial's charts: a dot per seed, the parallel coordinates
    summary: str = ""  # summary.md, in the artifact view
    page: str = ""  # translations.html, in the artifact view

    def line(self) -> str:
        links = [
            ("Compare its trials", self.compare),
            ("every trial: a dot per seed, parallel coordinates", self.trials),
            ("their translations side by side", self.translations),
            ("translations by variant (best seed, chrF)", self.page),
            ("summary.md", self.summary),
        ]
        return " · ".join(f"[{text}]({href})" for text, href in links if href)


NO_LINKS = NoteLinks()


def parent_note(snapshot: SweepSnapshot, summary: Summary, figures: str = "", links: NoteLinks = NO_LINKS) -> str:
    """The parent run's description in MLflow's UI, which shows it folded at 100 pixels: first the verdict, the
    variants' table and the warnings a line each (sweeper.summary.headline), then the `links`, the full table, the
    warnings, the conclusion and the `figures` (image links, always kept). MLflow keeps 8,000 characters of it and
    cuts the rest wherever it falls (a study's seven rows once lost their power lines and the line naming the method
    behind the marks), so a longer one leaves out the warnings in full, then the conclusion, then the power lines,
    and says so; a table too long even then is cut at a line, its method line kept."""
    where = f"[summary.md]({links.summary})" if links.summary else "summary.md"
    head = (
        "\n".join(headline(summary, where))
        + "\n\n"
        + (links.line() + "\n\n" if links.line() else "")
        + (f"{len(snapshot.records)} finished trials{added_note(snapshot)}.\n\n" if snapshot.added else "")
    )
    for body, left_out in note_versions(summary):
        note = head + body + left_out_line(left_out) + figures + FULL_SUMMARY + ROUTE_NOTE
        if len(note) <= MAX_NOTE:
            return note
    marks = marks_line(summary) + "\n" if summary.method_name else ""
    end = left_out_line(left_out) + figures + FULL_SUMMARY + ROUTE_NOTE
    cut = f"\n... cut here to fit MLflow's {MAX_NOTE:,} characters.\n"
    kept = note[: max(0, MAX_NOTE - len(cut + marks + end))]
    kept = kept[: kept.rfind("\n") + 1]
    return kept + cut + (marks if marks.strip() not in kept else "") + end


def note_versions(summary: Summary) -> list[tuple[str, list[str]]]:
    """The description's body, whole, then shorter and saying what it leaves out: the warnings in full (the
    headline names each in a line, summary.md has them), the conclusion, the power lines."""
    conclusion = f"\n{summary.conclusion}" if summary.conclusion else ""
    versions = [(render_markdown(summary) + conclusion, [])]
    quiet = dataclasses.replace(summary, warnings=[])
    if summary.warnings:
        versions.append((render_markdown(quiet) + conclusion, ["the warnings in full"]))
    if summary.conclusion:
        versions.append((render_markdown(quiet), versions[-1][1] + ["the conclusion"]))
    if power_lines(summary):
        versions.append((render_markdown(quiet, power=False), versions[-1][1] + ["the power lines"]))
    return versions


def left_out_line(parts: list[str]) -> str:
    """What a description shortened for MLflow left out, or a plain line break."""
    return f"\nLeft out here to fit MLflow's {MAX_NOTE:,} characters: {' and '.join(parts)}. " if parts else "\n"
