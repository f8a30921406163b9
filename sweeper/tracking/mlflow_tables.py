"""MLflow's tables: a JSON artifact in the format `mlflow.log_table` writes (pandas' split orientation), listed in the
run's `mlflow.loggedArtifacts` tag. MLflow's UI previews such a file as a table, and its evaluation view compares the
same table of several runs row by row (the trials' translations, sentence by sentence).

Written here rather than by `MlflowClient.log_table`, which appends the rows to a file of that name already logged:
a tracking write replayed after an outage, or a summary written again, would double them. A file written whole and
a tag set to the same list are the same when sent twice.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

LOGGED_ARTIFACTS = "mlflow.loggedArtifacts"  # mlflow.utils.mlflow_tags.MLFLOW_LOGGED_ARTIFACTS
TABLE_SUFFIX = ".json"


def write_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], path: Path) -> None:
    """A table in MLflow's format: {"columns": [...], "data": [[...], ...]}; a NaN or infinity as null, as pandas
    writes it (a browser's JSON parser refuses `NaN`)."""
    data = [[None if isinstance(v, float) and not math.isfinite(v) else v for v in row] for row in rows]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"columns": list(columns), "data": data}), encoding="utf-8")


def csv_table(text: str) -> tuple[list[str], list[list[str]]]:
    """A CSV's header and rows, as written (the summary's BLEU table is rendered as CSV once, for both)."""
    header, *rows = list(csv.reader(io.StringIO(text)))
    return header, rows


def listed_tables(tags: dict[str, str], paths: Sequence[str]) -> str:
    """The `mlflow.loggedArtifacts` tag's value with `paths` (run-relative) listed as tables, each once, after
    whatever the run's tags list already."""
    listed = json.loads(tags.get(LOGGED_ARTIFACTS, "[]"))
    listed += [entry for entry in ({"path": p, "type": "table"} for p in paths) if entry not in listed]
    return json.dumps(listed)


def mark_tables(client, run_id: str, paths: Sequence[str]) -> None:
    """List logged JSON tables in the run's `mlflow.loggedArtifacts` tag (none: no request)."""
    if paths:
        client.set_tag(run_id, LOGGED_ARTIFACTS, listed_tables(client.get_run(run_id).data.tags, paths))


def tables_in(folder: Path, under: str) -> list[str]:
    """The run-relative paths of the tables in `folder/under` (a trial's translations/<set>.json)."""
    return sorted(f"{under}/{path.name}" for path in (folder / under).glob(f"*{TABLE_SUFFIX}"))
