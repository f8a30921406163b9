"""A designed sweep read only at its looks (#69): each primary comparison's look, boundary, estimate with its
repeated confidence interval, and verdict, the same for `sweeper summarize` and `sweeper extend`.

A comparison is read at every look its two rows' seeds reach, in order, and stops at the first look that decides
it: a later look (the rows went on for another comparison) never overturns a decision, as a group-sequential test
requires. Seeds are taken in seed order, so look k reads seeds 1..k x seeds_per_look of each row. Where the two rows'
seeds are not a planned look's count (a look still running, or an unplanned count), the reading says "interim, not
a verdict". A control chosen on dev (`choose: dev`) is the matching row with the best mean dev BLEU over its first
look's seeds: a stated rule, fixed at look 1, that never reads a test set.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from nmt_core.training.evaluate import SystemScores, seed_sentence_test
from sweeper.design.decision import Plan, Reading, boundaries, read_look
from sweeper.space.design import DesignSpec, Primary, primaries, words
from sweeper.summary.records import TrialRecord, typed_setting
from sweeper.summary.statistics import TrialStatistics, VariantRow, _matches, objective_of
from sweeper.summary.tables import interval

INTERIM = "interim, not a verdict"
CHANGED = "the design changed after the sweep's first result"
BLEU_DIFFERENCE_SPAN = 200.0  # a difference of two BLEU scores lies in [-100, +100]


@dataclass
class PrimaryReading:
    """One primary comparison as the summary reads it."""

    primary: Primary
    treatment: VariantRow | None
    control: VariantRow | None
    seeds: int = 0  # a row, at the reading's look (both rows' first seeds)
    reading: Reading | None = None  # None: no planned look reached (note says why)
    note: str = ""
    chosen_from: int = 0  # rows the control was chosen among (choose: dev)

    @property
    def verdict(self) -> str:
        return self.reading.verdict if self.reading else INTERIM


def plan_of(design: DesignSpec, primary: Primary) -> Plan:
    """A comparison's plan: the familywise alpha split equally among the primary comparisons (Bonferroni)."""
    share = design.alpha / len(design.comparisons)
    return Plan(primary.test, design.looks, share, design.power, design.spending, design.futility, primary.margin)


def in_seed_order(row: VariantRow) -> list[TrialRecord]:
    return sorted(row.records, key=lambda r: r.config.train.seed)


def first_seeds(row: VariantRow, n: int) -> VariantRow:
    """The row with its first `n` seeds only."""
    return dataclasses.replace(row, records=in_seed_order(row)[:n])


def pick(rows: list[VariantRow], criteria: dict) -> list[VariantRow]:
    typed = {key: typed_setting(key, value) for key, value in criteria.items()}
    return [row for row in rows if _matches(row.records[0], typed)]


def chosen_control(candidates: list[VariantRow], design: DesignSpec, metric: str, mode: str) -> VariantRow | None:
    """`choose: dev`: the candidate with the best mean dev objective over its first look's seeds."""
    ready = [row for row in candidates if row.seeds >= design.seeds_per_look]
    if not ready:
        return None

    def dev(row: VariantRow) -> float:
        values = [objective_of(r, metric, mode) for r in in_seed_order(row)[: design.seeds_per_look]]
        return statistics.fmean(v for v in values if v is not None)

    return (max if mode == "max" else min)(ready, key=dev)


def read_design(
    rows: list[VariantRow],
    design: DesignSpec,
    scores_of: Callable[[VariantRow], SystemScores],
    objective: tuple[str, str] = ("bleu_dev", "max"),
) -> list[PrimaryReading]:
    """Every primary comparison at its deciding look (or its last reached one); `scores_of(row)` gives a row's
    per-seed test scores and their paired resamples (the summary's bootstrap)."""
    readings = []
    for primary in primaries(design):
        treatment = pick(rows, primary.treatment)
        candidates = pick(rows, primary.control)
        control = chosen_control(candidates, design, *objective) if primary.choose else next(iter(candidates), None)
        found = PrimaryReading(primary, next(iter(treatment), None), control, chosen_from=len(candidates))
        readings.append(read_comparison(found, design, scores_of))
    return readings


def read_comparison(
    found: PrimaryReading, design: DesignSpec, scores_of: Callable[[VariantRow], SystemScores]
) -> PrimaryReading:
    """The comparison read look by look up to the seeds both rows have, stopping at the first decision."""
    if found.treatment is None or found.control is None:
        found.note = "a row it compares has no finished trial yet"
        return found
    plan = plan_of(design, found.primary)
    looks = boundaries(plan)
    n = min(found.treatment.seeds, found.control.seeds)
    reached = min(n // design.seeds_per_look, design.looks)
    for look in range(1, reached + 1):
        seeds = look * design.seeds_per_look
        test = seed_sentence_test(
            scores_of(first_seeds(found.control, seeds)), scores_of(first_seeds(found.treatment, seeds))
        )
        found.seeds, found.reading = seeds, read_look(plan, looks, look, test.delta, test.standard_error, test.df)
        if found.reading.decided:
            return found
    if n % design.seeds_per_look or not reached:
        found.note = (
            f"{found.treatment.seeds} and {found.control.seeds} seeds: looks at "
            + ", ".join(str(k * design.seeds_per_look) for k in range(1, design.looks + 1))
            + " seeds a row"
        )
        found.reading = None if not reached else found.reading
    return found


def verdict_line(found: PrimaryReading) -> str:
    """`superiority SACT λ4 vs no temperature: better, +0.62 [+0.11, +1.13] (repeated 95% CI), 6 seeds a row, look 2
    of 5 (boundary p ≤ 0.0031, p 0.0012)`; an interim reading says so and gives no verdict."""
    primary, reading = found.primary, found.reading
    rows = (
        f"{found.treatment.label if found.treatment else words(primary.treatment)} vs "
        f"{found.control.label if found.control else words(primary.control)}"
    )
    chosen = f" (chosen on dev among {found.chosen_from})" if primary.choose and found.chosen_from else ""
    head = f"{primary.test.replace('_', '-')}: {rows}{chosen}"
    if reading is None:
        return f"{head}: {INTERIM} ({found.note})"
    line = (
        f"{head}: **{reading.verdict}**, {reading.delta:+.2f} {interval_words(reading)}, {found.seeds} seeds a row, "
        f"look {reading.look} (boundary p ≤ {reading.nominal_p:.2g}, p {reading.p:.2g})"
    )
    return line + (f"; now {found.note}, {INTERIM} past look {reading.look}" if found.note else "")


def interval_words(reading: Reading) -> str:
    """The repeated CI, or, where it is wider than any difference of two BLEU scores (each in [0, 100]) can be, that
    it bounds nothing yet: an early look of an O'Brien-Fleming design spends almost no alpha, and its t reference on
    a few seeds has heavy tails (look 1 of 10 at 3 seeds a row: a half-width of about a million BLEU)."""
    low, high = reading.interval
    if high - low > BLEU_DIFFERENCE_SPAN:
        return f"(repeated {reading.level:.0%} CI: wider than any BLEU difference at this look)"
    return f"{interval(reading.interval)} (repeated {reading.level:.0%} CI)"


def design_lines(readings: list[PrimaryReading], changed: bool) -> list[str]:
    """The primary comparisons' verdicts, a line each (a markdown list), or the one line saying there is none."""
    if changed:
        return [f"**{CHANGED}: no verdict** (its digest differs from the one `sweeper run` froze on the parent run)"]
    return [f"- {verdict_line(found)}" for found in readings]


def undecided_rows(readings: list[PrimaryReading]) -> set[int]:
    """id() of every row still in an undecided comparison: those the next look gives seeds."""
    return {
        id(row)
        for found in readings
        if found.reading is None or not found.reading.decided
        for row in (found.treatment, found.control)
        if row is not None
    }


def scores_by_row(extracted: TrialStatistics) -> Callable[[VariantRow], SystemScores]:
    """A row's SystemScores on the summary's paired resamples (`extracted.bootstrap`'s): each seed's test BLEU as
    logged (the table's) and its resampled scores; each trial's sentence statistics extracted once, however many
    looks read it and whether or not the BLEU table's tests read it first."""

    def scores(row: VariantRow) -> SystemScores:
        resampled = extracted.bootstrap.scores_of_stats(extracted.of(row.records)).resampled
        return SystemScores(np.array([r.metrics["bleu_test_avg"] for r in row.records]), resampled)

    return scores
