"""The two-level test against a REML mixed model (#69 item 5): on the committed studies' data, each seed-aware
comparison as the summary tests it (build_summary, the `sweeper summarize --from-data` path) and the same comparison
refitted by REML with statsmodels (benchmarks/reml_crosscheck.py: per-sentence BLEU, a seed effect per run with its
variance per row, crossed sentence and system x sentence effects) must agree.

What may differ, and so the tolerances: in this balanced design REML's seed part of a row is its s^2 (REML is the
ANOVA estimator there; statsmodels' optimiser stops within 0.7% of it); the shared part is the bootstrap's
covariance between seeds in the test and REML's system x sentence variance here, both about 0 on these data, REML's
from 99 block contrasts with a standard deviation of 3.5-5% of Var(delta) (2% of the standard error); the test's df
evaluates the seeds' part at its median-unbiased value, REML's is the plug-in Satterthwaite df (the same where the
shared part is 0). So the standard errors must agree within 5% (over two of those standard deviations) and the p-values
within 0.05, on the same side of 0.05. The neighbours the calibration rejects (docs/statistics.md) must not pass:
dropping the seed term, or counting the seed x sentence part twice (the test before #62), leaves the window.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from scipy.special import stdtr

from nmt_core.training.evaluate import SeedSentenceTest, variance_of

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
from reml_crosscheck import Committed, Reml, refitted  # noqa: E402

BLOCKS = 100  # random blocks of sentences: 99 contrasts for the sentence components, a fit in 0.1-2.5 s
SE_TOLERANCE, P_TOLERANCE, ALPHA = 0.05, 0.05, 0.05
# each committed comparison and the two-level p its summary prints (docs/results/*/summary.md)
PRINTED = {
    "SACT λ4 vs fixed τ0.89": 0.869,
    "SACT λ10-first_pass vs learned λ10": 0.586,
    "SACT λ10-first_pass vs fixed τ0.1": 0.283,
}


@pytest.fixture(scope="module")
def fits() -> dict[str, tuple[Committed, Reml]]:
    """Each committed comparison by name, as the summary tested it and as REML refits it."""
    return {comparison.name: (comparison, reml) for comparison, reml in refitted(BLOCKS)}


def agrees(standard_error: float, p_value: float, reml: Reml) -> bool:
    """The two-level test's standard error and p against REML's, within the module's tolerances."""
    return (
        abs(standard_error / reml.standard_error - 1) < SE_TOLERANCE
        and abs(p_value - reml.p_value) < P_TOLERANCE
        and (p_value < ALPHA) == (reml.p_value < ALPHA)
    )


def with_variance(test: SeedSentenceTest, variance: float) -> tuple[float, float]:
    """(standard error, p) of the test's difference with another variance at the test's df: what a changed formula
    would print."""
    if variance == 0:
        return 0.0, float(test.delta == 0)
    return math.sqrt(variance), 2 * float(stdtr(test.df, -abs(test.delta) / math.sqrt(variance)))


NEIGHBOURS: dict[str, Callable[[SeedSentenceTest], float]] = {
    "no seed term": lambda t: t.sentence_shared,
    "the double count before #62": lambda t: variance_of(t.seed_variances, t.seeds, t.sentence_variance),
}


def test_the_refitted_comparisons_are_the_committed_ones(fits):
    assert {name: round(c.test.p_value, 3) for name, (c, _) in fits.items()} == PRINTED


@pytest.mark.parametrize("name", sorted(PRINTED))
def test_reml_agrees_with_the_two_level_test(name, fits):
    comparison, reml = fits[name]
    test = comparison.test
    assert reml.converged
    assert reml.delta == pytest.approx(test.delta, abs=1e-6)  # a run's mean of its shares is its logged BLEU
    assert agrees(test.standard_error, test.p_value, reml), (test, reml, reml.df, reml.p_value)


@pytest.mark.parametrize("neighbour", sorted(NEIGHBOURS))
def test_a_wrong_variance_formula_leaves_the_window(neighbour, fits):
    for comparison, reml in fits.values():
        test = comparison.test
        assert with_variance(test, variance_of(test.seed_variances, test.seeds, test.sentence_shared)) == (
            pytest.approx((test.standard_error, test.p_value))
        )
        assert not agrees(*with_variance(test, NEIGHBOURS[neighbour](test)), reml), comparison.name
