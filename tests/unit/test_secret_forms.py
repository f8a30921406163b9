"""Secrets hidden in every form and on every output path (issue #70 item 4): a credential from the environment is
hidden raw, percent-encoded (either case of hex), as base64 of itself and as base64 of `user:password` (what basic
auth sends), in an error line, in a traceback behind --debug, and in what `sweeper logs` prints (on main the log's
text was escaped but never passed through the secret filter)."""

from __future__ import annotations

import base64
import io
import json
from urllib.parse import quote, quote_plus

import pytest

from nmt_core.gates.faults import fault_line, traceback_text
from nmt_core.gates.gate import one_line
from tests.fuzz.conftest import assert_refused, captured
from tests.fuzz.stored_cases import state
from tests.hostile import ENCODED_PASSWORD, ENCODED_TOKEN, ENCODED_USER, hostile_server

pytestmark = pytest.mark.timeout(120)
PASSWORD, TOKEN, USER = ENCODED_PASSWORD, ENCODED_TOKEN, ENCODED_USER


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


FORMS = {
    "raw": PASSWORD,
    "percent-encoded": quote(PASSWORD, safe=""),
    "percent-encoded, lower-case hex": quote(PASSWORD, safe="").lower(),
    "form-encoded": quote_plus(PASSWORD),
    "base64 of user:password": b64(f"{USER}:{PASSWORD}"),
    "base64 of user:password, unpadded": b64(f"{USER}:{PASSWORD}").rstrip("="),
    "base64 of the password": b64(PASSWORD),
    "url-safe base64 of the password": base64.urlsafe_b64encode(PASSWORD.encode()).decode(),
    "the token": TOKEN,
    "base64 of the token": b64(TOKEN),
    "an environment line": f"MLFLOW_TRACKING_PASSWORD={PASSWORD}",
}


@pytest.fixture
def secrets_set(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", USER)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", PASSWORD)
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", TOKEN)


def leaked(text: str) -> list[str]:
    return [name for name, form in FORMS.items() if form.rstrip("=") in text]


@pytest.mark.parametrize("form", FORMS.values(), ids=FORMS)
def test_an_error_line_hides_every_form(form, secrets_set):
    line = one_line(f"HTTP 400: the server answered {form}!")
    assert not leaked(line), line
    assert not leaked(fault_line(RuntimeError(f"from mlflow: {form}")))
    try:
        raise ValueError(f"echoed {form}")
    except ValueError as err:
        assert not leaked(traceback_text(err))


@pytest.mark.parametrize("form", FORMS.values(), ids=FORMS)
def test_sweeper_logs_prints_no_form_of_a_secret(form, secrets_set, tmp_path):
    """A job's log holds the environment it ran with, a library's debug line the header it sent."""
    from sweeper.cli import main

    folder = tmp_path / "sweeps" / "s"
    folder.mkdir(parents=True)
    (folder / "sweeper.json").write_text(json.dumps(state(name="s")))
    (folder / "sweep.log").write_text(f"starting\nsent Authorization: {form}\n{form}\ndone\n")
    for extra in ([], ["--json"], ["--tail", "2"]):
        with captured() as (err, out):
            assert main(["logs", "s", "--storage", str(tmp_path / "sweeps"), *extra]) == 0
        shown = err.getvalue() + out.getvalue()
        assert not leaked(shown), (extra, shown)
        assert "starting" in shown or "--tail" in extra


def test_a_server_that_echoes_encoded_credentials_is_one_line_without_them(secrets_set, tmp_path, monkeypatch):
    from nmt_core.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"hi\n")))
    monkeypatch.setenv("NMT_SWEEPER_TIMEOUT", "5")
    with hostile_server("encoded") as server, captured() as (err, out):
        code = main(["translate", "--model", "models:/m/1", "--tracking-uri", server.url])
    assert_refused(code, err.getvalue(), out.getvalue())
    assert not leaked(err.getvalue()), err.getvalue()
