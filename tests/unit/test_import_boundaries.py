"""nmt_core knows nothing of Ray, MLflow or Optuna: importing the model, the data and training must not load them
(a trial's process, `nmt train` and the oracles stay light); and importing sweeper sets no environment variable."""

from __future__ import annotations

import json
import subprocess
import sys


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


def test_importing_sweeper_sets_no_environment_variable():
    """Ray and MLflow are imported first: what they set at import (RAY_CLIENT_MODE) is theirs. One process imports
    the modules in turn (what a module's imports set or remove shows under the first module that imports them)."""
    modules = ["sweeper.summary", "sweeper.runner", "sweeper.tracking"]
    changed = json.loads(
        _run(
            "import importlib, json, os, ray, ray.tune, mlflow\nchanged = {}\n"
            f"for module in {modules!r}:\n"
            "    before = dict(os.environ)\n"
            "    importlib.import_module(module)\n"
            "    changed[module] = sorted({k for k, _ in set(before.items()) ^ set(os.environ.items())})\n"
            "print(json.dumps(changed))"
        )
    )
    assert changed == dict.fromkeys(modules, [])
