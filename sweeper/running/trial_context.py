"""What every trial of a sweep needs besides its own parameters: the driver builds it once, Tune hands it to each
trial through the object store. Torch-free: the driver imports it (sweeper.running.trial_handoff)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
