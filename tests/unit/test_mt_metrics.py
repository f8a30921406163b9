"""chrF and TER beside BLEU (issue 73): scored by sacrebleu's own metric objects in a trial, routed to MLflow and
results.parquet, tabled and tested in the summary with the same two-level test as BLEU. Expected numbers come from
sacrebleu's functional API and its paired test (what `sacrebleu -m chrf ter --paired-bs` runs), never from the code
under test."""

from __future__ import annotations

import numpy as np
import pytest
import sacrebleu
from sacrebleu.metrics import CHRF, TER
from sacrebleu.significance import PairedTest

from nmt_core.config import ConfigError, build_config
from nmt_core.training.evaluate import (
    MetricBootstrap,
    SystemScores,
    corpus_metric,
    draw_counts,
    seed_sentence_test,
)
from sweeper.tracking.metrics import AT_END, PER_EPOCH, SIGNATURE_TAGS, final_result, mlflow_metrics, report_key
from tests.unit.test_summary import REVIEW_REFS, _hyps, _review_snapshot

SACREBLEU_NAMES = {"chrf": "chrF2", "ter": "TER"}


def _signature(metric, hyps: list[str] = REVIEW_REFS) -> str:
    """A metric object's signature once it has scored (sacrebleu knows the number of references only then)."""
    metric.corpus_score(hyps, [REVIEW_REFS])
    return str(metric.get_signature())


def _edited(every: int, offset: int = 0) -> list[str]:
    """Every `every`-th reference with a word swapped and one dropped: other n-grams than _hyps's, other edits."""
    out = []
    for i, r in enumerate(REVIEW_REFS):
        words = r.split()
        out.append(" ".join([words[1], words[0], *words[3:]]) if every and i % every == offset else r)
    return out


def test_chrf_and_ter_are_sacrebleus_corpus_scores_with_their_signatures():
    hyps = _edited(3)
    chrf, ter = corpus_metric("chrf", hyps, REVIEW_REFS), corpus_metric("ter", hyps, REVIEW_REFS)
    assert chrf.score == sacrebleu.corpus_chrf(hyps, [REVIEW_REFS]).score
    assert ter.score == sacrebleu.corpus_ter(hyps, [REVIEW_REFS]).score
    assert chrf.signature == _signature(CHRF()) and "nc:6" in chrf.signature
    assert ter.signature == _signature(TER()) and "tok:tercom" in ter.signature
    lower = corpus_metric("chrf", [h.upper() for h in hyps], REVIEW_REFS, lowercase=True)
    assert lower.score == chrf.score and "case:lc" in lower.signature


@pytest.mark.parametrize("name", ["chrf", "ter"])
def test_each_resample_is_scored_as_sacrebleu_scores_its_float32_row(name):
    """The vectorised score of summed per-sentence statistics equals sacrebleu's own on every resample, to the bit
    (its paired bootstrap keeps float32 rows), and the statistics are the metric object's own."""
    metric = CHRF() if name == "chrf" else TER()
    hyps = _edited(2)
    stats = np.array(metric._extract_corpus_statistics(hyps, [REVIEW_REFS]), dtype="float32")
    rng = np.random.default_rng(7)
    rows = stats[rng.choice(len(stats), size=(300, len(stats)))].sum(axis=1)
    rows = np.vstack([rows, stats.sum(0), np.zeros_like(stats[0])])  # the whole set, and nothing at all
    expected = np.array([metric._compute_score_from_stats(row).score for row in rows], dtype=np.float64)
    bootstrap = MetricBootstrap({"test": REVIEW_REFS}, name, 100)
    assert np.array_equal(bootstrap.score(rows), expected)
    assert np.array_equal(bootstrap.stats([{"test": hyps}])[0]["test"], stats)


def test_chrf_with_eps_smoothing_falls_back_to_sacrebleus_own_scoring():
    bootstrap = MetricBootstrap({"test": REVIEW_REFS}, "chrf", 100)
    bootstrap.metric = CHRF(eps_smoothing=True)
    stats = np.array(bootstrap.metric._extract_corpus_statistics(_edited(2), [REVIEW_REFS]), dtype="float32")
    assert (
        bootstrap.score(stats.sum(0, keepdims=True))[0]
        == CHRF(eps_smoothing=True).corpus_score(_edited(2), [REVIEW_REFS]).score
        == pytest.approx(sacrebleu.corpus_chrf(_edited(2), [REVIEW_REFS], eps_smoothing=True).score)
    )


def _with_metrics(snapshot, hyps_of=None):
    """Each record's chrF and TER as a trial logs them (sacrebleu's functional API on its outputs), and their
    signatures as tags."""
    for record in snapshot.records:
        hyps = snapshot.translations[record.run_id]["test"]
        for name, score in (("chrf", sacrebleu.corpus_chrf), ("ter", sacrebleu.corpus_ter)):
            value = score(hyps, [REVIEW_REFS]).score
            record.metrics[f"{name}_test_test"] = record.metrics[f"{name}_test_avg"] = value
        record.tags[SIGNATURE_TAGS["chrf_signature"]] = _signature(CHRF())
        record.tags[SIGNATURE_TAGS["ter_signature"]] = _signature(TER())
    return snapshot


@pytest.mark.parametrize("method,flag", [("paired_bootstrap", "bs"), ("approximate_randomization", "ar")])
def test_one_seed_a_row_gives_sacrebleus_paired_p_for_chrf_and_ter(method, flag, monkeypatch):
    """One seed per row, one test set: the chrF and TER p before Holm are sacrebleu's paired test's on the same
    outputs (the test `sacrebleu -m chrf ter --paired-bs` / `--paired-ar` runs)."""
    from sweeper.summary.report import compute, significance_of

    fixed = {"temperature": "fixed", "tau": 4.0}
    rows = [("general+none", {}, 0.001, 3, {}), ("general+tau4", fixed, 0.001, 4, {})]
    snapshot = _with_metrics(_review_snapshot(rows, 1, {"method": method, "resamples": 1000}))
    summary = compute(snapshot, significance_of(snapshot, None))
    monkeypatch.setenv("SACREBLEU_SEED", "12345")
    _, results = PairedTest(
        [("base", _hyps(3)), ("sys", _hyps(4))],
        {"chrF2": CHRF(references=[REVIEW_REFS]), "TER": TER(references=[REVIEW_REFS])},
        None,
        flag,
        1000,
    )()
    for column in summary.metric_table.columns:
        [comparison] = column.comparisons
        expected = results[SACREBLEU_NAMES[column.name]][1].p_value
        assert comparison.p_value == pytest.approx(expected, abs=1e-12)
        assert 1 / 1001 < comparison.p_value < 1 and comparison.mark == ""
        assert comparison.delta == pytest.approx(
            results[SACREBLEU_NAMES[column.name]][1].score - results[SACREBLEU_NAMES[column.name]][0].score
        )


@pytest.mark.parametrize("name", ["chrf", "ter"])
def test_two_seeds_a_row_get_the_two_level_test_of_the_logged_score_and_sacrebleus_resamples(name):
    """The seed level from each trial's logged corpus score, the sentence level from paired resamples of sacrebleu's
    own per-sentence statistics scored by sacrebleu: the same seed_sentence_test as BLEU's."""
    from sweeper.summary.report import compute, significance_of

    fixed = {"temperature": "fixed", "tau": 4.0}
    rows = [("general+none", {}, 0.001, 2, {}), ("general+tau4", fixed, 0.001, 5, {})]
    snapshot = _review_snapshot(rows, 2, {"resamples": 300}, seeds_differ=True)
    summary = compute(_with_metrics(snapshot), significance_of(snapshot, None))
    [column] = [c for c in summary.metric_table.columns if c.name == name]
    [comparison] = column.comparisons
    metric = CHRF() if name == "chrf" else TER()
    draws = draw_counts(np.random.default_rng(12345).choice(40, size=(300, 40), replace=True), 40)
    scores = {}
    for label in ("general+none", "general+tau4"):
        records = [r for r in snapshot.records if r.variant == label]
        resampled = []
        for record in records:
            stats = np.array(
                metric._extract_corpus_statistics(snapshot.translations[record.run_id]["test"], [REVIEW_REFS]),
                dtype="float32",
            )
            resampled.append([metric._compute_score_from_stats(row).score for row in draws @ stats])
        logged = [record.metrics[f"{name}_test_avg"] for record in records]
        scores[label] = SystemScores(np.array(logged), np.array(resampled, dtype=np.float64))
    expected = seed_sentence_test(scores["general+none"], scores["general+tau4"])
    assert comparison.test is not None and comparison.covers == "seeds + sentences"
    assert comparison.delta == pytest.approx(expected.delta)
    assert comparison.p_value == pytest.approx(expected.p_value, rel=1e-9)
    assert comparison.interval == pytest.approx(expected.interval, rel=1e-9)


def test_ter_marks_fewer_edits_as_better_and_the_section_says_so():
    from sweeper.summary.report import compute, significance_of
    from sweeper.summary.tables import render_metrics

    fixed = {"temperature": "fixed", "tau": 4.0}
    rows = [("general+none", {}, 0.001, 2, {}), ("general+tau4", fixed, 0.001, 0, {})]  # tau4: the references
    snapshot = _with_metrics(_review_snapshot(rows, 3, {"resamples": 300}, seeds_differ=True))
    summary = compute(snapshot, significance_of(snapshot, None))
    chrf, ter = summary.metric_table.columns
    [better_chrf], [fewer_edits] = chrf.comparisons, ter.comparisons
    assert better_chrf.delta > 0 and fewer_edits.delta < 0
    assert better_chrf.mark == "**" and fewer_edits.mark == "**"
    text = render_metrics(summary, summary.metric_table)
    assert "| variant | seeds | BLEU avg | chrF avg | delta chrF | 95% CI | p (Holm) | TER avg | delta TER |" in text
    assert "TER is an edit rate: lower is better" in text and _signature(CHRF()) in text
    assert "| general+tau4 |" in text and f"{fewer_edits.delta:+.2f}**" in text


def test_a_sweep_without_chrf_is_summarised_as_before_and_with_it_gains_a_section(tmp_path):
    """Old data (no chrF or TER in any trial): no section, no metric files, the BLEU section byte for byte the
    same as with them. With them: the section, its CSV and LaTeX, and --from-data recomputes it."""
    from sweeper.cli import main as sweeper_main
    from sweeper.summary.report import write_report
    from sweeper.summary.tables import render_metrics

    fixed = {"temperature": "fixed", "tau": 4.0}
    rows = [("general+none", {}, 0.001, 2, {}), ("general+tau4", fixed, 0.001, 5, {})]
    old = write_report(_review_snapshot(rows, 2, {"resamples": 200}), tmp_path / "old", ["csv", "latex"])
    new = write_report(_with_metrics(_review_snapshot(rows, 2, {"resamples": 200})), tmp_path / "new", ["csv", "latex"])
    assert old.metric_table is None and new.metric_table is not None
    before, after = ((tmp_path / f / "summary.md").read_text() for f in ("old", "new"))
    section = "## chrF and TER\n\n" + render_metrics(new, new.metric_table) + "\n"
    assert "## chrF and TER" not in before and section in after and after.replace(section, "") == before
    assert not (tmp_path / "old" / "metrics_table.csv").exists()
    csv = (tmp_path / "new" / "metrics_table.csv").read_text().splitlines()
    assert csv[0].startswith("variant,seeds,chrf_test_mean,chrf_test_std,chrf_avg_mean") and len(csv) == 3
    assert r"\toprule" in (tmp_path / "new" / "metrics_table.tex").read_text()
    again = tmp_path / "again"
    argv = ["summarize", "review", "--from-data", str(tmp_path / "new"), "--out", str(again), "--format", "csv"]
    assert sweeper_main(argv) == 0
    assert (again / "summary.md").read_text() == after
    assert (again / "metrics_table.csv").read_text() == (tmp_path / "new" / "metrics_table.csv").read_text()


def test_chrf_and_ter_are_routed_to_mlflows_result_section_and_results_parquet():
    final = {"chrf_test_test": 50.0, "chrf_test_avg": 50.0, "ter_test_test": 40.0, "ter_test_avg": 40.0}
    logged = mlflow_metrics({**final, "chrf_dev": 48.0}, AT_END)
    assert logged == {
        "result/chrf_test_test": 50.0,
        "result/chrf_test_avg": 50.0,
        "result/ter_test_test": 40.0,
        "result/ter_test_avg": 40.0,
        "result/chrf_dev_best": 48.0,
    }
    assert mlflow_metrics({"chrf_dev": 48.0}, PER_EPOCH) == {"chrf/dev": 48.0}
    assert all(final_result(key) for key in final)
    assert {report_key(name) for name in logged} == {*final, "chrf_dev_best"}


def test_early_stopping_may_follow_dev_chrf_and_nothing_else_slow():
    from nmt_core.training.train import record_epoch

    cfg = build_config({"train": {"early_stopping_metric": "chrf_dev", "lr_decay": 1.0}})
    progress = {"epoch": 0, "best_bleu": -1.0, "best_epoch": 0, "bad_epochs": 0, "history": []}
    assert record_epoch(progress, {"epoch": 1, "bleu_dev": 10.0, "chrf_dev": 30.0}, None, cfg)
    assert not record_epoch(progress, {"epoch": 2, "bleu_dev": 12.0, "chrf_dev": 29.0}, None, cfg)
    assert progress["best_epoch"] == 1 and progress["bad_epochs"] == 1
    with pytest.raises(ConfigError, match="train.early_stopping_metric.*bleu_dev, chrf_dev"):
        build_config({"train": {"early_stopping_metric": "ter_dev"}})
