"""Grouping and statistics: a row per variant (seeds grouped), mean +- sample std, and the table's comparisons: each
row against its baseline and each SACT lambda against its fixed tau = lambda control, with the difference, its
95% bootstrap interval and a two-sided seed-averaged paired test (bootstrap or approximate randomization),
Holm-corrected over all of them (** / * better, †† / † worse); the bootstrap for attention against gold word
alignments (AER, gold attention mass).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nmt_core.evaluate import AlignmentBootstrap, ApproximateRandomization, PairedBootstrap, SentenceBootstrap, holm
from nmt_core.registry import TEMPERATURES, choices, is_adaptive
from nmt_core.train import PAPER_BLEU
from sweeper.metrics import SIGNATURE_TAGS
from sweeper.space import SignificanceSpec
from sweeper.summary.records import SummaryError, TrialRecord

BETTER, WORSE = ("**", "*"), ("††", "†")  # p < 0.01, p < 0.05 after Holm's correction
BASELINE, CONTROL = "baseline", "control"  # what a row is compared with
AR_INTERVAL_RESAMPLES = 1000  # the interval's bootstrap beside approximate randomization (sacrebleu's default)


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
    p_value: float | None = None  # the paired test's against the baseline, before correction
    p_adjusted: float | None = None  # Holm-corrected over all comparisons of the table
    interval: tuple[float, float] | None = None  # the delta's 95% bootstrap percentile interval
    is_baseline: bool = False

    @property
    def seeds(self) -> int:
        return len(self.records)


@dataclass
class Comparison:
    """One test of the table: `row` against `against` (its baseline, or for SACT its fixed tau = lambda control)."""

    row: VariantRow
    against: VariantRow
    kind: str  # BASELINE or CONTROL
    delta: float
    interval: tuple[float, float]  # 95% bootstrap percentile interval of the seed-averaged difference
    p_value: float
    p_adjusted: float = 1.0  # Holm over every comparison it was tested with
    mark: str = ""


@dataclass
class Summary:
    rows: list[VariantRow]
    test_sets: list[str]
    comparisons: list[Comparison] = field(default_factory=list)  # every test of the BLEU table, Holm-corrected
    sentences: int = 0  # test sentences the tests resample
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


def baselines_of(
    rows: list[VariantRow], criteria: dict[str, Any], of: list[VariantRow] | None = None
) -> dict[int, VariantRow]:
    """The baseline of each row of `of` (default: `rows`) by id(row): of the rows matching `criteria`, the one
    sharing the most settings with it (the first of a tie). Counted through a dict from each setting to the
    baselines holding it, skipping settings every baseline holds (they add the same to each): no scan of every
    (row, baseline) pair, which a 1,000-row random sweep has 250,000 of."""
    baselines = [r for r in rows if _matches(r.records[0], criteria)]
    holders: dict[tuple[str, str], list[int]] = {}
    for i, base in enumerate(baselines):
        for setting in base.records[0].group:
            holders.setdefault(setting, []).append(i)
    telling = {setting: np.array(held) for setting, held in holders.items() if len(held) < len(baselines)}
    chosen = {}
    for row in (rows if of is None else of) if baselines else []:
        shared = np.zeros(len(baselines), np.int64)
        for setting in row.records[0].group:
            if setting in telling:
                shared[telling[setting]] += 1
        chosen[id(row)] = baselines[int(shared.argmax())]  # argmax: the first of a tie
    return chosen


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


def temperature_keys() -> set[str]:
    """What a SACT row and its control may differ in: the temperature and every setting a temperature part owns
    (tau; lambda, sact_bias and the Transformer's sact_reading), and the variant label that names them."""
    choices()  # the registries, filled
    return {"attention.temperature", "variant", *(key for part in TEMPERATURES.values() for key in part.settings)}


def _beside_temperature(row: VariantRow, keys: set[str]) -> tuple:
    return tuple((k, v) for k, v in row.records[0].group if k not in keys)


def sact_controls(rows: list[VariantRow]) -> dict[int, VariantRow | None]:
    """Each SACT row's control by id(row): its fixed tau = lambda row with every other setting equal (is a gain
    adaptivity or a rescaling?), None where the sweep has none. One pass over the fixed-temperature rows, so finding
    controls stays linear."""
    keys = temperature_keys()
    fixed: dict[tuple, VariantRow] = {}
    for r in rows:
        params = r.records[0].params
        if params.get("attention.temperature") == "fixed":
            fixed.setdefault((float(params.get("attention.tau", "nan")), _beside_temperature(r, keys)), r)
    sact = [r for r in rows if is_adaptive(r.records[0].params.get("attention.temperature"))]
    return {
        id(row): fixed.get((float(row.records[0].params["attention.lambda"]), _beside_temperature(row, keys)))
        for row in sact
        if "attention.lambda" in row.records[0].params
    }


def pairs_of(rows: list[VariantRow], criteria: dict[str, Any]) -> list[tuple[VariantRow, VariantRow, str]]:
    """(row, what it is compared with, kind): each row against its baseline, each SACT row against its control."""
    baselines = baselines_of(rows, criteria)
    controls = sact_controls(rows)
    pairs = [(row, base, BASELINE) for row in rows if (base := baselines.get(id(row))) not in (None, row)]
    return pairs + [(row, control, CONTROL) for row in rows if (control := controls.get(id(row))) is not None]


def compare(
    pairs: list[tuple[VariantRow, VariantRow, str]],
    value: Callable[[VariantRow], float],
    bootstrap: SentenceBootstrap,
    stats_of: Callable[[VariantRow], list[dict[str, np.ndarray]]],
    randomization: ApproximateRandomization | None = None,
) -> list[Comparison]:
    """Each pair's delta of `value`, its bootstrap interval and p (the bootstrap's, or approximate randomization's
    where given), on the same resampled or shuffled sentences, Holm-corrected over all `pairs`; `stats_of` gives a
    row's per-seed, per-sentence statistics."""
    seen: dict[int, tuple[list[dict[str, np.ndarray]], tuple[float, np.ndarray]]] = {}

    def of(row: VariantRow) -> tuple[list[dict[str, np.ndarray]], tuple[float, np.ndarray]]:
        if id(row) not in seen:  # each row is scored once, however many comparisons use it; its statistics are
            stats = stats_of(row)  # kept only for the randomization (a 1,000-row sweep would hold them all)
            seen[id(row)] = (stats if randomization else []), bootstrap.scores_of_stats(stats)
        return seen[id(row)]

    compared = []
    for row, against, kind in pairs:
        (mine, scores), (theirs, base_scores) = of(row), of(against)
        p = randomization.p_value(theirs, mine) if randomization else bootstrap.p_value(base_scores, scores)
        compared.append(
            Comparison(row, against, kind, value(row) - value(against), bootstrap.interval(base_scores, scores), p)
        )
    for comparison, adjusted in zip(compared, holm([c.p_value for c in compared])):
        comparison.p_adjusted = adjusted
    return compared


def test_significance(
    rows: list[VariantRow],
    criteria: dict[str, Any],
    references: dict[str, list[str]],
    translations: dict[str, dict[str, list[str]]],
    significance: SignificanceSpec,
    bleu: dict[str, Any],
) -> list[Comparison]:
    """Every comparison of the BLEU table, marked; each row's against its baseline also set on the row."""
    baselines = baselines_of(rows, criteria)
    for row in rows:
        row.is_baseline = baselines.get(id(row)) is row
    randomization = significance.method == "approximate_randomization"
    bootstrap = PairedBootstrap(references, AR_INTERVAL_RESAMPLES if randomization else significance.resamples, **bleu)
    shuffles = (
        ApproximateRandomization(
            bootstrap, {name: len(refs) for name, refs in references.items()}, significance.resamples
        )
        if randomization
        else None
    )
    compared = compare(
        pairs_of(rows, criteria),
        lambda row: row.average[0],
        bootstrap,
        lambda row: bootstrap.stats([translations[r.run_id] for r in row.records]),
        shuffles,
    )
    for c in compared:
        c.mark = significance_mark(c.delta, c.p_adjusted)
        if c.kind == BASELINE:
            c.row.delta, c.row.p_value, c.row.p_adjusted, c.row.mark = c.delta, c.p_value, c.p_adjusted, c.mark
            c.row.interval = c.interval
    return compared


def method_text(significance: SignificanceSpec, rows: list[VariantRow], comparisons: list[Comparison]) -> str:
    """The footer's account of the test, the interval and the correction."""
    if significance.method == "approximate_randomization":
        test = (
            f"two-sided paired approximate randomization over test sentences (sacrebleu --paired-ar semantics, +1 "
            f"correction; each test set shuffled on its own), {significance.resamples} shuffles, seed k of a "
            f"system paired with seed k of the other and the pseudo-systems' BLEU averaged over the pairs"
        )
        resamples = AR_INTERVAL_RESAMPLES
    else:
        test = (
            f"two-sided paired bootstrap over test sentences (sacrebleu --paired-bs semantics, +1 correction; "
            f"each test set resampled on its own), {significance.resamples} resamples, each system's BLEU "
            f"averaged over its seeds in every resample"
        )
        resamples = significance.resamples
    controls = sum(c.kind == CONTROL for c in comparisons)
    family = f"{len(comparisons)} comparison{'s' if len(comparisons) != 1 else ''}" + (
        f" ({len(comparisons) - controls} against a baseline, {controls} SACT against its fixed tau = lambda control)"
        if controls
        else ""
    )
    return (
        f"{test} ({seeds_phrase(rows)} per row; seeds are never pooled as sentences), Holm-corrected over "
        f"{family}: {BETTER[0]} p < 0.01, {BETTER[1]} p < 0.05 better than the baseline (or control), {WORSE[0]} "
        f"p < 0.01, {WORSE[1]} p < 0.05 worse. 95% CI: the percentile interval (2.5th to 97.5th) of the "
        f"seed-averaged BLEU difference over {resamples} paired bootstrap resamples of the test sentences"
    )


def seeds_phrase(rows: list[VariantRow]) -> str:
    counts = sorted({row.seeds for row in rows})
    n = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    return f"{n} seed{'s' if counts[-1] > 1 else ''}"


def build_summary(
    records: list[TrialRecord],
    translations: dict[str, dict[str, list[str]]],
    references: dict[str, list[str]],
    baseline: dict[str, Any] | None = None,
    bleu: dict[str, Any] | None = None,
    significance: SignificanceSpec | None = None,
) -> Summary:
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
        rows.append(
            VariantRow(
                members[0].variant,
                members,
                tests,
                mean_std([r.metrics["bleu_test_avg"] for r in members]),
                mean_std(paper) if len(paper) == len(members) else None,
                int(members[0].metrics.get("n_params", 0)),
                statistics.fmean(times) if times else None,
            )
        )
    distinguish(rows)
    rows.sort(key=lambda r: (not _matches(r.records[0], criteria), r.label))
    summary = Summary(rows, test_sets, criteria=criteria)
    summary.signatures = {
        name: records[0].tags[tag]
        for name, tag in (
            ("BLEU", SIGNATURE_TAGS["bleu_signature"]),
            ("multi-bleu", SIGNATURE_TAGS[f"{PAPER_BLEU}_signature"]),
        )
        if records[0].tags.get(tag)
    }
    if not any(_matches(r.records[0], criteria) for r in rows):
        summary.notes.append(
            "no baseline variant ("
            + ", ".join(f"{k}={v}" for k, v in criteria.items())
            + ") in this sweep: deltas are left out"
        )
    summary.sentences = sum(len(refs) for refs in references.values())
    summary.comparisons = test_significance(rows, criteria, references, translations, significance, bleu or {})
    if summary.comparisons:
        summary.method = method_text(significance, rows, summary.comparisons)
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


def alignment_table(
    summary: Summary, stats: dict[str, dict[str, np.ndarray]], significance: SignificanceSpec
) -> AlignmentTable:
    """AER and gold-attention mass per variant, each delta tested as BLEU is (seed-averaged paired bootstrap over the
    same test sentences, Holm-corrected over the column's comparisons). `stats[run_id][set]`: each trial's
    per-sentence ALIGNMENT_STATS."""
    sizes = {name: len(per_sentence) for name, per_sentence in next(iter(stats.values())).items()}
    sets = sorted(sizes)
    cells: dict[int, list[AlignmentCell]] = {id(row): [] for row in summary.rows}
    pairs = [pair for pair in pairs_of(summary.rows, summary.criteria) if pair[2] == BASELINE]
    for key, _, higher in ALIGNMENT_METRICS:
        test = AlignmentBootstrap(sizes, key, significance.resamples)
        value = {
            id(row): mean_std([statistics.fmean(r.metrics[f"{key}_{s}"] for s in sets) for r in row.records])
            for row in summary.rows
        }
        compared = compare(
            pairs, lambda row, value=value: value[id(row)][0], test, lambda row: [stats[r.run_id] for r in row.records]
        )
        tested = {id(c.row): (c.delta, c.p_adjusted) for c in compared}
        for row in summary.rows:
            cell = AlignmentCell(*value[id(row)])
            if id(row) in tested:
                cell.delta, cell.p_adjusted = tested[id(row)]
                cell.mark = significance_mark(cell.delta if higher else -cell.delta, cell.p_adjusted)
            cells[id(row)].append(cell)
    return AlignmentTable(sets, sizes, significance.resamples, cells)
