"""The papers' tables and figures from a finished sweep, read back from MLflow (never from trial memory).

- Findings first: mechanisms that degenerated (saturated attention, tau at a bound, a collapsed gate), dev
  curves still rising, SACT lambdas without a fixed-tau control (sweeper.findings).
- BLEU table (SACT Tables 1-2, Li & Zhu Table 1): a row per variant (seeds grouped), mean +- sample std,
  the paper-comparable multi-bleu, #params, time per epoch, delta to the baseline with a two-sided
  seed-averaged paired bootstrap, Holm-corrected (** / * better, †† / † worse), and what the sweep shows.
- Fixed-tau curve (SACT Figure 1), temperature heatmaps (Figure 2), sentinel words (Li & Zhu Table 2),
  and mean tau / gate for frequent (function) versus other (content) target words.
"""
from __future__ import annotations

import csv
import io
import json
import os
import statistics
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow.parquet as pq
import yaml
from mlflow.tracking import MlflowClient

from nmt_core import diagnostics
from nmt_core.config import ConfigError, build_config, scalar, set_dotted
from nmt_core.evaluate import HEAD_LABELS, AlignmentBootstrap, PairedBootstrap, SentenceBootstrap, holm
from nmt_core.train import PAPER_BLEU, bleu_options
from sweeper import findings, importance, plots
from sweeper.artifacts import read_alignment_stats
from sweeper.space import SignificanceSpec
from sweeper.tracking import EXPLOITS, NOTE, PBT_EVENTS, ROLE, SIGNATURE_TAGS, TRIAL_ID, VARIANT
from sweeper.trainable import SETTING_PREFIX

os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # one bar per file is noise here

SEED_KEY = "train.seed"
FREQUENT_WORDS = 50  # the target's most frequent words stand for function words (no stop-word lists yet)
SENTINEL_THRESHOLD = 0.9  # Li & Zhu Table 2
CURVES = ("bleu_dev", "epoch_time_s", *diagnostics.KEYS)  # per-epoch histories the findings read
BETTER, WORSE = ("**", "*"), ("††", "†")  # p < 0.01, p < 0.05 after Holm's correction


class SummaryError(ValueError):
    """A sweep that cannot be summarised; the message says why and what to do."""


@dataclass
class TrialRecord:
    run_id: str
    trial_id: str
    variant: str
    params: dict[str, str]
    metrics: dict[str, float]
    curves: dict[str, list[float]]  # per-epoch dev history (CURVES), in epoch order
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def epoch_time_s(self) -> float | None:
        times = self.curves.get("epoch_time_s")
        return statistics.fmean(times) if times else None

    @property
    def group(self) -> tuple:
        return tuple(sorted((k, v) for k, v in self.params.items() if k != SEED_KEY))

    @property
    def test_sets(self) -> list[str]:
        return sorted(k.removeprefix("bleu_test_") for k in self.metrics
                      if k.startswith("bleu_test_") and k != "bleu_test_avg")


@dataclass
class VariantRow:
    label: str
    records: list[TrialRecord]
    tests: dict[str, tuple[float, float]]  # set -> (mean, std) over seeds
    average: tuple[float, float]
    paper_average: tuple[float, float] | None  # multi-bleu (lowercased word-token BLEU), mean and std
    n_params: int
    epoch_time_s: float | None
    delta: float | None = None
    mark: str = ""
    p_value: float | None = None  # the paired bootstrap's, before correction
    p_adjusted: float | None = None  # Holm-corrected over all comparisons of the table
    is_baseline: bool = False

    @property
    def seeds(self) -> int:
        return len(self.records)


@dataclass
class Summary:
    rows: list[VariantRow]
    test_sets: list[str]
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # degenerate mechanisms, unconverged curves, missing controls
    method: str = ""  # the significance test as the footer names it
    signatures: dict[str, str] = field(default_factory=dict)  # metric name -> sacrebleu signature
    conclusion: str = ""  # what the sweep shows and what it cannot
    criteria: dict[str, str] = field(default_factory=dict)  # the settings that make a row a baseline


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single run)."""
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def find_parent(client: MlflowClient, name: str, run_id: str | None = None) -> tuple[str, str]:
    """The sweep's parent run: `run_id` when given (an older sweep of the same name), else the newest."""
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        known = sorted(e.name for e in client.search_experiments() if e.name != "Default")
        raise ConfigError("NAME", f"no sweep named {name!r} in {client.tracking_uri} (check --tracking-uri); "
                          f"sweeps there: {', '.join(known) or 'none'}", "sweeper summarize")
    parents = client.search_runs([experiment.experiment_id], filter_string=f"tags.`{ROLE}` = 'sweep'",
                                 order_by=["attributes.start_time DESC"], max_results=1000)
    if not parents:
        raise SummaryError(f"sweep {name!r} has no sweep run in this tracking store")
    if run_id is None:
        return experiment.experiment_id, parents[0].info.run_id
    if run_id not in {p.info.run_id for p in parents}:
        raise ConfigError("--run-id", f"{run_id} is not a sweep run of {name!r}; its sweep runs, newest first: "
                          + ", ".join(p.info.run_id for p in parents[:5]), "sweeper summarize")
    return experiment.experiment_id, run_id


def load_records(client: MlflowClient, experiment_id: str, parent_id: str,
                 objective: str = "bleu_dev") -> tuple[list[TrialRecord], Counter]:
    """The finished trials of one `sweeper run`, and how many trials were left out, by why."""
    runs = client.search_runs([experiment_id], max_results=5000,
                              filter_string=f"tags.`mlflow.parentRunId` = '{parent_id}' and tags.`{ROLE}` = 'trial'")
    records, left_out = [], Counter()
    for run in runs:
        if run.info.status != "FINISHED" or "bleu_test_avg" not in run.data.metrics:
            left_out[LEFT_OUT.get(run.info.status, "unfinished")] += 1
            continue
        curves = {}
        for key in dict.fromkeys((*CURVES, objective)):
            if key in run.data.metrics:
                latest = by_epoch(client, run.info.run_id, key)
                curves[key] = [latest[step] for step in sorted(latest)]
        records.append(TrialRecord(run.info.run_id, run.data.tags.get(TRIAL_ID, ""), run.data.tags.get(VARIANT, "?"),
                                   dict(run.data.params), dict(run.data.metrics), curves, dict(run.data.tags)))
    return records, left_out


def by_epoch(client: MlflowClient, run_id: str, key: str) -> dict[int, float]:
    """A metric's value per epoch; an epoch trained again (after a PBT exploit) is logged again, and its
    latest value counts."""
    history = sorted(client.get_metric_history(run_id, key), key=lambda m: (m.step, m.timestamp))
    return {m.step: m.value for m in history if m.step > 0}


LEFT_OUT = {"FAILED": "failed", "KILLED": "stopped early by the scheduler (no test BLEU)"}


def objective_of(record: TrialRecord, metric: str, mode: str) -> float | None:
    """The trial's objective as the search saw it: the best epoch's value of `metric`."""
    curve = record.curves.get(metric)
    if curve:
        return max(curve) if mode == "max" else min(curve)
    return record.metrics.get(metric)


def _matches(record: TrialRecord, criteria: dict[str, Any]) -> bool:
    return all(record.params.get(k) == str(v) for k, v in criteria.items())


DEFAULT_BASELINE = {"attention.temperature": "none", "attention.sentinel": "False"}


def choose_baseline(rows: list[VariantRow], row: VariantRow, criteria: dict[str, Any]) -> VariantRow | None:
    """The baseline row sharing the most settings with `row` (concat+sact is compared with concat+none)."""
    candidates = [r for r in rows if _matches(r.records[0], criteria)]
    if not candidates:
        return None
    mine = dict(row.records[0].group)
    return max(candidates, key=lambda c: sum(mine.get(k) == v for k, v in c.records[0].group))


def _short(value: str | None) -> str:
    try:
        return f"{float(value):.3g}"
    except (TypeError, ValueError):
        return str(value)


def distinguish(rows: list[VariantRow]) -> None:
    """Rows that share a variant label (random and Optuna sweeps vary more than attention) get the settings
    that tell them apart appended, e.g. `general+none (train.lr=0.00125)`."""
    by_label: dict[str, list[VariantRow]] = {}
    for row in rows:
        by_label.setdefault(row.label, []).append(row)
    for same in by_label.values():
        if len(same) < 2:
            continue
        settings = [dict(row.records[0].group) for row in same]
        differing = sorted(k for k in set().union(*settings) if len({s.get(k) for s in settings}) > 1)
        for row, setting in zip(same, settings):
            row.label += " (" + ", ".join(f"{k}={_short(setting.get(k))}" for k in differing) + ")"


def significance_mark(delta: float, p: float) -> str:
    marks = BETTER if delta > 0 else WORSE
    return marks[0] if p < 0.01 else marks[1] if p < 0.05 else ""


def compare_with_baselines(rows: list[VariantRow], criteria: dict[str, Any], value: Callable[[VariantRow], float],
                           test: SentenceBootstrap, scored: Callable[[VariantRow], tuple[float, Any]]
                           ) -> list[tuple[VariantRow, float, float, float]]:
    """(row, delta, p, Holm-adjusted p) of each row against its baseline on the same resampled sentences, the
    adjustment over all of the table's comparisons; `value` is the row's table number, `scored` its bootstrap."""
    scores: dict[int, tuple[float, Any]] = {}

    def of(row: VariantRow) -> tuple[float, Any]:  # each baseline is scored once, however many rows use it
        if id(row) not in scores:
            scores[id(row)] = scored(row)
        return scores[id(row)]

    compared = []
    for row in rows:
        base = choose_baseline(rows, row, criteria)
        if base is not None and base is not row:
            compared.append((row, value(row) - value(base), test.p_value(of(base), of(row))))
    adjusted = holm([p for _, _, p in compared])
    return [(row, delta, p, p_holm) for (row, delta, p), p_holm in zip(compared, adjusted)]


def test_significance(rows: list[VariantRow], criteria: dict[str, Any], test: PairedBootstrap,
                      translations: dict[str, dict[str, list[str]]]) -> list[VariantRow]:
    """Each row's BLEU against its baseline's; the rows compared, with their delta, p and mark set."""
    for row in rows:
        row.is_baseline = choose_baseline(rows, row, criteria) is row
    compared = compare_with_baselines(rows, criteria, lambda row: row.average[0], test,
                                      lambda row: test.scores([translations[r.run_id] for r in row.records]))
    for row, delta, p, adjusted in compared:
        row.delta, row.p_value, row.p_adjusted, row.mark = delta, p, adjusted, significance_mark(delta, adjusted)
    return [row for row, *_ in compared]


def seeds_phrase(rows: list[VariantRow]) -> str:
    counts = sorted({row.seeds for row in rows})
    n = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    return f"{n} seed{'s' if counts[-1] > 1 else ''}"


def build_summary(records: list[TrialRecord], translations: dict[str, dict[str, list[str]]],
                  references: dict[str, list[str]], baseline: dict[str, Any] | None = None,
                  bleu: dict[str, Any] | None = None, significance: SignificanceSpec | None = None) -> Summary:
    """The BLEU table; `translations[run_id][set]` and `references[set]` feed the paired bootstrap."""
    if not records:
        raise SummaryError("no finished trial with test BLEU in this sweep yet")
    significance = significance or SignificanceSpec()
    criteria = {k: str(v) for k, v in (baseline or DEFAULT_BASELINE).items()}
    test_sets = records[0].test_sets
    groups: dict[tuple, list[TrialRecord]] = {}
    for record in records:
        groups.setdefault(record.group, []).append(record)
    rows = []
    for members in groups.values():
        tests = {s: mean_std([r.metrics[f"bleu_test_{s}"] for r in members]) for s in test_sets}
        paper = [r.metrics[f"{PAPER_BLEU}_test_avg"] for r in members if f"{PAPER_BLEU}_test_avg" in r.metrics]
        times = [r.epoch_time_s for r in members if r.epoch_time_s is not None]
        rows.append(VariantRow(members[0].variant, members, tests, mean_std([r.metrics["bleu_test_avg"] for r in members]),
                               mean_std(paper) if len(paper) == len(members) else None,
                               int(members[0].metrics.get("n_params", 0)), statistics.fmean(times) if times else None))
    distinguish(rows)
    rows.sort(key=lambda r: (not _matches(r.records[0], criteria), r.label))
    summary = Summary(rows, test_sets, criteria=criteria)
    summary.signatures = {name: records[0].tags[tag] for name, tag in
                          (("BLEU", SIGNATURE_TAGS["bleu_signature"]), ("multi-bleu", SIGNATURE_TAGS[f"{PAPER_BLEU}_signature"]))
                          if records[0].tags.get(tag)}
    if not any(_matches(r.records[0], criteria) for r in rows):
        summary.notes.append("no baseline variant (" + ", ".join(f"{k}={v}" for k, v in criteria.items())
                             + ") in this sweep: deltas are left out")
        return summary
    test = PairedBootstrap(references, significance.resamples, **(bleu or {}))
    compared = test_significance(rows, criteria, test, translations)
    summary.method = (f"two-sided paired bootstrap over test sentences (sacrebleu --paired-bs semantics, +1 "
                      f"correction; each test set resampled on its own), {significance.resamples} resamples, each "
                      f"system's BLEU averaged over its seeds in every resample ({seeds_phrase(rows)} per row; seeds "
                      f"are never pooled as sentences), Holm-corrected over {len(compared)} comparison"
                      f"{'s' if len(compared) != 1 else ''}: {BETTER[0]} p < 0.01, {BETTER[1]} p < 0.05 better than "
                      f"the baseline, {WORSE[0]} p < 0.01, {WORSE[1]} p < 0.05 worse")
    base = next(r for r in rows if r.is_baseline)
    summary.conclusion = findings.what_it_shows(
        [r.label for r in compared if r.mark in BETTER], [r.label for r in compared if r.mark in WORSE],
        [r.label for r in compared if not r.mark], base.label, seeds_phrase(rows),
        sum(len(refs) for refs in references.values()), len(compared), [])
    return summary


def add_findings(summary: Summary) -> None:
    """Warnings from the dev diagnostics of every row, and the caveats they add to the conclusion."""
    histories = [history_of(row) for row in summary.rows]
    degenerate = [line for h in histories for line in findings.degenerate(h)]
    rising = [line for line in map(findings.still_rising, histories) if line]
    summary.warnings = degenerate + rising + findings.missing_controls(histories)
    caveats = []
    if rising:
        caveats.append(f"Training stopped while dev BLEU was still rising for {len(rising)} of {len(histories)} "
                       "variants (see the warnings and the dev curves): the ranking may not hold at convergence.")
    else:
        caveats.append("No variant's dev BLEU rose by more than 2% in its last epoch (dev curves below).")
    if degenerate:
        caveats.append("The variants flagged above did not work as their papers intend: their rows measure the "
                       "degenerate behaviour, not the method.")
    if summary.conclusion:
        summary.conclusion += "\n".join(caveats) + "\n"


def history_of(row: VariantRow) -> findings.VariantHistory:
    params = row.records[0].params
    lam, tau = (float(params[key]) if key in params else None for key in ("attention.lambda", "attention.tau"))
    curves = {key: [r.curves.get(key, []) for r in row.records] for key in CURVES}
    return findings.VariantHistory(row.label, params.get("attention.temperature", "none"), lam, tau,
                                   params.get("attention.sentinel") == "True", curves)


def _cells(row: VariantRow, test_sets: list[str], plus_minus: str) -> list[str]:
    def fmt(mean_and_std: tuple[float, float] | None) -> str:
        if mean_and_std is None:
            return ""
        mean, std = mean_and_std
        return f"{mean:.2f}" if row.seeds == 1 else f"{mean:.2f} {plus_minus} {std:.2f}"

    delta = "baseline" if row.is_baseline else "" if row.delta is None else f"{row.delta:+.2f}{row.mark}"
    time = "" if row.epoch_time_s is None else f"{row.epoch_time_s:.1f}"
    p = "" if row.p_adjusted is None else f"{row.p_adjusted:.3g}"  # 0.0499 stays below 0.05
    return [row.label, str(row.seeds), *(fmt(row.tests[s]) for s in test_sets), fmt(row.average),
            fmt(row.paper_average), f"{row.n_params / 1e6:.2f}M", time, delta, p]


def table_header(test_sets: list[str]) -> list[str]:
    return ["variant", "seeds", *test_sets, "avg", "multi-bleu avg", "#params", "s/epoch", "delta avg", "p (Holm)"]


def render_markdown(summary: Summary) -> str:
    lines = []
    if summary.warnings:
        lines += ["**Warnings: read these before the table.**", ""]
        lines += [f"- **{warning}**" for warning in summary.warnings] + [""]
    header = table_header(summary.test_sets)
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cells(row, summary.test_sets, "±")) + " |" for row in summary.rows]
    lines.append("")
    lines.append("BLEU: sacrebleu on the detokenised output against the raw reference text, mean ± sample std over "
                 "seeds" + (f" (`{summary.signatures['BLEU']}`)" if "BLEU" in summary.signatures else "") + ". "
                 "multi-bleu: lowercased BLEU of word tokens, as multi-bleu.perl computes the papers' numbers"
                 + (f" (`{summary.signatures['multi-bleu']}`)" if "multi-bleu" in summary.signatures else "") + ".")
    if summary.method:
        lines.append(f"delta avg: {summary.method}.")
    lines += [f"Note: {note}" for note in summary.notes]
    return "\n".join(lines) + "\n"


def render_csv(summary: Summary) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["variant", "seeds", *[f"{s}_{x}" for s in summary.test_sets for x in ("mean", "std")],
                     "avg_mean", "avg_std", "multibleu_avg_mean", "multibleu_avg_std", "n_params", "epoch_time_s",
                     "delta_avg", "mark", "p_value", "p_holm"])
    for row in summary.rows:
        paper = row.paper_average or ("", "")
        writer.writerow([row.label, row.seeds, *[f"{v:.4f}" for s in summary.test_sets for v in row.tests[s]],
                         f"{row.average[0]:.4f}", f"{row.average[1]:.4f}", *(f"{v:.4f}" if v != "" else v for v in paper),
                         row.n_params, "" if row.epoch_time_s is None else f"{row.epoch_time_s:.3f}",
                         "" if row.delta is None else f"{row.delta:.4f}", row.mark,
                         "" if row.p_value is None else row.p_value, "" if row.p_adjusted is None else row.p_adjusted])
    return out.getvalue()


def render_latex(summary: Summary) -> str:
    header = table_header(summary.test_sets)
    escape = str.maketrans({"_": r"\_", "+": r"{+}", "#": r"\#", "%": r"\%", "†": r"$^\dagger$"})
    lines = [r"\begin{tabular}{l" + "r" * (len(header) - 1) + "}", r"\toprule",
             " & ".join(h.translate(escape) for h in header) + r" \\", r"\midrule"]
    for row in summary.rows:
        cells = [c.translate(escape).replace("±", r"$\pm$") for c in _cells(row, summary.test_sets, "±")]
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


ALIGNMENT_METRICS = (("aer", "AER", False), ("gold_attention", "gold attention", True))  # (key, label, higher is better)


def alignment_sets(records: list[TrialRecord]) -> list[str]:
    """Test sets on which every trial scored its attention against gold word alignments."""
    return sorted(k.removeprefix("aer_") for k in records[0].metrics
                  if k.startswith("aer_") and all(k in r.metrics for r in records))


def render_alignment(summary: Summary, stats: dict[str, dict[str, np.ndarray]], significance: SignificanceSpec) -> str:
    """AER and gold-attention mass per variant beside its BLEU, mean +- std over seeds, each delta tested as BLEU is
    (seed-averaged paired bootstrap over the same test sentences, Holm-corrected over the table's comparisons).
    `stats[run_id][set]`: each trial's per-sentence ALIGNMENT_STATS."""
    sizes = {name: len(per_sentence) for name, per_sentence in next(iter(stats.values())).items()}
    sets = sorted(sizes)
    cells: dict[int, list[str]] = {id(row): [] for row in summary.rows}
    for key, _, higher in ALIGNMENT_METRICS:
        test = AlignmentBootstrap(sizes, key, significance.resamples)
        value = {id(row): mean_std([statistics.fmean(r.metrics[f"{key}_{s}"] for s in sets) for r in row.records])
                 for row in summary.rows}
        compared = compare_with_baselines(summary.rows, summary.criteria, lambda row: value[id(row)][0], test,
                                          lambda row: test.scores_of_stats([stats[r.run_id] for r in row.records]))
        tested = {id(row): (delta, p_holm) for row, delta, _, p_holm in compared}
        for row in summary.rows:
            mean, std = value[id(row)]
            cells[id(row)].append(f"{mean:.3f}" if row.seeds == 1 else f"{mean:.3f} ± {std:.3f}")
            if id(row) in tested:
                delta, p = tested[id(row)]
                cells[id(row)] += [f"{delta:+.3f}{significance_mark(delta if higher else -delta, p)}", f"{p:.3g}"]
            else:
                cells[id(row)] += ["baseline" if row.is_baseline else "", ""]
    header = ["variant", "seeds", "BLEU avg", "AER", "delta AER", "p (Holm)", "gold attention", "delta gold", "p (Holm)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in summary.rows:
        bleu = f"{row.average[0]:.2f}" if row.seeds == 1 else f"{row.average[0]:.2f} ± {row.average[1]:.2f}"
        lines.append("| " + " | ".join([row.label, str(row.seeds), bleu, *cells[id(row)]]) + " |")
    lines += ["", f"Attention against the gold word alignments of {', '.join(sets)} ({sum(sizes.values())} sentences), "
              "with the reference forced through the decoder. AER: alignment error rate of each target word's most "
              "attended source word (Och & Ney 2003, gold links as sure and possible; lower is better). Gold attention: "
              "the mean attention weight on a target word's gold-linked source words (higher is better). Deltas and "
              f"p as for BLEU ({significance.resamples} resamples over sentences, seeds averaged, Holm-corrected per "
              f"column): {BETTER[0]} / {BETTER[1]} better, {WORSE[0]} / {WORSE[1]} worse at p < 0.01 / 0.05."]
    return "\n".join(lines) + "\n"


def read_trace(client: MlflowClient, run_id: str, name: str, folder: Path):
    local = client.download_artifacts(run_id, f"traces/{name}.parquet", str(folder))
    return pq.read_table(local)


def token_stats(table, frequent: int = FREQUENT_WORDS) -> dict[str, Any]:
    """Mean tau and gate of the most frequent output words (function words) against the rest."""
    tokens = table.column("token").to_pylist()
    top = {w for w, _ in Counter(tokens).most_common(frequent)}
    out: dict[str, Any] = {}
    for column in ("tau", "sentinel"):
        values = table.column(column).to_pylist()
        if values and values[0] is not None:
            function = [v for w, v in zip(tokens, values) if w in top]
            content = [v for w, v in zip(tokens, values) if w not in top]
            out[column] = (statistics.fmean(function) if function else float("nan"),
                           statistics.fmean(content) if content else float("nan"))
    return out


def heads_heatmap(trace, path: Path, lam: float) -> bool:
    """A Transformer trace's tau per layer and head over dev sentence 0, drawn to path; False for other traces."""
    labels = (trace.schema.metadata or {}).get(HEAD_LABELS, b"").decode()
    rows = [(token, heads) for sent_id, token, heads in zip(*(trace.column(c).to_pylist()
                                                              for c in ("sent_id", "token", "tau_heads")))
            if sent_id == 0 and heads] if labels and "tau_heads" in trace.column_names else []
    if rows:
        plots.head_temperature_heatmap([t for t, _ in rows], [h for _, h in rows], labels.split(","), path, lam)
    return bool(rows)


def sentinel_words(table, threshold: float = SENTINEL_THRESHOLD, top: int = 15) -> list[tuple[str, int]]:
    tokens, gates = table.column("token").to_pylist(), table.column("sentinel").to_pylist()
    return Counter(w for w, g in zip(tokens, gates) if g is not None and g >= threshold).most_common(top)


def trial_config_of(record: TrialRecord):
    nested: dict[str, Any] = {}
    for key, value in record.params.items():
        if "." not in key:  # `variant`, logged beside the config
            continue
        set_dotted(nested, key, scalar(value))
    return build_config(nested)


def summarize(name: str, tracking_uri: str, out: Path, formats: list[str], resamples: int | None = None,
              run_id: str | None = None) -> Summary:
    """Write summary.md (+ csv / tex), figures, and log them to the sweep's parent run.

    Everything comes from MLflow: the trials' metrics and histories, their translations and the references
    they were scored against; no corpus is read.
    """
    client = MlflowClient(tracking_uri)
    experiment_id, parent_id = find_parent(client, name, run_id)
    parent = client.get_run(parent_id)
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        try:
            space = yaml.safe_load(Path(client.download_artifacts(parent_id, "space.yaml", tmp)).read_text()) or {}
        except Exception:  # an older sweep without space.yaml: default baseline
            space = {}
        objective = {"metric": "bleu_dev", "mode": "max", **(space.get("objective") or {})}
        records, left_out = load_records(client, experiment_id, parent_id, objective["metric"])
        if not records:
            raise SummaryError(f"sweep {name!r} has no finished trial with test BLEU yet (see `sweeper resume`)")
        significance = SignificanceSpec(**space.get("significance", {}))
        if resamples is not None:
            significance = SignificanceSpec(significance.method, resamples).check("sweeper summarize --resamples")
        test_sets = records[0].test_sets
        references = {s: _artifact_lines(client, records[0].run_id, f"references/{s}.txt", tmp_path / "refs")
                      for s in test_sets}
        translations = {r.run_id: {s: _artifact_lines(client, r.run_id, f"translations/{s}.txt", tmp_path / r.run_id)
                                   for s in test_sets} for r in records}
        summary = build_summary(records, translations, references, space.get("baseline"),
                                bleu_options(trial_config_of(records[0])), significance)
        add_findings(summary)
        out.mkdir(parents=True, exist_ok=True)
        if left_out:
            summary.notes.append(f"{sum(left_out.values())} trial(s) left out of every table and figure: "
                                 + ", ".join(f"{n} {why}" for why, n in left_out.items()))
        sections = [f"# Sweep `{name}`\n", f"MLflow parent run `{parent_id}` ({parent.info.status}); "
                    f"{len(records)} finished trials.\n", "## BLEU\n", render_markdown(summary)]
        aligned = alignment_sets(records)
        if aligned and any(row.is_baseline for row in summary.rows):
            stats = {r.run_id: {s: read_alignment_stats(Path(client.download_artifacts(
                r.run_id, f"alignment/{s}.tsv", str(tmp_path / r.run_id)))) for s in aligned} for r in records}
            sections += ["## Attention and word alignment\n", render_alignment(summary, stats, significance)]
        if summary.conclusion:
            sections.append("## What this sweep shows, and what it cannot\n\n" + summary.conclusion)
        sections += _figures(client, summary, out, tmp_path)
        sections += _importance(records, objective["metric"], objective["mode"], out)
        sections += _pbt_schedules(client, records, tmp_path)
        (out / "summary.md").write_text("\n".join(sections), encoding="utf-8")
        if "csv" in formats:
            (out / "bleu_table.csv").write_text(render_csv(summary), encoding="utf-8")
        if "latex" in formats:
            (out / "bleu_table.tex").write_text(render_latex(summary), encoding="utf-8")
    client.log_artifacts(parent_id, str(out), "summary")
    client.set_tag(parent_id, NOTE, f"# Sweep `{name}`\n\n" + render_markdown(summary)
                   + (f"\n{summary.conclusion}" if summary.conclusion else "")
                   + "\nFigures and the full summary: artifacts, summary/summary.md")
    return summary


def _pbt_schedules(client: MlflowClient, records: list[TrialRecord], tmp: Path) -> list[str]:
    """Each PBT trial's settings epoch by epoch, and where it copied another trial's weights."""
    rows = []
    for record in sorted(records, key=lambda r: r.trial_id):
        keys = sorted(k for k in record.metrics if k.startswith(SETTING_PREFIX))
        if not keys:
            continue
        events = {}
        if record.tags.get(EXPLOITS):
            local = client.download_artifacts(record.run_id, PBT_EVENTS, str(tmp / record.run_id))
            events = {int(e["epoch"]) + 1: e for e in json.loads(Path(local).read_text())}
        histories = [by_epoch(client, record.run_id, key) for key in keys]
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
        rows.append(f"| {record.variant}-{record.trial_id} | {record.tags.get(EXPLOITS, '0')} | "
                    + "<br>".join(cells) + " |")
    if not rows:
        return []
    return ["## PBT schedules\n\nThe settings each trial trained with, epoch by epoch; an exploit copies a better "
            "trial's weights and perturbs its settings.\n\n| trial | exploits | schedule |\n|---|---|---|\n"
            + "\n".join(rows) + "\n"]


def _importance(records: list[TrialRecord], metric: str, mode: str, out: Path) -> list[str]:
    """Parameter importance and parallel coordinates over every finished trial (seeds separately)."""
    points, varying = importance.trial_points([(f"{r.variant}-{r.trial_id}", r.params, objective_of(r, metric, mode))
                                               for r in records])
    result = importance.parameter_importance(points, varying, metric, mode)
    sections = ["## Parameter importance\n\n" + importance.render(result)]
    drawn = [p for p in points if p.objective is not None]
    if varying and drawn:
        plots.parallel_coordinates({k: [p.params[k] for p in drawn] for k in varying},
                                   [p.objective for p in drawn], f"best {metric}", out / "parallel_coordinates.png")
        missing = len(points) - len(drawn)
        sections.append(f"## Parallel coordinates ({len(drawn)} trials{f', {missing} without {metric}' if missing else ''})"
                        "\n\n![parallel coordinates](parallel_coordinates.png)\n")
    return sections


def _artifact_lines(client: MlflowClient, run_id: str, path: str, folder: Path) -> list[str]:
    try:
        local = client.download_artifacts(run_id, path, str(folder))
    except Exception as err:  # noqa: BLE001 - MLflow raises several types for a missing artifact
        raise SummaryError(f"run {run_id} has no {path} ({type(err).__name__}): it was made by an older version; "
                           "re-run the sweep") from None
    return Path(local).read_text(encoding="utf-8").splitlines()


def _figures(client: MlflowClient, summary: Summary, out: Path, tmp: Path) -> list[str]:
    """Fixed-tau curve, temperature heatmap, sentinel words and function/content tau, where the sweep has them."""
    plots.dev_curves([(row.label, [r.curves.get("bleu_dev", []) for r in row.records]) for row in summary.rows],
                     out / "dev_bleu_curves.png")
    sections = ["## Dev BLEU by epoch (mean over seeds; convergence)\n\n![dev curves](dev_bleu_curves.png)\n"]
    fixed = [r for r in summary.rows if r.records[0].params.get("attention.temperature") == "fixed"]
    sact = [r for r in summary.rows if r.records[0].params.get("attention.temperature") == "sact"]
    if fixed:
        best_sact = max(sact, key=lambda r: r.average[0]) if sact else None
        points = {float(r.records[0].params["attention.tau"]): r.average for r in fixed}
        baseline = next((r for r in summary.rows if r.is_baseline), None)
        if baseline is not None and baseline.records[0].params.get("attention.temperature") == "none":
            points.setdefault(1.0, baseline.average)  # no temperature is tau = 1 exactly
        plots.fixed_tau_curve([(tau, *average) for tau, average in points.items()],
                              best_sact.average if best_sact else None,
                              [out / "fixed_tau_curve.png", out / "fixed_tau_curve.svg"])
        sections.append("## Fixed temperature vs SACT (SACT Figure 1)\n\nThe baseline (no temperature) stands at "
                        "tau = 1. Mean ± std over seeds.\n\n![fixed tau](fixed_tau_curve.png)\n")
    if sact:
        best = max((rec for r in sact for rec in r.records), key=lambda rec: rec.metrics["bleu_test_avg"])
        dev = read_trace(client, best.run_id, "dev", tmp / "trace")
        sentences = {}
        for sent_id, token, tau in zip(*(dev.column(c).to_pylist() for c in ("sent_id", "token", "tau"))):
            if sent_id < 4:
                sentences.setdefault(sent_id, ([], []))
                sentences[sent_id][0].append(token)
                sentences[sent_id][1].append(tau)
        if sentences:
            plots.temperature_heatmap(list(sentences.values()), out / "temperature_heatmap.png",
                                      float(best.params["attention.lambda"]))
            sections.append(f"## Temperature heatmap (SACT Figure 2), best SACT trial `{best.variant}`\n\n"
                            "![tau heatmap](temperature_heatmap.png)\n")
        if heads_heatmap(dev, out / "temperature_heads.png", float(best.params["attention.lambda"])):
            sections.append(f"## Temperature per layer and head, best SACT trial `{best.variant}` (dev sentence 0)"
                            "\n\n![tau per head](temperature_heads.png)\n")
    stats_lines = []
    for row in summary.rows:
        params = row.records[0].params
        if params.get("attention.temperature") != "sact" and params.get("attention.sentinel") != "True":
            continue  # a constant temperature and no gate: nothing to compare
        record = max(row.records, key=lambda rec: rec.metrics["bleu_test_avg"])
        table = read_trace(client, record.run_id, summary.test_sets[0], tmp / "trace" / record.run_id)
        stats = token_stats(table)
        cells = [f"{stats[c][0]:.3f} / {stats[c][1]:.3f}" if c in stats else "" for c in ("tau", "sentinel")]
        stats_lines.append(f"| {row.label} | {cells[0]} | {cells[1]} |")
        if "sentinel" in stats:
            words = sentinel_words(table)
            sections.append(f"## Words with sentinel gate >= {SENTINEL_THRESHOLD} (Li & Zhu Table 2), `{row.label}`\n\n"
                            + ("| word | count |\n|---|---|\n" + "\n".join(f"| {w} | {n} |" for w, n in words)
                               if words else "none on this test set") + "\n")
    if stats_lines:
        sections.append(f"## Function vs content words ({summary.test_sets[0]})\n\nMean over output tokens: the "
                        f"{FREQUENT_WORDS} most frequent output words (function words) / the rest (content words).\n\n"
                        "| variant | tau | sentinel gate |\n|---|---|---|\n" + "\n".join(stats_lines) + "\n")
    return sections

