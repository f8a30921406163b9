"""Group-sequential designs: the bounds a study reads at each look, what they cost in information, and how likely
each look is to end it.

- superiority_design: one-sided at alpha, or two-sided symmetric at alpha / 2 a side (J&T ch. 2-3, 7), optionally
  with non-binding futility bounds by beta spending (one-sided only; futility).
- equivalence_design: two one-sided group-sequential tests of |difference| < margin (Schuirmann 1987 at each look;
  J&T ch. 6), each at level alpha with the same spending function: equivalence is declared at the first look where
  both statistics, (estimate + margin) / SE and (margin - estimate) / SE, reach c_k; equivalently where the
  repeated 1 - 2 alpha confidence interval lies within (-margin, margin).

The inflation factor R = I_max / I_fixed (J&T ch. 2) is what the sequential design needs at most, relative to
one analysis with the same alpha and power: (eta / eta_fixed)^2 with eta the drift (mean of Z at t = 1) giving
the power. The nominal p-value threshold of look k is p_k = 1 - Phi(c_k): a test at look k rejects when its
one-sided p-value is at most p_k (J&T sec. 3.8: with a t statistic, its p-value from Student's t with its own
df, which keeps the level closer to alpha than comparing t with c_k).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.special import ndtr, ndtri

from sweeper.design.boundaries import alpha_spent, check_fractions, crossings, drift_for_power, efficacy_bounds
from sweeper.design.futility import beta_spending
from sweeper.design.integration import DEFAULT_R, Reached, below, carry
from sweeper.design.spending import Spending

SUPERIORITY, EQUIVALENCE = "superiority", "equivalence"


@dataclass(frozen=True)
class Design:
    """A group-sequential design on the Z scale.

    kind: superiority (reject when Z_k >= c_k, or |Z_k| >= c_k with two sides) or equivalence (both one-sided
    statistics >= c_k). efficacy: c_k. futility: a_k (stop when Z_k <= a_k; non-binding), or None.
    alpha_spent: the cumulative type I error spent by each look (both sides together). nominal_p: 1 - Phi(c_k),
    the one-sided p-value threshold of each look (each side's, with two sides). inflation: I_max / I_fixed.
    drift: the mean of Z at t = 1 that gives `power` (superiority: theta sqrt(I_max) at the planned effect;
    equivalence: margin x sqrt(I_max), the true difference at `planned`, a fraction of the margin)."""

    kind: str
    fractions: tuple[float, ...]
    efficacy: tuple[float, ...]
    futility: tuple[float, ...] | None
    alpha_spent: tuple[float, ...]
    nominal_p: tuple[float, ...]
    inflation: float
    drift: float
    alpha: float
    power: float
    sides: int = 1
    planned: float = 0.0


def superiority_design(
    fractions: Sequence[float],
    alpha: float = 0.05,
    power: float = 0.8,
    spending: str | Spending = "obrien_fleming",
    sides: int = 2,
    futility: str | Spending | None = None,
    r: int = DEFAULT_R,
) -> Design:
    """Efficacy bounds by alpha spending and, with `futility` (a beta spending function), non-binding futility
    bounds; the drift that gives `power` and the inflation factor against z_{1-alpha/sides} + z_{power}."""
    t = check_fractions(fractions)
    efficacy = efficacy_bounds(t, alpha, spending, sides, r)
    if futility is None:
        lower = -efficacy if sides == 2 else None
        drift, bounds = drift_for_power(t, efficacy, power, lower, r), None
    elif sides == 1:
        drift, found = beta_spending(t, efficacy, 1 - power, futility, r)
        bounds = tuple(float(a) for a in found)
    else:
        raise ValueError("futility bounds are for one-sided designs (sides=1)")
    fixed = float(ndtri(1 - alpha / sides) + ndtri(power))
    spent = alpha_spent(t, alpha, spending, sides)
    return _design(SUPERIORITY, t, efficacy, bounds, spent, (drift / fixed) ** 2, drift, alpha, power, sides)


def _design(kind, t, efficacy, futility, spent, inflation, drift, alpha, power, sides, planned=0.0) -> Design:
    return Design(
        kind=kind,
        fractions=tuple(float(x) for x in t),
        efficacy=tuple(float(c) for c in efficacy),
        futility=futility,
        alpha_spent=tuple(float(a) for a in spent),
        nominal_p=tuple(float(ndtr(-c)) for c in efficacy),
        inflation=float(inflation),
        drift=float(drift),
        alpha=alpha,
        power=power,
        sides=sides,
        planned=planned,
    )


def _equivalence_walk(
    t: np.ndarray, efficacy: Sequence[float], margin: float, difference: float, r: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per look, P(equivalence declared there) and P(reaching it), for margin drift `margin` and true-difference
    drift `difference`. W_k = (estimate_k - difference) / SE_k has drift 0, and both one-sided statistics reach
    c_k exactly when c_k - (margin + difference) sqrt(t_k) <= W_k <= (margin - difference) sqrt(t_k) - c_k."""
    declared, reached, previous = [], [], None
    for fraction, c in zip(t, efficacy):
        fraction = float(fraction)
        lo = c - (margin + difference) * math.sqrt(fraction)
        hi = (margin - difference) * math.sqrt(fraction) - c
        reached.append(float(_mass(previous)))
        inside = float(below(previous, fraction, 0.0, hi) - below(previous, fraction, 0.0, lo)) if lo < hi else 0.0
        declared.append(max(inside, 0.0))
        region = [(-math.inf, lo), (hi, math.inf)] if lo < hi else [(-math.inf, math.inf)]
        previous = carry(previous, fraction, 0.0, region, r)
    return np.array(declared), np.array(reached)


def _mass(previous: Reached | None) -> float:
    return 1.0 if previous is None else float(previous.masses.sum())


def equivalence_design(
    fractions: Sequence[float],
    alpha: float = 0.05,
    power: float = 0.8,
    spending: str | Spending = "obrien_fleming",
    planned: float = 0.0,
    r: int = DEFAULT_R,
) -> Design:
    """Two one-sided group-sequential tests, each at `alpha`: the margin drift at which equivalence is declared
    with probability `power` when the true difference is `planned` x margin, and the inflation factor against one
    TOST analysis with that power."""
    if not 0 <= planned < 1:
        raise ValueError(f"the planned true difference is a fraction of the margin in [0, 1), not {planned}")
    t = check_fractions(fractions)
    efficacy = efficacy_bounds(t, alpha, spending, 1, r)

    def shortfall(eta: float) -> float:
        return float(_equivalence_walk(t, efficacy, eta, planned * eta, r)[0].sum()) - power

    drift = brentq(shortfall, 0.0, float(efficacy[-1]) / (1 - planned) + 40, xtol=1e-10)
    z = float(ndtri(1 - alpha))
    fixed = brentq(lambda eta: ndtr(eta * (1 - planned) - z) - ndtr(z - eta * (1 + planned)) - power, z, z + 40)
    spent = alpha_spent(t, alpha, spending, 1)
    return _design(EQUIVALENCE, t, efficacy, None, spent, (drift / fixed) ** 2, drift, alpha, power, 1, planned)


@dataclass(frozen=True)
class Stopping:
    """Per look, P(stopping there with the null rejected: efficacy, either side, or equivalence declared) and
    P(stopping there without: a futility bound, or the last look), and the expected information fraction at the
    stop, E t = sum_k t_k P(stop at k) (J&T ch. 19): times I_max, the expected information."""

    rejected: np.ndarray
    accepted: np.ndarray
    expected_fraction: float


def stopping(design: Design, drift: float, r: int = DEFAULT_R) -> Stopping:
    """Stopping probabilities when the mean of Z at t = 1 is `drift` (superiority: theta sqrt(I_max); equivalence:
    the true difference x sqrt(I_max), with the margin's drift the design's)."""
    t = np.array(design.fractions)
    if design.kind == EQUIVALENCE:
        rejected, reached = _equivalence_walk(t, design.efficacy, design.drift, drift, r)
        accepted = np.zeros_like(rejected)
    else:
        upper = np.array(design.efficacy)
        lower = -upper if design.sides == 2 else np.array(design.futility or [-math.inf] * len(t))
        found = crossings(t, upper, lower, drift, r)
        rejected, reached = found.upper + (found.lower if design.sides == 2 else 0.0), found.reached
        accepted = np.zeros_like(rejected) if design.sides == 2 else found.lower.copy()
    accepted[-1] = reached[-1] - rejected[-1]
    return Stopping(rejected, accepted, float(t @ (rejected + accepted)))
