"""A committed report's tables recompute from the data committed beside them (issue 62): `sweeper summarize NAME
--from-data DIR` over docs/results/<study>/data gives the committed summary.md again, every table and the
temperature-by-epoch and word-class sections, down to the digit. Only the last section, which names each variant's
MLflow run, needs the store the sweep ran with, and is left out."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeper.cli import main as sweeper_main

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
STORE_ONLY = "\n## Attention heatmaps"  # the one section read from the MLflow store, not from data/


@pytest.mark.parametrize(
    ("study", "name", "written"),
    [
        (
            "sact_study_transformer_tatoeba_cpu_qknorm",
            "sact-study-transformer-tatoeba-cpu-qknorm",
            "| learned λ10 | 0.1-10 |",
        ),
        ("sact_study_tatoeba_cpu_power", "sact-power", "| 0.89 (fixed) |"),
        ("sact_study_tatoeba_cpu_designed", "sact-designed", "## Primary comparisons"),
    ],
)
def test_a_committed_study_recomputes_from_its_committed_data(study, name, written, tmp_path):
    folder = RESULTS / study
    argv = ["summarize", name, "--from-data", str(folder / "data")]
    assert sweeper_main([*argv, "--out", str(tmp_path)]) == 0
    committed = (folder / "summary.md").read_text(encoding="utf-8")
    again = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "SACT against its controls" in again and written in again
    assert again.split(STORE_ONLY)[0] == committed.split(STORE_ONLY)[0]
