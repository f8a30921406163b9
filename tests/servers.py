"""Real servers for end-to-end tests, on 127.0.0.1 only: an MLflow tracking server with a SQL backend."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, process: subprocess.Popen, timeout: float = 90.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode} before answering {url}")
        try:
            if requests.get(url, timeout=2).ok:
                return
        except requests.RequestException:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{url} did not answer in {timeout}s")


class MlflowServer:
    """`mlflow server` with a SQLite backend and proxied artifacts, as deployments run it (with PostgreSQL)."""

    def __init__(self, folder: Path):
        self.port = free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        mlflow = Path(sys.executable).with_name("mlflow")
        self.log = open(folder / "mlflow-server.log", "w")
        self.process = subprocess.Popen(
            [str(mlflow), "server", "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1",
             "--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}",
             "--artifacts-destination", str(folder / "artifacts")],
            stdout=self.log, stderr=subprocess.STDOUT, env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
        wait_for(self.uri + "/health", self.process)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()
