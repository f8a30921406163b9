"""Whether a tracking store can be used, checked before anything is written: its kind, that it answers, that its
credentials let us in, that it holds the run a resume continues.

Apart from sweeper/tracking/runs.py, which imports Ray Tune for its callback: `sweeper summarize`, `submit` and
`promote` check their store through here, and importing Ray Tune cold took 18-30 s on this machine (52 s on a
loaded one), most of a summary's time against a server that fails at once.
"""

from __future__ import annotations

import os
from pathlib import Path

from mlflow.tracking import MlflowClient

from nmt_core.config import ConfigError
from nmt_core.gates.credentials import redact
from nmt_core.gates.sqlite_stores import check_store
from nmt_core.gates.tracking_store import probe_store, schema_head

# the tracking stores MLflow 3 serves here (a database's SQLAlchemy driver may follow '+'); not its file store
STORES = ("http", "https", "sqlite", "postgresql", "mysql", "mssql", "databricks")


class TrackingError(ConfigError):
    """The tracking store cannot be used; raised before any trial starts (exit code 2, like bad input)."""

    def __init__(self, message: str, source: str = "--tracking-uri"):
        super().__init__("tracking.uri", message, source)


def check_reachable(uri: str, create: bool = False) -> bool:
    """Before anything is written: a store MLflow can track in, a server that answers and lets us in, or a SQLite
    file that already is an MLflow store (nmt_core/gates/sqlite_stores.py: never another program's database, never
    migrated); with `create` (`sweeper run`), also a new SQLite store where no file or an empty one is. Whether MLflow
    will create that store."""
    if uri.split(":", 1)[0].split("+", 1)[0].lower() not in STORES:
        raise TrackingError(
            f"{redact(uri)}: not a tracking store MLflow can use; use {', '.join(STORES[:-1])} or "
            f"{STORES[-1]} (e.g. sqlite:///mlflow.db, http://127.0.0.1:5000, postgresql+psycopg2://)"
        )
    created = check_store(uri, create, "--tracking-uri", schema_head)
    probe_store(uri, "--tracking-uri")  # a server or database answers within $NMT_SWEEPER_TIMEOUT seconds
    if uri.startswith(("http://", "https://")):
        check_credentials(uri)
    return created


def check_holds_run(uri: str, run_id: str, recorded: str) -> None:
    """`sweeper resume` continues the sweep's own parent run: a store named by --tracking-uri or
    $MLFLOW_TRACKING_URI other than the recorded one must hold it (the same store at a new address)."""
    from mlflow.exceptions import MlflowException

    if not uri.startswith("sqlite:///") or Path(uri.removeprefix("sqlite:///")).exists():  # never create one
        try:
            MlflowClient(uri).get_run(run_id)
            return
        except MlflowException:
            pass
    raise TrackingError(
        f"{redact(uri)} does not hold this sweep's parent run {run_id}; it ran with "
        f"{redact(recorded)}: pass that as --tracking-uri (or unset MLFLOW_TRACKING_URI)",
        "sweeper resume",
    )


def check_credentials(uri: str) -> None:
    """/health answers everyone; the API of a server with basic auth answers 401 or 403 without the right
    MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD."""
    from mlflow.exceptions import MlflowException

    try:
        MlflowClient(uri).search_experiments(max_results=1)
    except MlflowException as err:
        status = next((code for code in ("401", "403") if code in str(err)), None)
        if status is None:
            raise
        who = os.environ.get("MLFLOW_TRACKING_USERNAME")
        who = f"user {who[:100]!r}" if who else "a request without credentials"
        raise TrackingError(
            f"tracking server {redact(uri)} refused {who} (HTTP {status}); set "
            "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD"
        ) from None
