import json
import os
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from sacrebleu.metrics import BLEU

from nmt_core.training.decode import Translation
from nmt_core.training.evaluate import (
    ApproximateRandomization,
    PairedBootstrap,
    corpus_bleu,
    holm,
    trace_table,
    write_traces,
)

REFS = [f"the cat number {i} sat on the mat today" for i in range(60)]


def test_bleu_matches_sacrebleu_and_carries_its_signature():
    hyps = [r.replace("mat", "rug") for r in REFS]
    result = corpus_bleu(hyps, REFS, tokenize="none", lowercase=True)
    assert result.score == pytest.approx(BLEU(tokenize="none", lowercase=True).corpus_score(hyps, [REFS]).score)
    assert "tok:none" in result.signature and "case:lc" in result.signature


def _degrade(references: list[str], every: int, offset: int, old: str, new: str) -> list[str]:
    return [r.replace(old, new) if i % every == offset else r for i, r in enumerate(references)]


def _sacrebleu_paired(
    tmp_path, baseline: list[str], system: list[str], references: list[str], test: str = "bs", n: int = 1000
) -> float:
    """p-value of the real `sacrebleu --paired-bs` (or `--paired-ar`) command line on the same files."""
    for name, lines in (("ref", references), ("base", baseline), ("sys", system)):
        (tmp_path / f"{name}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "sacrebleu",
            str(tmp_path / "ref.txt"),
            "-i",
            str(tmp_path / "base.txt"),
            str(tmp_path / "sys.txt"),
            "-m",
            "bleu",
            f"--paired-{test}",
            f"--paired-{test}-n",
            str(n),
            "-f",
            "json",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "SACREBLEU_SEED": "12345"},
    )
    return json.loads(out.stdout)[1]["BLEU"]["p_value"]


@pytest.mark.parametrize("better", [True, False])
def test_paired_bootstrap_equals_sacrebleu_paired_bs_both_ways(tmp_path, better):
    """Two-sided with the +1 correction: a worse system gets the same small p as a better one, not p = 1."""
    baseline = _degrade(REFS, 7, 0, "sat on", "is near")
    system = _degrade(REFS, 9, 1, "today", "") if better else _degrade(REFS, 4, 2, "cat number", "dog")
    test = PairedBootstrap({"test": REFS}, resamples=1000)
    base_scores, sys_scores = test.scores([{"test": baseline}]), test.scores([{"test": system}])
    ours = test.p_value(base_scores, sys_scores)
    assert ours == pytest.approx(_sacrebleu_paired(tmp_path, baseline, system, REFS), abs=1e-12)
    assert 1 / 1001 < ours < 0.5  # a p-value inside the range, not a floor both sides hit by accident
    assert (sys_scores.mean > base_scores.mean) == better


@pytest.mark.parametrize("better", [True, False])
def test_approximate_randomization_equals_sacrebleu_paired_ar_both_ways(tmp_path, better):
    """The same swaps as sacrebleu draws, the same +1 correction: its p-value to the last digit."""
    baseline = _degrade(REFS, 7, 0, "sat on", "is near")
    system = _degrade(REFS, 9, 1, "today", "") if better else _degrade(REFS, 4, 2, "cat number", "dog")
    bootstrap = PairedBootstrap({"test": REFS}, resamples=100)
    test = ApproximateRandomization(bootstrap, {"test": len(REFS)}, trials=2000)
    ours = test.p_value(bootstrap.stats([{"test": baseline}]), bootstrap.stats([{"test": system}]))
    assert ours == pytest.approx(_sacrebleu_paired(tmp_path, baseline, system, REFS, "ar", 2000), abs=1e-12)
    assert 1 / 2001 < ours < 1  # inside the range: neither the floor nor "no difference"


def test_approximate_randomization_of_equal_or_seed_averaged_systems():
    """Equal systems: p = 1. Two seeds each: the same p as one seed when both seeds are the same outputs."""
    good, bad = _degrade(REFS, 9, 1, "today", ""), _degrade(REFS, 4, 2, "cat number", "dog")
    bootstrap = PairedBootstrap({"test": REFS}, resamples=100)
    test = ApproximateRandomization(bootstrap, {"test": len(REFS)}, trials=500)
    assert test.p_value(bootstrap.stats([{"test": good}]), bootstrap.stats([{"test": good}])) == 1.0
    one = test.p_value(bootstrap.stats([{"test": bad}]), bootstrap.stats([{"test": good}]))
    two = test.p_value(bootstrap.stats([{"test": bad}] * 2), bootstrap.stats([{"test": good}] * 2))
    assert one == pytest.approx(two) and one < 0.05


def test_bootstrap_interval_of_a_difference_holds_the_difference():
    baseline, system = _degrade(REFS, 7, 0, "sat on", "is near"), _degrade(REFS, 9, 1, "today", "")
    test = PairedBootstrap({"test": REFS}, resamples=500)
    base_scores, sys_scores = test.scores([{"test": baseline}]), test.scores([{"test": system}])
    low, high = test.interval(base_scores, sys_scores)
    assert low < sys_scores.mean - base_scores.mean < high
    assert (low, high) == pytest.approx(tuple(np.quantile(sys_scores.averaged - base_scores.averaged, [0.025, 0.975])))


def test_equal_systems_are_not_different():
    """sacrebleu --paired-bs says p = 1/201 here (its statistic is 0 > 0 never): we say p = 1."""
    hyps = _degrade(REFS, 2, 1, "cat", "dog")
    test = PairedBootstrap({"test": REFS}, resamples=200)
    assert test.p_value(test.scores([{"test": hyps}]), test.scores([{"test": hyps}])) == 1.0


def test_seeds_are_averaged_per_resample_not_pooled_as_sentences():
    """Two seeds of one system: its score is the mean of the seeds' BLEU, on the same resampled sentences."""
    good, bad = _degrade(REFS, 9, 1, "today", ""), _degrade(REFS, 2, 0, "sat on the mat", "")
    test = PairedBootstrap({"test": REFS}, resamples=300)
    scores = test.scores([{"test": good}, {"test": bad}])
    single = [test.scores([{"test": h}]) for h in (good, bad)]
    assert scores.mean == pytest.approx((single[0].mean + single[1].mean) / 2)
    assert np.allclose(scores.averaged, (single[0].averaged + single[1].averaged) / 2)
    assert np.array_equal(scores.resampled, np.concatenate([one.resampled for one in single]))  # each seed its own
    pooled = BLEU().corpus_score(good + bad, [REFS + REFS]).score
    assert abs(scores.mean - pooled) > 0.1  # what concatenating seeds as extra sentences would have reported


def test_statistics_against_cached_references_and_their_resampled_sums_are_the_plain_ones_to_the_bit():
    """A system's statistics against the references counted once equal those against references passed each time;
    a resample's sums as a product of draw counts equal the drawn sentences' statistics summed one by one."""
    from nmt_core.training.evaluate import _sentence_stats, bleu_metric

    hyps = _degrade(REFS, 3, 0, "mat", "rug")
    test = PairedBootstrap({"test": REFS}, resamples=300)
    [stats] = test.stats([{"test": hyps}])
    assert np.array_equal(stats["test"], _sentence_stats(bleu_metric(), hyps, REFS))
    gathered = stats["test"][test.indices["test"]].sum(axis=1)
    resampled = test.resampled("test", stats["test"])
    assert resampled.dtype == gathered.dtype and np.array_equal(resampled, gathered)
    assert len(np.unique(resampled, axis=0)) > 1  # resamples that differ, not one sum repeated


def test_several_test_sets_are_resampled_separately_and_averaged():
    other = [f"a dog called {i} runs in the park" for i in range(40)]
    test = PairedBootstrap({"a": REFS, "b": other}, resamples=100)
    hyps = {"a": _degrade(REFS, 3, 0, "mat", "rug"), "b": _degrade(other, 2, 0, "park", "garden")}
    scores = test.scores([hyps])
    assert test.indices["a"].shape == (100, 60) and test.indices["b"].shape == (100, 40)
    expected = np.mean([BLEU().corpus_score(hyps[s], [refs]).score for s, refs in (("a", REFS), ("b", other))])
    assert scores.mean == pytest.approx(expected) and scores.averaged.shape == (100,)


def test_holm_adjusts_step_down_and_keeps_the_order():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5]) == [0.5] and holm([0.4, 0.9]) == pytest.approx([0.8, 0.9])


def test_trace_table_schema_and_parquet_round_trip(tmp_path):
    weights = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    translations = [Translation([5, 6], -1.0, weights, [0.5, 2.0], None)]
    table = trace_table(translations, [["hello", "world"]])
    path = tmp_path / "dev.parquet"
    write_traces(table, str(path))
    rows = pq.read_table(path).to_pylist()
    assert [r["token"] for r in rows] == ["hello", "world"]
    assert [r["argmax_src"] for r in rows] == [0, 2]
    assert rows[0]["tau"] == 0.5 and rows[0]["sentinel"] is None
    assert rows[1]["weights"] == pytest.approx([0.1, 0.1, 0.8])
    assert rows[0]["entropy"] == pytest.approx(
        -(0.7 * torch.tensor(0.7).log() + 0.2 * torch.tensor(0.2).log() + 0.1 * torch.tensor(0.1).log()).item(),
        rel=1e-5,
    )


def test_alignment_error_rate_on_a_hand_made_alignment():
    from nmt_core.training.evaluate import alignment_error_rate, attention_alignment

    sure = {(0, 0), (1, 2), (2, 1)}
    assert alignment_error_rate(sure, sure) == 0.0
    assert alignment_error_rate({(0, 0), (1, 1)}, sure) == pytest.approx(1 - 2 / 5)  # 1 of 2 right, 3 gold
    assert alignment_error_rate({(0, 0), (1, 1)}, sure, possible={(1, 1)}) == pytest.approx(1 - 3 / 5)
    # attention: target word 0 looks at source 0, word 1 at source 2, word 2 at source 2 (gold says 1)
    weights = np.array([[0.8, 0.1, 0.1], [0.1, 0.2, 0.7], [0.3, 0.3, 0.4]])
    score = attention_alignment([weights], [[(0, 0), (2, 1), (1, 2)]])
    assert score.aer == pytest.approx(1 - 4 / 6)  # predicted {(0,0),(2,1),(2,2)}: 2 of 3 right
    assert score.gold_mass == pytest.approx((0.8 + 0.7 + 0.3) / 3)


def test_alignment_bootstrap_scores_the_pooled_aer_and_gold_mass():
    """Summed per-sentence link counts give exactly the pooled AER and gold mass of attention_alignment, so the
    bootstrap resamples what the table reports."""
    from nmt_core.training.evaluate import AlignmentBootstrap, attention_alignment

    rng = np.random.default_rng(0)
    weights = [rng.dirichlet(np.ones(4), size=3) for _ in range(5)]
    gold = [[(0, 0), (1, 1), (3, 2)], [], [(2, 0), (2, 1)], [(0, 0)], [(1, 2), (3, 2)]]
    score = attention_alignment(weights, gold)
    sizes = {"test": 5}
    aer = AlignmentBootstrap(sizes, "aer", resamples=50).scores_of_stats([{"test": score.per_sentence}])
    mass = AlignmentBootstrap(sizes, "gold_attention", resamples=50).scores_of_stats([{"test": score.per_sentence}])
    assert aer.mean == pytest.approx(score.aer) and mass.mean == pytest.approx(score.gold_mass)
    assert aer.averaged.shape == (50,) and 0 <= aer.averaged.min() <= aer.averaged.max() <= 1


def test_bleu_of_resampled_statistics_is_sacrebleus_to_the_last_bit():
    """The bootstrap's fast BLEU (no BLEUScore per resample) gives sacrebleu's own numbers: no matches, zero
    matches of some orders (smoothing), short outputs (brevity penalty), an empty system."""
    import random

    from nmt_core.training.evaluate import _bleu_from_stats, _sentence_stats, bleu_metric

    rng, metric = random.Random(0), bleu_metric()
    refs = [" ".join(f"w{rng.randint(0, 50)}" for _ in range(rng.randint(1, 12))) for _ in range(100)]
    for quality in (0.0, 0.05, 0.5, 1.0):
        hyps = [" ".join(w if rng.random() < quality else "x" for w in r.split()[: rng.randint(0, 12)]) for r in refs]
        stats = _sentence_stats(metric, hyps, refs)
        rows = np.vstack(
            [
                stats[np.random.default_rng(1).choice(100, size=(200, 100))].sum(axis=1),
                stats[:5],
                np.zeros((1, stats.shape[1]), "float32"),
            ]
        )
        expected = [metric._compute_score_from_stats(list(row)).score for row in rows]
        assert _bleu_from_stats(metric, rows).tolist() == expected


def _scores(full: list[float], resampled: list[list[float]]):
    from nmt_core.training.evaluate import SystemScores

    return SystemScores(np.array(full), np.array(resampled))


def satterthwaite(seed_terms: list[float], seeds: list[int], shared: float, shared_variance: float) -> float:
    """docs/statistics.md's df, from its formula: the seed part S at S nu / median(chi2_nu), nu S's Welch df."""
    from scipy import stats

    seed_part = sum(seed_terms)
    welch = seed_part**2 / sum(t**2 / (n - 1) for t, n in zip(seed_terms, seeds))
    median_unbiased = seed_part * welch / stats.chi2.ppf(0.5, welch)
    return (median_unbiased + shared) ** 2 / (median_unbiased**2 / welch + shared_variance / 2)


def resample_terms(base: list[list[float]], system: list[list[float]]) -> list[float]:
    """z_r of each resample r, from plain loops over (seeds, resamples) scores: the seed-averaged difference's
    squared deviation less each system's (mean_i x_i^2 - mean_i(x_i)^2) / (n - 1), x_i seed i's deviation from its
    own mean. The shared part is sum_r z_r / (R - 1), its Monte-Carlo variance Var(z) / R."""
    centred = [[[x - sum(seed) / len(seed) for x in seed] for seed in seeds] for seeds in (base, system)]
    z = []
    for r in range(len(base[0])):
        averages = [sum(seed[r] for seed in seeds) / len(seeds) for seeds in centred]
        z.append((averages[1] - averages[0]) ** 2)
        for seeds, mean in zip(centred, averages):
            z[-1] -= (sum(seed[r] ** 2 for seed in seeds) / len(seeds) - mean**2) / (len(seeds) - 1)
    return z


def test_seed_sentence_test_is_welchs_t_test_where_the_test_sentences_do_not_vary():
    """Every resample scoring each seed as its full set (no sentence variance): the test is Welch's unequal-variance
    t-test on the seeds' scores, p and interval alike, as scipy computes it from the formula's own statistics."""
    from scipy import stats

    from nmt_core.training.evaluate import seed_sentence_test

    base, system = [4.54, 4.1, 4.9, 4.3, 5.0], [4.39, 3.8, 4.9, 4.6]
    test = seed_sentence_test(_scores(base, [[b] * 30 for b in base]), _scores(system, [[s] * 30 for s in system]))
    welch = stats.ttest_ind(system, base, equal_var=False)
    assert test.sentence_variance == 0
    assert test.p_value == pytest.approx(welch.pvalue, rel=1e-9)
    low, high = welch.confidence_interval(0.95)
    assert test.interval == pytest.approx((low, high), rel=1e-9)
    assert test.delta == pytest.approx(np.mean(system) - np.mean(base))


def test_seed_sentence_test_adds_only_the_shared_sentence_part_to_the_seed_variance():
    """Var = s_A^2 / n_A + s_B^2 / n_B + V_shared, V_shared the resamples' variance of the seed-averaged difference
    less each system's own per-seed part over n (docs/statistics.md), with Satterthwaite's degrees of freedom (the
    seed part median-unbiased, the shared part with the Monte-Carlo variance of its resample terms z_r), computed
    here term by term from plain loops."""
    from scipy import stats

    from nmt_core.training.evaluate import seed_sentence_test

    rng = np.random.default_rng(3)
    base_full, system_full = [4.5, 4.0, 4.8], [5.1, 4.4]
    shared_a, shared_b = rng.normal(0, 0.25, 400), rng.normal(0, 0.25, 400)
    base_resampled = [[b + m + e for m, e in zip(shared_a, rng.normal(0, 0.3, 400))] for b in base_full]
    system_resampled = [[s + m + e for m, e in zip(shared_b, rng.normal(0, 0.2, 400))] for s in system_full]
    test = seed_sentence_test(_scores(base_full, base_resampled), _scores(system_full, system_resampled))
    averages = [[sum(column) / len(column) for column in zip(*seeds)] for seeds in (base_resampled, system_resampled)]
    whole = statistics_variance([s - b for b, s in zip(*averages)])
    own = [
        (sum(statistics_variance(seed) for seed in seeds) / len(seeds) - statistics_variance(average))
        * len(seeds)
        / (len(seeds) - 1)
        for seeds, average in zip((base_resampled, system_resampled), averages)
    ]
    shared = whole - own[0] / 3 - own[1] / 2
    z = resample_terms(base_resampled, system_resampled)
    assert sum(z) / 399 == pytest.approx(shared, rel=1e-9)
    seed_terms = [statistics_variance(base_full) / 3, statistics_variance(system_full) / 2]
    variance = sum(seed_terms) + shared
    df = satterthwaite(seed_terms, [3, 2], shared, statistics_variance(z) / 400)
    plug_in = variance**2 / (seed_terms[0] ** 2 / 2 + seed_terms[1] ** 2 / 1 + statistics_variance(z) / 800)
    assert test.shared_variance == pytest.approx(statistics_variance(z) / 400, rel=1e-9) and df < plug_in / 1.3
    delta = sum(system_full) / 2 - sum(base_full) / 3
    assert test.sentence_variance == pytest.approx(whole, rel=1e-9)
    assert test.sentence_shared == pytest.approx(shared, rel=1e-9) and 0.08 < shared < 0.17  # 2 * 0.25^2
    assert test.df == pytest.approx(df, rel=1e-9)
    assert test.p_value == pytest.approx(2 * stats.t.sf(abs(delta) / variance**0.5, df), rel=1e-9)
    half = stats.t.ppf(0.975, df) * variance**0.5
    assert test.interval == pytest.approx((delta - half, delta + half), rel=1e-9)


def statistics_variance(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return sum((v - mean) ** 2 for v in values) / (len(values) - 1)


def test_the_df_holds_the_level_at_two_seeds_a_row_where_the_plug_in_does_not():
    """Normal theory at 2 seeds a row: each s^2 / n a chi-square(1) multiple, the shared part (a tenth or a third
    of Var(d)) with 30 df. The plug-in Satterthwaite df rejects about 6% of nulls (the shared part's many df take
    the weight of the small s^2); the seed part at its median-unbiased value holds 4-5.3%. Monte-Carlo SE 0.1%."""
    from scipy import stats

    from nmt_core.training.evaluate import variance_of, welch_df

    rng = np.random.default_rng(11)
    for share in (0.1, 0.3):
        seed_variances = (1 - share) * rng.chisquare(1, (40000, 2))  # s^2 with E s^2 / 2 = (1 - share) / 2 each
        shared = share * rng.chisquare(30, 40000) / 30
        delta = rng.standard_normal(40000)  # Var(d) = 1
        pairs = list(zip(map(tuple, seed_variances.tolist()), shared.tolist()))
        variance = np.array([variance_of(v, (2, 2), c) for v, c in pairs])
        df = np.array([welch_df(v, (2, 2), c, c**2 / 15) for v, c in pairs])  # Var of a 30-df estimate: 2 c^2 / 30
        plug_in = variance**2 / ((seed_variances**2 / 4).sum(axis=1) + shared**2 / 30)
        t = np.abs(delta) / np.sqrt(variance)
        rate, plug_in_rate = (np.mean(2 * stats.t.sf(t, f) < 0.05) for f in (df, plug_in))
        assert 0.04 < rate < 0.053 < 0.056 < plug_in_rate, (share, rate, plug_in_rate)


def test_seed_sentence_test_needs_two_seeds_and_says_equal_systems_are_equal():
    from nmt_core.training.evaluate import seed_sentence_test

    one = _scores([4.0], [[4.0, 4.1]])
    with pytest.raises(ValueError, match="at least 2 seeds"):
        seed_sentence_test(one, _scores([4.0, 4.2], [[4.0, 4.1], [4.2, 4.3]]))
    same = _scores([4.0, 4.2], [[4.0, 4.0], [4.2, 4.2]])
    assert seed_sentence_test(same, same).p_value == 1.0


def test_the_minimum_detectable_difference_and_the_planning_figure_follow_the_formula():
    """MDD = (t_{1-alpha/2,df} + t_{power,df}) * sqrt((s_A^2 + s_B^2) / n + V_shared), df Welch-Satterthwaite's at
    n seeds a row, from scipy's t quantiles; the planning figure is the least n whose MDD is at most the
    difference asked for."""
    from scipy import stats

    from nmt_core.training.evaluate import SeedSentenceTest, detectable, seeds_to_detect

    shared, shared_variance = 0.02**2, 2 * 0.02**4 / 50
    test = SeedSentenceTest(
        -0.15, (0.33**2, 0.40**2), (5, 5), 0.03**2, 7.7, 0.5, (-0.6, 0.3), shared, 0, shared_variance
    )

    def mdd(n: int, alpha: float) -> float:
        terms = [0.33**2 / n, 0.40**2 / n]
        variance = sum(terms) + shared
        df = satterthwaite(terms, [n, n], shared, shared_variance)
        return (stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(0.8, df)) * variance**0.5

    for alpha in (0.05, 0.05 / 3):
        assert detectable(test, alpha, 0.8) == pytest.approx(mdd(5, alpha), rel=1e-9)
        expected = next(n for n in range(2, 1000) if mdd(n, alpha) <= 0.15)
        assert 20 < seeds_to_detect(test, 0.15, alpha, 0.8, most=1000) == expected
    assert seeds_to_detect(test, 0.15, 0.05, 0.8, most=10) is None  # more than 10 would be needed
    hidden = SeedSentenceTest(-0.1, (0.1, 0.1), (5, 5), 0.5, 8, 0.9, (-2, 2), 0.5, 0.0, shared_variance)
    assert seeds_to_detect(hidden, 0.1, 0.05, 0.8, 1000) is None  # the shared part alone exceeds it


def test_equivalence_is_two_one_sided_tests_at_the_margin():
    """TOST p = max(P(T_df > (d + m) / SE), P(T_df < (d - m) / SE)) from scipy; a mutated sign fails it."""
    from scipy import stats

    from nmt_core.training.evaluate import SeedSentenceTest, equivalence_p

    test = SeedSentenceTest(0.1, (0.09, 0.16), (5, 5), 0.01, 7.7, 0.5, (-0.6, 0.8), 0.01, 0.0, 1e-5)
    se = (0.09 / 5 + 0.16 / 5 + 0.01) ** 0.5
    for margin in (0.3, 1.0, 2.0):
        expected = max(stats.t.sf((0.1 + margin) / se, 7.7), stats.t.cdf((0.1 - margin) / se, 7.7))
        assert equivalence_p(test, margin) == pytest.approx(expected, rel=1e-9)
    assert equivalence_p(test, 2.0) < 0.01 < 0.2 < equivalence_p(test, 0.3)


def test_the_sentence_variance_splits_into_what_seeds_share_and_what_each_adds():
    """V_I = (mean_i Var(seed i) - Var(seed average)) * n / (n - 1) per system, the shared part the difference's
    variance less V_I / n of each, from plain loops over the resamples; a seed's own part shrinks with more seeds."""
    from nmt_core.training.evaluate import seed_sentence_test

    rng = np.random.default_rng(5)
    shared_a, shared_b = rng.normal(0, 0.3, 500), rng.normal(0, 0.3, 500)
    base = [[4.0 + m + e for m, e in zip(shared_a, rng.normal(0, 0.2, 500))] for _ in range(3)]
    system = [[4.2 + m + e for m, e in zip(shared_b, rng.normal(0, 0.2, 500))] for _ in range(2)]
    test = seed_sentence_test(_scores([4.0, 4.1, 3.9], base), _scores([4.2, 4.4], system))

    def variance(values: list[float]) -> float:
        return statistics_variance(values)

    own = []
    for seeds in (base, system):
        average = [sum(column) / len(seeds) for column in zip(*seeds)]
        single = sum(variance(seed) for seed in seeds) / len(seeds)
        own.append((single - variance(average)) * len(seeds) / (len(seeds) - 1))
    assert test.sentence_per_seed == pytest.approx(sum(own), rel=1e-9)
    assert test.sentence_shared == pytest.approx(test.sentence_variance - own[0] / 3 - own[1] / 2, rel=1e-9)
    assert 0.15 < test.sentence_shared < 0.2 and 0.06 < test.sentence_per_seed < 0.1  # 2 * 0.3^2 and 2 * 0.2^2


def test_the_df_of_a_variance_with_nothing_in_it_is_infinite_and_never_a_division_by_zero():
    """Two rows whose seeds and resamples all agree: the variance is 0, the df infinite (not 0, which made the
    minimum detectable difference NaN), and a seed part whose square underflows divides nothing by zero."""
    from nmt_core.training.evaluate import welch_df

    assert welch_df((0.0, 0.0), (3, 3), 0.0, 0.24) == float("inf")
    assert welch_df((1e-300, 0.0), (3, 3), 0.0, 0.0) == float("inf")
    assert welch_df((1e-300, 0.0), (3, 3), 1.0, 0.5) == pytest.approx(1.0 / 0.25)
    # a shared part clipped at 0 is not in the variance: its Monte-Carlo noise leaves the df at the seed part's
    assert welch_df((0.0, 0.3767), (3, 3), 0.0, 0.062) == pytest.approx(2.0)
