"""Real servers for end-to-end tests, on 127.0.0.1 only: an MLflow tracking server with a SQL backend."""
from __future__ import annotations

import os
import signal
import shutil
import socket
import subprocess
import sys
import tempfile
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


class RayHead:
    """`ray start --head --block` on 127.0.0.1 with token authentication on, as a cluster's head runs."""

    def __init__(self, folder: Path, token: str, num_cpus: int = 2):
        self.token = token
        self.dashboard = f"http://127.0.0.1:{free_port()}"
        ray = Path(sys.executable).with_name("ray")
        self.env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token,
                    "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        self.env.pop("RAY_ADDRESS", None)
        self.log = open(folder / "ray-head.log", "w")
        self.temp_dir = tempfile.mkdtemp(prefix="rayh", dir="/tmp")  # short: Unix socket paths max 107 bytes
        self.process = subprocess.Popen(
            [str(ray), "start", "--head", "--block", "--node-ip-address", "127.0.0.1", "--port", str(free_port()),
             "--dashboard-host", "127.0.0.1", "--dashboard-port", self.dashboard.rsplit(":", 1)[1],
             "--ray-client-server-port", str(free_port()), "--min-worker-port", "0", "--max-worker-port", "0",
             "--num-cpus", str(num_cpus), "--disable-usage-stats", "--temp-dir", self.temp_dir],
            stdout=self.log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        headers = {"Authorization": f"Bearer {token}"}
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"ray head exited with {self.process.returncode}; see {folder / 'ray-head.log'}")
            try:
                if requests.get(self.dashboard + "/api/jobs/", headers=headers, timeout=2).ok:
                    return
            except requests.RequestException:
                pass
            time.sleep(1)
        raise TimeoutError("the Ray dashboard did not answer")

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.log.close()
        shutil.rmtree(self.temp_dir, ignore_errors=True)
