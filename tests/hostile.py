"""A hostile HTTP server on 127.0.0.1 for the fuzzing harness (issue #61 item 3): it answers the probe a client
sends first (`/health`, `/api/version`) and then misbehaves as told, so that what is tested is the client's
deadline and cap, not its probe.

Behaviours (`HostileServer(behaviour)`):
- drip: headers, then one byte of body every 0.3 s;
- drip_headers: the status line, then one header byte every 0.3 s;
- stall: accepts and never answers;
- huge: claims 5 GB and sends zeros as fast as it can;
- endless: a chunked body that never ends;
- escapes: a 500 whose JSON error holds terminal escapes, bidi overrides and credentials;
- secrets: a 400 whose error repeats credentials and a signed URL;
- redirect: a redirect to itself, for ever;
- retry_after: a 503 that asks to be asked again in an hour (`Retry-After`, which clients sleep for);
- garbage: a 200 whose body is not JSON, escapes and all.

`slow_proxy` puts a real server behind a proxy that answers every request late, within each call's deadline.

Bounded in time: every connection is served at most SERVE_S seconds, and `close()` ends the server and its threads.
"""

from __future__ import annotations

import base64
import contextlib
import http.server
import json
import re
import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from urllib.parse import quote

SERVE_S = 30.0  # no connection is held longer, whatever the client does
PROBES = ("/health", "/api/version", "/version")
# what Ray's dashboard (and MLflow's /health, which reads no body) answers to a probe
PROBE_ANSWER = b'{"version": "4", "ray_version": "2.60.0", "ray_commit": "x", "session_name": "s"}'
ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b[31mRED\x9b31m\u202egnp.exe\u2066\x07\x00"
SECRET = "Qz7kRsecretWx8mTvalueVp9nY"  # never to be shown: the fuzz harness looks for its pieces
SECRET_TEXT = (
    f"password={SECRET} aws_secret_access_key={SECRET} Authorization: Bearer {SECRET} "
    f"https://user:{SECRET}@example.com/x?X-Amz-Signature={SECRET}"
)
# issue #70 item 4: a server that echoes the user's credentials encoded (the test sets them in the environment)
ENCODED_USER, ENCODED_PASSWORD, ENCODED_TOKEN = "fuzz", "pw/Qz7k#R?s3cr3t&x", "tok-Wx8mT-Vp9nY-abc"
EXTRA_BEHAVIOURS = ("encoded",)  # not in the fuzz matrix's BEHAVIOURS: they need the environment set to match
BEHAVIOURS = (
    "drip",
    "drip_headers",
    "stall",
    "huge",
    "endless",
    "escapes",
    "secrets",
    "redirect",
    "retry_after",
    "garbage",
)


def _answer(status: str, body: bytes, kind: str = "application/json", extra: str = "") -> bytes:
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n{extra}Connection: close\r\n\r\n"
    ).encode() + body


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.settimeout(SERVE_S)
        self.until = time.monotonic() + SERVE_S
        try:
            head = self._read_head()
            path = head.split(b" ", 2)[1].decode("latin-1") if head.count(b" ") >= 2 else "/"
            if path.split("?")[0] in PROBES:
                self.request.sendall(_answer("200 OK", PROBE_ANSWER))
                return
            getattr(self, f"_{self.server.behaviour}")(path)
        except OSError:  # the client hung up: what a deadline does
            pass

    def _read_head(self) -> bytes:
        data = b""
        while b"\r\n\r\n" not in data and len(data) < 65536:
            chunk = self.request.recv(4096)
            if not chunk:
                break
            data += chunk
        return data

    def _running(self) -> bool:
        return time.monotonic() < self.until and not self.server.closing.is_set()

    def _drip(self, path: str) -> None:
        self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
        while self._running():
            self.request.sendall(b" ")
            time.sleep(0.3)

    def _drip_headers(self, path: str) -> None:
        self.request.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
        while self._running():
            self.request.sendall(b"a")
            time.sleep(0.3)

    def _stall(self, path: str) -> None:
        while self._running():
            time.sleep(0.1)

    def _huge(self, path: str) -> None:
        self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5000000000\r\n\r\n")
        block = b"0" * 65536
        while self._running():
            self.request.sendall(block)

    def _endless(self, path: str) -> None:
        self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        block = b"10000\r\n" + b"[" * 65536 + b"\r\n"
        while self._running():
            self.request.sendall(block)

    def _escapes(self, path: str) -> None:
        body = f'{{"error_code": "INTERNAL_ERROR", "message": "{ESCAPES} {SECRET_TEXT}"}}'.encode()
        self.request.sendall(_answer("500 Internal Server Error", body))

    def _secrets(self, path: str) -> None:
        body = f'{{"error_code": "INVALID_PARAMETER_VALUE", "message": "{SECRET_TEXT}"}}'.encode()
        self.request.sendall(_answer("400 Bad Request", body))

    def _redirect(self, path: str) -> None:
        self.request.sendall(_answer("302 Found", b"", extra=f"Location: {path}x\r\n"))

    def _retry_after(self, path: str) -> None:
        self.request.sendall(_answer("503 Service Unavailable", b"{}", extra="Retry-After: 3600\r\n"))

    def _encoded(self, path: str) -> None:
        basic = base64.b64encode(f"{ENCODED_USER}:{ENCODED_PASSWORD}".encode()).decode()
        token = base64.b64encode(ENCODED_TOKEN.encode()).decode()
        encoded = quote(ENCODED_PASSWORD, safe="")
        message = f"denied {encoded} {encoded.lower()} {basic} {token}"
        body = json.dumps({"error_code": "INVALID_PARAMETER_VALUE", "message": message}).encode()
        self.request.sendall(_answer("400 Bad Request", body))

    def _garbage(self, path: str) -> None:
        self.request.sendall(_answer("200 OK", f"<html>{ESCAPES}{SECRET_TEXT}".encode(), "text/html"))


class HostileServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, behaviour: str):
        if behaviour not in BEHAVIOURS + EXTRA_BEHAVIOURS:
            raise ValueError(f"no behaviour {behaviour!r}; one of {BEHAVIOURS + EXTRA_BEHAVIOURS}")
        super().__init__(("127.0.0.1", 0), _Handler)
        self.behaviour = behaviour
        self.closing = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@contextlib.contextmanager
def hostile_server(behaviour: str) -> Iterator[HostileServer]:
    """A HostileServer serving in a thread for the `with` block; closed (its connections too) afterwards."""
    with serving(HostileServer(behaviour)) as server:
        try:
            yield server
        finally:
            server.closing.set()  # its handlers stop dripping


@contextlib.contextmanager
def serving(server: socketserver.TCPServer) -> Iterator[socketserver.TCPServer]:
    """`server` serving in a thread for the `with` block; shut and closed afterwards."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def free_closed_port() -> int:
    """A port nothing listens on (a refused connection)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


METHODS = (b"GET", b"HEAD", b"PUT", b"POST", b"DELETE")
FINAL_STATUS = re.compile(rb"HTTP/1\.[01] ([2-5]\d\d) ")  # a final answer's status line (a 1xx is none)
STATUS_CARRY = 12  # bytes of a chunk kept for the next: a status line cut between two chunks is still found


class _Delaying(socketserver.BaseRequestHandler):
    """Relays a connection to the upstream server, holding each request `delay_s` before it goes on."""

    def handle(self) -> None:
        self.request.settimeout(SERVE_S)
        try:
            upstream = socket.create_connection(("127.0.0.1", self.server.upstream), timeout=SERVE_S)
        except OSError:
            return
        back = threading.Thread(target=_relay, args=(upstream, self.request, self.server.answers), daemon=True)
        back.start()
        try:
            while chunk := self.request.recv(65536):
                method = chunk.split(b" ", 1)[0]
                if method in METHODS:
                    self.server.requests += 1
                if method in self.server.delayed:  # a new request: held, then sent on whole
                    time.sleep(self.server.delay_s)
                upstream.sendall(chunk)
        except OSError:
            pass
        finally:  # a request the client gave up on still reaches the upstream whole, and is answered there
            with contextlib.suppress(OSError):
                upstream.shutdown(socket.SHUT_WR)
            back.join(SERVE_S)
            upstream.close()


def _relay(source: socket.socket, target: socket.socket, answers: list[int]) -> None:
    """The upstream's answers back to the client, each final answer's status noted whether or not the client is still
    there to read it (a client that gave up is what the slow proxy is for). A "100 Continue" and the answer after it
    can come in one chunk, so statuses are found anywhere in a chunk, not only at its start; a client gone does not
    end the relay, or the answers that come after it would go unnoted."""
    tail, client_gone = b"", False
    try:
        while chunk := source.recv(65536):
            answers.extend(int(found.group(1)) for found in FINAL_STATUS.finditer(tail + chunk))
            tail = (tail + chunk)[-STATUS_CARRY:]  # shorter than a status line: none is noted twice
            if not client_gone:
                try:
                    target.sendall(chunk)
                except OSError:
                    client_gone = True
    except OSError:
        pass


class SlowProxy(socketserver.ThreadingTCPServer):
    """A real server (moto's S3, MLflow) behind a proxy that answers every request `delay_s` late: each call ends
    well within its own deadline, so only a deadline for the whole command bounds a command of many calls."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, upstream: int, delay_s: float, delayed: tuple[bytes, ...] = METHODS):
        super().__init__(("127.0.0.1", 0), _Delaying)
        self.upstream, self.delay_s, self.delayed, self.requests = upstream, delay_s, delayed, 0
        self.answers: list[int] = []  # the upstream's status codes, as they came

    @property
    def port(self) -> int:
        return self.server_address[1]


@contextlib.contextmanager
def slow_proxy(upstream: int, delay_s: float, delayed: tuple[bytes, ...] = METHODS) -> Iterator[SlowProxy]:
    """A SlowProxy to 127.0.0.1:`upstream` (delaying the requests of the methods `delayed`) serving in a thread for
    the `with` block."""
    with serving(SlowProxy(upstream, delay_s, delayed)) as proxy:
        yield proxy


# ---- a tracking server that names another host (issue #70 item 1) ----

RUN_ID = "a" * 32


class RecordingServer(http.server.ThreadingHTTPServer):
    """A listener that answers every request with an empty JSON object and records the headers it got: where a
    hostile tracking server's artifact location points, to show whether the user's credentials arrived."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Recording)
        self.seen: list[dict[str, str]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def authorized(self) -> list[str]:
        """The Authorization headers that reached it."""
        return [headers["authorization"] for headers in self.seen if "authorization" in headers]


class _Recording(http.server.BaseHTTPRequestHandler):
    def _answer(self) -> None:
        self._record()
        self._send_json({"files": []})

    def _record(self) -> None:
        """The request's path and headers (names in lower case), kept on the server."""
        self.server.seen.append({":path": self.path, **{k.lower(): v for k, v in self.headers.items()}})

    def _send_json(self, answer: dict) -> None:
        body = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_HEAD = _answer

    def log_message(self, *args) -> None:  # quiet
        pass


class NamingServer(http.server.ThreadingHTTPServer):
    """A tracking server that answers MLflow's client as a real one would, except that every run's artifact root,
    every logged model's location and every registry version's source is `location` (another host, a local
    folder): what anyone who may create an experiment on a lab's server can set. `redirect:HOST:PORT` sends every
    API call there with a 302 instead."""

    daemon_threads = True

    def __init__(self, location: str):
        super().__init__(("127.0.0.1", 0), _Naming)
        self.location = location
        self.seen: list[dict[str, str]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Naming(_Recording):
    def _answer(self) -> None:
        self._record()
        path = self.path.split("?")[0]
        location = self.server.location
        if location.startswith("redirect:") and path not in PROBES:  # every API call sent on to another host
            self.send_response(302)
            self.send_header("Location", f"http://{location.removeprefix('redirect:')}{self.path}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        run = {"info": {"run_id": RUN_ID, "experiment_id": "1", "artifact_uri": location, "status": "FINISHED"}}
        version = {"name": "m", "version": "1", "source": location, "run_id": RUN_ID, "status": "READY"}
        experiment = {"experiment_id": "1", "name": "x", "artifact_location": location, "lifecycle_stage": "active"}
        answers = {
            "/api/2.0/mlflow/runs/get": {"run": {**run, "data": {}}},
            "/api/2.0/mlflow/model-versions/get-download-uri": {"artifact_uri": location},
            "/api/2.0/mlflow/model-versions/get": {"model_version": version},
            "/api/2.0/mlflow/registered-models/alias": {"model_version": version},
            "/api/2.0/mlflow/experiments/get": {"experiment": experiment},
            "/api/2.0/mlflow/experiments/get-by-name": {"experiment": experiment},
        }
        self._send_json(answers.get(path, {"ok": True} if path in PROBES else {}))

    do_GET = do_POST = do_PUT = do_HEAD = _answer


@contextlib.contextmanager
def naming_server(location: str) -> Iterator[NamingServer]:
    """A NamingServer whose `location` may hold `{other}`: the URL of a RecordingServer (server.other) that
    records what reaches it."""
    with serving(RecordingServer()) as other:
        server = NamingServer(location.replace("{other}", other.url.removeprefix("http://")))
        server.other = other
        with serving(server):
            yield server
