"""The one gate: what comes in is checked here, and what goes out in a message is shown through here.

Out: every message a user sees passes `one_line` (credentials hidden, control and format characters escaped, so no
ESC byte or bidi override reaches a terminal; one line; at most LINE_BYTES bytes), and every user value in it passes
`clip` or `shown` (escaped, then cut to SHOWN_CHARS bytes) or, for a URI, `credentials.redact` (never a
credential); normal output (logs, tables, translations) passes `printable`.
In: files are read by `read_regular` (regular files only, opened without blocking so that a FIFO cannot hang,
bounded before they are read, optionally confined below a folder and never through a link there); a value tree
from Python (a dict through the API) passes `check_tree` with a file's limits (size, depth, no shared or circular
parts, plain YAML types, finite numbers); arguments that name things pass `check_text`. Writes go through
`output_folder` and `write_file` (never through a link, never over something that is not a regular file, whole or
not at all). Every network call takes `network_timeout()` seconds at most, which the user sets with
TIMEOUT_VARIABLE (a total deadline and a size cap for HTTP: nmt_core/gates/network.py, whose configure_network the entry
points call).

This module imports nothing of the project: errors are made by the caller's `error(key, message, source)`, so
nmt_core and sweeper raise their own one-line types (ConfigError, SpecError, CorpusError) through the same rules.
"""

from __future__ import annotations

import errno
import fcntl
import math
import os
import re
import stat
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

HIDDEN = "***"  # what a credential is shown as
SHOWN_CHARS = 100  # at most this much of any user value in a message
PATH_CHARS = 256  # a path is shown up to a file name's length (255), so that the folder it names stays readable
LINE_BYTES = 560  # a whole message, whatever it holds: the last bound (with "sweeper: error: ", under 600 bytes)
MAX_BYTES = 1_000_000  # a sweep space, a trial config or a sweep's state: a few kB; 1 MB is plenty
MAX_DEPTH = 32  # nesting levels of a YAML document, a dict or a state file
NAME_MAX = 255  # bytes in one part of a path (Linux and macOS)
TIMEOUT_VARIABLE = "NMT_SWEEPER_TIMEOUT"  # seconds every network call may take (connect, or wait for an answer)
DEFAULT_TIMEOUT_S = 10.0
MAX_TIMEOUT_S = 3600.0
MAX_CHECKPOINT_BYTES = 8 * 2**30  # any checkpoint or model file read (a base Transformer's last.pt is under 1 GB)
SCALARS = (str, int, float, bool, type(None))  # what YAML's safe loader builds, and JSON

# (dotted key or "(file)", what is allowed, source) -> the caller's one-line error (ConfigError, SpecError, ...)
ErrorType = Callable[[str, str, str], Exception]


# ---- out: what a message may show ----


def escape(text: str) -> str:
    """`text` with every character that is not printable written as Python writes it (`\\x1b`, `\\n`, `\\u2028`,
    `\\u202e`): no C0 or C1 control, line break, bidi override or other format character survives."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def printable(text: str) -> str:
    """Normal output (a log, a table, a translation) as a terminal may show it: each line escaped as `escape` does,
    the line breaks and tabs kept."""
    if text.isprintable():
        return text
    return "\n".join("\t".join(escape(part) for part in line.split("\t")) for line in text.split("\n"))


def cut(text: str, limit: int) -> str:
    """`text` cut to at most `limit` bytes of UTF-8, never inside a character."""
    data = text.encode("utf-8", "backslashreplace")
    return text if len(data) <= limit else data[:limit].decode("utf-8", "ignore")


def clip(text: Any, limit: int = SHOWN_CHARS) -> str:
    """A user's text (a key, a name, a path) escaped, then cut to `limit` bytes, saying how long it was: cut after
    escaping, so that what is shown is bounded whatever it held."""
    text = text if isinstance(text, str) else str(text)
    shown_text = escape(text)
    if len(shown_text.encode("utf-8", "backslashreplace")) > limit:
        return f"{cut(shown_text, limit)}... ({len(text):,} characters)"
    return shown_text


def clip_path(path: Any) -> str:
    """A path, escaped and cut to PATH_CHARS bytes."""
    return clip(os.fspath(path) if isinstance(path, os.PathLike) else path, PATH_CHARS)


def shown(value: Any) -> str:
    """The repr of a value, escaped and cut to SHOWN_CHARS bytes: an error line never echoes a huge value. An integer
    too long for Python to print (over 4,300 digits) is named by its length, and a value whose repr fails (a hostile
    object) by its type."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 4096:
        return f"an integer of about {int(value.bit_length() * math.log10(2)):,} digits"
    try:
        text = repr(value)
        if not isinstance(text, str):
            raise TypeError("__repr__ returned no string")
    except (ValueError, RecursionError):  # a deep or circular value, or a huge integer inside one
        return f"a {type(value).__name__} too large to show"
    except Exception:  # noqa: BLE001 - an object whose __repr__ raises is named, never trusted
        return f"a {type(value).__name__} that cannot be shown"
    return clip(text)


# in free text (a server's error, a library's exception): a URL's userinfo, a `key=value` or `"key": "value"` whose
# key names a secret, and an Authorization header's scheme and token
TEXT_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^\s/?#@]+@")
TEXT_PAIR = re.compile(  # a key that ends in a secret's name (checked by _names_secret), its separator, its value
    r"""(?i)([a-z0-9_.\-]*(?:secret|passw(?:or)?d|pwd|token|credentials?|signature|sig|(?:api|access|private|secret)_?key))"""
    r"""(["']?\s*(?:[=:]|%3[da])\s*["']?)([^\s"'&;,?#}\]]+)"""
)
TEXT_AUTHORIZATION = re.compile(r"(?i)\b(bearer|basic|token)(\s+)[\w.~+/=\-]{4,}")
TEXT_SECRET_WORDS = ("secret", "password", "passwd", "pwd", "token", "credential", "credentials", "signature", "sig")
TEXT_SECRET_WORDS += ("apikey", "accesskey", "privatekey")
NOT_SECRETS = ("PWD",)  # the shell's working folder, not a password
MIN_SECRET = 6  # an environment variable's value shorter than this is no secret worth hiding (it would hide words)


def hide_secrets(text: str) -> str:
    """Free text (a server's or a library's message, a log) with every credential it may carry replaced by ***: a
    URL's userinfo, the value of a key that names a secret (`password=`, `aws_secret_access_key: `, `"token": "`),
    an Authorization header's token, and the value of every secret-named environment variable (RAY_AUTH_TOKEN,
    MLFLOW_TRACKING_PASSWORD, AWS_SECRET_ACCESS_KEY, ...) wherever it appears, in any form a server may echo it
    in: as is, percent-encoded (either case of hex), base64 (standard or URL-safe, padded or not), and base64 of
    `user:password` as basic auth sends it."""
    for form in secret_forms():
        if "%" in form and form.lower() in text.lower():  # a percent-encoding's hex in either case
            text = re.sub(re.escape(form), HIDDEN, text, flags=re.IGNORECASE)
        elif form in text:
            text = text.replace(form, HIDDEN)
    text = TEXT_USERINFO.sub(lambda m: f"{m[1]}{HIDDEN}@", text)
    text = TEXT_AUTHORIZATION.sub(lambda m: f"{m[1]}{m[2]}{HIDDEN}", text)
    return TEXT_PAIR.sub(lambda m: f"{m[1]}{m[2]}{HIDDEN}" if _names_secret(m[1]) else m[0], text)


BASIC_AUTH_PAIRS = (("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"),)  # sent as base64 of `user:password`


def secret_forms() -> list[str]:
    """Every form of every secret in the environment that a message may carry, longest first (a form that holds
    another is hidden whole)."""
    secrets = [
        value
        for name, value in os.environ.items()
        if len(value) >= MIN_SECRET and _names_secret(name) and name not in NOT_SECRETS
    ]
    forms = {form for value in secrets for form in _encodings(value)}
    for user, password in BASIC_AUTH_PAIRS:
        if os.environ.get(user) and os.environ.get(password):
            forms |= set(_encodings(f"{os.environ[user]}:{os.environ[password]}", plain=False))
    return sorted((form for form in forms if len(form) >= MIN_SECRET), key=len, reverse=True)


def _encodings(value: str, plain: bool = True) -> list[str]:
    """`value` as is (with `plain`), percent-encoded, and in base64."""
    from base64 import b64encode, urlsafe_b64encode
    from urllib.parse import quote, quote_plus

    data = value.encode("utf-8", "surrogatepass")
    coded = [b64encode(data).decode(), urlsafe_b64encode(data).decode()]
    forms = [quote(value, safe=""), quote(value), quote_plus(value), *coded, *(c.rstrip("=") for c in coded)]
    return ([value] if plain else []) + forms


def _names_secret(key: str) -> bool:
    """In free text, a key whose last word names a secret (`password`, `aws_secret_access_key`, `X-Amz-Signature`);
    a key that merely holds such a word (`train.token_budget: must be ...`) is a setting, shown."""
    words = "".join(c if c.isalnum() else " " for c in key.lower()).split()
    if not words:
        return False
    last, before = words[-1], words[-2] if len(words) > 1 else ""
    return last in TEXT_SECRET_WORDS or (last == "key" and before in ("secret", "access", "api", "private"))


def one_line(message: Any) -> str:
    """The last step before a message reaches a person: credentials hidden (hide_secrets), one line, control and
    format characters escaped, at most LINE_BYTES bytes."""
    try:
        text = message if isinstance(message, str) else str(message)
    except Exception:  # noqa: BLE001 - an exception whose __str__ raises
        text = f"{type(message).__name__} (its message cannot be shown)"
    text = escape(hide_secrets(text[: 8 * LINE_BYTES]))
    return text if len(text.encode("utf-8")) <= LINE_BYTES else cut(text, LINE_BYTES - 7) + " (cut)"


# ---- in: arguments, value trees ----


class ConfigError(ValueError):
    """Bad user input; the message is one line naming the file, the dotted key and what is allowed.

    Values in the message go through `shown`; a key and the source are user input too and are cut here, and the
    whole line passes the gate's `one_line` (below): no control character reaches a terminal. The parts
    stay readable (`key`, `source`, `message`): a caller that names the key otherwise re-raises them, never parses."""

    def __init__(self, key: str, message: str, source: str = "<config>"):
        key = key if len(key) <= SHOWN_CHARS else f"{key[:SHOWN_CHARS]}..."
        self.key, self.source, self.message = escape(key), clip_path(source), one_line(message)
        super().__init__(one_line(f"{self.source}: {self.key}: {message}"))


def check_text(value: Any, key: str, source: str, error: ErrorType, limit: int = 4096) -> str:
    """An argument that names something (a run id, an address, a path): a string of printable characters without
    spaces around it, at most `limit` long."""
    if not isinstance(value, str):
        raise error(key, f"must be a string (got {shown(value)})", source)
    if len(value) > limit:
        raise error(key, f"longer than {limit:,} characters (got {shown(value)})", source)
    if not value.isprintable() or value != value.strip():
        raise error(key, f"control characters or spaces around it are not allowed (got {shown(value)})", source)
    return value


def check_tree(value: Any, source: str, error: ErrorType, max_bytes: int = MAX_BYTES) -> None:
    """A value built in Python (the API's dict of a space, its overrides) held to a YAML file's limits: plain YAML
    types only, nested at most MAX_DEPTH levels, no part shared or circular (what aliases would be in a file),
    finite numbers, and at most `max_bytes` of keys and values written out."""
    budget = [max_bytes]
    _check_node(value, "", 0, set(), budget, source, error)


def _check_node(value: Any, path: str, depth: int, seen: set[int], budget: list[int], source, error) -> None:
    where = path.rstrip(".") or "(file)"
    if isinstance(value, (Mapping, list, tuple)):
        if depth >= MAX_DEPTH:
            raise error("(file)", f"nested deeper than {MAX_DEPTH} levels (at {clip(where)})", source)
        if id(value) in seen:
            raise error(where, "the same list or mapping appears twice (as a YAML alias would): write it out", source)
        seen.add(id(value))
        items = value.items() if isinstance(value, Mapping) else enumerate(value)
        for key, item in items:
            if isinstance(value, Mapping):
                _check_key(key, where, source, error)
            _spend(key, budget, source, error)
            name = key if isinstance(key, str) else shown(key)  # an integer key may be too long to print
            _check_node(item, f"{path}{name}.", depth + 1, seen, budget, source, error)
        return
    if not isinstance(value, SCALARS):
        raise error(where, f"must be a string, number, boolean, list or mapping (got {type(value).__name__})", source)
    if isinstance(value, float) and not math.isfinite(value):
        raise error(where, f"must be a finite number (got {value})", source)
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 4096:
        raise error(where, f"not a usable value ({shown(value)})", source)
    _spend(value, budget, source, error)


def _check_key(key: Any, where: str, source: str, error: ErrorType) -> None:
    """A mapping's key is a scalar YAML can write (not a tuple, nor an integer too long to print)."""
    too_long = isinstance(key, int) and not isinstance(key, bool) and key.bit_length() > 4096
    if not isinstance(key, SCALARS) or too_long or (isinstance(key, float) and not math.isfinite(key)):
        raise error(where, f"a key must be a string or a number (got {shown(key)})", source)


def _spend(value: Any, budget: list[int], source: str, error: ErrorType) -> None:
    """Count a scalar's written-out size against the budget (a string by its length: no copy is made)."""
    budget[0] -= len(value) if isinstance(value, str) else 8
    if budget[0] < 0:
        raise error(
            "(file)", f"larger than {MAX_BYTES:,} bytes written out; a sweep space or config is a few kB", source
        )


# ---- in: files ----


@contextmanager
def open_regular(
    path: str | os.PathLike, error: ErrorType, within: Path | None = None, key: str = "(file)", one_link: bool = False
) -> Iterator[tuple[int, os.stat_result]]:
    """An open descriptor of a regular file and its stat: opened without blocking (a FIFO cannot hang the open) and
    refused unless it is a regular file. With `within`, the file must lie below that folder and be no link; with
    `one_link`, no hard link either (a log that is printed: `ln /elsewhere/victim sweep.log` printed the victim)."""
    shown_path = clip_path(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    if within is not None:
        flags |= os.O_NOFOLLOW
        _check_within(Path(path), within, key, error)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        reason = "a link, which is not followed here" if err.errno == 40 else err.strerror  # ELOOP: O_NOFOLLOW
        raise error(key, f"cannot read: {reason}", shown_path) from None
    except ValueError:  # a NUL in the name
        raise error(key, "cannot read: not a file name (it holds a NUL character)", shown_path) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise error(key, "cannot read: Is a directory", shown_path)
        if not stat.S_ISREG(info.st_mode):
            raise error(key, "not a regular file (a device, pipe or socket); give a file", shown_path)
        if one_link:
            _check_one_link(info, key, shown_path, error)
        os.set_blocking(fd, True)
        yield fd, info
    finally:
        os.close(fd)


def read_regular(
    path: str | os.PathLike,
    limit: int,
    error: ErrorType,
    within: Path | None = None,
    key: str = "(file)",
    what: str = "a sweep space or config is a few kB",
) -> bytes:
    """At most `limit` bytes of a regular file (see open_regular); a larger one is refused before it is read."""
    with open_regular(path, error, within, key) as (fd, info):
        if info.st_size > limit:
            raise error(key, f"larger than {limit:,} bytes; {what}", clip_path(path))
        chunks, left = [], limit + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
    body = b"".join(chunks)
    if len(body) > limit:  # grew while it was read
        raise error(key, f"larger than {limit:,} bytes; {what}", clip_path(path))
    return body


def _check_within(path: Path, folder: Path, key: str, error: ErrorType) -> None:
    """`path`'s folder, links resolved, lies below `folder` (itself resolved): no link leads out of it."""
    try:
        inside = path.parent.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError, ValueError):  # a link loop, a name too long or holding a NUL
        inside = False
    if not inside:
        raise error(
            key, f"lies outside {clip_path(folder)} through a link; nothing is read or written there", clip_path(path)
        )


def _check_one_link(info: os.stat_result, key: str, shown_path: str, error: ErrorType) -> None:
    """A file this program writes, appends to or prints has one name: a hard link is another file's second name
    (checked on the open descriptor's stat, not the path's, so nothing can swap it in between)."""
    if info.st_nlink != 1:
        raise error(
            key, f"has {info.st_nlink} names (a hard link to a file elsewhere); a file here has one", shown_path
        )


def inside(path: Path, root: Path) -> bool:
    """`path`, links resolved, lies at or below `root` (itself resolved); False where it cannot be resolved."""
    try:
        return path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError, ValueError):  # a link loop, a name too long or holding a NUL
        return False


# ---- out: files ----


def make_folder_within(folder: Path, root: Path, error: ErrorType, key: str = "(file)") -> Path:
    """`folder` and its missing parents made, only once the part of it that exists is proven to lie below `root`
    (links resolved), or, where the root does not exist yet, once it is made with them: a link planted in storage
    (`ln -s /elsewhere sweeps/NAME/summary`) made the summary create /elsewhere/data before its write was refused."""
    existing, missing = folder, []
    while not os.path.lexists(existing) and existing != existing.parent:
        missing.append(existing)
        existing = existing.parent
    fresh = not os.path.lexists(root) and root.is_relative_to(existing)  # the root itself is made here too
    if not (fresh or inside(existing, root)):
        raise error(
            key, f"lies outside {clip_path(root)} through a link; nothing is made or written there", clip_path(folder)
        )
    for part in reversed(missing):
        try:
            os.mkdir(part)
        except FileExistsError:  # made by another process meanwhile: a folder is fine, anything else is not
            if not part.is_dir() or part.is_symlink():
                raise error(key, "is not a folder; nothing is written there", clip_path(part)) from None
        except OSError as err:
            raise error(key, f"cannot make {clip_path(part)}: {err.strerror}", clip_path(folder)) from None
    return folder


def output_folder(path: str | os.PathLike, key: str, source: str, error: ErrorType) -> Path:
    """A folder to write into, as given: a new one (made, with its parents) or an existing folder; a file, a link or
    anything else there is refused before anything is written."""
    folder = check_output_folder(path, key, source, error)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise error(key, f"cannot make {clip_path(folder)}: {err.strerror}", source) from None
    return folder


def check_output_folder(path: str | os.PathLike, key: str, source: str, error: ErrorType) -> Path:
    """`path` names a new folder or an existing one, not a file, a link or a device (nothing is made yet): a name no
    folder can have (a part over NAME_MAX bytes, a NUL) is refused before any of its parents is made."""
    folder = Path(path)
    try:
        if any(len(os.fsencode(part)) > NAME_MAX for part in folder.parts) or "\0" in str(folder):
            raise OSError(36, "File name too long, or holding a NUL")
        info = folder.lstat()
    except FileNotFoundError:
        info = None
    except (OSError, ValueError) as err:  # ValueError: a name that is no file name (unencodable)
        raise error(key, f"cannot use {clip_path(folder)}: {getattr(err, 'strerror', None) or err}", source) from None
    if info is not None and stat.S_ISLNK(info.st_mode):
        raise error(key, f"{clip_path(folder)} is a link; name the folder it points to", source)
    if info is not None and not stat.S_ISDIR(info.st_mode):
        raise error(key, f"{clip_path(folder)} is a file, not a folder; name a new or existing folder", source)
    return folder


def write_file(
    folder: Path, name: str, data: bytes, error: ErrorType, key: str = "(file)", within: Path | None = None
) -> Path:
    """`folder/name` holding `data`, written as `write_with` writes."""
    return write_with(folder, name, lambda handle: handle.write(data), error, key, within)


def write_with(
    folder: Path,
    name: str,
    write: Callable[[BinaryIO], Any],
    error: ErrorType,
    key: str = "(file)",
    within: Path | None = None,
) -> Path:
    """`folder/name` written by `write(handle)` whole or not at all, the project's one atomic writer: a new temporary
    file in the same folder (never a link's target), flushed to disk, then renamed over the old one, so that neither
    a crash nor a reader ever sees half a file (a checkpoint, a cache, a sweep's state); something there that is not
    a regular file (a link, a folder, a FIFO) is refused. With `within` (a storage's root), the folder must lie
    below it, links resolved: without it there is nothing to compare the folder with but itself."""
    target = folder / name
    _check_within(target, within or folder, key, error)
    try:
        info = target.lstat()
    except FileNotFoundError:
        info = None
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise error(
            key, "is a link, a folder or a device, not a file this wrote: nothing is written over it", clip_path(target)
        )
    temporary = folder / f".{name}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            with os.fdopen(fd, "wb") as handle:
                write(handle)
                handle.flush()
                os.fsync(handle.fileno())  # on disk before its name is: a crash leaves the old file, not an empty one
            os.replace(temporary, target)
        finally:
            temporary.unlink(missing_ok=True)
    except OSError as err:
        raise error(key, f"cannot write: {err.strerror}", clip_path(target)) from None
    return target


@contextmanager
def exclusive(lock: Path, error: ErrorType) -> Iterator[None]:
    """One process at a time in the block (trials of a sweep on a fresh node prepare the same cache at once; the
    others wait, then find it ready): an flock on `lock`, a regular file made in its folder, never through a link.
    Opened without blocking, as open_regular opens: a FIFO planted there held the open for ever (a write-only open
    waits for a reader); a link, a FIFO or a folder there is one line through `error`."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(lock, flags, 0o644)
    except OSError as err:
        reason = {40: "a link, which is not followed here", 6: "a FIFO"}.get(err.errno, err.strerror)  # ELOOP, ENXIO
        raise error("(file)", f"cannot take the lock: {reason}", clip_path(lock)) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise error("(file)", "cannot take the lock: not a regular file", clip_path(lock))
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def open_append(path: Path, error: ErrorType, key: str = "(file)") -> int:
    """A descriptor to append to a log (`sweep.log`, `metrics.jsonl`), made if need be: never through a link (a
    symbolic one fails the open, a hard one the link count), never a FIFO or device (opened without blocking, so a
    FIFO with no reader fails at once and one with a reader is refused by its type), all checked on the descriptor."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as err:
        reason = {errno.ELOOP: "a link, which is not followed here", errno.ENXIO: "a FIFO"}.get(err.errno, err.strerror)
        raise error(key, f"cannot append: {reason}", clip_path(path)) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise error(key, "cannot append: not a regular file (a device, pipe or socket)", clip_path(path))
        _check_one_link(info, key, clip_path(path), error)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def append_line(path: Path, line: str, error: ErrorType = ConfigError) -> None:
    """One line appended to a log file (see open_append)."""
    with os.fdopen(open_append(path, error), "a", encoding="utf-8") as handle:
        handle.write(line)


# ---- time ----


def network_timeout(error: ErrorType | None = None) -> float:
    """Seconds a network call may take: $NMT_SWEEPER_TIMEOUT, else DEFAULT_TIMEOUT_S."""
    return seconds_from(TIMEOUT_VARIABLE, DEFAULT_TIMEOUT_S, error)


def seconds_from(variable: str, default: float, error: ErrorType | None = None) -> float:
    """A wait in seconds from the environment, else `default`; a bad value is refused (with `error`) or, without
    one, the default is used."""
    raw = os.environ.get(variable)
    if raw is None:
        return default
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds <= MAX_TIMEOUT_S:
        if error is None:
            return default
        raise error(
            variable, f"must be a number of seconds in (0, {MAX_TIMEOUT_S:g}] (got {shown(raw)})", "environment"
        )
    return seconds


def network_environment(error: ErrorType | None = None) -> dict[str, str]:
    """The MLflow client's settings that bound one call by network_timeout(): a short wait and two quick retries
    (MLflow's own defaults retry 7 times with a growing backoff: over four minutes for a server that is gone)."""
    seconds = network_timeout(error)
    return {
        "MLFLOW_HTTP_REQUEST_TIMEOUT": str(max(1, math.ceil(seconds))),
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
        "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
        "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0.5",
        "PGCONNECT_TIMEOUT": str(max(2, math.ceil(seconds))),  # libpq's connect (psycopg2: a PostgreSQL store)
    }
