"""One driver per sweep (issue #61 item 4): `sweeper run` and `sweeper resume` hold driver.lock in the sweep's folder
while they drive it.

Two drivers of one name would share one Tune folder, write sweeper.json and status.json over each other and delete
each other's stop request. The lock is created only where none exists, atomically: in a folder, a file written
whole and then hard-linked to its name (the link fails if the name exists); on object storage, a conditional put
(S3's `If-None-Match: *`, GCS's `ifGenerationMatch=0`; through boto3 or google-cloud-storage, as pyarrow exposes
neither: sweeper/storage/conditional_writes.py). A second driver is refused in one line naming the holder (host, pid,
since when). A lock whose driver is gone (its pid ended, or, on another machine, no status written for STALE_S) is taken
over, and said so: in a folder one driver at a time (an flock), on object storage by a put conditional on the stale
record's tag (S3's ETag, GCS's generation), so that two drivers cannot both take it, and a driver's release is
conditional on its own record, so that a release landing after its deadline cannot delete a newer driver's lock.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sweeper.storage.conditional_writes as conditional_writes
from nmt_core.gates.decoders import json_value
from nmt_core.gates.gate import shown
from sweeper.running.sweeps import (
    LOCK_FILE,
    RECORD_LIMIT,
    STALE_S,
    driver,
    driver_alive,
    iso,
    printable,
    read_status,
)
from sweeper.space.spec import SpecError
from sweeper.storage.store import Storage, remove_empty

CLOCK_SKEW_S = 300.0  # how far ahead of this machine's clock another driver's may run


@contextmanager
def sweep_lock(experiment: Storage, name: str, source: str) -> Iterator[None]:
    """Held while this process drives sweep `name`; released (deleted, if still ours) when it ends."""
    me = driver()
    made = experiment.missing_folders(LOCK_FILE)
    take(experiment, me, name, source)
    try:
        yield
    finally:
        release(experiment, me)
        remove_empty(made)  # a run refused before it wrote anything leaves no folder behind (nothing half-written)


def take(experiment: Storage, me: dict[str, Any], name: str, source: str) -> None:
    """The lock, created for `me`; a live holder is refused, a gone one is taken over (once: a second driver that
    took it over at the same moment wins, and this one is refused)."""
    with takeovers_one_at_a_time(experiment):
        _take(experiment, me, name, source)


@contextmanager
def takeovers_one_at_a_time(experiment: Storage) -> Iterator[None]:
    """In a folder, an flock on the sweep's folder while the lock is taken: a takeover reads the holder, judges it
    gone, deletes it and creates its own, and two drivers taking over one stale lock at once both did so (the
    second deleted the first one's fresh lock). On object storage a takeover is one conditional put over the stale
    record (`take_over`)."""
    if not experiment.is_local:
        yield
        return
    folder = experiment.local_folder(LOCK_FILE)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # local_folder checked it stays inside
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # held for a few file operations; released when closed, or the process ends
        yield
    finally:
        os.close(fd)


def _take(experiment: Storage, me: dict[str, Any], name: str, source: str) -> None:
    for attempt in range(2):
        if create_only(experiment, json.dumps(me).encode()):
            return
        holder, tag = read_holder_tagged(experiment)
        if holder is None:  # released between the two calls
            continue
        if attempt == 1 or not gone(experiment, holder):
            raise SpecError(
                "NAME",
                f"sweep {name} is driven by {described(holder)}: one driver per sweep; `sweeper status {name}` "
                f"shows it, `sweeper stop {name}` stops it",
                source,
            )
        if take_over(experiment, json.dumps(me).encode(), tag):
            print(f"note: sweep {name}'s lock was held by {described(holder)}, which is gone: taken over", flush=True)
            return
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


def take_over(experiment: Storage, data: bytes, tag: str | None) -> bool:
    """The lock of a driver that is gone made this one's; False if another driver took it over first. On object
    storage, one put conditional on the stale record read (its tag): of two drivers taking it over, one put lands,
    the other is refused. In a folder (one at a time: takeovers_one_at_a_time), delete and create."""
    if experiment.conditional:
        return conditional_writes.put(experiment, data, LOCK_FILE, if_match=tag)
    experiment.delete(LOCK_FILE)
    return create_only(experiment, data)


def release(experiment: Storage, me: dict[str, Any]) -> None:
    """The lock deleted if it is still this driver's; on object storage only the record read (conditional on its
    tag), so that a delete landing after its deadline cannot remove the lock a newer driver took meanwhile."""
    holder, tag = read_holder_tagged(experiment)
    if holder != me:
        return
    if experiment.conditional and tag is not None:
        conditional_writes.delete(experiment, LOCK_FILE, if_match=tag)
    else:
        experiment.delete(LOCK_FILE)


def read_holder(experiment: Storage) -> dict[str, Any] | None:
    """The lock's record, or None where there is none; a damaged one reads as a holder that is gone."""
    return read_holder_tagged(experiment)[0]


def read_holder_tagged(experiment: Storage) -> tuple[dict[str, Any] | None, str | None]:
    """The lock's record (as read_holder) and, on object storage, the tag of what was read (the condition of a
    takeover)."""
    if experiment.conditional:
        got = conditional_writes.get(experiment, RECORD_LIMIT, LOCK_FILE)
        if got is None:
            return None, None
        body, tag = got
        try:
            record = json_value(body, experiment.display(LOCK_FILE), SpecError) if len(body) <= RECORD_LIMIT else {}
        except SpecError:
            record = {}
        return (record if well_formed(record) else {}), tag
    if not experiment.exists(LOCK_FILE):
        return None, None
    try:
        record = experiment.read_json(LOCK_FILE, limit=RECORD_LIMIT)
    except SpecError:
        return {}, None
    return (record if well_formed(record) else {}), None


def well_formed(record: Any) -> bool:
    """A record as `driver()` writes it: a host name, a pid and a start time that has come (a damaged lock naming a
    start in the future, `since: 1e300`, would never turn stale and refuse every driver for ever)."""
    if not isinstance(record, dict) or not isinstance(record.get("host"), str):
        return False
    pid, since = record.get("pid"), record.get("since")
    numbers = type(pid) is int and isinstance(since, (int, float)) and not isinstance(since, bool)
    return numbers and 0 < since <= time.time() + CLOCK_SKEW_S


def create_only(experiment: Storage, data: bytes) -> bool:
    """Write LOCK_FILE whole if no file has that name, atomically; False if one has."""
    if experiment.is_local:
        return _create_local(experiment, data)
    return conditional_writes.put(experiment, data, LOCK_FILE, if_none_match=True)


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
    """Before anything is written: a sweep on object storage can take its lock (boto3, the `s3` extra, or
    google-cloud-storage, the `gcs` extra, is installed)."""
    conditional_writes.check_installed(storage, source)
