"""One bad record never hides the others (issue #70 item 8): `sweeper list` shows every readable sweep and one line
per damaged one, escaped, exit 0 while one was listed. On main one sweep whose sweeper.json held a C1 or bidi
character in `started_by` made `sweeper list` of the whole storage exit 2 and list nothing."""

from __future__ import annotations

import json

from sweeper import cli as sweeper_cli
from tests.fuzz.conftest import assert_refused, captured
from tests.unit.test_sweeps import running, state, sweep


def damaged(storage, name: str, started_by: str) -> None:
    folder = storage / name
    folder.mkdir(parents=True)
    (folder / "sweeper.json").write_text(json.dumps(state(name, started_by=started_by)))


def listed(storage, *extra: str) -> tuple[int, str, str]:
    with captured() as (err, out):
        code = sweeper_cli.main(["list", "--storage", str(storage), *extra])
    return code, out.getvalue(), err.getvalue()


def test_list_shows_every_readable_sweep_and_a_line_per_damaged_one(tmp_path):
    sweep(tmp_path, "alpha", running())
    sweep(tmp_path, "beta", {**running(), "state": "finished"})
    damaged(tmp_path, "c1", "mallory\x9b31m")
    damaged(tmp_path, "bidi", "eve\u202egnp.exe")
    code, out, err = listed(tmp_path)
    assert code == 0, err
    assert "alpha" in out and "beta" in out and "c1" not in out and "bidi" not in out
    lines = err.splitlines()
    assert len(lines) == 2 and all(" is damaged: " in line for line in lines), err
    assert "\x9b" not in err and "\u202e" not in err and all(c.isprintable() for c in err.replace("\n", ""))
    code, out, _ = listed(tmp_path, "--json")
    states = {row["name"]: row["state"] for row in json.loads(out)}
    assert code == 0 and states == {"alpha": "running", "beta": "finished", "c1": "damaged", "bidi": "damaged"}


def test_a_storage_with_nothing_readable_is_one_line(tmp_path):
    damaged(tmp_path, "c1", "mallory\x9b31m")
    damaged(tmp_path, "bidi", "eve\u202egnp.exe")
    code, out, err = listed(tmp_path)
    assert_refused(code, err, out)
    assert "no readable sweep" in err and "2 damaged" in err
