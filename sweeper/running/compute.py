"""What a sweep's answers cost, and a budget that stops it (issue 73 item 3).

A trial's device-seconds are its wall time (training, dev and test decoding, summed over its restores) times the
share of a device it holds: its GPUs where `resources.gpu` > 0 (0.25 for a packed trial), else its CPU cores
(`resources.cpu`). Each trial reports its spending so far with every epoch (`device_s_so_far`) and its total at the
end (`device_s`, `wall_s`); the driver adds them up over Tune's trials, with a running trial's time since its last
report, to the sweep's spending.

`resources.budget` (hours of `resources.budget_unit`: device-hours, or the sweep's wall hours across its runs) stops
the sweep once spent, as `sweeper stop` does (a stop request in its storage, which the driver's heartbeat carries out
through Ray Tune's graceful interrupt): running trials keep their last epoch's checkpoint, the searcher its state,
and `sweeper resume NAME --budget H` continues with a larger budget. Not a Ray Tune Stopper: a Stopper's `stop_all`
ends every running trial as TERMINATED and marks the searcher finished, which leaves a resume nothing to continue.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ray.tune import Callback

from nmt_core.gates.gate import seconds_from
from sweeper.running.console import console
from sweeper.space.spec import BUDGET_UNITS
from sweeper.tracking.metrics import EPOCH_ENDED, FINAL

DEVICE_SO_FAR, DEVICE_TOTAL, WALL_TOTAL = "device_s_so_far", "device_s", "wall_s"  # a trial's report keys
DEVICE_HOURS, WALL_HOURS = BUDGET_UNITS  # resources.budget_unit
BUDGET_BY = "resources.budget"  # who asks to stop, in the stop request and status.json
CHECK_EVERY_S = seconds_from("SWEEPER_COMPUTE_EVERY_S", 5.0)  # how often the driver adds up the trials' spending


def device_share(cpu: float, gpu: float) -> float:
    """The device share a trial holds: its GPUs where it has any, else its CPU cores."""
    return gpu if gpu > 0 else cpu


def device_unit(gpu: float) -> str:
    """What a device-hour is in this sweep: a GPU-hour, or a CPU-core-hour."""
    return "GPU" if gpu > 0 else "CPU core"


@dataclass
class TrialClock:
    """A trial's wall time across its restores: what its checkpoint carried (`before`) plus this process's."""

    before: float = 0.0
    started: float = field(default_factory=time.perf_counter)  # time.perf_counter() when this process's part began

    def wall_s(self) -> float:
        return self.before + time.perf_counter() - self.started


def trial_spent(result: dict[str, Any] | None, share: float, running: bool, now: float, since: float) -> float:
    """One trial's device-seconds from its last result: the total of a final one, else its spending at its last
    epoch plus, while it runs, the time since that epoch ended (not before `since`, this driver's start: a resumed
    trial's idle time between runs costs nothing)."""
    result = result or {}
    if result.get(FINAL):
        return float(result.get(DEVICE_TOTAL, 0.0))
    spent = float(result.get(DEVICE_SO_FAR, 0.0))
    if running:
        try:
            ended = float(result.get(EPOCH_ENDED, since))
        except (TypeError, ValueError):
            ended = since
        spent += max(0.0, now - max(ended, since)) * share
    return spent


@dataclass
class Spending:
    """A sweep's spending at one moment, and its budget."""

    device_s: float
    wall_s: float
    budget: float | None  # hours of `unit`; None: no budget
    unit: str
    device: str  # GPU or CPU core

    @property
    def spent_hours(self) -> float:
        return (self.device_s if self.unit == DEVICE_HOURS else self.wall_s) / 3600

    @property
    def left_hours(self) -> float | None:
        return None if self.budget is None else max(0.0, self.budget - self.spent_hours)

    @property
    def over(self) -> bool:
        return self.budget is not None and self.spent_hours >= self.budget

    def record(self) -> dict[str, Any]:
        """status.json's `compute`: what `sweeper status` shows."""
        return {
            "device_hours": self.device_s / 3600,
            "wall_hours": self.wall_s / 3600,
            "device": self.device,
            "budget": self.budget,
            "unit": self.unit,
            "left": self.left_hours,
        }


class ComputeWatch(Callback):
    """The driver's accountant: adds up the trials' device-seconds and the sweep's wall time (kept across resumes in
    Tune's experiment state), hands status.json its `compute` record, and asks the sweep to stop when its budget is
    spent (the stop request `sweeper stop` writes, carried out by the heartbeat within seconds)."""

    def __init__(self, sweep: str, experiment_uri: str, cpu: float, gpu: float, budget: float | None, unit: str):
        self.sweep, self.experiment_uri = sweep, experiment_uri
        self.share, self.device = device_share(cpu, gpu), device_unit(gpu)
        self.budget, self.unit = budget, unit
        self.earlier_wall_s = 0.0  # the sweep's wall time in the runs before this one
        self.spent: dict[str, float] = {}  # trial id -> the most device-seconds seen of it (an epoch cut short too)
        self.started = time.time()
        self.began: dict[str, float] = {}  # trial id -> when this driver saw it start
        self.last_check, self.latest, self.asked = 0.0, None, False

    def __getstate__(self) -> dict[str, Any]:  # pickled with the Tuner: this run's clock is not the next run's
        return {**self.__dict__, "latest": None, "asked": False, "last_check": 0.0, "began": {}}

    def get_state(self) -> dict[str, Any]:
        return {"wall_s": self.wall_s(), "spent": dict(self.spent)}

    def set_state(self, state: dict[str, Any]) -> None:
        self.earlier_wall_s, self.started = float(state.get("wall_s", 0.0)), time.time()
        self.spent = {str(k): float(v) for k, v in state.get("spent", {}).items()}

    def wall_s(self) -> float:
        return self.earlier_wall_s + time.time() - self.started

    def on_trial_start(self, iteration: int, trials, trial, **info) -> None:
        self.began[trial.trial_id] = time.time()

    def on_trial_restore(self, iteration: int, trials, trial, **info) -> None:
        self.began[trial.trial_id] = time.time()

    def spending(self, trials) -> Spending:
        """The sweep's spending now: each trial's most device-seconds seen (what it reported, or more while an epoch
        runs: time an epoch cut short by a stop took is spent all the same), and the wall time across runs."""
        now = time.time()
        for t in trials:
            since = self.began.get(t.trial_id, now)
            seen = trial_spent(t.last_result, self.share, t.status == "RUNNING", now, since)
            self.spent[t.trial_id] = max(self.spent.get(t.trial_id, 0.0), seen)
        return Spending(sum(self.spent.values()), self.wall_s(), self.budget, self.unit, self.device)

    def total(self, reported: dict[str, float]) -> float:
        """The sweep's device-seconds at its end: each trial's reported total (results.parquet's `device_s`) or what
        this accountant saw it spend, whichever is more."""
        every = {**self.spent, **{k: max(v, self.spent.get(k, 0.0)) for k, v in reported.items()}}
        return sum(every.values())

    def on_step_begin(self, iteration: int, trials, **info) -> None:
        if time.time() - self.last_check < CHECK_EVERY_S:
            return
        self.last_check = time.time()
        self.latest = self.spending(trials)
        if self.latest.over and not self.asked:
            self.asked = True
            self.stop(self.latest)

    def stop(self, spent: Spending) -> None:
        """Ask the sweep to stop as `sweeper stop` does, and say why and how to go on."""
        from sweeper.running.sweeps import request_stop
        from sweeper.storage.store import open_storage

        unit = "device-hours" if spent.unit == DEVICE_HOURS else "wall hours"
        print(
            f"[{datetime.now():%H:%M:%S}] {BUDGET_BY} spent: {spent.spent_hours:.3g} of {spent.budget:g} {unit}; "
            f"stopping as `sweeper stop` does (resumable: `sweeper resume {self.sweep} --budget H`)",
            file=console(),
            flush=True,
        )
        try:
            request_stop(open_storage(self.experiment_uri, "--storage"), f"{BUDGET_BY} ({spent.budget:g} {unit})")
        except Exception as err:  # noqa: BLE001 - the budget is a convenience: the sweep goes on, and says so
            print(f"note: the budget's stop request was not written ({type(err).__name__}: {err})", file=console())
