"""One driver per sweep (issue #61 item 4): `sweeper run` and `sweeper resume` hold driver.lock in the sweep's folder
while they drive it.

Two drivers of one name would share one Tune folder, write sweeper.json and status.json over each other and delete
each other's stop request. The lock is created only where none exists, atomically: in a folder, a file written
whole and then hard-linked to its name (the link fails if the name exists); on S3, a put with `If-None-Match: *`
(S3's conditional write; boto3, which pyarrow does not expose it through). A second driver is refused in one line
naming the holder (host, pid, since when). A lock whose driver is gone (its pid ended, or, on another machine, no
status written for STALE_S) is taken over, and said so. GCS has no conditional write through pyarrow: there the
lock is checked, then written (two drivers started within the same second can both pass; said in docs).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs

from nmt_core.gate import clip, shown
from sweeper.space import SpecError
from sweeper.storage import Storage, first_line, remove_empty
from sweeper.sweeps import RECORD_LIMIT, STALE_S, driver, driver_alive, iso, printable, read_status

LOCK_FILE = "driver.lock"


@contextmanager
def sweep_lock(experiment: Storage, name: str, source: str) -> Iterator[None]:
    """Held while this process drives sweep `name`; released (deleted, if still ours) when it ends."""
    me = driver()
    made = experiment.missing_folders(LOCK_FILE)
    take(experiment, me, name, source)
    try:
        yield
    finally:
        if read_holder(experiment) == me:
            experiment.delete(LOCK_FILE)
        remove_empty(made)  # a run refused before it wrote anything leaves no folder behind (nothing half-written)


def take(experiment: Storage, me: dict[str, Any], name: str, source: str) -> None:
    """The lock, created for `me`; a live holder is refused, a gone one is taken over (once: a second driver that
    took it over at the same moment wins, and this one is refused)."""
    for attempt in range(2):
        if create_only(experiment, json.dumps(me).encode()):
            return
        holder = read_holder(experiment)
        if holder is None:  # released between the two calls
            continue
        if attempt == 1 or not gone(experiment, holder):
            raise SpecError(
                "NAME",
                f"sweep {name} is driven by {described(holder)}: one driver per sweep; `sweeper status {name}` "
                f"shows it, `sweeper stop {name}` stops it",
                source,
            )
        print(f"note: sweep {name}'s lock was held by {described(holder)}, which is gone: taken over", flush=True)
        experiment.delete(LOCK_FILE)
    raise SpecError("NAME", f"sweep {name}: its lock {experiment.display(LOCK_FILE)} could not be taken", source)


def gone(experiment: Storage, holder: dict[str, Any]) -> bool:
    """The holder's process ended (on this machine), or, on another, its sweep has written no status for STALE_S."""
    alive = driver_alive(holder)
    if alive is not None:
        return not alive
    status = read_status(experiment)
    updated = status["updated"] if status else None
    since = holder.get("since") if isinstance(holder.get("since"), (int, float)) else None
    last = max(updated or 0, since or 0)
    return time.time() - last > STALE_S


def described(holder: dict[str, Any]) -> str:
    host = printable(str(holder.get("host", "?")))[:100]
    return f"a driver on {host} (pid {shown(holder.get('pid'))}, since {iso(holder.get('since')) or '?'} UTC)"


def read_holder(experiment: Storage) -> dict[str, Any] | None:
    """The lock's record, or None where there is none; a damaged one reads as a holder that is gone."""
    if not experiment.exists(LOCK_FILE):
        return None
    try:
        record = experiment.read_json(LOCK_FILE, limit=RECORD_LIMIT)
    except SpecError:
        return {}
    return record if isinstance(record, dict) else {}


def create_only(experiment: Storage, data: bytes) -> bool:
    """Write LOCK_FILE whole if no file has that name, atomically where the store allows; False if one has."""
    if experiment.is_local:
        return _create_local(experiment, data)
    if isinstance(experiment.fs, pafs.S3FileSystem):
        return _create_s3(experiment, data)
    if experiment.exists(LOCK_FILE):  # GCS: no conditional write through pyarrow (see the module's docstring)
        return False
    experiment.write_bytes(data, LOCK_FILE)
    return True


def _create_local(experiment: Storage, data: bytes) -> bool:
    """A new file with the record, then a hard link to the lock's name: link(2) fails where the name exists."""
    folder = experiment.local_folder(LOCK_FILE)
    temporary = folder / f".{LOCK_FILE}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.link(temporary, Path(experiment.path(LOCK_FILE)))
        return True
    except FileExistsError:
        return False
    except OSError as err:
        raise SpecError("(file)", f"cannot write: {err.strerror}", experiment.display(LOCK_FILE)) from None
    finally:
        temporary.unlink(missing_ok=True)


def check_lockable(storage: Storage, source: str) -> None:
    """Before anything is written: a sweep on S3 can take its lock (boto3, the `s3` extra, is installed)."""
    if isinstance(storage.fs, pafs.S3FileSystem):
        try:
            import boto3  # noqa: F401
        except ImportError:
            raise SpecError(
                "--storage",
                "a sweep on S3 takes its lock with S3's conditional write, which needs boto3: pip install "
                "'nmt-sweeper[s3]'",
                source,
            ) from None


def _create_s3(experiment: Storage, data: bytes) -> bool:
    """S3's conditional put (`If-None-Match: *`), with the endpoint, region and credentials pyarrow was given."""
    check_lockable(experiment, "sweeper")
    import boto3
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError

    options = experiment.fs.__reduce__()[1][0]
    endpoint = options.get("endpoint_override")
    client = boto3.client(
        "s3",
        endpoint_url=f"{options.get('scheme') or 'https'}://{endpoint}" if endpoint else None,
        region_name=options.get("region") or None,
        aws_access_key_id=options.get("access_key") or None,
        aws_secret_access_key=options.get("secret_key") or None,
        aws_session_token=options.get("session_token") or None,
        config=Config(connect_timeout=options.get("connect_timeout") or 10, retries={"max_attempts": 2}),
    )
    bucket, _, key = experiment.path(LOCK_FILE).partition("/")
    try:
        client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
        return True
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") in ("PreconditionFailed", "ConditionalRequestConflict"):
            return False
        raise SpecError("(file)", f"storage failed: {first_line(err)}", experiment.display(LOCK_FILE)) from None
    except BotoCoreError as err:
        raise SpecError("(file)", f"storage failed: {clip(str(err), 200)}", experiment.display(LOCK_FILE)) from None
