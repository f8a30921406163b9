"""Seeds a row for comparing two rows (training variants) whose per-seed scores have standard deviation sigma.

The difference of two rows' means over n seeds each has variance 2 sigma^2 / n, so its information is
n / (2 sigma^2) and the drift of a design at n seeds a row is effect x sqrt(n / 2) / sigma. With few seeds the test
is a t test, so the fixed-sample figure takes Student's t with 2n - 2 df in place of the normal (Cohen 1988): n
solves P_t(reject) = power with the noncentral t approximated by a shifted one, which for superiority is
(t_{1-alpha/sides} + t_{power}) sigma sqrt(2 / n) <= delta, what nmt_core.evaluate.detectable computes for two
rows with no shared sentence part. The group-sequential maximum is that n times the design's inflation factor R
(J&T ch. 2; J&T sec. 3.8: designing on the normal scale and testing each look's t at its nominal level loses
little), rounded up to whole looks of `seeds_per_look` and capped at `max_looks`. The expected seeds to a decision
are E t x the maximum (designs.stopping), at a true difference of 0 and at the planned effect.

sigma itself is estimated from a few seeds: sigma_interval gives its chi-square interval (df s^2 / sigma^2 ~
chi^2_df), and seeds_range the seeds a plan needs at its ends, for "19 seeds a row (13-31 over the seed variance's
uncertainty)".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import brentq
from scipy.special import stdtr, stdtrit
from scipy.stats import chi2

from sweeper.design.designs import EQUIVALENCE, Design, equivalence_design, stopping, superiority_design
from sweeper.design.spending import Spending

FEWEST = 2  # a row's seed variance needs two seeds


def _t_power(drift: float, df: float, alpha: float, sides: int, planned: float | None) -> float:
    """The fixed-sample power at this drift (effect, or margin for equivalence, x sqrt(n / 2) / sigma) with t
    quantiles: superiority P(T > t_{1-alpha/sides} - drift); equivalence (planned: the true difference as a
    fraction of the margin) the two one-sided tests' joint region, P(t_{1-alpha} - drift (1 + planned) < T <
    drift (1 - planned) - t_{1-alpha})."""
    if planned is None:
        return float(stdtr(df, drift - stdtrit(df, 1 - alpha / sides)))
    critical = float(stdtrit(df, 1 - alpha))
    return max(float(stdtr(df, drift * (1 - planned) - critical) - stdtr(df, critical - drift * (1 + planned))), 0.0)


def _fixed_n(sigma: float, effect: float, alpha: float, power: float, sides: int, planned: float | None) -> float:
    """The least (real) n seeds a row whose fixed-sample t test has `power`; at least FEWEST."""
    if sigma <= 0 or effect <= 0:
        raise ValueError(f"sigma and the effect (or margin) must be positive, not {sigma} and {effect}")

    def shortfall(n: float) -> float:
        return _t_power(effect * math.sqrt(n / 2) / sigma, 2 * n - 2, alpha, sides, planned) - power

    if shortfall(FEWEST) >= 0:
        return float(FEWEST)
    high = 2.0 * FEWEST
    while shortfall(high) < 0:
        high *= 2
    return brentq(shortfall, FEWEST, high, xtol=1e-9)


def fixed_seeds(sigma: float, delta: float, alpha: float = 0.05, power: float = 0.8, sides: int = 2) -> int:
    """Seeds a row for one analysis to find a true difference `delta` with `power` at level `alpha`."""
    return math.ceil(_fixed_n(sigma, delta, alpha, power, sides, None) - 1e-9)


def fixed_seeds_equivalence(
    sigma: float, margin: float, alpha: float = 0.05, power: float = 0.8, planned: float = 0.0
) -> int:
    """Seeds a row for one TOST analysis to show equivalence within +-margin with `power` when the true difference
    is `planned` x margin."""
    return math.ceil(_fixed_n(sigma, margin, alpha, power, 1, planned) - 1e-9)


@dataclass(frozen=True)
class SeedPlan:
    """A plan in seeds a row. fixed: for one analysis. looks, maximum: the group-sequential study's looks and its
    seeds a row at the last (looks x seeds_per_look). expected_at_zero, expected_at_effect: the expected seeds a
    row to a decision when the true difference is 0 and when it is the planned effect (superiority: delta;
    equivalence: the margin itself, where equivalence fails). power: at the planned effect (superiority) or at
    the planned true difference (equivalence), with `maximum` (normal theory, t-corrected as the maximum is).
    enough: whether `max_looks` reached the power. design: on the looks' fractions, its drift at `maximum`."""

    fixed: int
    looks: int
    maximum: int
    expected_at_zero: float
    expected_at_effect: float
    power: float
    enough: bool
    design: Design


def _plan(needed: float, seeds_per_look: int, max_looks: int, build: Callable[[int], Design]) -> tuple[Design, int]:
    """The fewest looks whose maximum covers R x the fixed n (or max_looks), and its design."""
    if seeds_per_look < 1 or max_looks < 1:
        raise ValueError(f"seeds_per_look and max_looks must be at least 1, not {seeds_per_look}, {max_looks}")
    for looks in range(1, max_looks + 1):
        design = build(looks)
        if looks * seeds_per_look >= design.inflation * needed - 1e-9:
            break
    return design, looks


def _seed_plan(needed: float, looks: int, seeds_per_look: int, design: Design, at_zero: float, at_effect: float):
    maximum = looks * seeds_per_look
    scale = math.sqrt(maximum / (design.inflation * needed))  # the maximum's drift over the design's
    scaled = replace(design, drift=design.drift * scale)
    if design.kind == EQUIVALENCE:
        power = float(stopping(scaled, design.planned * scaled.drift).rejected.sum())
    else:
        power = float(stopping(scaled, scaled.drift).rejected.sum())
    return SeedPlan(
        fixed=math.ceil(needed - 1e-9),
        looks=looks,
        maximum=maximum,
        expected_at_zero=maximum * stopping(scaled, at_zero * scaled.drift).expected_fraction,
        expected_at_effect=maximum * stopping(scaled, at_effect * scaled.drift).expected_fraction,
        power=power,
        enough=power >= design.power - 1e-6,
        design=scaled,
    )


def _even(looks: int) -> np.ndarray:
    return np.arange(1, looks + 1) / looks


def plan_superiority(
    sigma: float,
    delta: float,
    seeds_per_look: int,
    max_looks: int,
    alpha: float = 0.05,
    power: float = 0.8,
    spending: str | Spending = "obrien_fleming",
    sides: int = 2,
    futility: str | Spending | None = None,
) -> SeedPlan:
    """Seeds a row to find a true difference `delta` between two rows, looks every `seeds_per_look` seeds a row."""
    needed = _fixed_n(sigma, delta, alpha, power, sides, None)
    design, looks = _plan(
        needed,
        seeds_per_look,
        max_looks,
        lambda k: superiority_design(_even(k), alpha, power, spending, sides, futility),
    )
    return _seed_plan(needed, looks, seeds_per_look, design, 0.0, 1.0)


def plan_equivalence(
    sigma: float,
    margin: float,
    seeds_per_look: int,
    max_looks: int,
    alpha: float = 0.05,
    power: float = 0.8,
    spending: str | Spending = "obrien_fleming",
    planned: float = 0.0,
) -> SeedPlan:
    """Seeds a row to show two rows equivalent within +-margin (true difference `planned` x margin)."""
    needed = _fixed_n(sigma, margin, alpha, power, 1, planned)
    design, looks = _plan(
        needed, seeds_per_look, max_looks, lambda k: equivalence_design(_even(k), alpha, power, spending, planned)
    )
    return _seed_plan(needed, looks, seeds_per_look, design, 0.0, 1.0)


def sigma_interval(sigma: float, df: float, level: float = 0.8) -> tuple[float, float]:
    """The `level` confidence interval of the true sigma from an estimate on `df` degrees of freedom (n - 1 for one
    row's n seeds, n1 + n2 - 2 pooled): df s^2 / sigma^2 is chi-square with df, so sigma lies between
    s sqrt(df / chi2_{df, (1+level)/2}) and s sqrt(df / chi2_{df, (1-level)/2})."""
    tail = (1 - level) / 2
    return sigma * math.sqrt(df / chi2.ppf(1 - tail, df)), sigma * math.sqrt(df / chi2.ppf(tail, df))


def seeds_range(seeds_at: Callable[[float], int], sigma: float, df: float, level: float = 0.8) -> tuple[int, int, int]:
    """The seeds a plan needs at the low end of sigma's interval, at the estimate, and at the high end; e.g.
    seeds_at=lambda s: plan_superiority(s, 0.5, 4, 10).maximum."""
    low, high = sigma_interval(sigma, df, level)
    return seeds_at(low), seeds_at(sigma), seeds_at(high)
