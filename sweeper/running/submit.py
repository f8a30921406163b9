"""`sweeper submit` and `sweeper extend --job`: `sweeper run` (or `extend`) on a Ray cluster as a Ray Job (Job
Submission SDK).

The job carries the space YAML in its working dir and, unless told otherwise, this checkout's
`nmt_core` and `sweeper` as py_modules, so the cluster runs the code you have here; the cluster's
Python environment provides torch, ray, mlflow (deploy/ installs them on every node). Ray's token
authentication works as Ray's own CLI does: RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import nmt_core
from nmt_core.config import ConfigError
from nmt_core.gates.credentials import redact
from nmt_core.gates.gate import printable, seconds_from
from nmt_core.gates.tracking_store import choose_tracking_uri
from sweeper.running.cluster import SubmitError, connect
from sweeper.running.sweeps import JOB_VARIABLE, whoami
from sweeper.space.spec import SweepSpec
from sweeper.tracking.sqlite_urls import resolve_uri
from sweeper.tracking.store import check_reachable

POLL_S = 1.0
AGENT_WAIT_S = 180.0  # how long a fresh head may take to accept jobs (over 60 s on a loaded 2-core machine)
AGENT_WAIT_VARIABLE = "NMT_SWEEPER_AGENT_WAIT"  # seconds, to give a slow head longer than AGENT_WAIT_S
# `sweeper stop` and `ray job stop`: Ray sends the driver SIGINT, Ray Tune's graceful stop (SIGTERM, Ray's default,
# is one only while Tune runs: sweeper/running/stop_signals.py), and waits this long for it to save the experiment
# and send its tracking writes
STOP_SIGNAL, STOP_WAIT_S = "SIGINT", 600


@dataclass(frozen=True)
class Driver:
    """What a job's driver runs: `sweeper` with these arguments in a working folder that holds `files`."""

    sweep: str
    arguments: tuple[str, ...]
    files: dict[str, str] = field(default_factory=dict)

    def entrypoint(self) -> str:
        # --debug: an unforeseen error's traceback goes to the job's log (escaped, credentials hidden)
        return " ".join(shlex.quote(a) for a in ("python", "-m", "sweeper.cli", "--debug", *self.arguments))


def submit(
    spec: SweepSpec, address: str | None, storage: str, tracking_uri: str | None, wait: bool, ship_code: bool = True
) -> int:
    """`sweeper submit`: `sweeper run` of the space as a Ray Job."""
    address = job_address(address)
    uri = job_tracking_uri(choose_tracking_uri(tracking_uri, spec.tracking_uri))
    arguments = ("run", "space.yaml", "--name", spec.name, "--storage", storage, "--tracking-uri", uri)
    return submit_driver(
        Driver(spec.name, arguments, {"space.yaml": spec.text}), address, storage, uri, wait, ship_code
    )


def submit_extend(
    name: str,
    address: str | None,
    storage: str,
    tracking_uri: str | None,
    until_decided: bool,
    wait: bool,
    ship_code: bool = True,
) -> int:
    """`sweeper extend NAME --job`: the designed sweep's next look (or every look) as a Ray Job; its tracking store is
    the one the sweep recorded unless `tracking_uri` names another."""
    address = job_address(address)
    uri = job_tracking_uri(tracking_uri) if tracking_uri else None
    arguments = ("extend", name, "--storage", storage, *(("--tracking-uri", uri) if uri else ()))
    arguments += ("--until-decided",) * until_decided
    return submit_driver(Driver(name, arguments), address, storage, uri, wait, ship_code)


def job_address(address: str | None) -> str:
    address = address or os.environ.get("RAY_ADDRESS")  # as `ray job submit` reads it
    if not address or address == "local":  # Ray's word for a new local instance: no cluster to submit to
        raise SubmitError("name the Ray cluster's dashboard, e.g. --address http://HEAD:8265 (or set RAY_ADDRESS)")
    return address


def job_tracking_uri(uri: str) -> str:
    """A tracking store a job can use after its working folder is gone: a server it reaches, or an absolute SQLite
    file on the head."""
    if not uri.startswith(("http://", "https://", "sqlite:////")):
        raise SubmitError(
            "a job's working folder is deleted when it ends: give an MLflow server the cluster "
            "reaches (http://...) or an absolute sqlite:////path on the head",
            "--tracking-uri",
        )
    uri = resolve_uri(uri)
    if uri.startswith("http"):
        check_reachable(uri)
    return uri


def submit_driver(driver: Driver, address: str, storage: str, uri: str | None, wait: bool, ship_code: bool) -> int:
    """The driver as a Ray Job: its files in the working folder, this checkout's code unless `ship_code` is false."""
    client = connect(address)
    job = job_record(driver.sweep, address)
    with tempfile.TemporaryDirectory() as folder:
        for name, text in driver.files.items():
            (Path(folder) / name).write_text(text, encoding="utf-8")
        env_vars = {"PYTHONUNBUFFERED": "1", JOB_VARIABLE: json.dumps(job)} | (
            {"MLFLOW_TRACKING_URI": uri} if uri else {}
        )
        env_vars.update(RAY_JOB_STOP_SIGNAL=STOP_SIGNAL, RAY_JOB_STOP_WAIT_TIME_S=str(STOP_WAIT_S))
        runtime_env = {"working_dir": folder, "env_vars": env_vars}
        if ship_code:  # the sources only: a .pyc is for this machine's Python (and one being written may vanish)
            runtime_env["py_modules"] = [str(Path(nmt_core.__file__).parent), str(Path(__file__).parents[1])]
            runtime_env["excludes"] = ["__pycache__/"]
        job_id = submit_when_an_agent_is_up(
            client,
            entrypoint=driver.entrypoint(),
            runtime_env=runtime_env,
            metadata={"sweep": driver.sweep, "tracking_uri": uri or "", "storage": storage}
            | {"submitted_by": job["submitted_by"]},
            submission_id=job["id"],
        )
    shown = redact(address, bare_address=True)
    where = f"{driver.sweep} --storage {shlex.quote(storage)} --address {shown}"
    what = "" if driver.arguments[0] == "run" else f" (sweeper {driver.arguments[0]})"
    print(f"submitted sweep {driver.sweep!r} as Ray job {job_id} to {shown} by {job['submitted_by']}{what}")
    print(f"watch it: sweeper status {where}   (its log: sweeper logs {where}; stop: sweeper stop {where})")
    if not wait:
        return 0
    return follow(client, job_id)


def job_record(name: str, address: str) -> dict[str, str | None]:
    """What the job's driver records in the sweep's storage (sweeper/running/sweeps.py): the job's id, chosen here so
    that the driver knows it, the dashboard it was submitted to, and who submitted it (their MLflow user, which the
    driver grants the sweep's experiment when it tracks under the cluster's own account)."""
    return {
        "id": f"sweeper-{name}-{uuid.uuid4().hex[:8]}",
        "address": address,
        "submitted_by": whoami(),
        "mlflow_user": os.environ.get("MLFLOW_TRACKING_USERNAME") or None,
    }


def submit_when_an_agent_is_up(client, **job) -> str:
    """Submit, waiting up to AGENT_WAIT_S ($NMT_SWEEPER_AGENT_WAIT) while the cluster answers "No available agent":
    a head that has just started (or an autoscaled one) takes a while to bring up the agent that accepts jobs."""
    wait = seconds_from(AGENT_WAIT_VARIABLE, AGENT_WAIT_S, ConfigError)
    deadline = time.monotonic() + wait
    while True:
        try:
            return client.submit_job(**job)
        except RuntimeError as err:
            if "No available agent" not in str(err):
                raise
            if time.monotonic() > deadline:
                raise SubmitError(
                    f"no job agent of the cluster took the job within {wait:g} s (Ray: No available agent); a head "
                    f"that has just started brings one up within minutes: try again, or give it longer with "
                    f"{AGENT_WAIT_VARIABLE}; if it never comes up, another Ray instance on the head's machine may hold "
                    f"the agent's port (ray start --dashboard-agent-listen-port, default 52365)"
                ) from None
            time.sleep(POLL_S)


def follow(client, job_id: str) -> int:
    """Stream the job's log and return its driver's exit code (0 done, 1 no trial finished, 2 bad input)."""
    printed = 0
    while True:
        status = client.get_job_status(job_id)
        logs = client.get_job_logs(job_id)
        sys.stdout.write(printable(logs[printed:]))  # the job's log through the gate: escapes shown, not acted on
        sys.stdout.flush()
        printed = len(logs)
        if status.is_terminal():
            break
        time.sleep(POLL_S)
    info = client.get_job_info(job_id)
    print(f"Ray job {job_id}: {status}")
    if info.driver_exit_code is not None:
        return int(info.driver_exit_code)
    return 0 if str(status) == "SUCCEEDED" else 1
