"""The tracking callback survives a tracking server that is gone: trials go on, runs are marked incomplete."""
from types import SimpleNamespace

import pytest
from mlflow.tracking import MlflowClient

from sweeper import tracking
from sweeper.tracking import MlflowTrackingCallback, SweepTracker, resolve_uri, runs_link

BASE = {"data": {"corpus": "synthetic"}, "model": {"emb_size": 8, "hidden_size": 8}}
TRIAL = SimpleNamespace(trial_id="abc_00000", config={"trial": {"params": {"attention.temperature": "sact"},
                                                                "seed": 3, "variant": "general+sact4"}},
                        checkpoint=None, last_result={})


def test_an_unreachable_server_never_raises_into_tune(monkeypatch, caplog):
    monkeypatch.setattr(tracking, "RETRY_ATTEMPTS", 2)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    callback = MlflowTrackingCallback("http://127.0.0.1:9", "gone", "parent", BASE)
    callback.on_trial_start(0, [], TRIAL)
    callback.on_trial_result(0, [], TRIAL, {"epoch": 1, "bleu_dev": 1.0})
    callback.on_trial_complete(0, [], TRIAL)
    assert callback.outcomes == {"abc_00000": "complete"}
    assert "giving up on open run" in caplog.text


def test_a_retried_trial_reuses_its_run_and_skips_logged_epochs(tmp_path):
    uri = resolve_uri(f"sqlite:///{tmp_path / 'm.db'}")
    tracker = SweepTracker(uri, "retry")
    parent = tracker.start_sweep("name: retry\n", {"trials": 1})
    first = MlflowTrackingCallback(uri, "retry", parent, BASE)
    for epoch in (1, 2):
        first.on_trial_result(0, [], TRIAL, {"epoch": epoch, "bleu_dev": float(epoch)})
    # the driver dies; a new one (resume) replays epoch 2 from the checkpoint, then goes on
    second = MlflowTrackingCallback(uri, "retry", parent, BASE)
    for epoch in (2, 3):
        second.on_trial_result(0, [], TRIAL, {"epoch": epoch, "bleu_dev": float(epoch)})
    client = MlflowClient(uri)
    runs = client.search_runs([tracker.experiment_id], filter_string="tags.`sweeper.role` = 'trial'")
    assert len(runs) == 1
    run = runs[0]
    assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "bleu_dev")) == [1, 2, 3]
    assert run.data.params["train.seed"] == "3" and run.data.params["attention.temperature"] == "sact"
    assert run.data.tags["sweeper.variant"] == "general+sact4"


@pytest.mark.parametrize("uri, expected", [
    ("http://mlflow:5000", "http://mlflow:5000/#/experiments/7/runs?workflowType=machine_learning"),
    ("sqlite:////data/m.db", "mlflow ui --backend-store-uri sqlite:////data/m.db   then open "
                             "http://127.0.0.1:5000/#/experiments/7/runs?workflowType=machine_learning"),
])
def test_runs_link_opens_the_runs_table_sorted_by_the_objective(uri, expected):
    link = runs_link(uri, "7", "bleu_dev", "max")
    assert link.startswith(expected) and link.endswith("&orderByKey=metrics.%60bleu_dev%60&orderByAsc=false")
    assert runs_link(uri, "7", "dev_loss", "min").endswith("&orderByKey=metrics.%60dev_loss%60&orderByAsc=true")
