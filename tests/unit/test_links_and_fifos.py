"""Every file written or appended to, and every log printed, is a regular file with one name inside storage (issue
#70 item 3): checked on the open descriptor (nmt_core/gates/gate.py: open_append, open_regular's one_link), a FIFO
refused without blocking, and a folder made only once it is proven inside storage (make_folder_within)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from nmt_core.gates.gate import ConfigError, append_line, write_file
from sweeper.running.console import SweepLog
from sweeper.space.spec import SpecError
from sweeper.storage.store import open_storage
from tests.fuzz.conftest import assert_refused, captured
from tests.fuzz.stored_cases import state

pytestmark = pytest.mark.timeout(60)
VICTIM = "a file elsewhere that must not change\n"


@pytest.fixture
def victim(tmp_path) -> Path:
    path = tmp_path / "elsewhere" / "victim"
    path.parent.mkdir()
    path.write_text(VICTIM)
    return path


def plant(where: Path, kind: str, victim: Path) -> None:
    where.parent.mkdir(parents=True, exist_ok=True)
    if kind == "a hard link":
        os.link(victim, where)
    else:
        os.mkfifo(where)


def opened_within(call, seconds: float = 5.0) -> BaseException | None:
    """What `call()` raised, failing the test if it blocks (a FIFO held `resume` past 150 s on main)."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as err:  # noqa: BLE001 - handed to the test
            raised.append(err)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "the append blocked on the file"
    return raised[0] if raised else None


@pytest.mark.parametrize("kind", ["a hard link", "a FIFO"])
def test_the_sweep_log_is_never_appended_through_a_hard_link_or_a_fifo(kind, victim, tmp_path):
    """`ln /elsewhere/victim sweeps/NAME/sweep.log; sweeper resume NAME` appended to the victim on main, and a FIFO
    there hung resume with no output."""
    experiment = open_storage(str(tmp_path / "sweeps"), "test").below("s")
    log_path = Path(experiment.path("sweep.log"))
    plant(log_path, kind, victim)
    log = SweepLog(log_path, lambda: experiment.local_folder("sweep.log"))
    log.write("a line of the sweep\n", True)
    raised = opened_within(log.open)
    assert isinstance(raised, SpecError) and ("names" in str(raised) or "FIFO" in str(raised)), raised
    assert victim.read_text() == VICTIM


@pytest.mark.parametrize("kind", ["a hard link", "a FIFO"])
def test_nmt_trains_metrics_are_never_appended_through_a_hard_link_or_a_fifo(kind, victim, tmp_path):
    """`nmt train --out out` appends each epoch to out/metrics.jsonl: the same through a hard link on main, and a FIFO
    there hung it after its first epoch."""
    target = tmp_path / "out" / "metrics.jsonl"
    plant(target, kind, victim)
    raised = opened_within(lambda: append_line(target, '{"epoch": 1}\n'))
    assert isinstance(raised, ConfigError), raised
    assert_refused(2, str(raised) + "\n")
    assert victim.read_text() == VICTIM


def test_a_log_that_is_a_hard_link_is_not_printed(victim, tmp_path):
    """`sweeper logs` printed a hard-linked file on main (a symbolic link was already refused)."""
    from sweeper.cli import main

    victim.write_text("SECRET-Qz7kR-outside-storage\n")
    folder = tmp_path / "sweeps" / "s"
    folder.mkdir(parents=True)
    (folder / "sweeper.json").write_text(json.dumps(state(name="s")))
    os.link(victim, folder / "sweep.log")
    with captured() as (err, out):
        code = main(["logs", "s", "--storage", str(tmp_path / "sweeps")])
    assert "Qz7kR" not in err.getvalue() + out.getvalue()
    assert_refused(code, err.getvalue(), out.getvalue())


def test_no_folder_is_made_through_a_link_out_of_storage(tmp_path):
    """`ln -s /elsewhere sweeps/NAME/summary; sweeper summarize NAME` made /elsewhere/data on main, then refused."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    experiment = open_storage(str(tmp_path / "sweeps"), "test").below("s")
    Path(experiment.path()).mkdir(parents=True)
    Path(experiment.path("summary")).symlink_to(elsewhere)
    with pytest.raises(SpecError, match="outside"):
        experiment.write_bytes(b"x", "summary", "data", "table.csv")
    assert list(elsewhere.iterdir()) == []


def test_the_atomic_writers_containment_check_can_fail(tmp_path):
    """write_with compared the folder it writes in with itself, so no link could fail it; given the storage's root it
    refuses a folder that a link leads out of it, and nothing is written there."""
    root, elsewhere = tmp_path / "storage", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    (root / "linked").symlink_to(elsewhere)
    with pytest.raises(SpecError, match="outside"):
        write_file(root / "linked", "x.json", b"{}", SpecError, within=root)
    assert list(elsewhere.iterdir()) == []
    write_file(root, "x.json", b"{}", SpecError, within=root)  # inside: written
    assert (root / "x.json").read_bytes() == b"{}"
