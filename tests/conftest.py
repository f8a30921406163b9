"""Shared fixtures: tiny configurations that train in seconds on a CPU."""
from __future__ import annotations

import os

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


@pytest.fixture(autouse=True)
def _single_thread():
    torch.set_num_threads(1)  # tiny models: threads cost more than they give, and results stay stable


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory):
    from tests.servers import MlflowServer

    server = MlflowServer(tmp_path_factory.mktemp("mlflow"))
    yield server
    server.stop()
