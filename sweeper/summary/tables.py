"""Pure renderers: the BLEU table as markdown, CSV and LaTeX, the alignment table, PBT schedules. They format what
statistics computed and read nothing else.
"""

from __future__ import annotations

import csv
import io
import statistics

from sweeper.summary.costs import CostTable
from sweeper.summary.metric_table import MetricTable
from sweeper.summary.pareto import FRONT, ParetoFront
from sweeper.summary.records import TOP_ROWS, TrialRecord
from sweeper.summary.statistics import (
    BETTER,
    FIXED,
    SACT_QUESTION,
    TAU_SCALE,
    WORSE,
    AlignmentTable,
    Comparison,
    Summary,
    VariantRow,
    baselines_of,
    plain_decoding,
    planning_line,
    tau_scale,
)
from sweeper.tracking.metrics import EXPLOITS, SETTING_PREFIX


def mean_std(row: VariantRow, mean_and_std: tuple[float, float] | None, plus_minus: str = "±") -> str:
    """`4.54 ± 0.33`: a mean with the seeds' sample std beside it (a single seed has none)."""
    if mean_and_std is None:
        return ""
    mean, std = mean_and_std
    return f"{mean:.2f}" if row.seeds == 1 else f"{mean:.2f} {plus_minus} {std:.2f}"


def _cells(row: VariantRow, test_sets: list[str], plus_minus: str) -> list[str]:
    tested = row.against_baseline
    delta = "baseline" if row.is_baseline else "" if tested is None else f"{tested.delta:+.2f}{tested.mark}"
    time = "" if row.epoch_time_s is None else f"{row.epoch_time_s:.1f}"
    p = "" if tested is None else f"{tested.p_adjusted:.3g}"  # 0.0499 stays below 0.05
    return [
        row.label,
        str(row.seeds),
        *(mean_std(row, row.tests[s], plus_minus) for s in test_sets),
        mean_std(row, row.average, plus_minus),
        mean_std(row, row.paper_average, plus_minus),
        f"{row.n_params / 1e6:.2f}M",
        time,
        delta,
        interval(row.interval),
        p,
        "" if tested is None else tested.covers,
    ]


def interval(bounds: tuple[float, float] | None) -> str:
    return "" if bounds is None else f"[{bounds[0]:+.2f}, {bounds[1]:+.2f}]"


def shown_rows(summary: Summary) -> list[VariantRow]:
    """Every row of a table of up to TOP_ROWS rows, in the table's order. Of a longer one (a 1,000-trial random
    sweep has a row per trial), the TOP_ROWS best by average BLEU and the baselines they are compared with, best
    first: a table one can read, with every delta's reference in it."""
    if len(summary.rows) <= TOP_ROWS:
        return summary.rows
    best = sorted(summary.rows, key=lambda row: -row.average[0])[:TOP_ROWS]
    shown = {id(row) for row in best} | {
        id(base) for base in baselines_of(summary.rows, summary.criteria, best).values()
    }
    return [row for row in sorted(summary.rows, key=lambda row: -row.average[0]) if id(row) in shown]


def left_out_note(summary: Summary, shown: list[VariantRow]) -> list[str]:
    """What a truncated table says about the rows it leaves out."""
    if len(shown) == len(summary.rows):
        return []
    return [
        (
            f"Rows: the {TOP_ROWS} best of {len(summary.rows)} by average BLEU, best first, with the baselines they "
            f"are compared with; {len(summary.rows) - len(shown)} rows left out (every row: `sweeper summarize "
            "--format csv`, bleu_table.csv)."
        )
    ]


def table_header(test_sets: list[str]) -> list[str]:
    return [
        "variant",
        "seeds",
        *test_sets,
        "avg",
        "multi-bleu avg",
        "#params",
        "s/epoch",
        "delta avg",
        "95% CI",
        "p (Holm)",
        "variance counted",
    ]


def control_tau(summary: Summary, comparison: Comparison) -> str:
    """The control's temperature: a fixed tau, or where a learned one settled."""
    if comparison.control == FIXED:
        return f"{summary.controls[id(comparison.row)].fixed_tau:g} (fixed)"
    scale = tau_scale(comparison.against)
    return "learned" if scale is None else f"{scale.text()} (learned)"


def render_controls(summary: Summary) -> list[str]:
    """SACT against its controls and every other row against those its parts declare (`render_declared`), and a
    decoding-only part against its own checkpoints decoded plainly (`render_plain_decoding`)."""
    return render_sact_controls(summary) + render_declared(summary) + render_plain_decoding(summary)


def render_plain_decoding(summary: Summary) -> list[str]:
    """Each shown row whose trials decoded their test sets with and without a decoding-only part (the entropy
    sharpening): the same checkpoints both ways, so the difference is paired per checkpoint (seed)."""
    found = [found for row in shown_rows(summary) if (found := plain_decoding(row)) is not None]
    if not found:
        return []
    lines = [
        "",
        "Decoding-only parts against the same checkpoints decoded plainly (their control), paired per checkpoint: "
        "each seed's test average with the part minus without; p: two-sided paired t-test over the seeds (the "
        "test sentences are not resampled).",
        "",
        "| row | BLEU avg | plain decoding | delta avg (seeds) | p |",
        "|---|---|---|---|---|",
    ]
    for f in found:
        spread = f" ± {statistics.stdev(f.deltas):.2f}" if len(f.deltas) > 1 else ""
        p = "" if f.p_value is None else f"{f.p_value:.3g}"
        delta = f"{statistics.fmean(f.deltas):+.2f}{spread} (n={len(f.deltas)})"
        lines.append(f"| {f.row.label} | {f.with_part:.2f} | {f.plain:.2f} | {delta} | {p} |")
    return lines


def render_declared(summary: Summary) -> list[str]:
    """Each row against the controls its parts declare beside SACT's question (SSMax against the fixed log-n scaling
    and no scaling, soft-capping against none, learned-alpha entmax against its fixed alpha and softmax, ...), tested
    and corrected with the table; nothing where the sweep has none of them."""
    shown = {id(row) for row in shown_rows(summary)}
    declared = [c for c in summary.comparisons if c.control not in ("", *SACT_QUESTION) and id(c.row) in shown]
    if not declared:
        return []
    lines = [
        "",
        "Each mechanism against the controls declared with it: is a difference the mechanism, or what its control "
        "already has?",
        "",
        "| row | BLEU avg | control | | BLEU avg | delta avg | 95% CI | p | p (Holm) | variance counted |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    return lines + [
        f"| {c.row.label} | {mean_std(c.row, c.row.average)} | {c.control} | {c.against.label} | "
        f"{mean_std(c.against, c.against.average)} | {c.delta:+.2f}{c.mark} | {interval(c.interval)} | "
        f"{c.p_value:.3g} | {c.p_adjusted:.3g} | {c.covers} |"
        for c in declared
    ]


def render_sact_controls(summary: Summary) -> list[str]:
    """SACT against its controls, tested and corrected with the table, and where each SACT row's temperature
    settled (no lines without a SACT row), for the rows the BLEU table shows."""
    shown = {id(row) for row in shown_rows(summary)}
    sact = [row for row in summary.rows if id(row) in summary.controls and id(row) in shown]
    if not sact:
        return []
    lines = [
        "",
        "SACT's temperature: the median tau over dev tokens (tau_p50) at each seed's best epoch, its median over seeds "
        "(the per-seed medians' range and std):",
        "",
        *(f"- `{row.label}`: {scale_text(summary, row)}" for row in sact),
    ]
    controls = [c for c in summary.comparisons if c.control in SACT_QUESTION and id(c.row) in shown]
    if controls:
        lines += [
            "",
            "SACT against its controls: is a difference adaptivity, or only a different constant temperature?",
            "",
            "| SACT | BLEU avg | control | BLEU avg | control tau | delta avg | 95% CI | p | p (Holm) | "
            "variance counted |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {c.row.label} | {mean_std(c.row, c.row.average)} | {c.against.label} | "
            f"{mean_std(c.against, c.against.average)} | {control_tau(summary, c)} | {c.delta:+.2f}{c.mark} | "
            f"{interval(c.interval)} | {c.p_value:.3g} | {c.p_adjusted:.3g} | {c.covers} |"
            for c in controls
        ]
    return lines + [
        "",
        "Controls are SACT without its input: the learned temperature (attention.temperature: learned, one tau = "
        "lambda^tanh(b) per model, per head in a Transformer) with the same lambda, and the fixed tau nearest SACT's "
        f"median tau if within a factor {TAU_SCALE:g} of it (a row without temperature is tau = 1), every other "
        "setting the same. A fixed tau = lambda is SACT's softest bound, not its control.",
    ]


def scale_text(summary: Summary, row: VariantRow) -> str:
    """A SACT row's median tau and what its controls are."""
    controls = summary.controls[id(row)]
    scale = controls.scale.text() if controls.scale else "unknown (no tau_p50 logged)"
    learned = f"learned control `{controls.learned.label}`" if controls.learned else "no learned control"
    if controls.fixed is not None:
        fixed = f"fixed control `{controls.fixed.label}` (tau {controls.fixed_tau:g})"
    elif controls.nearest_tau is not None:
        fixed = f"no fixed tau within a factor {TAU_SCALE:g} (nearest: {controls.nearest_tau:g})"
    else:
        fixed = "no fixed tau beside it"
    return f"median tau {scale}; {learned}; {fixed}"


def power_lines(summary: Summary) -> list[str]:
    """Each seed-aware difference that is not significant (of the rows the table shows), with the least difference
    its seeds could detect and, where a margin is set, its equivalence test."""
    shown = {id(row) for row in shown_rows(summary)}
    lines = [
        f"- `{c.row.label}` vs `{c.against.label}`: {c.delta:+.2f}, {c.power}"
        for c in summary.comparisons
        if c.power and id(c.row) in shown
    ]
    if not lines:
        return []
    return [
        "",
        "Not significant, and what the seeds run could detect (the minimum detectable difference, "
        "(t_{1-alpha/2} + t_{0.8}) * SE at the seeds run, alpha the level Holm gave the comparison; with "
        "significance.margin, two one-sided tests of equivalence within it; docs/statistics.md):",
        "",
        *lines,
    ]


def planning_lines(summary: Summary, difference: float) -> list[str]:
    """`summarize --plan D`: for each seed-aware comparison, the seeds a row the next study needs to detect D, from
    this sweep's variances (a design figure, not a claim about the difference observed)."""
    aware = [c for c in summary.comparisons if c.test is not None]
    if not aware:
        return ["No seed-aware comparison (2 seeds a row or more) to plan from."]
    return [
        f"Planning, from this sweep's variances (seeds per row; {len(aware)} comparisons, Holm's strictest step):",
        *(f"- `{c.row.label}` vs `{c.against.label}`: {planning_line(c, difference, len(aware))}" for c in aware),
    ]


def marks_line(summary: Summary) -> str:
    """The footer line naming the test behind the table's marks (the MLflow description keeps it when it is cut)."""
    return f"Marks: significance.method {summary.method_name}."


def render_markdown(summary: Summary, power: bool = True) -> str:
    """The BLEU table with its warnings, controls, power lines (unless `power` is false) and the footer that names
    the BLEU signatures and the method behind the marks."""
    lines = []
    if summary.warnings:
        lines += ["**Warnings: read these before the table.**", ""]
        lines += [f"- **{warning}**" for warning in summary.warnings] + [""]
    header = table_header(summary.test_sets)
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    shown = shown_rows(summary)
    lines += ["| " + " | ".join(_cells(row, summary.test_sets, "±")) + " |" for row in shown]
    lines += render_controls(summary)
    lines += power_lines(summary) if power else []
    lines.append("")
    lines += left_out_note(summary, shown)
    lines.append(
        "BLEU: sacrebleu on the detokenised output against the raw reference text, mean ± sample std over "
        "seeds" + (f" (`{summary.signatures['BLEU']}`)" if "BLEU" in summary.signatures else "") + ". "
        "multi-bleu: lowercased BLEU of word tokens, as multi-bleu.perl computes the papers' numbers"
        + (f" (`{summary.signatures['multi-bleu']}`)" if "multi-bleu" in summary.signatures else "")
        + "."
    )
    lines += [marks_line(summary)] if summary.method_name else []
    if summary.method:
        lines.append(f"delta avg: {summary.method}.")
    lines += [f"Note: {note}" for note in summary.notes]
    return "\n".join(lines) + "\n"


def render_csv(summary: Summary) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(
        [
            "variant",
            "seeds",
            *[f"{s}_{x}" for s in summary.test_sets for x in ("mean", "std")],
            "avg_mean",
            "avg_std",
            "multibleu_avg_mean",
            "multibleu_avg_std",
            "n_params",
            "epoch_time_s",
            "delta_avg",
            "mark",
            "p_value",
            "p_holm",
            "ci_low",
            "ci_high",
            "variance_counted",
            "detectable",
            "equivalence_p",
            "significance_method",
        ]
    )
    for row in summary.rows:
        paper, tested = row.paper_average or ("", ""), row.against_baseline
        writer.writerow(
            [
                row.label,
                row.seeds,
                *[f"{v:.4f}" for s in summary.test_sets for v in row.tests[s]],
                f"{row.average[0]:.4f}",
                f"{row.average[1]:.4f}",
                *(f"{v:.4f}" if v != "" else v for v in paper),
                row.n_params,
                "" if row.epoch_time_s is None else f"{row.epoch_time_s:.3f}",
                "" if row.delta is None else f"{row.delta:.4f}",
                row.mark,
                "" if row.p_value is None else row.p_value,
                "" if row.p_adjusted is None else row.p_adjusted,
                *(("", "") if row.interval is None else (f"{v:.4f}" for v in row.interval)),
                "" if tested is None else tested.covers,
                "" if tested is None or tested.detectable is None else f"{tested.detectable:.4f}",
                "" if tested is None or tested.equivalence_p is None else tested.equivalence_p,
                summary.method_name,
            ]
        )
    return out.getvalue()


LATEX_ESCAPE = str.maketrans(
    {"_": r"\_", "+": r"{+}", "#": r"\#", "%": r"\%", "†": r"$^\dagger$", "^": r"\^{}", "&": r"\&"}
)


def render_latex(summary: Summary) -> str:
    shown = shown_rows(summary)
    rows = [_cells(row, summary.test_sets, "±") for row in shown]
    note = f"Marks: {summary.method_name}." if summary.method_name else ""
    return latex_tabular(table_header(summary.test_sets), rows, note, left_out_note(summary, shown))


def latex_tabular(header: list[str], rows: list[list[str]], note: str, comments: list[str]) -> str:
    """A booktabs tabular of the markdown table's cells (escaped for LaTeX), its `note` as a footnote line and the
    `comments` after it."""
    lines = [
        r"\begin{tabular}{l" + "r" * (len(header) - 1) + "}",
        r"\toprule",
        " & ".join(h.translate(LATEX_ESCAPE) for h in header) + r" \\",
        r"\midrule",
    ]
    for row in rows:
        lines.append(" & ".join(c.translate(LATEX_ESCAPE).replace("±", r"$\pm$") for c in row) + r" \\")
    lines.append(r"\bottomrule")
    if note:
        lines.append(rf"\multicolumn{{{len(header)}}}{{l}}{{\footnotesize {note.translate(LATEX_ESCAPE)}}} \\")
    lines += [r"\end{tabular}", *(f"% {comment}" for comment in comments)]
    return "\n".join(lines) + "\n"


def render_alignment(summary: Summary, table: AlignmentTable) -> str:
    """AER and gold-attention mass per variant beside its BLEU, mean +- std over seeds, with each delta's test."""
    header = [
        "variant",
        "seeds",
        "BLEU avg",
        "AER",
        "delta AER",
        "p (Holm)",
        "gold attention",
        "delta gold",
        "p (Holm)",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    shown = shown_rows(summary)
    for row in shown:
        bleu = f"{row.average[0]:.2f}" if row.seeds == 1 else f"{row.average[0]:.2f} ± {row.average[1]:.2f}"
        cells = []
        for cell in table.cells[id(row)]:
            cells.append(f"{cell.mean:.3f}" if row.seeds == 1 else f"{cell.mean:.3f} ± {cell.std:.3f}")
            if cell.delta is not None:
                cells += [f"{cell.delta:+.3f}{cell.mark}", f"{cell.p_adjusted:.3g}"]
            else:
                cells += ["baseline" if row.is_baseline else "", ""]
        lines.append("| " + " | ".join([row.label, str(row.seeds), bleu, *cells]) + " |")
    lines += [
        "",
        f"Attention against the gold word alignments of {', '.join(table.sets)} ({sum(table.sizes.values())} "
        "sentences), with the reference forced through the decoder. AER: alignment error rate of each target "
        "word's most attended source word (Och & Ney 2003, gold links as sure and possible; lower is better). "
        "Gold attention: the mean attention weight on a target word's gold-linked source words (higher is "
        f"better). Deltas and p as for BLEU (the seeds' variance and {table.resamples} paired resamples of the "
        f"sentences; one seed a row: test-set variance only, no mark; Holm-corrected per column): {BETTER[0]} / "
        f"{BETTER[1]} better, {WORSE[0]} / {WORSE[1]} worse at p < 0.01 / 0.05.",
        *left_out_note(summary, shown),
    ]
    return "\n".join(lines) + "\n"


def pbt_schedule(record: TrialRecord) -> str | None:
    """A PBT trial's settings epoch by epoch, and where it copied another trial's weights; None for other trials."""
    keys = sorted(record.settings)
    if not keys:
        return None
    events = {int(e["epoch"]) + 1: e for e in record.pbt_events}
    histories = [record.settings[key] for key in keys]
    spans: list[list] = []  # [first epoch, last epoch, settings]
    for epoch in sorted(histories[0]):
        values = tuple(h.get(epoch) for h in histories)
        if spans and spans[-1][2] == values and epoch not in events:
            spans[-1][1] = epoch
        else:
            spans.append([epoch, epoch, values])
    cells = []
    for first, last, values in spans:
        setting = ", ".join(f"{k.removeprefix(SETTING_PREFIX)}={v:.3g}" for k, v in zip(keys, values))
        event = events.get(first)
        copied = f" (weights of trial {event['copied_from']} at epoch {event['epoch']})" if event else ""
        cells.append(f"epochs {first}-{last}: {setting}{copied}")
    return f"| {record.variant}-{record.trial_id} | {record.tags.get(EXPLOITS, '0')} | " + "<br>".join(cells) + " |"


def render_pbt_schedules(records: list[TrialRecord]) -> list[str]:
    """Each PBT trial's schedule as a section; none for a sweep without PBT."""
    rows = [row for row in map(pbt_schedule, sorted(records, key=lambda r: r.trial_id)) if row]
    if not rows:
        return []
    return [
        "## PBT schedules\n\nThe settings each trial trained with, epoch by epoch; an exploit copies a better "
        "trial's weights and perturbs its settings.\n\n| trial | exploits | schedule |\n|---|---|---|\n"
        + "\n".join(rows)
        + "\n"
    ]


def metric_header(table: MetricTable) -> list[str]:
    """The chrF and TER table's columns: per metric its test sets (with more than one), avg, and the test against
    the row's baseline."""
    sets = table.test_sets if len(table.test_sets) > 1 else []
    per_metric = [
        [*(f"{c.label} {s}" for s in sets), f"{c.label} avg", f"delta {c.label}", "95% CI", "p (Holm)"]
        for c in table.columns
    ]
    return ["variant", "seeds", "BLEU avg", *(cell for cells in per_metric for cell in cells)]


def metric_cells(row: VariantRow, table: MetricTable, plus_minus: str = "±") -> list[str]:
    """One row of the chrF and TER table, as metric_header orders it."""
    sets = table.test_sets if len(table.test_sets) > 1 else []
    cells = [row.label, str(row.seeds), mean_std(row, row.average, plus_minus)]
    for column in table.columns:
        tested = column.against_baseline(row)
        delta = "baseline" if row.is_baseline else "" if tested is None else f"{tested.delta:+.2f}{tested.mark}"
        cells += [mean_std(row, column.sets[id(row)][s], plus_minus) for s in sets]
        cells += [mean_std(row, column.average[id(row)], plus_minus), delta]
        cells += ["", ""] if tested is None else [interval(tested.interval), f"{tested.p_adjusted:.3g}"]
    return cells


def render_metrics(summary: Summary, table: MetricTable) -> str:
    """chrF and TER beside BLEU, each row against its baseline, then SACT's rows against their controls, and what
    the numbers are (the signatures) and how they were tested."""
    header, shown = metric_header(table), shown_rows(summary)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(metric_cells(row, table)) + " |" for row in shown]
    lines += metric_controls(table, {id(row) for row in shown})
    lines += ["", metric_note(table), *left_out_note(summary, shown)]
    return "\n".join(lines) + "\n"


def metric_controls(table: MetricTable, shown: set[int]) -> list[str]:
    """SACT's rows against their controls in chrF and TER (no lines without a control comparison)."""
    by_pair: dict[tuple[int, int], dict[str, Comparison]] = {}
    for column in table.columns:
        for c in column.against_controls():
            if id(c.row) in shown:
                by_pair.setdefault((id(c.row), id(c.against)), {})[column.name] = c
    if not by_pair:
        return []
    header = ["SACT", "control", *(f"{what} {c.label}" for c in table.columns for what in ("delta", "p (Holm)"))]
    lines = ["", "SACT against its controls in chrF and TER (as in the BLEU section):", ""]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for tests in by_pair.values():
        first = next(iter(tests.values()))
        cells = [first.row.label, first.against.label]
        for column in table.columns:
            c = tests.get(column.name)
            cells += ["", ""] if c is None else [f"{c.delta:+.2f}{c.mark}", f"{c.p_adjusted:.3g}"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def metric_note(table: MetricTable) -> str:
    """The footer: which chrF and TER (their signatures), and what each delta's test counts."""
    named = "; ".join(f"{c.label} `{c.signature}`" if c.signature else c.label for c in table.columns)
    lower = [c.label for c in table.columns if not c.higher_is_better]
    return (
        f"sacrebleu's {' and '.join(c.label for c in table.columns)} on the detokenised output against the raw "
        f"references BLEU was scored on, mean ± sample std over seeds ({named})."
        + (f" {', '.join(lower)} is an edit rate: lower is better." if lower else "")
        + " Deltas, 95% CI and p as for BLEU (the same test, on the same "
        f"{table.resamples} paired resamples of the test sentences: {table.method}), each metric Holm-corrected over "
        f"its own comparisons; {BETTER[0]} / {BETTER[1]} better, {WORSE[0]} / {WORSE[1]} worse at p < 0.01 / 0.05 "
        "(with one seed a row: test-set variance only, no mark). significance.margin's equivalence test is BLEU's."
    )


def render_metrics_csv(summary: Summary, table: MetricTable) -> str:
    """Every row's chrF and TER (mean, std per test set and on average) and each test against its baseline."""
    out = io.StringIO()
    writer = csv.writer(out)
    fields = ("delta", "mark", "p_value", "p_holm", "ci_low", "ci_high", "variance_counted")
    writer.writerow(
        [
            "variant",
            "seeds",
            *(
                f"{c.name}_{part}"
                for c in table.columns
                for part in (*(f"{s}_{x}" for s in table.test_sets for x in ("mean", "std")), "avg_mean", "avg_std")
                + fields
            ),
        ]
    )
    for row in summary.rows:
        cells: list = [row.label, row.seeds]
        for column in table.columns:
            cells += [f"{v:.4f}" for s in table.test_sets for v in column.sets[id(row)][s]]
            cells += [f"{v:.4f}" for v in column.average[id(row)]]
            cells += comparison_fields(column.against_baseline(row))
        writer.writerow(cells)
    return out.getvalue()


def comparison_fields(tested: Comparison | None) -> list:
    """A test's delta, mark, p, Holm's p, interval and what it counts, as the CSVs write them ("" for none)."""
    if tested is None:
        return [""] * 7
    low, high = tested.interval
    return [
        f"{tested.delta:.4f}",
        tested.mark,
        tested.p_value,
        tested.p_adjusted,
        f"{low:.4f}",
        f"{high:.4f}",
        tested.covers,
    ]


def render_metrics_latex(summary: Summary, table: MetricTable) -> str:
    shown = shown_rows(summary)
    rows = [metric_cells(row, table) for row in shown]
    return latex_tabular(metric_header(table), rows, metric_note(table), left_out_note(summary, shown))


def render_costs(summary: Summary, table: CostTable) -> str:
    """Each shown row's device-hours (its seeds summed, and a trial's), its BLEU and its BLEU per device-hour, and the
    summary's total."""
    unit = f"{table.device}-hours"
    header = ["variant", "seeds", unit, "a trial", "BLEU avg", f"BLEU per {table.device}-hour"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    shown = shown_rows(summary)
    for row in shown:
        cost = table.rows[id(row)]
        rate = cost.bleu_per_hour(row)
        cells = [row.label, str(row.seeds), f"{cost.device_hours:.3g}", f"{cost.per_trial:.3g}"]
        lines.append("| " + " | ".join([*cells, mean_std(row, row.average), "" if rate is None else f"{rate:.3g}"]))
        lines[-1] += " |"
    trials = sum(row.seeds for row in summary.rows)
    lines += [
        "",
        f"All {trials} trials of the tables: {table.total_hours:.3g} {unit}. A trial's device-hours are its wall time "
        "(training, dev and test decoding, over its restores) times the GPUs it held (resources.gpu, a share where "
        "trials are packed), else its CPU cores (resources.cpu); BLEU per device-hour is the row's mean test BLEU "
        "over a trial's mean device-hours. Trials left out of the tables are not counted here (results.parquet "
        "holds every trial's `device_s`, `sweeper status` the sweep's).",
        *left_out_note(summary, shown),
    ]
    return "\n".join(lines) + "\n"


def render_pareto(front: ParetoFront, figure: str | None) -> str:
    """The Pareto front as a table (each row's objectives, mean ± std over seeds, and its place), how a dominated row
    was tested, and the figure of the first two objectives (`figure`: its file, None where not drawn)."""
    names = [f"{o.metric} ({o.mode})" for o in front.objectives]
    header = ["variant", "seeds", *names, "place", "dominated by", "p (Holm)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for point in sorted(front.points, key=lambda p: (p.status != FRONT, p.row.label)):
        values = [
            f"{mean:.4g}" if point.row.seeds == 1 else f"{mean:.4g} ± {std:.2g}"
            for mean, std in zip(point.means, point.stds)
        ]
        by = ", ".join(f"`{row.label}`" for row in point.dominators)
        p = "" if point.p_adjusted is None else f"{point.p_adjusted:.3g}"
        lines.append("| " + " | ".join([point.row.label, str(point.row.seeds), *values, point.status, by, p]) + " |")
    lines += [
        "",
        "Each objective is a row's mean over its seeds of their best epoch's value, as the search ranked trials. "
        "A row is dominated by means where another is at least as good on every objective and better on one; it is "
        "marked dominated only where that is significant over seeds: an intersection-union test (each objective a "
        "one-sided Welch t-test over the two rows' seeds, the largest p; exact ties over every seed, as a parameter "
        "count, are no doubt), Bonferroni over its dominators, Holm over the rows dominated by means, p < 0.05. A row "
        "with one seed has no spread to test and is never marked.",
        *([f"Left out (a trial without an objective's value): {', '.join(front.left_out)}."] if front.left_out else []),
    ]
    if figure:
        lines += ["", f"![Pareto front]({figure})"]
    return "\n".join(lines) + "\n"


def render_convergence(rows: list) -> list[str]:
    """The convergence table (summary.checks.Convergence, #69 item 6): per row, the trials whose best dev BLEU and
    lowest dev loss came at their last epoch, and what their last epochs added; `converged` only by that measure."""
    if not rows:
        return []
    from sweeper.summary.checks import CONVERGED_RISE, CONVERGED_SHARE, LAST_EPOCHS

    lines = [
        "### Convergence, as measured\n",
        f"| row | best dev BLEU at the last epoch | lowest dev loss at the last epoch | dev BLEU over the last "
        f"{LAST_EPOCHS} epochs | reading |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        rise = "n/a" if row.rise is None else f"{row.rise:+.2f}"
        reading = "converged" if row.converged else f"not converged: an equal {row.budget}-epoch budget"
        lines.append(
            f"| {row.label} | {row.best_last} of {row.trials} | {row.loss_last} of {row.trials} | {rise} | {reading} |"
        )
    lines.append(
        f"\n`converged`: at most {CONVERGED_SHARE:.0%} of the row's trials had their best dev BLEU at their last "
        f"epoch, and their last {LAST_EPOCHS} epochs added at most {CONVERGED_RISE} BLEU on average.\n"
    )
    return ["\n".join(lines)]
