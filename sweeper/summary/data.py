"""The data every summary's tables come from, written beside summary.md (`data/`) and read back: anyone can
recompute each table and figure, or run another test, from the folder alone with `sweeper summarize NAME
--from-data DIR`, without the MLflow store the sweep ran with.

- `trials.parquet`: one row per trial (one seed of a variant): its settings, final metrics, per-epoch curves and
  tags, each a JSON column as the summary read them;
- `sentences.parquet`: one row per trial, test set and sentence: the hypothesis the trial's BLEU was scored on,
  and where the sweep logged alignment statistics, the sentence's ALIGNMENT_STATS;
- `references.parquet`: one row per test set and sentence: the reference;
- `traces/<split>/<run id>.parquet`: the attention traces (word classes, tau by word) where the sweep kept them;
- `sweep.json`: the sweep's name, parent run, the space's sections the summary reads, and what was left out.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from nmt_core.config import ConfigError
from nmt_core.gates.decoders import TEXT_LIMIT, read_json_file, read_parquet_file
from nmt_core.training.evaluate import ALIGNMENT_STATS
from sweeper.summary.records import SweepSnapshot, TrialRecord
from sweeper.summary.stored_data import check_records, check_sweep_name, check_test_sets, recorded_space

DATA_DIR = "data"
TRIAL_JSON = ("params", "metrics", "curves", "tags", "settings", "pbt_events")  # TrialRecord's fields kept as JSON


def write_data(snapshot: SweepSnapshot, folder: Path) -> Path:
    """The snapshot's data into `folder`/data (compressed Parquet and one JSON); returns that folder."""
    data = folder / DATA_DIR
    (data / "traces").mkdir(parents=True, exist_ok=True)
    trials = {key: [json.dumps(getattr(r, key), sort_keys=True) for r in snapshot.records] for key in TRIAL_JSON}
    trials |= {key: [getattr(r, key) for r in snapshot.records] for key in ("run_id", "trial_id", "variant")}
    trials["tuned"] = [sorted(r.tuned) for r in snapshot.records]
    pq.write_table(pa.table(trials), data / "trials.parquet", compression="zstd")
    pq.write_table(sentence_table(snapshot), data / "sentences.parquet", compression="zstd")
    references = [(name, i, line) for name, lines in snapshot.references.items() for i, line in enumerate(lines)]
    pq.write_table(
        pa.table(dict(zip(("set", "sentence", "reference"), map(list, zip(*references))))),
        data / "references.parquet",
        compression="zstd",
    )
    for (run_id, split), table in snapshot.traces.items():  # a split may be a path (forced/test)
        (data / "traces" / split).mkdir(parents=True, exist_ok=True)
        pq.write_table(table, data / "traces" / split / f"{run_id}.parquet", compression="zstd")
    (data / "sweep.json").write_text(json.dumps(sweep_fields(snapshot), indent=1, sort_keys=True), encoding="utf-8")
    return data


def sentence_table(snapshot: SweepSnapshot) -> pa.Table:
    """One row per trial, test set and sentence: the hypothesis, and its alignment statistics where logged."""
    rows: dict[str, list[Any]] = {"run_id": [], "set": [], "sentence": [], "hypothesis": []}
    aligned = bool(snapshot.alignment)
    rows |= {stat: [] for stat in ALIGNMENT_STATS} if aligned else {}
    for record in snapshot.records:
        for name, lines in snapshot.translations[record.run_id].items():
            rows["run_id"] += [record.run_id] * len(lines)
            rows["set"] += [name] * len(lines)
            rows["sentence"] += list(range(len(lines)))
            rows["hypothesis"] += lines
            stats = snapshot.alignment.get(record.run_id, {}).get(name) if aligned else None
            for k, stat in enumerate(ALIGNMENT_STATS if aligned else ()):
                rows[stat] += [None] * len(lines) if stats is None else stats[:, k].tolist()
    return pa.table(rows)


def sweep_fields(snapshot: SweepSnapshot) -> dict[str, Any]:
    space = snapshot.space  # its design only where one is declared (design_fields)
    return {
        "name": snapshot.name,
        "parent_id": snapshot.parent_id,
        "parent_status": snapshot.parent_status,
        "space": {k: v for k, v in asdict(space).items() if k != "design"}
        | {"varied": list(space.varied)}
        | design_fields(snapshot),
        "left_out": dict(snapshot.left_out),
        "added": [list(added) for added in snapshot.added],
        "choices": snapshot.choices,
        "unfinished": snapshot.unfinished,
    }


def design_fields(snapshot: SweepSnapshot) -> dict[str, Any]:
    """A designed sweep's design and the digest frozen on it; nothing for a sweep without one (its data stays as
    earlier versions wrote it)."""
    if not snapshot.space.design.declared:
        return {}
    return {"design": asdict(snapshot.space.design), "design_digest": snapshot.design_digest}


def read_data(folder: Path) -> SweepSnapshot:
    """The snapshot write_data wrote into `folder` (a summary folder, or its data/ folder itself); a folder without
    it, or with files this version cannot read, is refused in one line."""
    data = folder / DATA_DIR if (folder / DATA_DIR).is_dir() else folder
    if not (data / "sweep.json").is_file():
        raise ConfigError("--from-data", f"{folder}: no summary data here (data/sweep.json, as summarize writes)")
    try:
        return snapshot_of(data)
    except (
        ConfigError
    ) as err:  # a file nmt_core.gates.decoders refused (not Parquet, too many rows, not JSON): it says why
        raise ConfigError("--from-data", f"{folder}: unreadable summary data ({err})") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError, pa.ArrowException) as err:
        raise ConfigError("--from-data", f"{folder}: unreadable summary data ({type(err).__name__})") from None


def snapshot_of(data: Path) -> SweepSnapshot:
    """The snapshot, every file read below `data` (no link out) and re-checked as a live summary's input is
    (sweeper/summary/stored_data.py)."""
    fields = read_json_file(data / "sweep.json", TEXT_LIMIT, ConfigError, within=data)
    recorded = recorded_space(fields["space"], "data/sweep.json")
    check_sweep_name(fields["name"], "data/sweep.json")
    rows = read_parquet_file(data / "trials.parquet", ConfigError, within=data).to_pylist()
    records = [trial_record(row) for row in rows]
    check_records(records, "data/trials.parquet")
    references: dict[str, list[str]] = {}
    for row in read_parquet_file(data / "references.parquet", ConfigError, within=data).to_pylist():
        references.setdefault(row["set"], []).append(row["reference"])
    translations, alignment = read_sentences(data / "sentences.parquet")
    check_test_sets([*references, *(name for sets in translations.values() for name in sets)], "data/*.parquet: set")
    if any(set(translations.get(record.run_id, {})) != set(references) for record in records):
        raise ConfigError("sentences.parquet", "every trial must hold a hypothesis per test set of references.parquet")
    traces = {
        (path.stem, path.parent.relative_to(data / "traces").as_posix()): read_parquet_file(
            path, ConfigError, within=data
        )
        for path in sorted((data / "traces").rglob("*.parquet"))
    }
    return SweepSnapshot(
        fields["name"],
        fields["parent_id"],
        fields["parent_status"],
        recorded,
        records,
        Counter(fields["left_out"]),
        references,
        translations,
        alignment,
        traces,
        [tuple(added) for added in fields["added"]],
        fields["choices"],
        fields["unfinished"],
        fields["space"].get("design_digest", ""),
    )


def trial_record(row: dict[str, Any]) -> TrialRecord:
    values = {key: json.loads(row[key]) for key in TRIAL_JSON}
    values["settings"] = {key: {int(e): v for e, v in by.items()} for key, by in values["settings"].items()}
    return TrialRecord(row["run_id"], row["trial_id"], row["variant"], tuned=frozenset(row["tuned"]), **values)


def read_sentences(path: Path) -> tuple[dict[str, dict[str, list[str]]], dict[str, dict[str, np.ndarray]]]:
    """Each trial's hypotheses by test set, and its alignment statistics (N, len(ALIGNMENT_STATS)) where written."""
    table = read_parquet_file(path, ConfigError, within=path.parent)
    translations: dict[str, dict[str, list[str]]] = {}
    columns: dict[tuple[str, str], list[list[float]]] = {}
    aligned = ALIGNMENT_STATS[0] in table.column_names
    for row in table.to_pylist():
        translations.setdefault(row["run_id"], {}).setdefault(row["set"], []).append(row["hypothesis"])
        if aligned and row[ALIGNMENT_STATS[0]] is not None:
            columns.setdefault((row["run_id"], row["set"]), []).append([row[s] for s in ALIGNMENT_STATS])
    alignment: dict[str, dict[str, np.ndarray]] = {}
    for (run_id, name), values in columns.items():
        alignment.setdefault(run_id, {})[name] = np.array(values)
    return translations, alignment
