"""Live sweep progress on the driver's console: trials done, running and pending, each running trial's
epoch and its progress within the epoch, and an ETA for the sweep, at least every 30 s.

Trials report their step to a small Ray actor (the board, found by the sweep's name, so that it works
on any node and after `sweeper resume`); a Tune callback on the driver reads it and prints. Tune's
result reports stay once per epoch: schedulers and searchers see no extra results.

The same callback is the sweep's heartbeat in storage (status.json: state, counts, best so far, the board's
lines, every STATUS_EVERY_S), which `sweeper status` and `sweeper list` read from anywhere, and it takes
`sweeper stop`'s request (stop.json) to the driver: Ray Tune's own graceful stop (its SIGUSR1 handler).
A sweep none of whose trials runs while some wait, on a cluster without the CPUs (GPUs) a trial needs free, says
"waiting for resources" instead of looking hung.
"""

from __future__ import annotations

import os
import posixpath
import signal
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import ray
from ray.tune import Callback

from nmt_core.gates.gate import seconds_from
from nmt_core.training.progress import eta
from sweeper.running.console import ANSI, console
from sweeper.space.spec import ObjectiveSpec, ResourcesSpec

PRINT_EVERY_S = seconds_from("SWEEPER_PROGRESS_EVERY_S", 30.0)  # a bad value: the default (nmt_core.gates.gate)
SEND_EVERY_S = 5.0  # a trial's updates to the board, at most
# nothing running this long while trials wait, and no room for one: waiting for resources (long enough that a
# sweep whose trials turn over is not called waiting; a test's cluster of seconds-long trials shortens it)
WAITING_AFTER_S = seconds_from("SWEEPER_WAITING_AFTER_S", 15.0)


@ray.remote(num_cpus=0)
class ProgressBoard:
    """trial id -> where its current epoch is."""

    def __init__(self) -> None:
        self.trials: dict[str, dict[str, Any]] = {}

    def update(self, trial_id: str, where: dict[str, Any]) -> None:
        self.trials[trial_id] = where

    def snapshot(self) -> dict[str, dict[str, Any]]:
        return self.trials


def board_name(sweep: str) -> str:
    return f"sweeper-progress-{sweep}"


def open_board(sweep: str):
    """Create the board; the caller holds the handle while the sweep runs (the actor dies with its last handle)."""
    return ProgressBoard.options(name=board_name(sweep), get_if_exists=True).remote()


class TrialProgress:
    """nmt_core's EpochProgress inside a trial: sends its position to the board every few seconds."""

    def __init__(self, sweep: str, trial_id: str):
        self.trial_id = trial_id
        try:
            self.board = ray.get_actor(board_name(sweep))
        except ValueError:  # a trial run outside `sweeper run` (tests, a board lost with its node)
            self.board = None

    def start(self, epoch: int, epochs: int, steps: int) -> None:
        self.where = {"epoch": epoch, "epochs": epochs, "step": 0, "steps": steps, "tokens_per_s": 0.0}
        self.begin = self.last = time.perf_counter()
        self._send()

    def step(self, step: int, tokens: int, mean_loss: Callable[[], float]) -> None:
        now = time.perf_counter()
        if now - self.last >= SEND_EVERY_S:
            self.last = now
            self.where.update(step=step, tokens_per_s=tokens / (now - self.begin))
            self._send()

    def end(self) -> None:
        self.where["step"] = self.where["steps"]
        self._send()

    def _send(self) -> None:
        if self.board is not None:
            self.board.update.remote(self.trial_id, dict(self.where))  # fire and forget: never waits


class SweepProgress(Callback):
    """Prints the sweep's state every PRINT_EVERY_S seconds, and one line per finished, retried or failed trial
    (a failure with its cause and where its traceback is: `logs` is the sweep's folder in storage, whose trial
    folders carry Ray's trial id). `name_of` names a trial as its MLflow run is named
    (sweeper.tracking.names.TrialNames), so that the console, MLflow and the summary say the same."""

    metric, logs = ObjectiveSpec.metric, ""  # for a callback restored from a sweep started before they existed
    mode, cpu, gpu = ObjectiveSpec.mode, ResourcesSpec.cpu, ResourcesSpec.gpu  # set by `watch` for every run and resume
    idle_since: float | None = None  # since when no trial has run while some wait
    waiting: str | None = None  # why no trial can start (waiting for resources), or None
    compute: Any = None  # the driver's accountant (sweeper.running.compute.ComputeWatch): status.json's `compute`
    # a designed sweep's earlier looks, trials done and failed: a look's board and status.json count the sweep's
    # trials, as sweeper.json does (`sweeper list` said 0/39 done as look 4 began, with 30 done before it)
    earlier: tuple[int, int] = (0, 0)

    def __init__(
        self,
        sweep: str,
        planned: int,
        name_of: Callable[[Any], str],
        metric: str = ObjectiveSpec.metric,
        logs: str = "",
    ):
        self.sweep, self.planned, self.name_of = sweep, planned, name_of
        self.metric, self.logs = metric, logs
        self.started = time.time()
        self.last_print = 0.0
        self.durations: list[float] = []
        self.began: dict[str, float] = {}
        self._beat = Heartbeat(logs)

    def watch(self, mode: str, cpu: float, gpu: float, compute: Any = None) -> None:
        """The objective's direction and a trial's resources: the best so far, and whether a trial fits now; the
        accountant whose spending status.json reports."""
        self.mode, self.cpu, self.gpu, self.compute = mode, cpu, gpu, compute

    def __getstate__(self) -> dict[str, Any]:  # kept in Tune's experiment state for `sweeper resume`
        dropped = {"began": {}, "last_print": 0.0, "_beat": None, "idle_since": None, "waiting": None, "compute": None}
        return {**self.__dict__, **dropped}

    @property
    def beat(self) -> Heartbeat:
        if getattr(self, "_beat", None) is None:  # restored for `sweeper resume`, or from before status.json
            self._beat = Heartbeat(self.logs)
        return self._beat

    def on_trial_start(self, iteration, trials, trial, **info):
        self.began.setdefault(trial.trial_id, time.time())

    def on_trial_complete(self, iteration, trials, trial, **info):
        from sweeper.tracking.metrics import (
            FINAL,  # reads nmt_core (torch): the driver has it, the board's importers need not
        )

        result = trial.last_result or {}
        value = result.get(self.metric)
        score = f"{self.metric} {value:.2f}" if isinstance(value, (int, float)) else f"no {self.metric}"
        how = "finished" if result.get(FINAL) else f"stopped early after epoch {result.get('epoch', '?')}"
        self._ended(trial, f"{how} in {eta(self._took(trial))}: {score}")

    def on_trial_recover(self, iteration, trials, trial, **info):
        if trial.max_failures == 0:  # a divergence (NoRetryAfterDivergence): its FAILED line follows at once
            return
        self._say(trial, f"failed, retried from its last checkpoint: {self._failure(trial)}")

    def on_trial_error(self, iteration, trials, trial, **info):
        self._ended(trial, f"FAILED after {eta(self._took(trial))}: {self._failure(trial)}")

    def _took(self, trial) -> float:
        return time.time() - self.began.get(trial.trial_id, time.time())

    def _failure(self, trial) -> str:
        """The exception's line, and where its whole traceback is (Tune's error.txt in the trial's folder)."""
        cause = trial_failure_cause(trial) or "unknown error"
        folder = posixpath.join(self.logs, posixpath.basename(trial.path)) if self.logs else trial.path
        return f"{cause}; traceback: {folder}/error.txt"

    def _ended(self, trial, how: str) -> None:
        if trial.trial_id in self.began:
            self.durations.append(time.time() - self.began.pop(trial.trial_id))
        self._say(trial, how)

    def _say(self, trial, what: str) -> None:
        print(f"[{datetime.now():%H:%M:%S}] trial {self.name_of(trial)} {what}", file=console(), flush=True)

    def on_step_end(self, iteration, trials, **info):
        """Tune's scheduling loop hands over a snapshot of its trials; the board, the cluster's room and storage are
        asked on the heartbeat's thread (they can take seconds on a loaded cluster: the loop must not wait)."""
        printing, beating = time.time() - self.last_print >= PRINT_EVERY_S, self.beat.due()
        if not (printing or beating) or self.beat.busy():
            return
        self.last_print = time.time() if printing else self.last_print
        seen = [
            SimpleNamespace(
                trial_id=t.trial_id,
                status=t.status,
                config=t.config,
                last_result={self.metric: (t.last_result or {}).get(self.metric)},
            )
            for t in trials
        ]
        self.beat.start(lambda: self.report(seen, printing, beating))

    def report(self, trials, printing: bool, beating: bool) -> None:
        try:
            board = ray.get(ray.get_actor(board_name(self.sweep)).snapshot.remote(), timeout=5)
        except Exception:  # noqa: BLE001 - progress is a convenience: no board, no per-epoch detail
            board = {}
        lines = self.lines(trials, board)
        if printing:
            print("\n".join(lines), file=console(), flush=True)
        if beating:
            self.beat.send(self.status(trials, lines))

    def status(self, trials, lines: list[str]) -> dict[str, Any]:
        """What status.json says while the sweep runs (see sweeper/running/sweeps.py)."""
        from sweeper.running.sweeps import RUNNING, STOPPING, WAITING

        done, failed, running, pending = self.counts(trials)
        state = STOPPING if self.beat.stopping else WAITING if self.waiting else RUNNING
        detail = f"{self.waiting}; other sweeps hold the cluster, or it is scaling up" if self.waiting else ""
        values = [v for t in trials if isinstance(v := (t.last_result or {}).get(self.metric), (int, float))]
        best = (max if self.mode == "max" else min)(values) if values else None
        planned = self.planned + sum(self.earlier)
        status = {"state": state, "trials": planned, "done": done, "failed": failed, "running": running}
        spending = self.compute.latest if self.compute is not None else None
        compute = {"compute": spending.record()} if spending is not None else {}
        return {**status, "pending": pending, "best": best, "board": lines, "detail": detail, **compute}

    def counts(self, trials) -> tuple[int, int, int, int]:
        """Trials done, failed (with the earlier looks'), running, and pending (waiting to start, or not created
        yet)."""
        status = [t.status for t in trials]
        done = sum(s == "TERMINATED" for s in status)
        failed = sum(s == "ERROR" for s in status)
        running = sum(s == "RUNNING" for s in status)
        pending = max(self.planned - done - failed - running, 0)
        return done + self.earlier[0], failed + self.earlier[1], running, pending

    def room(self) -> str | None:
        """Why no trial can start now, if the cluster lacks the free CPUs (GPUs) one trial needs; else None."""
        try:
            free = ray.available_resources()
        except Exception:  # noqa: BLE001 - the cluster is not answering: nothing to say about its room
            return None
        short = [(k, n) for k, n in (("CPU", self.cpu), ("GPU", self.gpu)) if n > 0 and free.get(k, 0.0) < n]
        if not short:
            return None
        kind, need = short[0]
        return f"{need:g} {kind} a trial, {free.get(kind, 0.0):g} free"

    def wait_for_resources(self, running: int, pending: int) -> str | None:
        """Why the sweep waits, once no trial has run for WAITING_AFTER_S while some wait and the cluster has no
        room for one (a trial whose worker is still starting holds its room: that is not waiting); else None."""
        if running or not pending:
            self.idle_since, self.waiting = None, None
            return None
        self.idle_since = self.idle_since or time.time()
        self.waiting = self.room() if time.time() - self.idle_since >= WAITING_AFTER_S else None
        return self.waiting

    def lines(self, trials, board: dict[str, dict[str, Any]]) -> list[str]:
        done, failed, n_running, pending = self.counts(trials)
        running = [t for t in trials if t.status == "RUNNING"]
        fractions = {t.trial_id: fraction(board.get(t.trial_id)) for t in running}
        left = self.eta(pending, running, fractions)
        wait = self.wait_for_resources(n_running, pending)
        lines = [
            f"[{datetime.now():%H:%M:%S}] sweep {self.sweep}: {done} done, {failed} failed, {n_running} running, "
            f"{pending} pending{f': waiting for resources ({wait})' if wait else ''}; elapsed "
            f"{eta(time.time() - self.started)}"
            + (f", ETA {eta(left)}" if left is not None else ", ETA after the first epochs")
        ]
        for t in running:
            where = board.get(t.trial_id)
            if where:
                speed = f", {where['tokens_per_s']:,.0f} tok/s" if where["tokens_per_s"] else ""
                lines.append(
                    f"    {self.name_of(t)}: epoch {where['epoch']}/{where['epochs']}, "
                    f"{100 * where['step'] / max(where['steps'], 1):.0f}% of it "
                    f"({where['step']}/{where['steps']} steps){speed}"
                )
            else:
                lines.append(f"    {self.name_of(t)}: starting")
        return lines

    def eta(self, pending: int, running, fractions: dict[str, float | None]) -> float | None:
        """Remaining wall time: trials still to run times the mean trial duration, over the trials run at once."""
        now = time.time()
        estimates = list(self.durations)
        for t in running:  # a running trial's expected duration from how far it is
            share = fractions.get(t.trial_id)
            if share and t.trial_id in self.began:
                estimates.append((now - self.began[t.trial_id]) / share)
        if not estimates:
            return None
        per_trial = sum(estimates) / len(estimates)
        at_once = max(len(running), 1)
        remaining_running = sum(per_trial * (1 - (fractions.get(t.trial_id) or 0)) for t in running)
        return (remaining_running + pending * per_trial) / at_once


class Heartbeat:
    """status.json every STATUS_EVERY_S in the sweep's folder, and `sweeper stop`'s request read as often: the
    driver then stops as on Ctrl+C (Ray Tune's handler of SIGUSR1, installed when Tune runs in the main thread)."""

    def __init__(self, experiment_uri: str):
        self.uri = experiment_uri  # the sweep's folder in storage ("": a sweep without one, as in tests)
        self.last = 0.0
        self.stopping: dict[str, Any] | None = None  # the request being carried out
        self.failed = False  # a storage error was reported once
        self._storage = None
        self._thread: threading.Thread | None = None

    def due(self) -> bool:
        from sweeper.running.sweeps import STATUS_EVERY_S

        return bool(self.uri) and time.time() - self.last >= STATUS_EVERY_S

    def busy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, report: Callable[[], None]) -> None:
        """Run one report (the board, status.json) on its own thread: one at a time, the next when it is done."""
        self._thread = threading.Thread(target=report, name="sweeper-heartbeat", daemon=True)
        self._thread.start()

    def send(self, status: dict[str, Any]) -> None:
        from sweeper.running.sweeps import STOPPING, stop_request, write_status
        from sweeper.storage.store import open_storage

        self.last = time.time()
        try:
            self._storage = self._storage or open_storage(self.uri, "--storage")
            if self.stopping is None and (request := stop_request(self._storage)):
                self.stop(request)
            write_status(self._storage, {**status, "state": STOPPING} if self.stopping else status)
        except Exception as err:  # noqa: BLE001 - a heartbeat lost is a convenience lost, never the sweep
            if not self.failed:
                self.failed = True
                print(f"note: the sweep's status.json was not written ({type(err).__name__}: {err})", file=console())

    def stop(self, request: dict[str, Any]) -> None:
        """Carry out `sweeper stop`: Ray Tune saves the experiment and ends; running trials keep their last
        epoch's checkpoint."""
        self.stopping = request
        if not callable(signal.getsignal(signal.SIGUSR1)):  # Tune runs outside the main thread: no handler
            print("sweeper stop: this driver runs Ray Tune outside its main thread; stop it there", file=console())
            return
        print(f"[{datetime.now():%H:%M:%S}] stopping: asked by {request['by']} at {request['at']}", file=console())
        os.kill(os.getpid(), signal.SIGUSR1)


def fraction(where: dict[str, Any] | None) -> float | None:
    """How much of its training a trial has done (0..1), from its epoch and step."""
    if not where or not where["epochs"]:
        return None
    return min(((where["epoch"] - 1) + where["step"] / max(where["steps"], 1)) / where["epochs"], 1.0)


def trial_failure_cause(trial) -> str:
    """The exception line of a Tune trial's error file (its error.txt); "" where it has none."""
    try:
        return failure_cause(Path(trial.error_file).read_text(encoding="utf-8"))
    except (OSError, TypeError):  # no error file (error_file is None before a first failure)
        return ""


def failure_cause(text: str) -> str:
    """The exception line of a trial's error text (Ray's first lines only name the actor)."""
    lines = [ANSI.sub("", line).strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""
