"""results.parquet names the significance test whose marks `sweeper summarize` prints (its schema's metadata), from
the space at `sweeper run` and from sweeper.json at `sweeper resume`."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from sweeper.running.runner import SIGNIFICANCE_KEY, results_table
from sweeper.space.spec import SignificanceSpec, SpecError
from sweeper.storage.store import open_storage
from sweeper.storage.stored import STATE_FILE, read_state
from tests.unit.test_names_and_state import valid_state


def test_results_parquet_names_the_test_of_the_marks(tmp_path):
    rows = [{"trial_id": "a", "bleu_test_avg": 4.5}, {"trial_id": "b", "bleu_test_avg": 4.4}]
    pq.write_table(results_table(rows, SignificanceSpec("paired_bootstrap", 2000)), tmp_path / "results.parquet")
    stored = json.loads(pq.read_schema(tmp_path / "results.parquet").metadata[SIGNIFICANCE_KEY])
    assert stored["method"] == "paired_bootstrap" and stored["resamples"] == 2000
    assert stored["marks"].startswith("paired_bootstrap: two-level seed x sentence test")
    assert "one seed a row: sacrebleu --paired-bs, test-set variance only, no marks" in stored["marks"]
    ar = results_table(rows, SignificanceSpec("approximate_randomization", 10000)).schema.metadata[SIGNIFICANCE_KEY]
    assert "test-set variance only, no marks" in json.loads(ar)["marks"]
    assert results_table([], SignificanceSpec()).schema.metadata[SIGNIFICANCE_KEY]  # no trial: still named


def test_resume_reads_the_test_from_the_sweeps_state_and_checks_it(tmp_path):
    experiment = open_storage(str(tmp_path / "sweeps"), "test").below("demo")

    def stored(**extra) -> SignificanceSpec:
        experiment.write_text(json.dumps({**valid_state("sqlite:////tmp/mlflow.db"), **extra}), STATE_FILE)
        return read_state(experiment).significance

    assert stored() == SignificanceSpec()  # a sweep stored before it was kept
    kept = {"method": "approximate_randomization", "resamples": 5000}
    assert stored(significance=kept) == SignificanceSpec("approximate_randomization", 5000)
    damages = ({"method": "t_test"}, {"resamples": 5}, {"resamples": "many"}, ["paired_bootstrap"], 0, "", [], False)
    for damaged in damages:  # a falsy value that is no mapping is damage too, not the defaults
        with pytest.raises(SpecError, match="sweeper.json.* the sweep's storage is damaged: significance"):
            stored(significance=damaged)
