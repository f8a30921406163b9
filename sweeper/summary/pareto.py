"""Several objectives (issue 73): the Pareto front of the table's rows, each objective a row's mean over its seeds of
the trials' objective values (their best epoch's, as the search saw them), and a row marked dominated only where the
dominance is significant over seeds.

Row A is dominated by row B (by means) where B is at least as good on every objective and better on one. That is
tested as an intersection-union test over the objectives (Berger 1982): B is shown at least as good as A on an
objective by a one-sided Welch t-test over the two rows' seeds (p 0 where both rows' seeds agree exactly, as a
parameter count does), and B dominates A at the largest of those p-values. A's p is the smallest over the rows that
dominate it by means, times their number (Bonferroni), and Holm-corrected over every row dominated by means. A row
with one seed, or dominated only by rows with one seed, has no seed spread to test: it is never marked.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from scipy.stats import ttest_ind

from nmt_core.training.evaluate import holm
from sweeper.space.spec import ObjectiveSpec
from sweeper.summary.statistics import ALPHA, Summary, VariantRow, objective_of

FRONT, DOMINATED, WITHIN_NOISE = "front", "dominated", "dominated by means, not significantly"


@dataclass
class ParetoPoint:
    """A row's place among the objectives: its seeds' values per objective and what dominates it."""

    row: VariantRow
    values: list[list[float]]  # per objective, each seed's value
    dominators: list[VariantRow] = field(default_factory=list)  # rows that dominate it by means
    p_value: float | None = None  # the least significant dominance, Bonferroni over its dominators
    p_adjusted: float | None = None  # Holm over the rows dominated by means

    @property
    def means(self) -> list[float]:
        return [statistics.fmean(v) for v in self.values]

    @property
    def stds(self) -> list[float]:
        return [statistics.stdev(v) if len(v) > 1 else 0.0 for v in self.values]

    @property
    def status(self) -> str:
        if not self.dominators:
            return FRONT
        return DOMINATED if self.p_adjusted is not None and self.p_adjusted < ALPHA else WITHIN_NOISE


@dataclass
class ParetoFront:
    objectives: tuple[ObjectiveSpec, ...]
    points: list[ParetoPoint]
    left_out: list[str] = field(default_factory=list)  # rows a trial of which lacks an objective's value


def better(a: float, b: float, mode: str) -> bool:
    return a > b if mode == "max" else a < b


def dominates(b: list[float], a: list[float], modes: list[str]) -> bool:
    """Whether means `b` Pareto-dominate means `a`: at least as good on every objective, better on one."""
    return all(not better(x, y, m) for y, x, m in zip(b, a, modes)) and any(
        better(y, x, m) for y, x, m in zip(b, a, modes)
    )


def better_p(b: list[float], a: list[float], mode: str) -> float:
    """One-sided Welch p of "B is better than A" on one objective; 0 where both rows' seeds agree exactly and B is
    not worse (a parameter count: a tie there is no doubt), 1 where either row has one seed (no spread to test)."""
    if len(a) < 2 or len(b) < 2:
        return 1.0
    if statistics.pvariance(a) == 0 and statistics.pvariance(b) == 0:
        return 0.0 if not better(a[0], b[0], mode) else 1.0
    p = ttest_ind(b, a, equal_var=False, alternative="greater" if mode == "max" else "less").pvalue
    return 1.0 if math.isnan(p) else float(p)


def dominance_p(b: ParetoPoint, a: ParetoPoint, modes: list[str]) -> float:
    """The intersection-union p of "B dominates A": the largest one-sided p over the objectives."""
    return max(better_p(vb, va, m) for vb, va, m in zip(b.values, a.values, modes))


def pareto_front(summary: Summary, objectives: tuple[ObjectiveSpec, ...]) -> ParetoFront:
    """The rows' Pareto front over `objectives`, each dominated row tested (see the module's docstring)."""
    points, left_out = [], []
    for row in summary.rows:
        values = [[objective_of(r, o.metric, o.mode) for r in row.records] for o in objectives]
        if any(v is None for per in values for v in per):
            left_out.append(row.label)
            continue
        points.append(ParetoPoint(row, values))
    modes = [o.mode for o in objectives]
    for a in points:
        beaten = [b for b in points if b is not a and dominates(b.means, a.means, modes)]
        a.dominators = [b.row for b in beaten]
        if beaten:
            a.p_value = min(1.0, len(beaten) * min(dominance_p(b, a, modes) for b in beaten))
    dominated = [a for a in points if a.dominators]
    for a, adjusted in zip(dominated, holm([a.p_value for a in dominated])):
        a.p_adjusted = adjusted
    return ParetoFront(objectives, points, left_out)
