"""Ray Tune's OptunaSearch over the sweep's persistent study (where it lives: sweeper.running.study).

Only the driver writes the study: OptunaSearch asks and tells there. On `sweeper resume` Tune unpickles the
searcher: its storage reconnects to the same URL and its study keeps its name, so there is no second study, and a
trial is told once (OptunaSearch ignores a second completion). So a trial that failed for good and that
`sweeper resume` retries to the end stays FAIL in the study, though results.parquet and MLflow show it finished.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial, TrialState
from ray.tune.search.optuna import OptunaSearch

from sweeper.running.study import shown
from sweeper.space.spec import OptunaSpace, SearchSpec, SpecError, SweepSpec
from sweeper.storage.store import first_line

SAMPLER_CLASSES = {
    "tpe": "TPESampler",
    "cmaes": "CmaEsSampler",
    "gp": "GPSampler",
    "random": "RandomSampler",
    "qmc": "QMCSampler",
    "nsga2": "NSGAIISampler",  # several objectives: NSGA-II (Deb et al. 2002)
}  # search.sampler -> its class in optuna.samplers
TRIAL_ID_ATTR = "sweeper.trial_id"  # on every Optuna trial: the Tune trial id, as results.parquet and MLflow name it


def make_sampler(search: SearchSpec, earlier: int = 0) -> BaseSampler:
    """The space's sampler, seeded with search.seed, plus the number of trials an earlier run left in the study:
    the same seed would draw that run's random startup configurations again. (QMC scrambles: an unscrambled Sobol
    sequence ignores the seed.)"""
    options = {"scramble": True} if search.sampler == "qmc" else {}
    return getattr(optuna.samplers, SAMPLER_CLASSES[search.sampler])(seed=search.seed + earlier, **options)


class SweepOptunaSearch(OptunaSearch):
    """Ray's OptunaSearch that tags each Optuna trial with its Tune trial id and, restored on `sweeper resume`, fails
    the study's trials it asked for after its last saved state: Tune never reports them, so they would stay RUNNING
    beside those asked for anew. After a Ctrl+C Tune saves last and there are none; a killed driver can leave some."""

    def suggest(self, trial_id: str) -> dict | None:
        config = super().suggest(trial_id)
        self._ot_trials[trial_id].set_user_attr(TRIAL_ID_ATTR, trial_id)
        return config

    def restore(self, checkpoint_path: str) -> None:
        super().restore(checkpoint_path)
        known = {trial.number for trial in self._ot_trials.values()}
        for orphan in self._ot_study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            if orphan.number not in known:
                self._ot_study.tell(orphan.number, state=TrialState.FAIL)


def open_study_storage(url: str, spec: SweepSpec) -> tuple[optuna.storages.RDBStorage, list[FrozenTrial]]:
    """The study's storage and the trials an earlier run left in this sweep's study. A storage that cannot be
    opened, or holds this sweep's study with the other direction, is refused before anything starts. An earlier
    run's study is continued, as Optuna's own `load_if_exists` does: its trials stay and the sampler learns from
    them."""
    try:
        if url.startswith("sqlite:///"):  # the sweep's folder does not exist before its first run
            Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        storage = optuna.storages.RDBStorage(url)
        earlier = next((s for s in optuna.get_all_study_summaries(storage) if s.study_name == spec.name), None)
        trials = optuna.load_study(study_name=spec.name, storage=storage).get_trials() if earlier else []
    except Exception as err:  # noqa: BLE001 - a missing database driver, a server that does not answer, ...
        raise SpecError(
            "search.study_storage",
            f"{shown(url)}: cannot open ({type(err).__name__}: {first_line(err)[:100]})",
            spec.source,
        ) from None
    directions = [("maximize" if o.mode == "max" else "minimize") for o in spec.objectives or (spec.objective,)]
    delete = f"optuna delete-study --study-name {spec.name} --storage {shown(url)}"
    made = [d.name.lower() for d in earlier.directions] if earlier is not None else directions
    if made != directions:
        raise SpecError(
            "objective.mode",
            f"the Optuna study {spec.name!r} in {shown(url)} was made to {', '.join(made)}; use another --name, or "
            f"`{delete}`",
            spec.source,
        )
    if trials:
        print(
            f"note: the Optuna study {spec.name!r} holds {len(trials)} trials of an earlier run; this run adds to "
            f"them, its sampler learns from them (seed {spec.search.seed} + {len(trials)}) and skips starting "
            f"points they tried (`{delete}` starts afresh)",
            flush=True,
        )
    return storage, trials


def tried(point: dict[str, Any], trials: list[FrozenTrial]) -> bool:
    """Whether a trial already ran with the point's values (Optuna's `enqueue_trial(skip_if_exists=True)`)."""
    return any(all(t.params.get(k) == v for k, v in point.items()) for t in trials)


def optuna_searcher(spec: SweepSpec, url: str | None) -> SweepOptunaSearch:
    """The define-by-run searcher with the sweep's sampler and starting points (asked for first, in order)."""
    storage, earlier = open_study_storage(url, spec) if url else (None, [])
    points = [p for p in spec.search.points_to_evaluate if not tried(p, earlier)]
    several = spec.objectives  # a list of metrics and modes: Optuna's multi-objective study
    return SweepOptunaSearch(
        space=OptunaSpace(spec.parameters),
        metric=[o.metric for o in several] if several else spec.metric,
        mode=[o.mode for o in several] if several else spec.mode,
        sampler=make_sampler(spec.search, len(earlier)),
        study_name=spec.name,
        storage=storage,
        points_to_evaluate=points or None,
    )
