"""A summary of a large random sweep (a row per trial) stays readable: its tables show the best rows and the
baselines they are compared with and say how many they left out; its figures draw the best rows' curves and read
only the best variants' traces."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from nmt_core.config import build_config
from nmt_core.training.decode import Translation
from nmt_core.training.evaluate import ForcedTrace, forced_trace_table, trace_table
from sweeper.space.spec import SignificanceSpec
from sweeper.summary import (
    TrialRecord,
    build_summary,
    render_csv,
    render_latex,
    render_markdown,
)
from sweeper.summary.figures import TOP_CURVES, figure_data
from sweeper.summary.records import TOP_ROWS, wanted_traces
from sweeper.summary.statistics import DEFAULT_BASELINE, VariantRow, baselines_of

REFS = [f"w{i} x{i} y{i} z{i} end" for i in range(12)]
KINDS = {"none": {}, "sact": {"temperature": "sact"}, "fixed": {"temperature": "fixed", "tau": 2.0}}


def _record(i: int, kind: str, bleu: float) -> TrialRecord:
    # data.tgt: a language with a closed-class lexicon, so that the figures' word classes are computed
    cfg = build_config(
        {"data": {"corpus": "synthetic", "tgt": "es"}, "attention": KINDS[kind], "train": {"lr": 1e-3 + i * 1e-5}}
    )
    params = {k: str(v) for k, v in cfg.active().items()}
    return TrialRecord(
        f"run{i}",
        f"t{i}",
        "general+" + kind,
        params,
        {"bleu_test_test": bleu, "bleu_test_avg": bleu},
        {"bleu_dev": [bleu - 2.0, bleu - 1.0]},
    )


def _large_sweep(trials: int = 3 * TOP_ROWS):
    """`trials` rows (every learning rate its own): trial i scores 10 + i, so the best rows are the last ones."""
    records = [_record(i, list(KINDS)[i % 3], 10.0 + i) for i in range(trials)]
    translations = {
        r.run_id: {"test": [" ".join(ref.split()[: 1 + i % 5]) for ref in REFS]} for i, r in enumerate(records)
    }
    summary = build_summary(records, translations, {"test": REFS}, significance=SignificanceSpec(resamples=100))
    return records, summary


def _table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| general+")]


def test_a_large_sweeps_table_shows_its_best_rows_with_their_baselines_and_says_how_many_it_left_out():
    records, summary = _large_sweep()
    rows = _table_rows(render_markdown(summary))
    best = [f"(train.lr={1e-3 + i * 1e-5:.3g})" for i in range(len(records) - 1, len(records) - 1 - TOP_ROWS, -1)]
    assert all(any(lr in row for row in rows) for lr in best)  # the TOP_ROWS best, best first
    assert best[0] in rows[0] and best[1] in rows[1]
    shown = [row for row in summary.rows if any(f"| {row.label} |" in line for line in rows)]
    assert len(shown) == len(rows) < len(summary.rows)
    bases = {base.label for base in baselines_of(summary.rows, summary.criteria, shown).values()}
    assert bases and all(any(f"| {label} |" in line for line in rows) for label in bases)  # every delta's reference
    left = len(summary.rows) - len(rows)
    assert (
        f"Rows: the {TOP_ROWS} best of {len(summary.rows)} by average BLEU, best first, with the baselines they "
        f"are compared with; {left} rows left out"
    ) in render_markdown(summary)
    latex = render_latex(summary)  # the header, the rows and the note naming the test of the marks
    assert latex.count(r" \\") == len(rows) + 2 and f"% Rows: the {TOP_ROWS} best" in latex
    assert len(render_csv(summary).splitlines()) == len(summary.rows) + 1  # the CSV keeps every row
    sact_lines = [line for line in render_markdown(summary).splitlines() if line.startswith("- `general+sact")]
    assert len(sact_lines) == sum("| general+sact" in row for row in rows) > 0  # SACT's tau: the shown rows only


def test_a_small_sweeps_table_keeps_every_row_in_its_order_without_a_note():
    _, summary = _large_sweep(TOP_ROWS)
    text = render_markdown(summary)
    assert [row.split(" | ")[0] for row in _table_rows(text)] == [f"| {row.label}" for row in summary.rows]
    assert "rows left out" not in text


def test_each_rows_baseline_is_the_one_a_scan_of_every_pair_picks():
    """Baselines found through a dict of settings are those a scan of every (row, baseline) pair for the most shared
    settings picks, the first of a tie: on rows with equal settings (ties) and with settings only some rows hold."""
    rng, rows = random.Random(0), []
    for i in range(300):
        params = {
            "attention.temperature": rng.choice(["none", "fixed", "sact"]),
            "attention.sentinel": rng.choice(["False", "True"]),
            "train.lr": rng.choice(["0.001", "0.002", "0.003"]),
            "model.hidden_size": rng.choice(["64", "128"]),
            **({"data.max_len": rng.choice(["10", "20"])} if rng.random() < 0.3 else {}),
        }
        rows.append(
            VariantRow(f"row{i}", [TrialRecord(f"run{i}", str(i), "v", params, {}, {})], {}, (0, 0), None, 0, None)
        )
    baselines = [row for row in rows if all(row.records[0].active[k] == v for k, v in DEFAULT_BASELINE.items())]

    def scan(row: VariantRow) -> VariantRow:
        mine = dict(row.records[0].group)
        return max(baselines, key=lambda base: sum(mine.get(k) == v for k, v in base.records[0].group))

    chosen = baselines_of(rows, DEFAULT_BASELINE)
    assert len(baselines) > 20 and len(chosen) == len(rows)
    assert all(chosen[id(row)] is scan(row) for row in rows)
    assert len({id(base) for base in chosen.values()}) > 5  # rows see different baselines, not all the first
    assert baselines_of(rows, DEFAULT_BASELINE, [rows[7]])[id(rows[7])] is scan(rows[7])
    assert baselines_of(rows, {"attention.temperature": "absent"}) == {}


def test_a_large_sweeps_figures_draw_the_best_rows_and_read_the_best_variants_traces():
    records, summary = _large_sweep()
    wanted = wanted_traces(records)
    best_sact = max((r for r in records if "sact" in r.variant), key=lambda r: r.metrics["bleu_test_avg"])
    assert wanted[0] == (best_sact.run_id, "dev")
    top = {r.run_id for r in sorted(records, key=lambda r: -r.metrics["bleu_test_avg"])[:TOP_ROWS]}
    assert wanted[1:] == [(r.run_id, "forced/test") for r in summary_order(records, top)]  # every seed; no sentinel
    trace = trace_table(
        [Translation([5, 6, 7], 0.0, torch.full((3, 2), 0.5), [0.4, 2.5, 3.5], None)], [["le", "NOUN1", "ga"]]
    )
    forced = forced_trace_table([ForcedTrace(np.array([0.4, 2.5, 3.5]), None)], [["el", "perro", "y"]])
    data = figure_data(summary, {key: forced if key[1] == "forced/test" else trace for key in wanted})
    assert [label for label, _ in data.dev_curves] == [
        row.label for row in sorted(summary.rows, key=lambda row: -row.average[0])[:TOP_CURVES]
    ]
    assert data.rows == len(records) and len(data.word_classes.rows) == len(wanted) - 1  # a row per variant read


def summary_order(records: list[TrialRecord], top: set[str]) -> list[TrialRecord]:
    """The SACT trials among `top`, best variant first (a row per trial here)."""
    return sorted(
        (r for r in records if r.run_id in top and "sact" in r.variant), key=lambda r: -r.metrics["bleu_test_avg"]
    )


def test_every_trial_run_is_read_page_by_page(tmp_path, monkeypatch):
    """A sweep with more trial runs than one search answers (SEARCH_PAGE) is read whole."""
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    from sweeper.summary import records as records_module

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("paged", artifact_location=str(tmp_path / "artifacts"))
    parent = client.create_run(experiment, tags={"sweeper.role": "sweep"}).info.run_id
    for i in range(5):
        run = client.create_run(experiment, tags={"mlflow.parentRunId": parent, "sweeper.role": "trial"}).info.run_id
        client.log_batch(run, metrics=[Metric("bleu_test_avg", float(i), 0, 1), Metric("bleu_dev", float(i), 0, 1)])
        client.set_terminated(run, "FINISHED")
    monkeypatch.setattr(records_module, "SEARCH_PAGE", 2)
    found, left_out, _ = records_module.load_records(client, experiment, parent)
    assert sorted(r.metrics["bleu_test_avg"] for r in found) == [0.0, 1.0, 2.0, 3.0, 4.0] and not left_out
    assert all(r.curves["bleu_dev"] == [r.metrics["bleu_dev"]] for r in found)


@pytest.mark.slow
def test_the_summary_scale_benchmark_fills_a_real_server_and_summarises_it(tmp_path):
    """benchmarks/summary_scale.py end to end at a tiny size (not a timing test): every trial the tracking callback
    wrote is in the summary."""
    import json
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    import summary_scale

    assert (
        summary_scale.main(
            ["--trials", "6", "--writers", "2", "--folder", str(tmp_path), "--json", str(tmp_path / "rows.json")]
        )
        == 0
    )
    [row] = json.loads((tmp_path / "rows.json").read_text())
    assert row["trials"] == 6 and row["fill_s"] > 0 and row["summarize_s"] > 0 and row["peak_mib"] > 50
    text = (tmp_path / "sweeps" / "scale-6" / "summary" / "summary.md").read_text()
    assert "6 finished trials" in text and (tmp_path / "sweeps" / "scale-6" / "summary" / "bleu_table.csv").exists()
