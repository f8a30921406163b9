"""What end-to-end tests share: a tiny search space, `sweeper` as a user runs it, MLflow lookups, and a sweep run
once and watched while it runs (FinishedSweep), which the session fixtures of tests/e2e/conftest.py hand to the
tests that only read it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq
import yaml
from mlflow.tracking import MlflowClient

from tests.servers import RayCluster, listeners

SPACE = {
    "name": "tiny",
    "data": {"corpus": "synthetic", "train_subset": 600, "eval_subset": 40},
    "base": {
        "model": {"emb_size": 16, "hidden_size": 32, "dropout": 0.0},
        "train": {"lr": 5e-3, "batch_size": 32, "epochs": 2},
        "decode": {"beam_size": 2},
    },
    "parameters": {
        "attention.temperature": {"grid": ["none", "sact"]},
        "attention.sentinel": {"grid": [False, True], "if": {"attention.temperature": "sact"}},
    },
    "search": {"max_concurrent": 1},
}
# the tracking of a sweep whose test reads none of the heatmaps, models and system metrics: each costs a tiny sweep
# seconds of CPU (the summary draws 17 heatmaps in 2.9 s; a model per variant is saved and uploaded; a sampler thread
# per trial), about 15% of its total; the tests of tracking.plots, tracking.models and system metrics keep them on
LEAN_TRACKING = {"plots": "none", "models": "none", "system_metrics": False}


def write_space(folder: Path, **changes) -> Path:
    space = yaml.safe_load(yaml.safe_dump(SPACE))
    for key, value in changes.items():
        section, _, leaf = key.partition(".")
        if leaf:
            space.setdefault(section, {})[leaf] = value
        else:
            space[section] = value
    path = folder / "space.yaml"
    path.write_text(yaml.safe_dump(space))
    return path


def sweeper(*args, cwd: Path, background=False, env: dict[str, str] | None = None, ray: RayCluster | None = None):
    """`python -m sweeper.cli ARGS` in `cwd`: finished (no timeout: pytest-timeout bounds it), or started in the
    background in its own process group (so that a test can send it Ctrl+C), stdout and stderr in one pipe. With
    `ray` (a RayCluster: the `worker_ray` fixture, a test's own), a `run` or `resume` joins that cluster (its GCS
    address, its token) instead of starting a local Ray."""
    assert ray is None or args[0] in ("run", "resume", "extend"), "only run, resume, extend join a cluster by GCS"
    command = [sys.executable, "-m", "sweeper.cli", *args, *(["--address", ray.address] if ray else [])]
    token = ray.client_env if ray else {}
    env = {**{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}, **token, **(env or {})}
    if background:
        return subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)


def artifacts(client: MlflowClient, run_id: str, folder: str) -> list[str]:
    """The names of a run's artifacts in `folder`."""
    return sorted(Path(a.path).name for a in client.list_artifacts(run_id, folder))


def heatmap_data(client: MlflowClient, run_id: str, tmp_path: Path) -> dict:
    """The data a trial's run logs for its heatmaps (traces/heatmaps.json), whatever tracking.plots says."""
    return json.loads(
        Path(client.download_artifacts(run_id, "traces/heatmaps.json", str(tmp_path / run_id))).read_text()
    )


def child_runs(client: MlflowClient, name: str):
    experiment = client.get_experiment_by_name(name)
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if r.data.tags.get("sweeper.role") == "sweep"]
    children = [r for r in runs if r.data.tags.get("sweeper.role") == "trial"]
    return parents, children


def epoch_steps(client: MlflowClient, run_id: str) -> list[int]:
    return sorted(m.step for m in client.get_metric_history(run_id, "bleu/dev"))


def check_best_plots(client: MlflowClient, children: list, summary: str, tmp_path: Path) -> None:
    """`tracking.plots: best` on a finished sweep of the variants general+none and general+sact4, several trials
    each: every trial's run logs its heatmaps' data, only each variant's best trial (by bleu/dev) draws them, and the
    summary names that trial once under its heatmaps' heading."""
    by_variant: dict[str, list] = {}
    for child in children:
        by_variant.setdefault(child.data.tags["sweeper.variant"], []).append(child)
        data = heatmap_data(client, child.info.run_id, tmp_path)  # every trial logs what its heatmaps show
        assert data["sentences"] and all(len(s["weights"]) == len(s["target"]) for s in data["sentences"])
        assert (data["lambda"] is not None) == (child.data.params["attention.temperature"] == "sact")
    assert sorted(by_variant) == ["general+none", "general+sact4"]
    for variant, runs in by_variant.items():
        assert len(runs) > 1, variant  # a best among several
        drawn = [run for run in runs if artifacts(client, run.info.run_id, "plots")]
        assert len(drawn) == 1, variant  # the best trial's run only
        best = drawn[0]
        assert best.data.metrics["bleu/dev"] == max(run.data.metrics["bleu/dev"] for run in runs)
        plots = artifacts(client, best.info.run_id, "plots")
        assert "attention_dev0.png" in plots
        assert ("temperature_heatmap.png" in plots) == (variant == "general+sact4")
        name = best.data.tags["sweeper.variant_name"]  # the summary names its rows as the runs are named
        assert f"| {name} | {best.data.tags['sweeper.trial_id']} | `{best.info.run_id}` |" in summary
    assert "## Attention heatmaps (best trial of each variant by bleu_dev)" in summary


@dataclass
class FinishedSweep:
    """A `sweeper run` that has ended, as the tests that read it see it."""

    name: str
    folder: Path  # the working folder it ran in
    storage: Path
    tracking_uri: str
    returncode: int
    stdout: str
    stderr: str
    listening: set[tuple[str, str]] = field(default_factory=set)  # (process, address) of its TCP listeners

    @property
    def results(self) -> list[dict]:
        return pq.read_table(self.storage / self.name / "results.parquet").to_pylist()

    @property
    def client(self) -> MlflowClient:
        return MlflowClient(self.tracking_uri)


def run_watched(space: Path, folder: Path, tracking_uri: str, ray: RayCluster | None = None) -> FinishedSweep:
    """`sweeper run SPACE` to its end, noting every TCP socket its process tree listens on while it runs; on the local
    Ray it starts, or joining `ray` (as `sweeper` does) where what it tests is not that local Ray."""
    name = yaml.safe_load(space.read_text())["name"]
    storage = folder / "sweeps"
    command = [sys.executable, "-m", "sweeper.cli", "run", str(space), "--storage", str(storage)]
    command += ["--tracking-uri", tracking_uri, *(["--address", ray.address] if ray else [])]
    env = {**{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}, **(ray.client_env if ray else {})}
    # files, not pipes: a pipe nobody reads while we poll could fill and stall the driver
    with open(folder / "driver.out", "w") as out, open(folder / "driver.err", "w") as err:
        driver = subprocess.Popen(command, cwd=folder, stdout=out, stderr=err, env=env)
        seen: set[tuple[str, str]] = set()
        while driver.poll() is None:  # until it ends (pytest-timeout bounds it)
            seen |= listeners(driver.pid)
            time.sleep(0.5)
    stdout, stderr = ((folder / f"driver.{kind}").read_text() for kind in ("out", "err"))
    return FinishedSweep(name, folder, storage, tracking_uri, driver.returncode, stdout, stderr, seen)
