"""The commands that only read and print start without the heavy libraries (#60 item 1): `import sweeper`,
`import nmt_core.config` and `sweeper --help | --version | validate | schema | list | status | logs` run in a
process where torch cannot be imported, and neither can ray or mlflow, which none of them talks to. Each runs in
a fresh subprocess whose `sys.modules` holds None for those names, so any import of them, lazy ones included,
fails there as it would on a machine without them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_sweeps import running, sweep

ROOT = Path(__file__).parents[2]
UNIMPORTABLE = ("torch", "ray", "mlflow")
BLOCK = "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in UNIMPORTABLE)


def run_blocked(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", BLOCK + code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize("module", ["sweeper", "nmt_core.config", "sweeper.cli"])
def test_importing_needs_none_of_them(module):
    done = run_blocked(f"import {module}")
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def storage(tmp_path_factory) -> Path:
    """A storage folder with one running sweep and its log, as the driver's own writers leave them."""
    root = tmp_path_factory.mktemp("storage")
    sweep(root, "light", running()).write_text("epoch 1\nepoch 2\n", "sweep.log")
    return root


def commands(storage: Path) -> dict[str, tuple[list[str], str]]:
    """command -> its arguments and a piece of what it prints (its one-line error: stderr, exit 2)."""
    space = str(ROOT / "search_spaces" / "quickstart.yaml")
    return {
        "--help": (["--help"], "validate"),
        "--version": (["--version"], "sweeper"),
        "validate": (["validate", space], "trial"),
        "schema": (["schema"], "sweep.schema.json"),
        "list": (["list", "--storage", str(storage)], "light"),
        "status": (["status", "light", "--storage", str(storage)], "running"),
        "logs": (["logs", "light", "--storage", str(storage)], "epoch 2"),
        "status of a sweep not there": (["status", "gone", "--storage", str(storage)], "no sweep named 'gone'"),
    }


@pytest.mark.parametrize("command", ["--help", "--version", "validate", "schema", "list", "status", "logs"])
def test_a_command_that_only_reads_runs_without_them(command, storage):
    arguments, printed = commands(storage)[command]
    done = run_blocked(f"from sweeper.cli import main\nsys.exit(main({arguments!r}))")
    assert (done.returncode, done.stderr if done.returncode else "") == (0, "")
    assert printed in done.stdout


def test_its_one_line_error_needs_none_of_them_either(storage):
    """Naming the errors it catches imports no checkpoint code (torch) where none was read."""
    arguments, printed = commands(storage)["status of a sweep not there"]
    done = run_blocked(f"from sweeper.cli import main\nsys.exit(main({arguments!r}))")
    assert done.returncode == 2 and printed in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr


def test_a_blocked_import_is_seen():
    """The test can fail: a command that imports torch exits with its ModuleNotFoundError."""
    done = run_blocked("import torch")
    assert done.returncode == 1 and "ModuleNotFoundError" in done.stderr
