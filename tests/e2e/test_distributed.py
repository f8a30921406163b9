"""A sweep on a multi-node Ray cluster with object storage, as it runs (and fails) in production.

All real, all on 127.0.0.1: a Ray head with 0 CPUs and two worker nodes, each its own `ray start`; moto's S3 API
server as the storage; an `mlflow server` whose artifacts go to the same bucket.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import boto3
import pytest
from mlflow.entities import LoggedModelStatus
from mlflow.tracking import MlflowClient

from sweeper import cli as sweeper_cli
from sweeper.storage.store import open_storage
from sweeper.tracking.backlog import BACKLOG_FILE
from tests.e2e.sweeps import SPACE, child_runs, epoch_steps, sweeper, write_space
from tests.servers import MlflowServer, MotoS3, RayCluster, read_until, wait_until

pytestmark = pytest.mark.slow
ARTIFACTS = "mlflow-artifacts"  # the MLflow servers' artifact prefix in the bucket
QUICKSTART = Path(__file__).parents[2] / "search_spaces" / "quickstart.yaml"
# tracking the node and driver losses read none of: each trial's sampler thread, and (for the lost node) the drawn
# heatmaps; models stay (check_everything_landed reads them), and so do the killed driver's heatmaps, which its
# summary from another folder draws again from the traces in the bucket
NO_SAMPLER = ["--set", "tracking.system_metrics=false"]
UNREAD_TRACKING = ["--set", "tracking.plots=none", *NO_SAMPLER]


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    server = MotoS3(tmp_path_factory.mktemp("moto"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, s3):
    nodes = RayCluster(tmp_path_factory.mktemp("ray"), workers=2, cpus_per_worker=1)
    yield nodes
    nodes.stop()


@pytest.fixture(scope="module")
def tracking(tmp_path_factory, s3):
    server = MlflowServer(
        tmp_path_factory.mktemp("mlflow-s3"),
        artifacts=f"s3://{s3.bucket}/{ARTIFACTS}",
        env={"MLFLOW_S3_ENDPOINT_URL": s3.endpoint},
    )
    yield server
    server.stop()


def space_for(folder: Path, name: str, epochs: int) -> Path:
    """Two trials, one CPU each (one per worker), epochs of a few seconds: long enough to be killed in."""
    return write_space(
        folder,
        name=name,
        resources={"cpu": 1, "gpu": 0},
        search={"max_concurrent": 2},
        data={**SPACE["data"], "train_subset": 3000},
        parameters={"attention.temperature": {"grid": ["none", "sact"]}},
        base={**SPACE["base"], "train": {**SPACE["base"]["train"], "epochs": epochs}},
    )


def trial_runs(client: MlflowClient, name: str):
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        return []
    return client.search_runs([experiment.experiment_id], filter_string="tags.`sweeper.role` = 'trial'")


def check_everything_landed(s3: MotoS3, client: MlflowClient, name: str, epochs: int, trials: int = 2) -> list:
    """results.parquet in the bucket, one FINISHED run per trial with every epoch once, artifacts in the bucket."""
    results = open_storage(s3.uri("sweeps"), "test").below(name).read_parquet("results.parquet").to_pylist()
    assert [r["status"] for r in results] == ["TERMINATED"] * trials
    parents, children = child_runs(client, name)
    assert len(parents) == 1 and len(children) == trials
    for child in children:
        assert child.info.status == "FINISHED"
        assert epoch_steps(client, child.info.run_id) == list(range(1, epochs + 1))
        assert {a.path for a in client.list_artifacts(child.info.run_id)} >= {"translations", "traces"}
    assert {r["mlflow_run_id"] for r in results} == {c.info.run_id for c in children}
    stored = boto3.client("s3", endpoint_url=s3.endpoint).list_objects_v2(Bucket=s3.bucket, Prefix=f"{ARTIFACTS}/")
    keys = [o["Key"] for o in stored.get("Contents", [])]
    for child in children:  # the trial's model: one READY LoggedModel of its run, its files in the bucket
        [model] = client.search_logged_models(
            [child.info.experiment_id], filter_string=f"source_run_id = '{child.info.run_id}'"
        )
        assert model.status == LoggedModelStatus.READY
        assert any(model.model_id in k and k.endswith("best.pt") for k in keys)
    return children


def test_a_lost_worker_node_costs_nothing(tmp_path, s3, cluster, tracking):
    """A shortened quickstart (the real Tatoeba corpus; 3 trials, 3 epochs, 100 dev and test sentences) with trials
    on both workers; SIGKILL one worker node (raylet and workers) in the middle of the sweep: its trial restarts on
    the other node from its last checkpoint in the bucket, and MLflow gets each epoch once."""
    client = MlflowClient(tracking.uri)
    shortened = [
        "--set",
        "search.repeats=1",
        "--set",
        "base.train.epochs=3",
        "--set",
        "base.train.early_stopping=0",
        "--set",
        "data.train_subset=2000",
        "--set",
        "data.eval_subset=100",
        *UNREAD_TRACKING,
    ]
    driver = sweeper(
        "run",
        str(QUICKSTART),
        "--name",
        "nodeloss",
        *shortened,
        "--storage",
        s3.uri("sweeps"),
        "--tracking-uri",
        tracking.uri,
        cwd=tmp_path,
        background=True,
        ray=cluster,
    )

    def both_training():
        """Two trials past their first epoch, one on each worker, and none at its last: a trial that finished on the
        victim before the kill (its neighbour slowed by a loaded machine) would end there, not on the survivor."""
        runs = {r.info.run_id: r for r in trial_runs(client, "nodeloss")}
        epochs = {run_id: len(epoch_steps(client, run_id)) for run_id in runs}
        ended = [run_id for run_id, count in epochs.items() if count >= 3 or runs[run_id].info.status != "RUNNING"]
        assert not ended, f"trials {ended} reached their last epoch before one trained on each worker: {epochs}"
        nodes = {runs[run_id].data.tags.get("sweeper.node") for run_id, count in epochs.items() if count}
        return nodes if None not in nodes and len(nodes) == 2 else None

    nodes = wait_until(both_training, "trials training on both workers", driver, every=1)
    victim = cluster.workers[1]
    assert any(victim.node_id()[:12] in node for node in nodes), nodes  # one trial on each worker
    victim.kill()
    output, _ = driver.communicate()
    assert driver.returncode == 0, output[-4000:]
    children = check_everything_landed(s3, client, "nodeloss", epochs=3, trials=3)
    survivor = cluster.workers[0].node_id()[:12]
    assert all(survivor in c.data.tags["sweeper.node"] for c in children)  # the lost trial finished there
    assert sorted(int(c.data.tags["sweeper.restores"]) for c in children) == [0, 0, 1]


def test_a_killed_driver_is_resumed_from_another_folder(tmp_path, s3, cluster, tracking):
    """SIGKILL the driver mid-sweep; `sweeper resume NAME --storage s3://...` from another working folder (nothing
    local survives) finishes the sweep from the bucket's state and checkpoints."""
    client = MlflowClient(tracking.uri)
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    driver = sweeper(
        "run",
        str(space_for(first, "driverloss", epochs=3)),
        *NO_SAMPLER,
        "--storage",
        s3.uri("sweeps"),
        "--tracking-uri",
        tracking.uri,
        cwd=first,
        background=True,
        ray=cluster,
    )
    wait_until(
        lambda: any(epoch_steps(client, r.info.run_id) for r in trial_runs(client, "driverloss")),
        "a first epoch",
        driver,
        every=1,
    )
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait()
    done = sweeper("resume", "driverloss", "--storage", s3.uri("sweeps"), cwd=second, ray=cluster)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    check_everything_landed(s3, client, "driverloss", epochs=3)
    summary = open_storage(s3.uri("sweeps"), "test").below("driverloss", "summary")
    at_the_end = summary.read_text("summary.md")
    assert "BLEU" in at_the_end
    assert sorted(p.name for p in second.iterdir()) == []  # a resume keeps nothing on the machine it runs on

    # summarise from a machine that has only the storage and the tracking server: no corpus cache, no head paths
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    summary.delete("summary.md")
    done = sweeper(
        "summarize",
        "driverloss",
        "--storage",
        s3.uri("sweeps"),
        "--tracking-uri",
        tracking.uri,
        cwd=elsewhere,
        env={"NMT_DATA_DIR": str(elsewhere / "no-cache")},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert summary.read_text("summary.md") == at_the_end
    assert sorted(p.name for p in elsewhere.iterdir()) == []


def test_storage_that_cannot_be_used_is_one_line_exit_2_before_any_trial(tmp_path, s3, tracking, capfd, monkeypatch):
    """`sweeper run` in this process: it checks the storage before it starts Ray or writes anything."""
    monkeypatch.chdir(tmp_path)
    space = space_for(tmp_path, "badstorage", epochs=1)
    for storage, expected in [
        (f"s3://missing/sweeps?endpoint_override=127.0.0.1:{s3.port}&scheme=http", "bucket 'missing' does not exist"),
        ("s3://sweeps/x?endpoint_override=127.0.0.1:9&scheme=http", "cannot write there"),
    ]:
        code = sweeper_cli.main(["run", str(space), "--storage", storage, "--tracking-uri", tracking.uri])
        err = capfd.readouterr().err
        assert code == 2, err[-2000:]
        [line] = err.strip().splitlines()
        assert line.startswith(f"sweeper: error: sweeper run: --storage: {storage}: ") and expected in line, line
    assert trial_runs(MlflowClient(tracking.uri), "badstorage") == []


def test_a_tracking_outage_loses_nothing(tmp_path, s3, worker_ray):
    """Kill the MLflow server (its whole process group) after the first epoch and start it again once the sweep has
    trained to its end and its driver waits for the server: the sweep goes on, and every epoch, tag, artifact and
    final result reaches the server once, in order."""
    (tmp_path / "mlflow").mkdir()
    server = MlflowServer(
        tmp_path / "mlflow", artifacts=f"s3://{s3.bucket}/{ARTIFACTS}", env={"MLFLOW_S3_ENDPOINT_URL": s3.endpoint}
    )
    client = MlflowClient(server.uri)
    try:
        driver = sweeper(
            "run",
            str(space_for(tmp_path, "outage", epochs=4)),
            "--storage",
            s3.uri("sweeps"),
            "--tracking-uri",
            server.uri,
            cwd=tmp_path,
            background=True,
            ray=worker_ray,
        )
        wait_until(
            lambda: any(epoch_steps(client, r.info.run_id) for r in trial_runs(client, "outage")),
            "a first epoch",
            driver,
            every=1,
        )
        server.kill()
        output = read_until(driver, "waiting for the tracking server")  # every trial ended while it was down
        server.start()
        rest, _ = driver.communicate()
        output += rest
        assert driver.returncode == 0, output[-4000:]
        assert "waiting for the tracking server" in output, output[-4000:]
        check_everything_landed(s3, client, "outage", epochs=4)
        assert not open_storage(s3.uri("sweeps"), "test").below("outage").exists(BACKLOG_FILE)
    finally:
        server.stop()
