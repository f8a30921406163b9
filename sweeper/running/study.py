"""Where an Optuna sweep keeps its study, and how that is shown (light: `sweeper validate` imports it).

The study is persistent and named after the sweep, so `optuna-dashboard <storage>` shows it live,
`optuna.load_study(study_name=NAME, storage=...)` reads it afterwards, and `sweeper resume` continues it
(sweeper.running.optuna_search). It lives in the space's `search.study_storage` (an RDB URL) if it gives one; else in
`optuna.db` (SQLite) in the sweep's folder when storage is local; else, since SQLite cannot live on s3:// or gs://,
in `optuna.db` beside a SQLite tracking store; else (object storage and a tracking server) in memory, pickled with
Tune's experiment state as before, and the start line says how to keep it.
"""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import TYPE_CHECKING

from sweeper.space.spec import SweepSpec
from sweeper.tracking.sqlite_urls import resolve_uri

if TYPE_CHECKING:
    from sweeper.storage.store import Storage

STUDY_FILE = "optuna.db"


def study_url(spec: SweepSpec, experiment: Storage, tracking_uri: str) -> str | None:
    """The RDB URL of the sweep's study (absolute where SQLite), or None where no SQLite file can live."""
    return study_url_in(spec, experiment.path() if experiment.is_local else None, tracking_uri)


def study_url_in(spec: SweepSpec, folder: str | None, tracking_uri: str) -> str | None:
    """study_url from the sweep's folder on this machine (None: object storage); `sweeper validate` names the
    default folder without opening a storage, which would load pyarrow."""
    if spec.search.study_storage:
        return resolve_uri(spec.search.study_storage)  # the same relative-path rule as a SQLite tracking store
    if folder is not None:
        return f"sqlite:///{posixpath.join(folder, STUDY_FILE)}"
    if tracking_uri.startswith("sqlite:///"):
        return f"sqlite:///{Path(tracking_uri.removeprefix('sqlite:///')).parent / STUDY_FILE}"
    return None


def shown(url: str) -> str:
    """The URL as printed and recorded: a database password never is. A URL without '@' has no userinfo, hence no
    password, and is shown as it is, without loading SQLAlchemy (0.3 s of `sweeper validate` of an Optuna space)."""
    if "@" not in url:
        return url
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def describe(spec: SweepSpec, url: str | None) -> str:
    """One line for the start of a sweep and for `sweeper validate`: the sampler and where the study is."""
    where = (
        f"in {shown(url)}; watch it with `optuna-dashboard {shown(url)}`"
        if url
        else "in memory (object storage and a tracking server: set search.study_storage to an RDB URL to keep it)"
    )
    points = len(spec.search.points_to_evaluate)
    return (
        f"Optuna study {spec.name!r}, sampler {spec.search.sampler} (seed {spec.search.seed})"
        + (f", {points} starting point{'s' * (points > 1)} first" if points else "")
        + f", {where}"
    )
