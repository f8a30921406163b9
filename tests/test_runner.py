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
