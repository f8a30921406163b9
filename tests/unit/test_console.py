"""The sweep's console routing (sweeper/console.py), without Ray: who writes decides where a line goes."""

from __future__ import annotations

import sys
import threading

import pytest

from sweeper.console import console, ray_calls, sweep_console
from sweeper.storage import open_storage

CHECKPOINT = "\x1b[36m(run_trial pid=7)\x1b[0m Checkpoint successfully created at: Checkpoint(path=/x)"


def in_thread(line: str, stream: str = "stdout") -> None:
    """As Ray's log thread prints a worker's line: to whatever sys.stdout / sys.stderr are then."""
    thread = threading.Thread(target=lambda: print(line, file=getattr(sys, stream)))
    thread.start()
    thread.join()


def a_sweep(experiment, verbose: bool = False) -> None:
    with sweep_console(experiment, verbose):
        print("sweep demo: 2 trials")
        with ray_calls():  # Tuner.fit
            print("│ Configuration for experiment │")  # Tune's box, from the sweep's own thread
            print("[12:00:00] trial a finished", file=console())  # ours, inside fit
            in_thread(CHECKPOINT, "stderr")
        in_thread("(run_trial pid=7) a worker line that arrives after fit")
        print("6/6 trials finished")


def test_ours_on_the_console_and_rays_in_the_log_without_ansi(tmp_path, capsys):
    experiment = open_storage(str(tmp_path / "sweeps"), "test").below("demo")
    a_sweep(experiment)
    out, err = capsys.readouterr()
    log = tmp_path / "sweeps" / "demo" / "sweep.log"
    assert out.splitlines() == [
        "sweep demo: 2 trials",
        "[12:00:00] trial a finished",
        "6/6 trials finished",
        f"Ray's output: {log} (--verbose shows it)",
    ]
    assert err == ""
    assert log.read_text().splitlines() == [
        "sweep demo: 2 trials",
        "│ Configuration for experiment │",
        "[12:00:00] trial a finished",
        "(run_trial pid=7) Checkpoint successfully created at: Checkpoint(path=/x)",
        "(run_trial pid=7) a worker line that arrives after fit",
        "6/6 trials finished",
    ]
    assert sys.stdout is not None and console() is sys.stdout  # all restored


def test_verbose_shows_rays_lines_too_without_ansi_off_a_terminal(tmp_path, capsys):
    a_sweep(open_storage(str(tmp_path / "sweeps"), "test").below("demo"), verbose=True)
    out, err = capsys.readouterr()
    assert "│ Configuration for experiment │" in out and "a worker line that arrives after fit" in out
    assert err == "(run_trial pid=7) Checkpoint successfully created at: Checkpoint(path=/x)\n"


def test_a_sweep_refused_before_ray_starts_writes_no_log_and_hides_nothing(tmp_path, capsys):
    with pytest.raises(ValueError):
        with sweep_console(open_storage(str(tmp_path / "sweeps"), "test").below("demo")):
            in_thread("INFO mlflow: creating tables", "stderr")  # MLflow's store opening in a thread
            print("checking the tracking store")
            raise ValueError("refused")
    out, err = capsys.readouterr()
    assert not (tmp_path / "sweeps").exists()
    assert out == "checking the tracking store\n" and err == "INFO mlflow: creating tables\n"
