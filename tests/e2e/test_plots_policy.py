"""`tracking.plots`: what each trial's run holds under `all`, against a real MLflow server over HTTP, on the xdist
worker's Ray cluster. `best` (the default: only each variant's best trial draws, and the summary shows its heatmaps)
is checked on the sweep of tests/e2e/test_sweeps_by_name.py (sweeps.check_best_plots: two variants, two seeds each,
as its own sweep here had); `none` on tests/unit/test_metrics.py's LEAN_TRACKING sweep."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.e2e.sweeps import artifacts, child_runs, heatmap_data, sweeper, write_space
from tests.servers import RayCluster

pytestmark = pytest.mark.slow

ONE_EPOCH = {
    "model": {"emb_size": 16, "hidden_size": 32, "dropout": 0.0},
    "train": {"lr": 5e-3, "batch_size": 32, "epochs": 1},
    "decode": {"beam_size": 2},
}


def run_sweep(
    tmp_path: Path, server_uri: str, name: str, plots: str, parameters: dict, ray: RayCluster
) -> tuple[list, str]:
    """A one-epoch sweep with tracking.plots = plots; its trial runs and its summary.md."""
    space = write_space(
        tmp_path,
        name=name,
        base=ONE_EPOCH,
        parameters=parameters,
        search={"max_concurrent": 2},
        tracking={"plots": plots},
    )
    done = sweeper(
        "run", str(space), "--storage", str(tmp_path / "sweeps"), "--tracking-uri", server_uri, cwd=tmp_path, ray=ray
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "summary skipped" not in done.stdout, done.stdout[-3000:]
    _, children = child_runs(MlflowClient(server_uri), name)
    return children, (tmp_path / "sweeps" / name / "summary" / "summary.md").read_text()


def test_all_has_every_trial_draw(tmp_path, mlflow_server, worker_ray):
    """`none` (trials log the heatmaps' data, nobody draws) is held by the LEAN_TRACKING sweep of
    tests/unit/test_metrics.py, which runs with it anyway."""
    children, summary = run_sweep(
        tmp_path, mlflow_server.uri, "plots-all", "all", {"train.seed": {"grid": [1, 2]}}, worker_ray
    )
    client = MlflowClient(mlflow_server.uri)
    assert len(children) == 2
    for child in children:
        sentences = heatmap_data(client, child.info.run_id, tmp_path)["sentences"]
        assert sentences
        drawn = sorted(f"attention_dev{s['index']}.png" for s in sentences)
        assert artifacts(client, child.info.run_id, "plots") == drawn
    assert "## Attention heatmaps" not in summary  # the trials drew them
