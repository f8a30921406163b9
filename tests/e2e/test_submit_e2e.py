"""`sweeper submit` to a real Ray head (token auth on) with a real MLflow server, all on 127.0.0.1."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.servers import RayCluster

pytestmark = pytest.mark.slow
QUICKSTART = Path(__file__).parents[2] / "search_spaces" / "quickstart.yaml"
# a quickstart cut to the job's path: tiny data and grid, and none of the heatmaps, models and system metrics that no
# test here reads (each costs the job's trials CPU; tests/e2e/sweeps.py LEAN_TRACKING)
SHORT = [
    "--set",
    "data.train_subset=400",
    "--set",
    "data.eval_subset=20",
    "--set",
    "base.train.epochs=1",
    "--set",
    "parameters.attention.tau={grid: [1.2]}",
    "--set",
    "parameters.attention.lambda={grid: [4]}",
    "--set",
    "search.repeats=1",
    "--set",
    "tracking.plots=none",
    "--set",
    "tracking.models=none",
    "--set",
    "tracking.system_metrics=false",
]


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory):
    # every port its own (RayNode): a head on Ray's default agent port (52365) had no job agent while another test's
    # local Ray held that port, and the submitted quickstart waited for one until pytest-timeout (a CI run)
    head = RayCluster(
        tmp_path_factory.mktemp("rayhead"), workers=0, head_cpus=2, token=secrets.token_hex(16), dashboard=True
    )
    yield head
    head.stop()


def submit(head: RayCluster, *args, token: str | None = None):
    env = {**head.env, "RAY_AUTH_TOKEN": token or head.token}
    return subprocess.run(
        [sys.executable, "-m", "sweeper.cli", "submit", str(QUICKSTART), "--address", head.dashboard, *args],
        env=env,
        capture_output=True,
        text=True,
    )


def test_submitted_quickstart_succeeds_and_lands_in_mlflow(ray_head, mlflow_server, tmp_path):
    done = submit(
        ray_head,
        "--wait",
        "--name",
        "submitted-quickstart",
        "--storage",
        str(tmp_path / "sweeps"),
        "--tracking-uri",
        mlflow_server.uri,
        *SHORT,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "submitted sweep 'submitted-quickstart' as Ray job" in done.stdout
    assert "SUCCEEDED" in done.stdout and "3/3 trials finished" in done.stdout
    client = MlflowClient(mlflow_server.uri)
    experiment = client.get_experiment_by_name("submitted-quickstart")
    runs = client.search_runs([experiment.experiment_id])
    assert sorted(r.data.tags.get("sweeper.role") for r in runs) == ["sweep", "trial", "trial", "trial"]
    assert all(r.info.status == "FINISHED" for r in runs)
    assert (tmp_path / "sweeps" / "submitted-quickstart" / "results.parquet").exists()


def test_a_wrong_token_fails_fast_with_one_line(ray_head, mlflow_server):
    done = submit(ray_head, "--tracking-uri", mlflow_server.uri, token="not-the-token")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "the token was refused" in lines[0] and "RAY_AUTH_TOKEN" in lines[0]


def test_a_wrong_address_fails_fast_with_one_line(ray_head, mlflow_server):
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": ray_head.token}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sweeper.cli",
            "submit",
            str(QUICKSTART),
            "--address",
            "http://127.0.0.1:9",
            "--tracking-uri",
            mlflow_server.uri,
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "sweeper: error: sweeper submit: --address: http://127.0.0.1:9: no Ray dashboard "
        "answers there within 10 s (ConnectionError); pass the head's dashboard address, "
        "e.g. http://HEAD:8265, or give it longer with NMT_SWEEPER_TIMEOUT"
    )


def test_a_job_needs_a_tracking_store_that_outlives_it(ray_head):
    done = submit(ray_head)
    assert done.returncode == 2 and "--tracking-uri: a job's working folder is deleted" in done.stderr
