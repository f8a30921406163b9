"""S3's object calls for the conditional writes (sweeper/storage/conditional_writes.py), through boto3 (the `s3` extra):
pyarrow's S3 client exposes neither `If-Match` nor `If-None-Match`. A tag is the object's ETag.

Each call raises what boto3 raises; conditional_writes runs it within the store's deadline and reads a refusal
(`refused`) as False or None, anything else as one line naming the file.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import TYPE_CHECKING, Any

from nmt_core.gates.gate import network_timeout
from sweeper.space.spec import SpecError
from sweeper.storage.store import fs_options

if TYPE_CHECKING:
    from sweeper.storage.store import Storage

REFUSED = ("PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey", "404", "412")  # the condition failed
EXTRA = "a sweep on S3 takes its lock with S3's conditional write, which needs boto3: pip install 'nmt-sweeper[s3]'"


def put(storage: Storage, data: bytes, bucket: str, key: str, if_match: str | None, if_none_match: bool) -> str:
    """`data` at bucket/key, If-Match `if_match` (or, with `if_none_match`, If-None-Match: *); its new ETag."""
    conditions = {"IfMatch": if_match} if if_match else {"IfNoneMatch": "*"} if if_none_match else {}
    return client(storage).put_object(Bucket=bucket, Key=key, Body=data, **conditions)["ETag"]


def get(storage: Storage, limit: int, bucket: str, key: str) -> tuple[bytes, str]:
    """At most `limit` + 1 bytes of the object and the ETag of what was read, in one request."""
    answer = client(storage).get_object(Bucket=bucket, Key=key)
    try:
        return answer["Body"].read(limit + 1), answer["ETag"]
    finally:
        answer["Body"].close()


def delete(storage: Storage, bucket: str, key: str, if_match: str) -> None:
    """The object deleted If-Match `if_match`."""
    client(storage).delete_object(Bucket=bucket, Key=key, IfMatch=if_match)


def tag(storage: Storage, bucket: str, key: str) -> str:
    """The object's ETag now (a HEAD)."""
    return client(storage).head_object(Bucket=bucket, Key=key)["ETag"]


def failures() -> tuple[type[BaseException], ...]:
    """What boto3's calls raise besides OSError (a store that refused, or botocore's own failures)."""
    from botocore.exceptions import BotoCoreError, ClientError

    return ClientError, BotoCoreError


def refused(err: BaseException) -> bool:
    """The failure is S3's answer that the condition failed or the object is not there."""
    from botocore.exceptions import ClientError

    return isinstance(err, ClientError) and str(err.response.get("Error", {}).get("Code")) in REFUSED


def load() -> ModuleType:
    """The client's module (boto3, the extra): an ImportError where it is not installed."""
    import boto3

    return boto3


def client(storage: Storage) -> Any:
    """A boto3 S3 client with the endpoint, region and credentials pyarrow was given, one per store."""
    options = fs_options(storage.fs)
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
