"""A committed report's tables recompute from the data committed beside them (issue 62): `sweeper summarize NAME
--from-data DIR` over docs/results/<study>/data gives the committed summary.md again, every table and the
temperature-by-epoch and word-class sections, down to the digit. Only the last section, which names each variant's
MLflow run, needs the store the sweep ran with, and is left out."""

from __future__ import annotations

from pathlib import Path

from sweeper.cli import main as sweeper_main

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
STORE_ONLY = "\n## Attention heatmaps"  # the one section read from the MLflow store, not from data/


def test_the_query_key_normalised_study_recomputes_from_its_committed_data(tmp_path):
    folder = RESULTS / "sact_study_transformer_tatoeba_cpu_qknorm"
    argv = ["summarize", "sact-study-transformer-tatoeba-cpu-qknorm", "--from-data", str(folder / "data")]
    assert sweeper_main([*argv, "--out", str(tmp_path)]) == 0
    committed = (folder / "summary.md").read_text(encoding="utf-8")
    again = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "SACT against its controls" in again and "| learned λ10 | 0.1-10 |" in again
    assert again.split(STORE_ONLY)[0] == committed.split(STORE_ONLY)[0]
