"""Boundaries on the standardised statistic Z_k, and the probabilities of crossing them.

Efficacy bounds by error spending (Lan & DeMets 1983; J&T ch. 7): with information fractions t_1 < ... < t_K and a
spending function f, the bound c_k solves, under the null (drift 0),

    P_0(Z_1 < c_1, ..., Z_{k-1} < c_{k-1}, Z_k >= c_k) = f(t_k) - f(t_{k-1})            (one-sided)
    P_0(|Z_1| < c_1, ..., |Z_{k-1}| < c_{k-1}, |Z_k| >= c_k) = 2 (f(t_k) - f(t_{k-1}))   (two-sided, f at alpha/2)

look by look, each conditioned on the earlier bounds through the carried density (integration). Why conditioning
matters: testing every look at the fixed-sample level rejects a true null far more often than alpha (0.142 for five
two-sided looks at 0.05, Armitage, McPherson & Rowe 1969; J&T Table 1.1).

Also the classical constant-shape bounds (Wang & Tsiatis 1987: c_k = C t_k^(Delta - 1/2); Pocock 1977 at
Delta = 1/2, O'Brien & Fleming 1979 at Delta = 0), crossing probabilities under any drift, and the stopping
probabilities and expected information fraction that power and expected sample size are read from (J&T ch. 19).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq

from sweeper.design.integration import DEFAULT_R, Reached, above, below, carry
from sweeper.design.spending import Spending, spending_function

_XTOL = 1e-12


def check_fractions(fractions: Sequence[float]) -> np.ndarray:
    """The looks' information fractions as an array: increasing, in (0, 1]."""
    t = np.asarray(fractions, dtype=float)
    if t.ndim != 1 or t.size == 0 or t[0] <= 0 or t[-1] > 1 or np.any(np.diff(t) <= 0):
        raise ValueError(f"information fractions must increase within (0, 1], not {list(fractions)}")
    return t


def _tail(previous: Reached | None, fraction: float, bound: float, sides: int) -> float:
    """P_0(continued, Z_k >= bound), and with two sides also P_0(continued, Z_k <= -bound)."""
    tail = float(above(previous, fraction, 0.0, bound))
    return tail + float(below(previous, fraction, 0.0, -bound)) if sides == 2 else tail


def _bound(previous: Reached | None, fraction: float, target: float, sides: int) -> float:
    """The c whose tail beyond it (both tails with two sides) at this look is `target`; no bound (infinity) where
    the look spends nothing."""
    if target <= 0:
        return math.inf
    return brentq(
        lambda c: _tail(previous, fraction, c, sides) - target, 0.0 if sides == 2 else -12.0, 40.0, xtol=_XTOL
    )


def _region(bound: float, sides: int) -> list[tuple[float, float]]:
    return [(-bound, bound)] if sides == 2 else [(-math.inf, bound)]


def efficacy_bounds(
    fractions: Sequence[float],
    alpha: float,
    spending: str | Spending = "obrien_fleming",
    sides: int = 1,
    r: int = DEFAULT_R,
) -> np.ndarray:
    """c_1..c_K on the Z scale for a one-sided level `alpha`, or a two-sided one (alpha / 2 a side, symmetric).
    The fractions may end below 1: a study that stopped adding seeds early has spent f(t_K), not alpha."""
    if sides not in (1, 2):
        raise ValueError(f"sides must be 1 or 2, not {sides}")
    t = check_fractions(fractions)
    spent = alpha_spent(t, alpha, spending, sides)
    bounds, previous = [], None
    for fraction, target in zip(t, np.diff(spent, prepend=0.0)):
        bounds.append(_bound(previous, float(fraction), float(target), sides))
        previous = carry(previous, float(fraction), 0.0, _region(bounds[-1], sides), r)
    return np.array(bounds)


def alpha_spent(fractions: Sequence[float], alpha: float, spending: str | Spending = "obrien_fleming", sides: int = 1):
    """The cumulative type I error spent by each look: f(t_k; alpha), or 2 f(t_k; alpha / 2) with two sides."""
    return sides * spending_function(spending)(np.asarray(fractions, dtype=float), alpha / sides)


@dataclass(frozen=True)
class Crossings:
    """Per look, under one drift: P(first crossing of the upper bound at look k), of the lower bound, and
    P(reaching look k at all)."""

    upper: np.ndarray
    lower: np.ndarray
    reached: np.ndarray


def crossings(
    fractions: Sequence[float],
    upper: Sequence[float],
    lower: Sequence[float] | None = None,
    drift: float = 0.0,
    r: int = DEFAULT_R,
) -> Crossings:
    """Exit probabilities through `upper` (Z_k >= upper_k) and `lower` (Z_k <= lower_k; none when None) for a
    statistic with mean drift sqrt(t_k): the continuation region of look k is (lower_k, upper_k)."""
    t = check_fractions(fractions)
    lower = [-math.inf] * len(t) if lower is None else lower
    found: dict[str, list[float]] = {"upper": [], "lower": [], "reached": []}
    previous = None
    for fraction, lo, hi in zip(t, lower, upper):
        fraction = float(fraction)
        found["reached"].append(float(above(previous, fraction, drift, -math.inf)))
        found["upper"].append(float(above(previous, fraction, drift, hi)))
        found["lower"].append(float(below(previous, fraction, drift, lo)) if lo > -math.inf else 0.0)
        previous = carry(previous, fraction, drift, [(lo, hi)], r)
    return Crossings(*(np.array(found[key]) for key in ("upper", "lower", "reached")))


def constant_bounds(
    fractions: Sequence[float], alpha: float, shape: str | float = "pocock", sides: int = 2, r: int = DEFAULT_R
) -> np.ndarray:
    """Wang & Tsiatis' (1987) bounds c_k = C t_k^(Delta - 1/2), C such that the test's size is `alpha`: Pocock's
    constant bound at Delta = 1/2 ("pocock"), O'Brien & Fleming's C / sqrt(t_k) at Delta = 0 ("obrien_fleming")
    (J&T ch. 2). Meant for equally spaced looks, where they were defined."""
    delta = {"pocock": 0.5, "obrien_fleming": 0.0}.get(shape, shape) if isinstance(shape, str) else shape
    if isinstance(delta, str):
        raise ValueError(f"unknown bound shape {shape!r}: pocock, obrien_fleming or a number")
    t = check_fractions(fractions)
    form = t ** (delta - 0.5)

    def size(constant: float) -> float:
        bounds = constant * form
        found = crossings(t, bounds, -bounds if sides == 2 else None, 0.0, r)
        return float(found.upper.sum() + found.lower.sum())

    return brentq(lambda c: size(c) - alpha, 0.5, 10.0, xtol=_XTOL) * form


def drift_for_power(
    fractions: Sequence[float],
    upper: Sequence[float],
    power: float,
    lower: Sequence[float] | None = None,
    r: int = DEFAULT_R,
) -> float:
    """The drift eta (mean of Z at t = 1) at which the upper bound is crossed with probability `power` (J&T
    ch. 2 and 7: with two sides, crossing the wrong side is not counted as power)."""
    return brentq(lambda eta: crossings(fractions, upper, lower, eta, r).upper.sum() - power, 0.0, 40.0, xtol=1e-10)
