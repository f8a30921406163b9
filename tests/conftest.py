"""Shared fixtures: tiny configurations that train in seconds on a CPU."""

from __future__ import annotations

import os
import sys

import pytest
import torch

from nmt_core.config import TrialConfig, build_config

TINY = {
    "data": {"corpus": "synthetic"},
    "model": {"emb_size": 16, "hidden_size": 16, "dropout": 0.0},
    "train": {"lr": 3e-3, "batch_size": 16, "epochs": 1, "seed": 1},
    "decode": {"beam_size": 3},
}

# every test names its own stores: an MLflow server or Ray cluster a developer exported must not receive test runs
for _name in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS"):
    os.environ.pop(_name, None)


def tiny_config(**sections) -> TrialConfig:
    """TINY with some sections' keys replaced, e.g. tiny_config(attention={"temperature": "sact"})."""
    raw = {name: dict(values) for name, values in TINY.items()}
    for name, values in sections.items():
        raw.setdefault(name, {}).update(values)
    return build_config(raw)


MLFLOW_URI_HOLDERS = {
    "mlflow.tracking._tracking_service.utils": "_tracking_uri",
    "mlflow.tracking._model_registry.utils": "_registry_uri",
}


@pytest.fixture(autouse=True)
def _mlflow_store_put_back():
    """A test that points MLflow's process-wide store somewhere (mlflow.set_tracking_uri also exports
    $MLFLOW_TRACKING_URI, which every command reads first) must not send the next test's sweeps there."""
    variables = {name: os.environ.get(name) for name in ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI")}
    saved = {
        module: getattr(sys.modules[module], name, None) if module in sys.modules else None
        for module, name in MLFLOW_URI_HOLDERS.items()
    }
    yield
    for module, name in MLFLOW_URI_HOLDERS.items():
        if module in sys.modules:
            setattr(sys.modules[module], name, saved[module])
    for name, value in variables.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(autouse=True)
def _single_thread():
    torch.set_num_threads(1)  # tiny models: threads cost more than they give, and results stay stable


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory):
    from tests.servers import MlflowServer

    server = MlflowServer(tmp_path_factory.mktemp("mlflow"))
    yield server
    server.stop()
