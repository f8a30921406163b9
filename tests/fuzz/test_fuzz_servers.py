"""Every command that talks to a server, against every hostile server of tests/hostile.py (issue #61 item 3): a drip,
a stall after the probe, a huge or endless body, escape- and secret-laden errors, garbage, endless redirects. Each
ends in one escaped line without a credential, exit 2, within a few deadlines, with bounded memory (the session's
peak: tests/fuzz/conftest.py)."""

from __future__ import annotations

import io
import time

import pytest

from nmt_core.gates import network
from tests.fuzz.conftest import assert_refused, environment
from tests.fuzz.test_fuzz_commands import SPACE, run_main
from tests.hostile import BEHAVIOURS, SECRET, hostile_server

pytestmark = pytest.mark.timeout(900)
DEADLINE_S = 1.0
CALLS = 6  # the most network calls one command makes before it gives up (a probe, a client's checks, a query)
# command -> argv, URL where the hostile server goes
COMMANDS = {
    "sweeper summarize": ["summarize", "fuzz", "--storage", "st", "--tracking-uri", "URL"],
    "sweeper status": ["status", "fuzz", "--storage", "st", "--address", "URL"],
    "sweeper list": ["list", "--storage", "st", "--address", "URL"],
    "sweeper logs": ["logs", "fuzz", "--storage", "st", "--address", "URL"],
    "sweeper stop": ["stop", "fuzz", "--storage", "st", "--address", "URL"],
    "sweeper submit": ["submit", "space.yaml", "--address", "URL", "--tracking-uri", "sqlite:////tmp/fuzz.db"],
    "nmt translate": ["translate", "--model", "models:/fuzz/1", "--tracking-uri", "URL"],
    # the hostile server as a PostgreSQL tracking store (MLflow's engine maker:
    # nmt_core.gates.network.bound_sql_connects)
    "sweeper summarize on postgresql": ["summarize", "fuzz", "--storage", "st", "--tracking-uri", "PG"],
    # the hostile server as an object store's endpoint (pyarrow's S3 client: within_deadline, sweeper/storage/store.py)
    "sweeper status on s3": ["status", "fuzz", "--storage", "s3://b/x?endpoint_override=HOST&scheme=http"],
    "sweeper list on s3": ["list", "--storage", "s3://b/x?endpoint_override=HOST&scheme=http"],
    "sweeper logs on s3": ["logs", "fuzz", "--storage", "s3://b/x?endpoint_override=HOST&scheme=http"],
}
S3_ENVIRONMENT = {"AWS_ACCESS_KEY_ID": "fuzz", "AWS_SECRET_ACCESS_KEY": "fuzz", "AWS_EC2_METADATA_DISABLED": "true"}


@pytest.fixture(scope="module", autouse=True)
def imported():
    """What the commands import lazily, imported once before any is timed (on a loaded machine, tens of seconds)."""
    import mlflow.store.tracking.rest_store  # noqa: F401
    import mlflow.store.tracking.sqlalchemy_store  # noqa: F401
    import psycopg  # noqa: F401
    import ray.job_submission  # noqa: F401

    import nmt_core.mlflow_model  # noqa: F401
    import sweeper.running.sweeps  # noqa: F401
    import sweeper.summary  # noqa: F401


@pytest.mark.parametrize("behaviour", BEHAVIOURS)
@pytest.mark.parametrize("command", COMMANDS)
def test_a_hostile_server_is_one_line_within_its_deadlines(command, behaviour, tmp_path, monkeypatch):
    from nmt_core.cli import main as nmt_main
    from sweeper.cli import main as sweeper_main

    (tmp_path / "space.yaml").write_text(SPACE)
    (tmp_path / "st").mkdir()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"hi\n")))  # what nmt translate reads
    main = nmt_main if command.startswith("nmt") else sweeper_main
    with hostile_server(behaviour) as server, environment(NMT_SWEEPER_TIMEOUT=str(DEADLINE_S), **S3_ENVIRONMENT):
        host = server.url.removeprefix("http://")
        given = {"URL": server.url, "PG": f"postgresql+psycopg://fuzz@{host}/mlflow"}
        argv = [given.get(a, a.replace("HOST", host)) for a in COMMANDS[command]]
        start = time.monotonic()
        code, err, out = run_main(main, argv, tmp_path)
        took = time.monotonic() - start
    assert_refused(code, err, out, secret=SECRET)
    assert took < CALLS * (DEADLINE_S + network.GRACE_S) + 10, took  # a drip would hold it 30 s a call
