"""Findings in plain words: where a mechanism degenerated, where training stopped too early, what is missing.

A table that marks SACT `**` over a baseline whose attention saturated in epoch 1, or whose temperature sat
at lambda on every token, would publish the wrong claim. These checks read the per-epoch dev diagnostics
(nmt_core.training.diagnostics) of every trial and say, per variant, what a reviewer would ask about.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from nmt_core.family.registry import is_adaptive
from nmt_core.training import diagnostic_keys as d

SHARE = 0.9  # a degenerate behaviour counts when it holds for at least this share of dev tokens
STILL_RISING = 0.02  # dev BLEU that rose by more than 2% (relative) in the last epoch has not converged
MIN_RISE = 0.2  # ... and by more than this much BLEU in absolute terms
# "converged" is said of a row (#69 item 6) only where at most this share of its trials had their best dev BLEU at
# their last epoch and its trials' dev BLEU rose at most CONVERGED_RISE over their last LAST_EPOCHS epochs
CONVERGED_SHARE, CONVERGED_RISE, LAST_EPOCHS = 0.2, 0.2, 3
MIN_SEEDS = 3  # fewer seeds per row: the seed spread is barely estimated (one seed: not at all)
SHOWN = 5  # rows named in a warning that lists rows


@dataclass
class VariantHistory:
    """The per-epoch dev numbers of one variant's seeds: metric -> one list (by epoch) per seed."""

    label: str
    temperature: str
    lam: float | None
    sentinel: bool
    curves: dict[str, list[list[float]]]
    patience: int = 0  # train.early_stopping: epochs without a better dev BLEU that end a seed (0: never)
    max_epochs: int = 0  # train.epochs: a seed that ran them all ended at this cap, not by early stopping (0: unknown)

    def at(self, metric: str, epoch: int) -> float | None:
        """Mean over seeds of a metric at an epoch (1-based; -1 = each seed's last)."""
        values = [curve[epoch - 1 if epoch > 0 else epoch] for curve in self.curves.get(metric, []) if curve]
        return statistics.fmean(values) if values else None

    @property
    def epochs(self) -> int:
        return min((len(c) for c in self.curves.get("bleu_dev", [])), default=0)


def degenerate(history: VariantHistory) -> list[str]:
    """What did not work as designed, from the last epoch's diagnostics (and the first, for saturation)."""
    found = []
    label = f"`{history.label}`"
    first, last = history.at(d.SATURATED, 1), history.at(d.SATURATED, -1)
    score_range = history.at(d.SCORE_RANGE, 1)
    if first is not None and first >= SHARE:
        found.append(
            f"{label}: attention saturated from epoch 1: one source word takes > {d.SATURATED_WEIGHT} of "
            f"the weight on {first:.0%} of dev steps (median score range {score_range:.1f}); the softmax "
            "passes almost no gradient to other words, so the alignment freezes early."
        )
    elif last is not None and last >= SHARE:
        found.append(
            f"{label}: attention saturated by the last epoch (max weight > {d.SATURATED_WEIGHT} on "
            f"{last:.0%} of dev steps)."
        )
    at_bound = history.at(d.TAU_AT_BOUND, -1)
    if is_adaptive(history.temperature) and at_bound is not None and at_bound >= SHARE:
        modulation = history.at(f"{d.MODULATION}_p50", -1)  # lambda^beta beside a base scale: what is bounded
        upper = (modulation or history.at(d.TAU_P50, -1) or 1.0) > 1.0
        bound = None if history.lam is None else f"{history.lam:g}" if upper else f"1/{history.lam:g}"
        fixed = (
            "the temperature acts as a fixed one"
            if bound is None  # a bounded temperature other than SACT
            else f"SACT acts as its base scale tau_0 times {bound}"
            if modulation is not None
            else f"SACT acts as a fixed temperature {bound}"
        )
        found.append(
            f"{label}: tau at its {'upper' if upper else 'lower'} bound for {at_bound:.0%} of dev tokens "
            f"(p5 {history.at(d.TAU_P5, -1):.2f}, p95 {history.at(d.TAU_P95, -1):.2f}): {fixed} here, "
            "not an adaptive one."
        )
    collapsed, gate = history.at(d.GATE_COLLAPSED, -1), history.at(d.GATE_MEAN, -1)
    if history.sentinel and collapsed is not None and collapsed >= SHARE:
        found.append(
            f"{label}: sentinel gate collapsed: beta < {d.COLLAPSED_GATE} for {collapsed:.0%} of dev tokens "
            f"(mean {gate:.3f}); the model does not use its sentinel."
        )
    elif history.sentinel and gate is not None and gate >= SHARE:
        found.append(f"{label}: sentinel gate stuck open (mean {gate:.2f}): the decoder ignores the source.")
    return found


@dataclass(frozen=True)
class Convergence:
    """How far a row's trials were from convergence, as measured: the trials whose best dev BLEU and whose lowest
    dev loss came at their last epoch, and the dev BLEU their last LAST_EPOCHS epochs added (mean over trials)."""

    label: str
    trials: int
    best_last: int
    loss_last: int
    rise: float | None  # None: fewer epochs than LAST_EPOCHS + 1
    budget: int  # train.epochs

    @property
    def converged(self) -> bool:
        small = self.best_last <= CONVERGED_SHARE * self.trials
        return small and self.rise is not None and self.rise <= CONVERGED_RISE


def convergence(history: VariantHistory) -> Convergence:
    bleu = [curve for curve in history.curves.get("bleu_dev", []) if curve]
    losses = [curve for curve in history.curves.get("dev_loss", []) if curve]
    rises = [curve[-1] - curve[-1 - LAST_EPOCHS] for curve in bleu if len(curve) > LAST_EPOCHS]
    return Convergence(
        history.label,
        len(bleu),
        sum(curve.index(max(curve)) == len(curve) - 1 for curve in bleu),
        sum(len(curve) > 1 and curve.index(min(curve)) == len(curve) - 1 for curve in losses),
        statistics.fmean(rises) if rises else None,
        history.max_epochs or max((len(curve) for curve in bleu), default=0),
    )


def still_rising(history: VariantHistory) -> str | None:
    """A dev BLEU curve that has not flattened: the ranking could change with more epochs.

    A seed that early stopping ended has converged by the sweep's own criterion (no better dev BLEU for
    `patience` epochs), even when its last epoch climbs back from a dip. Every other seed is judged by its own
    last two epochs, then averaged: seeds stopped at different epochs must not be compared with each other."""
    if history.epochs < 2:
        return f"`{history.label}`: one epoch only, so convergence cannot be judged."
    seeds = [curve for curve in history.curves["bleu_dev"] if curve]
    running = [curve for curve in seeds if not stopped_early(curve, history)]
    if not running:
        return None
    rise = statistics.fmean(curve[-1] - curve[-2] for curve in running)
    last = statistics.fmean(curve[-1] for curve in running)
    ends = sorted({len(curve) for curve in running})
    epoch = f"epoch {ends[0]}" if len(ends) == 1 else f"each seed's last epoch ({ends[0]}-{ends[-1]})"
    if len(running) < len(seeds):
        others = "the other" if len(seeds) - len(running) == 1 else "the others"
        epoch += f"; {len(running)} of {len(seeds)} seeds, early stopping ended {others}"
    if rise > MIN_RISE and rise > STILL_RISING * max(last, 1e-9):
        return (
            f"`{history.label}`: dev BLEU still rising at the last epoch (+{rise:.2f} to {last:.2f} in {epoch}): "
            "not converged, longer training could change the ranking."
        )
    return None


def stopped_early(curve: list[float], history: VariantHistory) -> bool:
    """Whether early stopping ended this seed: its last `patience` epochs brought no better dev BLEU than its
    best (nmt_core.training.train keeps the first best and counts the epochs after it), before the epoch cap. A seed
    that ran every epoch ended at the cap whatever its patience said: a larger train.early_stopping would not have
    trained it longer."""
    best_epoch = curve.index(max(curve)) + 1
    capped = len(curve) == history.max_epochs
    return history.patience > 0 and not capped and len(curve) - best_epoch >= history.patience


def stopped_while_loss_fell(history: VariantHistory) -> str | None:
    """Early stopping reads a noisy greedy dev BLEU: a seed it ended whose dev loss was lowest at its last epoch
    was still learning, so its row is not converged whatever its BLEU curve says."""
    seeds = [(bleu, loss) for bleu, loss in zip(history.curves["bleu_dev"], history.curves.get("dev_loss", [])) if bleu]
    ended = [
        len(bleu)
        for bleu, loss in seeds
        if stopped_early(bleu, history) and len(loss) > 1 and loss[-1] < min(loss[:-1])
    ]
    if not ended:
        return None
    epochs = ", ".join(str(epoch) for epoch in sorted(ended))
    return (
        f"`{history.label}`: early stopping ended {len(ended)} of {len(seeds)} seeds while their dev loss was still "
        f"falling (lowest at their last epoch: epoch {epochs}): dev BLEU's patience stopped them, not convergence; "
        "a larger train.early_stopping would tell."
    )


@dataclass
class ScaleCheck:
    """One SACT row as the control warning reads it: where its temperature settled and which temperature rows
    beside it (every other setting the same) could be its control."""

    label: str
    scale: str | None  # its median tau and spread (statistics.TauScale.text); None: no tau_p50 logged
    fixed_at_scale: bool  # a fixed tau within the tolerance of its median
    nearest_tau: float | None  # the fixed tau nearest its median (a row without temperature is tau = 1)
    learned: str | None  # the learned-temperature row of the same lambda
    learned_scale: str | None  # where that row's tau settled
    learned_at_scale: bool
    seeds_apart: bool = False  # its seeds' median taus lie further apart than one scale's tolerance spans


def missing_scale_controls(rows: list[ScaleCheck], tolerance: float) -> str | None:
    """SACT rows without a temperature at the scale SACT settled on: neither a fixed tau within a factor `tolerance`
    of its median tau nor a learned temperature that settled there. A fixed tau = lambda is SACT's softest bound,
    not its scale: only a constant temperature where SACT's sits tells adaptivity from a different constant."""
    missing = []
    for row in rows:
        if row.fixed_at_scale or row.learned_at_scale:
            continue
        found = [f"median tau {row.scale}" if row.scale else "median tau unknown: no tau_p50 logged"]
        if row.nearest_tau is not None:
            found.append(f"nearest fixed tau {row.nearest_tau:g}")
        learned = f"learned row `{row.learned}` at {row.learned_scale or 'an unknown tau'}"
        found.append(learned if row.learned else "no learned row")
        missing.append(f"`{row.label}` ({'; '.join(found)})")
    if not missing:
        return None
    return (
        f"no temperature control at the scale SACT settled on for {named(missing)}: a control is a learned "
        f"temperature (attention.temperature: learned, the same lambda) or a fixed tau within a factor {tolerance:g} "
        "of SACT's median tau, every other setting the same; without one, a difference from SACT cannot be told "
        "apart from a different constant temperature."
    )


def scattered_scales(rows: list[ScaleCheck], tolerance: float) -> str | None:
    """SACT rows whose seeds settled at different scales (their median taus more than a factor `tolerance` squared
    apart, so no constant temperature is within `tolerance` of them all): the fixed control at the row's median
    stands for none of its seeds, and the row's mean mixes different behaviours."""
    apart = [f"`{row.label}` ({row.scale})" for row in rows if row.seeds_apart]
    if not apart:
        return None
    return (
        f"SACT's seeds settled at different temperature scales in {named(apart)}: no constant tau is within a factor "
        f"{tolerance:g} of every seed's median tau, so a fixed control at the row's median stands for none of them; "
        "more seeds would tell a spread from a few outliers."
    )


def few_seeds(seeds: list[tuple[str, int]]) -> str | None:
    """Rows with fewer than MIN_SEEDS seeds: one seed has no seed variance (test-set variance only, no marks); two
    give a seed variance with one degree of freedom, so the seed-aware test is valid but can rarely detect anything."""
    few = [f"`{label}` ({n})" for label, n in seeds if n < MIN_SEEDS]
    if not few:
        return None
    return (
        f"fewer than {MIN_SEEDS} seeds in {len(few)} of {len(seeds)} rows ({named(few)}): a row with one seed is "
        "tested on test-set variance only and carries no mark; with two, the seed spread is barely estimated and "
        f"the intervals are wide; run the sweep with search.repeats >= {MIN_SEEDS}."
    )


def named(items: list[str]) -> str:
    """The first SHOWN of a warning's rows, and how many more."""
    return ", ".join(items[:SHOWN]) + (f" and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


OUTCOMES = {
    "better": "significantly better: ",
    "degenerate": "significantly better, but with a mechanism flagged as degenerate above (not a win of the method): ",
    "worse": "significantly worse: ",
    "same": "no significant difference: ",
    "test set": "test-set variance only, not marked: ",
}


def tuning_caveat(chosen: tuple[str, ...]) -> str:
    """What was not tuned per row: everything but the settings `summarize --choose` chose (each row's label names
    its chosen value)."""
    if not chosen:
        return (
            "Every variant trains with the settings of the space's `base` unless the sweep varies them: a "
            "variant tuned on its own (learning rate, dropout) could rank differently."
        )
    return (
        f"Each row's {'/'.join(chosen)} was chosen on the sweep's objective (its label names the value); every other "
        "setting is the space's `base` unless the sweep varies it: a variant tuned on its own in those could rank "
        "differently."
    )


@dataclass
class Claim:
    """One comparison as the closing paragraph states it."""

    label: str  # the variant
    against: str  # whom it was tested against, in words ("the baseline `x`")
    outcome: str  # a key of OUTCOMES but "degenerate"
    note: str = ""  # the difference, and where it is not significant the seeds a row would need


def what_it_shows(
    claims: list[Claim],
    degenerate: set[str],
    seeds: str,
    sentences: int,
    comparisons: int,
    caveats: list[str],
    chosen: tuple[str, ...] = (),
) -> str:
    """The closing paragraph: a sentence per baseline or control, naming it and what was tested against it.

    A significant gain of a variant in `degenerate` is never listed as a plain win.
    """
    tested: dict[str, dict[str, list[str]]] = {}
    for claim in claims:
        outcome = "degenerate" if claim.outcome == "better" and claim.label in degenerate else claim.outcome
        note = f" ({claim.note})" if claim.note else ""
        tested.setdefault(claim.against, {}).setdefault(outcome, []).append(f"`{claim.label}`{note}")
    lines = [
        f"Each claim names the row it was tested against ({seeds} per variant, {sentences} test sentences, "
        f"Holm-corrected over the {comparisons} comparisons of the table, by family as its footer says)."
    ]
    for against, outcomes in tested.items():
        lines.append(
            f"Against {against}: "
            + "; ".join(OUTCOMES[o] + ", ".join(outcomes[o]) for o in OUTCOMES if o in outcomes)
            + "."
        )
    cannot = [
        "A marked difference counts the spread of the seeds run and the sampling of test sentences; it does not "
        "cover other corpora, language pairs or model sizes.",
        tuning_caveat(chosen),
    ]
    return "\n".join([*lines, "", *cannot, *caveats]) + "\n"
