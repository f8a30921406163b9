"""GCS's object calls for the conditional writes (sweeper/storage/conditional_writes.py), through google-cloud-storage
(the `gcs` extra): pyarrow's GCS client does not expose generation preconditions. A tag is the object's generation, as a
string (S3's ETags are strings too); `ifGenerationMatch=0` means "only if there is none".

The client is built from the options pyarrow's GcsFileSystem was given (anonymous, an access token, or the default
credentials; an endpoint and scheme; a project), so that both reach the same store. Each call waits
network_timeout() seconds at most and is sent once (`retry=None`): a conditional put retried after it landed would
be refused by its own first attempt. Each call raises what the client raises; conditional_writes runs it within
the store's deadline and reads a refusal (`refused`) as False or None, anything else as one line naming the file.
"""

from __future__ import annotations

import functools
import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any

from nmt_core.gates.gate import network_timeout
from sweeper.space.spec import SpecError
from sweeper.storage.store import fs_options

if TYPE_CHECKING:
    from sweeper.storage.store import Storage

EXTRA = (
    "a sweep on GCS takes its lock with GCS's conditional write (generation preconditions), which needs "
    "google-cloud-storage: pip install 'nmt-sweeper[gcs]'"
)
SCOPE = "https://www.googleapis.com/auth/devstorage.read_write"  # what an impersonated account is given


def put(storage: Storage, data: bytes, bucket: str, key: str, if_match: str | None, if_none_match: bool) -> str:
    """`data` at bucket/key if its generation is still `if_match` (or, with `if_none_match`, there is none: 0);
    its new generation."""
    generation = int(if_match) if if_match else 0 if if_none_match else None
    blob = client(storage).bucket(bucket).blob(key)
    blob.upload_from_string(data, if_generation_match=generation, **once())
    return str(blob.generation)


def get(storage: Storage, limit: int, bucket: str, key: str) -> tuple[bytes, str]:
    """At most `limit` + 1 bytes of the object and the generation of what was read: its metadata, then those bytes
    of that generation (a range of an empty object is refused, 416); a newer one meanwhile reads as none (404)."""
    head = client(storage).bucket(bucket).blob(key)
    head.reload(**once())
    if not head.size:
        return b"", str(head.generation)
    pinned = client(storage).bucket(bucket).blob(key, generation=head.generation)
    return pinned.download_as_bytes(start=0, end=limit, **once()), str(head.generation)


def delete(storage: Storage, bucket: str, key: str, if_match: str) -> None:
    """The object deleted if its generation is still `if_match`."""
    client(storage).bucket(bucket).blob(key).delete(if_generation_match=int(if_match), **once())


def tag(storage: Storage, bucket: str, key: str) -> str:
    """The object's generation now (its metadata)."""
    blob = client(storage).bucket(bucket).blob(key)
    blob.reload(**once())
    return str(blob.generation)


def once() -> dict[str, Any]:
    """A call's bounds: one attempt, waiting network_timeout() seconds at most to connect or for an answer."""
    return {"timeout": network_timeout(SpecError), "retry": None}


def failures() -> tuple[type[BaseException], ...]:
    """What the client's calls raise besides OSError (an answer that is an error, credentials that fail)."""
    from google.api_core.exceptions import GoogleAPICallError
    from google.auth.exceptions import GoogleAuthError

    return GoogleAPICallError, GoogleAuthError


def refused(err: BaseException) -> bool:
    """The failure is GCS's answer that the precondition failed (412) or the object is not there (404)."""
    from google.api_core.exceptions import NotFound, PreconditionFailed

    return isinstance(err, (PreconditionFailed, NotFound))


def load() -> ModuleType:
    """The client's module (google-cloud-storage, the extra): an ImportError where it is not installed. By its full
    name: `from google.cloud import storage` finds the submodule as the package's attribute once anything imported
    it, past sys.modules, where a test marks it missing."""
    return importlib.import_module("google.cloud.storage")


def client(storage: Storage) -> Any:
    """A google-cloud-storage client with the endpoint, project and credentials pyarrow was given, one per store."""
    options = fs_options(storage.fs)
    keys = ("endpoint_override", "scheme", "project_id", "access_token", "target_service_account")
    return _client(tuple(options.get(key) or None for key in keys), bool(options.get("anonymous")))


@functools.lru_cache(maxsize=8)
def _client(options: tuple[str | None, ...], anonymous: bool) -> Any:
    from google.cloud import storage

    endpoint, scheme, project, token, account = options
    api = {"api_endpoint": f"{scheme or 'https'}://{endpoint}"} if endpoint else None
    credentials = _credentials(anonymous, token, account)
    return storage.Client(project=project or "<none>", credentials=credentials, client_options=api)


def _credentials(anonymous: bool, token: str | None, account: str | None) -> Any:
    """pyarrow's choice of credentials: anonymous, a given access token, or the default ones (None: the client
    finds them), impersonating `account` where one is named."""
    if anonymous:
        from google.auth.credentials import AnonymousCredentials

        return AnonymousCredentials()
    if token:
        from google.oauth2.credentials import Credentials

        return Credentials(token)
    if not account:
        return None
    import google.auth
    from google.auth import impersonated_credentials

    source, _ = google.auth.default()
    return impersonated_credentials.Credentials(source, target_principal=account, target_scopes=[SCOPE])
