"""Grouping and statistics: a row per variant (seeds grouped), mean +- sample std, and each row's delta to its
baseline with a two-sided seed-averaged paired bootstrap, Holm-corrected (** / * better, †† / † worse); the same
test for attention against gold word alignments (AER, gold attention mass).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from nmt_core.evaluate import AlignmentBootstrap, PairedBootstrap, SentenceBootstrap, holm
from nmt_core.train import PAPER_BLEU
from sweeper import findings
from sweeper.metrics import SIGNATURE_TAGS
from sweeper.space import SignificanceSpec
from sweeper.summary.records import SummaryError, TrialRecord

BETTER, WORSE = ("**", "*"), ("††", "†")  # p < 0.01, p < 0.05 after Holm's correction


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
        rows.append(VariantRow(members[0].variant, members, tests,
                               mean_std([r.metrics["bleu_test_avg"] for r in members]),
                               mean_std(paper) if len(paper) == len(members) else None,
                               int(members[0].metrics.get("n_params", 0)), statistics.fmean(times) if times else None))
    distinguish(rows)
    rows.sort(key=lambda r: (not _matches(r.records[0], criteria), r.label))
    summary = Summary(rows, test_sets, criteria=criteria)
    summary.signatures = {name: records[0].tags[tag] for name, tag in
                          (("BLEU", SIGNATURE_TAGS["bleu_signature"]),
                           ("multi-bleu", SIGNATURE_TAGS[f"{PAPER_BLEU}_signature"]))
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


# (key, label, higher is better)
ALIGNMENT_METRICS = (("aer", "AER", False), ("gold_attention", "gold attention", True))


@dataclass
class AlignmentCell:
    """One row's number for one alignment metric: mean and std over seeds, and the test against its baseline."""

    mean: float
    std: float
    delta: float | None = None
    p_adjusted: float | None = None
    mark: str = ""


@dataclass
class AlignmentTable:
    sets: list[str]
    sizes: dict[str, int]  # test set -> sentences
    resamples: int
    cells: dict[int, list[AlignmentCell]]  # id(row) -> a cell per ALIGNMENT_METRICS


def alignment_table(summary: Summary, stats: dict[str, dict[str, np.ndarray]],
                    significance: SignificanceSpec) -> AlignmentTable:
    """AER and gold-attention mass per variant, each delta tested as BLEU is (seed-averaged paired bootstrap over the
    same test sentences, Holm-corrected over the column's comparisons). `stats[run_id][set]`: each trial's
    per-sentence ALIGNMENT_STATS."""
    sizes = {name: len(per_sentence) for name, per_sentence in next(iter(stats.values())).items()}
    sets = sorted(sizes)
    cells: dict[int, list[AlignmentCell]] = {id(row): [] for row in summary.rows}
    for key, _, higher in ALIGNMENT_METRICS:
        test = AlignmentBootstrap(sizes, key, significance.resamples)
        value = {id(row): mean_std([statistics.fmean(r.metrics[f"{key}_{s}"] for s in sets) for r in row.records])
                 for row in summary.rows}
        compared = compare_with_baselines(summary.rows, summary.criteria, lambda row: value[id(row)][0], test,
                                          lambda row: test.scores_of_stats([stats[r.run_id] for r in row.records]))
        tested = {id(row): (delta, p_holm) for row, delta, _, p_holm in compared}
        for row in summary.rows:
            cell = AlignmentCell(*value[id(row)])
            if id(row) in tested:
                cell.delta, cell.p_adjusted = tested[id(row)]
                cell.mark = significance_mark(cell.delta if higher else -cell.delta, cell.p_adjusted)
            cells[id(row)].append(cell)
    return AlignmentTable(sets, sizes, significance.resamples, cells)
