"""Sweeps by name: which sweeps a storage (and a Ray cluster) holds, each one's state and live board, stopping one,
and its log, for sweeps run here and sweeps submitted as Ray Jobs alike.

A sweep's driver keeps, in the sweep's folder beside sweeper.json (which records who started the sweep, its driver
and, when it was submitted, its Ray job's id and dashboard):
- status.json: its state, trial counts, the best objective so far and the progress board's lines, rewritten every
  STATUS_EVERY_S while it runs and once at its end: `sweeper status` reads it from any machine that reads storage;
- stop.json: `sweeper stop`'s request to a driver started with `sweeper run`, read within STATUS_EVERY_S. A
  submitted sweep is stopped through Ray Jobs instead (`stop_job`: the job asked Ray for SIGINT). Both end in Ray
  Tune's own graceful stop: the experiment's state is saved, running trials keep the checkpoint of their last
  finished epoch, and `sweeper resume` continues them from it.
Ray Jobs' records complete these: a job's status (is its driver still there), its metadata (a sweep whose driver
has not started yet, or whose storage this machine cannot read) and its log.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import socket
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.fs as pafs

import sweeper.storage.conditional_writes as conditional_writes
from nmt_core.config import ConfigError
from nmt_core.gates.credentials import check_uri, redact
from nmt_core.gates.deadline import command_passed
from nmt_core.gates.gate import hide_secrets, one_line, seconds_from
from nmt_core.gates.yaml_input import shown
from sweeper.space.spec import BUDGET_UNITS, NAME_RULE, SpecError, check_name
from sweeper.storage.store import Storage, open_storage

T = TypeVar("T")
STATUS_FILE, STOP_FILE = "status.json", "stop.json"
LOCK_FILE = "driver.lock"  # held by the sweep's driver (sweeper/running/driver_lock.py)
STATUS_EVERY_S = seconds_from("SWEEPER_STATUS_EVERY_S", 10.0)  # the heartbeat; a stop request's delay
STALE_S = 300.0  # a live status this old, from a driver on another machine: that driver is gone or cut off
RECORD_LIMIT = 1_000_000  # bytes: a status or stop record is a few KB; more is damage
LOG_LIMIT = 10_000_000  # bytes of a log that `sweeper logs` reads: its end
BOARD_LINES = 60  # at most this many board lines are kept in a status
JOB_VARIABLE = "SWEEPER_JOB"  # the job record `sweeper submit` hands its driver (JSON: id, address, submitted_by)
JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")  # a Ray Jobs submission id
USER_CHARS = 100  # a user name as recorded and shown: printable, at most this many characters
LAST_SECOND = 253_402_300_800  # 10000-01-01: a stored time beyond it is damage

STARTING, RUNNING, WAITING, STOPPING = "starting", "running", "waiting for resources", "stopping"
FINISHING = "finishing"  # the trials are over; the driver records the results, models and summary
STOPPED, FINISHED, FAILED, UNKNOWN = "stopped", "finished", "failed", "unknown"
DAMAGED = "damaged"  # `sweeper list`'s word for a sweep whose records cannot be read (its detail says why)
LIVE = (STARTING, RUNNING, WAITING, STOPPING, FINISHING)  # a driver is (or should be) at work
STATES = (*LIVE, STOPPED, FINISHED, FAILED)
ENDED = {0: FINISHED, 1: FAILED, 3: FINISHED, 130: STOPPED}  # run_sweep's exit code -> the state it leaves
JOB_STATES = {"PENDING": STARTING, "RUNNING": RUNNING, "STOPPED": STOPPED, "SUCCEEDED": FINISHED, "FAILED": FAILED}


@dataclass
class SweepInfo:
    """One sweep as `sweeper list` and `sweeper status` show it (a row of `sweeper.list_sweeps()`)."""

    name: str
    state: str  # one of STATES, or UNKNOWN (a sweep that recorded no status: started by an older version)
    detail: str = ""  # why, where the state alone does not say
    trials: int | None = None  # planned
    done: int | None = None
    running: int | None = None
    failed: int | None = None
    pending: int | None = None
    metric: str | None = None
    best: float | None = None  # the best objective so far
    started_by: str | None = None
    started_at: str | None = None  # ISO 8601, UTC
    updated_at: str | None = None  # the driver's last word (status.json)
    job_id: str | None = None  # a submitted sweep's Ray job
    job_status: str | None = None  # as Ray Jobs reports it, where asked
    address: str | None = None  # the Ray dashboard it was submitted to
    storage: str | None = None
    tracking_uri: str | None = None
    mlflow_link: str | None = None  # the link that opens its trials in MLflow's UI (sweeper.tracking.mlflow_view)
    board: list[str] = field(default_factory=list)  # the progress board's lines at updated_at
    compute: dict[str, Any] | None = None  # what it spent and has left (sweeper.running.compute.Spending.record)

    def row(self) -> dict[str, Any]:
        """The columns of `sweeper list` (the board and compute are `sweeper status`'s)."""
        row = asdict(self)
        row.pop("board")
        row.pop("compute")
        return row


def printable(text: str) -> str:
    """A recorded line as shown: control characters escaped (a status is re-checked on read)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def iso(seconds: Any) -> str | None:
    """A time as ISO 8601 (UTC); None for what is no time (a year out of 1970-9999 included)."""
    if not is_time(seconds):
        return None
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")


def is_time(seconds: Any) -> bool:
    """Seconds since 1970 that a date can show (a stored 1e300 or -1 is damage, not a date)."""
    number = isinstance(seconds, (int, float)) and not isinstance(seconds, bool)
    return number and 0 <= seconds < LAST_SECOND


def stored_time(experiment: Storage, file: str, key: str, seconds: Any) -> float | None:
    """A time a record stored (null where it is not kept), checked on read: anything but a time is damage."""
    from sweeper.storage.stored import damaged

    if seconds is not None and not is_time(seconds):
        raise damaged(experiment, file, f"{key}: must be seconds since 1970 (got {shown(seconds)})")
    return seconds


def check_user(value: Any, key: str, source: str) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= USER_CHARS or not value.isprintable():
        raise SpecError(key, f"must be 1-100 printable characters (got {shown(value)})", source)
    return value


def whoami() -> str:
    """Who starts or stops a sweep from here: the MLflow user (what a lab's server knows people by), else the
    login name."""
    user = os.environ.get("MLFLOW_TRACKING_USERNAME")
    if not user:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):  # a container's user without a passwd entry
            user = "unknown"
    return check_user(user, "MLFLOW_TRACKING_USERNAME", "sweeper")


def check_job(job: Any, key: str, source: str) -> dict[str, Any]:
    """A job record (what `sweeper submit` hands its driver, and sweeper.json's copy of it), checked as any input."""
    if not isinstance(job, dict):
        raise SpecError(key, "must be the JSON object `sweeper submit` writes (id, address, submitted_by)", source)
    if not isinstance(job.get("id"), str) or not JOB_ID.fullmatch(job["id"]):
        raise SpecError(f"{key}.id", f"must be a Ray Jobs submission id (got {shown(job.get('id'))})", source)
    if not isinstance(job.get("address"), str) or not job["address"]:
        raise SpecError(
            f"{key}.address", f"must be the Ray dashboard's address (got {shown(job.get('address'))})", source
        )
    check_uri(job["address"], "ray", f"{key}.address", source)
    check_user(job.get("submitted_by"), f"{key}.submitted_by", source)
    if job.get("mlflow_user") is not None:
        check_user(job["mlflow_user"], f"{key}.mlflow_user", source)
    return {k: job.get(k) for k in ("id", "address", "submitted_by", "mlflow_user")}


def job_from_environment() -> dict[str, Any] | None:
    """The job record of a driver that `sweeper submit` started (None for `sweeper run` and `sweeper resume`)."""
    raw = os.environ.get(JOB_VARIABLE)
    if not raw:
        return None
    try:
        job = json.loads(raw[:RECORD_LIMIT])
    except json.JSONDecodeError:
        job = None
    return check_job(job, JOB_VARIABLE, "sweeper run")


def driver() -> dict[str, Any]:
    """This process as a sweep's driver: where it runs, its pid and when it started (a reused pid is another)."""
    import psutil

    return {"host": socket.gethostname()[:100], "pid": os.getpid(), "since": round(psutil.Process().create_time(), 2)}


def origin(job: dict[str, Any] | None) -> dict[str, Any]:
    """What sweeper.json records of who started the sweep and how: the submitter of a job, else this user."""
    return {"started_by": job["submitted_by"] if job else whoami(), "started_at": time.time(), "job": job}


def driver_alive(record: Any) -> bool | None:
    """Whether the driver a record names runs: None when it ran on another machine (this one cannot tell)."""
    import psutil

    if not isinstance(record, dict) or record.get("host") != socket.gethostname()[:100]:
        return None
    try:
        return abs(psutil.Process(int(record["pid"])).create_time() - float(record["since"])) < 1.0
    except (psutil.Error, KeyError, TypeError, ValueError):
        return False


def read_record(experiment: Storage, file: str) -> dict[str, Any] | None:
    """A small JSON record in the sweep's folder (status.json, stop.json), or None; one that cannot be read (a link
    out, a FIFO, too large, not JSON within nmt_core.gates.decoders' bounds) is damage, named in one line as
    sweeper.json's is."""
    from sweeper.storage.stored import damage_error, damaged

    if not experiment.exists(file):
        return None
    record = experiment.read_json(file, limit=RECORD_LIMIT, error=damage_error(experiment, file))
    if not isinstance(record, dict):
        raise damaged(experiment, file, "not a JSON object")
    return record


def settled(read: Callable[[], T], experiment: Storage, attempts: int = 3) -> T:
    """A record a driver rewrites while it is read: object storage's reader asks an object's size, then its bytes,
    and a rewrite between the two gives a torn read, which reads as damage. Damage stays; a torn read does not.
    A folder's record is replaced by a rename, whole, so damage read there is read once (not again 0.5 s and 1 s
    later). Past the command's deadline (nmt_core/gates/deadline.py) a read is not tried again: it would fail at
    once."""
    tries = 1 if experiment.is_local else attempts
    for attempt in range(tries):
        try:
            return read()
        except ConfigError:
            if attempt == tries - 1 or command_passed():
                raise
            time.sleep(0.5)
    raise AssertionError("unreachable")


def write_status(experiment: Storage, status: dict[str, Any]) -> None:
    """The driver's status.json, whole or not at all, stamped with the time and the driver."""
    stamped = {**status, "updated": round(time.time(), 3), "driver": driver()}
    conditional_writes.write_record(experiment, json.dumps(stamped), STATUS_FILE)


def read_status(experiment: Storage) -> dict[str, Any] | None:
    """status.json re-checked as any input: a state of STATES, counts, a number, printable board lines."""
    status = read_record(experiment, STATUS_FILE)
    if status is None:
        return None
    if status.get("state") not in STATES:
        from sweeper.storage.stored import damaged

        raise damaged(experiment, STATUS_FILE, f"state {shown(status.get('state'))} is none of {', '.join(STATES)}")

    def count(key: str) -> int | None:
        value = status.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

    best = status.get("best")
    board = status.get("board") if isinstance(status.get("board"), list) else []
    return {
        **{key: count(key) for key in ("trials", "done", "running", "failed", "pending")},
        "state": status["state"],
        "detail": printable(str(status.get("detail", "")))[:300],
        "best": float(best) if isinstance(best, (int, float)) and not isinstance(best, bool) else None,
        "updated": stored_time(experiment, STATUS_FILE, "updated", status.get("updated")),
        "driver": status.get("driver"),
        "board": [printable(str(line))[:300] for line in board[:BOARD_LINES]],
        "compute": compute_record(status.get("compute")),
    }


def is_hours(value: Any) -> bool:
    """A number of hours a sweep can have spent or have left (a stored 1e300, -1 or NaN is damage)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 1e9


def compute_record(record: Any) -> dict[str, Any] | None:
    """status.json's `compute` re-checked: finite hours at least 0 (budget and left may be null), a device and a unit
    of the declared words; anything else reads as not recorded."""
    if not isinstance(record, dict):
        return None
    hours = {key: record.get(key) for key in ("device_hours", "wall_hours", "budget", "left")}
    numbers = all(v is None or is_hours(v) for v in hours.values())
    if not numbers or hours["device_hours"] is None or hours["wall_hours"] is None:
        return None
    if record.get("device") not in ("GPU", "CPU core") or record.get("unit") not in BUDGET_UNITS:
        return None
    return {**hours, "device": record["device"], "unit": record["unit"]}


def request_stop(experiment: Storage, by: str, holder: dict[str, Any] | None = None) -> None:
    """stop.json, addressed to the driver that holds the sweep's lock (`holder`), else the one status.json names: a
    request whose write passed its deadline may land after that driver ended and a new one started (and cleared the
    requests before it), and must not stop it."""
    status = read_status(experiment)
    addressed = holder or (status["driver"] if status and well_formed_driver(status["driver"]) else None)
    conditional_writes.write_record(
        experiment, json.dumps({"by": by, "at": time.time(), "driver": addressed}), STOP_FILE
    )


def stop_request(experiment: Storage) -> dict[str, Any] | None:
    """`sweeper stop`'s request for this process's sweep, if one waits: who asked, and when. A request addressed to
    another driver (an earlier one of this sweep) is not this one's."""
    record = read_record(experiment, STOP_FILE)
    if record is None or record.get("driver") not in (None, driver()):
        return None
    return {"by": printable(str(record.get("by", "?")))[:100], "at": iso(record.get("at"))}


def well_formed_driver(record: Any) -> bool:
    """A driver's record as `driver()` writes it: a host, a pid and a start time."""
    return isinstance(record, dict) and set(record) == {"host", "pid", "since"}


def clear_stop(experiment: Storage) -> None:
    """A new driver (run, resume) starts without the request that stopped the last one; a request addressed to this
    driver (made after it took the lock: `sweeper stop` one second after `resume` began) is kept and obeyed."""
    try:
        record = read_record(experiment, STOP_FILE)
    except SpecError:  # damaged: not this driver's request
        record = None
    if record is not None and record.get("driver") == driver():
        return
    conditional_writes.delete_record(experiment, STOP_FILE)


def lock_holder(experiment: Storage) -> dict[str, Any] | None:
    """The driver that holds the sweep's lock (sweeper/running/driver_lock.py) and is alive: its process runs on this
    machine, or, on another, the lock or the status is fresher than STALE_S. None where no live driver holds it."""
    try:
        holder = read_record(experiment, LOCK_FILE)
    except SpecError:
        return None
    if holder is None or not well_formed_driver(holder):
        return None
    alive = driver_alive(holder)
    if alive is None:
        status = read_status(experiment)
        since = holder["since"] if isinstance(holder["since"], (int, float)) else 0
        alive = time.time() - max(since, (status or {}).get("updated") or 0) <= STALE_S
    return holder if alive else None


def from_storage(experiment: Storage, name: str) -> SweepInfo:
    """A sweep as its folder in storage tells it: sweeper.json, then status.json (or results.parquet, for a sweep
    that ended before status.json existed)."""
    from sweeper.storage.stored import LINK_KEY, STATE_FILE, read_state

    state = settled(lambda: read_state(experiment), experiment)
    job = check_job(state.job, "job", experiment.display(STATE_FILE)) if state.job else None
    by = state.started_by
    info = SweepInfo(
        name,
        UNKNOWN,
        trials=state.trials,
        metric=state.metric,
        started_by=check_user(by, "started_by", experiment.display(STATE_FILE)) if by is not None else None,
        started_at=iso(stored_time(experiment, STATE_FILE, "started_at", state.started_at)),
        job_id=job["id"] if job else None,
        address=redact(job["address"]) if job else None,
        storage=experiment.uri,
        tracking_uri=redact(state.tracking_uri),
        mlflow_link=state.record.get(LINK_KEY),  # checked by read_state; its password hidden when written
    )
    status = settled(lambda: read_status(experiment), experiment)
    if status is not None:
        info.state, info.detail, info.best, info.board = (
            status["state"],
            status["detail"],
            status["best"],
            status["board"],
        )
        info.updated_at = iso(status["updated"])
        info.compute = status["compute"]
        for key in ("done", "running", "failed", "pending"):
            setattr(info, key, status[key])
        if job is None and info.state in LIVE:
            info.state, info.detail = liveness(status, info)
    else:
        with_results(experiment, info)
    return info


def liveness(status: dict[str, Any], info: SweepInfo) -> tuple[str, str]:
    """A live status from a driver that is gone says nothing more: the sweep is stopped (resumable)."""
    resume = f"`sweeper resume {info.name}` continues it"
    where = status.get("driver") if isinstance(status.get("driver"), dict) else {}
    alive = driver_alive(where)
    if alive is False:
        return STOPPED, f"its driver (pid {shown(where.get('pid'))}) is gone; {resume}"
    age = time.time() - (status["updated"] or 0)
    if alive is None and age > STALE_S:
        host = printable(str(where.get("host", "?")))[:100]
        return STOPPED, f"no word from its driver on {host} for {age / 60:.0f} min: it is gone or cut off; {resume}"
    return status["state"], status["detail"]


def with_results(experiment: Storage, info: SweepInfo) -> None:
    """Counts and state from results.parquet (a sweep that ended before status.json existed)."""
    statuses = result_statuses(experiment)
    if statuses is None:
        info.detail = "no status recorded: started by an older version, or its driver never reached its trials"
        return
    info.done, info.failed = ended_trials(statuses)
    info.running, info.pending = 0, sum(s == "UNFINISHED" for s in statuses)
    info.state = STOPPED if info.pending else FINISHED if info.done else FAILED


def result_statuses(experiment: Storage) -> list[str] | None:
    """Each trial's status in results.parquet (TERMINATED, ERROR, ...; a row per trial, its status a string), or
    None where there is no results.parquet; anything else is damage."""
    from sweeper.space.spec import MAX_TRIALS
    from sweeper.storage.stored import damage_error, damaged
    from sweeper.tracking.metrics import RESULTS_FILE

    if not experiment.exists(RESULTS_FILE):
        return None
    table = experiment.read_parquet(RESULTS_FILE, max_rows=MAX_TRIALS, error=damage_error(experiment, RESULTS_FILE))
    column = table.column("status") if "status" in table.column_names else None
    if column is None or not pa.types.is_string(column.type) or column.null_count:
        raise damaged(experiment, RESULTS_FILE, "no column `status` of strings (each trial's TERMINATED, ERROR, ...)")
    return column.to_pylist()


def ended_trials(statuses: list[str]) -> tuple[int, int]:
    """Trials done (finished, or stopped early by a scheduler) and failed."""
    return sum(s in ("TERMINATED", "STOPPED") for s in statuses), sum(s == "ERROR" for s in statuses)


def job_state(info: SweepInfo, job) -> None:
    """Ray Jobs' word on a submitted sweep's driver: a driver gone before it could say so itself ends the sweep."""
    info.job_status = str(job.status.value if hasattr(job.status, "value") else job.status)
    ray_state = JOB_STATES.get(info.job_status, UNKNOWN)
    if info.state in (UNKNOWN, *LIVE) and ray_state not in LIVE:
        info.state = STOPPED if job.driver_exit_code == 130 else ray_state
        info.detail = printable(str(job.message or ""))[:200]
    elif info.state == UNKNOWN or (ray_state == STARTING and info.state in LIVE):
        info.state = ray_state


def from_job(name: str, job) -> SweepInfo:
    """A submitted sweep as Ray Jobs alone knows it (its driver has not written to storage yet, or this machine
    does not read that storage)."""
    metadata = job.metadata or {}
    by = metadata.get("submitted_by")
    info = SweepInfo(
        name,
        UNKNOWN,
        started_by=printable(by)[:100] if isinstance(by, str) else None,
        started_at=iso(job.start_time / 1000 if job.start_time else None),
        job_id=job.submission_id,
        storage=redact(metadata["storage"]) if "storage" in metadata else None,
        tracking_uri=redact(metadata["tracking_uri"]) if "tracking_uri" in metadata else None,
    )
    job_state(info, job)
    return info


def sweep_jobs(client) -> dict[str, Any]:
    """Sweep name -> its latest Ray job on the cluster (jobs whose metadata names a sweep that follows the rule)."""
    latest: dict[str, Any] = {}
    for job in client.list_jobs():
        name = (job.metadata or {}).get("sweep")
        if job.submission_id and isinstance(name, str) and NAME_RULE.fullmatch(name):
            if name not in latest or (job.start_time or 0) > (latest[name].start_time or 0):
                latest[name] = job
    return latest


def sweep_names(storage: Storage) -> list[str]:
    """The folders under the storage root that hold a sweep (sweeper.json), by name."""
    from sweeper.storage.stored import STATE_FILE

    with storage.one_line():  # a store that fails is one line naming it
        found = storage.info(pafs.FileSelector(storage.root, allow_not_found=True, recursive=False))
    names = [info.base_name for info in found if info.type == pafs.FileType.Directory]
    return sorted(n for n in names if NAME_RULE.fullmatch(n) and storage.exists(n, STATE_FILE))


def cluster(address: str | None, source: str):
    """The Ray Jobs client of `address` (else $RAY_ADDRESS, as `ray job list` reads it), or None without either;
    a cluster that does not answer is one line, exit 2."""
    from sweeper.running.cluster import connect

    address = address or os.environ.get("RAY_ADDRESS")
    return connect(address, source) if address else None


def list_sweeps(storage_uri: str, address: str | None) -> list[SweepInfo]:
    """Every sweep in the storage, and on the cluster at `address`: those its jobs ran, wherever their storage."""
    storage = open_storage(storage_uri, "sweeper list")
    found = {name: readable(storage.below(name), name) for name in sweep_names(storage)}
    damaged = [info for info in found.values() if info.state == DAMAGED]
    if damaged and len(damaged) == len(found):  # nothing to list: the first damage, in one line
        why = f"no readable sweep in {storage.uri}: {len(damaged)} damaged; {damaged[0].detail}"
        raise SpecError("--storage", why, "sweeper list")
    client = cluster(address, "sweeper list")
    if client is not None:
        by_id = {info.job_id: info for info in found.values() if info.job_id}
        for name, job in sweep_jobs(client).items():
            if job.submission_id in by_id:
                job_state(by_id[job.submission_id], job)
            elif name not in found:
                found[name] = from_job(name, job)
    return sorted(found.values(), key=lambda info: (info.started_at or "", info.name), reverse=True)


def readable(experiment: Storage, name: str) -> SweepInfo:
    """A sweep as from_storage reads it, or, where its records are damaged, a DAMAGED row saying why in one line: in
    a lab's shared storage one sweep's bad record (a C1 or bidi character in `started_by`) hid everybody's."""
    try:
        return from_storage(experiment, name)
    except ConfigError as err:
        return SweepInfo(name, DAMAGED, detail=one_line(err))


def find(name: str, storage_uri: str, address: str | None, source: str) -> tuple[SweepInfo, Storage, Any]:
    """A sweep by its name: its folder in storage, else its latest job on the cluster at `address`; with the Ray
    Jobs client of its cluster (None where there is none, or its recorded dashboard does not answer from here)."""
    from sweeper.storage.stored import STATE_FILE

    check_name(name, "NAME", source)
    storage = open_storage(storage_uri, source)
    experiment = storage.below(name)
    info = from_storage(experiment, name) if experiment.exists(STATE_FILE) else None
    client = cluster(address, source)
    if client is None and info is not None and info.job_id:  # the dashboard it was submitted to, if it answers here
        try:
            client = cluster(read_job_address(experiment), source)
        except ConfigError:
            info.detail = (
                info.detail + "; " if info.detail else ""
            ) + f"its Ray dashboard {info.address} does not answer"
    if client is not None and info is None:
        job = sweep_jobs(client).get(name)
        info = from_job(name, job) if job else None
    elif client is not None and info.job_id:
        try:
            job_state(info, client.get_job_info(info.job_id))
        except RuntimeError as err:  # a job this cluster does not know (another cluster's --address)
            info.detail = f"the Ray cluster does not know job {info.job_id} ({printable(str(err))[:100]})"
    if info is None:
        where = f" nor on the Ray cluster at {redact(address or os.environ['RAY_ADDRESS'])}" if client else ""
        raise SpecError(
            "NAME",
            f"no sweep named {name!r} under {storage.uri}{where}; `sweeper list` shows the sweeps there (pass the "
            "--storage it ran with, or the cluster's --address)",
            source,
        )
    return info, experiment, client


def read_job_address(experiment: Storage) -> str:
    """The dashboard a sweep was submitted to, unredacted (SweepInfo shows it redacted; it holds no secret)."""
    from sweeper.storage.stored import STATE_FILE, read_state

    return check_job(read_state(experiment).job, "job", experiment.display(STATE_FILE))["address"]


def stop(name: str, storage_uri: str, address: str | None, wait_s: float = 0.0) -> tuple[SweepInfo, str]:
    """Ask a running sweep to stop (Ray Jobs for a submitted one, stop.json for one started with `sweeper run`);
    with wait_s, wait that long for its driver to have stopped. Returns the sweep as it is then, and what was done."""
    source = "sweeper stop"
    info, experiment, client = find(name, storage_uri, address, source)
    holder = lock_holder(experiment) if not info.job_id else None  # a driver may hold it before its first status
    if info.state == FINISHING or (info.state not in LIVE and holder is None):
        return info, f"sweep {name} is {info.state}: nothing to stop"
    if info.job_id:
        if client is None:
            raise SpecError(
                "--address",
                f"sweep {name} runs as Ray job {info.job_id}, whose dashboard {info.address} does not answer from "
                "here; pass the cluster's dashboard address",
                source,
            )
        client.stop_job(info.job_id)
        how = f"Ray Jobs stops job {info.job_id} (its driver gets SIGINT)"
    else:
        request_stop(experiment, whoami(), holder)
        how = f"its driver reads the request in {experiment.display(STOP_FILE)} within {STATUS_EVERY_S:.0f} s"
    # the folder that holds the sweep, as `resume` takes it: a submitted sweep's job recorded it; a local sweep's
    # info.storage is the sweep's own folder, one level too deep
    resume_storage = info.storage if info.job_id and info.storage else redact(storage_uri)
    deadline = time.monotonic() + wait_s
    while wait_s and info.state in LIVE and time.monotonic() < deadline:
        time.sleep(min(STATUS_EVERY_S / 2, 2.0))
        info = find(name, storage_uri, address, source)[0]
    return info, (
        f"stopping sweep {name}: {how}; Ray Tune saves the experiment, running trials keep the checkpoint of their "
        f"last finished epoch; continue with `sweeper resume {name} --storage {resume_storage}`"
    )


def logs(name: str, storage_uri: str, address: str | None, tail: int | None = None) -> tuple[str, str]:
    """A sweep's log: its Ray job's (the driver's console) for a submitted sweep whose cluster answers, else
    sweep.log in its storage (Ray's output and the sweep's lines; in object storage once the driver ends).
    Returns where it came from and its text, the last `tail` lines with `tail`."""
    from sweeper.running.console import ANSI, LOG_FILE

    source = "sweeper logs"
    info, experiment, client = find(name, storage_uri, address, source)
    if info.job_id and client is not None:
        where, text = f"Ray job {info.job_id}", client.get_job_logs(info.job_id)[-LOG_LIMIT:]
    elif experiment.exists(LOG_FILE):
        where, text = experiment.display(LOG_FILE), read_end(experiment, LOG_FILE)
    else:
        late = "" if experiment.is_local else " (in object storage it arrives when the driver ends)"
        raise SpecError(
            "NAME",
            f"no log of sweep {name} yet: no {experiment.display(LOG_FILE)}{late}; `sweeper status {name}` shows its "
            "board",
            source,
        )
    text = hide_secrets(ANSI.sub("", text))  # a job's log may hold the environment it ran with
    return where, "\n".join(text.splitlines()[-tail:]) + "\n" if tail else text


def read_end(experiment: Storage, file: str) -> str:
    """The last LOG_LIMIT bytes of a file in storage, through the storage's gate (a regular file, no link out, no
    FIFO or device)."""
    from sweeper.storage.stored import damage_error

    return experiment.read_end(file, limit=LOG_LIMIT, error=damage_error(experiment, file)).decode("utf-8", "replace")


def table(rows: list[dict[str, Any]]) -> str:
    """`sweeper list`'s table: one line per sweep ("" for none)."""
    if not rows:
        return ""
    header = ("NAME", "STATE", "DONE", "RUNNING", "FAILED", "BEST", "STARTED BY", "STARTED (UTC)", "RAY JOB")
    lines = [header]
    for r in rows:
        best = f"{r['best']:.2f} {r['metric'] or ''}".strip() if r["best"] is not None else "-"
        done = f"{value(r['done'])}/{value(r['trials'])}"
        started = str(r["started_at"])[:16].replace("T", " ") if r["started_at"] is not None else "-"
        job = f"{r['job_id']} ({r['job_status']})" if r["job_id"] and r["job_status"] else r["job_id"] or "-"
        lines.append(
            (
                r["name"],
                r["state"],
                done,
                value(r["running"]),
                value(r["failed"]),
                best,
                r["started_by"] or "-",
                started,
                job,
            )
        )
    widths = [max(len(str(line[c])) for line in lines) for c in range(len(header))]
    return "\n".join("  ".join(str(v).ljust(w) for v, w in zip(line, widths)).rstrip() for line in lines)


def value(count: Any) -> str:
    return "?" if count is None else str(int(count))


def compute_text(compute: dict[str, Any]) -> str:
    """`0.42 CPU core-hours spent (0.21 h wall); budget 1 device-hours: 0.58 left`, or `...; no budget`."""
    spent = f"{compute['device_hours']:.3g} {compute['device']}-hours spent ({compute['wall_hours']:.3g} h wall)"
    if compute["budget"] is None:
        return spent + "; no budget (resources.budget)"
    unit = compute["unit"].replace("_", "-")
    return spent + f"; budget {compute['budget']:g} {unit}: {compute['left']:.3g} left"


def describe(info: SweepInfo) -> list[str]:
    """`sweeper status`'s lines: the state, counts and best, who and where, then the board as last written."""
    counts = "; ".join(f"{value(getattr(info, k))} {k}" for k in ("done", "running", "failed", "pending"))
    lines = [f"sweep {info.name}: {info.state}" + (f" ({info.detail})" if info.detail else "")]
    lines.append(f"  trials: {value(info.trials)} planned; {counts}")
    if info.best is not None:
        lines.append(f"  best {info.metric} so far: {info.best:.2f}")
    lines.append(f"  started by {info.started_by or '?'} at {info.started_at or '?'}")
    if info.job_id:
        lines.append(f"  Ray job {info.job_id} at {info.address or '?'}: {info.job_status or 'not asked'}")
    lines.append(f"  storage {info.storage or '?'}; tracking {info.tracking_uri or '?'}")
    if info.mlflow_link:
        lines.append(f"  MLflow: {info.mlflow_link}")
    if info.compute:
        lines.append(f"  compute: {compute_text(info.compute)}")
    if info.board:
        lines.append(f"  its board at {info.updated_at}:")
        lines += [f"  {line}" for line in info.board]
    return lines
