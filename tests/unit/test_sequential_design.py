"""sweeper.design against published tables, an independent Monte Carlo, and mutants that must fail.

Every expected number is written out here, never read from the code under test. Sources:
- ldbounds (R, Casper & Perez; Reboussin et al. 2000's ld98), its vignette (inst/doc/ldbounds.pdf, ldBounds(5)):
  Lan-DeMets O'Brien-Fleming type, 5 equally spaced looks, two-sided 0.05, bounds 4.8769 3.3569 2.6803 2.2898 2.0310
  and cumulative exit probabilities 1.0777e-06 7.8830e-04 7.6161e-03 2.4424e-02 5.0000e-02.
- Lan-DeMets Pocock type, same looks: 2.438 2.427 2.410 2.397 2.386 (the design brief's figures); the last also
  2.385909 in SeqBounds.jl's tests (PharmCat/SeqBounds.jl test/runtests.jl); all five checked here against
  Genz's algorithm (scipy's multivariate normal), which shares nothing with the recursion under test.
- Pocock's constant C_P(5, 0.05) = 2.413 and O'Brien-Fleming's C_B(5, 0.05) = 2.040 (J&T Tables 2.1, 2.3).
- J&T's inflation factors and expected sample sizes as gsDesign's tests quote them (keaven/gsDesign,
  tests/testthat/test-outputs.R: test.JT.OFss, test.JT.Pocock, test.JT.Power.symm).
- Non-binding beta-spending futility from rpact's tests (rpact-com/rpact, tests/testthat/
  test-f_design_group_sequential.R: x7a asOF + bsKD, and x2 asHSD + bsHSD).
- Five two-sided looks at the fixed-sample 0.05 reject a true null 0.142 of the time (Armitage, McPherson & Rowe
  1969; J&T Table 1.1).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import stdtr
from scipy.stats import chi2, multivariate_normal, norm
from scipy.stats import t as student

from sweeper.design import spending
from sweeper.design.boundaries import alpha_spent, constant_bounds, crossings, drift_for_power, efficacy_bounds
from sweeper.design.designs import equivalence_design, stopping, superiority_design
from sweeper.design.futility import beta_spending
from sweeper.design.repeated_ci import repeated_interval, t_bound
from sweeper.design.sample_size import (
    fixed_seeds,
    fixed_seeds_equivalence,
    plan_equivalence,
    plan_superiority,
    seeds_range,
    sigma_interval,
)

FIVE = [0.2, 0.4, 0.6, 0.8, 1.0]
LDBOUNDS_OBRIEN_FLEMING = [4.8769, 3.3569, 2.6803, 2.2898, 2.0310]
LDBOUNDS_EXIT = [1.0777e-06, 7.8830e-04, 7.6161e-03, 2.4424e-02, 5.0000e-02]
POCOCK_TYPE = [2.438, 2.427, 2.410, 2.397, 2.386]
DRAWS = 200_000


def matches(found, table, tolerance: float) -> None:
    """The table check the published figures go through, and the mutants fail."""
    assert np.max(np.abs(np.asarray(found) - np.asarray(table))) <= tolerance, (list(found), table)


def simulate(fractions, drift: float, draws: int = DRAWS, seed: int = 2024) -> np.ndarray:
    """Z_1..Z_K drawn directly from independent increments: S(t_k) - S(t_{k-1}) ~ N(drift dt, dt), Z = S / sqrt t."""
    t = np.asarray(fractions, dtype=float)
    dt = np.diff(t, prepend=0.0)
    steps = np.random.default_rng(seed).normal(drift * dt, np.sqrt(dt), size=(draws, len(t)))
    return np.cumsum(steps, axis=1) / np.sqrt(t)


def first_crossing(z: np.ndarray, upper, lower=None) -> np.ndarray:
    """The look (0-based) at which each path first leaves (lower, upper), len(upper) where it never does."""
    out = z >= np.asarray(upper)
    if lower is not None:
        out |= z <= np.asarray(lower)
    return np.where(out.any(axis=1), out.argmax(axis=1), z.shape[1])


def rejections(z: np.ndarray, upper, lower=None) -> np.ndarray:
    """Whether each path's first exit is through the upper bound."""
    first = first_crossing(z, upper, lower)
    stop = np.minimum(first, z.shape[1] - 1)
    return (first < z.shape[1]) & (z[np.arange(len(z)), stop] >= np.asarray(upper)[stop])


def within(p_simulated: float, p: float, draws: int = DRAWS, sds: float = 4.5) -> bool:
    return abs(p_simulated - p) <= sds * math.sqrt(max(p * (1 - p), 1e-12) / draws)


# -- spending functions


def test_spending_functions_spend_the_total_by_t_1_and_ldbounds_exit_probabilities_on_the_way():
    assert alpha_spent(FIVE, 0.05, "obrien_fleming", sides=2) == pytest.approx(LDBOUNDS_EXIT, rel=1e-4)
    t = np.array([0.0, 0.3, 1.0, 1.5])
    assert spending.obrien_fleming(t, 0.025) == pytest.approx(
        [0, 2 * norm.sf(norm.isf(0.0125) / math.sqrt(0.3)), 0.025, 0.025]
    )
    assert spending.pocock(t, 0.05) == pytest.approx([0, 0.05 * math.log(1 + (math.e - 1) * 0.3), 0.05, 0.05])
    assert spending.power_family(2)(t, 0.1) == pytest.approx([0, 0.009, 0.1, 0.1])
    assert spending.hwang_shih_decani(0)(t, 0.1) == pytest.approx([0, 0.03, 0.1, 0.1])
    assert spending.hwang_shih_decani(-4)(0.5, 0.1) == pytest.approx(0.1 * (1 - math.exp(2)) / (1 - math.exp(4)))
    with pytest.raises(ValueError, match="unknown spending function"):
        spending.spending_function("obrien")


# -- published bounds


def test_lan_demets_obrien_fleming_bounds_match_ldbounds_and_genz():
    bounds = efficacy_bounds(FIVE, 0.05, "obrien_fleming", sides=2)
    matches(bounds, LDBOUNDS_OBRIEN_FLEMING, 2e-4)  # ld98's own error at look 2 is 1.1e-4 (Genz below agrees here)
    assert efficacy_bounds(FIVE, 0.025, "obrien_fleming", sides=1) == pytest.approx(bounds, abs=1e-6)
    assert genz_continuation(FIVE, bounds) == pytest.approx(0.95, abs=2e-5)


def test_lan_demets_pocock_type_bounds_match_the_table_seqbounds_and_genz():
    bounds = efficacy_bounds(FIVE, 0.05, "pocock", sides=2)
    matches(bounds, POCOCK_TYPE, 6e-4)
    assert bounds[-1] == pytest.approx(2.385909, abs=2e-4)  # SeqBounds.jl's grid is coarser than this one
    assert genz_continuation(FIVE, bounds) == pytest.approx(0.95, abs=2e-5)


def genz_continuation(fractions, bounds) -> float:
    """P(|Z_k| < c_k at every look) by Genz's quasi-Monte Carlo (scipy), corr(Z_j, Z_k) = sqrt(t_j / t_k)."""
    t = np.asarray(fractions)
    correlation = np.sqrt(np.minimum.outer(t, t) / np.maximum.outer(t, t))
    normal = multivariate_normal(np.zeros(len(t)), correlation)
    c = np.asarray(bounds)
    return float(normal.cdf(c, lower_limit=-c, rng=np.random.default_rng(5)))


def test_classical_pocock_and_obrien_fleming_constants_match_jennison_and_turnbull():
    pocock = constant_bounds(FIVE, 0.05, "pocock")
    assert pocock == pytest.approx([2.413] * 5, abs=6e-4)
    obrien_fleming = constant_bounds(FIVE, 0.05, "obrien_fleming")
    assert obrien_fleming[-1] == pytest.approx(2.040, abs=6e-4)
    assert obrien_fleming * np.sqrt(FIVE) == pytest.approx([obrien_fleming[-1]] * 5)


def test_inflation_and_expected_sample_size_match_jennison_and_turnbull_tables():
    fixed = norm.isf(0.025) + norm.isf(0.2)
    c = constant_bounds(FIVE, 0.05, "obrien_fleming")
    assert (drift_for_power(FIVE, c, 0.8, -c) / fixed) ** 2 == pytest.approx(1.028, abs=6e-4)
    four = [0.25, 0.5, 0.75, 1.0]
    c = constant_bounds(four, 0.05, "pocock")
    drift = drift_for_power(four, c, 0.8, -c)
    assert (drift / fixed) ** 2 == pytest.approx(1.202, abs=6e-4)
    expected = [(drift / fixed) ** 2 * expected_fraction(four, c, theta * drift) for theta in (0, 0.5, 1, 1.5)]
    assert expected == pytest.approx([1.175, 1.088, 0.805, 0.522], abs=6e-4)
    design = superiority_design([1 / 3, 2 / 3, 1], 0.05, 0.8, spending.power_family(1), sides=2)
    assert design.inflation == pytest.approx(1.117, abs=6e-4)
    expected = [design.inflation * stopping(design, x * design.drift).expected_fraction for x in (0, 0.5, 1, 1.5)]
    assert expected == pytest.approx([1.099, 1.034, 0.812, 0.565], abs=6e-4)


def expected_fraction(fractions, c, drift) -> float:
    found = crossings(fractions, c, -c, drift)
    stops = found.upper + found.lower
    stops[-1] = found.reached[-1]
    return float(np.dot(fractions, stops))


def test_non_binding_beta_spending_futility_matches_rpact():
    t = [0.4, 0.75, 1.0]
    c = efficacy_bounds(t, 0.13, "obrien_fleming", sides=1)
    assert c == pytest.approx([2.1280732, 1.4368565, 1.2468994], abs=1e-6)
    drift, futility = beta_spending(t, c, 0.41, spending.power_family(2.5))
    assert futility[:2] == pytest.approx([-0.83725762, 0.35992547], abs=1e-6)
    assert np.cumsum(crossings(t, c, futility, drift).upper) == pytest.approx([0.10903632, 0.42541278, 0.59], abs=1e-6)
    hsd = spending.hwang_shih_decani
    design = superiority_design([0.2, 0.4, 1.0], 0.07, 0.86, hsd(-1), sides=1, futility=hsd(-2))
    assert design.efficacy == pytest.approx([2.364813, 2.1928805, 1.5660474], abs=1e-6)
    assert design.futility[:2] == pytest.approx([-1.1063623, -0.35992439], abs=1e-6)
    assert design.inflation == pytest.approx(1.0869177, abs=1e-6)


def test_the_design_reports_nominal_levels_spending_and_inflation():
    design = superiority_design(FIVE, 0.05, 0.9, "obrien_fleming", sides=2)
    assert design.nominal_p == pytest.approx(list(norm.sf(design.efficacy)))
    assert design.alpha_spent == pytest.approx(LDBOUNDS_EXIT, rel=1e-4)
    assert design.inflation == pytest.approx((design.drift / (norm.isf(0.025) + norm.isf(0.1))) ** 2)
    assert 1 < design.inflation < 1.05 and design.futility is None
    single = superiority_design([1.0], 0.05, 0.8, sides=2)
    assert single.efficacy == pytest.approx([norm.isf(0.025)]) and single.inflation == pytest.approx(1.0)
    with pytest.raises(ValueError, match="increase"):
        efficacy_bounds([0.5, 0.4, 1.0], 0.05)
    with pytest.raises(ValueError, match="one-sided"):
        superiority_design(FIVE, futility="pocock", sides=2)


def test_fractions_ending_below_one_spend_only_what_they_reached():
    """rpact's x6b (asP, looks at 0.4 and 0.7, one-sided 0.025): a study stopped early spends f(0.7)."""
    bounds = efficacy_bounds([0.4, 0.7], 0.025, "pocock", sides=1)
    assert bounds == pytest.approx([2.223875, 2.3050796], abs=1e-6)


# -- Monte Carlo, independent of the integration


def test_monte_carlo_crossings_under_the_null_spend_alpha_look_by_look():
    for sides, name in ((2, "obrien_fleming"), (1, "pocock")):
        design = superiority_design(FIVE, 0.05, 0.8, name, sides=sides)
        c = np.array(design.efficacy)
        first = first_crossing(simulate(FIVE, 0.0), c, -c if sides == 2 else None)
        for k in range(5):
            assert within(float(np.mean(first <= k)), design.alpha_spent[k]), (name, k)


def test_monte_carlo_power_and_expected_stop_at_the_planned_drift():
    design = superiority_design(FIVE, 0.05, 0.8, "obrien_fleming", sides=2)
    c = np.array(design.efficacy)
    z = simulate(FIVE, design.drift, seed=7)
    assert within(float(rejections(z, c, -c).mean()), 0.8)
    stopped_at = np.asarray(FIVE)[np.minimum(first_crossing(z, c, -c), 4)]
    expected = stopping(design, design.drift).expected_fraction
    assert abs(stopped_at.mean() - expected) <= 4.5 * stopped_at.std() / math.sqrt(DRAWS)


def test_monte_carlo_non_binding_futility_keeps_alpha_and_gives_the_power():
    design = superiority_design(FIVE, 0.025, 0.9, "obrien_fleming", sides=1, futility="obrien_fleming")
    c, a = np.array(design.efficacy), np.array(design.futility)
    null = simulate(FIVE, 0.0)
    assert within(float(rejections(null, c).mean()), 0.025)  # futility ignored: the level is alpha
    assert rejections(null, c, a).mean() < 0.025  # obeyed: lower
    assert within(float(rejections(simulate(FIVE, design.drift, seed=11), c, a).mean()), 0.9)


def test_monte_carlo_equivalence_declared_with_the_power_and_at_most_alpha_at_the_margin():
    design = equivalence_design(FIVE, 0.05, 0.8, "obrien_fleming")
    c, eta = np.array(design.efficacy), design.drift
    root = np.sqrt(FIVE)
    for difference, seed in ((0.0, 1), (eta, 2)):
        w = simulate(FIVE, 0.0, seed=seed)  # (estimate - true difference) / SE
        both = (w + (eta + difference) * root >= c) & (-w + (eta - difference) * root >= c)
        declared = float(both.any(axis=1).mean())
        assert within(declared, float(stopping(design, difference).rejected.sum()))
    assert stopping(design, 0.0).rejected.sum() == pytest.approx(0.8)
    assert stopping(design, eta).rejected.sum() <= 0.05
    single = equivalence_design([1.0], 0.05, 0.8)
    assert single.drift == pytest.approx(norm.isf(0.05) + norm.isf(0.1)) and single.inflation == pytest.approx(1)


# -- mutants: the checks above fail when the formula is wrong


def test_reading_every_look_at_the_fixed_sample_level_rejects_0_142_of_true_nulls():
    naive = np.full(5, norm.isf(0.025))
    found = crossings(FIVE, naive, -naive)
    size = float(found.upper.sum() + found.lower.sum())
    assert size == pytest.approx(0.142, abs=6e-4) and size > 0.05
    simulated = float(np.mean(first_crossing(simulate(FIVE, 0.0), naive, -naive) < 5))
    assert within(simulated, size)
    assert not within(simulated, 0.05)  # the Monte Carlo check above would catch it


def test_a_spending_function_with_t_for_sqrt_t_misses_the_published_bounds():
    def mutant(t, total):
        return 2 * norm.sf(norm.isf(total / 2) / np.clip(np.asarray(t, dtype=float), 1e-12, 1))

    with pytest.raises(AssertionError):
        matches(efficacy_bounds(FIVE, 0.05, mutant, sides=2), LDBOUNDS_OBRIEN_FLEMING, 2e-4)


def test_bounds_that_forget_the_earlier_looks_miss_the_table_and_waste_alpha():
    """Each look's bound from its own increment of alpha, as if the looks were independent."""
    increments = np.diff(LDBOUNDS_EXIT, prepend=0.0)
    mutant = norm.isf(increments / 2)
    with pytest.raises(AssertionError):
        matches(mutant, LDBOUNDS_OBRIEN_FLEMING, 2e-4)
    found = crossings(FIVE, mutant, -mutant)
    assert found.upper.sum() + found.lower.sum() < 0.045  # conservative: less power for the same seeds


def test_repeated_intervals_with_z_multipliers_at_few_seeds_undercover():
    design = superiority_design([0.25, 0.5, 0.75, 1.0], 0.05, 0.8, "obrien_fleming", sides=2)
    assert covered(design.efficacy, use_t=True) == pytest.approx(0.95, abs=0.006)
    assert covered(design.efficacy, use_t=False) < 0.93


def covered(bounds, use_t: bool, seeds_per_look: int = 3, draws: int = 20_000, truth: float = 0.3) -> float:
    """Simultaneous coverage of the repeated intervals over seeds added in blocks to two rows (pooled t, 2n - 2 df)."""
    rng = np.random.default_rng(17)
    looks = len(bounds)
    base = rng.normal(0.0, 1.0, (draws, looks * seeds_per_look))
    other = rng.normal(truth, 1.0, (draws, looks * seeds_per_look))
    cover = np.ones(draws, dtype=bool)
    for k, bound in enumerate(bounds, start=1):
        n = k * seeds_per_look
        x, y = base[:, :n], other[:, :n]
        se = np.sqrt((x.var(axis=1, ddof=1) + y.var(axis=1, ddof=1)) / n)
        lo, hi = repeated_interval(y.mean(axis=1) - x.mean(axis=1), se, bound, 2 * n - 2 if use_t else math.inf)
        cover &= (lo <= truth) & (truth <= hi)
    return float(cover.mean())


def test_t_bound_keeps_the_nominal_level():
    for bound, df in ((2.03, 4), (4.877, 7.5), (1.5, 200)):
        assert stdtr(df, -t_bound(bound, df)) == pytest.approx(norm.sf(bound), rel=1e-9)
    assert t_bound(2.0, math.inf) == 2.0
    assert repeated_interval(1.0, 0.5, 2.0) == pytest.approx((0.0, 2.0))


# -- seeds a row


def cohen_seeds(sigma, delta, alpha, power, tail: float) -> int:
    """The least n with (t_{1-alpha/tail} + t_{power}) sigma sqrt(2 / n) <= delta, df 2n - 2 (Cohen 1988)."""
    n = 2
    while (student.ppf(1 - alpha / tail, 2 * n - 2) + student.ppf(power, 2 * n - 2)) * sigma * math.sqrt(2 / n) > delta:
        n += 1
    return n


def test_fixed_seeds_are_cohens_with_t_quantiles():
    for sigma, delta in ((0.6, 0.5), (0.3, 0.5), (1.0, 0.4), (0.1, 1.0)):
        assert fixed_seeds(sigma, delta) == cohen_seeds(sigma, delta, 0.05, 0.8, 2)
        assert fixed_seeds(sigma, delta, sides=1) == cohen_seeds(sigma, delta, 0.05, 0.8, 1)
        equivalence = cohen_seeds(sigma, delta, 0.05, 0.9, 1)  # TOST at a true 0: t_{1-alpha} + t_{1-beta/2}
        assert fixed_seeds_equivalence(sigma, delta, 0.05, 0.8) == equivalence


def test_a_group_sequential_plan_covers_the_inflated_fixed_seeds_in_whole_looks():
    plan = plan_superiority(0.6, 0.5, seeds_per_look=4, max_looks=10)
    assert plan.fixed == fixed_seeds(0.6, 0.5) and plan.maximum == 4 * plan.looks
    assert plan.maximum >= plan.design.inflation * (plan.fixed - 1) and plan.enough and plan.power >= 0.8
    assert plan.expected_at_effect < plan.expected_at_zero <= plan.maximum
    one = plan_superiority(0.6, 0.5, seeds_per_look=40, max_looks=5)
    assert (one.looks, one.maximum, one.design.inflation) == (1, 40, pytest.approx(1.0))
    short = plan_superiority(1.0, 0.2, seeds_per_look=2, max_looks=3)
    assert (short.looks, short.maximum, short.enough) == (3, 6, False) and short.power < 0.8
    futile = plan_superiority(0.6, 0.5, 4, 10, sides=1, futility="obrien_fleming")
    assert futile.design.futility is not None and futile.expected_at_zero < 0.8 * futile.maximum


def test_an_equivalence_plan_stops_early_when_the_rows_agree():
    plan = plan_equivalence(0.5, 0.5, seeds_per_look=3, max_looks=10)
    assert plan.fixed == fixed_seeds_equivalence(0.5, 0.5) and plan.enough
    assert plan.expected_at_zero < plan.maximum and plan.expected_at_effect > plan.expected_at_zero


def test_sigmas_chi_square_interval_covers_at_its_level():
    rng = np.random.default_rng(23)
    df, draws = 9, 20_000
    estimates = np.sqrt(rng.chisquare(df, draws) / df)  # s for a true sigma of 1
    low, high = sigma_interval(1.0, df, 0.8)
    assert (low, high) == pytest.approx((math.sqrt(df / chi2.ppf(0.9, df)), math.sqrt(df / chi2.ppf(0.1, df))))
    inside = [(s * low <= 1.0 <= s * high) for s in estimates]
    assert within(float(np.mean(inside)), 0.8, draws)
    fewer, middle, more = seeds_range(lambda s: fixed_seeds(s, 0.5), 0.6, df=16)
    assert fewer < middle == fixed_seeds(0.6, 0.5) < more
