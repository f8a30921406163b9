"""nmt_core knows nothing of Ray, MLflow or Optuna: importing the model, the data and training must not load them
(a trial's process, `nmt train` and the oracles stay light); the config stands on the parts' declarations, not on
the models, so validating one needs no torch; and importing sweeper sets no environment variable."""

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
            "import json, sys, nmt_core, nmt_core.models.rnn, nmt_core.data.batches, nmt_core.training.train\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('ray', 'mlflow', 'optuna'))))"
        )
    )
    assert loaded == []


def test_configs_of_both_architectures_validate_and_label_without_torch():
    """With torch unimportable (`sys.modules["torch"] = None` makes `import torch` raise), nmt_core.config builds a
    config of each architecture with every kind of part, refuses a bad one in its one line, and the registry labels
    them: what `--help`, `sweeper validate` and a notebook's `import sweeper` need loads no model."""
    code = (
        "import json, sys\n"
        "sys.modules['torch'] = None\n"
        "from nmt_core.config import ConfigError, build_config\n"
        "from nmt_core.family.registry import label_words\n"
        "rnn = {'attention': {'score': 'concat', 'temperature': 'sact', 'coverage': True, 'position_bias': 'log'}}\n"
        "heads = {'model': {'arch': 'transformer'}, 'attention': {'temperature': 'learned', 'sentinel': True,\n"
        "         'position_bias': 'gaussian'}}\n"
        "labels = [label_words(build_config(raw)) for raw in (rnn, heads)]\n"
        "try:\n"
        "    build_config({'model': {'arch': 'transformer'}, 'attention': {'score': 'concat'}})\n"
        "except ConfigError as error:\n"
        "    labels.append(str(error))\n"
        "print(json.dumps(labels))"
    )
    rnn, heads, refused = json.loads(_run(code))
    assert rnn == ["concat", "sact4", "coverage", "pos-log"]
    assert heads == ["transformer", "learned4", "sentinel", "pos-gaussian"]
    assert refused.startswith("<config>: attention.score: must be one of dot, scaled_dot with model.arch transformer")


def test_a_summary_and_a_submission_load_no_ray_tune():
    """`sweeper summarize` and `submit` check their tracking store through sweeper.tracking.store, not through
    sweeper.tracking.runs (a Ray Tune callback): importing Ray Tune cold took 18-30 s here, 52 s on a loaded machine,
    the whole time of a summary against a server that fails at once (tests/fuzz/test_fuzz_servers.py)."""
    code = (
        "import json, sys, sweeper.api, sweeper.running.submit, sweeper.summary, sweeper.tracking.store\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('ray.tune', 'ray.data', 'ray.air')))))"
    )
    assert json.loads(_run(code)) == []


def test_a_sweeps_driver_its_summary_and_a_submission_load_no_torch():
    """Only a trial's process trains: the driver of `run`, `resume` and `extend` hands Tune a function by reference
    (sweeper.running.trial_handoff), `restore` writes runs from data, and the summary, the tracking store's checks
    and `submit` read names and numbers. Importing torch and the model cost each such process 2-5 s of CPU, about 45
    of them in the suite."""
    code = (
        "import json, sys, sweeper.api, sweeper.cli, sweeper.running.runner, sweeper.running.extend,"
        " sweeper.running.restore, sweeper.running.submit, sweeper.summary, sweeper.tracking.runs,"
        " sweeper.tracking.store\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'torch')))"
    )
    assert json.loads(_run(code)) == []


def test_importing_sweeper_sets_no_environment_variable():
    """Ray and MLflow are imported first: what they set at import (RAY_CLIENT_MODE) is theirs. One process imports
    the modules in turn (what a module's imports set or remove shows under the first module that imports them)."""
    modules = ["sweeper.summary", "sweeper.running.runner", "sweeper.tracking.runs"]
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
