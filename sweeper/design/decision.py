"""What one look of a designed study says of one primary comparison: the boundary there, the estimate with its
repeated confidence interval, and the verdict in words.

The comparison's test is the two-level seed x sentence test (a t statistic with Satterthwaite df, docs/statistics.md);
a group-sequential boundary c_k is a Z value, so the look compares the test's one-sided p with the boundary's nominal
level 1 - Phi(c_k) (Jennison and Turnbull sec. 3.8, group-sequential t-tests): with a few seeds a row the t's heavy
tails would make c_k itself too lenient. The calibration test (tests/unit/test_sequential_calibration.py) measures
what that gives in the data's regime.

Verdicts: better / worse (superiority, two-sided), non-inferior within m, equivalent within +-m, not equivalent (the
repeated interval lies outside +-m: no number of seeds is likely to bring it in), not shown (futility), undecided
at the maximum; `undecided` between looks means "add the next look's seeds".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.special import ndtri, stdtr

from sweeper.design.designs import Design, equivalence_design, superiority_design
from sweeper.design.repeated_ci import repeated_interval

SUPERIORITY, NON_INFERIORITY, EQUIVALENCE = "superiority", "non_inferiority", "equivalence"
UNDECIDED = "undecided"


@dataclass(frozen=True)
class Plan:
    """One comparison's design: its test, margin, its share of the familywise alpha, and the looks."""

    test: str
    looks: int
    alpha: float  # this comparison's level (the design's alpha split among its primary comparisons)
    power: float
    spending: str
    futility: bool
    margin: float | None = None

    @property
    def fractions(self) -> list[float]:
        return [(k + 1) / self.looks for k in range(self.looks)]


def boundaries(plan: Plan) -> Design:
    """The group-sequential design of a comparison. Superiority is two-sided (better or worse), each side at
    alpha / 2; its futility bounds, when asked for, are the one-sided design's (beta spending, non-binding), applied
    to |Z|. Non-inferiority is one-sided at alpha; equivalence two one-sided tests at alpha each."""
    spending = plan.spending
    if plan.test == EQUIVALENCE:
        return equivalence_design(plan.fractions, plan.alpha, plan.power, spending)
    if plan.test == NON_INFERIORITY:
        return superiority_design(plan.fractions, plan.alpha, plan.power, spending, sides=1)
    futility = spending if plan.futility else None
    return superiority_design(plan.fractions, plan.alpha / 2, plan.power, spending, sides=1, futility=futility)


@dataclass(frozen=True)
class Reading:
    """A comparison read at one look."""

    look: int  # 1-based
    delta: float  # treatment - control, seed-averaged
    interval: tuple[float, float]  # the repeated confidence interval at this look
    level: float  # its coverage, 1 - alpha (superiority) or 1 - 2 alpha (one-sided tests)
    nominal_p: float  # the one-sided p this look's boundary asks for
    p: float  # the test's one-sided p at this look (the side, or the larger of TOST's two)
    verdict: str

    @property
    def decided(self) -> bool:
        return self.verdict != UNDECIDED


def one_sided_p(statistic: float, df: float) -> float:
    """P(T_df >= statistic)."""
    return float(stdtr(df, -statistic)) if math.isfinite(df) else float(0.5 * math.erfc(statistic / math.sqrt(2)))


def ratio(estimate: float, se: float) -> float:
    """estimate / se, with a zero standard error (seeds that agree exactly) read as certainty of its sign."""
    if se > 0:
        return estimate / se
    return 0.0 if estimate == 0 else math.copysign(math.inf, estimate)


def read_look(plan: Plan, design: Design, look: int, delta: float, se: float, df: float) -> Reading:
    """The verdict at `look` (1-based) from the test's estimate, standard error and df."""
    k, last = look - 1, look == plan.looks
    nominal = design.nominal_p[k]
    interval = repeated_interval(delta, se, design.efficacy[k], df)
    level = 1 - plan.alpha if plan.test == SUPERIORITY else 1 - 2 * plan.alpha
    if plan.test == SUPERIORITY:
        p, verdict = _superiority(design, k, ratio(delta, se), df, nominal)
    elif plan.test == NON_INFERIORITY:
        p = one_sided_p(ratio(delta + plan.margin, se), df)
        verdict = f"non-inferior within {plan.margin:g}" if p <= nominal else UNDECIDED
    else:
        p = max(one_sided_p(ratio(delta + plan.margin, se), df), one_sided_p(ratio(plan.margin - delta, se), df))
        outside = interval[0] >= plan.margin or interval[1] <= -plan.margin
        verdict = f"equivalent within ±{plan.margin:g}" if p <= nominal else "not equivalent" if outside else UNDECIDED
    if verdict == UNDECIDED and last:
        verdict = "undecided at the maximum"
    return Reading(look, delta, interval, level, nominal, p, verdict)


def _superiority(design: Design, k: int, t: float, df: float, nominal: float) -> tuple[float, str]:
    """Better or worse where a side's p reaches the boundary's level; not shown where |Z| (the t's p read back as a
    Z) falls inside the futility bound; else undecided."""
    up, down = one_sided_p(t, df), one_sided_p(-t, df)
    if up <= nominal:
        return up, "better"
    if down <= nominal:
        return down, "worse"
    if design.futility is not None and k < len(design.efficacy) - 1:
        z = float(ndtri(1 - min(up, down)))  # |Z| with the t's tail probability
        if z <= design.futility[k]:
            return min(up, down), "not shown (stopped for futility)"
    return min(up, down), UNDECIDED
