"""A lab's afternoon (issue #43 item 2): two researchers each submit two small sweeps at once to one 3-node Ray
cluster, one MLflow server with basic auth on PostgreSQL, one S3 bucket (tests/lab.py), with more trials than the
cluster has CPUs. Every sweep finishes, each trial is one MLflow run with every epoch once, each researcher is
refused the other's experiments, a sweep without room says "waiting for resources", `sweeper list` shows all four,
and one sweep is stopped midway with `sweeper stop` and finished with `sweeper resume`."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from sweeper import api
from sweeper.running.sweeps import list_sweeps
from sweeper.storage.store import open_storage
from tests.e2e.sweeps import child_runs, epoch_steps
from tests.lab import Lab, lab_space
from tests.servers import environment

pytestmark = pytest.mark.slow
# name: (owner, epochs, seeds, trials at once): 2 trials each; the one stopped midway 4, one at a time; 2 CPUs in all.
SWEEPS = {
    "alice-a": ("alice", 2, 1, 2),
    "alice-b": ("alice", 3, 2, 1),
    "bob-a": ("bob", 2, 1, 2),
    "bob-b": ("bob", 2, 1, 2),
}
# the boards say "waiting for resources" after 3 s without a CPU, not 15 (progress.WAITING_AFTER_S): on an idle
# machine this lab's 2-epoch trials give every sweep a CPU within 12 s (a quiet CI run saw no board say it)
WAITING_AFTER_S = 3.0
STOPPED = "alice-b"
OTHERS = [name for name in SWEEPS if name != STOPPED]  # the sweeps that run to their end
# no models or heatmaps (tests/e2e/test_sweeps_by_name.py tests tracking.models): a trial's model and plots are a
# dozen more requests to the one MLflow server the four sweeps share, on a machine the cluster already loads
TRACKING = {"models": "none", "plots": "none"}
STOP_WAIT_S = 3600.0  # `sweeper stop --wait`: longer than pytest-timeout, which bounds the test instead


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    if not any(Path("/usr/lib/postgresql").glob("*/bin/initdb")) and not os.environ.get("CI"):
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql); .ci/run installs it")
    lab = Lab(tmp_path_factory.mktemp("lab"), waiting_after_s=WAITING_AFTER_S)
    yield lab
    lab.stop()


def watch(lab: Lab, until, seen: dict[str, set], address: str | None = None) -> dict:
    """Poll the sweeps (as `sweeper list` reads them: storage, and Ray Jobs with `address`) until `until(sweeps)`;
    every state and board line seen is kept in `seen`. A failed sweep fails the test at once; no deadline of its
    own (pytest-timeout bounds it)."""
    while True:
        sweeps = {info.name: info for info in list_sweeps(lab.storage, address)}
        for name, info in sweeps.items():
            seen.setdefault(name, set()).add(info.state)
            seen.setdefault(f"{name}:board", set()).update(info.board)
        failed = [name for name, info in sweeps.items() if info.state == "failed"]
        assert not failed, f"{failed} failed; seen: {seen}"
        if until(sweeps):
            return sweeps
        time.sleep(0.5)


def midway(sweeps: dict) -> bool:
    """The sweep to stop has finished a trial and runs another, with more to go."""
    info = sweeps.get(STOPPED)
    assert info is None or info.state not in ("finishing", "finished"), f"{STOPPED} ended before it was stopped"
    return info is not None and info.state == "running" and 1 <= (info.done or 0) <= 2 and bool(info.running)


def the_rest_ended(sweeps: dict) -> bool:
    """The other sweeps finished, and the stopped one's Ray job has ended too (its driver may still be saving its
    experiment after SIGINT when its storage already says stopped)."""
    finished = all(name in sweeps and sweeps[name].state == "finished" for name in OTHERS)
    return finished and sweeps[STOPPED].job_status not in ("PENDING", "RUNNING")


@pytest.mark.timeout(2400)  # about 4 minutes on 2 idle cores; a shared, loaded machine takes many times that
def test_a_lab_afternoon(lab, tmp_path):
    with environment(lab.cluster.client_env):  # this process asks the cluster's Jobs API as the researchers do
        submitted = {
            name: lab.submit(user, lab_space(tmp_path, name, epochs, seeds, at_once, TRACKING), tmp_path)
            for name, (user, epochs, seeds, at_once) in SWEEPS.items()
        }
        for name, job in submitted.items():
            output, _ = job.communicate()
            assert job.returncode == 0, output[-3000:]
            assert (
                f"submitted sweep {name!r} as Ray job sweeper-{name}-" in output and f"by {SWEEPS[name][0]}" in output
            )
        seen: dict[str, set] = {}
        watch(lab, midway, seen, lab.cluster.dashboard)  # Ray Jobs too: a job that fails before its driver writes
        # `sweeper stop` from this process (a command's start can outlast the rest of the sweep on a loaded machine)
        stop = api.stop_sweep(STOPPED, storage=lab.storage, address=lab.cluster.dashboard, wait_s=STOP_WAIT_S)
        assert stop.message.startswith(f"stopping sweep {STOPPED}: Ray Jobs stops job sweeper-{STOPPED}-"), stop
        assert stop.sweep.state == "stopped", stop
        stopped = open_storage(lab.storage, "test").below(STOPPED).read_parquet("results.parquet").to_pylist()
        assert sum(r["status"] == "TERMINATED" for r in stopped) < 4, "stopped midway, not at the end"
        sweeps = watch(lab, the_rest_ended, seen, lab.cluster.dashboard)
        assert (sweeps[STOPPED].state, sweeps[STOPPED].job_status) == ("stopped", "STOPPED")
        waited = [n for n in SWEEPS if "waiting for resources" in seen.get(n, set())]
        assert waited, f"no sweep was seen waiting for resources: {seen}"
        assert any("waiting for resources (1 CPU a trial, 0 free)" in line for line in seen[f"{waited[0]}:board"])

        resumed = lab.sweeper(
            "alice", "resume", STOPPED, "--storage", lab.storage, "--address", lab.cluster.address, cwd=tmp_path
        )
        assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
        listed = lab.sweeper("bob", "list", *lab.by_name(), "--json", cwd=tmp_path)
        assert listed.returncode == 0, listed.stderr[-3000:]
        rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert {name: row["state"] for name, row in rows.items()} == dict.fromkeys(SWEEPS, "finished")
    assert {name: row["started_by"] for name, row in rows.items()} == {n: sweep[0] for n, sweep in SWEEPS.items()}
    assert all(rows[n]["job_id"].startswith(f"sweeper-{n}-") for n in OTHERS) and rows[STOPPED]["job_id"] is None
    assert {name: (row["done"], row["trials"]) for name, row in rows.items()} == {
        name: (2 * sweep[2], 2 * sweep[2]) for name, sweep in SWEEPS.items()
    }
    check_each_trial_is_one_run_with_every_epoch_once(lab)
    check_nobody_reads_the_others_experiments(lab)


def check_each_trial_is_one_run_with_every_epoch_once(lab: Lab) -> None:
    storage = open_storage(lab.storage, "test")
    for name, (user, epochs, seeds, _) in SWEEPS.items():
        results = storage.below(name).read_parquet("results.parquet").to_pylist()
        assert [r["status"] for r in results] == ["TERMINATED"] * 2 * seeds, name
        with lab.mlflow.as_user(user):
            client = MlflowClient(lab.mlflow.uri)
            parents, children = child_runs(client, name)
            assert len(parents) == 1 and len(children) == 2 * seeds, name
            assert {r["mlflow_run_id"] for r in results} == {c.info.run_id for c in children}, name
            for child in children:
                assert child.info.status == "FINISHED", name
                assert epoch_steps(client, child.info.run_id) == list(range(1, epochs + 1)), name
        state = json.loads(storage.below(name).read_text("sweeper.json"))
        assert state["started_by"] == user and state["storage"]["trials"] == 2 * seeds, name


def check_nobody_reads_the_others_experiments(lab: Lab) -> None:
    """MLflow's per-experiment permissions: the cluster's account created each experiment and granted it to its
    submitter only (default_permission NO_PERMISSIONS)."""
    ids = {}
    for name, (user, *_) in SWEEPS.items():
        with lab.mlflow.as_user(user):
            ids[name] = MlflowClient(lab.mlflow.uri).get_experiment_by_name(name).experiment_id
    for name, (owner, *_) in SWEEPS.items():
        other = "bob" if owner == "alice" else "alice"
        with lab.mlflow.as_user(other), pytest.raises(MlflowException, match="403"):
            MlflowClient(lab.mlflow.uri).get_experiment(ids[name])
        with lab.mlflow.as_user(owner):
            assert MlflowClient(lab.mlflow.uri).get_experiment(ids[name]).name == name
