"""What an MT lab expects beside BLEU (issue 73), end to end: a real sweep (Ray, the tracking store, storage) scores
chrF and TER beside BLEU and counts each trial's device-seconds, is stopped by its budget as `sweeper stop` stops it,
tells a webhook receiver on 127.0.0.1, shows spent and left in `sweeper status`, and finishes when resumed with a
larger budget; MLflow, results.parquet and the summary hold the new numbers."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from mlflow.tracking import MlflowClient

from sweeper import cli as sweeper_cli
from sweeper.running.runner import COMPUTE_KEY
from tests.e2e.sweeps import LEAN_TRACKING, SPACE, child_runs, sweeper, write_space
from tests.servers import WebhookReceiver

pytestmark = pytest.mark.slow
NAME = "lab-budget"
EPOCHS = 6  # a trial's 6 epochs outlast the budget's check (every 0.5 s here) and the heartbeat's (every 1 s)
BUDGET_H = 0.0003  # about 1 s of one CPU core: spent within the first trial


def test_a_budget_stops_a_sweep_resumably_and_a_webhook_hears_how_it_ended(tmp_path, mlflow_server, worker_ray, capsys):
    space = write_space(
        tmp_path,
        name=NAME,
        parameters={"attention.temperature": {"grid": ["none", "sact"]}},
        base={**SPACE["base"], "train": {**SPACE["base"]["train"], "epochs": EPOCHS}},
        search={"max_concurrent": 1, "repeats": 2},  # 4 trials, one at a time
        resources={"cpu": 1, "budget": BUDGET_H},
        tracking=LEAN_TRACKING,
    )
    where = ["--storage", str(tmp_path / "sweeps")]

    def status_json() -> dict:
        """`sweeper status --json` in this process (sweeper_cli.main, what the command calls): the plain status
        below is the command's own process."""
        assert sweeper_cli.main(["status", NAME, *where, "--json"]) == 0
        return json.loads(capsys.readouterr().out)

    with WebhookReceiver() as receiver:
        env = {"SWEEPER_WEBHOOK_URL": receiver.url, "SWEEPER_STATUS_EVERY_S": "1", "SWEEPER_COMPUTE_EVERY_S": "0.5"}
        tracking = ["--tracking-uri", mlflow_server.uri]
        stopped = sweeper("run", str(space), *where, *tracking, cwd=tmp_path, env=env, ray=worker_ray)
        assert stopped.returncode == 130, stopped.stdout[-3000:] + stopped.stderr[-3000:]
        assert "resources.budget spent: " in stopped.stdout and f"sweeper resume {NAME} --budget H" in stopped.stdout
        status = status_json()
        assert status["state"] == "stopped" and status["compute"]["budget"] == BUDGET_H
        assert status["compute"]["device_hours"] >= BUDGET_H and status["compute"]["left"] == 0
        assert [m["event"] for m in receiver.received] == ["stopped"]
        assert receiver.received[0]["sweep"] == NAME and receiver.received[0]["verdict"].startswith("stopped: ")

        done = sweeper("resume", NAME, *where, "--budget", "5", cwd=tmp_path, env=env, ray=worker_ray)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        events = [m["event"] for m in receiver.received]
    assert events[:2] == ["stopped", "finished"] and set(events[2:]) <= {"warning"}
    finished = receiver.received[1]
    assert finished["verdict"].startswith("finished: 4/4 trials finished") and "#/experiments/" in finished["mlflow"]
    status = status_json()
    assert status["state"] == "finished" and status["compute"]["budget"] == 5 and 0 < status["compute"]["left"] < 5
    assert "compute: " in sweeper("status", NAME, *where, cwd=tmp_path).stdout

    table = pq.read_table(tmp_path / "sweeps" / NAME / "results.parquet")
    rows = table.to_pylist()
    assert len(rows) == 4 and all(r["status"] == "TERMINATED" for r in rows)
    assert all(0 < r["chrf_test_test"] <= 100 and 0 <= r["ter_test_test"] and r["device_s"] > 0 for r in rows)
    assert all(r["chrf_dev"] is not None for r in rows)
    spent = json.loads(table.schema.metadata[COMPUTE_KEY])
    assert spent["device_hours"] == pytest.approx(sum(r["device_s"] for r in rows) / 3600)
    client = MlflowClient(mlflow_server.uri)
    [parent], children = child_runs(client, NAME)
    by_trial = {c.data.tags["sweeper.trial_id"]: c for c in children}
    for row in rows:
        metrics, tags = by_trial[row["trial_id"]].data.metrics, by_trial[row["trial_id"]].data.tags
        assert metrics["result/chrf_test_test"] == pytest.approx(row["chrf_test_test"])
        assert metrics["result/ter_test_test"] == pytest.approx(row["ter_test_test"])
        assert metrics["result/device_s"] == pytest.approx(row["device_s"]) and "chrf/dev" in metrics
        assert "nc:6" in tags["sweeper.chrf_signature"] and "tok:tercom" in tags["sweeper.ter_signature"]
        assert tags["sweeper.device_unit"] == "CPU core"
    assert parent.data.metrics["device_hours"] == pytest.approx(spent["device_hours"])
    summary = (tmp_path / "sweeps" / NAME / "summary" / "summary.md").read_text()
    assert "## chrF and TER" in summary and "| chrF avg | delta chrF |" in summary and "## Compute" in summary


def test_an_optuna_sweep_with_two_objectives_gives_a_pareto_front(tmp_path, mlflow_server, worker_ray):
    """NSGA-II over the attention temperature, BLEU up and parameters down: Optuna's study holds both directions and
    both values of every trial, and the summary draws the front."""
    import optuna

    space = write_space(
        tmp_path,
        name="lab-pareto",
        parameters={"attention.temperature": {"choice": ["none", "sact"]}},
        base={**SPACE["base"], "train": {**SPACE["base"]["train"], "epochs": 1}},
        search={"algorithm": "optuna", "sampler": "nsga2", "num_samples": 3, "max_concurrent": 1},
        objective=[{"metric": "bleu_dev", "mode": "max"}, {"metric": "n_params", "mode": "min"}],
        tracking=LEAN_TRACKING,
    )
    where = ["--storage", str(tmp_path / "sweeps"), "--tracking-uri", mlflow_server.uri]
    done = sweeper("run", str(space), *where, cwd=tmp_path, ray=worker_ray)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    study = optuna.load_study(study_name="lab-pareto", storage=f"sqlite:///{tmp_path}/sweeps/lab-pareto/optuna.db")
    assert [d.name for d in study.directions] == ["MAXIMIZE", "MINIMIZE"]
    complete = [t for t in study.trials if t.state.name == "COMPLETE"]
    assert len(complete) == 3 and all(len(t.values) == 2 and t.values[1] > 0 for t in complete)
    summary = (tmp_path / "sweeps" / "lab-pareto" / "summary" / "summary.md").read_text()
    assert "## Pareto front" in summary and "| bleu_dev (max) | n_params (min) | place |" in summary
