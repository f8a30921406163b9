"""The environment's streams (issue #70 item 7, nmt_core/gates/streams.py), each in a real process as a shell would
start it: an output encoding that cannot write a character, a closed stdin or stderr, stderr or stdout on /dev/full,
and MLflow's own warnings, each end in one line or a silent exit code, never a program fault (exit 1) or a traceback.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(300)


def run(args: list[str], cwd: Path, env: dict[str, str] | None = None, close: int | None = None, **streams):
    """`python -m MODULE args` with descriptor `close` closed as a shell closes it (`<&-`, `2>&-`): `sh` closes it
    and execs the command. A preexec_fn closing it ran Python in a forked copy of this worker, and where an earlier
    test had loaded Ray, gRPC's fork handlers wrote an error line of their own on the child's stderr (CI, once)."""
    environment = {key: value for key, value in os.environ.items() if key != "MLFLOW_TRACKING_URI"}
    environment.update(PYTHONPATH=str(ROOT), **(env or {}))
    kept = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **streams}
    command = [sys.executable, "-m", *args]
    if close is not None:
        command = ["sh", "-c", f'exec "$@" {close}<&-', "sh", *command]
    return subprocess.run(command, cwd=cwd, env=environment, timeout=240, **kept)


@pytest.fixture
def space(tmp_path) -> Path:
    """A space in a folder whose name ASCII and Latin-1 cannot write (validate prints its path)."""
    folder = tmp_path / "λé"
    folder.mkdir()
    shutil.copy(ROOT / "search_spaces" / "quickstart.yaml", folder / "q.yaml")
    return folder / "q.yaml"


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_an_output_encoding_that_cannot_write_a_character_escapes_it(encoding, space, tmp_path):
    """On main: UnicodeEncodeError, exit 1, "internal error, please report it"."""
    done = run(["sweeper.cli", "validate", str(space)], tmp_path, {"PYTHONIOENCODING": encoding})
    assert done.returncode == 0, done.stderr[-500:]
    assert b"\\u03bb" in done.stdout and b"valid sweep 'quickstart'" in done.stdout


def test_a_closed_stdin_is_one_line(tmp_path):
    """`nmt translate < &-`: sys.stdin is None, which was an AttributeError (exit 1) on main."""
    done = run(["nmt_core.cli", "translate", "--checkpoint", str(tmp_path)], tmp_path, close=0)
    assert done.returncode == 2
    assert done.stderr.decode().count("\n") == 1 and "stdin: is closed" in done.stderr.decode(), done.stderr


@pytest.mark.parametrize("how", ["closed", "/dev/full"])
def test_a_refusal_with_no_stderr_to_hold_it_is_its_exit_code(how, tmp_path):
    """stderr on /dev/full was exit 1 on main (the line's write failed inside the handler, and Python's flush at exit
    failed again); closed, the next file opened took descriptor 2."""
    with open("/dev/full", "wb") as full:
        streams = {"stderr": full} if how == "/dev/full" else {}
        closing = 2 if how == "closed" else None
        done = run(["sweeper.cli", "validate", "nowhere.yaml"], tmp_path, close=closing, **streams)
    assert done.returncode == 2
    assert done.stdout == b""


def test_stdout_on_dev_full_is_one_line(space, tmp_path):
    with open("/dev/full", "wb") as full:
        done = run(["sweeper.cli", "validate", str(space)], tmp_path, stdout=full)
    assert done.returncode == 2
    assert done.stderr.decode().count("\n") == 1 and "No space left" in done.stderr.decode(), done.stderr


def test_mlflows_warnings_do_not_come_before_our_line(tmp_path):
    """MLFLOW_TRACKING_URI=databricks printed MLflow's WARNING about its SDK ahead of the error on main."""
    (tmp_path / "st").mkdir()
    done = run(["sweeper.cli", "summarize", "x", "--storage", "st"], tmp_path, {"MLFLOW_TRACKING_URI": "databricks"})
    err = done.stderr.decode()
    assert done.returncode == 2 and err.count("\n") == 1 and err.startswith("sweeper: error:"), err
