"""The tracking callback survives a tracking server that is gone: trials go on, runs are marked incomplete."""
import http.server
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from mlflow.tracking import MlflowClient

from sweeper import tracking
from sweeper.storage import storage_folder
from sweeper.tracking import MlflowTrackingCallback, SweepTracker, TrackingError, check_reachable, resolve_uri, runs_link

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


class _BasicAuthOnly(http.server.BaseHTTPRequestHandler):
    """Answers like MLflow's basic-auth app: /health to anyone, 401 on the API without credentials."""

    def do_GET(self):
        if self.path == "/health":
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"OK")
            return
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="mlflow"')
        self.end_headers()
        self.wfile.write(b"You are not authenticated.")

    do_POST = do_GET

    def log_message(self, *args):
        pass


def test_refused_credentials_are_one_line_exit_2_before_anything_starts(tmp_path, monkeypatch):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _BasicAuthOnly)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    uri = f"http://127.0.0.1:{server.server_port}"
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    try:
        with pytest.raises(TrackingError) as err:
            check_reachable(uri)
        monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "ada")
        with pytest.raises(TrackingError) as as_ada:
            check_reachable(uri)
    finally:
        server.shutdown()
    assert str(err.value) == (f"--tracking-uri: tracking.uri: tracking server {uri} refused a request without "
                              "credentials (HTTP 401); set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD")
    assert f"refused user 'ada' (HTTP 401)" in str(as_ada.value)


@pytest.mark.parametrize("storage", ["s3://bucket/sweeps", "gs://bucket/sweeps", "hdfs://nn/sweeps"])
def test_object_storage_is_refused_in_one_line_not_made_a_local_folder(tmp_path, monkeypatch, storage):
    from sweeper.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "space.yaml").write_text("name: s\ndata: {corpus: synthetic}\n")
    for command in (["run", "space.yaml", "--storage", storage], ["summarize", "s", "--storage", storage],
                    ["resume", "s", "--storage", storage]):
        assert main(command) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["space.yaml"]
    assert storage_folder("file:///tmp/sweeps", "x") == Path("/tmp/sweeps")


def test_object_storage_message(capsys):
    from sweeper.cli import main

    assert main(["summarize", "s", "--storage", "s3://bucket/sweeps"]) == 2
    assert capsys.readouterr().err == ("sweeper: error: sweeper summarize: --storage: s3://bucket/sweeps: s3:// "
                                       "storage is not supported yet; use a folder that every node sees (a local "
                                       "folder on one machine, a ReadWriteMany volume or NFS on a cluster)\n")
