"""The sweep service: YAML search spaces as Ray Tune experiments, tracked in MLflow, summarised for papers."""

from sweeper.api import (  # cheap: Ray, MLflow and torch load on first call
    SweeperError,
    list_sweeps,
    promote,
    run,
    stop_sweep,
    summarize,
    sweep_infos,
    sweep_logs,
    sweep_status,
    translate,
)

__all__ = [
    "SweeperError",
    "list_sweeps",
    "promote",
    "run",
    "stop_sweep",
    "summarize",
    "sweep_infos",
    "sweep_logs",
    "sweep_status",
    "translate",
]
