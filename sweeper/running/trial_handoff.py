"""The function Tune calls in a sweep's trial processes, and the driver's retry rule for them.

Torch-free, so that the driver never imports the training stack: Tune pickles `run_trial` by reference (this
module and its name), and only a trial's process imports sweeper.running.trainable, torch and the model when its
first trial starts. A driver's start (`sweeper run`, `resume`, `extend`, a Ray Job's entrypoint) pays for Ray Tune
and MLflow alone.
"""

from __future__ import annotations

import time
from typing import Any

from ray import tune

from sweeper.running.progress import trial_failure_cause
from sweeper.running.trial_context import SweepContext

DIVERGED_ERROR = "TrainingDiverged"  # the name of nmt_core.training.train's exception, as a trial's error file gives it


class NoRetryAfterDivergence(tune.Callback):
    """Training is deterministic: a trial that diverged would diverge again from its checkpoint. Tune decides a
    retry from `trial.max_failures` alone and has queued it when `on_trial_recover` runs, so this sets the trial's
    allowance to 0 there: the queued start stops at once on the trainable's marker, and Tune then ends the trial
    instead of retrying it `failure.max_retries` times."""

    def on_trial_recover(self, iteration, trials, trial, **info):
        cause = trial_failure_cause(trial)  # "nmt_core.training.train.TrainingDiverged: epoch 3: ..."
        if cause.split(":", 1)[0].rsplit(".", 1)[-1] == DIVERGED_ERROR:
            trial.max_failures = 0


def run_trial(config: dict[str, Any], context: SweepContext) -> None:
    """One trial, in a Ray worker's process: the training stack is imported here, by the process that trains. Its
    clock starts first: the import holds the trial's device share, and the driver's accountant counts it too."""
    entered = time.perf_counter()
    from sweeper.running.trainable import train_trial

    train_trial(config, context, entered)
