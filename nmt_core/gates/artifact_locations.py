"""Where a tracking store may send this program for artifacts, checked before any request or copy (issue #70 item 1).

A run's artifact root, a logged model's location and a registry version's source are set by whoever created the
experiment or registered the model, not by the user who reads them. MLflow's client builds an artifact repository
for each, and its HTTP repositories attach the environment's MLflow credentials (MLFLOW_TRACKING_USERNAME and
_PASSWORD, or _TOKEN) to every request, whatever host the location names: a colleague's experiment on a lab's
server collected the password of everyone who translated its model. So every repository MLflow builds in this
process is checked first (`install` wraps ArtifactRepositoryRegistry.get_artifact_repository, the one door that
runs:/, models:/, a logged model, the summary's reads and a sweep's uploads all pass):

- `mlflow-artifacts:/path` (no host): the tracking server's own proxy;
- http(s) and `mlflow-artifacts://HOST:PORT`: the host and port of a tracking store this process opened
  (`trust_store`); another is refused in one line, unless HOSTS_VARIABLE lists it, and even then no MLflow credential
  goes there (`foreign_credentials`, which nmt_core/gates/network.py asks before every request);
- `file:` or a bare path: the folders of a local SQLite store the user named, else only below a folder that
  ROOTS_VARIABLE lists; copied as regular files only (no device, FIFO or link), at most DOWNLOAD_BYTES in all within
  DOWNLOAD_S seconds (`BoundedCopy`), where MLflow's own copy took /dev/zero until the disk was full;
- s3, gs, wasbs and dbfs: the object store that the environment's own credentials and endpoint name;
- anything else (ftp, sftp, hdfs, r2, ...): refused, unless its host is listed.

MLflow is imported only inside the functions that need it: the gates load without it.
"""

from __future__ import annotations

import base64
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from nmt_core.gates.credentials import redact
from nmt_core.gates.gate import MAX_CHECKPOINT_BYTES, ConfigError, clip, open_regular

HOSTS_VARIABLE = "NMT_SWEEPER_ARTIFACT_HOSTS"  # comma-separated HOST or HOST:PORT: read there, without credentials
ROOTS_VARIABLE = "NMT_SWEEPER_ARTIFACT_ROOTS"  # absolute folders, os.pathsep-separated: file: locations below them
DOWNLOAD_BYTES = MAX_CHECKPOINT_BYTES  # a download from a local location: what network.py allows one from a server
DOWNLOAD_S = 600.0  # and within the time network.py gives a streamed download
CHUNK = 1 << 20
INDIRECT = ("runs", "models")  # resolved by MLflow to another location, which is checked in its turn
CONFIGURED_STORES = ("s3", "gs", "wasbs", "dbfs")  # their endpoint and credentials come from the user's environment
LOCAL = ("", "file")
HTTP = ("http", "https", "mlflow-artifacts")
DEFAULT_PORTS = {"http": (80,), "https": (443,), "mlflow-artifacts": (80, 443)}

Target = tuple[str, int | None]  # (host, port)

_stores: list[str] = []  # the tracking URIs this process opened, in order: their hosts get the credentials
_watchers: list[list[ConfigError]] = []  # the open `refusals` blocks: MLflow may swallow what its threads raise
_lock = threading.Lock()


class ArtifactLocationError(ConfigError):
    """A location a tracking store named that this program does not read or write (exit 2, one line)."""

    def __init__(self, location: str, why: str, store: str | None):
        super().__init__("artifact location", f"{redact(location)}: {why}", f"tracking store {redact(store or '?')}")
        with _lock:
            for watcher in _watchers:
                watcher.append(self)


def trust_store(uri: str) -> None:
    """`uri` is a tracking store the user named (probed before use): its host may get the MLflow credentials, and a
    local SQLite store's artifact folders may be read."""
    with _lock:
        if uri not in _stores:
            _stores.append(uri)


def stores(given: str | None = None) -> list[str]:
    """The tracking stores a location is judged against: the one MLflow passed, and those this process opened."""
    with _lock:
        known = list(_stores)
    return ([given] if given else []) + [uri for uri in known if uri != given]


# ---- the hosts ----


def targets(uri: str) -> set[Target]:
    """The (host, port) pairs an http(s) or mlflow-artifacts URI connects to (a port left out: its scheme's
    well-known ones); empty for any other URI, or one without a host."""
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if scheme not in HTTP or not parts.hostname:
        return set()
    try:
        port = parts.port
    except ValueError:
        return set()
    ports = (port,) if port is not None else DEFAULT_PORTS[scheme]
    return {(parts.hostname.lower(), p) for p in ports}


def tracking_targets(given: str | None = None) -> set[Target]:
    found: set[Target] = set()
    for uri in stores(given):
        found |= targets(uri)
    return found


def listed_hosts() -> list[Target]:
    """HOSTS_VARIABLE's entries: HOST (any port) or HOST:PORT; a bad one is refused in one line."""
    entries = [entry.strip() for entry in os.environ.get(HOSTS_VARIABLE, "").split(",") if entry.strip()]
    listed = []
    for entry in entries:
        host, colon, port = entry.rpartition(":") if entry.count(":") == 1 else (entry, "", "")
        if colon and not (port.isascii() and port.isdigit() and int(port) < 65536) or not host or "/" in host:
            raise ConfigError(HOSTS_VARIABLE, f"entries are HOST or HOST:PORT, comma-separated (got {clip(entry)})")
        listed.append((host.lower(), int(port) if colon else None))
    return listed


def is_listed(uri: str) -> bool:
    parts = urlsplit(uri)
    host = (parts.hostname or "").lower()
    try:
        port = parts.port
    except ValueError:
        return False
    return any(host == name and (wanted is None or wanted == port) for name, wanted in listed_hosts())


# ---- the folders ----


def listed_roots() -> list[Path]:
    """ROOTS_VARIABLE's folders, links resolved; each must be an absolute path."""
    roots = []
    for entry in os.environ.get(ROOTS_VARIABLE, "").split(os.pathsep):
        if not entry:
            continue
        if not os.path.isabs(entry):
            raise ConfigError(ROOTS_VARIABLE, f"folders are absolute paths, {os.pathsep}-separated (got {clip(entry)})")
        roots.append(Path(entry).resolve())
    return roots


def local_path(uri: str) -> Path:
    """The folder a `file:` URI or a bare path names, links resolved."""
    path = unquote(urlsplit(uri).path) if uri.lower().startswith("file:") else uri
    return Path(path).resolve()


def own_sqlite(given: str | None) -> bool:
    """A tracking store in play is a local SQLite file the user named: its artifacts are the user's own folders."""
    return any(uri.startswith("sqlite:///") and uri != "sqlite:///:memory:" for uri in stores(given))


# ---- the check ----


def check_location(location: str, tracking_uri: str | None = None) -> None:
    """`location` (an artifact URI a store named) may be read and written here, or ArtifactLocationError says why
    not in one line; see the module's docstring for the rules."""
    scheme = urlsplit(location).scheme.lower()
    store = (stores(tracking_uri) or [None])[0]
    if scheme in INDIRECT or scheme in CONFIGURED_STORES:
        return
    if scheme == "mlflow-artifacts" and not urlsplit(location).hostname:
        return
    if scheme in HTTP:
        _check_host(location, tracking_uri, store)
    elif scheme in LOCAL or len(scheme) == 1:  # a bare path (or a Windows drive letter)
        _check_folder(location, tracking_uri, store)
    elif not is_listed(location):
        raise ArtifactLocationError(
            location,
            f"a {clip(scheme, 20)} location is not read here; artifact locations are the tracking server's own "
            f"(mlflow-artifacts:/), s3, gs or a folder; list its host in {HOSTS_VARIABLE} to read it",
            store,
        )


def _check_host(location: str, tracking_uri: str | None, store: str | None) -> None:
    if targets(location) & tracking_targets(tracking_uri) or is_listed(location):
        return
    raise ArtifactLocationError(
        location,
        "on another host or port than the tracking server, and MLflow would send it your credentials, so it is "
        f"refused; list that host in {HOSTS_VARIABLE} to read it without them",
        store,
    )


def _check_folder(location: str, tracking_uri: str | None, store: str | None) -> None:
    if own_sqlite(tracking_uri):
        return
    try:
        folder = local_path(location)
    except (OSError, RuntimeError, ValueError):
        folder = None
    if folder is not None and any(folder.is_relative_to(root) for root in listed_roots()):
        return
    raise ArtifactLocationError(
        location,
        f"a local folder the tracking server names is not read or written here; list the folder its artifacts "
        f"lie in (the server's --default-artifact-root) in {ROOTS_VARIABLE} to use it",
        store,
    )


# ---- who gets the credentials ----


def mlflow_authorizations() -> set[str]:
    """The Authorization headers MLflow's client builds from this environment (basic auth, a bearer token)."""
    user, password = os.environ.get("MLFLOW_TRACKING_USERNAME"), os.environ.get("MLFLOW_TRACKING_PASSWORD")
    token = os.environ.get("MLFLOW_TRACKING_TOKEN")
    found = set()
    if user and password:
        found.add("Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
    if token:
        found.add(f"Bearer {token}")
    return found


def foreign_credentials(url: str, authorization: str | None) -> bool:
    """A request that carries the user's MLflow credentials to a host that is no tracking store this process
    opened: they must not go (a location the user listed in HOSTS_VARIABLE is read without them). With no store
    opened yet there is nothing to compare with, and the request is left as it is."""
    if not authorization or authorization not in mlflow_authorizations():
        return False
    known = tracking_targets()
    return bool(known) and not (targets(url) & known)


@contextmanager
def refusals() -> Iterator[list[ConfigError]]:
    """The refusals raised while the block runs, in any thread: MLflow's runs:/ repository swallows what its
    download raised, and its thread pool wraps it, so the caller re-raises the first of these instead."""
    seen: list[ConfigError] = []
    with _lock:
        _watchers.append(seen)
    try:
        yield seen
    finally:
        with _lock:
            _watchers[:] = [watcher for watcher in _watchers if watcher is not seen]


# ---- MLflow's repositories ----


def install() -> None:
    """Every artifact repository MLflow builds in this process is checked first, and a local one copies within
    bounds. Idempotent; imports MLflow (its callers already have)."""
    from mlflow.store.artifact import artifact_repository_registry as registry

    cls = registry.ArtifactRepositoryRegistry
    if getattr(cls.get_artifact_repository, "checked", False):
        return
    original = cls.get_artifact_repository

    def get_artifact_repository(self, artifact_uri: str, tracking_uri: str | None = None, registry_uri=None):
        check_location(artifact_uri, tracking_uri)
        return original(self, artifact_uri, tracking_uri=tracking_uri, registry_uri=registry_uri)

    get_artifact_repository.checked = True
    cls.get_artifact_repository = get_artifact_repository
    bounded = bounded_local_repository()
    for scheme in LOCAL:
        registry._artifact_repository_registry.register(scheme, bounded)


def bounded_local_repository() -> type:
    """MLflow's LocalArtifactRepository whose downloads copy regular files only, within DOWNLOAD_BYTES in all and
    DOWNLOAD_S seconds, and whose listings stop at that deadline (a location of `file:///` is a whole disk)."""
    from mlflow.store.artifact.local_artifact_repo import LocalArtifactRepository
    from mlflow.utils.uri import validate_path_is_safe, validate_path_within_directory

    class BoundedLocalArtifactRepository(LocalArtifactRepository):
        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **kwargs)
            self.budget = BoundedCopy(self.artifact_uri)

        def list_artifacts(self, path: str | None = None):
            self.budget.check_time()
            return super().list_artifacts(path)

        def _download_file(self, remote_file_path: str, local_path: str) -> None:
            remote_file_path = validate_path_is_safe(remote_file_path)
            source = os.path.join(self.artifact_dir, os.path.normpath(remote_file_path))
            validate_path_within_directory(self.artifact_dir, source)
            self.budget.copy(source, local_path, self.artifact_dir)

    return BoundedLocalArtifactRepository


class BoundedCopy:
    """What one local repository's downloads may still copy, shared by MLflow's download threads."""

    def __init__(self, location: str):
        self.location = location
        self.left = DOWNLOAD_BYTES
        self.deadline = time.monotonic() + DOWNLOAD_S
        self.lock = threading.Lock()

    def check_time(self) -> None:
        if time.monotonic() > self.deadline:
            raise ArtifactLocationError(
                self.location, f"its download took longer than {DOWNLOAD_S:g} s; a model is copied in seconds", None
            )

    def spend(self, size: int) -> None:
        with self.lock:
            self.left -= size
            if self.left < 0:
                raise ArtifactLocationError(
                    self.location, f"holds more than {DOWNLOAD_BYTES:,} bytes; no model or artifact is that large", None
                )

    def copy(self, source: str, target: str, folder: str) -> None:
        """`source` copied to `target` if it is a regular file below `folder` (the gate's open_regular: no link
        followed, no FIFO blocks), counted against the budget as it is read."""

        def refused(key: str, message: str, where: str) -> ArtifactLocationError:
            return ArtifactLocationError(self.location, f"{where}: {message}", None)

        with open_regular(source, refused, within=Path(folder)) as (fd, _):
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
            with os.fdopen(os.open(target, flags, 0o600), "wb") as writing:
                while chunk := os.read(fd, CHUNK):
                    self.spend(len(chunk))
                    self.check_time()
                    writing.write(chunk)
