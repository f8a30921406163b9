"""Grouping and statistics: a row per variant (seeds grouped), mean +- sample std over seeds, and the table's
comparisons: each row against its baseline and each SACT row against its controls (the learned temperature, and a
fixed tau at the scale SACT settled on), with the difference, its 95% interval and a two-sided test that counts the
seeds and the test sentences (nmt_core.training.evaluate.seed_sentence_test), Holm-corrected over all of them (** / *
better, †† / † worse); a row with one seed is tested on test-set variance only and carries no mark. The same for
attention against gold word alignments (AER, gold attention mass).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy.special import stdtr, stdtrit

from nmt_core.family.parts import Control
from nmt_core.family.registry import TEMPERATURES, choices, is_adaptive, parts_of
from nmt_core.training.diagnostic_keys import TAU_P50
from nmt_core.training.evaluate import (
    PAPER_BLEU,
    PLAIN,
    AlignmentBootstrap,
    ApproximateRandomization,
    PairedBootstrap,
    SeedSentenceTest,
    SentenceBootstrap,
    SystemScores,
    detectable,
    equivalence_p,
    holm,
    seed_sentence_test,
    seeds_to_detect,
)
from sweeper.design.sample_size import sigma_interval
from sweeper.space.spec import SIGNIFICANCE_TESTS, SignificanceSpec
from sweeper.summary.records import SEED_KEY, SummaryError, TrialRecord, typed_setting
from sweeper.tracking.metrics import SIGNATURE_TAGS
from sweeper.tracking.names import names_of

BETTER, WORSE = ("**", "*"), ("††", "†")  # p < 0.01, p < 0.05 after Holm's correction
BASELINE, CONTROL = "baseline", "control"  # what a row is compared with
LEARNED, FIXED = "learned", "fixed"  # a SACT row's two controls (Comparison.control)
SEEDS_AND_SENTENCES, TEST_SET_ONLY = "seeds + sentences", "test-set variance only"  # what a test's p and CI cover
TAU_SCALE = 1.2  # a fixed tau is a control at SACT's scale within this factor of the SACT row's median tau
ALPHA, POWER = 0.05, 0.8  # the design line: the difference the seeds run could detect, at Holm's level
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
    is_baseline: bool = False
    against_baseline: Comparison | None = None  # its test against its baseline (None: a baseline, or none found)

    @property
    def seeds(self) -> int:
        return len(self.records)

    @property
    def delta(self) -> float | None:
        return None if self.against_baseline is None else self.against_baseline.delta

    @property
    def mark(self) -> str:
        return "" if self.against_baseline is None else self.against_baseline.mark

    @property
    def p_value(self) -> float | None:
        """The test's p against the baseline, before correction."""
        return None if self.against_baseline is None else self.against_baseline.p_value

    @property
    def p_adjusted(self) -> float | None:
        """Holm-corrected over the comparisons of its family."""
        return None if self.against_baseline is None else self.against_baseline.p_adjusted

    @property
    def interval(self) -> tuple[float, float] | None:
        return None if self.against_baseline is None else self.against_baseline.interval


@dataclass
class Comparison:
    """One test of the table: `row` against `against` (its baseline, or one of a SACT row's controls)."""

    row: VariantRow
    against: VariantRow
    kind: str  # BASELINE or CONTROL
    delta: float
    interval: tuple[float, float] = (0.0, 0.0)  # 95%: t interval (seeds + sentences) or bootstrap percentiles
    p_value: float = 1.0
    p_adjusted: float = 1.0  # Holm over the comparisons of its family (seeds + sentences, or test set only)
    mark: str = ""  # only a seed-aware test marks
    control: str = ""  # LEARNED or FIXED where it answers a SACT row's control question (a baseline one may too)
    test: SeedSentenceTest | None = None  # the seed-aware test; None: test-set variance only
    alpha: float | None = None  # the level Holm gave it (a seed-aware test, not significant)
    detectable: float | None = None  # the least true difference its seeds detect with POWER at `alpha`
    equivalence_p: float | None = None  # two one-sided tests at significance.margin (set: a margin)
    margin: float | None = None
    power: str = ""  # those, in words (power_line)

    @property
    def covers(self) -> str:
        return TEST_SET_ONLY if self.test is None else SEEDS_AND_SENTENCES


@dataclass
class TauScale:
    """Where a row's temperature settled: each seed's median tau over dev tokens (tau_p50) at its best epoch, the
    epoch whose weights were tested."""

    seeds: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.seeds)

    def text(self) -> str:
        """`0.52 (seeds 0.48-0.55, std 0.03)`: the median over seeds and the per-seed medians' range and std."""
        if len(self.seeds) == 1:
            return f"{self.seeds[0]:.2f} (1 seed)"
        return (
            f"{self.median:.2f} (seeds {min(self.seeds):.2f}-{max(self.seeds):.2f}, "
            f"std {statistics.stdev(self.seeds):.2f})"
        )


@dataclass
class SactControls:
    """A SACT row's temperature scale and its controls: the learned-temperature row of equal other settings (the
    same lambda), and the fixed tau nearest its median tau, within a factor TAU_SCALE of it (None: no such row)."""

    scale: TauScale | None
    learned: VariantRow | None = None
    fixed: VariantRow | None = None
    fixed_tau: float | None = None  # the fixed control's tau (1 for a row without temperature)
    nearest_tau: float | None = None  # the fixed tau nearest the scale, also when it is too far to be a control


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
    criteria: dict[str, Any] = field(default_factory=dict)  # the settings that make a row a baseline
    controls: dict[int, SactControls] = field(default_factory=dict)  # id(SACT row) -> its scale and controls
    method_name: str = ""  # significance.method's test in a line (SIGNIFICANCE_TESTS)
    design: list[Any] = field(default_factory=list)  # a designed sweep's primary comparisons (summary.sequential)
    design_changed: bool = False  # its design differs from the one frozen when it started: no verdict
    convergence: list[Any] = field(default_factory=list)  # each row's, as measured (summary.checks.Convergence)
    metric_table: Any = None  # chrF and TER beside BLEU, where logged (a sweeper.summary.metric_table.MetricTable)
    pareto: Any = None  # several objectives: the rows' Pareto front (a sweeper.summary.pareto.ParetoFront)


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single run)."""
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def seed_interval(row: VariantRow, level: float = 0.95) -> tuple[float, float]:
    """The 95% interval of a row's mean BLEU over its seeds, mean ± t_{n-1} * std / sqrt(n): what another set of
    seeds could give (the mean itself for one seed)."""
    (mean, std), n = row.average, row.seeds
    half = float(stdtrit(n - 1, (1 + level) / 2)) * std / math.sqrt(n) if n > 1 else 0.0
    return mean - half, mean + half


def objective_of(record: TrialRecord, metric: str, mode: str) -> float | None:
    """The trial's objective as the search saw it: the best epoch's value of `metric`."""
    curve = record.curves.get(metric)
    if curve:
        return max(curve) if mode == "max" else min(curve)
    return record.metrics.get(metric)


def _matches(record: TrialRecord, criteria: dict[str, Any]) -> bool:
    """Whether the trial has each setting of `criteria` active, at that value (typed: 1 and 1.0 are one tau)."""
    return all(k in record.active and record.active[k] == v for k, v in criteria.items())


DEFAULT_BASELINE = {"attention.temperature": "none", "attention.sentinel": False}


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


def settings_text(settings: dict[str, Any], keys: list[str]) -> str:
    """`train.lr=0.002, model.dropout=0.3`: the settings a row's label appends."""
    return ", ".join(f"{k}={_short(settings.get(k))}" for k in keys)


def chosen_values(record: TrialRecord) -> str:
    """The values chosen for a row on its objective (`summarize --choose`), shown in its label, e.g.
    `general+none (train.lr=0.002 chosen)`: rows at different rates share one table, so each row says its own."""
    if not record.tuned:
        return ""
    return " (" + settings_text(record.params, sorted(record.tuned)) + " chosen)"


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
            row.label += " (" + settings_text(setting, differing) + ")"


def significance_mark(delta: float, p: float) -> str:
    marks = BETTER if delta > 0 else WORSE
    return marks[0] if p < 0.01 else marks[1] if p < 0.05 else ""


def temperature_keys() -> set[str]:
    """What a SACT row and its control may differ in: the temperature and every setting a temperature part owns
    (tau; lambda, sact_bias and the Transformer's sact_reading), and the variant label that names them."""
    choices()  # the registries, filled
    return {"attention.temperature", "variant", *(key for part in TEMPERATURES.values() for key in part.settings)}


def beside_temperature(row: VariantRow, keys: set[str]) -> tuple:
    """Every setting of the row but its temperature's (temperature_keys)."""
    return tuple((k, v) for k, v in row.records[0].group if k not in keys)


def tau_scale(row: VariantRow) -> TauScale | None:
    """The row's TauScale from its seeds' dev diagnostics; None where no seed logged tau_p50 (an older sweep)."""
    medians = [
        curve[tested_epoch(record, len(curve)) - 1] for record in row.records if (curve := record.curves.get(TAU_P50))
    ]
    return TauScale(medians) if medians else None


def tested_epoch(record: TrialRecord, epochs: int) -> int:
    """The epoch whose weights were tested (1-based): the trial's best_epoch, else its first best dev BLEU (as
    training keeps it), else its last of `epochs`."""
    best, bleu = int(record.metrics.get("best_epoch", 0)), record.curves.get("bleu_dev", [])
    if 0 < best <= epochs:
        return best
    return bleu.index(max(bleu)) + 1 if len(bleu) == epochs else epochs


def at_scale(tau: float, scale: TauScale) -> bool:
    """Whether a constant temperature `tau` is within a factor TAU_SCALE of the scale's median tau."""
    return abs(math.log(tau / scale.median)) <= math.log(TAU_SCALE) + 1e-12


def fixed_tau_of(row: VariantRow) -> float | None:
    """The constant temperature of a row: its attention.tau when fixed, 1 without a temperature (the same maths)."""
    attention = row.records[0].config.attention
    if attention.temperature == "fixed":
        return attention.tau
    return 1.0 if attention.temperature == "none" else None


def declared(row: VariantRow, name: str = "", at_scale: bool = False) -> Control | None:
    """The control `name` (or the at-scale one) that a part of the row declares (nmt_core.family.parts.Control)."""
    controls = (c for part in parts_of(row.records[0].config.attention) for c in part.controls)
    return next((c for c in controls if (c.at_scale if at_scale else c.name == name)), None)


def sact_controls(rows: list[VariantRow]) -> dict[int, SactControls]:
    """Each adaptive temperature row's scale and controls by id(row). SACT without its input is the control that asks
    "adaptivity or rescaling?": the `learned` temperature row its temperature declares (the same lambda and base
    scale, or any lambda where it asks only for a per-head constant) with every other setting equal, and where it
    declares one, the fixed tau (a row without temperature is tau = 1) with every other setting equal nearest its
    median tau, if within a factor TAU_SCALE of it. One pass over the other rows, so finding controls stays linear."""
    keys = temperature_keys()
    learned: dict[tuple, VariantRow] = {}
    fixed: dict[tuple, list[tuple[float, VariantRow]]] = {}
    for r in rows:
        attention, beside = r.records[0].config.attention, beside_temperature(r, keys)
        if attention.temperature == LEARNED:
            learned.setdefault((attention.lambda_, attention.sact_base, beside), r)
            learned.setdefault((None, None, beside), r)  # for a row that asks for any lambda
        elif (tau := fixed_tau_of(r)) is not None:
            fixed.setdefault(beside, []).append((tau, r))
    found = {}
    for row in rows:
        attention = row.records[0].config.attention
        if not is_adaptive(attention.temperature):
            continue
        beside, scale = beside_temperature(row, keys), tau_scale(row)
        wanted = declared(row, LEARNED)
        want = wanted.settings(attention) if wanted else {}
        learned_row = learned.get((want.get("lambda"), want.get("sact_base"), beside)) if want else None
        controls = SactControls(scale, learned_row)
        wants_scale = scale is not None and declared(row, at_scale=True) is not None
        candidates = [(abs(math.log(t / scale.median)), t, r) for t, r in fixed.get(beside, [])] if wants_scale else []
        if candidates:
            _, tau, nearest = min(candidates, key=lambda candidate: candidate[:2])
            controls.nearest_tau = tau
            if at_scale(tau, scale):
                controls.fixed, controls.fixed_tau = nearest, tau
        found[id(row)] = controls
    return found


def owned(row: VariantRow) -> set[str]:
    """The settings the row's parts own (what a control row may leave free: a learned control's lambda)."""
    return {key for part in parts_of(row.records[0].config.attention) for key in part.settings}


def is_control(row: VariantRow, candidate: VariantRow, control: Control) -> bool:
    """Whether `candidate` is the row's `control`: it has the attention settings the control names (from the row's),
    and every other setting it logged equal, as values, but those the two rows' parts own (and seeds, and settings
    chosen per row on dev)."""
    want = {f"attention.{key}": value for key, value in control.settings(row.records[0].config.attention).items()}
    flat = candidate.records[0].config.flat()
    if candidate is row or any(flat[key] != value for key, value in want.items()):
        return False
    free = {SEED_KEY, *want, *owned(row), *owned(candidate), *row.records[0].tuned, *candidate.records[0].tuned}

    def rest(r: VariantRow) -> dict[str, Any]:
        return {key: value for key, value in r.records[0].active.items() if key not in free}

    return rest(row) == rest(candidate)


SACT_QUESTION = (LEARNED, FIXED)  # the controls sact_controls finds (adaptive temperatures: their scale too)


def declared_controls(rows: list[VariantRow]) -> list[tuple[VariantRow, VariantRow, str]]:
    """(row, control row, control name) for every control a row's parts declare that another row of the sweep is,
    beside the adaptive temperatures' learned and fixed ones (sact_controls): SSMax against the fixed log-n scaling
    and no scaling, soft-capping against none, learned-alpha entmax against its fixed alpha and softmax, and so on.
    A decoding-only part's control is its own checkpoints decoded plainly, not a row (`plain_decoding_rows`)."""
    found = []
    for row in rows:
        adaptive = is_adaptive(row.records[0].config.attention.temperature)
        for part in parts_of(row.records[0].config.attention):
            for control in part.controls:
                if control.at_scale or control.same_checkpoint or (adaptive and control.name in SACT_QUESTION):
                    continue
                match = next((other for other in rows if is_control(row, other, control)), None)
                if match is not None:
                    found.append((row, match, control.name))
    return found


@dataclass(frozen=True)
class PlainDecoding:
    """A row with a decoding-only part against its own checkpoints decoded without it (its declared control), paired
    per checkpoint: each seed's test average with the part minus without."""

    row: VariantRow
    deltas: list[float]
    with_part: float  # mean over seeds of bleu_test_avg
    plain: float  # of plain_bleu_test_avg

    @property
    def p_value(self) -> float | None:
        """Two-sided paired t-test over the seeds (None under two seeds; 1 where every difference is 0)."""
        n = len(self.deltas)
        if n < 2:
            return None
        spread = statistics.stdev(self.deltas)
        if spread == 0:
            return 1.0 if statistics.fmean(self.deltas) == 0 else 0.0
        t = statistics.fmean(self.deltas) / (spread / math.sqrt(n))
        return float(2 * stdtr(n - 1, -abs(t)))


def plain_decoding(row: VariantRow) -> PlainDecoding | None:
    """The row against its plainly decoded checkpoints, where its seeds logged both (None elsewhere)."""
    key = f"{PLAIN}bleu_test_avg"
    pairs = [(r.metrics["bleu_test_avg"], r.metrics[key]) for r in row.records if key in r.metrics]
    pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
    if not pairs:
        return None
    deltas = [a - b for a, b in pairs]
    return PlainDecoding(row, deltas, statistics.fmean(a for a, _ in pairs), statistics.fmean(b for _, b in pairs))


def pairs_of(
    rows: list[VariantRow], criteria: dict[str, Any], controls: dict[int, SactControls] | None = None
) -> list[tuple[VariantRow, VariantRow, str, str]]:
    """(row, what it is compared with, kind, control): each row against its baseline, each SACT row against its
    learned and fixed controls (`controls`, default: sact_controls), each row against the controls its parts declare
    (`declared_controls`). A control that is also the row's baseline (SACT settled near tau = 1) is one comparison,
    tested once, that answers both."""
    baselines = baselines_of(rows, criteria)
    controls = sact_controls(rows) if controls is None else controls
    pairs = {
        (id(row), id(base)): [row, base, BASELINE, ""]
        for row in rows
        if (base := baselines.get(id(row))) not in (None, row)
    }
    for row in rows:
        found = controls.get(id(row))
        for control, against in ((LEARNED, found and found.learned), (FIXED, found and found.fixed)):
            if against is not None:
                pairs.setdefault((id(row), id(against)), [row, against, CONTROL, ""])[3] = control
    for row, against, control in declared_controls(rows):
        pairs.setdefault((id(row), id(against)), [row, against, CONTROL, ""])[3] = control
    return [tuple(pair) for pair in pairs.values()]


def compare(
    pairs: list[tuple[VariantRow, VariantRow, str, str]],
    seed_values: Callable[[VariantRow], list[float]],
    bootstrap: SentenceBootstrap,
    stats_of: Callable[[VariantRow], list[dict[str, np.ndarray]]],
    randomization: ApproximateRandomization | None = None,
) -> list[Comparison]:
    """Each pair's delta of the seed-averaged `seed_values` (a row's number per seed, as the table prints its mean
    and std) with its interval and p on the same resampled sentences: seed_sentence_test where both rows have 2
    seeds or more, its seed level from `seed_values`; else (one seed, or approximate randomization) test-set
    variance only, from the bootstrap's own scores (sacrebleu's numbers). Holm-corrected within each of the two
    families; `stats_of` gives a row's per-seed, per-sentence statistics."""
    seen: dict[int, tuple[list[dict[str, np.ndarray]], SystemScores]] = {}

    def of(row: VariantRow) -> tuple[list[dict[str, np.ndarray]], SystemScores]:
        if id(row) not in seen:  # each row is scored once, however many comparisons use it; its statistics are
            stats = stats_of(row)  # kept only for the randomization (a 1,000-row sweep would hold them all)
            seen[id(row)] = (stats if randomization else []), bootstrap.scores_of_stats(stats)
        return seen[id(row)]

    compared = []
    for row, against, kind, control in pairs:
        (mine, scores), (theirs, base_scores) = of(row), of(against)
        values, base_values = np.array(seed_values(row)), np.array(seed_values(against))
        comparison = Comparison(row, against, kind, float(values.mean() - base_values.mean()), control=control)
        if randomization is None and min(scores.seeds, base_scores.seeds) >= 2:
            comparison.test = seed_sentence_test(
                SystemScores(base_values, base_scores.resampled), SystemScores(values, scores.resampled)
            )
            comparison.p_value, comparison.interval = comparison.test.p_value, comparison.test.interval
        else:
            comparison.interval = bootstrap.interval(base_scores, scores)
            comparison.p_value = (
                randomization.p_value(theirs, mine) if randomization else bootstrap.p_value(base_scores, scores)
            )
        compared.append(comparison)
    for family in (SEEDS_AND_SENTENCES, TEST_SET_ONLY):
        members = [c for c in compared if c.covers == family]
        for comparison, adjusted in zip(members, holm([c.p_value for c in members])):
            comparison.p_adjusted = adjusted
    return compared


def holm_levels(p_values: list[float], alpha: float = ALPHA) -> list[float]:
    """The level Holm's step-down compares each p with: alpha / (m - k + 1) for the k-th smallest of m (ties in
    their order)."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    levels = [alpha] * len(p_values)
    for rank, i in enumerate(order):
        levels[i] = alpha / (len(p_values) - rank)
    return levels


def mark_and_power(comparisons: list[Comparison], higher_is_better: bool = True, margin: float | None = None) -> None:
    """Marks from the seed-aware tests only, and for each of them that is not significant what its seeds could
    detect (80% power at the level Holm gave it) and, with a `margin`, its equivalence test (docs/statistics.md)."""
    aware = [c for c in comparisons if c.test is not None]
    for c, level in zip(aware, holm_levels([c.p_value for c in aware])):
        c.mark = significance_mark(c.delta if higher_is_better else -c.delta, c.p_adjusted)
        if not c.mark:
            c.alpha, c.detectable = level, detectable(c.test, level, POWER)
            if margin is not None:
                c.margin, c.equivalence_p = margin, equivalence_p(c.test, margin)
            c.power = power_line(c)


def power_line(comparison: Comparison) -> str:
    """What a non-significant seed-aware comparison can claim: the least difference its seeds could detect, and
    with a margin whether the two rows are shown equivalent within it."""
    line = (
        f"these seeds detect a true difference of {comparison.detectable:.2f} or more "
        f"({POWER:.0%} power at alpha {comparison.alpha:.2g}, Holm's level)"
    )
    if comparison.margin is None:
        return line
    verdict = "equivalent" if comparison.equivalence_p < comparison.alpha else "not shown equivalent"
    return line + f"; {verdict} within ±{comparison.margin:g} (TOST p {comparison.equivalence_p:.3g})"


def planning_line(comparison: Comparison, difference: float, family: int, most: int = 100) -> str:
    """A planning figure for the next study, from this comparison's variances: seeds a row to detect `difference`
    with POWER at ALPHA over a `family` of comparisons (Holm's strictest step: every comparison may need it)."""
    alpha = ALPHA / max(family, 1)
    n = seeds_to_detect(comparison.test, difference, alpha, POWER, most)
    where = f"{POWER:.0%} power at alpha {alpha:.2g}"
    if n is None:
        return f"more than {most} seeds a row to detect {difference:g} ({where}): the test set's shared part limits it"
    low, high = (
        seeds_to_detect(seeds_scaled(comparison.test, factor), difference, alpha, POWER, most)
        for factor in seed_variance_interval(comparison.test)
    )
    spread = f"{low or f'>{most}'}-{high or f'>{most}'}"
    return f"{n} seeds a row to detect {difference:g} ({where}; {spread} over the seed variance's 80% interval)"


def seed_variance_interval(test: SeedSentenceTest, level: float = 0.8) -> tuple[float, float]:
    """The factors by which the seeds' variance may be off: the `level` chi-square interval of a variance pooled
    over both rows' seeds (n_A + n_B - 2 df), as sweeper.design.sample_size gives sigma's."""
    df = sum(test.seeds) - 2
    low, high = sigma_interval(1.0, df, level)
    return low**2, high**2


def seeds_scaled(test: SeedSentenceTest, factor: float) -> SeedSentenceTest:
    """The test with both rows' seed variances times `factor` (the shared sentence part as measured)."""
    return replace(test, seed_variances=tuple(v * factor for v in test.seed_variances))


class TrialStatistics:
    """Each trial's per-sentence BLEU statistics by test set, extracted once and kept for the whole summary: a
    designed sweep's looks resample the same trials' statistics as the BLEU table's tests, and sacrebleu's extraction
    costs far more than the resampling. Kept only where both read them (a designed sweep: its rows times its seeds);
    the table's tests alone extract each row's once and keep none (compare)."""

    def __init__(self, bootstrap: PairedBootstrap, translations: dict[str, dict[str, list[str]]]):
        self.bootstrap, self.translations = bootstrap, translations
        self.extracted: dict[str, dict[str, np.ndarray]] = {}

    def of(self, records: list[TrialRecord]) -> list[dict[str, np.ndarray]]:
        """The statistics of each record's trial, in the records' order."""
        for record in records:
            if record.run_id not in self.extracted:
                self.extracted[record.run_id] = self.bootstrap.stats([self.translations[record.run_id]])[0]
        return [self.extracted[record.run_id] for record in records]


def test_significance(
    rows: list[VariantRow],
    criteria: dict[str, Any],
    references: dict[str, list[str]],
    translations: dict[str, dict[str, list[str]]],
    significance: SignificanceSpec,
    bleu: dict[str, Any],
    controls: dict[int, SactControls],
    extracted: TrialStatistics | None = None,
) -> list[Comparison]:
    """Every comparison of the BLEU table, marked; each row's against its baseline also set on the row. The rows'
    sentence statistics come from `extracted` where the summary keeps them."""
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

    def stats_of(row: VariantRow) -> list[dict[str, np.ndarray]]:
        if extracted:
            return extracted.of(row.records)
        return bootstrap.stats([translations[r.run_id] for r in row.records])

    compared = compare(
        pairs_of(rows, criteria, controls),
        lambda row: [r.metrics["bleu_test_avg"] for r in row.records],
        bootstrap,
        stats_of,
        shuffles,
    )
    mark_and_power(compared, margin=significance.margin)
    for c in compared:
        if c.kind == BASELINE:
            c.row.against_baseline = c
    return compared


def method_text(significance: SignificanceSpec, rows: list[VariantRow], comparisons: list[Comparison]) -> str:
    """The footer's account of the tests, the intervals and the correction: what each p and interval counts."""
    aware = [c for c in comparisons if c.test is not None]
    only = len(comparisons) - len(aware)
    parts = []
    if aware:
        parts.append(
            f"{SEEDS_AND_SENTENCES} ({len(aware)} comparison{'s' if len(aware) != 1 else ''}{family_of(aware)}): a "
            "two-level test of the seed-averaged difference, its variance Welch's s^2/n over each row's seeds plus "
            "the system x sentence part every seed of a row shares (which s^2 does not hold), read off "
            f"{significance.resamples} paired bootstrap resamples of the test sentences (the same for every system "
            "and seed; each test set on its own), t-referenced with Satterthwaite degrees of freedom (the seeds' "
            "part at its median-unbiased value, the shared part with its resampling variance; docs/statistics.md); "
            "95% CI: delta ± t * SE; Holm-corrected over these comparisons: "
            f"{BETTER[0]} p < 0.01, {BETTER[1]} p < 0.05 better than the baseline (or control), {WORSE[0]} p < 0.01, "
            f"{WORSE[1]} p < 0.05 worse"
        )
    if only:
        why = "approximate randomization" if significance.method == "approximate_randomization" else "one seed a row"
        if significance.method == "approximate_randomization":
            test = (
                f"two-sided paired approximate randomization over test sentences (sacrebleu --paired-ar semantics, "
                f"+1 correction), {significance.resamples} shuffles, seed k of a system paired with seed k of the "
                "other; 95% CI: the percentile interval of the seed-averaged difference over "
                f"{AR_INTERVAL_RESAMPLES} paired bootstrap resamples"
            )
        else:
            test = (
                "two-sided paired bootstrap over test sentences (sacrebleu --paired-bs semantics, +1 correction), "
                f"{significance.resamples} resamples; 95% CI: their percentile interval"
            )
        parts.append(
            f"{TEST_SET_ONLY} ({only} comparison{'s' if only != 1 else ''}, {why}): {test}; the seeds' spread is not "
            "counted, so these carry no mark; Holm-corrected over these comparisons apart"
        )
    return f"{seeds_phrase(rows)} per row, seeds never pooled as sentences. " + ". ".join(parts)


def family_of(comparisons: list[Comparison]) -> str:
    """`: 4 against a baseline, 2 SACT against a control` where the family holds control comparisons; a baseline
    comparison that also answers a control question (SACT against a baseline that is its control) is counted once,
    and said to be both."""
    controls = sum(c.control != "" for c in comparisons)
    if not controls:
        return ""
    baselines = sum(c.kind == BASELINE for c in comparisons)
    both = sum(c.kind == BASELINE and c.control != "" for c in comparisons)
    sact = sum(c.control in SACT_QUESTION for c in comparisons)
    phrases = [f"{baselines} against a baseline"] + [f"{sact} SACT against a control"] * (sact > 0)
    phrases += [f"{controls - sact} against a declared control"] * (controls > sact)
    return ": " + ", ".join(phrases + [f"{both} of them both"] * (both > 0))


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
    extracted: TrialStatistics | None = None,
) -> Summary:
    """The BLEU table; `translations[run_id][set]` and `references[set]` (or `extracted`) feed the paired bootstrap."""
    if not records:
        raise SummaryError("no finished trial with test BLEU in this sweep yet")
    significance = significance or SignificanceSpec()
    criteria = {k: typed_setting(k, v) for k, v in (baseline or DEFAULT_BASELINE).items()}
    test_sets = records[0].test_sets
    groups: dict[tuple, list[TrialRecord]] = {}
    for record in records:
        groups.setdefault(record.group, []).append(record)
    rows, names = [], names_of(records)
    for members in groups.values():
        tests = {s: mean_std([r.metrics[f"bleu_test_{s}"] for r in members]) for s in test_sets}
        paper = [r.metrics[f"{PAPER_BLEU}_test_avg"] for r in members if f"{PAPER_BLEU}_test_avg" in r.metrics]
        times = [r.epoch_time_s for r in members if r.epoch_time_s is not None]
        rows.append(
            VariantRow(
                names[members[0].variant] + chosen_values(members[0]),
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
    summary.controls = sact_controls(rows)
    summary.comparisons = test_significance(
        rows, criteria, references, translations, significance, bleu or {}, summary.controls, extracted
    )
    summary.method_name = f"{significance.method}: {SIGNIFICANCE_TESTS[significance.method]}"
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
    """AER and gold-attention mass per variant, each delta tested as BLEU is (seeds and the same resampled test
    sentences; one seed a row: test-set variance only, no mark), Holm-corrected over the column's comparisons.
    `stats[run_id][set]`: each trial's per-sentence ALIGNMENT_STATS."""
    sizes = {name: len(per_sentence) for name, per_sentence in next(iter(stats.values())).items()}
    sets = sorted(sizes)
    cells: dict[int, list[AlignmentCell]] = {id(row): [] for row in summary.rows}
    pairs = [pair for pair in pairs_of(summary.rows, summary.criteria, summary.controls) if pair[2] == BASELINE]
    for key, _, higher in ALIGNMENT_METRICS:
        test = AlignmentBootstrap(sizes, key, significance.resamples)
        values = {
            id(row): [statistics.fmean(r.metrics[f"{key}_{s}"] for s in sets) for r in row.records]
            for row in summary.rows
        }
        compared = compare(
            pairs, lambda row, values=values: values[id(row)], test, lambda row: [stats[r.run_id] for r in row.records]
        )
        mark_and_power(compared, higher)
        tested = {id(c.row): c for c in compared}
        for row in summary.rows:
            cell = AlignmentCell(*mean_std(values[id(row)]))
            if id(row) in tested:
                c = tested[id(row)]
                cell.delta, cell.p_adjusted, cell.mark = c.delta, c.p_adjusted, c.mark
            cells[id(row)].append(cell)
    return AlignmentTable(sets, sizes, significance.resamples, cells)
