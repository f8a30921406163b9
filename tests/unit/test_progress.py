"""Epoch progress for `nmt train` and the sweep's console lines."""

import io
import os
import subprocess
import sys
from types import SimpleNamespace

from nmt_core.training.progress import ConsoleProgress, eta
from nmt_core.training.train import TrainingDiverged
from sweeper.running.progress import SweepProgress, fraction
from sweeper.running.trial_context import NoRetryAfterDivergence
from sweeper.space.spec import describe_trial
from sweeper.tracking.names import TrialNames, shared_words

BASE = {"data": {"corpus": "synthetic"}, "model": {"emb_size": 8, "hidden_size": 8}}


def tune_trial(trial_id: str, temperature: str, seed: int, **fields) -> SimpleNamespace:
    """A trial as Tune hands it to a callback: its id, and its config as the grid plans it."""
    params = {"attention.temperature": temperature} | ({"attention.lambda": 10} if temperature == "learned" else {})
    return SimpleNamespace(trial_id=trial_id, config={"trial": {"params": params, "seed": seed}}, **fields)


def names_of(*trials) -> TrialNames:
    """The sweep's names for these trials, as the driver computes them from its plan (sweeper.running.runner)."""
    return TrialNames(BASE, shared_words(describe_trial(trial.config, BASE)[0] for trial in trials))


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
    """Each running trial by the name its MLflow run has (`learned λ10 · seed 1`), never Ray's id."""
    trials = [
        tune_trial("667b1_00000", "none", 1, status="TERMINATED"),
        tune_trial("b", "learned", 1, status="RUNNING"),
        tune_trial("c", "none", 2, status="RUNNING"),
    ]
    progress = SweepProgress("demo", planned=4, name_of=names_of(*trials))
    progress.durations = [100.0]  # one trial took 100 s
    progress.began = {"b": 0.0, "c": 0.0}
    board = {"b": {"epoch": 2, "epochs": 4, "step": 50, "steps": 100, "tokens_per_s": 1234.0}}
    lines = progress.lines(trials, board)
    assert lines[0].split("] ", 1)[1].startswith("sweep demo: 1 done, 0 failed, 2 running, 1 pending; elapsed ")
    assert "ETA" in lines[0]
    assert lines[1] == "    learned λ10 · seed 1: epoch 2/4, 50% of it (50/100 steps), 1,234 tok/s"
    assert lines[2] == "    no temperature · seed 2: starting"


def test_a_looks_board_and_status_count_the_sweeps_trials_with_the_earlier_looks():
    """A designed sweep's look 4 (9 trials) after looks that ended 30 trials, one of them failed: the board and
    status.json say 31 done and 2 failed of 39, as sweeper.json's 39 planned, not 2 and 1 of 9."""
    trials = [
        tune_trial("a", "none", 10, last_result={}, status="TERMINATED"),
        tune_trial("b", "none", 11, last_result={}, status="TERMINATED"),
        tune_trial("c", "sact", 10, last_result={}, status="ERROR"),
        tune_trial("d", "sact", 11, last_result={}, status="RUNNING"),
    ]
    progress = SweepProgress("designed", planned=9, name_of=names_of(*trials))
    progress.earlier = (29, 1)
    line = progress.lines(trials, {})[0].split("] ", 1)[1]
    assert line.startswith("sweep designed: 31 done, 2 failed, 1 running, 5 pending; elapsed ")
    status = progress.status(trials, [line])
    assert {key: status[key] for key in ("trials", "done", "failed", "running", "pending")} == {
        "trials": 39,
        "done": 31,
        "failed": 2,
        "running": 1,
        "pending": 5,
    }


def test_fraction_of_training_done():
    assert fraction({"epoch": 3, "epochs": 4, "step": 50, "steps": 100}) == 0.625
    assert fraction(None) is None


def test_one_line_per_finished_retried_and_failed_trial_with_its_cause_and_traceback(tmp_path, capsys):
    from sweeper.tracking.metrics import FINAL

    done = tune_trial(
        "a_00000", "none", 1, last_result={"bleu_dev": 12.345, FINAL: 1}, path="bucket/sweeps/demo/a_00000_x"
    )
    stopped = tune_trial("a_00002", "learned", 1, last_result={"bleu_dev": 3.0, "epoch": 2}, path="x")
    error = tmp_path / "error.txt"
    error.write_text(
        "Failure # 1 (occurred at 2026)\n\x1b[36mray::run_trial()\x1b[39m (pid=7)\n  File x\nValueError: boom\n"
    )
    failed = tune_trial(
        "a_00001",
        "none",
        2,
        last_result={},
        error_file=str(error),
        path="bucket/sweeps/demo/a_00001_general+none_seed2",
        max_failures=2,
    )
    progress = SweepProgress("demo", planned=2, name_of=names_of(done, stopped), logs="s3://bucket/sweeps/demo")
    diverged_error = tmp_path / "diverged.txt"
    diverged_error.write_text(
        "Failure # 1 (occurred at 2026)\n  File x\n"  # the trainable's own exception, by its qualified name
        f"{TrainingDiverged.__module__}.{TrainingDiverged.__qualname__}: epoch 3: training loss is nan\n"
    )
    diverged = SimpleNamespace(**{**vars(failed), "trial_id": "a_00003", "error_file": str(diverged_error)})
    progress.on_trial_start(0, [], done)
    progress.on_trial_complete(0, [], done)
    progress.on_trial_complete(0, [], stopped)
    for trial in (failed, diverged):  # in the driver's order: the retry policy first, then the console
        NoRetryAfterDivergence().on_trial_recover(0, [], trial)
        progress.on_trial_recover(0, [], trial)
    assert (failed.max_failures, diverged.max_failures) == (2, 0)  # a divergence is not retried: it would recur
    progress.on_trial_error(0, [], failed)
    lines = [line[11:] for line in capsys.readouterr().out.splitlines()]  # without [HH:MM:SS]
    traceback = "ValueError: boom; traceback: s3://bucket/sweeps/demo/a_00001_general+none_seed2/error.txt"
    assert lines == [  # each by its run's name; Ray's trial id only in the failed one's folder, to act on
        "trial no temperature · seed 1 finished in 0:00: bleu_dev 12.35",
        "trial learned λ10 · seed 1 stopped early after epoch 2 in 0:00: bleu_dev 3.00",
        f"trial no temperature · seed 2 failed, retried from its last checkpoint: {traceback}",
        f"trial no temperature · seed 2 FAILED after 0:00: {traceback}",
    ]


def test_the_sweepers_intervals_from_the_environment_fall_back_to_their_defaults_when_bad():
    """SWEEPER_PROGRESS_EVERY_S, SWEEPER_WAITING_AFTER_S and SWEEPER_STATUS_EVERY_S are read when the driver imports
    them: a usable value is taken, a bad one (not a number, NaN, <= 0) leaves the default, never a traceback."""
    show = (
        "from sweeper.running import progress as p, sweeps as s;"
        " print(p.PRINT_EVERY_S, p.WAITING_AFTER_S, s.STATUS_EVERY_S)"
    )

    def intervals(progress: str, waiting: str, status: str) -> str:
        values = {"SWEEPER_PROGRESS_EVERY_S": progress, "SWEEPER_WAITING_AFTER_S": waiting}
        env = {**os.environ, **values, "SWEEPER_STATUS_EVERY_S": status}
        done = subprocess.run([sys.executable, "-c", show], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.strip()

    assert intervals("2", "3.5", "1") == "2.0 3.5 1.0"
    assert intervals("soon", "nan", "-1") == "30.0 15.0 10.0"


def test_a_tuner_pickled_before_the_retry_rule_moved_still_unpickles():
    """Sweeps started before NoRetryAfterDivergence moved to sweeper.running.trial_context hold it by
    sweeper.running.trainable's name in their tuner.pkl, which `sweeper resume` and `extend` unpickle (look 3 of the
    designed RNN study was one). A pickle's GLOBAL opcode names it exactly as theirs does."""
    import pickle

    assert pickle.loads(b"csweeper.running.trainable\nNoRetryAfterDivergence\n.") is NoRetryAfterDivergence
