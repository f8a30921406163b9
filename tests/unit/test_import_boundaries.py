"""nmt_core knows nothing of Ray, MLflow or Optuna: importing the model, the data and training must not load them
(a trial's process, `nmt train` and the oracles stay light); and importing sweeper sets no environment variable."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_importing_nmt_core_loads_no_ray_mlflow_or_optuna():
    loaded = json.loads(
        _run(
            "import json, sys, nmt_core, nmt_core.model, nmt_core.data, nmt_core.train\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('ray', 'mlflow', 'optuna'))))"
        )
    )
    assert loaded == []


@pytest.mark.parametrize("module", ["sweeper.summary", "sweeper.runner", "sweeper.tracking"])
def test_importing_sweeper_sets_no_environment_variable(module):
    """Ray and MLflow are imported first: what they set at import (RAY_CLIENT_MODE) is theirs."""
    changed = json.loads(
        _run(
            f"import json, os, ray, ray.tune, mlflow\nbefore = dict(os.environ)\nimport {module}\n"
            "print(json.dumps(sorted(k for k in os.environ if os.environ[k] != before.get(k))))"
        )
    )
    assert changed == []
