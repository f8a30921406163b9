"""Which tracking store a command talks to, and the checks before it talks to it: the flag, the environment, the
space or the default, in MLflow's own order; the credential gate on the URI; a probe that the store answers in time;
MLflow's process-wide URIs set for a call and put back. Kept out of the MLflow flavour (nmt_core.mlflow_model, which
imports torch) because every command that names a store needs these (a sweep's driver, its summary, `sweeper
submit`, `nmt translate --model`) and none of them should load the model's code to choose a URI. MLflow and requests
are imported where they are called."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

from nmt_core.gates import artifact_locations
from nmt_core.gates.credentials import check_uri, redact
from nmt_core.gates.deadline import call_limit, longer_with
from nmt_core.gates.gate import ConfigError, network_timeout
from nmt_core.gates.network import bound_sql_connects

DEFAULT_TRACKING = "sqlite:///mlflow.db"  # the sweeper's default store, in the working folder


def choose_tracking_uri(flag: str | None, configured: str | None = None) -> str:
    """The one order every command follows, MLflow's own convention first: `--tracking-uri`, else
    $MLFLOW_TRACKING_URI, else what the space says (or what a sweep recorded), else DEFAULT_TRACKING; a URI that
    carries a credential is refused wherever it came from."""
    environment = os.environ.get("MLFLOW_TRACKING_URI")
    uri = flag or environment or configured or DEFAULT_TRACKING
    source = "--tracking-uri" if flag else "MLFLOW_TRACKING_URI" if environment else "tracking.uri"
    return check_uri(uri, "tracking", "tracking.uri", source)


@contextmanager
def mlflow_store(uri: str) -> Iterator[None]:
    """MLflow's process-wide tracking and registry URIs set to `uri` for the calls that read them, then put back.

    mlflow.set_tracking_uri and set_registry_uri also export $MLFLOW_TRACKING_URI and $MLFLOW_REGISTRY_URI. Left
    set, they would outlive the call and, $MLFLOW_TRACKING_URI being what every command reads before a space's
    tracking.uri, send this process's next sweep (a notebook's second `sweeper.run`) and the processes it starts
    to this store."""
    import mlflow
    from mlflow.tracking._model_registry import utils as registry
    from mlflow.tracking._tracking_service import utils as tracking

    saved = tracking._tracking_uri, registry._registry_uri
    variables = {name: os.environ.get(name) for name in ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI")}
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    try:
        yield
    finally:
        tracking._tracking_uri, registry._registry_uri = saved
        for name, value in variables.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def schema_head() -> str:
    """The schema revision of a tracking database this MLflow reads without migrating it."""
    from mlflow.store.db.utils import _get_latest_schema_revision

    return _get_latest_schema_revision()


DATABASE_PORTS = {"postgresql": 5432, "mysql": 3306, "mssql": 1433}  # SQLAlchemy stores MLflow opens


def probe_store(uri: str, source: str) -> None:
    """A tracking server, or a database store's host, answers within network_timeout() seconds, or one line says
    it does not (MLflow's client and a database driver would wait minutes, and fail in a traceback). From here on
    the store is the one whose host gets the MLflow credentials, and every artifact location MLflow is given is
    checked against it first (nmt_core/gates/artifact_locations.py)."""
    artifact_locations.trust_store(uri)
    artifact_locations.install()
    database = uri.split(":", 1)[0].split("+", 1)[0].lower()
    if uri.startswith(("http://", "https://")):
        probe_server(uri, source)
    elif database in DATABASE_PORTS:
        probe_database(uri, DATABASE_PORTS[database], source)
    if database in (*DATABASE_PORTS, "sqlite"):
        bound_sql_connects()  # MLflow's own 10 attempts and 101 s of backoff: within the deadline instead


def probe_database(uri: str, default_port: int, source: str) -> None:
    parts = urlsplit(uri)
    limit = call_limit(network_timeout(ConfigError))
    try:
        if limit.passed:
            raise TimeoutError(limit.late("a store that does not answer"))
        if parts.hostname:  # else a local socket
            socket.create_connection((parts.hostname, parts.port or default_port), timeout=limit.seconds).close()
    except (OSError, ValueError) as err:  # ValueError: a port that is no number (check_uri refuses it first)
        why = getattr(err, "strerror", None) or type(err).__name__
        raise ConfigError(
            "tracking.uri",
            f"tracking store {redact(uri)} is not reachable within {limit.seconds:g} s ({why}); start it, pass "
            f"--tracking-uri, or give it longer with {longer_with()}",
            source,
        ) from None


def probe_server(uri: str, source: str) -> None:
    """An HTTP tracking server answers /health within network_timeout() seconds, or one line says it does not."""
    import requests

    try:
        requests.get(uri.rstrip("/") + "/health", timeout=network_timeout(ConfigError)).raise_for_status()
    except requests.RequestException as err:
        raise ConfigError(
            "tracking.uri",
            f"tracking server {redact(uri)} is not reachable ({type(err).__name__}); start it "
            f"(`mlflow server --host 127.0.0.1 --port 5000`), pass --tracking-uri, or give it longer with "
            f"{longer_with(now=True)}",
            source,
        ) from None
