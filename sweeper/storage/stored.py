"""Stored state read back: a sweep's `sweeper.json`, held on read to the bounds its values had on input, and
returned typed (`SweepState`): the driver, resume, promote, list and the API read attributes, never raw keys.

`run_sweep` writes the file, `resume` and a sweep's end rewrite it (`SweepState.written`); `resume`, `summarize`,
`promote`, `list` and the API read it. Storage is shared and outlives versions, so what is read is checked as if a
user had typed it (nmt_core/gates/gate.py's rules): a regular file below the storage root and no link, at most
STATE_LIMIT bytes before it is read, JSON nested at most MAX_DEPTH levels, and every key of the type and range it had
when the sweep was checked (the name's rule, a tracking URI without credentials, the trial config's bounds, resources,
the objective, the plan's size). Damage is one line naming the file and the key.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nmt_core.config import MAX_SEED, ConfigError, build_config
from nmt_core.gates.credentials import check_uri
from nmt_core.gates.gate import ErrorType, check_tree, shown
from nmt_core.gates.settings import accept
from sweeper.space.spec import (
    MAX_TRIALS,
    MODELS_BEFORE_POLICY,
    PBT_MUTABLE,
    SPEC_SETTINGS,
    SignificanceSpec,
    SpecError,
    check_name,
    check_webhook,
    read_section,
)
from sweeper.storage.store import Storage

STATE_FILE = "sweeper.json"  # what `sweeper resume` needs that Tune does not keep
STATE_LIMIT = 1_000_000  # bytes: a sweep's state is a few KB; more is damage, not read into memory
LINK_KEY = (
    "mlflow_link"  # the link to the sweep's trials in MLflow's UI `sweeper run` printed (sweeper.tracking.mlflow_view)
)
STATE_KEYS = ("name", "tracking_uri", "parent_run_id", "base", "cpu", "gpu", "metric", "mode", "trials")
RUN_ID_CHARS = 64
RESTORED = "restored"  # a sweep rebuilt from its data (sweeper.running.restore): the run it came from, its trials


def damaged(experiment: Storage, file: str, why: str) -> SpecError:
    """One line for a state file in storage that cannot be read: nothing else is read or written."""
    return SpecError(
        "(file)",
        f"the sweep's storage is damaged: {why}; restore the file from a copy, or run the "
        "sweep again under another --name",
        experiment.display(file),
    )


def damage_error(experiment: Storage, file: str) -> ErrorType:
    """The gate's `error` for a file of the sweep's folder: whatever it refuses is damage to that file."""

    def error(key: str, message: str, source: str) -> SpecError:
        return damaged(experiment, file, message if key == "(file)" else f"{key}: {message}")

    return error


@dataclass(frozen=True)
class SweepState:
    """sweeper.json, typed: what `sweeper resume` needs that Tune does not keep (how every trial runs, the tracking
    store and parent run, the objective, the plan's size, the policies), and who started the sweep, how. Keys a
    sweep stored before they were kept read as what it ran with (`later_keys`)."""

    name: str
    tracking_uri: str
    parent_run_id: str
    base: dict[str, Any]  # the trial config every trial starts from (checked by nmt_core.config)
    cpu: float
    gpu: float
    metric: str
    mode: str
    trials: int
    mutable: tuple[str, ...]
    system_metrics: bool
    plots: str
    models: str
    significance: SignificanceSpec
    study: dict[str, str] | None  # an Optuna study's name and (redacted) storage
    job: (
        dict[str, Any] | None
    )  # the Ray job a submitted sweep's driver ran as (its keys: sweeper.running.sweeps.check_job)
    started_by: str | None
    started_at: float | None
    record: dict[str, Any]  # the file as written, rewritten whole with a key changed (`written`)
    budget: float | None = None  # resources.budget: hours of budget_unit (sweeper.running.compute); None: no limit
    budget_unit: str = "device_hours"
    webhook: str | None = None  # tracking.webhook (no credential in it); $SWEEPER_WEBHOOK_URL is never stored

    def written(self, **changes: Any) -> str:
        """The file's text with keys changed (a resumed sweep's job, the storage it takes at the end); keys an older
        sweep did not store are written as it ran, so a later change of the space's defaults cannot alter it."""
        return json.dumps({**later_keys(), **self.record, **changes}, indent=2)

    def with_record(self, where: str, **changes: Any) -> SweepState:
        """The state as it reads once `changes` are written."""
        return state_from({**self.record, **changes}, where)


def state_from(record: dict[str, Any], where: str) -> SweepState:
    """A state record (as `run_sweep` builds it, or as read and checked) typed; missing later keys as older sweeps
    ran; the significance section read by the space's own reader."""
    full = {**later_keys(), **record}
    return SweepState(
        name=full["name"],
        tracking_uri=full["tracking_uri"],
        parent_run_id=full["parent_run_id"],
        base=full["base"],
        cpu=float(full["cpu"]),
        gpu=float(full["gpu"]),
        metric=full["metric"],
        mode=full["mode"],
        trials=full["trials"],
        mutable=tuple(full["mutable"]),
        system_metrics=full["system_metrics"],
        plots=full["plots"],
        models=full["models"],
        significance=read_section("significance", full.get("significance"), where),  # None: the defaults
        study=full["study"],
        job=full.get("job"),
        started_by=full.get("started_by"),
        started_at=full.get("started_at"),
        record=record,
        budget=full["budget"],
        budget_unit=full["budget_unit"],
        webhook=full["webhook"],
    )


def read_state(experiment: Storage) -> SweepState:
    """sweeper.json as `run_sweep` wrote it, every key re-checked; anything else is damage (one line, exit 2)."""
    where = experiment.display(STATE_FILE)
    error = damage_error(experiment, STATE_FILE)
    # too large, a link, a FIFO, not JSON, NaN, a 400-digit number, a lone surrogate: damage (nmt_core.gates.decoders)
    state = experiment.read_json(STATE_FILE, limit=STATE_LIMIT, error=error)
    check_tree(state, where, error, STATE_LIMIT)
    missing = [key for key in STATE_KEYS if key not in state] if isinstance(state, dict) else ["(a mapping)"]
    if missing:
        raise damaged(experiment, STATE_FILE, "no " + ", ".join(missing))
    check_name(state["name"], "name", where)  # resume writes below storage by this name
    check_uri(state["tracking_uri"], "tracking", "tracking_uri", where)
    for key, dotted in DECLARED.items():
        if key in state:
            state[key] = accept(key, state[key], SPEC_SETTINGS[dotted], where, error)
    for key, check in CHECKS.items():
        if key in state and (why := check(state[key])):
            raise damaged(experiment, STATE_FILE, f"{key}: {why} (got {shown(state[key])})")
    if state.get("webhook") is not None:  # stored as the space's check let it through: no credential, http(s)
        try:
            check_webhook(state["webhook"], "webhook", where)
        except ConfigError as err:
            raise damaged(experiment, STATE_FILE, f"webhook: {err.message}") from None
    build_config(state["base"], source=f"{where}: base")  # the trial config every resumed trial starts from
    try:
        return state_from(state, where)
    except SpecError as err:  # the significance section, read by the space's own reader
        raise damaged(experiment, STATE_FILE, f"{err.key}: {err.message}") from None


def later_keys() -> dict[str, Any]:
    """What a sweep stored before these keys were kept ran with: the space's defaults (sweeper.space.spec's
    sections)."""
    return {
        "mutable": list(SPEC_SETTINGS["scheduler.mutations"].default),
        "system_metrics": SPEC_SETTINGS["tracking.system_metrics"].default,
        "plots": SPEC_SETTINGS["tracking.plots"].default,
        "models": MODELS_BEFORE_POLICY,  # not the space's default
        "study": None,
        "budget": SPEC_SETTINGS["resources.budget"].default,
        "budget_unit": SPEC_SETTINGS["resources.budget_unit"].default,
        "webhook": None,
    }


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _run_id(value: Any) -> str | None:
    usable = isinstance(value, str) and 0 < len(value) <= RUN_ID_CHARS and value.isascii()
    return None if usable and value.replace("-", "").isalnum() else "must be an MLflow run id (letters and digits)"


def _trials(value: Any) -> str | None:
    usable = isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_TRIALS
    return None if usable else f"must be a number of trials in [1, {MAX_TRIALS:,}]"


SPACE_CHARS = 200_000  # a designed sweep's space as it ran, for `sweeper extend`: a few KB
DIGEST = re.compile(r"[0-9a-f]{16}")
LOOK_FOLDER = re.compile(r"look-[0-9]{1,4}")  # a look's Tune experiment below the sweep's folder


def _count(value: Any, most: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= most


def _look(value: Any) -> bool:
    """A designed sweep's look as `sweeper extend` records it: its number, folder, trials, rows and seeds."""
    if not isinstance(value, dict) or not isinstance(value.get("folder"), str):
        return False
    seeds = value.get("seeds")
    return (
        bool(LOOK_FOLDER.fullmatch(value["folder"]))
        and all(_count(value.get(key), MAX_TRIALS) for key in ("look", "trials"))
        and isinstance(seeds, list)
        and all(_count(seed, MAX_SEED) for seed in seeds)
        and isinstance(value.get("done"), bool)
        and isinstance(value.get("rows"), list)
        and all(isinstance(row, str) for row in value["rows"])
    )


def _study(value: Any) -> str | None:
    named = isinstance(value, dict) and all(isinstance(value.get(key), str) for key in ("name", "storage"))
    return None if value is None or named else "must be null or a mapping with the study's name and storage"


# the state's keys a sweep section declares, read back as that setting is read from a sweep YAML
# (nmt_core.gates.settings)
DECLARED = {
    "cpu": "resources.cpu",
    "gpu": "resources.gpu",
    "metric": "objective.metric",
    "mode": "objective.mode",
    "system_metrics": "tracking.system_metrics",
    "plots": "tracking.plots",
    "models": "tracking.models",
    "budget": "resources.budget",
    "budget_unit": "resources.budget_unit",
    "webhook": "tracking.webhook",
}
# the others: what no sweep YAML sets
CHECKS: dict[str, Callable[[Any], str | None]] = {
    "parent_run_id": _run_id,
    LINK_KEY: lambda value: None if isinstance(value, str) and value.isprintable() else "must be a line of text",
    "base": lambda value: None if isinstance(value, dict) else "must be a mapping (the trial config)",
    "trials": _trials,
    "mutable": lambda value: (
        None
        if isinstance(value, list) and all(key in PBT_MUTABLE for key in value)
        else "must be a list of " + ", ".join(PBT_MUTABLE)
    ),
    "study": _study,
    "job": lambda value: None if value is None or isinstance(value, dict) else "must be null or a Ray job's record",
    "started_by": lambda value: None if value is None or isinstance(value, str) else "must be a user name",
    "started_at": lambda value: None if value is None or (_finite(value) and value >= 0) else "must be seconds",
    "space": lambda value: None if isinstance(value, str) and len(value) <= SPACE_CHARS else "must be a space's YAML",
    "design_digest": lambda value: None if isinstance(value, str) and DIGEST.fullmatch(value) else "must be a digest",
    "looks": lambda value: None if isinstance(value, list) and all(map(_look, value)) else "must be a list of looks",
    RESTORED: lambda value: (
        None
        if isinstance(value, dict)
        and _run_id(value.get("parent_run_id")) is None
        and _count(value.get("trials"), MAX_TRIALS)
        else "must be the run a restored sweep came from and its number of trials"
    ),
}
