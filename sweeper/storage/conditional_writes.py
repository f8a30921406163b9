"""Conditional writes on object storage, which pyarrow does not expose (issue #61's named gaps): S3's `If-Match` and
`If-None-Match` through boto3 (the `s3` extra, sweeper/storage/s3_objects.py), GCS's generation preconditions through
google-cloud-storage (the `gcs` extra, sweeper/storage/gcs_objects.py). The logic is here, once; a backend makes the
calls.

A call to object storage that passes its deadline is abandoned, not undone (sweeper/storage/store.py: within_deadline):
its request may still land later, whole but stale. Where a later write must win, a write is conditional on the tag
(S3's ETag, GCS's generation) this process last wrote or read, and a delete on the tag of the object it means to
remove: a request that lands late carries a tag a newer write has replaced, and the store refuses it (412). So a
sweep's records (sweeper.json, status.json, stop.json) cannot go back to an older state, a driver's late release
cannot delete the lock a newer driver holds, and a takeover of a stale lock puts its record only over the stale
record it read, so two drivers that judge one lock gone cannot both take it (sweeper/running/driver_lock.py).

An S3 ETag is the object's MD5: a late write whose condition is an older record that was written again byte for
byte lands (no record repeats itself here: each carries its driver and time). A GCS generation is new at every
write, so there it does not.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, TypeVar

import pyarrow.fs as pafs

import sweeper.storage.gcs_objects as gcs_objects
import sweeper.storage.s3_objects as s3_objects
from sweeper.space.spec import SpecError
from sweeper.storage.store import first_line, fs_options

if TYPE_CHECKING:
    from sweeper.storage.store import Storage

T = TypeVar("T")
ATTEMPTS = 3  # writes of one record that may race this one's (another of this process's, landing late)
_known: dict[tuple[str, str, str], str] = {}  # (store, endpoint, bucket/key) -> the tag this process last wrote or read
_known_lock = threading.Lock()


def backend(storage: Storage) -> ModuleType:
    """The module that makes `storage`'s object calls (by pyarrow's filesystem type): s3_objects or gcs_objects."""
    if isinstance(storage.fs, pafs.S3FileSystem):
        return s3_objects
    if isinstance(storage.fs, pafs.GcsFileSystem):
        return gcs_objects
    raise TypeError(f"no conditional writes on {storage.fs.type_name}")  # callers ask Storage.conditional first


def put(storage: Storage, data: bytes, *parts: str, if_match: str | None = None, if_none_match: bool = False) -> bool:
    """The object at `parts` holds `data`, if it is still the one `if_match` names (or, with `if_none_match`, there
    is none); False if it is not."""
    bucket, key = location(storage, *parts)
    objects = backend(storage)
    new = request(storage, lambda: objects.put(storage, data, bucket, key, if_match, if_none_match), *parts)
    if new is not None:
        remember(storage, parts, new)
    return new is not None


def get(storage: Storage, limit: int, *parts: str) -> tuple[bytes, str] | None:
    """The object at `parts` (at most `limit` + 1 bytes of it) and its tag, or None where there is none."""
    bucket, key = location(storage, *parts)
    got = request(storage, lambda: backend(storage).get(storage, limit, bucket, key), *parts)
    if got is not None:
        remember(storage, parts, got[1])
    return got


def delete(storage: Storage, *parts: str, if_match: str) -> bool:
    """The object at `parts` deleted if it is still the one `if_match` names; False if it is another (or none)."""
    bucket, key = location(storage, *parts)
    deleted = request(storage, lambda: backend(storage).delete(storage, bucket, key, if_match) or True, *parts)
    forget(storage, parts)
    return deleted is not None


def tag(storage: Storage, *parts: str) -> str | None:
    """The tag of the object at `parts` now, or None where there is none."""
    bucket, key = location(storage, *parts)
    return request(storage, lambda: backend(storage).tag(storage, bucket, key), *parts)


def write_record(storage: Storage, text: str, *parts: str) -> None:
    """A sweep's record (sweeper.json, status.json, stop.json), whole, as Storage.write_text; on object storage
    never under a later write: a write that passed its deadline and lands late is refused."""
    if not storage.conditional:
        return storage.write_text(text, *parts)
    write_latest(storage, text.encode("utf-8"), *parts)


def delete_record(storage: Storage, *parts: str) -> None:
    """A record deleted as Storage.delete does; on object storage only as it is now, so that a delete that lands
    late cannot remove a record written after it."""
    if not storage.conditional:
        return storage.delete(*parts)
    delete_latest(storage, *parts)


def write_latest(storage: Storage, data: bytes, *parts: str) -> None:
    """`data` over the record at `parts` as it is now, never under a later write: conditional on the tag this
    process last knew there (else the one it has now). A refusal means a write landed since (one of this process's
    own that passed its deadline): the record is read again and this newer write goes over it."""
    for _ in range(ATTEMPTS):
        now = known(storage, parts) or tag(storage, *parts)
        if put(storage, data, *parts, if_match=now, if_none_match=now is None):
            return
        forget(storage, parts)
    raise SpecError("(file)", f"changed {ATTEMPTS} times while it was written; run again", storage.display(*parts))


def delete_latest(storage: Storage, *parts: str) -> None:
    """The record at `parts` deleted as it is now (conditional on its tag now): a delete that lands late cannot
    remove a record written after it."""
    now = tag(storage, *parts)
    if now is not None:
        delete(storage, *parts, if_match=now)


def request(storage: Storage, call: Callable[[], T], *parts: str) -> T | None:
    """`call()` within the store's deadline (Storage.bounded); None where its condition failed or the object is
    not there; any other failure is one line naming the file (the clients' own timeouts bound one read: a dripping
    endpoint held a call 90 s)."""
    objects = backend(storage)
    installed(objects, "sweeper")
    try:
        with storage.one_line(*parts):
            return storage.bounded(call)
    except objects.failures() as err:
        if objects.refused(err):
            return None
        raise SpecError("(file)", f"storage failed: {first_line(err)}", storage.display(*parts)) from None


def check_installed(storage: Storage, source: str) -> None:
    """Before anything is written: the client of `storage`'s conditional writes is installed (its extra), or one
    line says how to install it."""
    if storage.conditional:
        installed(backend(storage), source)


def installed(objects: ModuleType, source: str) -> None:
    """A backend's client (its extra) is installed, or one line (its EXTRA) says how to install it."""
    try:
        objects.load()
    except ImportError:
        raise SpecError("--storage", objects.EXTRA, source) from None


def location(storage: Storage, *parts: str) -> tuple[str, str]:
    bucket, _, key = storage.path(*parts).partition("/")
    return bucket, key


def _where(storage: Storage, parts: tuple[str, ...]) -> tuple[str, str, str]:
    return storage.fs.type_name, str(fs_options(storage.fs).get("endpoint_override")), storage.path(*parts)


def known(storage: Storage, parts: tuple[str, ...]) -> str | None:
    with _known_lock:
        return _known.get(_where(storage, parts))


def remember(storage: Storage, parts: tuple[str, ...], value: str) -> None:
    with _known_lock:
        _known[_where(storage, parts)] = value


def forget(storage: Storage, parts: tuple[str, ...]) -> None:
    with _known_lock:
        _known.pop(_where(storage, parts), None)
