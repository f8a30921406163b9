"""The sweep's console routing (sweeper/running/console.py), without Ray: who writes decides where a line goes."""

from __future__ import annotations

import sys
import threading
from types import SimpleNamespace

import pytest

from sweeper.running.console import console, ray_calls, sweep_console
from sweeper.storage.store import open_storage

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


REPEATED = "\x1b[36m(run_trial pid=7)\x1b[0m Checkpoint successfully created at: ... [repeated 2x across cluster]"


def fake_ray(monkeypatch, connected: list[bool]):
    """Ray as the sweep sees it: disconnecting prints, from the caller's thread, what its deduplication held back."""
    from sweeper.running import runner

    def shutdown() -> None:
        print(REPEATED)
        connected.clear()

    monkeypatch.setattr(runner, "ray", SimpleNamespace(is_initialized=lambda: bool(connected), shutdown=shutdown))
    return runner.ray_for_one_sweep


def test_the_ray_a_sweep_connected_is_disconnected_inside_the_routing_so_its_last_lines_reach_the_log(
    tmp_path, capsys, monkeypatch
):
    connected: list[bool] = []
    ray_for_one_sweep = fake_ray(monkeypatch, connected)
    with sweep_console(open_storage(str(tmp_path / "sweeps"), "test").below("demo")), ray_for_one_sweep():
        with ray_calls():
            connected.append(True)  # ray.init
        print("6/6 trials finished")
    out, err = capsys.readouterr()
    assert not connected and "repeated" not in out + err and out.splitlines()[0] == "6/6 trials finished"
    assert (
        "(run_trial pid=7) Checkpoint successfully created at: ... [repeated 2x across cluster]"
        in (tmp_path / "sweeps" / "demo" / "sweep.log").read_text()
    )


def test_a_ray_the_caller_connected_stays_connected(tmp_path, capsys, monkeypatch):
    connected = [True]
    ray_for_one_sweep = fake_ray(monkeypatch, connected)
    with sweep_console(open_storage(str(tmp_path / "sweeps"), "test").below("demo")), ray_for_one_sweep():
        with ray_calls():
            print("sweep demo: 2 trials")
    assert connected == [True] and "repeated" not in (tmp_path / "sweeps" / "demo" / "sweep.log").read_text()
