"""Nothing but an MLflow store is opened as one (issue #70 item 2): a SQLite tracking URI is checked before MLflow
touches its file.

MLflow's SqlAlchemyStore creates its 65 tables in any database that lacks one of them, and migrates an older schema:
`MLFLOW_TRACKING_URI=sqlite:////path/app.db sweeper summarize NAME` wrote MLflow's schema into another program's
database, a 0-byte file became a store, and `sqlite:////dev/zero` or the in-memory `sqlite://` went the same way.
So, read with Python's own sqlite3 in read-only mode before MLflow is given the URI:

- a command that only reads (summarize, promote, resume, nmt translate) opens a file only if it already is an
  MLflow store at the schema this MLflow reads (its `alembic_version` at MLflow's head, its `experiments` and `runs`
  tables); anything else is one line, and nothing is created or migrated;
- `sweeper run` may also create a store, but only where no file is, or an empty one (it says that it did);
- a store in memory keeps nothing past the command, and a path that is no regular file (a device, a FIFO, a folder)
  is no store: both refused.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote, unquote

from nmt_core.gates.credentials import redact
from nmt_core.gates.gate import ConfigError, clip_path

MLFLOW_TABLES = ("alembic_version", "experiments", "runs")  # what every MLflow store since 1.x has
IN_MEMORY = ("", ":memory:")


class StoreError(ConfigError):
    """A SQLite tracking URI that names no MLflow store this command may open (exit 2, one line)."""

    def __init__(self, uri: str, why: str, source: str):
        super().__init__("tracking.uri", f"tracking store {redact(uri)}: {why}", source)


def sqlite_path(uri: str) -> str | None:
    """The file a `sqlite:` URI names (percent-decoded, its query dropped), '' for one in memory; None for any other
    URI."""
    if not uri.lower().startswith("sqlite:"):
        return None
    rest = uri[len("sqlite:") :]
    if not rest.startswith("///"):  # sqlite:// (in memory) or a form SQLAlchemy reads as one
        return ""
    path = unquote(rest[3:].partition("?")[0])
    return "" if path in IN_MEMORY or "mode=memory" in rest else path


def check_store(uri: str, create: bool, source: str, head: Callable[[], str]) -> bool:
    """Whether MLflow may open `uri` (True: it will create the store, which only `create` allows), else StoreError;
    any URI but a SQLite one passes. `head` gives the schema revision this MLflow reads (asked only of a store)."""
    path = sqlite_path(uri)
    if path is None:
        return False
    if path == "":
        raise StoreError(uri, "a store in memory keeps nothing past this command; name a file", source)
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return _new_store(uri, path, create, source)
    except OSError as err:
        if err.errno == errno.ENAMETOOLONG:  # no such file can be: said as its folder's absence, or as no store
            return _new_store(uri, path, create, source)
        raise StoreError(uri, f"cannot use it: {err.strerror}", source) from None
    except ValueError as err:  # a NUL in the path
        raise StoreError(uri, f"cannot use it: {getattr(err, 'strerror', None) or err}", source) from None
    if not stat.S_ISREG(info.st_mode):
        raise StoreError(uri, "not a regular file (a folder, device or pipe); name an MLflow store's file", source)
    if info.st_size == 0:
        return _new_store(uri, path, create, source)
    _check_mlflow_store(uri, path, head, source)
    return False


def _new_store(uri: str, path: str, create: bool, source: str) -> bool:
    """No store at `path` yet: `sweeper run` creates one there (its folder must exist); a command that only reads
    never does."""
    if not create:
        raise StoreError(
            uri,
            "no tracking store there (this command only reads one; `sweeper run` creates it): pass the --tracking-uri "
            "the sweep ran with",
            source,
        )
    if not os.path.isdir(Path(path).parent):  # False, not OSError, for a name longer than a path can be
        raise StoreError(uri, f"folder {clip_path(Path(path).parent)} does not exist", source)
    return True


def _check_mlflow_store(uri: str, path: str, head: Callable[[], str], source: str) -> None:
    """The file is a SQLite database holding MLflow's tables at the schema this MLflow reads, looked at read-only."""
    try:
        tables, version = _tables_and_version(path)
    except sqlite3.Error as err:
        raise StoreError(uri, f"not an MLflow store (SQLite: {err}); name the file MLflow created", source) from None
    missing = [table for table in MLFLOW_TABLES if table not in tables]
    if missing:
        raise StoreError(
            uri,
            f"not an MLflow store (no {', '.join(missing)} table); it is left as it is: name the file MLflow created",
            source,
        )
    wanted = head()
    if version != wanted:
        raise StoreError(
            uri,
            f"an MLflow store at schema {version!s:.40} where this MLflow reads {wanted}; it is not migrated here: "
            "back it up, then run `mlflow db upgrade` on it",
            source,
        )


def _tables_and_version(path: str) -> tuple[set[str], str | None]:
    """The database's table names and its alembic revision, read without writing (mode=ro, no journal created)."""
    connection = sqlite3.connect(f"file:{quote(os.path.abspath(path))}?mode=ro", uri=True, timeout=5)
    try:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        version = None
        if "alembic_version" in tables:
            row = connection.execute("SELECT version_num FROM alembic_version LIMIT 1").fetchone()
            version = row[0] if row else None
        return tables, version
    finally:
        connection.close()
