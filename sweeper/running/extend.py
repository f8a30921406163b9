"""`sweeper extend NAME`: a designed sweep's next look (#69). The design frozen when the sweep started is read at the
look its seeds have reached (sweeper.summary.sequential); every row still in an undecided primary comparison gets
the next block of seeds, the same seeds for every such row, as trials of the same sweep: the same storage folder,
MLflow experiment and parent run. `--until-decided` goes on look by look until every primary comparison is decided
or the design's maximum is reached.

Each look is a Tune experiment of its own below the sweep's folder (`look-2`, ...): Tune cannot add trials to a
finished experiment. sweeper.json records a look before its trials start, so an interrupted look is finished by
`sweeper extend` or `sweeper resume` (runner.pending_look) with nothing lost or run twice, and results.parquet holds
every look's trials.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mlflow.tracking import MlflowClient
from ray import tune

import sweeper.storage.conditional_writes as conditional_writes
from sweeper.running.compute import ComputeWatch
from sweeper.running.driver_lock import sweep_lock
from sweeper.running.progress import SweepProgress, open_board
from sweeper.running.runner import (
    build_tune_config,
    drive_resume,
    finish,
    fit,
    mark_look_done,
    new_tuner,
    open_resume,
    pending_look,
    planned_shared_words,
    start_ray,
    tracking_callback,
)
from sweeper.running.sweeps import ended_trials, result_statuses
from sweeper.space.spec import SpecError, SweepSpec, TrialPlan, parse_spec
from sweeper.storage.store import Storage
from sweeper.storage.stored import STATE_FILE, SweepState, read_state
from sweeper.summary.records import read_artifacts, read_trials
from sweeper.summary.report import compute, significance_of
from sweeper.summary.sequential import PrimaryReading, design_lines, undecided_rows
from sweeper.tracking.runs import SweepTracker


def extend_sweep(
    name: str, storage_uri: str, address: str | None, tracking_uri: str | None, until_decided: bool
) -> int:
    """The sweep's next look (or, `until_decided`, every look to a decision); checked as `resume` is before
    anything is written, its driver's lock held throughout."""
    storage, state, uri, _ = open_resume(name, storage_uri, tracking_uri, "sweeper extend")
    experiment = storage.below(name)
    spec = designed_space(state, experiment)
    with sweep_lock(experiment, name, "sweeper extend"):
        while True:
            if pending_look(state):  # a look that was interrupted: finished first, nothing run twice
                code, ran = drive_resume(name, storage, state, uri, None, address), True
            else:
                code, ran = next_look(spec, storage, state, uri, address)
            state = read_state(experiment)
            if code != 0 or not ran or not until_decided:
                return code


def designed_space(state: SweepState, experiment: Storage) -> SweepSpec:
    """The space the sweep ran with, checked again; a sweep without a design is refused in one line."""
    text = state.record.get("space")
    if not text:
        raise SpecError(
            "NAME",
            f"sweep {state.name!r} has no design: `sweeper extend` adds seeds by look only to a sweep whose space "
            "declares one (docs/sweeps.md#designed-studies)",
            "sweeper extend",
        )
    return parse_spec(text, experiment.display(STATE_FILE) + ": space")


def read_verdicts(spec: SweepSpec, uri: str, state: SweepState) -> tuple[list[PrimaryReading], Any]:
    """The primary comparisons read from MLflow at the looks the sweep has reached, and the rows they read."""
    client = MlflowClient(uri)
    with tempfile.TemporaryDirectory() as folder:
        snapshot = read_trials(client, spec.name, state.parent_run_id, Path(folder))
        snapshot = read_artifacts(client, snapshot, Path(folder) / "trials")
    summary = compute(snapshot, significance_of(snapshot, None))
    if summary.design_changed:
        raise SpecError("NAME", design_lines([], changed=True)[0].replace("**", ""), "sweeper extend")
    return summary.design, summary.rows


def next_look(spec: SweepSpec, storage: Storage, state: SweepState, uri: str, address: str | None) -> tuple[int, bool]:
    """Read the design; if a comparison is undecided below the maximum, record the next look and run it. The exit
    code, and whether a look ran (none: every comparison decided, or the maximum reached; not a failure)."""
    readings, rows = read_verdicts(spec, uri, state)
    print("\n".join(["design, read at its looks:", *design_lines(readings, changed=False)]), flush=True)
    undecided = [row for row in rows if id(row) in undecided_rows(readings)]
    if not undecided:
        print("every primary comparison is decided: nothing to extend", flush=True)
        return 0, False
    reached = max(row.seeds for row in undecided)
    if reached >= spec.design.max_seeds:
        print(f"the design's maximum ({spec.design.max_seeds} seeds a row) is reached: nothing to extend", flush=True)
        return 0, False
    target = (reached // spec.design.seeds_per_look + 1) * spec.design.seeds_per_look
    plans = look_plans(spec, {row.records[0].variant: row.seeds for row in undecided}, target)
    return run_look(spec, storage, state, uri, address, plans, target // spec.design.seeds_per_look), True


def look_plans(spec: SweepSpec, seeds_of: dict[str, int], target: int) -> list[TrialPlan]:
    """Each undecided row's trials from its next seed to `target` seeds a row (seeds in order from the base's)."""
    first = spec.base_config.train.seed
    params = {plan.variant: plan.params for plan in spec.plan}
    return [
        TrialPlan(params[variant], first + n, variant)
        for variant, have in seeds_of.items()
        for n in range(have, target)
    ]


def run_look(
    spec: SweepSpec, storage: Storage, state: SweepState, uri: str, address: str | None, plans: list, look: int
) -> int:
    """The look recorded in sweeper.json first (what `resume` finds), then its trials as a Tune experiment of its
    own below the sweep's folder, tracked under the sweep's parent run."""
    experiment, folder = storage.below(spec.name), f"look-{look}"
    seeds = sorted({plan.seed for plan in plans})
    entry = {"look": look, "folder": folder, "trials": len(plans), "seeds": seeds, "done": False}
    entry["rows"] = sorted({plan.variant for plan in plans})
    record = {**state.record, "looks": [*state.record.get("looks", []), entry], "trials": state.trials + len(plans)}
    conditional_writes.write_record(experiment, json.dumps(record, indent=2), STATE_FILE)
    state = read_state(experiment)
    print(
        f"sweep {spec.name}, look {look}: {len(plans)} trials, seeds {seeds[0]}-{seeds[-1]} for "
        + ", ".join(entry["rows"]),
        flush=True,
    )
    start_ray(spec, address, state.base)
    tune_config, _ = build_tune_config(spec, state.base)
    space = {"trial": tune.grid_search([asdict(plan) for plan in plans])}
    shared = planned_shared_words(spec)
    callback = tracking_callback(spec, uri, state.parent_run_id, state.base, experiment.uri, None, shared)
    board = open_board(spec.name)  # noqa: F841 - held while the look runs
    progress = SweepProgress(spec.name, len(plans), callback.naming, spec.metric, experiment.uri)
    progress.earlier = ended_trials(result_statuses(experiment) or [])  # kept in Tune's state for a resume
    accountant = ComputeWatch(spec.name, experiment.uri, spec.cpu, spec.gpu, state.budget, state.budget_unit)
    progress.watch(spec.mode, spec.cpu, spec.gpu, accountant)  # a budget counts this look's trials
    tuner = new_tuner(spec, state, (tune_config, space), (folder, experiment), [callback, progress, accountant])
    code = finish(fit(tuner), callback, storage, SweepTracker(uri, spec.name), state, accountant)
    return mark_look_done(experiment) if code == 0 else code
