"""Sweeps by name (issue #43 item 1): what a driver records in storage, and `sweeper list | status | stop | logs`
reading it back, with the one-line errors of bad names, unknown sweeps and clusters that do not answer."""

from __future__ import annotations

import getpass
import json
import signal
import socket
import time
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pytest

from nmt_core.config import ConfigError
from sweeper import api
from sweeper import cli as sweeper_cli
from sweeper.running import sweeps
from sweeper.running.progress import Heartbeat, SweepProgress
from sweeper.storage.store import open_storage
from tests.unit.test_names_and_state import valid_state

ANOTHER_HOST = "a-node-elsewhere"


def state(name: str, **extra) -> dict:
    """sweeper.json as run_sweep writes it (runner.new_state)."""
    recorded = {"models": "best", "started_by": "alice", "started_at": 1_700_000_000.0, "job": None, "trials": 4}
    return {**valid_state("sqlite:////tmp/mlflow.db"), "name": name, **recorded, **extra}


def sweep(storage: Path, name: str, status: dict | None = None, driver: dict | None = None, **extra):
    """A sweep's folder as its driver leaves it: sweeper.json, and status.json written by write_status."""
    experiment = open_storage(str(storage), "test").below(name)
    experiment.write_text(json.dumps(state(name, **extra)), "sweeper.json")
    if status is not None:
        sweeps.write_status(experiment, status)
        if driver is not None:  # as another driver wrote it
            record = json.loads(experiment.read_text(sweeps.STATUS_FILE))
            experiment.write_text(json.dumps({**record, **driver}), sweeps.STATUS_FILE)
    return experiment


def running(**counts) -> dict:
    board = ["[12:00:00] sweep x: 1 done, 0 failed, 2 running, 1 pending", "    a: epoch 2/3"]
    status = {"state": "running", "trials": 4, "done": 1, "running": 2, "failed": 0, "pending": 1, "best": 12.5}
    return {**status, "board": board, **counts}


def test_a_running_sweep_a_gone_driver_and_a_silent_one_are_told_apart(tmp_path):
    here = sweep(tmp_path, "here", running())  # this process is its driver: alive
    sweep(tmp_path, "gone", running(), {"driver": {"host": socket.gethostname(), "pid": 1, "since": 0.0}})
    silent = {"updated": time.time() - 2 * sweeps.STALE_S, "driver": {"host": ANOTHER_HOST, "pid": 7, "since": 1.0}}
    sweep(tmp_path, "silent", running(), silent)
    busy = {"updated": time.time() - 5, "driver": {"host": ANOTHER_HOST, "pid": 7, "since": 1.0}}
    sweep(tmp_path, "elsewhere", running(), busy)
    found = {info.name: info for info in sweeps.list_sweeps(str(tmp_path), None)}
    assert (found["here"].state, found["here"].done, found["here"].best) == ("running", 1, 12.5)
    assert found["here"].started_by == "alice" and found["here"].storage == here.uri
    assert found["gone"].state == "stopped" and "its driver (pid 1) is gone" in found["gone"].detail
    assert "`sweeper resume gone` continues it" in found["gone"].detail
    assert found["silent"].state == "stopped" and f"no word from its driver on {ANOTHER_HOST}" in found["silent"].detail
    assert found["elsewhere"].state == "running"


def test_list_reads_results_of_a_sweep_from_before_status_json_and_skips_other_folders(tmp_path):
    experiment = sweep(tmp_path, "older")
    statuses = ["TERMINATED", "ERROR", "TERMINATED", "UNFINISHED"]
    experiment.write_parquet(pa.table({"status": statuses}), "results.parquet")
    sweep(tmp_path, "never")  # sweeper.json only: its driver never reached a trial
    (tmp_path / "not-a-sweep").mkdir()
    (tmp_path / "bad name").mkdir()
    frame = api.list_sweeps(str(tmp_path))
    assert sorted(frame["name"]) == ["never", "older"]
    older = frame.set_index("name").loc["older"]
    assert (older["state"], older["done"], older["failed"], older["pending"]) == ("stopped", 2, 1, 1)
    assert frame.set_index("name").loc["never"]["state"] == "unknown"
    assert str(frame["started_at"].dtype).startswith("datetime64")


def test_status_json_is_rechecked_on_read(tmp_path):
    experiment = sweep(tmp_path, "x", running(board=["bell\x07 and \x1b[31mred", 3], best="12", done=-1))
    status = sweeps.read_status(experiment)
    assert status["board"] == ["bell\\x07 and \\x1b[31mred", "3"] and status["best"] is None and status["done"] is None
    experiment.write_text(json.dumps({"state": "rm -rf"}), sweeps.STATUS_FILE)
    with pytest.raises(ConfigError, match=r"status.json: \(file\): the sweep's storage is damaged: state 'rm -rf'"):
        sweeps.read_status(experiment)
    experiment.write_text('{"state": "runn', sweeps.STATUS_FILE)
    with pytest.raises(ConfigError, match="status.json: .*not JSON"):
        sweeps.read_status(experiment)


@pytest.mark.parametrize("local, reads", [(True, 1), (False, 3)])
def test_damage_is_read_again_only_where_a_read_can_tear(local, reads, monkeypatch):
    """Object storage's reader can catch a record between its size and its bytes: damage there is read twice more,
    0.5 s apart; a folder's record is replaced by a rename, whole, so its damage is final at the first read."""
    waits, calls = [], []
    monkeypatch.setattr(sweeps.time, "sleep", waits.append)

    def damaged():
        calls.append(1)
        raise ConfigError("(file)", "the sweep's storage is damaged", "status.json")

    with pytest.raises(ConfigError, match="damaged"):
        sweeps.settled(damaged, SimpleNamespace(is_local=local))
    assert len(calls) == reads and waits == [0.5] * (reads - 1)


def test_a_job_record_is_checked_as_any_input(monkeypatch):
    good = {"id": "sweeper-x-1a2b3c4d", "address": "http://head:8265", "submitted_by": "bob", "mlflow_user": "bob"}
    monkeypatch.setenv(sweeps.JOB_VARIABLE, json.dumps(good))
    assert sweeps.job_from_environment() == good
    for bad, key in (
        ({**good, "id": "../x"}, "SWEEPER_JOB.id"),
        ({**good, "address": "http://u:s3cret@head:8265"}, "SWEEPER_JOB.address"),
        ({**good, "submitted_by": "a\nb"}, "SWEEPER_JOB.submitted_by"),
        ([1], "SWEEPER_JOB"),
    ):
        monkeypatch.setenv(sweeps.JOB_VARIABLE, json.dumps(bad))
        with pytest.raises(ConfigError) as refused:
            sweeps.job_from_environment()
        assert f"sweeper run: {key}: " in str(refused.value) and "s3cret" not in str(refused.value)
    monkeypatch.delenv(sweeps.JOB_VARIABLE)
    assert sweeps.job_from_environment() is None


def test_a_submitted_sweep_without_address_is_asked_at_the_dashboard_it_recorded(tmp_path, monkeypatch):
    job = {"id": "sweeper-sub-1a2b3c4d", "address": "http://head:8265", "submitted_by": "bob", "mlflow_user": None}
    sweep(tmp_path, "sub", running(), job=job)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    asked = []

    def cluster(address, source):
        asked.append(address)
        if address is None:
            return None
        raise ConfigError("--address", "no Ray dashboard answers there", source)

    monkeypatch.setattr(sweeps, "cluster", cluster)
    info, _, client = sweeps.find("sub", str(tmp_path), None, "sweeper status")
    assert asked == [None, "http://head:8265"] and client is None
    assert "its Ray dashboard http://head:8265 does not answer" in info.detail


def test_stop_asks_a_local_driver_through_storage_and_an_ended_sweep_needs_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "carol")
    experiment = sweep(tmp_path, "live", running())
    assert sweeper_cli.main(["stop", "live", "--storage", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "stopping sweep live: its driver reads the request in" in out
    assert out.rstrip().endswith(f"continue with `sweeper resume live --storage {tmp_path}`")  # the root, not live/
    assert sweeps.stop_request(experiment)["by"] == "carol"
    sweep(tmp_path, "done", {**running(), "state": "finished"})
    assert sweeper_cli.main(["stop", "done", "--storage", str(tmp_path), "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["message"] == "sweep done is finished: nothing to stop" and answer["sweep"]["state"] == "finished"
    assert not (tmp_path / "done" / sweeps.STOP_FILE).exists()


def test_a_driver_carries_out_a_stop_request_as_ray_tune_does_a_ctrl_c(tmp_path, monkeypatch):
    """The heartbeat finds stop.json, sends its own process SIGUSR1 (the signal Ray Tune's handler takes) and says
    `stopping` in status.json; without a handler (Tune outside the main thread) it sends nothing."""
    experiment = sweep(tmp_path, "x", running())
    sweeps.request_stop(experiment, "dave")
    received = []
    previous = signal.signal(signal.SIGUSR1, lambda *_: received.append("SIGUSR1"))
    try:
        beat = Heartbeat(experiment.uri)
        beat.send(running())
        assert received == ["SIGUSR1"] and beat.stopping["by"] == "dave"
        assert sweeps.read_status(experiment)["state"] == "stopping"
        beat.send(running())  # once
        assert received == ["SIGUSR1"]
        signal.signal(signal.SIGUSR1, signal.SIG_DFL)
        Heartbeat(experiment.uri).send(running())  # SIG_DFL would end the process: not sent
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_a_sweep_with_nothing_running_and_no_room_says_it_waits_for_resources(monkeypatch):
    progress = SweepProgress("lab", planned=3, name_of=lambda t: t.trial_id)
    progress.watch("max", 1.0, 0.0)
    pending = [SimpleNamespace(trial_id="a", status="PENDING", last_result={})]
    monkeypatch.setattr(progress, "room", lambda: "1 CPU a trial, 0 free")
    assert "waiting" not in progress.lines(pending, {})[0]  # not yet: a trial's worker may be starting
    progress.idle_since = time.time() - 60
    line = progress.lines(pending, {})[0]
    assert "0 running, 3 pending: waiting for resources (1 CPU a trial, 0 free); elapsed" in line
    assert progress.status(pending, [line])["state"] == "waiting for resources"
    started = [SimpleNamespace(trial_id="a", status="RUNNING", last_result={"bleu_dev": 3.0})]
    status = progress.status(started, progress.lines(started, {}))
    assert (status["state"], status["running"], status["pending"], status["best"]) == ("running", 1, 2, 3.0)
    assert progress.idle_since is None


def test_logs_come_from_sweep_log_in_storage_with_a_tail(tmp_path, capsys):
    experiment = sweep(tmp_path, "x", running())
    experiment.write_text("".join(f"line {i}\x1b[0m\n" for i in range(100)), "sweep.log")
    assert sweeper_cli.main(["logs", "x", "--storage", str(tmp_path), "--tail", "2"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "line 98\nline 99\n" and captured.err.strip() == f"# {experiment.display('sweep.log')}"
    sweep(tmp_path, "quiet", running())
    assert sweeper_cli.main(["logs", "quiet", "--storage", str(tmp_path)]) == 2
    assert "NAME: no log of sweep quiet yet" in capsys.readouterr().err


def test_list_and_status_print_a_table_a_board_and_json(tmp_path, capsys):
    sweep(tmp_path, "lab-a", running())
    assert sweeper_cli.main(["list", "--storage", str(tmp_path)]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.split() == ["NAME", "STATE", "DONE", "RUNNING", "FAILED", "BEST", "STARTED", "BY", "STARTED",
                              "(UTC)", "RAY", "JOB"]  # fmt: skip
    assert row.split()[:7] == ["lab-a", "running", "1/4", "2", "0", "12.50", "bleu_dev"]
    assert sweeper_cli.main(["list", "--storage", str(tmp_path), "--json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert (listed["name"], listed["state"], listed["started_by"], listed["job_id"]) == (
        "lab-a",
        "running",
        "alice",
        None,
    )
    assert sweeper_cli.main(["status", "lab-a", "--storage", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("sweep lab-a: running\n  trials: 4 planned; 1 done; 2 running; 0 failed; 1 pending\n")
    assert "  best bleu_dev so far: 12.50\n" in out and "    a: epoch 2/3" in out and "MLflow:" not in out
    link = "http://mlflow.lab/#/experiments/4/runs?workflowType=machine_learning&viewStateShareKey=sweep-r1"
    sweep(tmp_path, "lab-b", running(), mlflow_link=link)  # the link `sweeper run` recorded
    assert sweeper_cli.main(["status", "lab-b", "--storage", str(tmp_path)]) == 0
    assert f"  MLflow: {link}\n" in capsys.readouterr().out
    assert sweeper_cli.main(["status", "lab-a", "--storage", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["board"][1] == "    a: epoch 2/3"


@pytest.mark.parametrize("command", ["status", "stop", "logs", "promote"])
@pytest.mark.parametrize("name", ["../x", "a\nb", "/etc"])
def test_a_bad_name_is_one_line_exit_2(command, name, tmp_path, capsys):
    extra = ["8f3a1_00004"] if command == "promote" else []
    assert sweeper_cli.main([command, name, *extra, "--storage", str(tmp_path)]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"sweeper: error: sweeper {command}: NAME: must be 1-100 letters"), line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["status", "stop", "logs"])
def test_an_unknown_sweep_and_a_cluster_that_does_not_answer_are_one_line_exit_2(command, tmp_path, capsys):
    assert sweeper_cli.main([command, "nope", "--storage", str(tmp_path)]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert f"sweeper {command}: NAME: no sweep named 'nope' under {tmp_path}" in line
    address = "http://127.0.0.1:9"
    assert sweeper_cli.main([command, "nope", "--storage", str(tmp_path), "--address", address]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line == (
        f"sweeper: error: sweeper {command}: --address: {address}: no Ray dashboard answers there within 10 s "
        "(ConnectionError); pass the head's dashboard address, e.g. http://HEAD:8265, or give it longer with "
        "NMT_SWEEPER_TIMEOUT"
    )


def test_list_asks_the_cluster_in_ray_address_and_refuses_credentials_there(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RAY_ADDRESS", "http://127.0.0.1:9")
    assert sweeper_cli.main(["list", "--storage", str(tmp_path)]) == 2
    assert "sweeper list: --address: http://127.0.0.1:9: no Ray dashboard answers there" in capsys.readouterr().err
    monkeypatch.setenv("RAY_ADDRESS", "http://u:t0ken@127.0.0.1:9")
    assert sweeper_cli.main(["list", "--storage", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "RAY_ADDRESS: " in err and "a credential in a URI" in err and "t0ken" not in err


@pytest.mark.parametrize("command", ["list", "status", "stop", "logs", "promote"])
def test_every_new_command_has_help_with_an_example(command, capsys):
    with pytest.raises(SystemExit):
        sweeper_cli.main([command, "--help"])
    out = capsys.readouterr().out
    assert f"example:\n  sweeper {command} " in out and ("--json" in out)


def test_names_complete_from_the_storage(tmp_path):
    sweep(tmp_path, "lab-a")
    sweep(tmp_path, "lab-b")
    sweep(tmp_path, "other")
    args = SimpleNamespace(storage=str(tmp_path))
    assert sweeper_cli.complete_names("lab", args) == ["lab-a", "lab-b"]
    assert sweeper_cli.complete_names("x", SimpleNamespace(storage="s3://")) == []


def test_who_started_a_sweep_is_its_mlflow_user_else_the_login(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "erin")
    assert sweeps.whoami() == "erin"
    monkeypatch.delenv("MLFLOW_TRACKING_USERNAME")
    assert sweeps.whoami() == getpass.getuser()
