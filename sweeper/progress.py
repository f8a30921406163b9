"""Live sweep progress on the driver's console: trials done, running and pending, each running trial's
epoch and its progress within the epoch, and an ETA for the sweep, at least every 30 s.

Trials report their step to a small Ray actor (the board, found by the sweep's name, so that it works
on any node and after `sweeper resume`); a Tune callback on the driver reads it and prints. Tune's
result reports stay once per epoch: schedulers and searchers see no extra results.
"""

from __future__ import annotations

import os
import posixpath
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import ray
from ray.tune import Callback

from nmt_core.progress import eta
from sweeper.console import ANSI, console
from sweeper.space import ObjectiveSpec

PRINT_EVERY_S = float(os.environ.get("SWEEPER_PROGRESS_EVERY_S", 30))
SEND_EVERY_S = 5.0  # a trial's updates to the board, at most


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
    (a failure with its cause and where its traceback is: `logs` is the sweep's folder in storage)."""

    metric, logs = ObjectiveSpec.metric, ""  # for a callback restored from a sweep started before they existed

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

    def __getstate__(self) -> dict[str, Any]:  # kept in Tune's experiment state for `sweeper resume`
        return {**self.__dict__, "began": {}, "last_print": 0.0}

    def on_trial_start(self, iteration, trials, trial, **info):
        self.began.setdefault(trial.trial_id, time.time())

    def on_trial_complete(self, iteration, trials, trial, **info):
        from sweeper.metrics import FINAL  # reads nmt_core (torch): the driver has it, the board's importers need not

        result = trial.last_result or {}
        value = result.get(self.metric)
        score = f"{self.metric} {value:.2f}" if isinstance(value, (int, float)) else f"no {self.metric}"
        how = "finished" if result.get(FINAL) else f"stopped early after epoch {result.get('epoch', '?')}"
        self._ended(trial, f"{how} in {eta(self._took(trial))}: {score}")

    def on_trial_recover(self, iteration, trials, trial, **info):
        self._say(trial, f"failed, retried from its last checkpoint: {self._failure(trial)}")

    def on_trial_error(self, iteration, trials, trial, **info):
        self._ended(trial, f"FAILED after {eta(self._took(trial))}: {self._failure(trial)}")

    def _took(self, trial) -> float:
        return time.time() - self.began.get(trial.trial_id, time.time())

    def _failure(self, trial) -> str:
        """The exception's line, and where its whole traceback is (Tune's error.txt in the trial's folder)."""
        try:
            cause = failure_cause(Path(trial.error_file).read_text(encoding="utf-8")) or "unknown error"
        except (OSError, TypeError):  # no error file
            cause = "unknown error"
        folder = posixpath.join(self.logs, posixpath.basename(trial.path)) if self.logs else trial.path
        return f"{cause}; traceback: {folder}/error.txt"

    def _ended(self, trial, how: str) -> None:
        if trial.trial_id in self.began:
            self.durations.append(time.time() - self.began.pop(trial.trial_id))
        self._say(trial, how)

    def _say(self, trial, what: str) -> None:
        print(f"[{datetime.now():%H:%M:%S}] trial {self.name_of(trial)} {what}", file=console(), flush=True)

    def on_step_end(self, iteration, trials, **info):
        if time.time() - self.last_print < PRINT_EVERY_S:
            return
        self.last_print = time.time()
        try:
            board = ray.get(ray.get_actor(board_name(self.sweep)).snapshot.remote(), timeout=5)
        except Exception:  # noqa: BLE001 - progress is a convenience: no board, no per-epoch detail
            board = {}
        print("\n".join(self.lines(trials, board)), file=console(), flush=True)

    def lines(self, trials, board: dict[str, dict[str, Any]]) -> list[str]:
        status = [t.status for t in trials]
        done = sum(s == "TERMINATED" for s in status)
        failed = sum(s == "ERROR" for s in status)
        running = [t for t in trials if t.status == "RUNNING"]
        pending = max(self.planned - done - failed - len(running), 0)
        fractions = {t.trial_id: fraction(board.get(t.trial_id)) for t in running}
        left = self.eta(pending, running, fractions)
        lines = [
            f"[{datetime.now():%H:%M:%S}] sweep {self.sweep}: {done} done, {failed} failed, {len(running)} running, "
            f"{pending} pending; elapsed {eta(time.time() - self.started)}"
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


def fraction(where: dict[str, Any] | None) -> float | None:
    """How much of its training a trial has done (0..1), from its epoch and step."""
    if not where or not where["epochs"]:
        return None
    return min(((where["epoch"] - 1) + where["step"] / max(where["steps"], 1)) / where["epochs"], 1.0)


def failure_cause(text: str) -> str:
    """The exception line of a trial's error text (Ray's first lines only name the actor)."""
    lines = [ANSI.sub("", line).strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""
