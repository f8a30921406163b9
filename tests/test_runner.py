"""Runner helpers that need no Ray: trial ids read back from trial folders, statuses, error lines."""
from pathlib import Path

import pytest

from sweeper.runner import error_summary, trial_id_of, trial_status


@pytest.mark.parametrize("folder, trial_id", [
    ("bbdbe_00011_general+sact8+sentinel_seed1", "bbdbe_00011"),  # grid / random
    ("8287bf51_general+sact4.62552_seed1", "8287bf51"),  # Optuna
    ("f369adcd_dot+none_seed3", "f369adcd"),
])
def test_trial_id_is_read_back_from_the_trial_folder(folder, trial_id):
    assert trial_id_of(Path("/storage/sweep") / folder) == trial_id


def test_trial_status_and_error_line():
    assert [trial_status("complete", True), trial_status("complete", False), trial_status("error", False),
            trial_status(None, False)] == ["TERMINATED", "STOPPED", "ERROR", "UNFINISHED"]
    error = RuntimeError("ray::ImplicitFunc.train() (pid=1, ip=127.0.0.1)\n  File x\n\x1b[36mTrainingDiverged: epoch 1\x1b[0m")
    assert error_summary(error) == "TrainingDiverged: epoch 1"


def test_pbt_mutates_the_planned_params_and_gives_each_trial_an_initial_value():
    from ray.tune.schedulers import HyperBandScheduler, PopulationBasedTraining

    from sweeper.runner import build_tune_config
    from tests.test_space import spec_of

    spec = spec_of(**{"scheduler": {"type": "pbt", "mutations": {"train.lr": {"loguniform": [1e-4, 1e-2]},
                                                                 "train.label_smoothing": [0.0, 0.1, 0.2]}}})
    config, space = build_tune_config(spec, spec.base)
    assert isinstance(config.scheduler, PopulationBasedTraining)
    trials = space["trial"]["grid_search"]
    assert all(1e-4 <= t["params"]["train.lr"] <= 1e-2 and t["params"]["train.label_smoothing"] in (0.0, 0.1, 0.2)
               for t in trials)
    assert len({t["params"]["train.lr"] for t in trials}) == len(trials)  # a population, not clones
    assert build_tune_config(spec, spec.base)[1] == space  # seeded: the same plan twice
    explored = config.scheduler._custom_explore_fn({"trial": {"params": {"train.lr": 0.05, "train.label_smoothing": 0.1}}})
    assert explored["trial"]["params"]["train.lr"] == 1e-2  # clamped back into its range after a * 1.2
    hyperband, _ = build_tune_config(spec_of(**{"scheduler": {"type": "hyperband"}}), spec.base)
    assert isinstance(hyperband.scheduler, HyperBandScheduler)
