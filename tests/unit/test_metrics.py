"""The metric schema (sweeper/tracking/metrics.py) routes every metric training reports: to MLflow per epoch or once at
the end, to the parent run and to results.parquet; and `reverse_bleu_test_<set>` (bilingual symmetry) reaches all three
through a real sweep against a real `mlflow server`."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from mlflow.tracking import MlflowClient

from nmt_core.training.train import train
from sweeper.tracking.metrics import AT_END, PER_EPOCH, final_result, is_logged, metric_of, to_parent
from sweeper.tracking.mlflow_charts import group_colour
from tests.conftest import FEW_PAIRS, tiny_config
from tests.e2e.sweeps import LEAN_TRACKING, artifacts, child_runs, heatmap_data, sweeper, write_space


def test_every_metric_training_reports_is_routed():
    """A tiny trial with bilingual symmetry: each key of its epoch reports and of its final dict has a schema entry
    (a metric added to nmt_core without one fails here), final ones reach results.parquet and the parent run."""
    reports = []
    result = train(
        tiny_config(data=FEW_PAIRS, train={"epochs": 1, "symmetry_weight": 0.5}),
        log=lambda _: None,
        on_epoch_end=lambda report, state, best: reports.append(report),
    )
    epoch = set(reports[0]) - {"epoch"}
    assert {"bleu_dev", "chrf_dev", "dev_loss", "epoch_time_s"} <= epoch and all(is_logged(k, PER_EPOCH) for k in epoch)
    assert "reverse_bleu_test_test" in result.final and all(is_logged(k, AT_END) for k in result.final)
    assert {"chrf_test_test", "chrf_test_avg", "ter_test_test", "ter_test_avg"} <= set(result.final)
    assert {k for k in result.final if final_result(k)} == set(result.final) - {"best_epoch"}
    tested = ("bleu_test_", "chrf_test_", "ter_test_", "aer_")
    assert {k for k in result.final if to_parent(k)} == {k for k in result.final if any(t in k for t in tested)}


def test_epoch_metrics_and_unknown_keys():
    epoch = ("bleu_dev", "dev_loss", "attn_entropy", "setting.train.lr", "system/cpu_utilization_percentage")
    assert all(is_logged(k, PER_EPOCH) and not is_logged(k, AT_END) for k in epoch)
    assert to_parent("bleu_dev") and not to_parent("dev_loss") and not to_parent("n_params")
    assert metric_of("epoch") is None and metric_of("restores") is None and metric_of("bleu_dev_by_epoch") is None


@pytest.mark.slow
def test_reverse_bleu_reaches_the_run_the_parent_and_results(tmp_path, mlflow_server, worker_ray):
    space = write_space(
        tmp_path,
        name="e2e-symmetry",
        parameters={"train.symmetry_weight": {"grid": [0.5]}},
        base={
            "model": {"emb_size": 16, "hidden_size": 32, "dropout": 0.0},
            "train": {"lr": 5e-3, "batch_size": 32, "epochs": 1},
            "decode": {"beam_size": 2},
        },
        tracking=LEAN_TRACKING,
    )
    where = ["--storage", str(tmp_path / "sweeps"), "--tracking-uri", mlflow_server.uri]
    done = sweeper("run", str(space), *where, cwd=tmp_path, ray=worker_ray)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [row] = pq.read_table(tmp_path / "sweeps" / "e2e-symmetry" / "results.parquet").to_pylist()
    assert row["status"] == "TERMINATED" and 0 <= row["reverse_bleu_test_test"] <= 100
    client = MlflowClient(mlflow_server.uri)
    [parent], [child] = child_runs(client, "e2e-symmetry")
    assert child.data.metrics["result/reverse_bleu_test_test"] == pytest.approx(row["reverse_bleu_test_test"])
    assert [m.step for m in client.get_metric_history(child.info.run_id, "result/reverse_bleu_test_test")] == [0]
    assert [m.step for m in client.get_metric_history(child.info.run_id, "bleu/dev")] == [1]
    assert child.data.metrics["result/bleu_dev_best"] == pytest.approx(row["bleu_dev"])
    # the only trial is the best, on the parent run although tracking.models is none (LEAN_TRACKING)
    assert parent.data.tags["sweeper.best_run_id"] == child.info.run_id
    assert parent.data.metrics["sweep/reverse_bleu_test_test"] == pytest.approx(row["reverse_bleu_test_test"])
    assert parent.data.metrics["sweep/bleu_dev_best"] == pytest.approx(row["bleu_dev"])
    assert not any(name.startswith(("result/", "bleu/")) for name in parent.data.metrics)  # never a trial's name
    # issue 59, read back from the server: what MLflow's UI shows of the trial and of the sweep
    # one variant: no word is left out as shared by every other (sweeper/tracking/names.py)
    name = "general + no temperature + symmetry 0.5"
    assert child.info.run_name == f"{name} · seed {child.data.tags['sweeper.seed']}" and "seed" not in child.data.params
    # the colour MLflow gives the variant's group in its charts (issue 71)
    assert child.data.tags["mlflow.runColor"] == group_colour(name)
    assert child.data.tags["mlflow.source.name"] == "nmt-sweeper"
    used = [(i.dataset.name, [t.value for t in i.tags], len(i.dataset.digest)) for i in child.inputs.dataset_inputs]
    assert used == [(f"synthetic/{s}", [s], 16) for s in ("dev", "test", "train")]  # a split each, in its context
    tables = {t["path"] for t in json.loads(child.data.tags["mlflow.loggedArtifacts"])}
    assert tables == {"translations/dev.json", "translations/test.json"}
    assert "summary/bleu_table.json" in parent.data.tags.get("mlflow.loggedArtifacts", "")  # set by the summary
    note = client.get_run(parent.info.run_id).data.tags["mlflow.note.content"]
    assert f"(get-artifact?path=summary%2Fdev_bleu_curves.png&run_uuid={parent.info.run_id})" in note
    summary = (tmp_path / "sweeps" / "e2e-symmetry" / "summary" / "summary.md").read_text()  # read over HTTP
    assert "| general + no temperature + symmetry 0.5 | 1 |" in summary  # the row named as its run
    # tracking.plots none (LEAN_TRACKING): the trial logs its heatmaps' data, and nobody draws them
    assert heatmap_data(client, child.info.run_id, tmp_path)["sentences"]
    assert artifacts(client, child.info.run_id, "plots") == [] and "## Attention heatmaps" not in summary
