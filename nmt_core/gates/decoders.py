"""Decoders of stored files, bounded on what they expand to, not only on their bytes (issue #61 item 1).

A file that passed the gate's read (nmt_core/gates/gate.py `read_regular`: a regular file, no link out, bounded bytes)
can still expand: a few kB of Parquet run-length encode 10^8 rows, JSON writes `NaN`, `1e400` or a 400-digit
number that no reader of a timestamp or a count expects, and a lone surrogate escape (`"\\udcff"`) that no terminal
can print. Here each is refused in one line through the caller's `error(key, message, source)`, before the value
reaches a reader: JSON numbers finite and at most JSON_DIGITS digits, strings UTF-8, nesting bounded; Parquet at
most `max_rows` rows and MAX_CELLS cells, by its footer, before a page is decoded.

The files are read whole by the gate first (`read_json_file`, `read_parquet_file`, `read_text_file`), or handed
over as bytes by sweeper.storage.store.Storage, which reads object stores within the same bounds.
"""

from __future__ import annotations

import io
import json
import math
import os
import zlib
from pathlib import Path
from typing import Any

from nmt_core.gates.gate import MAX_DEPTH, ErrorType, clip, read_regular

JSON_DIGITS = 20  # digits of an integer in a stored record: a pid, a count, a size (2^63 has 19)
MAX_CELLS = 50_000_000  # rows x columns of a stored table: a trace of a large test set has a few million
MAX_TABLE_BYTES = 2**30  # a stored table's columns, uncompressed, as its footer states them
TEXT_LIMIT = 256 * 2**20  # a stored text (a test set's translations): at most this many bytes


def json_value(body: bytes, source: str, error: ErrorType) -> Any:
    """A JSON document: UTF-8, finite numbers of at most JSON_DIGITS digits, strings that are text (no lone
    surrogate), nested at most MAX_DEPTH levels."""

    def integer(text: str) -> int:
        if len(text.lstrip("-")) > JSON_DIGITS:
            raise ValueError(f"a number of {len(text):,} digits")
        return int(text)

    def number(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise ValueError(f"{clip(text, 30)} is not a finite number")
        return value

    def constant(text: str) -> None:
        raise ValueError(f"{text} is not a number JSON allows")

    try:
        value = json.loads(body.decode("utf-8"), parse_int=integer, parse_float=number, parse_constant=constant)
        json.dumps(value, ensure_ascii=False).encode("utf-8")  # a lone surrogate escape cannot be written as UTF-8
    except RecursionError:
        raise error("(file)", "not JSON (nested too deep)", source) from None
    except ValueError as err:  # not UTF-8, not JSON, a number refused above, a surrogate (UnicodeEncodeError)
        reason = "a string that is not text (a lone surrogate)" if isinstance(err, UnicodeEncodeError) else err
        raise error("(file)", f"not JSON this version reads ({clip(str(reason), 100)})", source) from None
    if _depth(value) > MAX_DEPTH:
        raise error("(file)", f"nested deeper than {MAX_DEPTH} levels", source)
    return value


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


def parquet_table(body: bytes, source: str, error: ErrorType, max_rows: int | None = None) -> Any:
    """A Parquet file's table, refused by its footer (before a page is decoded) when it holds more than `max_rows`
    rows or MAX_CELLS cells or MAX_TABLE_BYTES uncompressed, and refused in one line when it is no Parquet file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    damage = (pa.ArrowException, OSError, ValueError, IndexError)  # not Parquet, truncated, a damaged footer
    try:
        parquet = pq.ParquetFile(io.BytesIO(body))
        meta = parquet.metadata
        uncompressed = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    except damage as err:
        raise _not_parquet(err, source, error) from None
    cells = meta.num_rows * max(meta.num_columns, 1)
    if (max_rows is not None and meta.num_rows > max_rows) or cells > MAX_CELLS or uncompressed > MAX_TABLE_BYTES:
        limit = f"{max_rows:,} rows" if max_rows is not None else f"{MAX_CELLS:,} cells"
        raise error(
            "(file)", f"{meta.num_rows:,} rows of {meta.num_columns} columns: more than the {limit} it holds", source
        )
    try:
        return parquet.read()
    except damage as err:
        raise _not_parquet(err, source, error) from None


def _not_parquet(err: Exception, source: str, error: ErrorType) -> Exception:
    return error("(file)", f"not a Parquet file this version reads ({clip(str(err).strip(), 100)})", source)


def gunzip(body: bytes, limit: int, source: str, error: ErrorType) -> bytes:
    """A gzip file's content, decompressed to at most `limit` bytes: a few kB of gzip can expand to gigabytes, so
    decompression stops past the limit instead of finishing."""
    inflate = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # gzip's header and trailer
    try:
        content = inflate.decompress(body, limit + 1)
    except zlib.error as err:
        raise error("(file)", f"not a gzip file this version reads ({clip(str(err), 100)})", source) from None
    if len(content) > limit:
        raise error("(file)", f"expands to more than {limit:,} bytes", source)
    if not inflate.eof:
        raise error("(file)", "not a gzip file this version reads (it ends before its data does)", source)
    return content


def read_json_file(path: str | os.PathLike, limit: int, error: ErrorType, within: Path | None = None) -> Any:
    return json_value(read_regular(path, limit, error, within, what="more than it ever holds"), str(path), error)


def read_parquet_file(
    path: str | os.PathLike, error: ErrorType, within: Path | None = None, max_rows: int | None = None
) -> Any:
    body = read_regular(path, TEXT_LIMIT, error, within, what="more than a trial ever writes")
    return parquet_table(body, str(path), error, max_rows)


def read_text_file(path: str | os.PathLike, error: ErrorType, within: Path | None = None) -> str:
    """A stored UTF-8 text of at most TEXT_LIMIT bytes."""
    body = read_regular(path, TEXT_LIMIT, error, within, what="more than a trial ever writes")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as err:
        raise error("(file)", f"not UTF-8 (undecodable byte at {err.start:,})", str(path)) from None
