"""The function Tune calls in a sweep's trial processes.

Torch-free, so that the driver never imports the training stack: Tune pickles `run_trial` by reference (this
module and its name), and only a trial's process imports sweeper.running.trainable, torch and the model when its
first trial starts. A driver's start (`sweeper run`, `resume`, `extend`, a Ray Job's entrypoint) pays for Ray Tune
and MLflow alone.
"""

from __future__ import annotations

import time
from typing import Any

from sweeper.running.trial_context import SweepContext


def run_trial(config: dict[str, Any], context: SweepContext) -> None:
    """One trial, in a Ray worker's process: the training stack is imported here, by the process that trains. Its
    clock starts first: the import holds the trial's device share, and the driver's accountant counts it too."""
    entered = time.perf_counter()
    from sweeper.running.trainable import train_trial

    train_trial(config, context, entered)
