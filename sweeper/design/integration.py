"""The numerical integration under every boundary: the density of the standardised statistic carried from look
to look over the paths that have not stopped (Jennison & Turnbull 2000, ch. 19; Armitage, McPherson & Rowe 1969).

Why: a probability such as P(Z_1 < c_1, ..., Z_{k-1} < c_{k-1}, Z_k >= c_k) is a k-dimensional normal one, but the
looks' statistics have independent increments (the canonical joint distribution, J&T ch. 3), so it factors into
one-dimensional integrals. On the information-fraction scale, with drift eta = theta sqrt(I_max) (the mean of Z at
t = 1), B(t) = Z(t) sqrt(t) is a Brownian motion with drift eta:

    B(t_k) - B(t_{k-1}) ~ N(eta (t_k - t_{k-1}), t_k - t_{k-1}),   E Z_k = eta sqrt(t_k).

The sub-density of Z_k over the paths that continued at every earlier look is then

    g_1(z) = phi(z - eta sqrt(t_1)),
    g_k(z) = int_{C_{k-1}} g_{k-1}(u) sqrt(t_k / d) phi((z sqrt(t_k) - u sqrt(t_{k-1}) - eta d) / sqrt(d)) du,

with d = t_k - t_{k-1} and C_{k-1} the continuation region of look k-1 (J&T ch. 19). Each integral is taken with
Simpson's rule on J&T's grid: about 6r nodes around the mean of Z_k, spaced 3 / (2r) within 3 of it and
logarithmically out to 3 + 4 ln r beyond, cut at the region's ends (J&T ch. 19; r = 16 is accurate to about 1e-6
there, the default here is 32). Probabilities of stopping at look k need no grid of their own: the increment's
normal distribution function integrates against g_{k-1} in closed form (`below`, `above`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr

DEFAULT_R = 32
_ROOT_2PI = math.sqrt(2 * math.pi)


@dataclass(frozen=True)
class Reached:
    """g_k on the continuation region of look k, as Simpson nodes and their masses (weight x density): the paths
    that reached look k and did not stop there. Its masses sum to P(continue past look k)."""

    fraction: float
    points: np.ndarray
    masses: np.ndarray


def grid(lower: float, upper: float, mean: float, r: int = DEFAULT_R) -> tuple[np.ndarray, np.ndarray]:
    """J&T's nodes for a statistic with this mean, cut to (lower, upper) with the ends added, and Simpson's
    weights over each panel (x_i, its midpoint, x_{i+1}). Empty where the interval misses the grid's span: a
    sub-density g_k is at most the N(eta sqrt(t_k), 1) density, whose tails beyond mean +- (3 + 4 ln r) hold less
    than 1e-29 of its mass for r >= 8."""
    i = np.arange(1, 6 * r, dtype=float)
    x = np.where(
        i < r,
        -3 - 4 * np.log(r / i),
        np.where(i <= 5 * r, -3 + 3 * (i - r) / (2 * r), 3 + 4 * np.log(r / (6 * r - i))),
    )
    x += mean
    lo, hi = max(lower, x[0]), min(upper, x[-1])
    if not lo < hi:
        return np.empty(0), np.empty(0)
    knots = np.concatenate(([lo], x[(x > lo) & (x < hi)], [hi]))
    width = np.diff(knots)
    points = np.empty(2 * len(knots) - 1)
    points[0::2], points[1::2] = knots, knots[:-1] + width / 2
    weights = np.zeros_like(points)
    weights[0:-1:2] += width / 6
    weights[2::2] += width / 6
    weights[1::2] = 4 * width / 6
    return points, weights


def _standardised(previous: Reached, fraction: float, drift: float, x: np.ndarray) -> np.ndarray:
    """(x sqrt(t_k) - u sqrt(t_{k-1}) - eta d) / sqrt(d) for each x (rows) and node u (columns)."""
    step = fraction - previous.fraction
    if step <= 0:
        raise ValueError(f"information fractions must increase: {previous.fraction} then {fraction}")
    shift = previous.points * math.sqrt(previous.fraction) + drift * step
    return (x[..., None] * math.sqrt(fraction) - shift) / math.sqrt(step)


def below(previous: Reached | None, fraction: float, drift: float, x: float | np.ndarray) -> np.ndarray:
    """P(continued at every earlier look, Z_k < x); `previous` None for the first look."""
    x = np.asarray(x, dtype=float)
    if previous is None:
        return ndtr(x - drift * math.sqrt(fraction))
    return ndtr(_standardised(previous, fraction, drift, x)) @ previous.masses


def above(previous: Reached | None, fraction: float, drift: float, x: float | np.ndarray) -> np.ndarray:
    """P(continued at every earlier look, Z_k > x); the upper tail directly, so tiny probabilities keep their
    digits."""
    x = np.asarray(x, dtype=float)
    if previous is None:
        return ndtr(drift * math.sqrt(fraction) - x)
    return ndtr(-_standardised(previous, fraction, drift, x)) @ previous.masses


def carry(
    previous: Reached | None,
    fraction: float,
    drift: float,
    region: Sequence[tuple[float, float]],
    r: int = DEFAULT_R,
) -> Reached:
    """g_k on look k's continuation region (a union of disjoint intervals): the recursion above, one grid per
    interval."""
    mean = drift * math.sqrt(fraction)
    grids = [grid(lo, hi, mean, r) for lo, hi in region]
    points = np.concatenate([g[0] for g in grids])
    weights = np.concatenate([g[1] for g in grids])
    if previous is None:
        density = np.exp(-0.5 * (points - mean) ** 2) / _ROOT_2PI
    else:
        scale = math.sqrt(fraction / (fraction - previous.fraction))
        kernel = np.exp(-0.5 * _standardised(previous, fraction, drift, points) ** 2) / _ROOT_2PI
        density = scale * (kernel @ previous.masses)
    return Reached(fraction, points, weights * density)
