"""The seed-aware test's calibration under simulated nulls in Tatoeba's regime, and that the window it must hold
tells it from its neighbours: two systems drawn from one distribution, so every p < 0.05 is a false positive.

The simulation draws what the bootstrap reads, per-sentence BLEU sufficient statistics, for a Tatoeba-like test set
(2,785 sentences of 1 + Poisson(6) reference tokens, BLEU about 26). Each of a sentence's n-gram match rates is
PRECISIONS[n] * exp(quality), quality the sum of the parts of docs/statistics.md's model:
- a difficulty shared by every system and seed (sd SENTENCE_SD; it cancels in a paired difference),
- a system x sentence effect shared by one system's seeds (sd SYSTEM_SENTENCE_SD): the "shared part", which
  decides which test set favours which system and which no number of seeds averages away,
- a seed effect (training run quality; its sd set so that it alone gives a seed std of SEED_BLEU_STD BLEU),
- a seed x sentence effect (sd SEED_SENTENCE_SD: seeds do not fail on the same sentences);
a sentence's matches are its expected count rounded up with the probability of its fraction (one uniform for its
four orders: unbiased, and fast enough for CI where binomial draws are not).
Both systems draw every part from the same distributions. SYSTEM_SENTENCE_SD is large (the shared part about the
size of the seeds' s^2 / n at 2-5 seeds: where the double count and the seeds-only tests part ways); the seed
std spans Tatoeba's 0.0-0.6 (docs/results/). These were set from the regime, not from the tests' outcome.

Each cell (seeds a row x seed std) holds NULLS nulls; the window WINDOW is about 3 Monte-Carlo standard errors of a
share at 5% either side (sqrt(0.05 * 0.95 / NULLS) = 0.0069 at 1,000). The neighbours below are small functions of
the same bootstrap scores, each a way the variance or its reference distribution could be got wrong; each must
leave the window in some cell, or the window could not tell the test from it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from scipy import stats

from nmt_core.training.evaluate import BleuBootstrap, SystemScores, seed_sentence_test

SENTENCES, REF_TOKENS = 2785, 6  # 1 + Poisson(6): about 7 tokens a sentence
PRECISIONS = np.array([0.5, 0.3, 0.17, 0.1], np.float32)  # 1- to 4-gram match rates: BLEU about 26
SENTENCE_SD, SYSTEM_SENTENCE_SD, SEED_SENTENCE_SD = 0.5, 0.35, 0.45
SEED_BLEU_STDS = (0.0, 0.6)  # the seed effect's own BLEU std (the seeds' spread adds the seed x sentence part)
SEED_COUNTS = (2, 3, 5)
NULLS, RESAMPLES, BATCH = 1000, 100, 125
WINDOW = (0.03, 0.07)
NOMINAL = 0.05

Scores = tuple[SystemScores, SystemScores]
# 20,000 simulated seed runs of 2,785 sentences (20 s of CPU, 1.5 minutes on a loaded 2-core machine): with the slow
# tests (benchmarks/calibration_time.py)
pytestmark = pytest.mark.slow


def null_runs(rng: np.random.Generator, seed_std: float, nulls: int, seeds: int) -> np.ndarray:
    """(nulls, 2 systems, seeds, SENTENCES, 10) per-sentence BLEU statistics: a fresh test set per null, shared by
    both systems and their seeds; hypotheses as long as their references (Tatoeba's brevity penalty is 1)."""

    def normal(sd: float, shape: tuple[int, ...]) -> np.ndarray:
        return np.float32(sd) * rng.standard_normal(shape, np.float32)

    lengths = (1 + rng.poisson(REF_TOKENS, (nulls, 1, 1, SENTENCES))).astype(np.float32)
    exp_quality = normal(SENTENCE_SD, (nulls, 1, 1, SENTENCES))  # exp(quality), float32 throughout, in place
    exp_quality = exp_quality + normal(SYSTEM_SENTENCE_SD, (nulls, 2, 1, SENTENCES))
    exp_quality = exp_quality + normal(seed_std / 26.0, (nulls, 2, seeds, 1))  # BLEU is about 26 * exp(quality) near 26
    exp_quality = np.exp(exp_quality + normal(SEED_SENTENCE_SD, (nulls, 2, seeds, SENTENCES)), out=exp_quality)
    rounding = rng.random(exp_quality.shape, np.float32)  # one uniform for a sentence's four orders
    runs = np.empty((nulls, 2, seeds, SENTENCES, 10), np.float32)
    totals = np.maximum(lengths[..., None] - np.arange(4, dtype=np.float32), 0)  # one test set's, every run's
    runs[..., :2], runs[..., 6:] = lengths[..., None], totals
    matches = np.empty_like(exp_quality)
    for n in range(4):  # expected matches, rounded up with the probability of their fraction (unbiased)
        np.minimum(np.multiply(PRECISIONS[n], exp_quality, out=matches), 1, out=matches)
        matches *= totals[..., n]
        runs[..., 2 + n] = np.floor(np.add(matches, rounding, out=matches), out=matches)
    return runs


def simulate(seed_std: float, seeds: int, nulls: int = NULLS, seed: int = 0) -> list[Scores]:
    """Each null's two systems' bootstrap scores (SystemScores, as the summary builds them), in batches."""
    rng = np.random.default_rng(seed)
    bootstrap = BleuBootstrap({"test": SENTENCES}, RESAMPLES)
    found = []
    for start in range(0, nulls, BATCH):
        runs = null_runs(rng, seed_std, min(BATCH, nulls - start), seeds)
        scores = bootstrap.scores_of_stats([{"test": run} for run in runs.reshape(-1, SENTENCES, 10)])
        full, resampled = scores.full.reshape(-1, 2, seeds), scores.resampled.reshape(-1, 2, seeds, RESAMPLES)
        found += [(SystemScores(f[0], r[0]), SystemScores(f[1], r[1])) for f, r in zip(full, resampled, strict=True)]
    return found


@dataclass
class Cell:
    """One cell's nulls as the test read them, one entry per null: what the neighbours are computed from."""

    p_value: np.ndarray
    delta: np.ndarray
    seed_variances: np.ndarray  # (nulls, 2)
    seeds: int
    shared: np.ndarray  # the system x sentence part the test adds
    whole: np.ndarray  # the bootstrap's whole sentence variance of the seed-averaged difference
    df: np.ndarray
    bleu: np.ndarray  # the baseline's seed-averaged BLEU

    @classmethod
    def of(cls, found: list[Scores]) -> Cell:
        tests = [seed_sentence_test(a, b) for a, b in found]
        return cls(
            *(np.array([getattr(t, key) for t in tests]) for key in ("p_value", "delta", "seed_variances")),
            found[0][0].seeds,
            *(np.array([getattr(t, key) for t in tests]) for key in ("sentence_shared", "sentence_variance", "df")),
            np.array([a.mean for a, _ in found]),
        )

    @property
    def seed_terms(self) -> np.ndarray:
        return self.seed_variances.sum(axis=1) / self.seeds


def t_p(delta: np.ndarray, variance: np.ndarray, df: np.ndarray | float) -> np.ndarray:
    """Two-sided p of delta / sqrt(variance) against Student's t (the normal at df = inf); 1 where nothing varies."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(variance > 0, 2 * stats.t.sf(np.abs(delta) / np.sqrt(variance), df), 1.0)


def the_test(cell: Cell) -> np.ndarray:
    return cell.p_value


def welch_on_seeds(cell: Cell) -> np.ndarray:
    """Welch's t on the seeds' BLEU alone: no sentence part at all."""
    terms = cell.seed_variances / cell.seeds
    return t_p(cell.delta, terms.sum(1), terms.sum(1) ** 2 / (terms**2 / (cell.seeds - 1)).sum(1))


def pooled_t(cell: Cell) -> np.ndarray:
    """Student's pooled two-sample t on the seeds' BLEU (equal seeds: Welch's variance, 2n - 2 degrees of freedom)."""
    return t_p(cell.delta, cell.seed_terms, 2 * cell.seeds - 2)


def doubled(cell: Cell) -> np.ndarray:
    """The test's variance doubled, its degrees of freedom kept."""
    return t_p(cell.delta, 2 * (cell.seed_terms + cell.shared), cell.df)


def double_count(cell: Cell) -> np.ndarray:
    """The test before #62: s^2 / n plus the bootstrap's whole sentence variance (seed x sentence counted twice),
    the sentence term counted as known in Welch-Satterthwaite."""
    terms = cell.seed_variances / cell.seeds
    variance = terms.sum(1) + cell.whole
    return t_p(cell.delta, variance, variance**2 / (terms**2 / (cell.seeds - 1)).sum(1))


def z_test(cell: Cell) -> np.ndarray:
    """The test's variance referred to the normal: its few seeds' degrees of freedom ignored."""
    return t_p(cell.delta, cell.seed_terms + cell.shared, math.inf)


NEIGHBOURS: dict[str, Callable[[Cell], np.ndarray]] = {
    "Welch on the seeds": welch_on_seeds,
    "pooled t": pooled_t,
    "variance doubled": doubled,
    "double count (before #62)": double_count,
    "z-test": z_test,
}


def draw_cells() -> dict[tuple[float, int], Cell]:
    """Every cell's nulls: 5 seeds a row drawn once per seed std, its first 2 and 3 seeds the other cells."""
    found = {}
    for i, seed_std in enumerate(SEED_BLEU_STDS):
        drawn = simulate(seed_std, max(SEED_COUNTS), seed=i)
        for n in SEED_COUNTS:
            found[seed_std, n] = Cell.of(
                [
                    (SystemScores(a.full[:n], a.resampled[:n]), SystemScores(b.full[:n], b.resampled[:n]))
                    for a, b in drawn
                ]
            )
    return found


@pytest.fixture(scope="module")
def cells() -> dict[tuple[float, int], Cell]:
    return draw_cells()


def rate(test: Callable[[Cell], np.ndarray], cell: Cell) -> float:
    return float(np.mean(test(cell) < NOMINAL))


def test_the_simulation_is_tatoebas_regime(cells):
    """BLEU about 26, the seeds' std the seed effect's plus the seed x sentence part, and a large shared part: the
    system x sentence variance of the difference larger than the seeds' s^2 / n at 5 seeds without a seed effect."""
    for seed_std in SEED_BLEU_STDS:
        cell = cells[seed_std, 5]
        spread = np.sqrt(cell.seed_variances.mean())
        assert 22 < cell.bleu.mean() < 30 and seed_std < spread < seed_std + 0.5, (cell.bleu.mean(), spread)
    zero = cells[0.0, 5]
    assert zero.shared.mean() > zero.seed_terms.mean(), (zero.shared.mean(), zero.seed_terms.mean())


@pytest.mark.parametrize("cell", [(s, n) for s in SEED_BLEU_STDS for n in SEED_COUNTS], ids=str)
def test_the_seed_aware_test_holds_its_level(cells, cell):
    """At 2, 3 and 5 seeds a row and a seed std of 0.0 and 0.6, the share of p < 0.05 is inside WINDOW."""
    assert WINDOW[0] <= rate(the_test, cells[cell]) <= WINDOW[1]


@pytest.mark.parametrize("name", NEIGHBOURS)
def test_each_neighbour_leaves_the_window_somewhere(cells, name):
    """The window is tight enough to tell the test from each neighbour: each is outside it in some cell, where the
    test is inside it (test_the_seed_aware_test_holds_its_level)."""
    rates = {cell: rate(NEIGHBOURS[name], found) for cell, found in cells.items()}
    assert any(not WINDOW[0] <= r <= WINDOW[1] for r in rates.values()), rates


def rate_table(cells: dict[tuple[float, int], Cell]) -> str:
    """Each cell's share of p < NOMINAL for the test and every neighbour, as docs/statistics.md's table."""
    names = {"the test": the_test, **NEIGHBOURS}
    lines = ["| seed std, seeds a row | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for (seed_std, seeds), cell in cells.items():
        lines.append(f"| {seed_std}, {seeds} | " + " | ".join(f"{rate(f, cell):.1%}" for f in names.values()) + " |")
    return "\n".join(lines)


if __name__ == "__main__":  # python -m tests.unit.test_significance_calibration: the rates table
    print(rate_table(draw_cells()))
