"""SQLite URLs made absolute, for MLflow's tracking store and Optuna's study alike: trials and resumes run in other
working folders than the command that named them. Apart from sweeper/tracking/runs.py (MLflow, Ray), so that `sweeper
validate` of a space with a relative `search.study_storage` shows where its study will be without loading them.
"""

from __future__ import annotations

from pathlib import Path


def resolve_uri(uri: str, workdir: Path | None = None) -> str:
    """Absolute SQLite paths: trials and resumes run in other working folders."""
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        return "sqlite:///" + str(((workdir or Path.cwd()) / uri.removeprefix("sqlite:///")).resolve())
    return uri
