"""What every trial of a sweep needs besides its own parameters (the driver builds it once, Tune hands it to each
trial through the object store), and the driver's rule for a trial that diverged. Torch-free: the driver imports it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ray import tune

from sweeper.running.progress import trial_failure_cause

DIVERGED_ERROR = "TrainingDiverged"  # the name of nmt_core.training.train's exception, as a trial's error file gives it


@dataclass
class SweepContext:
    """What every trial needs besides its own parameters (handed over once through the object store)."""

    base: dict[str, Any]  # the trial config every trial starts from, paths already absolute
    cpus_per_trial: float
    gpus_per_trial: float  # a fraction packs trials onto one GPU; each then gets that share of its memory
    sweep: str  # the sweep's name: trials find its progress board by it
    mutable: tuple[str, ...]  # PBT's mutated keys, reported every epoch as `setting.<key>`
    system_metrics: bool  # sample CPU/memory/GPU and report them with every epoch (tracking.system_metrics)
    plots: str  # tracking.plots: only `all` has every trial draw its heatmaps
    models: str  # tracking.models: only `all` has every trial save its MLflow model (`best`: the driver, at the end)


class NoRetryAfterDivergence(tune.Callback):
    """Training is deterministic: a trial that diverged would diverge again from its checkpoint. Tune decides a
    retry from `trial.max_failures` alone and has queued it when `on_trial_recover` runs, so this sets the trial's
    allowance to 0 there: the queued start stops at once on the trainable's marker, and Tune then ends the trial
    instead of retrying it `failure.max_retries` times."""

    def on_trial_recover(self, iteration, trials, trial, **info):
        cause = trial_failure_cause(trial)  # "nmt_core.training.train.TrainingDiverged: epoch 3: ..."
        if cause.split(":", 1)[0].rsplit(".", 1)[-1] == DIVERGED_ERROR:
            trial.max_failures = 0
