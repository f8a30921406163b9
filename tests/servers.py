"""Real servers for end-to-end tests, on 127.0.0.1 only: an MLflow tracking server with a SQL backend."""

from __future__ import annotations

import os
import re
import shutil
import signal
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

    def __init__(
        self, folder: Path, artifacts: str | None = None, env: dict[str, str] | None = None, args: tuple[str, ...] = ()
    ):
        self.port = free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        mlflow = Path(sys.executable).with_name("mlflow")
        self.log = open(folder / "mlflow-server.log", "w")
        self.command = [
            str(mlflow),
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--workers",
            "1",
            "--backend-store-uri",
            f"sqlite:///{folder / 'mlflow.db'}",
            "--artifacts-destination",
            artifacts or str(folder / "artifacts"),
            *args,
        ]
        self.env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", **(env or {})}
        self.start()

    def start(self) -> None:
        """In its own process group: `kill` takes the server and its workers down at once, as a crash would."""
        self.process = subprocess.Popen(
            self.command, stdout=self.log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True
        )
        wait_for(self.uri + "/health", self.process)

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.log.close()


class RayHead:
    """`ray start --head --block` on 127.0.0.1 with token authentication on, as a cluster's head runs."""

    def __init__(self, folder: Path, token: str, num_cpus: int = 2):
        self.token = token
        self.dashboard = f"http://127.0.0.1:{free_port()}"
        ray = Path(sys.executable).with_name("ray")
        self.env = {
            **os.environ,
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": token,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        self.env.pop("RAY_ADDRESS", None)
        self.log = open(folder / "ray-head.log", "w")
        self.temp_dir = tempfile.mkdtemp(prefix="rayh", dir="/tmp")  # short: Unix socket paths max 107 bytes
        self.process = subprocess.Popen(
            [
                str(ray),
                "start",
                "--head",
                "--block",
                "--node-ip-address",
                "127.0.0.1",
                "--port",
                str(free_port()),
                "--dashboard-host",
                "127.0.0.1",
                "--dashboard-port",
                self.dashboard.rsplit(":", 1)[1],
                "--ray-client-server-port",
                str(free_port()),
                "--min-worker-port",
                "0",
                "--max-worker-port",
                "0",
                "--num-cpus",
                str(num_cpus),
                "--disable-usage-stats",
                "--temp-dir",
                self.temp_dir,
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=self.env,
            start_new_session=True,
        )
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


class MotoS3:
    """moto's S3 API server over HTTP on 127.0.0.1, as Ray's own tests run it, with one bucket.

    Credentials are moto's fake ones, set in this process's environment so that every process the tests start
    (Ray nodes, drivers, the MLflow server) inherits them.
    """

    ENV = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }

    def __init__(self, folder: Path, bucket: str = "sweeps"):
        os.environ.update(self.ENV)
        self.port, self.bucket = free_port(), bucket
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log = open(folder / "moto.log", "w")
        self.process = subprocess.Popen(
            [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        wait_for(self.endpoint + "/moto-api/", self.process)
        import boto3

        boto3.client("s3", endpoint_url=self.endpoint).create_bucket(Bucket=bucket)

    def uri(self, prefix: str) -> str:
        """The `--storage` URI of a prefix in the bucket, with pyarrow's options for an S3-compatible store."""
        return f"s3://{self.bucket}/{prefix}?endpoint_override=127.0.0.1:{self.port}&scheme=http"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=20)
        self.log.close()


class RayNode:
    """One `ray start --block` process on 127.0.0.1 (a head, or a worker joining `head`), in its own process group,
    so that killing the group kills the node as a lost machine would: its raylet and its workers."""

    def __init__(
        self,
        folder: Path,
        name: str,
        num_cpus: int,
        env: dict[str, str],
        head: str | None = None,
        temp_dir: str | None = None,
    ):
        ray = Path(sys.executable).with_name("ray")
        self.address = head or f"127.0.0.1:{free_port()}"
        ports = [
            "--node-manager-port",
            "--object-manager-port",
            "--metrics-export-port",
            "--runtime-env-agent-port",
            "--dashboard-agent-grpc-port",
            "--dashboard-agent-listen-port",
        ]
        command = [
            str(ray),
            "start",
            "--block",
            "--node-ip-address",
            "127.0.0.1",
            "--num-cpus",
            str(num_cpus),
            "--disable-usage-stats",
            "--min-worker-port",
            "0",
            "--max-worker-port",
            "0",
            *[x for port in ports for x in (port, str(free_port()))],
        ]
        if head is None:
            command += [
                "--head",
                "--port",
                self.address.rsplit(":", 1)[1],
                "--include-dashboard",
                "false",
                "--ray-client-server-port",
                str(free_port()),
                "--temp-dir",
                temp_dir,
            ]
        else:
            command += ["--address", head]
        self.log = open(folder / f"ray-{name}.log", "w")
        self.process = subprocess.Popen(
            command, stdout=self.log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )

    def node_id(self) -> str:
        """The Ray node id of this node's raylet (what the trials' `sweeper.node` tags name)."""
        listing = subprocess.run(["pgrep", "-a", "-g", str(self.process.pid)], capture_output=True, text=True).stdout
        return re.search(r"raylet/raylet .*?--node_id=([0-9a-f]+)", listing).group(1)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        try:
            os.killpg(self.process.pid, sig)
        except ProcessLookupError:
            pass
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)


class RayCluster:
    """A head with 0 CPUs (it schedules, never trains) and worker nodes, each its own `ray start` process."""

    def __init__(self, folder: Path, workers: int = 2, cpus_per_worker: int = 1, token: str = "multi-node-test"):
        self.temp_dir = tempfile.mkdtemp(prefix="rayc", dir="/tmp")  # short: Unix socket paths max 107 bytes
        # what every node and every driver of this cluster runs with (token authentication, as a cluster runs)
        self.env = {
            **os.environ,
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": token,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        self.env.pop("RAY_ADDRESS", None)
        self.head = RayNode(folder, "head", 0, self.env, temp_dir=self.temp_dir)
        self.address = self.head.address
        self.workers: list[RayNode] = []
        self.wait_for_nodes(1, folder)
        for i in range(workers):  # one at a time: two raylets starting at once on 2 cores can miss their deadline
            self.workers.append(RayNode(folder, f"worker{i}", cpus_per_worker, self.env, head=self.address))
            self.wait_for_nodes(2 + i, folder)

    def wait_for_nodes(self, nodes: int, folder: Path, timeout: float = 120.0) -> None:
        """Until `ray status` (asking the head's GCS) lists `nodes` alive nodes."""
        ray = Path(sys.executable).with_name("ray")
        deadline = time.time() + timeout
        while time.time() < deadline:
            status = subprocess.run(
                [str(ray), "status", "--address", self.address], capture_output=True, text=True, env=self.env
            )
            active = status.stdout.partition("Active:")[2].partition("Pending:")[0]
            if status.returncode == 0 and active.count(" node_") == nodes:
                return
            time.sleep(1)
        raise TimeoutError(f"the Ray cluster did not reach {nodes} alive nodes; see {folder}/ray-*.log")

    def stop(self) -> None:
        for node in [*self.workers, self.head]:
            node.kill(signal.SIGTERM)
            node.log.close()
        shutil.rmtree(self.temp_dir, ignore_errors=True)


class Postgres:
    """A PostgreSQL server from Debian's packages on 127.0.0.1, in a throwaway data folder, with one database.

    PostgreSQL refuses to run as root, so as root it runs as the `postgres` user the package creates.
    """

    def __init__(self, folder: Path, user: str = "mlflow", password: str = "pg-secret", database: str = "mlflow"):
        found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
        if not found:
            raise RuntimeError("PostgreSQL is not installed: apt-get install postgresql (.ci/run does)")
        self.bin, self.port = found[-1].parent, free_port()
        self.data = Path(tempfile.mkdtemp(prefix="pg", dir="/tmp"))
        self.as_owner = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self.as_owner:
            shutil.chown(self.data, "postgres", "postgres")
        # passwords count over TCP, as on a real server; the superuser gets in through the socket in the data folder
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth-local=trust", "--auth-host=scram-sha-256")
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.data / "server.log"),
            "-w",
            "start",
            "-o",
            f"-h 127.0.0.1 -p {self.port} -k {self.data}",
        )
        self.psql = [
            *self.as_owner,
            str(self.bin / "psql"),
            "-h",
            str(self.data),
            "-p",
            str(self.port),
            "-U",
            "postgres",
        ]  # the superuser's psql, through the socket
        self._sql(f"CREATE USER {user} WITH PASSWORD '{password}'")
        self._sql(f"CREATE DATABASE {database} OWNER {user}")
        self.uri = f"postgresql://{user}:{password}@127.0.0.1:{self.port}/{database}"

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run([*self.as_owner, str(self.bin / tool), *args], check=True, capture_output=True, text=True)

    def _sql(self, statement: str) -> None:
        subprocess.run([*self.psql, "-c", statement], check=True, capture_output=True, text=True)

    def stop(self) -> None:
        subprocess.run(
            [*self.as_owner, str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "stop"], capture_output=True
        )
        shutil.rmtree(self.data, ignore_errors=True)
