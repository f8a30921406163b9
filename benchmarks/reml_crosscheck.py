"""A REML mixed-model cross-check of the two-level test (#69 item 5) on the committed studies' data.

The summary tests each seed-aware comparison with seed_sentence_test (docs/statistics.md): Welch's s^2 / n over
each row's seeds plus the system x sentence part the seeds share, read off the paired bootstrap. Here the same
comparisons are refitted as a linear mixed model by REML (statsmodels, not the project's code), on the per-sentence
scores of every run, with the terms of docs/statistics.md's model:

    y[r, j] = mu_k + a[r] + s[j] + g[k, j] + e[r, j]       run r of row k, test sentence j

mu_k fixed (the comparison is mu_B - mu_A); a the run's (seed's) effect, its variance per row as Welch's s^2 has it;
s the sentence's difficulty, shared by every run; g the system x sentence effect, shared by a row's runs (one
variance for both rows: only their sum enters the difference, and the data identify only the sum once s is in the
model); e the run's own luck on the sentence. y[r, j] is sentence j's first-order share of run r's corpus BLEU
(`linearised`), so a run's mean over the sentences is its corpus BLEU exactly and the fitted difference is the
summary's.

Seeds and sentences are crossed, which statsmodels' MixedLM takes only as variance components within one group;
so fitted (sparse components), one comparison had not finished after 8 minutes even on blocks of 5 sentences. The
model is fitted in an equivalent form instead (`strata`): an orthonormal change of basis along the sentences turns
each run's scores into its mean (times sqrt(N)) and N - 1 contrasts. The contrasts carry no run effect and no fixed
effect, and are independent from one contrast to the next, so each is a group of its own (a random intercept s, a
component g, the residual e); the means are group 0, the only one with the fixed effects and the run effects a.
The likelihood, REML's included, is the sentence-level model's (an orthonormal transform has Jacobian 1). With
`blocks`, sentences are first summed into that many random blocks (each sum over sqrt(its size), which keeps every
variance per sentence): the same model and the same means, the sentence components estimated from blocks - 1
contrasts instead of N - 1. A fit takes 70-80 s a comparison on every sentence, 0.1-2.5 s on 100 blocks (the
test's).

The REML p refers the Wald statistic, the difference over statsmodels' own standard error, to Student's t with
Satterthwaite's degrees of freedom from the REML components (each with the sampling variance of the mean square it
is estimated from, as a balanced design gives it): the test's reference with the plug-in components, where the
test evaluates the seeds' part at its median-unbiased value.

    python benchmarks/reml_crosscheck.py              # the table docs/statistics.md quotes (every sentence)
    python benchmarks/reml_crosscheck.py --blocks 100  # the test's fit (tests/unit/test_reml_crosscheck.py)
"""

from __future__ import annotations

import argparse
import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.special import stdtr
from statsmodels.regression.mixed_linear_model import MixedLM, MixedLMParams, VCSpec

from nmt_core.training.evaluate import PairedBootstrap, SeedSentenceTest, bleu_options
from sweeper.summary.data import read_data
from sweeper.summary.statistics import build_summary

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
# the committed studies with per-sentence data (tests/unit/test_committed_results.py recomputes their summaries)
STUDIES = ("sact_study_tatoeba_cpu_power", "sact_study_transformer_tatoeba_cpu_qknorm")
PARTITION_SEED = 0  # which random blocks, where the fit uses blocks
FLOOR = 1e-3  # a start value's least share of the residual variance (a component at 0 cannot move off it)


@dataclass(frozen=True)
class Committed:
    """One committed seed-aware comparison: the summary's own test of it, and each run's per-sentence scores."""

    study: str
    name: str  # "SACT λ4 vs fixed τ0.89": the row, then its control or baseline
    test: SeedSentenceTest  # as the summary computed it (build_summary, the --from-data path)
    scores: np.ndarray  # (runs, sentences): linearised per-sentence BLEU; a run's mean is its corpus BLEU
    variant: np.ndarray  # (runs,): 0 a run of the control or baseline, 1 of the compared row


def committed_comparisons(study: str) -> list[Committed]:
    """Every seed-aware comparison of a committed study, tested as `sweeper summarize --from-data` tests it (the
    same snapshot, options and build_summary), with the per-sentence scores of its runs."""
    snapshot = read_data(RESULTS / study / "data")
    if len(snapshot.references) != 1:
        raise ValueError(f"{study}: one test set expected (the linearisation here scores one corpus)")
    bleu = bleu_options(snapshot.records[0].config)
    summary = build_summary(
        snapshot.records,
        snapshot.translations,
        snapshot.references,
        snapshot.space.baseline,
        bleu,
        snapshot.space.significance,
    )
    scorer = PairedBootstrap(snapshot.references, 1, **bleu)  # its per-sentence statistics and BLEU, as the test's
    found = []
    for comparison in summary.comparisons:
        if comparison.test is None:
            continue
        sides = (comparison.against.records, comparison.row.records)
        runs = [scorer.stats([snapshot.translations[r.run_id]])[0] for side in sides for r in side]
        scores = np.array([linearised(next(iter(stats.values())), scorer) for stats in runs])
        variant = np.repeat([0, 1], [len(side) for side in sides])
        name = f"{comparison.row.label} vs {comparison.against.label}"
        found.append(Committed(study, name, comparison.test, scores, variant))
    return found


def linearised(stats: np.ndarray, scorer: PairedBootstrap) -> np.ndarray:
    """Each sentence's first-order share of the corpus BLEU of its run, BLEU + grad BLEU . (x_j - mean x), with x_j
    the sentence's statistics (lengths, matches and totals per order) and the gradient at their mean: the
    linearisation docs/statistics.md's model is written in. The gradient is orthogonal to the mean (BLEU is
    homogeneous of degree 0 in the statistics), so the shares average to the corpus BLEU exactly.

    log BLEU = min(0, 1 - r / h) + sum_n log(m_n / t_n) / order; no smoothing enters where every order matches
    somewhere in the corpus (checked)."""
    order = scorer.metric.max_ngram_order
    x = stats.astype(np.float64)
    mean = x.mean(axis=0)
    hypothesis, reference = mean[0], mean[1]
    matches, totals = mean[2 : 2 + order], mean[2 + order :]
    if not (matches > 0).all():
        raise ValueError("an n-gram order without a match in the corpus: smoothed BLEU is not linearised here")
    share = (x[:, 2 : 2 + order] / matches - x[:, 2 + order :] / totals).sum(axis=1) / order
    if hypothesis < reference:  # the brevity penalty's part
        share += reference * x[:, 0] / hypothesis**2 - x[:, 1] / hypothesis
    bleu = float(scorer.score(stats.sum(axis=0, keepdims=True))[0])
    return bleu * (1 + share)


def strata(scores: np.ndarray, blocks: int | None = None, seed: int = PARTITION_SEED) -> np.ndarray:
    """(runs, groups): column 0 each run's mean times sqrt(N), columns 1.. orthonormal contrasts of its sentences
    (or of its `blocks` random block sums over sqrt(block size)), one column per group of the model.

    The basis is a Householder reflection whose first row is sqrt(size / N): orthonormal, so iid sentence effects
    stay iid with the same variances, and a run's constant effect lands in column 0 alone."""
    sentences = scores.shape[1]
    if blocks is None:
        sums, sizes = scores, np.ones(sentences)
    else:
        block = np.random.default_rng(seed).permutation(sentences) % blocks
        sizes = np.bincount(block, minlength=blocks).astype(np.float64)
        sums = np.stack([np.bincount(block, weights=run, minlength=blocks) for run in scores]) / np.sqrt(sizes)
    first = np.sqrt(sizes / sentences)
    v = first.copy()
    v[0] -= 1.0
    return sums @ (np.eye(len(first)) - 2.0 * np.outer(v, v) / (v @ v))  # the reflection is symmetric


def mixed_model(groups: np.ndarray, variant: np.ndarray, sentences: int) -> MixedLM:
    """The MixedLM of `strata`'s columns, one group each: a random intercept (the sentence effect s), a component
    g (one column per row: its system x sentence effect), and in group 0 only, the fixed effects (mu_A, mu_B - mu_A,
    times sqrt(N)) and a component per row of one column per run (its seed effect a, variance N sigma_a^2 in these
    units; a zero column elsewhere, where runs have no effect). The residual is e."""
    runs, count = groups.shape
    exog = np.zeros((runs * count, 2))
    exog[:runs] = math.sqrt(sentences) * np.column_stack([np.ones(runs), variant])
    rows = np.eye(2)[variant]
    seeds = [np.eye(runs)[:, variant == k] for k in (0, 1)]
    absent = np.zeros((runs, 1))
    mats = [[rows] * count] + [[seeds[k]] + [absent] * (count - 1) for k in (0, 1)]
    spec = VCSpec(
        ["system_sentence", "seed_0", "seed_1"],
        [[[str(j) for j in range(m.shape[1])] for m in component] for component in mats],
        mats,
    )
    return MixedLM(
        groups.T.ravel(), exog, np.repeat(np.arange(count), runs), exog_re=np.ones((runs * count, 1)), exog_vc=spec
    )


def start_values(groups: np.ndarray, variant: np.ndarray, sentences: int) -> MixedLMParams:
    """Method-of-moments values of every component (in a balanced design, where they are positive, they are the
    REML estimates): the optimiser starts near the answer, not at statsmodels' default of 1 for components whose
    ratios to the residual range from 1e-6 to 5."""
    contrasts, n = groups[:, 1:], np.bincount(variant)
    means = np.stack([contrasts[variant == k].mean(axis=0) for k in (0, 1)])
    residual = sum(((contrasts[variant == k] - means[k]) ** 2).sum() for k in (0, 1)) / (
        contrasts.shape[1] * (len(variant) - 2)
    )
    own = residual * (1 / n).sum()
    floor = FLOOR * residual
    shared = max(((means[1] - means[0]) ** 2).mean() - own, 2 * floor) / 2
    sentence = max((means.mean(axis=0) ** 2).mean() - shared / 2 - own / 4, floor)
    seeds = [max(float(groups[variant == k, 0].var(ddof=1)) - residual, floor) for k in (0, 1)]
    run_means = groups[:, 0] / math.sqrt(sentences)
    fixed = [run_means[variant == 0].mean(), run_means[variant == 1].mean() - run_means[variant == 0].mean()]
    return MixedLMParams.from_components(
        fe_params=np.array(fixed), cov_re=np.array([[sentence / residual]]), vcomp=np.array([shared, *seeds]) / residual
    )


@dataclass(frozen=True)
class Reml:
    """One comparison refitted by REML: its difference, statsmodels' standard error of it, and the components."""

    delta: float
    standard_error: float  # statsmodels' own: (X' V^-1 X)^-1 at the REML estimates
    seeds: tuple[int, int]
    seed_parts: tuple[float, float]  # each row's variance of one run's corpus BLEU: sigma_a^2 + sigma_e^2 / N
    shared: float  # (sigma_g,A^2 + sigma_g,B^2) / N: the system x sentence part of Var(delta)
    shared_variance: float  # its sampling variance, from the contrasts it is estimated from
    sentence_sd: float  # sigma_s, sigma_e per sentence (BLEU points): the shared difficulty and a run's own luck
    residual_sd: float
    p_normal: float  # statsmodels' Wald p (a normal reference)
    converged: bool

    @property
    def df(self) -> float:
        """Satterthwaite's df of the variance, 2 V^2 / sum of its terms' sampling variances: a row's seed part has
        n - 1 df (s^2's chi-square), the shared part its contrasts' (shared_variance)."""
        spread = sum((v / n) ** 2 / (n - 1) for v, n in zip(self.seed_parts, self.seeds)) + self.shared_variance / 2
        return self.standard_error**4 / spread

    @property
    def p_value(self) -> float:
        """Two-sided, t-referenced at `df`: the REML p the test's p is checked against."""
        return 2 * float(stdtr(self.df, -abs(self.delta) / self.standard_error))

    @property
    def p_between_seeds(self) -> float:
        """The same t on n_A + n_B - 2 df, the runs less the rows (what one seed variance for both rows gives)."""
        return 2 * float(stdtr(sum(self.seeds) - 2, -abs(self.delta) / self.standard_error))


def fit_reml(comparison: Committed, blocks: int | None = None) -> Reml:
    """statsmodels' REML fit of `mixed_model` to the comparison's scores (every sentence, or `blocks` blocks)."""
    sentences = comparison.scores.shape[1]
    groups = strata(comparison.scores, blocks)
    model = mixed_model(groups, comparison.variant, sentences)
    with warnings.catch_warnings():  # statsmodels warns where a component sits at its bound of 0, as g does here
        warnings.simplefilter("ignore")
        fitted = model.fit(reml=True, start_params=start_values(groups, comparison.variant, sentences))
    shared_component, *seed_components = fitted.vcomp
    seeds = tuple(int(n) for n in np.bincount(comparison.variant))
    own = fitted.scale * sum(1 / n for n in seeds)  # the contrasts' difference of row means: 2 sigma_g^2 + own
    return Reml(
        delta=float(fitted.fe_params[1]),
        standard_error=float(fitted.bse_fe[1]),
        seeds=seeds,
        seed_parts=tuple(float(v + fitted.scale) / sentences for v in seed_components),
        shared=2 * float(shared_component) / sentences,
        shared_variance=2 * (2 * shared_component + own) ** 2 / ((groups.shape[1] - 1) * sentences**2),
        sentence_sd=math.sqrt(float(fitted.cov_re[0, 0])),
        residual_sd=math.sqrt(fitted.scale),
        p_normal=float(fitted.pvalues[1]),
        converged=bool(fitted.converged),
    )


def refitted(blocks: int | None = None) -> list[tuple[Committed, Reml]]:
    """Every committed comparison with its REML refit."""
    return [(c, fit_reml(c, blocks)) for study in STUDIES for c in committed_comparisons(study)]


def print_tests(found: list[tuple[Committed, Reml]]) -> None:
    """The two tests side by side: the difference, its standard error, df and p; REML's p also on the runs' df and
    on statsmodels' own normal reference."""
    print(
        "| comparison | delta | SE: two-level / REML | df: two-level / REML | p: two-level | p: REML | "
        "p: REML, n_A + n_B - 2 df | p: REML, normal |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for comparison, reml in found:
        test = comparison.test
        print(
            f"| {comparison.name} | {test.delta:+.3f} | {test.standard_error:.4f} / {reml.standard_error:.4f} | "
            f"{test.df:.1f} / {reml.df:.1f} | {test.p_value:.3f} | {reml.p_value:.3f} | "
            f"{reml.p_between_seeds:.3f} | {reml.p_normal:.3f} |"
        )


def print_estimates(found: list[tuple[Committed, Reml]]) -> None:
    """What each variance is made of: the rows' seed parts (s^2 and REML's), the shared part (the bootstrap's and
    REML's), and REML's sentence-level standard deviations."""
    print("| comparison | s^2: two-level | seed parts: REML | shared: bootstrap / REML | sigma_s, sigma_e |")
    print("| --- | --- | --- | --- | --- |")
    for comparison, reml in found:
        test = comparison.test
        print(
            f"| {comparison.name} | {test.seed_variances[0]:.4f}, {test.seed_variances[1]:.4f} | "
            f"{reml.seed_parts[0]:.4f}, {reml.seed_parts[1]:.4f} | {test.sentence_shared:.2g} / {reml.shared:.2g} | "
            f"{reml.sentence_sd:.1f}, {reml.residual_sd:.1f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=None, help="random blocks of sentences (default: every one)")
    found = refitted(parser.parse_args().blocks)
    if not all(reml.converged for _, reml in found):
        raise SystemExit("a REML fit did not converge")
    print_tests(found)
    print()
    print_estimates(found)


if __name__ == "__main__":
    main()
