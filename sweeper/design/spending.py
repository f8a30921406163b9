"""Error-spending functions: how much of a total error probability may be used up by information fraction t.

Why spending functions (Lan & DeMets 1983; J&T ch. 7): the boundary at a look depends only on the fractions of
the looks so far and on f(t), not on how many looks will follow, so looks may come when seeds do. A spending
function f(t; total) is non-decreasing on [0, 1] with f(0) = 0 and f(1) = total; the k-th look may reject with
probability f(t_k) - f(t_{k-1}) under the null (alpha spending) or, for futility, stop with that probability under
the alternative (beta spending, J&T ch. 7). Every function takes t (a number or an array, clipped to [0, 1])
and the total, and returns the cumulative amount spent.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy.special import ndtr, ndtri

Spending = Callable[[np.ndarray | float, float], np.ndarray]


def _fractions(t: np.ndarray | float) -> np.ndarray:
    return np.clip(np.asarray(t, dtype=float), 0.0, 1.0)


def obrien_fleming(t: np.ndarray | float, total: float) -> np.ndarray:
    """Lan & DeMets' (1983) O'Brien-Fleming type: f(t) = 2 - 2 Phi(z_{1-total/2} / sqrt(t)). Spends almost nothing
    early, so the last look's bound stays near the fixed-sample one."""
    t = _fractions(t)
    with np.errstate(divide="ignore"):
        z = ndtri(1 - total / 2) / np.sqrt(t)
    return 2 * ndtr(-z)  # 2 - 2 Phi(z), without the cancellation when z is large


def pocock(t: np.ndarray | float, total: float) -> np.ndarray:
    """Lan & DeMets' (1983) Pocock type: f(t) = total ln(1 + (e - 1) t). Spends about evenly, so its bounds are
    nearly constant, like Pocock's (1977)."""
    return total * np.log1p((math.e - 1) * _fractions(t))


def power_family(rho: float) -> Spending:
    """Kim & DeMets (1987): f(t) = total t^rho; rho = 1 spends linearly, rho = 3 is near O'Brien-Fleming's shape."""
    if rho <= 0:
        raise ValueError(f"the power family needs rho > 0, not {rho}")

    def spend(t: np.ndarray | float, total: float) -> np.ndarray:
        return total * _fractions(t) ** rho

    return spend


def hwang_shih_decani(gamma: float) -> Spending:
    """Hwang, Shih & DeCani (1990): f(t) = total (1 - e^{-gamma t}) / (1 - e^{-gamma}), linear at gamma = 0;
    gamma = -4 is close to O'Brien-Fleming's shape, gamma = 1 to Pocock's."""

    def spend(t: np.ndarray | float, total: float) -> np.ndarray:
        t = _fractions(t)
        if gamma == 0:
            return total * t
        return total * np.expm1(-gamma * t) / math.expm1(-gamma)

    return spend


SPENDING: dict[str, Spending] = {"obrien_fleming": obrien_fleming, "pocock": pocock}


def spending_function(spending: str | Spending) -> Spending:
    """A spending function by name ("obrien_fleming", "pocock"), or the callable itself."""
    if callable(spending):
        return spending
    if spending not in SPENDING:
        raise ValueError(f"unknown spending function {spending!r}: one of {', '.join(sorted(SPENDING))}")
    return SPENDING[spending]
