"""BLEU, chrF and TER with their sacrebleu signatures, paired bootstrap resampling of any of them, and per-token
traces as Arrow tables."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from sacrebleu.metrics import BLEU, CHRF, TER
from sacrebleu.metrics.base import Metric
from scipy.special import chdtri, stdtr, stdtrit

from nmt_core.family.registry import observed_names

if TYPE_CHECKING:  # types only: the summary reads this module without importing torch through decoding
    from nmt_core.config import TrialConfig
    from nmt_core.training.decode import Translation

TRACE_SCHEMA = pa.schema(
    [
        ("sent_id", pa.int32()),
        ("pos", pa.int32()),
        ("token", pa.string()),
        ("tau", pa.float32()),
        ("sentinel", pa.float32()),
        ("entropy", pa.float32()),
        ("argmax_src", pa.int32()),
        ("weights", pa.list_(pa.float32())),
        ("tau_heads", pa.list_(pa.float32())),  # the Transformer's tau per head; the schema's metadata names them
    ]
)
HEAD_LABELS = b"tau_heads"  # schema metadata key: the labels of tau_heads, comma-separated (l<layer>.<block>.h<head>)
FORCED_SCHEMA = pa.schema(  # one row per reference token forced through the model: trace_table's, less the weights
    [
        *(TRACE_SCHEMA.field(name) for name in ("sent_id", "pos", "token", "tau")),
        pa.field("gate", pa.float32()),
        TRACE_SCHEMA.field("tau_heads"),
        # what the attention parts observe per token (Part.observes; a Transformer: the mean over heads), null if none
        *(pa.field(name, pa.float32()) for name in observed_names()),
    ]
)


@dataclass
class BleuResult:
    score: float
    signature: str

    def __str__(self) -> str:
        return f"BLEU {self.score:.2f}  ({self.signature})"


def bleu_metric(tokenize: str = "13a", lowercase: bool = False, references: list[str] | None = None) -> BLEU:
    """sacrebleu's BLEU; `tokenize="none"` with lowercase on word-tokenised text is multi-bleu.perl's number.

    Only then is sacrebleu's "you forgot to detokenize" check silenced (force): that text is tokenised on purpose.
    With `references` their n-grams are extracted once, for every system scored against them.
    """
    cached = None if references is None else [references]
    return BLEU(tokenize=tokenize, lowercase=lowercase, force=tokenize == "none", references=cached)


def bleu_options(cfg: TrialConfig) -> dict[str, Any]:
    """sacrebleu's tokenizer and case for this trial: lowercased training data can only be scored lowercased,
    and the signature then says `case:lc`."""
    return {"tokenize": cfg.decode.bleu_tokenize, "lowercase": cfg.decode.bleu_lowercase or cfg.data.lowercase}


def corpus_bleu(
    hypotheses: list[str], references: list[str], tokenize: str = "13a", lowercase: bool = False
) -> BleuResult:
    metric = bleu_metric(tokenize, lowercase)
    score = metric.corpus_score(hypotheses, [references])
    return BleuResult(score.score, str(metric.get_signature()))


CHRF_NAME, TER_NAME = "chrf", "ter"  # the metrics scored beside BLEU: `chrf_dev`, `chrf_test_<set>`, `ter_test_<set>`
MT_METRICS = (CHRF_NAME, TER_NAME)
PAPER_BLEU = "multibleu"  # `multibleu_test_<set>`: lowercased BLEU of word tokens, comparable with the papers
PLAIN = "plain_"  # `plain_bleu_test_<set>`: the checkpoint decoded without its decoding-only parts (their control)
LOWER_IS_BETTER = frozenset({TER_NAME})  # an edit rate: fewer edits is better


@dataclass
class MetricResult:
    """A corpus score of chrF or TER with the signature of the metric object that computed it."""

    name: str  # CHRF_NAME or TER_NAME
    score: float
    signature: str


def mt_metric(name: str, lowercase: bool = False, references: list[str] | None = None) -> Metric:
    """sacrebleu's chrF (chrF2: character 6-grams, beta 2) or TER at their defaults, the numbers WMT reports.

    chrF follows the trial's case (lowercased training data can only be scored lowercased, as BLEU is); TER is
    case-insensitive by sacrebleu's default whatever the trial, and its signature says so (`c:lc`). With
    `references` their n-grams (chrF) or tokens (TER) are extracted once, for every system scored against them.
    """
    cached = None if references is None else [references]
    if name == CHRF_NAME:
        return CHRF(lowercase=lowercase, references=cached)
    if name == TER_NAME:
        return TER(references=cached)
    raise ValueError(f"no metric {name!r}; metrics: {', '.join(MT_METRICS)}")


def corpus_metric(name: str, hypotheses: list[str], references: list[str], lowercase: bool = False) -> MetricResult:
    """chrF or TER of a corpus, as `sacrebleu -m chrf|ter` prints it, with its signature."""
    metric = mt_metric(name, lowercase)
    score = metric.corpus_score(hypotheses, [references])
    return MetricResult(name, score.score, str(metric.get_signature()))


def _sentence_stats(metric: Metric, hypotheses: list[str], references: list[str] | None = None) -> np.ndarray:
    """(N, k) per-sentence sufficient statistics as the metric object extracts them (BLEU: hyp len, ref len,
    matches and totals per order; chrF: hypothesis, reference and matched n-grams per order; TER: edits and
    reference length); against the references `metric` holds (its `references`) where `references` is None.

    float32, as sacrebleu's paired bootstrap keeps them, so resampled scores match `sacrebleu --paired-bs`; every
    statistic is a whole count, exact in float32 (below 2**24) and in its sums.
    """
    return np.array(
        metric._extract_corpus_statistics(hypotheses, None if references is None else [references]), dtype="float32"
    )


def _each(function: Callable[[float], float], values: np.ndarray) -> np.ndarray:
    """`function` (math.log, math.exp) of every value, in double as sacrebleu computes it: numpy's own log and exp
    may differ from the C library's in the last bit."""
    return np.fromiter(map(function, values.ravel().tolist()), np.float64, values.size).reshape(values.shape)


def _bleu_from_stats(metric: BLEU, stats: np.ndarray) -> np.ndarray:
    """BLEU of each row of summed statistics as sacrebleu scores it (same smoothing).

    sacrebleu's default (exp smoothing, no effective order) is computed here in its own arithmetic (float32
    precisions, math.log and math.exp in double, the logs summed left to right) without building a BLEUScore per
    row, every row at once: the same numbers, many times faster; a 1,000-row sweep's bootstrap scores 1,000
    resamples of each row. Other settings: sacrebleu.
    """
    if metric.smooth_method != "exp" or metric.effective_order:
        return np.array([metric._compute_score_from_stats(list(row)).score for row in stats])
    order = metric.max_ngram_order
    correct, total = stats[:, 2 : 2 + order].astype("float32"), stats[:, 2 + order :].astype("float32")
    halvings = np.cumsum(correct == 0, axis=1).astype("float32")  # sacrebleu's smooth_mteval doubles per zero
    with np.errstate(divide="ignore", invalid="ignore"):
        precisions = np.where(
            correct == 0, np.float32(100.0) / (np.float32(2.0) ** halvings * total), np.float32(100.0) * correct / total
        )
    precisions = np.where(np.cumsum(total == 0, axis=1) > 0, np.float32(0.0), precisions)  # orders after a break
    precisions = precisions.astype(np.float64)
    logs = np.where(precisions == 0, -9999999999.0, _each(math.log, np.where(precisions == 0, 1.0, precisions)))
    summed = logs[:, 0]
    for n in range(1, order):  # left to right, as sacrebleu's sum() adds them
        summed = summed + logs[:, n]
    sys_len, ref_len = stats[:, 0].astype(np.float64), stats[:, 1].astype(np.float64)
    short = (sys_len < ref_len) & (sys_len > 0)
    bp = np.where(sys_len >= ref_len, 1.0, 0.0)
    bp[short] = _each(math.exp, 1 - ref_len[short] / sys_len[short])
    return np.where(correct.any(axis=1), bp * _each(math.exp, summed / order), 0.0)


def draw_counts(indices: np.ndarray, n: int) -> np.ndarray:
    """(resamples, n) float32: how often each resample of `indices` (resamples, n) draws each of n sentences."""
    rows = len(indices)
    flat = (indices + n * np.arange(rows)[:, None]).ravel()
    return np.bincount(flat, minlength=rows * n).reshape(rows, n).astype(np.float32)


@dataclass
class SystemScores:
    """One system's corpus scores, seed by seed: on the whole test sets and on each paired resample of their
    sentences (with several test sets, each the mean over the sets: the table's `avg`)."""

    full: np.ndarray  # (seeds,)
    resampled: np.ndarray  # (seeds, resamples)

    @property
    def mean(self) -> float:
        """The seed-averaged score the table prints."""
        return float(self.full.mean())

    @property
    def averaged(self) -> np.ndarray:
        """The seed-averaged score of each resample (resamples,)."""
        return self.resampled.mean(axis=0)

    @property
    def seeds(self) -> int:
        return len(self.full)


class SentenceBootstrap:
    """Two-sided paired bootstrap over test sentences (Koehn 2004) of any corpus-level score computed from summed
    per-sentence statistics (BLEU's n-gram counts, AER's link counts).

    Every system is resampled on the same sentence indices (one draw of `resamples` x N per test set, from
    numpy's default_rng(seed) as sacrebleu draws them). Each seed of a system is scored on every resample (seeds
    are never pooled as extra sentences); with several test sets each set is resampled on its own and a resample's
    score is the mean over sets (the table's `avg`).

    `p_value` and `interval` are the test-set-only test: seeds averaged inside every resample and never resampled,
    so they cover the sampling of test sentences only (seed_sentence_test adds the seeds).
    p = (#{|d_b| - mean_b |d_b| > |d|} + 1) / (resamples + 1), d_b the resampled and d the real difference
    of mean scores; with one seed and one test set this is exactly sacrebleu's p-value, except for equal
    scores (d = 0), where sacrebleu reports 1 / (resamples + 1) and we report 1: no difference, no evidence.
    """

    def __init__(self, sizes: dict[str, int], resamples: int = 1000, seed: int = 12345):
        self.resamples = resamples
        rng = np.random.default_rng(seed)
        self.indices = {name: rng.choice(n, size=(resamples, n), replace=True) for name, n in sizes.items()}

    def score(self, stats: np.ndarray) -> np.ndarray:
        """The corpus score of each row of summed statistics (R, k) -> (R,)."""
        raise NotImplementedError

    def resampled(self, name: str, stats: np.ndarray) -> np.ndarray:
        """Each resample's summed statistics (resamples, k) of test set `name` from its (N, k) per sentence."""
        return stats[self.indices[name]].sum(axis=1)

    def scores_of_stats(self, system: list[dict[str, np.ndarray]]) -> SystemScores:
        """One system's scores from {test set: (N, k) statistics} per seed: every seed resampled in one pass over
        the draws (the seeds' statistics side by side) and scored in one call, per test set."""
        seeds = len(system)
        full, resampled = np.zeros(seeds), np.zeros((seeds, self.resamples))
        for name in self.indices:
            side_by_side = np.concatenate([seed[name] for seed in system], axis=1)  # (N, seeds * k)
            sums = self.resampled(name, side_by_side).reshape(self.resamples, seeds, -1).swapaxes(0, 1)
            full += self.score(side_by_side.sum(0).reshape(seeds, -1))
            resampled += self.score(sums.reshape(seeds * self.resamples, -1)).reshape(seeds, self.resamples)
        return SystemScores(full / len(self.indices), resampled / len(self.indices))

    def p_value(self, baseline: SystemScores, system: SystemScores) -> float:
        real = abs(system.mean - baseline.mean)
        if real == 0:
            return 1.0
        sample = np.abs(system.averaged - baseline.averaged)
        return float(((sample - sample.mean() > real).sum() + 1) / (self.resamples + 1))

    def interval(self, baseline: SystemScores, system: SystemScores, level: float = 0.95) -> tuple[float, float]:
        """The percentile interval of the seed-averaged difference system - baseline over the same resamples."""
        low, high = np.quantile(system.averaged - baseline.averaged, [(1 - level) / 2, (1 + level) / 2])
        return float(low), float(high)


@dataclass
class SeedSentenceTest:
    """The seed-aware test of one difference (seed_sentence_test): what it estimated and what it concluded."""

    delta: float  # system - baseline, seed-averaged
    seed_variances: tuple[float, float]  # each system's sample variance over its seeds (baseline, system)
    seeds: tuple[int, int]
    sentence_variance: float  # the paired bootstrap's whole variance of the seed-averaged difference (diagnostic)
    df: float  # Welch-Satterthwaite degrees of freedom
    p_value: float
    interval: tuple[float, float]
    sentence_shared: float = 0.0  # the part of sentence_variance every seed shares (sentence_parts): the variance
    sentence_per_seed: float = 0.0  # counts it; each seed's own part (both systems summed) s^2 already holds
    shared_variance: float = 0.0  # the Monte-Carlo variance of sentence_shared over the resamples (its df)

    @property
    def standard_error(self) -> float:
        return math.sqrt(variance_of(self.seed_variances, self.seeds, self.sentence_shared))


def variance_of(seed_variances: tuple[float, float], seeds: tuple[int, int], shared: float) -> float:
    """Var(delta) = s_A^2 / n_A + s_B^2 / n_B + the shared sentence part (docs/statistics.md): each seed's BLEU on
    the fixed test set already carries its seed x sentence noise, so s^2 / n holds it; only the system x sentence
    part every seed of a system shares (which test set was drawn) is missing from it."""
    return sum(v / n for v, n in zip(seed_variances, seeds)) + shared


def welch_df(
    seed_variances: tuple[float, float], seeds: tuple[int, int], shared: float, shared_variance: float
) -> float:
    """Satterthwaite's degrees of freedom of variance_of, 2 Var^2 / (the sum of its terms' sampling variances), with
    the seed part S = s_A^2 / n_A + s_B^2 / n_B at its median-unbiased value (docs/statistics.md#degrees-of-freedom).

    S is (E S / nu) chi2_nu, nu its Welch df; at 2-3 seeds a row the chi-square is so skewed that the plug-in S is
    below its expectation in most draws, and the shared part, known to many more df, then takes S's weight in the
    df: large df exactly where the variance is underestimated (2 seeds: 6-9% of nulls below 0.05). Evaluated at
    S nu / median(chi2_nu), S is as often above as below E S. Without a shared part this is Welch's df (the ratio
    is scale-free), with many seeds the plug-in's (the factor tends to 1). The shared part's sampling variance is
    its Monte-Carlo variance over the resamples (sentence_parts), counted where the shared part is above 0: clipped
    at 0 it is not in the variance, and its noise would only drag the df below the seed part's own (a row whose
    seeds agree beside one whose seeds vary: 0.7 df, not Welch's 2). Infinite (a normal reference) where nothing
    varies. The variance itself keeps the unbiased S."""
    terms = [v / n for v, n in zip(seed_variances, seeds)]
    seed_part, spread = sum(terms), sum(t**2 / (n - 1) for t, n in zip(terms, seeds))
    if seed_part + shared == 0:  # nothing varies: the variance is 0 and any reference gives the same answer
        return math.inf
    if spread > 0:  # (a seed part so small that its square underflows counts as none)
        welch = seed_part**2 / spread
        seed_part = seed_part * welch / float(chdtri(welch, 0.5))
        spread = seed_part**2 / welch
    if shared > 0:  # a shared part clipped at 0 adds nothing to the variance, so nothing to the df's uncertainty
        spread += shared_variance / 2
    return (seed_part + shared) ** 2 / spread if spread > 0 else math.inf


def seed_sentence_test(baseline: SystemScores, system: SystemScores, level: float = 0.95) -> SeedSentenceTest:
    """Two-sided test of system - baseline that counts training variance (seeds) and test-set variance (sentences).

    The model (docs/statistics.md): a seed's BLEU is its system's effect, plus its seed's, plus the test set's mean
    of sentence effects shared by every system, system x sentence effects shared by a system's seeds, and seed x
    sentence effects of its own. The shared sentence effects cancel in the paired difference. Welch's s^2 / n
    per system (over that system's seeds, all on the same test set) holds the seed and the seed x sentence parts;
    what it misses is the system x sentence part, which every seed of a system repeats: sentence_parts reads it
    off the paired bootstrap's resamples as the covariance between different seeds. t = delta / sqrt(variance) is
    referred to Student's t with Satterthwaite's degrees of freedom (welch_df: the seed part at its
    median-unbiased value, the shared part with its Monte-Carlo variance), and so is the interval.

    What holds: the variance is unbiased for Var(delta) under the model; in Tatoeba's regime (2-5 seeds a row,
    seed std 0.0-0.6, tests/unit/test_significance_calibration.py) 4.3-6.4% of nulls fall below 0.05. Under normal
    theory with equal seed variances the size is 4.0-4.8% at 2 seeds a row and 4.4-4.8% at 3 and 5 (the shared
    part 10-60% of the variance); where one system's seeds vary ten times as much as the other's, 2 seeds a row
    reach up to 7.2% and 3 against 2 up to 8.6% (the Behrens-Fisher problem at 1-2 df, which Welch's test shows alone:
    6.8% at 3 against 2; docs/statistics.md). Each system needs at least 2 seeds.
    """
    if min(baseline.seeds, system.seeds) < 2:
        raise ValueError("a seed-aware test needs at least 2 seeds per system")
    delta = system.mean - baseline.mean
    seed_variances = (float(baseline.full.var(ddof=1)), float(system.full.var(ddof=1)))
    seeds = (baseline.seeds, system.seeds)
    sentence_variance = float((system.averaged - baseline.averaged).var(ddof=1))
    shared, per_seed, shared_variance = sentence_parts(baseline, system, sentence_variance)
    variance = variance_of(seed_variances, seeds, shared)
    df = welch_df(seed_variances, seeds, shared, shared_variance)
    found = SeedSentenceTest(
        delta, seed_variances, seeds, sentence_variance, df, 1.0, (delta, delta), shared, per_seed, shared_variance
    )
    if variance == 0:  # every seed and every resample the same: a difference is certain, none is none
        found.p_value = float(delta == 0)
        return found
    half = float(stdtrit(df, (1 + level) / 2)) * math.sqrt(variance)
    found.p_value = 2 * float(stdtr(df, -abs(delta) / math.sqrt(variance)))
    found.interval = (delta - half, delta + half)
    return found


def sentence_parts(
    baseline: SystemScores, system: SystemScores, sentence_variance: float
) -> tuple[float, float, float]:
    """The sentence variance split into what every seed shares and what each seed adds (method of moments over
    the resamples): a system's seed i scores M + I_i on a resample, so Var(one seed) = V_M + V_I and Var(seed
    average) = V_M + V_I / n, and V_I = (mean_i Var(seed i) - Var(average)) * n / (n - 1). The shared part is the
    difference's variance less V_I / n of each system: the covariance between different seeds' resampled scores
    (docs/statistics.md). It is a mean over the R resamples of z_r, the centred difference squared less each
    system's (mean_i x_i^2 - mean_i(x_i)^2) / (n - 1), so its Monte-Carlo variance is Var(z) / R: more than a
    variance of R draws has, for each seed's own noise enters z. Returns (the shared part of the difference's
    variance, V_I of both systems summed, each at least 0; the shared part's Monte-Carlo variance)."""
    own = []  # each system's V_I / n, resample by resample
    for scores in (baseline, system):
        centred = scores.resampled - scores.resampled.mean(axis=1, keepdims=True)
        own.append(((centred**2).mean(axis=0) - centred.mean(axis=0) ** 2) / (scores.seeds - 1))
    resamples = len(own[0])
    parts = [max(0.0, float(part.sum()) / (resamples - 1)) for part in own]
    difference = system.averaged - baseline.averaged
    z = (difference - difference.mean()) ** 2 - own[0] - own[1]
    shared = max(0.0, sentence_variance - parts[0] - parts[1])
    return shared, parts[0] * baseline.seeds + parts[1] * system.seeds, float(z.var(ddof=1)) / resamples


def detectable(test: SeedSentenceTest, alpha: float, power: float = 0.8, seeds: tuple[int, int] | None = None) -> float:
    """The minimum detectable difference: the least true |delta| that seed_sentence_test finds at level `alpha`
    with probability `power`, (t_{1-alpha/2,df} + t_{power,df}) * SE (Cohen 1988, t quantiles), at the test's own
    seeds or at `seeds` a row. Its variances are the test's: each system's s^2 (per seed, on this test set) over
    n, plus the shared sentence part, which more seeds do not shrink."""
    seeds = test.seeds if seeds is None else seeds
    variance = variance_of(test.seed_variances, seeds, test.sentence_shared)
    df = welch_df(test.seed_variances, seeds, test.sentence_shared, test.shared_variance)
    return float(stdtrit(df, 1 - alpha / 2) + stdtrit(df, power)) * math.sqrt(variance)


def seeds_to_detect(test: SeedSentenceTest, difference: float, alpha: float, power: float = 0.8, most: int = 100):
    """A planning figure from a finished sweep's variances: the least n seeds a row (both rows alike) whose
    minimum detectable difference (detectable) is at most `difference`; None where no n up to `most` reaches it
    (the shared sentence part alone may exceed it). Not a statement about the difference observed."""
    for n in range(2, most + 1):
        if detectable(test, alpha, power, (n, n)) <= difference:
            return n
    return None


def equivalence_p(test: SeedSentenceTest, margin: float) -> float:
    """Two one-sided tests (Schuirmann 1987) of |true delta| < `margin` with the test's SE and df: the larger of
    the p-values of H0: delta <= -margin and H0: delta >= +margin. Below alpha: equivalent within the margin."""
    se = test.standard_error
    if se == 0:
        return float(abs(test.delta) >= margin)
    below = float(stdtr(test.df, -(test.delta + margin) / se))
    above = float(stdtr(test.df, (test.delta - margin) / se))
    return max(below, above)


class CountBootstrap(SentenceBootstrap):
    """A SentenceBootstrap of statistics that are whole counts (BLEU's, chrF's, TER's): each resample's sums are one
    matrix product of how often it draws each sentence and the sentences' statistics, where indexing would build a
    (resamples, N, k) copy (288 MB for chrF's 18 statistics of 2,000 sentences)."""

    def __init__(self, sizes: dict[str, int], resamples: int = 1000, seed: int = 12345):
        super().__init__(sizes, resamples, seed)
        self.draws = {name: draw_counts(indices, sizes[name]) for name, indices in self.indices.items()}

    def resampled(self, name: str, stats: np.ndarray) -> np.ndarray:
        """As SentenceBootstrap sums them: whole counts, whose float32 sums are exact (below 2**24) in any order."""
        return self.draws[name] @ stats


class BleuBootstrap(CountBootstrap):
    """BLEU's paired bootstrap over per-sentence BLEU statistics (see SentenceBootstrap), scored as sacrebleu scores
    them; PairedBootstrap computes the statistics from hypotheses and references."""

    def __init__(
        self, sizes: dict[str, int], resamples: int = 1000, seed: int = 12345, tokenize: str = "13a", lowercase=False
    ):
        super().__init__(sizes, resamples, seed)
        self.metric = bleu_metric(tokenize, lowercase)

    def score(self, stats: np.ndarray) -> np.ndarray:
        return _bleu_from_stats(self.metric, stats)


class AgainstReferences:
    """Per-sentence statistics of each seed's hypotheses against every test set's references, tokenised and counted
    once by a metric object per set (`against`), for every system: what PairedBootstrap and MetricBootstrap score."""

    references: dict[str, list[str]]
    against: dict[str, Metric]

    def stats(self, system: list[dict[str, list[str]]]) -> list[dict[str, np.ndarray]]:
        """Each seed's per-sentence statistics by test set; `system` holds one {test set: hypotheses} per seed."""
        return [
            {name: _sentence_stats(self.against[name], hypotheses[name]) for name in self.references}
            for hypotheses in system
        ]

    def scores(self, system: list[dict[str, list[str]]]) -> SystemScores:
        """`system` holds one {test set: hypotheses} per seed."""
        return self.scores_of_stats(self.stats(system))


class PairedBootstrap(AgainstReferences, BleuBootstrap):
    """BLEU's paired bootstrap, as `sacrebleu --paired-bs` computes it (see SentenceBootstrap)."""

    def __init__(
        self,
        references: dict[str, list[str]],
        resamples: int = 1000,
        seed: int = 12345,
        tokenize: str = "13a",
        lowercase: bool = False,
    ):
        super().__init__({name: len(refs) for name, refs in references.items()}, resamples, seed, tokenize, lowercase)
        self.references = references
        self.against = {name: bleu_metric(tokenize, lowercase, refs) for name, refs in references.items()}


class MetricBootstrap(AgainstReferences, CountBootstrap):
    """chrF's or TER's paired bootstrap (see SentenceBootstrap), on the same resampled sentences as BLEU's for the
    same sizes, resamples and seed: the statistics are sacrebleu's own per sentence (the metric object's), and a
    row of summed statistics is scored as that object scores a corpus (`score`)."""

    def __init__(
        self, references: dict[str, list[str]], name: str, resamples: int = 1000, seed: int = 12345, lowercase=False
    ):
        super().__init__({test: len(refs) for test, refs in references.items()}, resamples, seed)
        self.name, self.references = name, references
        self.metric = mt_metric(name, lowercase)
        self.against = {test: mt_metric(name, lowercase, refs) for test, refs in references.items()}

    def score(self, stats: np.ndarray) -> np.ndarray:
        if self.name == TER_NAME:
            return _ter_from_stats(stats)
        if not self.metric.eps_smoothing:
            return _chrf_from_stats(self.metric, stats)
        return np.array([self.metric._compute_score_from_stats(list(row)).score for row in stats])


def _chrf_from_stats(metric: CHRF, stats: np.ndarray) -> np.ndarray:
    """chrF of each row of summed statistics (R, 3 * orders) as sacrebleu scores a float32 row of them (its paired
    bootstrap's): CHRF._compute_f_score at its default (effective-order averaging, no eps smoothing) in float32, in
    its order of operations (precisions and recalls summed left to right), every row at once without a CHRFScore
    per row."""
    hyp, ref, match = (stats[:, k::3].astype(np.float32) for k in range(3))
    counted = (hyp > 0) & (ref > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        precision, recall = match / hyp, match / ref
    summed_p, summed_r = np.zeros(len(stats), np.float32), np.zeros(len(stats), np.float32)
    for n in range(metric.order):  # left to right, as sacrebleu's loop adds them
        summed_p = np.where(counted[:, n], summed_p + precision[:, n], summed_p)
        summed_r = np.where(counted[:, n], summed_r + recall[:, n], summed_r)
    orders = counted.sum(axis=1).astype(np.float32)
    factor = np.float32(metric.beta**2)
    with np.errstate(divide="ignore", invalid="ignore"):
        p, r = summed_p / orders, summed_r / orders
        f = np.float32(100) * ((np.float32(1) + factor) * p * r / (factor * p + r))
    return np.where((orders > 0) & (p + r > 0), f, np.float32(0)).astype(np.float64)


def _ter_from_stats(stats: np.ndarray) -> np.ndarray:
    """TER of each row of summed (edits, reference length) as sacrebleu scores a float32 row of them (its paired
    bootstrap's, TER._compute_score_from_stats): edits per reference word x 100; 100 for words against an empty
    reference, 0 for nothing against nothing."""
    edits, length = stats[:, 0].astype(np.float32), stats[:, 1].astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(length > 0, edits / length, np.where(edits > 0, np.float32(1), np.float32(0)))
    return (np.float32(100) * rate).astype(np.float64)


class AlignmentBootstrap(SentenceBootstrap):
    """The paired bootstrap of AER (`metric="aer"`) or gold-attention mass (`"gold_attention"`), from each
    sentence's ALIGNMENT_STATS."""

    def __init__(self, sizes: dict[str, int], metric: str, resamples: int = 1000, seed: int = 12345):
        super().__init__(sizes, resamples, seed)
        self.metric = metric

    def score(self, stats: np.ndarray) -> np.ndarray:
        return alignment_from_stats(stats)[0 if self.metric == "aer" else 1]


class ApproximateRandomization:
    """Two-sided paired approximate randomization over test sentences (Riezler & Maxwell 2005), as
    `sacrebleu --paired-ar` computes it, for any score of `scorer` (a SentenceBootstrap's corpus score).

    In each of `trials` shuffles every sentence's outputs are swapped between the two systems with probability 1/2
    (one draw of trials x N per test set, from numpy's default_rng(seed) as sacrebleu draws them);
    p = (#{|s_a - s_b| > |d|} + 1) / (trials + 1), s_a and s_b the shuffled pseudo-systems' scores, d the
    real difference. Seeds: seed k of one system is paired with seed k of the other (the shorter list cycled
    when the counts differ), each pair is shuffled on the same swaps, and a pseudo-system's score is the mean over
    pairs (and test sets), as the bootstrap averages seeds. With one seed and one test set this is exactly
    sacrebleu's p-value, except for equal scores (d = 0): p = 1 here, no difference, no evidence.
    """

    def __init__(self, scorer: SentenceBootstrap, sizes: dict[str, int], trials: int = 10000, seed: int = 12345):
        self.scorer, self.trials = scorer, trials
        rng = np.random.default_rng(seed)
        self.swaps = {name: rng.integers(2, size=(trials, n), dtype=bool) for name, n in sizes.items()}

    def p_value(self, baseline: list[dict[str, np.ndarray]], system: list[dict[str, np.ndarray]]) -> float:
        """`baseline`, `system`: each seed's {test set: (N, k) per-sentence statistics}."""
        pairs = [(baseline[k % len(baseline)], system[k % len(system)]) for k in range(max(len(baseline), len(system)))]
        real, shuffled = [], []
        for name, keep in self.swaps.items():
            for base, other in ((b[name].astype(np.float64), s[name].astype(np.float64)) for b, s in pairs):
                real.append(
                    self.scorer.score(other.sum(0, keepdims=True))[0] - self.scorer.score(base.sum(0, keepdims=True))[0]
                )
                kept = self.kept(keep, other - base)  # keep @ other + ~keep @ base, less base's total
                shuffled.append(self.scorer.score(base.sum(0) + kept) - self.scorer.score(other.sum(0) - kept))
        difference = abs(float(np.mean(real)))
        if difference == 0:
            return 1.0
        sample = np.abs(np.mean(shuffled, axis=0))
        return float(((sample > difference).sum() + 1) / (self.trials + 1))

    @staticmethod
    def kept(keep: np.ndarray, difference: np.ndarray, chunk: int = 1000) -> np.ndarray:
        """keep @ difference (trials, k), a chunk of trials at a time: a float copy of all trials x N swaps would
        take gigabytes at sacrebleu's 10,000 trials and a few thousand sentences. Exact for counts below 2**53."""
        return np.concatenate([keep[i : i + chunk].astype(np.float64) @ difference for i in range(0, len(keep), chunk)])


def holm(p_values: list[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (family-wise error over all comparisons with the baseline)."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted, running = [0.0] * len(p_values), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def trace_table(
    translations: list[Translation], target_words: list[list[str]], head_labels: list[str] = ()
) -> pa.Table:
    """One row per output token: tau_t, sentinel gate, attention entropy, argmax and the weights (a Transformer:
    tau_t and the gate are means over heads, tau_heads each head's, named by `head_labels`)."""
    columns: dict[str, list] = {name: [] for name in TRACE_SCHEMA.names}
    for sent_id, (translation, words) in enumerate(zip(translations, target_words)):
        weights = translation.weights.numpy()
        for pos, word in enumerate(words):
            row = weights[pos]
            columns["sent_id"].append(sent_id)
            columns["pos"].append(pos)
            columns["token"].append(word)
            columns["tau"].append(None if translation.tau is None else translation.tau[pos])
            columns["sentinel"].append(None if translation.gate is None else translation.gate[pos])
            positive = row[row > 0]
            columns["entropy"].append(float(-(positive * np.log(positive)).sum()))
            columns["argmax_src"].append(int(row.argmax()))
            columns["weights"].append(row.astype(np.float32))
            columns["tau_heads"].append(None if translation.tau_heads is None else translation.tau_heads[pos])
    schema = TRACE_SCHEMA.with_metadata({HEAD_LABELS: ",".join(head_labels).encode()}) if head_labels else TRACE_SCHEMA
    return pa.table(columns, schema=schema)


@dataclass
class ForcedTrace:
    """tau_t and the sentinel gate at each reference token of one example forced through its reference (</s> left
    out): (n,) for the RNN, (n, heads) for a Transformer (Transformer.head_labels); None where the model has none."""

    tau: np.ndarray | None
    gate: np.ndarray | None
    observed: dict[str, np.ndarray] = field(default_factory=dict)  # as tau: (n,) or (n, heads), by Part.observes


def forced_trace_table(
    traces: list[ForcedTrace], target_words: list[list[str]], head_labels: list[str] = ()
) -> pa.Table:
    """One row per reference token (nmt_core.training.train.teacher_forced_traces): tau_t and the gate (a Transformer:
    their means over heads, as trace_table has them; tau_heads each head's, named by `head_labels`)."""
    columns: dict[str, list] = {name: [] for name in FORCED_SCHEMA.names}
    for sent_id, (trace, words) in enumerate(zip(traces, target_words)):
        tau, gate = trace.tau, trace.gate
        columns["sent_id"] += [sent_id] * len(words)
        columns["pos"] += range(len(words))
        columns["token"] += words
        columns["tau"] += [None] * len(words) if tau is None else (tau if tau.ndim == 1 else tau.mean(1)).tolist()
        columns["gate"] += [None] * len(words) if gate is None else (gate if gate.ndim == 1 else gate.mean(1)).tolist()
        columns["tau_heads"] += [None] * len(words) if tau is None or tau.ndim == 1 else tau.tolist()
        for name in observed_names():
            value = trace.observed.get(name)
            per_token = None if value is None else value if value.ndim == 1 else value.mean(1)
            columns[name] += [None] * len(words) if per_token is None else per_token.tolist()
    schema = (
        FORCED_SCHEMA.with_metadata({HEAD_LABELS: ",".join(head_labels).encode()}) if head_labels else FORCED_SCHEMA
    )
    return pa.table(columns, schema=schema)


ALIGNMENT_STATS = ("predicted", "gold", "both", "gold_mass", "aligned_targets")  # per sentence, summable


@dataclass
class AlignmentScore:
    aer: float  # alignment error rate of the attention argmax (Och & Ney 2003; sure = possible = gold)
    gold_mass: float  # mean attention weight on gold-linked source words, over target words that have links
    per_sentence: np.ndarray  # (N, len(ALIGNMENT_STATS)): what the paired bootstrap resamples


def alignment_error_rate(
    predicted: set[tuple[int, int]], sure: set[tuple[int, int]], possible: set[tuple[int, int]] | None = None
) -> float:
    """AER = 1 - (|A & S| + |A & P|) / (|A| + |S|), with S a subset of P."""
    possible = sure | (possible or set())
    if not predicted and not sure:
        return 0.0
    return 1.0 - (len(predicted & sure) + len(predicted & possible)) / (len(predicted) + len(sure))


def alignment_from_stats(stats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(AER, gold mass) of each row of summed ALIGNMENT_STATS (R, 5): links pooled over the summed sentences.

    AER = 1 - (|A & S| + |A & P|) / (|A| + |S|) with P = S (0 without any link, as alignment_error_rate); the
    gold mass is NaN without any aligned target word.
    """
    predicted, gold, both, mass, targets = np.atleast_2d(stats).T
    links = predicted + gold
    aer = np.where(links > 0, 1.0 - 2.0 * both / np.where(links > 0, links, 1), 0.0)
    return aer, np.where(targets > 0, mass / np.where(targets > 0, targets, 1), math.nan)


def attention_alignment(weights: list[np.ndarray], gold: list[list[tuple[int, int]]]) -> AlignmentScore:
    """weights[i] (target words, source words) of sentence i against its gold (src, tgt) links.

    AER is computed over the whole set (links pooled over sentences), as alignment toolkits report it; a
    sentence without gold links counts nothing.
    """
    rows = np.zeros((len(weights), len(ALIGNMENT_STATS)))
    for sent, (matrix, links) in enumerate(zip(weights, gold)):
        if not links:
            continue
        predicted = {(int(matrix[t].argmax()), t) for t in range(matrix.shape[0])}
        by_target: dict[int, list[int]] = {}
        for s, t in links:
            by_target.setdefault(t, []).append(s)
        # a sentence cut to decode.max_src_len: links past the cut count as missed
        masses = [
            float(matrix[t, [s for s in sources if s < matrix.shape[1]]].sum())
            for t, sources in by_target.items()
            if t < matrix.shape[0]
        ]
        rows[sent] = (len(predicted), len(set(links)), len(predicted & set(links)), sum(masses), len(masses))
    aer, gold_mass = alignment_from_stats(rows.sum(0))
    return AlignmentScore(float(aer[0]), float(gold_mass[0]), rows)


def write_traces(table: pa.Table, path: str) -> None:
    pq.write_table(table, path)
