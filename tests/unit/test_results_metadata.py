"""results.parquet names the significance test whose marks `sweeper summarize` prints (its schema's metadata), from
the space at `sweeper run` and from sweeper.json at `sweeper resume`."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from sweeper.runner import SIGNIFICANCE_KEY, results_table, stored_significance
from sweeper.space import SignificanceSpec, SpecError
from sweeper.storage import open_storage


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
    assert stored_significance({}, experiment) == SignificanceSpec()  # a sweep stored before it was kept
    kept = {"significance": {"method": "approximate_randomization", "resamples": 5000}}
    assert stored_significance(kept, experiment) == SignificanceSpec("approximate_randomization", 5000)
    for damaged in ({"method": "t_test"}, {"resamples": 5}, {"resamples": "many"}, ["paired_bootstrap"]):
        with pytest.raises(SpecError, match="sweeper.json"):
            stored_significance({"significance": damaged}, experiment)
