"""Where a sweep keeps its trials, state and results: a local folder, a shared volume, or object storage.

Every file the sweeper keeps there goes through pyarrow.fs, the abstraction Ray Tune itself stores with, so
`--storage` takes what Tune takes: a folder, `file://`, `s3://bucket/prefix` (with pyarrow's query options
for S3-compatible stores: `?endpoint_override=host:9000&scheme=http`) or `gs://bucket/prefix`.
"""

from __future__ import annotations

import io
import posixpath
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from nmt_core.credentials import check_uri, redact
from sweeper.space import SpecError

SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
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
        return self.fs.get_file_info(self.path(*parts)).type != pafs.FileType.NotFound

    def read_bytes(self, *parts: str) -> bytes:
        with self.fs.open_input_stream(self.path(*parts)) as stream:
            return stream.read()

    def read_text(self, *parts: str) -> str:
        return self.read_bytes(*parts).decode("utf-8")

    def write_bytes(self, data: bytes, *parts: str) -> None:
        """Whole or not at all: an object store's put is atomic; a folder gets a temporary file, then a move."""
        target = self.path(*parts)
        self.fs.create_dir(posixpath.dirname(target), recursive=True)
        if not self.is_local:
            with self.fs.open_output_stream(target) as stream:
                stream.write(data)
            return
        tmp = f"{target}.{uuid.uuid4().hex[:8]}.tmp"
        with self.fs.open_output_stream(tmp) as stream:
            stream.write(data)
        self.fs.move(tmp, target)

    def write_text(self, text: str, *parts: str) -> None:
        self.write_bytes(text.encode("utf-8"), *parts)

    def write_parquet(self, table: pa.Table, *parts: str) -> None:
        buffer = io.BytesIO()
        pq.write_table(table, buffer)
        self.write_bytes(buffer.getvalue(), *parts)

    def read_parquet(self, *parts: str) -> pa.Table:
        return pq.read_table(io.BytesIO(self.read_bytes(*parts)))

    def delete(self, *parts: str) -> None:
        path = self.path(*parts)
        if self.fs.get_file_info(path).type != pafs.FileType.NotFound:
            self.fs.delete_file(path)

    def upload(self, local: Path, *parts: str) -> None:
        """A local folder's files into storage (the summary, written locally first)."""
        target = self.path(*parts)
        self.fs.create_dir(target, recursive=True)
        pafs.copy_files(str(local), target, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=self.fs)

    def below(self, *parts: str) -> Storage:
        return Storage(self.display(*parts), self.fs, self.path(*parts))


def open_storage(storage: str, source: str) -> Storage:
    """The storage a `--storage` value names; a scheme Ray cannot store on, or credentials in it, are bad input
    (exit 2)."""
    check_uri(storage, "storage", "--storage", source)
    match = SCHEME.match(storage)
    scheme = match.group(1).lower() if match else None
    if scheme is None or scheme == "file":
        folder = Path(storage.removeprefix("file://")).expanduser().resolve()
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
    return Storage(storage, fs, root.rstrip("/"))


def check_writable(storage: Storage, source: str) -> None:
    """Before any trial starts: the endpoint answers, the bucket exists, the credentials may write."""
    bucket = storage.root.split("/", 1)[0]
    try:
        if not storage.is_local and storage.fs.get_file_info(bucket).type == pafs.FileType.NotFound:
            raise SpecError(
                "--storage", f"{redact(storage.uri)}: bucket {bucket[:100]!r} does not exist; create it first", source
            )
        probe = f".sweeper-probe-{uuid.uuid4().hex[:8]}"
        storage.write_bytes(b"", probe)
        storage.delete(probe)
    except OSError as err:
        credentials = CREDENTIALS.get(storage.fs.type_name)
        hint = f"; check the endpoint and {credentials}" if credentials else ""
        raise SpecError(
            "--storage", f"{redact(storage.uri)}: cannot write there ({first_line(err)}){hint}", source
        ) from None


def first_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return (lines[0] if lines else type(err).__name__).split("; Details:")[0][:240]
