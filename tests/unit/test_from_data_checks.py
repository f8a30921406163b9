"""`--from-data` re-checks what it reads (issue #70 item 6, sweeper/summary/stored_data.py): a committed study's data/
folder, damaged one way at a time, is one line naming the file and the key, exit 2, and no --out folder. On main,
`"resamples": 1e12` asked for 146 TiB (MemoryError, exit 1 "internal error"), a metric stored as text, BLEU 1e308 and
a zero-row trials table ended in exit 1, a link at data/traces was followed, and a variant name's escapes were
printed raw."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sweeper.cli import main as sweeper_main
from tests.fuzz.conftest import assert_refused, captured
from tests.fuzz.study_damages import bleu, no_rows, sweep_json, trial

pytestmark = pytest.mark.timeout(600)
STUDY = Path(__file__).resolve().parents[2] / "docs" / "results" / "sact_study_tatoeba_cpu_power" / "data"
NAME = "sact-power"


def traces_link(data: Path) -> None:
    elsewhere = data.parent / "elsewhere"
    shutil.move(data / "traces", elsewhere)
    (data / "traces").symlink_to(elsewhere)


CASES = {
    "resamples 1e12": sweep_json(lambda f: f["space"]["significance"].update(resamples=1e12)),
    "an unknown significance key": sweep_json(lambda f: f["space"]["significance"].update(shell="rm -rf")),
    "a sweep name with an escape": sweep_json(lambda f: f.update(name="x\x1b[2Jy")),
    "a metric stored as text": trial(0, "metrics", bleu("high")),
    "BLEU 1e308": trial(0, "metrics", bleu(1e308)),
    "a NaN metric": trial(0, "metrics", bleu(float("nan"))),
    "a curve of text": trial(0, "curves", lambda c: c.update({next(iter(c)): ["a", "b"]})),
    "a variant with a bidi override": trial(0, "variant", lambda v: "\u202egnp.exe"),
    "a variant name tag with an escape": trial(0, "tags", lambda t: t.update({"sweeper.variant_name": "\x1b]0;x"})),
    "a param out of bounds": trial(0, "params", lambda p: p.update({"train.epochs": "100000000"})),
    "no trial": no_rows,
    "data/traces links out": traces_link,
}


@pytest.mark.parametrize("damage", CASES.values(), ids=CASES)
def test_damaged_summary_data_is_one_line_exit_2_and_nothing_written(damage, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(STUDY, data)
    damage(data)
    out = tmp_path / "out"
    with captured() as (err, printed):
        code = sweeper_main(["summarize", NAME, "--from-data", str(data), "--out", str(out)])
    assert_refused(code, err.getvalue(), printed.getvalue())
    assert "data/" in err.getvalue() or "traces" in err.getvalue(), err.getvalue()
    assert not out.exists()
