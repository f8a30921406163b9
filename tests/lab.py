"""A lab's shared machinery on 127.0.0.1, as a lab runs it: a 3-node Ray cluster (a head that schedules and serves
Ray Jobs, two one-CPU workers), an MLflow server with basic auth on PostgreSQL as deploy/ runs it, moto's S3 for the
sweeps' storage and MLflow's artifacts, and researchers who submit sweeps to it with `sweeper submit`.

The cluster's nodes track under the cluster's own MLflow account (their environment, as a Kubernetes Secret gives
it); a job carries no credential, and its driver grants the submitter the sweep's experiment. Shared by
tests/e2e/test_lab_afternoon.py and benchmarks/lab_load.py.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.servers import DeployedMlflow, MotoS3, RayCluster

CLUSTER_USER = "lab"  # the cluster's own MLflow account
USERS = {"alice": "alice-password-1", "bob": "bob-password-22", CLUSTER_USER: "cluster-password-333"}


def lab_space(
    folder: Path, name: str, epochs: int, seeds: int = 1, at_once: int = 2, tracking: dict | None = None
) -> Path:
    """Tiny synthetic trials, one CPU each, `at_once` at a time: two variants x `seeds`; `tracking`: the space's
    tracking settings besides system_metrics: false."""
    space = {
        "name": name,
        "data": {"corpus": "synthetic", "train_subset": 300, "eval_subset": 20},
        "base": {
            "model": {"emb_size": 16, "hidden_size": 16, "dropout": 0.0},
            "train": {"lr": 5e-3, "batch_size": 32, "epochs": epochs, "early_stopping": 0},
            "decode": {"beam_size": 2},
        },
        "parameters": {"attention.temperature": {"grid": ["none", "sact"]}},
        "search": {"max_concurrent": at_once, "repeats": seeds},
        "resources": {"cpu": 1, "gpu": 0},
        "tracking": {"system_metrics": False, **(tracking or {})},
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(space))
    return path


class Lab:
    def __init__(self, folder: Path, status_every_s: float = 2.0, waiting_after_s: float | None = None):
        """`status_every_s`: the drivers' status heartbeat; `waiting_after_s`: how long their boards let a sweep
        wait for a CPU before they say "waiting for resources" (sweeper.running.progress's default when None)."""
        for part in ("moto", "mlflow", "ray"):
            (folder / part).mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.s3 = MotoS3(folder / "moto")  # its credentials go into this process's environment, then the nodes'
        self.mlflow = DeployedMlflow(
            folder / "mlflow",
            USERS,
            f"s3://{self.s3.bucket}/mlflow-artifacts",
            env={"MLFLOW_S3_ENDPOINT_URL": self.s3.endpoint},
        )
        node_env = {**self.mlflow.credentials(CLUSTER_USER), "SWEEPER_STATUS_EVERY_S": str(status_every_s)}
        if waiting_after_s is not None:
            node_env["SWEEPER_WAITING_AFTER_S"] = str(waiting_after_s)
        self.cluster = RayCluster(folder / "ray", workers=2, cpus_per_worker=1, dashboard=True, env=node_env)
        self.storage = self.s3.uri("sweeps")

    def env(self, user: str) -> dict[str, str]:
        """A researcher's shell: the cluster's token, their own MLflow credentials."""
        env = {k: v for k, v in self.cluster.env.items() if not k.startswith(("MLFLOW_", "SWEEPER_"))}
        return {**env, **self.mlflow.credentials(user)}

    def sweeper(self, user: str, *args: str, cwd: Path, background: bool = False):
        command = [sys.executable, "-m", "sweeper.cli", *args]
        if background:
            return subprocess.Popen(
                command, cwd=cwd, env=self.env(user), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
        return subprocess.run(command, cwd=cwd, env=self.env(user), capture_output=True, text=True)

    def submit(self, user: str, space: Path, cwd: Path) -> subprocess.Popen:
        where = ["--address", self.cluster.dashboard, "--storage", self.storage, "--tracking-uri", self.mlflow.uri]
        return self.sweeper(user, "submit", str(space), *where, cwd=cwd, background=True)

    def by_name(self) -> list[str]:
        """The options `sweeper list | status | stop | logs` take here."""
        return ["--storage", self.storage, "--address", self.cluster.dashboard]

    def server_errors(self) -> int:
        """Responses with a 5xx status in the MLflow server's access log."""
        text = self.mlflow.log_path.read_text(errors="replace")
        return sum(1 for line in text.splitlines() if '" 5' in line and "HTTP/1.1" in line)

    def stop(self) -> None:
        """Everything down; the job drivers' logs kept beside the nodes' (the cluster's own folder goes)."""
        for log in Path(self.cluster.temp_dir).glob("session_latest/logs/job-driver-*.log"):  # the head's
            shutil.copy(log, self.folder / "ray" / log.name)
        for part in (self.cluster, self.mlflow, self.s3):
            try:
                part.stop()
            except Exception as err:  # noqa: BLE001 - take the rest down anyway
                print(f"could not stop {type(part).__name__}: {err}", file=sys.stderr)
