"""Which parameters moved the objective: Optuna's fANOVA importance over a finished sweep's trials.

Any sweep (grid, random or Optuna) is replayed into an in-memory Optuna study, so the same evaluator
that the Optuna dashboard uses reads every search algorithm's trials.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

MIN_TRIALS = 8  # fANOVA's forest needs a few trials per varying parameter before its numbers mean anything
FANOVA_DEPTH = 8  # Optuna's default (64) grows a leaf per trial: at 1,000 trials the marginals took minutes


@dataclass
class TrialPoint:
    """One trial as the importance and parallel-coordinates views see it."""

    label: str
    params: dict[str, Any]  # the varying parameters only, typed (numbers, bools, strings)
    objective: float | None


@dataclass
class Importance:
    objective: str
    points: list[TrialPoint]
    varying: list[str]
    scores: dict[str, float] = field(default_factory=dict)  # parameter -> share of the objective's variance
    verdict: str = ""  # why there are no scores, or what they rest on


def trial_points(runs: list[tuple[str, dict[str, Any], float | None]]) -> tuple[list[TrialPoint], list[str]]:
    """(label, the settings it logged typed (TrialRecord.active), objective) per trial -> points over the parameters
    that take more than one value (None where a parameter is inactive for a trial's variant)."""
    keys = sorted({k for _, params, _ in runs for k in params if "." in k})
    # a setting only some variants have (attention.lambda with SACT) varies only if it takes several values
    varying = [k for k in keys if len({params[k] for _, params, _ in runs if k in params}) > 1]
    return [
        TrialPoint(label, {k: params.get(k) for k in varying}, objective) for label, params, objective in runs
    ], varying


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def parameter_importance(points: list[TrialPoint], varying: list[str], objective: str, mode: str) -> Importance:
    result = Importance(objective, points, varying)
    scored = [p for p in points if p.objective is not None and math.isfinite(p.objective)]
    if not varying:
        result.verdict = "no parameter varies between the trials: nothing to attribute"
    elif len(varying) == 1:
        result.scores = {varying[0]: 1.0}
        result.verdict = f"only {varying[0]} varies: all of the objective's variation is attributed to it"
    elif len(scored) < max(MIN_TRIALS, 2 * len(varying)):
        result.verdict = (
            f"too few trials to tell: {len(scored)} trials with {objective} for {len(varying)} varying "
            f"parameters; fANOVA needs at least {max(MIN_TRIALS, 2 * len(varying))}"
        )
    else:
        result.scores = fanova(scored, varying, mode)
        result.verdict = (
            f"fANOVA (Optuna's FanovaImportanceEvaluator, seed 0) over {len(scored)} trials: the share "
            f"of {objective}'s variance each parameter explains on its own"
        )
    return result


def fanova(points: list[TrialPoint], varying: list[str], mode: str) -> dict[str, float]:
    import optuna
    from optuna.distributions import CategoricalDistribution, FloatDistribution
    from optuna.importance import FanovaImportanceEvaluator, get_param_importances

    distributions, inactive = {}, {}
    for key in varying:
        values = [p.params[key] for p in points]
        numbers = [v for v in values if is_number(v)]
        if numbers and all(v is None or is_number(v) for v in values):
            # a number only some variants have (attention.tau): trials without it sit below its range, a region the
            # trees can split off, instead of a category per value (a random sweep's hundreds made fANOVA take hours)
            low, high = float(min(numbers)), float(max(numbers))
            inactive[key] = low - ((high - low) or 1.0)
            distributions[key] = FloatDistribution(inactive[key] if len(numbers) < len(values) else low, high)
        else:
            distributions[key] = CategoricalDistribution(sorted({str(v) for v in values}))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize" if mode == "max" else "minimize")
    for point in points:
        params = {
            k: (inactive[k] if v is None else float(v)) if isinstance(distributions[k], FloatDistribution) else str(v)
            for k, v in point.params.items()
        }
        study.add_trial(optuna.trial.create_trial(params=params, distributions=distributions, value=point.objective))
    return get_param_importances(study, evaluator=FanovaImportanceEvaluator(max_depth=FANOVA_DEPTH, seed=0))


def render(importance: Importance) -> str:
    lines = [f"Objective: `{importance.objective}`. {importance.verdict}.", ""]
    if importance.scores:
        lines += ["| parameter | importance |", "|---|---|"]
        lines += [f"| {k} | {v:.2f} |" for k, v in sorted(importance.scores.items(), key=lambda kv: -kv[1])]
        lines.append("")
    return "\n".join(lines)
