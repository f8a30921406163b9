"""Non-binding futility bounds by beta spending, and the drift that gives the planned power with them.

Why beta spending (J&T ch. 7; Pampallona, Tsiatis & Kim 2001): a futility bound a_k stops a study whose effect
looks too small to be found, and spending the type II error beta over the looks, as alpha is spent over the
rejections, lets looks come when seeds do. Under the planned alternative (drift eta), a_k solves

    P_eta(a_j < Z_j < c_j for j < k, Z_k <= a_k) = g(t_k) - g(t_{k-1}),      a_K = c_K,

for a spending function g with g(1) = beta, and eta is raised until a_K meets c_K: total type II error beta, power
1 - beta. Non-binding: the efficacy bounds c_k are computed ignoring the futility bounds (boundaries), so a study
that goes on past a futility bound still keeps its type I error at alpha; obeying them only lowers it. The cost is
a larger maximum information than without futility bounds (the inflation factor, designs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.optimize import brentq

from sweeper.design.boundaries import check_fractions
from sweeper.design.integration import DEFAULT_R, Reached, below, carry
from sweeper.design.spending import Spending, spending_function


def _futility_bound(previous: Reached | None, fraction: float, drift: float, target: float, efficacy: float) -> float:
    """a_k with P_eta(continued, Z_k <= a_k) = target, at most c_k (a bound above the efficacy bound is moot: the
    look then spends less than its share)."""
    if target <= 0:
        return -math.inf
    if float(below(previous, fraction, drift, efficacy)) <= target:
        return efficacy
    return brentq(lambda a: float(below(previous, fraction, drift, a)) - target, -40.0, efficacy, xtol=1e-12)


def futility_bounds_at(
    fractions: Sequence[float],
    efficacy: Sequence[float],
    beta: float,
    drift: float,
    spending: str | Spending = "obrien_fleming",
    r: int = DEFAULT_R,
) -> tuple[np.ndarray, float]:
    """a_1..a_K by beta spending at this drift (a_K = c_K), and the type II error they give: P_eta(stopping below
    a futility bound, or ending below c_K)."""
    t = check_fractions(fractions)
    increments = np.diff(spending_function(spending)(t, beta), prepend=0.0)
    bounds, missed, previous = [], 0.0, None
    for k, (fraction, target, c) in enumerate(zip(t, increments, efficacy)):
        fraction = float(fraction)
        a = float(c) if k == len(t) - 1 else _futility_bound(previous, fraction, drift, float(target), float(c))
        missed += float(below(previous, fraction, drift, a)) if a > -math.inf else 0.0
        bounds.append(a)
        previous = carry(previous, fraction, drift, [(a, float(c))], r)
    return np.array(bounds), missed


def beta_spending(
    fractions: Sequence[float],
    efficacy: Sequence[float],
    beta: float,
    spending: str | Spending = "obrien_fleming",
    r: int = DEFAULT_R,
) -> tuple[float, np.ndarray]:
    """The drift at which the futility bounds by beta spending end at the last efficacy bound (type II error
    exactly beta), and those bounds."""
    drift = brentq(
        lambda eta: futility_bounds_at(fractions, efficacy, beta, eta, spending, r)[1] - beta, 0.0, 40.0, xtol=1e-10
    )
    return drift, futility_bounds_at(fractions, efficacy, beta, drift, spending, r)[0]
