"""S3's conditional requests, which pyarrow does not expose, through boto3 (the `s3` extra; issue #61's named gaps).

A call to object storage that passes its deadline is abandoned, not undone (sweeper/storage.py: within_deadline):
its request may still land later, whole but stale. Where a later write must win, a write is conditional on the ETag
this process last wrote or read (`If-Match`), and a delete on the ETag of the object it means to remove: a request
that lands late carries an ETag a newer write has replaced, and S3 refuses it (412). So a sweep's records
(sweeper.json, status.json) cannot go back to an older state, a driver's late release cannot delete the lock a
newer driver holds, and a takeover of a stale lock puts its record only over the stale record it read, so two
drivers that judge one lock gone cannot both take it (sweeper/driver_lock.py).

An ETag is the object's MD5: a late write whose condition is an older record that was written again byte for byte
lands (no record repeats itself here: each carries its driver and time). GCS has generation preconditions, but
pyarrow does not expose them: there writes stay as they are (docs/operations.md).
"""

from __future__ import annotations

import functools
import threading
from typing import TYPE_CHECKING, Any

from nmt_core.gate import clip, network_timeout
from sweeper.space import SpecError
from sweeper.storage import first_line

if TYPE_CHECKING:
    from sweeper.storage import Storage

REFUSED = ("PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey", "404", "412")  # the condition failed
ATTEMPTS = 3  # writes of one record that may race this one's (another of this process's, landing late)
_known: dict[tuple[str, str], str] = {}  # (endpoint, bucket/key) -> the ETag this process last wrote or read there
_known_lock = threading.Lock()


def put(storage: Storage, data: bytes, *parts: str, if_match: str | None = None, if_none_match: bool = False) -> bool:
    """The object at `parts` holds `data`, if it is still the one `if_match` names (or, with `if_none_match`, there
    is none); False if it is not."""
    bucket, key = location(storage, *parts)
    conditions = {"IfMatch": if_match} if if_match else {"IfNoneMatch": "*"} if if_none_match else {}

    def send() -> Any:
        return client(storage).put_object(Bucket=bucket, Key=key, Body=data, **conditions)

    answer = request(storage, send, *parts)
    if answer is not None:
        remember(storage, parts, answer["ETag"])
    return answer is not None


def get(storage: Storage, limit: int, *parts: str) -> tuple[bytes, str] | None:
    """The object at `parts` (at most `limit` + 1 bytes of it) and its ETag, or None where there is none."""
    bucket, key = location(storage, *parts)

    def fetch() -> tuple[bytes, str]:
        answer = client(storage).get_object(Bucket=bucket, Key=key)
        try:
            return answer["Body"].read(limit + 1), answer["ETag"]
        finally:
            answer["Body"].close()

    got = request(storage, fetch, *parts)
    if got is not None:
        remember(storage, parts, got[1])
    return got


def delete(storage: Storage, *parts: str, if_match: str) -> bool:
    """The object at `parts` deleted if it is still the one `if_match` names; False if it is another (or none)."""
    bucket, key = location(storage, *parts)

    def send() -> Any:
        return client(storage).delete_object(Bucket=bucket, Key=key, IfMatch=if_match)

    deleted = request(storage, send, *parts) is not None
    forget(storage, parts)
    return deleted


def write_record(storage: Storage, text: str, *parts: str) -> None:
    """A sweep's record (sweeper.json, status.json, stop.json), whole, as Storage.write_text; on S3 never under a
    later write: a write that passed its deadline and lands late is refused."""
    if not storage.conditional:
        return storage.write_text(text, *parts)
    write_latest(storage, text.encode("utf-8"), *parts)


def delete_record(storage: Storage, *parts: str) -> None:
    """A record deleted as Storage.delete does; on S3 only as it is now, so that a delete that lands late cannot
    remove a record written after it."""
    if not storage.conditional:
        return storage.delete(*parts)
    delete_latest(storage, *parts)


def write_latest(storage: Storage, data: bytes, *parts: str) -> None:
    """`data` over the record at `parts` as it is now, never under a later write: If-Match the ETag this process
    last knew there (else the one it has now). A refusal means a write landed since (one of this process's own that
    passed its deadline): the record is read again and this newer write goes over it."""
    for _ in range(ATTEMPTS):
        tag = known(storage, parts) or etag(storage, *parts)
        if put(storage, data, *parts, if_match=tag, if_none_match=tag is None):
            return
        forget(storage, parts)
    raise SpecError("(file)", f"changed {ATTEMPTS} times while it was written; run again", storage.display(*parts))


def delete_latest(storage: Storage, *parts: str) -> None:
    """The record at `parts` deleted as it is now (If-Match its ETag now): a delete that lands late cannot remove a
    record written after it."""
    tag = etag(storage, *parts)
    if tag is not None:
        delete(storage, *parts, if_match=tag)


def etag(storage: Storage, *parts: str) -> str | None:
    """The ETag of the object at `parts` now, or None where there is none."""
    bucket, key = location(storage, *parts)
    answer = request(storage, lambda: client(storage).head_object(Bucket=bucket, Key=key), *parts)
    return None if answer is None else answer["ETag"]


def request(storage: Storage, call: Any, *parts: str) -> Any:
    """`call()` within the store's deadline (Storage.bounded); None where its condition failed or the object is
    not there; any other failure is one line naming the file."""
    check_boto3("sweeper")
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        with storage.one_line(*parts):  # botocore's timeouts bound one read; a dripping endpoint held it 90 s
            return storage.bounded(call)
    except ClientError as err:
        if str(err.response.get("Error", {}).get("Code")) in REFUSED:
            return None
        raise SpecError("(file)", f"storage failed: {first_line(err)}", storage.display(*parts)) from None
    except BotoCoreError as err:
        raise SpecError("(file)", f"storage failed: {clip(str(err), 200)}", storage.display(*parts)) from None


def check_boto3(source: str) -> None:
    """boto3 (the `s3` extra) is installed, or one line says how to install it."""
    try:
        import boto3  # noqa: F401
    except ImportError:
        raise SpecError(
            "--storage",
            "a sweep on S3 takes its lock with S3's conditional write, which needs boto3: pip install "
            "'nmt-sweeper[s3]'",
            source,
        ) from None


def fs_options(storage: Storage) -> dict[str, Any]:
    """The options pyarrow's S3FileSystem was made with (endpoint, region, credentials): it has no other accessor."""
    return storage.fs.__reduce__()[1][0]


def client(storage: Storage) -> Any:
    """A boto3 S3 client with the endpoint, region and credentials pyarrow was given, one per store."""
    options = fs_options(storage)
    keys = ("endpoint_override", "scheme", "region", "access_key", "secret_key", "session_token")
    return _client(tuple(options.get(key) or None for key in keys), network_timeout(SpecError))


@functools.lru_cache(maxsize=8)
def _client(options: tuple[str | None, ...], seconds: float) -> Any:
    import boto3
    from botocore.config import Config

    endpoint, scheme, region, access_key, secret_key, session_token = options
    return boto3.client(
        "s3",
        endpoint_url=f"{scheme or 'https'}://{endpoint}" if endpoint else None,
        region_name=region,
        aws_access_key_id=access_key,
        aws_secret_access_key=secret_key,
        aws_session_token=session_token,
        config=Config(connect_timeout=seconds, read_timeout=seconds, retries={"max_attempts": 2}),
    )


def location(storage: Storage, *parts: str) -> tuple[str, str]:
    bucket, _, key = storage.path(*parts).partition("/")
    return bucket, key


def _where(storage: Storage, parts: tuple[str, ...]) -> tuple[str, str]:
    return str(fs_options(storage).get("endpoint_override")), storage.path(*parts)


def known(storage: Storage, parts: tuple[str, ...]) -> str | None:
    with _known_lock:
        return _known.get(_where(storage, parts))


def remember(storage: Storage, parts: tuple[str, ...], tag: str) -> None:
    with _known_lock:
        _known[_where(storage, parts)] = tag


def forget(storage: Storage, parts: tuple[str, ...]) -> None:
    with _known_lock:
        _known.pop(_where(storage, parts), None)
