"""Nothing but an MLflow store is opened as one (issue #70 item 2, nmt_core/gates/sqlite_stores.py): a command that
only reads refuses another program's database, an empty file, an MLflow store at another schema, a device and a
store in memory in one line, and leaves the file as it was; `sweeper run` creates a store only where none is."""

from __future__ import annotations

import hashlib
import io
import json
import sqlite3

import pytest

from nmt_core.gates.sqlite_stores import StoreError, check_store
from tests.fuzz.conftest import assert_refused, captured

pytestmark = pytest.mark.timeout(300)


def never_asked() -> str:
    raise AssertionError("the schema head is asked of an MLflow store only")


def foreign(path) -> None:
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE users (name TEXT)")
    connection.execute("INSERT INTO users VALUES ('ada')")
    connection.commit()
    connection.close()


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tables(path) -> set[str]:
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        connection.close()


def planted(kind: str, tmp_path) -> tuple[str, object]:
    """(tracking URI, the file it names or None) for each kind of thing that is no MLflow store."""
    path = tmp_path / "app.db"
    if kind == "another program's database":
        foreign(path)
    elif kind == "an empty file":
        path.write_bytes(b"")
    elif kind == "random bytes":
        path.write_bytes(b"SQLite format 3\0" + bytes(range(256)) * 8)
    elif kind == "in memory":
        return "sqlite://", None
    elif kind == "/dev/zero":
        return "sqlite:////dev/zero", None
    return f"sqlite:///{path}", path


KINDS = ("another program's database", "an empty file", "random bytes", "in memory", "/dev/zero")


def sweep_storage(tmp_path, uri: str) -> str:
    """A storage holding a sweep `s` recorded with `uri` (what summarize and promote read first)."""
    folder = tmp_path / "sweeps" / "s"
    folder.mkdir(parents=True)
    record = {"name": "s", "tracking_uri": uri, "parent_run_id": "0" * 32, "base": {}, "cpu": 1.0, "gpu": 0.0}
    record |= {"metric": "bleu_dev", "mode": "max", "trials": 1, "mutable": []}
    (folder / "sweeper.json").write_text(json.dumps(record))
    return str(tmp_path / "sweeps")


COMMANDS = {
    "sweeper summarize": lambda storage, uri: (
        "sweeper",
        ["summarize", "s", "--storage", storage, "--tracking-uri", uri],
    ),
    "sweeper promote": lambda storage, uri: ("sweeper", ["promote", "s", "abcde_00000", "--storage", storage]),
    "nmt translate": lambda storage, uri: ("nmt", ["translate", "--model", "models:/m/1", "--tracking-uri", uri]),
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("kind", KINDS)
def test_a_command_that_reads_opens_nothing_but_an_mlflow_store(command, kind, tmp_path, monkeypatch):
    """On main, summarize or promote on another program's database or an empty file wrote MLflow's 65 tables into it
    (and printed MLflow's INFO lines); /dev/zero and a store in memory went the same way."""
    from nmt_core.cli import main as nmt_main
    from sweeper.cli import main as sweeper_main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"hi\n")))
    uri, path = planted(kind, tmp_path)
    before = digest(path) if path else None
    program, argv = COMMANDS[command](sweep_storage(tmp_path, uri), uri)
    with captured() as (err, out):
        code = (nmt_main if program == "nmt" else sweeper_main)(argv)
    assert_refused(code, err.getvalue(), out.getvalue())
    assert "tracking store" in err.getvalue() and "INFO" not in err.getvalue() + out.getvalue()
    if path is not None:
        assert digest(path) == before  # not a byte written: no table, no journal replayed
    assert not (tmp_path / "mlruns").exists()


def test_an_mlflow_store_at_another_schema_is_not_migrated(tmp_path):
    from mlflow.tracking import MlflowClient

    from nmt_core.gates.tracking_store import schema_head

    path = tmp_path / "mlflow.db"
    MlflowClient(f"sqlite:///{path}").search_experiments()  # a store at this MLflow's schema
    assert check_store(f"sqlite:///{path}", False, "test", schema_head) is False
    connection = sqlite3.connect(path)
    connection.execute("UPDATE alembic_version SET version_num = 'abc123'")
    connection.commit()
    connection.close()
    before = digest(path)
    with pytest.raises(StoreError, match="schema abc123 .* not migrated"):
        check_store(f"sqlite:///{path}", False, "test", schema_head)
    assert digest(path) == before


def test_run_creates_a_store_only_where_none_is(tmp_path):
    """`sweeper run` may create a store at a new path or an empty file (check_reachable says it will, and run
    prints that it did); another database is refused for it too."""
    from sweeper.tracking.store import check_reachable

    assert check_reachable(f"sqlite:///{tmp_path / 'new.db'}", create=True) is True
    (tmp_path / "empty.db").write_bytes(b"")
    assert check_reachable(f"sqlite:///{tmp_path / 'empty.db'}", create=True) is True
    foreign(tmp_path / "app.db")
    with pytest.raises(StoreError, match="not an MLflow store"):
        check_reachable(f"sqlite:///{tmp_path / 'app.db'}", create=True)
    assert tables(tmp_path / "app.db") == {"users"}
    with pytest.raises(StoreError, match="no tracking store there"):
        check_reachable(f"sqlite:///{tmp_path / 'new.db'}")  # a command that only reads


def test_run_says_it_created_the_store(capsys):
    from sweeper.running.runner import print_notes

    print_notes("s", "sweeps/s", None, "sqlite:////tmp/x/mlflow.db")
    assert (
        capsys.readouterr().out
        == "note: created the MLflow tracking store sqlite:////tmp/x/mlflow.db (there was none)\n"
    )


def test_other_uris_are_not_looked_at():
    for uri in ("http://127.0.0.1:5000", "postgresql://db/mlflow", "databricks"):
        assert check_store(uri, False, "test", never_asked) is False
