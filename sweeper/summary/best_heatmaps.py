"""`tracking.plots: best`: the summary draws the heatmaps of each variant's best trial, once, into that trial's run.

Drawing four heatmaps with matplotlib costs a small trial about a second, most of its overhead; every trial
still logs what they are drawn from (traces/heatmaps.json beside its traces), so any trial's figures can be drawn
later with `sweeper.summary.plots.heatmaps`.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from mlflow.tracking import MlflowClient

from nmt_core.gates.decoders import TEXT_LIMIT, read_json_file
from sweeper.space.spec import ObjectiveSpec
from sweeper.summary.plots import heatmaps
from sweeper.summary.records import summary_error
from sweeper.summary.statistics import objective_of
from sweeper.tracking.metrics import HEATMAPS, PLOTS_FOLDER


def best_trials(rows: list, metric: str, mode: str) -> list[tuple[str, Any]]:
    """(variant label, its best trial by the sweep's objective) for every variant with a scored trial."""
    best = []
    for row in rows:
        scored = [
            (value, record) for record in row.records if (value := objective_of(record, metric, mode)) is not None
        ]
        if scored:
            pick = max if mode == "max" else min
            best.append((row.label, pick(scored, key=lambda pair: pair[0])[1]))
    return best


def draw_into_run(client: MlflowClient, run_id: str) -> bool:
    """Draw a trial's heatmaps from its heatmaps.json and log them to its run's plots/; False when the run has
    no heatmaps.json (a trial of an older version)."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            local = client.download_artifacts(run_id, HEATMAPS, tmp)
        except Exception:  # noqa: BLE001 - MLflow raises several types for a missing artifact
            return False
        folder = Path(tmp) / PLOTS_FOLDER
        heatmaps(read_json_file(local, TEXT_LIMIT, summary_error), folder)
        client.log_artifacts(run_id, str(folder), PLOTS_FOLDER)
    return True


def log_best_heatmaps(client: MlflowClient, rows: list, objective: ObjectiveSpec) -> list[str]:
    """Draw and log the best trial's heatmaps of each variant of `rows` (those the BLEU table shows), as
    `tracking.plots: best` asks; the summary's section saying where they are."""
    lines = [
        f"| {label} | {record.trial_id} | `{record.run_id}` |"
        for label, record in best_trials(rows, objective.metric, objective.mode)
        if draw_into_run(client, record.run_id)
    ]
    if not lines:
        return []
    return [
        f"## Attention heatmaps (best trial of each variant by {objective.metric})\n\nThe variants of the BLEU table"
        f" above. In each run's artifacts, {PLOTS_FOLDER}/: attention_dev<i>.png for the first dev sentences (the "
        "sentinel gate as a last column), and temperature_heatmap.png for SACT. Every trial's data for them is in "
        "traces/heatmaps.json.\n\n"
        "| variant | trial | MLflow run |\n|---|---|---|\n" + "\n".join(lines) + "\n"
    ]
