"""The commands that only read and print start without the heavy libraries (#60 items 1 and 2): `import sweeper`,
`import nmt_core.config` and `sweeper --help | --version | validate | schema | list | status | logs` run in a
process where torch cannot be imported, and neither can ray or mlflow, which none of them talks to. Each runs in
a fresh subprocess whose `sys.modules` holds None for those names, so any import of them, lazy ones included,
fails there as it would on a machine without them.

The same holds, command by command, for the libraries that make a command slow to answer (#60's latency goals:
each is 20-200 ms of import): `--help`, `--version` and `schema` read the declarations only (no YAML parser, no
pyarrow or numpy, no HTTP client, no importlib.metadata but for --version), `validate` adds YAML, and `list`,
`status` and `logs` read their sweeps' storage through pyarrow.fs and put HTTP under the gate's deadline
(requests), but load neither pandas nor SQLAlchemy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_sweeps import running, sweep

ROOT = Path(__file__).parents[2]
UNIMPORTABLE = ("torch", "ray", "mlflow")
TABLES = ("pandas", "sqlalchemy")  # no light command builds a DataFrame or opens a database
STORE = ("pyarrow", "numpy", "requests", "urllib3")  # a sweep's storage (pyarrow.fs) and the HTTP gate (requests)
DECLARATIONS_ONLY = (*UNIMPORTABLE, *TABLES, *STORE, "yaml", "importlib.metadata")
VALIDATION = (*UNIMPORTABLE, *TABLES, *STORE, "importlib.metadata")
STORAGE_READERS = (*UNIMPORTABLE, *TABLES)


def run_blocked(
    code: str, unimportable: tuple[str, ...] = UNIMPORTABLE, cwd: Path = ROOT
) -> subprocess.CompletedProcess:
    block = "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in unimportable)
    return subprocess.run(
        [sys.executable, "-c", block + code], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize("module", ["sweeper", "nmt_core.config", "sweeper.cli"])
def test_importing_needs_none_of_them(module):
    done = run_blocked(f"import {module}", DECLARATIONS_ONLY)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def storage(tmp_path_factory) -> Path:
    """A storage folder with one running sweep and its log, as the driver's own writers leave them."""
    root = tmp_path_factory.mktemp("storage")
    sweep(root, "light", running()).write_text("epoch 1\nepoch 2\n", "sweep.log")
    return root


def commands(storage: Path) -> dict[str, tuple[list[str], str, tuple[str, ...]]]:
    """command -> its arguments, a piece of what it prints (its one-line error: stderr, exit 2), and the modules
    it runs without."""
    spaces = ROOT / "search_spaces"
    return {
        "--help": (["--help"], "validate", DECLARATIONS_ONLY),
        "--version": (["--version"], "sweeper", tuple(m for m in DECLARATIONS_ONLY if m != "importlib.metadata")),
        "validate": (["validate", str(spaces / "quickstart.yaml")], "trial", VALIDATION),
        "schema": (["schema"], "sweep.schema.json", DECLARATIONS_ONLY),
        "list": (["list", "--storage", str(storage)], "light", STORAGE_READERS),
        "list --json": (["list", "--storage", str(storage), "--json"], '"state": "running"', STORAGE_READERS),
        "status": (["status", "light", "--storage", str(storage)], "running", STORAGE_READERS),
        "logs": (["logs", "light", "--storage", str(storage)], "epoch 2", STORAGE_READERS),
        "status of a sweep not there": (
            ["status", "gone", "--storage", str(storage)],
            "no sweep named 'gone'",
            STORAGE_READERS,
        ),
    }


@pytest.mark.parametrize(
    "command",
    ["--help", "--version", "validate", "schema", "list", "list --json", "status", "logs"],
)
def test_a_command_that_only_reads_runs_without_them(command, storage):
    arguments, printed, unimportable = commands(storage)[command]
    done = run_blocked(f"from sweeper.cli import main\nsys.exit(main({arguments!r}))", unimportable)
    assert (done.returncode, done.stderr if done.returncode else "") == (0, "")
    assert printed in done.stdout


DESIGNED = "designed"  # a space whose plan prints group-sequential boundaries: scipy's integration, numpy


def validate_all(spaces: list[str]) -> str:
    """One process's code that validates `spaces` and prints each one's first line."""
    return (
        "import contextlib, io, sys\nfrom sweeper.cli import main\n"
        f"for space in {spaces!r}:\n"
        "    with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "        assert main(['validate', space]) == 0, space\n"
        "    print(out.getvalue().splitlines()[0])\n"
    )


def shipped(designed: bool) -> list[str]:
    every = sorted((ROOT / "search_spaces").glob("*.yaml"))
    return [str(path) for path in every if (DESIGNED in path.stem) == designed]


def test_every_shipped_space_validates_without_them():
    """Any shipped space, an Optuna one (its study's URL shown without SQLAlchemy, its default folder named without
    opening a storage) and the largest grids included: one process validates them all."""
    spaces = shipped(designed=False)
    done = run_blocked(validate_all(spaces), VALIDATION)
    assert done.returncode == 0, done.stderr
    assert len(spaces) > 20 and done.stdout.count(": valid sweep") == len(spaces), done.stdout


def test_a_designed_space_validates_loading_no_model_cluster_tracker_or_tables():
    """A designed space's plan (sweeper.design's boundaries) needs numpy and scipy; scipy asks whether torch is loaded
    (its array-API checks read sys.modules), so here nothing is made unimportable: the modules loaded are counted."""
    spaces = shipped(designed=True)
    heavy = (*UNIMPORTABLE, *TABLES)
    code = validate_all(spaces) + f"print(sorted(m for m in sys.modules if m.split('.')[0] in {heavy!r}))\n"
    done = run_blocked(code, ())
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(": valid sweep") == len(spaces) >= 1 and done.stdout.splitlines()[-1] == "[]"


def test_an_optuna_space_with_its_own_study_storage_validates_without_them(tmp_path):
    """A relative SQLite study_storage is shown made absolute by the tracking store's rule
    (sweeper.tracking.sqlite_urls), not through sweeper.tracking.runs, which imports MLflow and Ray."""
    space = tmp_path / "own.yaml"
    space.write_text(
        "name: own\nparameters: {attention.temperature: {choice: [none, sact]}}\n"
        "search: {algorithm: optuna, num_samples: 2, study_storage: 'sqlite:///studies/o.db'}\n"
    )
    done = run_blocked(
        f"from sweeper.cli import main\nsys.exit(main(['validate', {str(space)!r}]))", VALIDATION, tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert f"in sqlite:///{tmp_path.resolve()}/studies/o.db" in done.stdout


def test_its_one_line_error_needs_none_of_them_either(storage):
    """Naming the errors it catches imports no checkpoint code (torch) where none was read."""
    arguments, printed, unimportable = commands(storage)["status of a sweep not there"]
    done = run_blocked(f"from sweeper.cli import main\nsys.exit(main({arguments!r}))", unimportable)
    assert done.returncode == 2 and printed in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr


@pytest.mark.parametrize("module", ["torch", "yaml", "pyarrow", "pandas"])
def test_a_blocked_import_is_seen(module):
    """The test can fail: a command that imports a blocked module exits with its ModuleNotFoundError."""
    done = run_blocked(f"import {module}", DECLARATIONS_ONLY)
    assert done.returncode == 1 and "ModuleNotFoundError" in done.stderr
