"""Epoch progress for `nmt train` and the sweep's console lines."""
import io
from types import SimpleNamespace

from nmt_core.progress import ConsoleProgress, eta
from sweeper.progress import SweepProgress, fraction


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def run_epoch(progress, steps=4):
    progress.start(2, 5, steps)
    for step in range(1, steps + 1):
        progress.step(step, 100 * step, lambda: 3.25)
    progress.end()


def test_plain_lines_when_not_a_terminal():
    out = io.StringIO()
    run_epoch(ConsoleProgress(out, every_s=0))
    lines = out.getvalue().splitlines()
    assert len(lines) == 3  # steps 1-3; the epoch's own summary line stands for the last
    assert lines[0].startswith("epoch 2/5 1/4 steps, ") and "tok/s, loss 3.250, ETA " in lines[0]
    assert "\r" not in out.getvalue()


def test_a_bar_redrawn_in_place_on_a_terminal():
    out = Terminal()
    run_epoch(ConsoleProgress(out, every_s=0))
    text = out.getvalue()
    assert text.count("\r[") == 4 and "[##########..........] epoch 2/5 2/4 steps" in text
    assert text.endswith("\r\x1b[K")  # cleared for the epoch's summary line


def test_quiet_between_intervals():
    out = io.StringIO()
    run_epoch(ConsoleProgress(out, every_s=3600))
    assert out.getvalue() == ""


def test_eta_format():
    assert eta(59) == "0:59" and eta(61) == "1:01" and eta(3725) == "1:02:05"


def test_sweep_lines_name_running_trials_their_epoch_and_an_eta():
    progress = SweepProgress("demo", planned=4, name_of=lambda t: f"general+none-{t.trial_id}")
    progress.durations = [100.0]  # one trial took 100 s
    trials = [SimpleNamespace(trial_id="a", status="TERMINATED"), SimpleNamespace(trial_id="b", status="RUNNING"),
              SimpleNamespace(trial_id="c", status="RUNNING")]
    progress.began = {"b": 0.0, "c": 0.0}
    board = {"b": {"epoch": 2, "epochs": 4, "step": 50, "steps": 100, "tokens_per_s": 1234.0}}
    lines = progress.lines(trials, board)
    assert lines[0].split("] ", 1)[1].startswith("sweep demo: 1 done, 0 failed, 2 running, 1 pending; elapsed ")
    assert "ETA" in lines[0]
    assert lines[1] == "    general+none-b: epoch 2/4, 50% of it (50/100 steps), 1,234 tok/s"
    assert lines[2] == "    general+none-c: starting"


def test_fraction_of_training_done():
    assert fraction({"epoch": 3, "epochs": 4, "step": 50, "steps": 100}) == 0.625
    assert fraction(None) is None
