"""Designed studies calibrated by simulation (#69 item 4): the whole procedure (looks, alpha spending, the two-level
seed x sentence test, extension by seeds) run on simulated studies, its error rates and the seeds it takes.

A simulated study compares two rows. Each seed's score is drawn as docs/statistics.md's model has it, at the level
the test reads it (SystemScores: each seed's BLEU on the test set and on the paired bootstrap's resamples):

    full[k, i]         = mu_k + a[k, i] + g_k + e[k, i]
    resampled[k, i, r] = full[k, i] + G[k, r] + I[k, i, r]

a the seed effect (sd seed_sd; with `heavy`, a share of runs land 2 BLEU low), e and I a seed's own sentence noise
(sd own_sd), g the system x sentence part every seed of a row shares on this test set and G its resampled
variation (sd shared_sd). Looks read the first k x seeds_per_look seeds of each row, as `sweeper extend` adds them,
with sweeper.design.decision's boundaries; `--naive` reads every look at the nominal alpha instead, the habit the
design replaces.

    python benchmarks/sequential_calibration.py                 # the table docs/statistics.md quotes
    python benchmarks/sequential_calibration.py --studies 500   # quicker

The table sizes each design as a study would (its maximum the fixed design's seeds times the inflation factor);
the calibration test reads the same procedure at 3 seeds a look.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, replace

import numpy as np
from scipy.special import ndtri

from nmt_core.training.evaluate import SystemScores, seed_sentence_test
from sweeper.design.decision import EQUIVALENCE, SUPERIORITY, Plan, boundaries, read_look
from sweeper.design.designs import Design
from sweeper.design.sample_size import fixed_seeds, fixed_seeds_equivalence

RESAMPLES = 100
LOW_RUN = 2.0  # BLEU a heavy-tailed regime's bad runs lose


@dataclass(frozen=True)
class Regime:
    """How seeds and sentences vary, in BLEU points."""

    seed_sd: float = 0.5  # the 9-seed study's seeds: 0.40-0.62
    own_sd: float = 0.15  # a seed's own sentence noise on Tatoeba's 2,785 sentences
    shared_sd: float = 0.0  # the data's regime: no system x sentence part measurable
    heavy: float = 0.0  # the share of runs LOW_RUN BLEU low


REGIMES = {
    "data": Regime(),
    "shared": Regime(shared_sd=0.3),
    "heavy": Regime(heavy=0.15),
}


def draw_row(rng: np.random.Generator, regime: Regime, mu: float, seeds: int) -> tuple[np.ndarray, np.ndarray]:
    """One row's seeds: their full scores (seeds,) and resamples (seeds, RESAMPLES)."""
    seed_effect = regime.seed_sd * rng.standard_normal(seeds) - LOW_RUN * (rng.random(seeds) < regime.heavy)
    shared = regime.shared_sd * rng.standard_normal()
    full = mu + seed_effect + shared + regime.own_sd * rng.standard_normal(seeds)
    noise = regime.shared_sd * rng.standard_normal(RESAMPLES) + regime.own_sd * rng.standard_normal((seeds, RESAMPLES))
    return full, full[:, None] + noise


def first(row: tuple[np.ndarray, np.ndarray], n: int) -> SystemScores:
    return SystemScores(row[0][:n], row[1][:n])


@dataclass(frozen=True)
class Study:
    """One simulated study's end: its verdict, and the seeds a row it took."""

    verdict: str
    seeds: int


def naive(plan: Plan) -> Design:
    """The design read without spending: every look at the nominal level (alpha, or alpha / 2 a side)."""
    level = plan.alpha / 2 if plan.test == SUPERIORITY else plan.alpha
    design = boundaries(replace(plan, futility=False))
    return replace(
        design, efficacy=(float(-ndtri(level)),) * plan.looks, nominal_p=(level,) * plan.looks, futility=None
    )


def run_study(
    rng: np.random.Generator, regime: Regime, plan: Plan, design: Design, difference: float, seeds_per_look: int
) -> Study:
    """Look by look to the first decision (or the last look)."""
    most = plan.looks * seeds_per_look
    control, treatment = draw_row(rng, regime, 0.0, most), draw_row(rng, regime, difference, most)
    for look in range(1, plan.looks + 1):
        n = look * seeds_per_look
        test = seed_sentence_test(first(control, n), first(treatment, n))
        reading = read_look(plan, design, look, test.delta, test.standard_error, test.df)
        if reading.decided:
            return Study(reading.verdict, n)
    return Study(reading.verdict, most)


def declared(verdict: str, test: str, sides: tuple[str, ...] = ("better", "worse")) -> bool:
    """What the test declares: a difference (on `sides`), or equivalence. Under the null, a type I error."""
    return verdict in sides if test == SUPERIORITY else verdict.startswith("equivalent")


def fixed_design(test: str, regime: Regime, effect: float, alpha: float, power: float) -> int:
    """Seeds a row one analysis needs at the same alpha and power (normal theory, the regime's seed-level sd)."""
    sd = math.hypot(regime.seed_sd, regime.own_sd)
    if test == SUPERIORITY:
        return fixed_seeds(sd, effect, alpha, power)
    return fixed_seeds_equivalence(sd, effect, alpha, power)


def calibrate(
    test: str,
    looks: int,
    regime: Regime,
    studies: int,
    seed: int = 0,
    spend: bool = True,
    seeds_per_look: int | None = 3,
    alternatives: bool = True,
) -> dict[str, float]:
    """The type I error rate over `studies` null studies, the expected seeds a row under the null and under the
    planned alternative, and the fixed design's seeds at the same alpha and power. `seeds_per_look` None: sized as
    a study is, so that its maximum is the fixed design's seeds times the design's inflation factor (its power the
    fixed design's)."""
    margin, effect, alpha, power = 0.5, 0.5, 0.05, 0.8
    plan = Plan(
        test, looks, alpha, power, "obrien_fleming", test == SUPERIORITY, margin if test == EQUIVALENCE else None
    )
    design = boundaries(plan) if spend else naive(plan)
    fixed = fixed_design(test, regime, effect, alpha, power)
    seeds_per_look = seeds_per_look or max(2, math.ceil(boundaries(plan).inflation * fixed / looks))
    rng = np.random.default_rng(seed)
    null = margin if test == EQUIVALENCE else 0.0
    nulls = [run_study(rng, regime, plan, design, null, seeds_per_look) for _ in range(studies)]
    alternative = 0.0 if test == EQUIVALENCE else effect
    runs = studies // 2 if alternatives else 0
    others = [run_study(rng, regime, plan, design, alternative, seeds_per_look) for _ in range(runs)]
    return {
        "error": sum(declared(s.verdict, test) for s in nulls) / studies,
        "seeds_null": float(np.mean([s.seeds for s in nulls])),
        "power": sum(declared(s.verdict, test, ("better",)) for s in others) / max(len(others), 1),
        "seeds_alternative": float(np.mean([s.seeds for s in others])) if others else math.nan,
        "maximum": looks * seeds_per_look,
        "fixed": fixed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--studies", type=int, default=2000)
    args = parser.parse_args()
    print(
        "| test | looks | regime | reading | type I error | seeds: null | power | seeds: alternative | most | fixed |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for test in (SUPERIORITY, EQUIVALENCE):
        for looks in (3, 5):
            for name, regime in REGIMES.items():
                for spend in (True, False):
                    found = calibrate(test, looks, regime, args.studies, spend=spend, seeds_per_look=None)
                    print(
                        f"| {test} | {looks} | {name} | {'spent' if spend else 'naive'} | {found['error']:.3f} | "
                        f"{found['seeds_null']:.1f} | {found['power']:.2f} | {found['seeds_alternative']:.1f} | "
                        f"{found['maximum']} | {found['fixed']} |",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
