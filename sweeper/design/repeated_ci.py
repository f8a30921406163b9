"""Repeated confidence intervals (Jennison & Turnbull 1989; J&T ch. 9): intervals at every look that cover the
true difference at all looks at once with probability 1 - alpha, so a study may be read, and stopped, at any look.

Why: at look k the interval estimate +- c_k SE, with c_k the look's bound of a two-sided design at level alpha,
misses the truth only where |Z_k - theta sqrt(I_k)| >= c_k, and the design keeps the chance of that at any look at
alpha. With one-sided bounds at alpha (an equivalence design) the intervals have level 1 - 2 alpha, and
equivalence within +-margin is declared where one lies inside (-margin, margin).

With a t statistic (J&T sec. 3.8) the multiplier is Student's t quantile at the look's nominal level: the t with
P(T_df >= t) = 1 - Phi(c_k), on the df of that look's test.
"""

from __future__ import annotations

import math

from scipy.special import ndtr, stdtrit


def t_bound(bound: float, df: float) -> float:
    """The t critical value with the nominal one-sided level of the Z bound: P(T_df >= t) = 1 - Phi(bound);
    the bound itself with infinite df."""
    if math.isinf(bound) or math.isinf(df):
        return bound
    return float(-stdtrit(df, ndtr(-bound)))


def repeated_interval(
    estimate: float, standard_error: float, bound: float, df: float = math.inf
) -> tuple[float, float]:
    """The repeated confidence interval at one look: estimate +- t_bound(bound, df) x SE."""
    half = t_bound(bound, df) * standard_error
    return estimate - half, estimate + half
