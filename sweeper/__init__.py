"""The sweep service: YAML search spaces as Ray Tune experiments, tracked in MLflow, summarised for papers."""

from sweeper.api import SweeperError, run, summarize, translate  # cheap: Ray, MLflow and torch load on first call

__all__ = ["SweeperError", "run", "summarize", "translate"]
