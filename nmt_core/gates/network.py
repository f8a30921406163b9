"""Every HTTP call under a total deadline and a response-size cap: the network part of the gate
(nmt_core/gates/gate.py).

A read timeout bounds one socket read, not a call: a server that answers and then sends a byte every 0.3 s holds a
client for ever, and one that claims 5 GB fills memory. MLflow's client, Ray's job client and our own probes all
send through `requests.Session.send`, so that one method is wrapped (`install`, called by the entry points through
`configure_network`), rather than each client's session:

- a call (its redirects included) ends within network_timeout() seconds, connect to last byte; a download the
  caller streams, or an upload (an artifact file), within DOWNLOAD_S seconds. A watchdog timer enforces it: at the
  deadline it shuts down the sockets of the connections the call took (each is registered as urllib3 hands it out), so a
  blocked read returns at once whatever the server drips, and any later connection of the call is refused. A timer
  that shuts a socket is robust where a per-read timeout is not, and it needs no signal (the API runs in threads);
- a wait between a call's attempts (a backoff, a server's `Retry-After`) that would pass its deadline ends the call;
- a request that carries the user's MLflow credentials to a host that is no tracking store's goes without them
  (nmt_core/gates/artifact_locations.py says which hosts are);
- an answer's body may hold at most ANSWER_BYTES (a download DOWNLOAD_BYTES), counted as it is decoded: a larger
  Content-Length is refused before its body is read, and a body that grows past the cap is cut.

Either ends the call with NetworkLimitError (a requests ConnectionError: every client already handles those), one
line that names the server without its credentials.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import requests
import urllib3.connectionpool
from urllib3.util.retry import Retry

from nmt_core.gates.artifact_locations import foreign_credentials
from nmt_core.gates.credentials import redact
from nmt_core.gates.deadline import CallLimit, call_limit
from nmt_core.gates.gate import MAX_CHECKPOINT_BYTES, ErrorType, network_environment, network_timeout

ANSWER_BYTES = 64 * 2**20  # an API answer (MLflow's search of a thousand runs is a few MB)
DOWNLOAD_BYTES = MAX_CHECKPOINT_BYTES  # a streamed download: an artifact file, at most a checkpoint
UPLOAD_BYTES = 2**20  # a request body larger than this is an upload
DOWNLOAD_S = 600.0  # a streamed download's deadline: a model over a slow link takes minutes, never hours
GRACE_S = 0.5  # the watchdog fires this long after the deadline: a read that times out at it ends by its own timeout

_local = threading.local()  # the call this thread is making: its Scope, while one is open


class NetworkLimitError(requests.exceptions.ConnectionError):
    """A server that took longer than the deadline, or answered more than the cap: one line, the server named."""


class Scope:
    """One HTTP call: its deadline, the connections it took, and whether the watchdog has ended it."""

    def __init__(self, url: str, limit: CallLimit, cap: int):
        self.url, self.cap = url, cap
        self.limit, self.deadline = limit, time.monotonic() + limit.seconds
        self.connections: list[Any] = []
        self.expired = False
        self.finished = False
        self.lock = threading.Lock()
        self.timer: threading.Timer | None = None

    def arm(self) -> None:
        """(Re)start the watchdog for what is left until the deadline."""
        if self.timer is not None:
            self.timer.cancel()
        self.timer = threading.Timer(max(0.0, self.deadline - time.monotonic()) + GRACE_S, self.expire)
        self.timer.daemon = True
        self.timer.start()

    def expire(self) -> None:
        """The deadline passed: every socket the call holds is shut down (a blocked read returns at once)."""
        with self.lock:
            if self.finished:
                return
            self.expired = True
            for connection in self.connections:
                sock = getattr(connection, "sock", None)
                if sock is not None:
                    try:
                        socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the plain socket's: TLS state is left
                    except OSError:
                        pass

    def finish(self) -> None:
        """The call is over (its body read or closed): the watchdog must not touch a connection back in the pool."""
        with self.lock:
            self.finished = True
        if self.timer is not None:
            self.timer.cancel()

    def error(self, what: str) -> NetworkLimitError:
        return NetworkLimitError(f"{redact(self.url)}: {what}")

    def late(self) -> NetworkLimitError:
        return self.error(self.limit.late("a server that stalls or drips"))

    def too_large(self) -> NetworkLimitError:
        return self.error(f"answered more than {self.cap:,} bytes; no answer here is that large")


def _get_conn(pool, *args, **kwargs):
    """urllib3 hands out a connection: the open call registers it, and one past its deadline gets none."""
    scope: Scope | None = getattr(_local, "scope", None)
    if scope is not None and scope.expired:
        raise scope.late()
    connection = _original_get_conn(pool, *args, **kwargs)
    if scope is not None:
        with scope.lock:
            scope.connections.append(connection)
    return connection


def _timeout(given: Any, left: float) -> tuple[float, float]:
    """(connect, read) timeouts no longer than what is left of the deadline."""
    connect, read = given if isinstance(given, tuple) else (given, given)
    return tuple(left if value is None else max(0.001, min(float(value), left)) for value in (connect, read))


def _counted(scope: Scope, stream) -> Any:
    """urllib3's response.stream, counting what it yields against the cap."""

    def bounded(*args, **kwargs) -> Iterator[bytes]:
        total = 0
        try:
            for chunk in stream(*args, **kwargs):
                total += len(chunk)
                if total > scope.cap:
                    raise scope.too_large()
                yield chunk
        except NetworkLimitError:
            raise
        except Exception:
            if scope.expired:
                raise scope.late() from None
            raise

    return bounded


def _finishing(scope: Scope, response: requests.Response) -> requests.Response:
    """A download the caller streams finishes its call when its body is read or it is closed: the watchdog must
    not shut a connection that went back to the pool and serves another call."""
    stream, close = response.raw.stream, response.close

    def streamed(*args, **kwargs) -> Iterator[bytes]:
        try:
            yield from stream(*args, **kwargs)
        finally:
            scope.finish()

    def closed() -> None:
        scope.finish()
        close()

    response.raw.stream, response.close = streamed, closed
    return response


def _send(session: requests.Session, request: requests.PreparedRequest, **kwargs) -> requests.Response:
    """Session.send under a Scope: the deadline, the cap, and redirects (which call send again) inside the first."""
    if foreign_credentials(request.url or "", request.headers.get("Authorization")):
        del request.headers["Authorization"]  # MLflow's credentials go to the tracking store's host only
    outer: Scope | None = getattr(_local, "scope", None)
    if outer is not None:  # a redirect of the open call: its deadline and cap hold
        kwargs["timeout"] = _timeout(kwargs.get("timeout"), max(0.0, outer.deadline - time.monotonic()))
        return _bounded(outer, session, request, kwargs)
    streamed = bool(kwargs.get("stream"))
    limit = call_limit(DOWNLOAD_S if _uploads(request) else network_timeout())
    scope = Scope(request.url or "", limit, DOWNLOAD_BYTES if streamed else ANSWER_BYTES)
    if limit.passed:  # the command's deadline has passed: no call is made
        raise scope.late()
    kwargs["stream"] = True
    kwargs["timeout"] = _timeout(kwargs.get("timeout"), limit.seconds)
    _local.scope = scope
    scope.arm()
    try:
        response = _bounded(scope, session, request, kwargs)
        if streamed:  # the caller reads the body later: a download's deadline from now (or the command's end)
            scope.limit = call_limit(DOWNLOAD_S)
            scope.deadline = time.monotonic() + scope.limit.seconds
            scope.arm()
            return _finishing(scope, response)
        response.content  # read now, under the deadline and the cap  # noqa: B018
        if scope.expired:  # cut while its body dripped in
            raise scope.late()
        return response
    except BaseException:
        scope.finish()
        raise
    finally:
        _local.scope = None
        if not streamed:
            scope.finish()


def _uploads(request: requests.PreparedRequest) -> bool:
    """An upload (an artifact: a file, or over UPLOAD_BYTES) has a download's deadline: its body takes its time."""
    body = request.body
    return body is not None and (not isinstance(body, (bytes, str)) or len(body) > UPLOAD_BYTES)


def _bounded(scope: Scope, session: requests.Session, request: requests.PreparedRequest, kwargs) -> requests.Response:
    """The original send, its errors after the deadline one NetworkLimitError, its body counted."""
    try:
        response = _original_send(session, request, **kwargs)
        if scope.expired:  # cut while its headers dripped in: what arrived is no answer
            response.close()
            raise scope.late()
        length = response.headers.get("Content-Length", "")
        if length.isdigit() and int(length) > scope.cap:
            response.close()
            raise scope.too_large()
        response.raw.stream = _counted(scope, response.raw.stream)
        return response
    except (NetworkLimitError, requests.Timeout):  # a read timeout as the deadline falls is that timeout
        raise
    except Exception:
        if scope.expired:
            raise scope.late() from None
        raise


def _retry_sleep(retry: Retry, response: Any = None) -> None:
    """urllib3's wait between a call's attempts (its backoff, or the server's `Retry-After`, which MLflow's client
    honours): no watchdog ends a sleep, and a server that answered 503 with `Retry-After: 3600` held the call an
    hour. A wait that would pass the call's deadline ends the call now."""
    scope: Scope | None = getattr(_local, "scope", None)
    if scope is not None:
        asked = retry.get_retry_after(response) if response is not None and retry.respect_retry_after_header else None
        if time.monotonic() + (asked or retry.get_backoff_time()) >= scope.deadline:
            raise scope.late()
    _original_retry_sleep(retry, response)


_original_send = requests.Session.send
_original_get_conn = urllib3.connectionpool.HTTPConnectionPool._get_conn
_original_retry_sleep = Retry.sleep


def install() -> None:
    """Wrap requests' and urllib3's methods once, in this process (the entry points call it)."""
    requests.Session.send = _send
    urllib3.connectionpool.HTTPConnectionPool._get_conn = _get_conn
    Retry.sleep = _retry_sleep


def installed() -> bool:
    return requests.Session.send is _send


SQL_MODULES = (  # MLflow's modules that import its engine maker by name (the tracking store looks it up in utils)
    "mlflow.store.model_registry.sqlalchemy_store",
    "mlflow.store.jobs.sqlalchemy_store",
)


def bound_sql_connects() -> None:
    """MLflow opens a database store (SQLite, PostgreSQL, MySQL) with up to 10 attempts and 101 s of backoff between
    them (mlflow/store/db/utils.py: `create_sqlalchemy_engine_with_retry`, MAX_RETRY_COUNT, no setting to change
    it): a PostgreSQL port that accepts and never answers held a command for minutes. Its engine maker is replaced,
    wherever MLflow looks it up, by `engine_within_deadline`. Called where a database store is first probed
    (nmt_core.gates.tracking_store.probe_store), so that a process that never opens one never imports SQLAlchemy."""
    from mlflow.store.db import utils

    utils.create_sqlalchemy_engine_with_retry = engine_within_deadline
    for name in SQL_MODULES:  # the ones imported already hold MLflow's by name; the others will take ours
        if (module := sys.modules.get(name)) is not None:
            module.create_sqlalchemy_engine_with_retry = engine_within_deadline


def engine_within_deadline(db_uri: str) -> Any:
    """MLflow's engine maker with MLflow's own steps and backoff (0.1 s, 0.3 s, 0.7 s, ...), attempted only while
    network_timeout() seconds have not passed: a refused port ends at the deadline, and a port that stalls after
    one attempt, whose connect waits PGCONNECT_TIMEOUT (the same seconds; gate.network_environment) at most."""
    import sqlalchemy
    from mlflow.store.db import utils

    utils._make_parent_dirs_if_sqlite(db_uri)
    limit = call_limit(network_timeout())
    if limit.passed:
        raise TimeoutError(f"{redact(db_uri)}: {limit.late('a store that does not answer')}")
    deadline = time.monotonic() + limit.seconds
    attempts = 0
    while True:
        attempts += 1
        engine = utils.create_sqlalchemy_engine(db_uri)
        try:
            sqlalchemy.inspect(engine)
            return engine
        except Exception:
            wait = 0.1 * (2**attempts - 1)
            if time.monotonic() + wait >= deadline:
                raise
            time.sleep(wait)


def configure_network(error: ErrorType | None = None) -> None:
    """Set gate.network_environment() where the user set nothing (a value already set wins), and put every HTTP call
    of this process under a total deadline and a size cap (install); the entry points call it."""
    for key, value in network_environment(error).items():
        os.environ.setdefault(key, value)
    install()
