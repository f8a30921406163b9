"""Where a sweep keeps its trials, state and results: a local folder, a shared volume, or object storage.

Every file the sweeper keeps there goes through pyarrow.fs, the abstraction Ray Tune itself stores with, so
`--storage` takes what Tune takes: a folder, `file://`, `s3://bucket/prefix` (with pyarrow's query options
for S3-compatible stores: `?endpoint_override=host:9000&scheme=http`) or `gs://bucket/prefix`.
"""

from __future__ import annotations

import contextlib
import io
import os
import posixpath
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from nmt_core.gates.credentials import check_uri, redact
from nmt_core.gates.deadline import CallLimit, call_limit, carried
from nmt_core.gates.decoders import json_value, parquet_table
from nmt_core.gates.gate import (
    SHOWN_CHARS,
    ErrorType,
    clip,
    clip_path,
    make_folder_within,
    network_timeout,
    open_regular,
    read_regular,
    write_file,
)
from nmt_core.gates.network import ANSWER_BYTES, DOWNLOAD_S
from sweeper.space.spec import SpecError

T = TypeVar("T")
SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
READ_LIMIT = 256 * 2**20  # what one file of a sweep's storage may hold when it is read back whole (results, log)
TOO_LARGE = "more than a sweep ever writes there: the storage is damaged"
OBJECT_STORES = ("s3", "gs", "gcs")  # what pyarrow.fs (and so Ray) opens besides local folders
CREDENTIALS = {
    "s3": "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)",  # by pyarrow's type_name
    "gcs": "GOOGLE_APPLICATION_CREDENTIALS",
}


@dataclass(frozen=True)
class Storage:
    """A root on a pyarrow filesystem; paths below it are '/'-joined, never pathlib."""

    uri: str  # as the user gave it: shown in messages and in `sweeper resume` hints
    fs: pafs.FileSystem
    root: str  # the root's path on `fs` (a bucket/prefix for object stores)
    top: str = ""  # the storage root this one lies below (`below` keeps it): no file is read or written outside it

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    def path(self, *parts: str) -> str:
        return posixpath.join(self.root, *parts)

    def display(self, *parts: str) -> str:
        """A path below the root as the user would type it (a URI for object storage)."""
        if self.is_local:
            return self.path(*parts)
        base, _, query = self.uri.partition("?")
        return posixpath.join(base.rstrip("/"), *parts) + (f"?{query}" if query else "")

    def exists(self, *parts: str) -> bool:
        with self.one_line(*parts):
            return self.info(self.path(*parts)).type != pafs.FileType.NotFound

    def info(self, path: str | pafs.FileSelector) -> Any:
        """pyarrow's get_file_info of a path (a FileInfo) or a selector (a list of them), within the deadline."""
        return self.bounded(self.fs.get_file_info, path)

    def bounded(self, call: Callable[..., T], *args: Any, seconds: float | None = None) -> T:
        """`call(*args)` on an object store within `seconds` (network_timeout() unless given), or what is left of the
        command's deadline (nmt_core/gates/deadline.py); a folder's calls run as they are."""
        if self.is_local:
            return call(*args)
        return within_deadline(call_limit(seconds or network_timeout(SpecError)), call, *args)

    def read_bytes(self, *parts: str, limit: int = READ_LIMIT, error: ErrorType = SpecError) -> bytes:
        """A file of at most `limit` bytes, refused before it is read: in a folder, through the gate (a regular file
        below the storage root, no link, no FIFO or device; nmt_core/gates/gate.py)."""
        if self.is_local:
            return read_regular(self.path(*parts), limit, error, within=Path(self.top or self.root), what=TOO_LARGE)
        with self.one_line(*parts):
            size = self.info(self.path(*parts)).size or 0
            if size <= limit:
                body = self.bounded(self._read_remote, self.path(*parts), limit, seconds=body_deadline(size))
            if size > limit or len(body) > limit:  # larger, or grew while it was read
                raise error("(file)", f"larger than {limit:,} bytes; {TOO_LARGE}", self.display(*parts))
            return body

    def _read_remote(self, path: str, limit: int, from_end: bool = False) -> bytes:
        """At most limit + 1 bytes of an object, or its last `limit` bytes (a log's end)."""
        if not from_end:
            with self.fs.open_input_stream(path) as stream:
                return stream.read(limit + 1)
        with self.fs.open_input_file(path) as handle:
            handle.seek(max(handle.size() - limit, 0))
            return handle.read(limit)

    def read_end(self, *parts: str, limit: int = READ_LIMIT, error: ErrorType = SpecError) -> bytes:
        """The last `limit` bytes of a file (a log's end), through the same gate as read_bytes."""
        if self.is_local:  # a log that is printed: no hard link to a file elsewhere either
            within = Path(self.top or self.root)
            with open_regular(self.path(*parts), error, within, one_link=True) as (fd, info):
                os.lseek(fd, max(info.st_size - limit, 0), os.SEEK_SET)
                return os.read(fd, limit)
        with self.one_line(*parts):
            return self.bounded(self._read_remote, self.path(*parts), limit, True, seconds=body_deadline(limit))

    def read_text(self, *parts: str, limit: int = READ_LIMIT) -> str:
        return self.read_bytes(*parts, limit=limit).decode("utf-8")

    def read_json(self, *parts: str, limit: int = READ_LIMIT, error: ErrorType = SpecError) -> Any:
        """A JSON file, read as read_bytes does and decoded within nmt_core.gates.decoders' bounds."""
        return json_value(self.read_bytes(*parts, limit=limit, error=error), self.display(*parts), error)

    def write_bytes(self, data: bytes, *parts: str) -> None:
        """Whole or not at all: an object store's put is atomic; in a folder, the gate's write (a new temporary file,
        then a rename; never through a link, never out of the storage root)."""
        target = self.path(*parts)
        if self.is_local:
            folder = self.local_folder(*parts)
            write_file(folder, Path(target).name, data, SpecError, within=Path(self.top or self.root))
            return
        with self.one_line(*parts):
            self.bounded(partial(self.fs.create_dir, recursive=True), posixpath.dirname(target))
            self.bounded(self._write_remote, target, data, seconds=body_deadline(len(data)))

    def local_folder(self, *parts: str) -> Path:
        """The folder of a local file below the root, made only once what exists of it is proven to lie inside the
        storage (a link planted in storage must not make the sweeper make or write anything elsewhere; the storage
        root itself may be a link, as it was resolved when opened)."""
        return make_folder_within(Path(self.path(*parts)).parent, Path(self.top or self.root), SpecError)

    def _write_remote(self, target: str, data: bytes) -> None:
        with self.fs.open_output_stream(target) as stream:
            stream.write(data)

    @contextmanager
    def one_line(self, *parts: str) -> Iterator[None]:
        """An object store or folder that fails (unreachable, refused, gone) as one line naming the file."""
        try:
            yield
        except OSError as err:
            raise SpecError("(file)", f"storage failed: {first_line(err)}", self.display(*parts)) from None

    def write_text(self, text: str, *parts: str) -> None:
        self.write_bytes(text.encode("utf-8"), *parts)

    @property
    def conditional(self) -> bool:
        """Whether writes here can be conditional (S3's If-Match, GCS's generation preconditions; through their own
        clients, as pyarrow exposes neither: sweeper/storage/conditional_writes.py)."""
        return isinstance(self.fs, (pafs.S3FileSystem, pafs.GcsFileSystem))

    def write_parquet(self, table: pa.Table, *parts: str) -> None:
        buffer = io.BytesIO()
        pq.write_table(table, buffer)
        self.write_bytes(buffer.getvalue(), *parts)

    def read_parquet(self, *parts: str, max_rows: int | None = None, error: ErrorType = SpecError) -> pa.Table:
        """A Parquet file, read as read_bytes does, refused by its footer if it expands beyond `max_rows` rows
        (nmt_core.gates.decoders)."""
        return parquet_table(self.read_bytes(*parts, error=error), self.display(*parts), error, max_rows)

    def delete(self, *parts: str) -> None:
        path = self.path(*parts)
        with self.one_line(*parts):
            if self.info(path).type != pafs.FileType.NotFound:
                self.bounded(self.fs.delete_file, path)

    def upload(self, local: Path, *parts: str) -> None:
        """A local folder's files into storage (the summary, written locally first), each through write_bytes."""
        for path in sorted(local.rglob("*")):
            if path.is_file() and not path.is_symlink():
                self.write_bytes(path.read_bytes(), *parts, *path.relative_to(local).parts)

    def missing_folders(self, *parts: str) -> list[Path]:
        """The local folders that writing `parts` would create (its folder, and any missing above it), deepest
        first; none on object storage, where a folder is only a prefix."""
        if not self.is_local:
            return []
        missing, folder = [], Path(self.path(*parts)).parent
        while not folder.exists() and folder != folder.parent:
            missing.append(folder)
            folder = folder.parent
        return missing

    def below(self, *parts: str) -> Storage:
        return Storage(self.display(*parts), self.fs, self.path(*parts), self.top or self.root)


def open_storage(storage: str, source: str) -> Storage:
    """The storage a `--storage` value names; a scheme Ray cannot store on, credentials in it, or a file where a
    folder should be, are bad input (exit 2)."""
    check_uri(storage, "storage", "--storage", source)
    match = SCHEME.match(storage)
    scheme = match.group(1).lower() if match else None
    if scheme is None or storage[:5].lower() == "file:":
        path = file_uri_path(storage, source) if storage[:5].lower() == "file:" else storage
        folder = Path(path).expanduser().resolve()
        if folder.exists() and not folder.is_dir():
            raise SpecError("--storage", f"{clip_path(folder)} is a file, not a folder; name a folder", source)
        return Storage(str(folder), pafs.LocalFileSystem(), folder.as_posix())
    if scheme not in OBJECT_STORES:
        raise SpecError(
            "--storage",
            f"{redact(storage)}: {scheme[:20]}:// is not a storage Ray Tune can use; use a "
            "folder every node sees (a ReadWriteMany volume or NFS on a cluster), s3://bucket/prefix or "
            "gs://bucket/prefix",
            source,
        )
    try:
        fs, root = pafs.FileSystem.from_uri(storage)
    except (pa.ArrowInvalid, OSError) as err:
        raise SpecError("--storage", f"{redact(storage)}: {first_line(err)}", source) from None
    return Storage(storage, with_timeouts(fs), root.rstrip("/"))


def file_uri_path(uri: str, source: str) -> str:
    """The folder a `file:` URI names, as RFC 8089 reads it: the scheme in any case; `file:///path`,
    `file://localhost/path` and `file:/path` name /path on this machine (percent-decoded); another host, a port or
    a relative path is refused (none is a folder here, and none may become a folder named `file:` or `localhost`)."""
    rest = uri[len("file:") :]
    if rest.startswith("//"):
        host, slash, path = rest[2:].partition("/")
        if host.lower() not in ("", "localhost"):
            raise SpecError(
                "--storage",
                f"{redact(uri)}: a file URI names a folder on this machine (file:///path or file://localhost/path), "
                f"not one on {clip(host, 50)}",
                source,
            )
        rest = slash + path
    if not rest.startswith("/"):
        raise SpecError("--storage", f"{redact(uri)}: a file URI's path is absolute (file:///path)", source)
    return unquote(rest)


def with_timeouts(fs: pafs.FileSystem) -> pafs.FileSystem:
    """An object store's filesystem (the one Ray Tune writes with, too) whose calls wait network_timeout() seconds
    at most to connect or for an answer: an unreachable endpoint is one line in seconds, not minutes."""
    seconds = network_timeout(SpecError)
    rebuild, options = fs.__reduce__()[0], fs_options(fs)
    if isinstance(fs, pafs.S3FileSystem):
        return rebuild({**options, "connect_timeout": seconds, "request_timeout": seconds})
    if isinstance(fs, pafs.GcsFileSystem):
        return rebuild({**options, "retry_time_limit": timedelta(seconds=seconds)})
    return fs


def fs_options(fs: pafs.FileSystem) -> dict[str, Any]:
    """The options pyarrow's S3FileSystem or GcsFileSystem was made with (endpoint, credentials, as from_uri set
    them): pyarrow has no other accessor, and the conditional writes' clients must reach the same store."""
    return fs.__reduce__()[1][0]


def check_writable(storage: Storage, source: str) -> None:
    """Before any trial starts: the endpoint answers, the bucket exists, the credentials may write."""
    bucket = storage.root.split("/", 1)[0]
    probe = f".sweeper-probe-{uuid.uuid4().hex[:8]}"
    made = storage.missing_folders(probe)
    try:
        if not storage.is_local and storage.info(bucket).type == pafs.FileType.NotFound:
            raise SpecError(
                "--storage", f"{redact(storage.uri)}: bucket {bucket[:100]!r} does not exist; create it first", source
            )
        storage.write_bytes(b"", probe)
        storage.delete(probe)
    except OSError as err:
        credentials = CREDENTIALS.get(storage.fs.type_name)
        hint = f"; check the endpoint and {credentials}" if credentials else ""
        raise SpecError(
            "--storage", f"{redact(storage.uri)}: cannot write there ({first_line(err)}){hint}", source
        ) from None
    finally:
        remove_empty(made)  # checked, not used yet: a sweep refused later leaves no folder behind


def remove_empty(folders: list[Path]) -> None:
    """Each folder of `folders` (deepest first) removed if it is empty, as a refused run must leave none behind."""
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.rmdir()  # only if empty


def body_deadline(size: int) -> float:
    """Seconds a body of `size` bytes may take to or from an object store: network_timeout(), or a download's
    DOWNLOAD_S for a body over ANSWER_BYTES (nmt_core/gates/network.py's bounds for HTTP)."""
    return DOWNLOAD_S if size > ANSWER_BYTES else network_timeout(SpecError)


def within_deadline(limit: CallLimit, call: Callable[..., T], *args: Any) -> T:
    """`call(*args)`, given at most `limit.seconds`. pyarrow's S3 client bounds a connect and a silent read, not a
    call: a store that drips its answer held a command for as long as it dripped, three attempts over. The call runs
    in a daemon thread; at the deadline the caller gets an OSError (one line through Storage.one_line) and the
    thread is left to end by pyarrow's own timeouts (or with the process). Past the command's deadline, no call
    is made."""
    if limit.passed:
        raise TimeoutError(limit.late("a store that stalls or drips"))
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call(*args)
        except BaseException as err:  # noqa: BLE001 - handed to the caller's thread
            outcome["error"] = err

    thread = threading.Thread(target=carried(run), name="storage-call", daemon=True)
    thread.start()
    thread.join(limit.seconds)
    if thread.is_alive():
        raise TimeoutError(limit.late("a store that stalls or drips"))
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def first_line(err: BaseException) -> str:
    """An error's first line, escaped and cut: pyarrow's errors repeat the bucket and key a user named."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return clip((lines[0] if lines else type(err).__name__).split("; Details:")[0], 2 * SHOWN_CHARS)
