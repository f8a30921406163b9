"""The summary tables from a tracking store of hand-made runs: every number is known in advance."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import yaml
from mlflow.entities import Metric, Param
from mlflow.tracking import MlflowClient

from nmt_core.config import build_config
from nmt_core.data.batches import load_trial_data
from nmt_core.training.decode import Translation
from nmt_core.training.evaluate import ForcedTrace, corpus_bleu, forced_trace_table, trace_table, write_traces
from sweeper.cli import main as sweeper_main
from sweeper.space.spec import RecordedSpace, SignificanceSpec
from sweeper.summary import TrialRecord, build_summary, mean_std, render_csv, render_latex, render_markdown, summarize
from sweeper.tracking.metrics import EXPLOITS

DATA = {"corpus": "synthetic", "eval_subset": 30}


def _params(**attention) -> dict[str, str]:
    cfg = build_config({"data": DATA, "attention": attention})
    return {k: str(v) for k, v in cfg.flat().items()}


def _degrade(sentence: str) -> str:
    words = sentence.split()
    return " ".join(words[:-2] + ["wrong"])  # drop the verb-final words: a clearly worse system


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    folder = tmp_path_factory.mktemp("store")
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("hand", artifact_location=str(folder / "artifacts"))
    parent = client.create_run(experiment, tags={"sweeper.role": "sweep"}).info.run_id
    client.log_text(parent, yaml.safe_dump({"name": "hand"}), "space.yaml")
    refs = load_trial_data(build_config({"data": DATA}).data).references["test"]
    signature = corpus_bleu(refs, refs).signature

    def trial(variant, attention, seed, bleu, translations, time_per_epoch, trace=None, dev=None):
        params = _params(**attention)
        params["train.seed"] = str(seed)
        run = client.create_run(
            experiment,
            tags={
                "mlflow.parentRunId": parent,
                "sweeper.role": "trial",
                "sweeper.trial_id": f"{variant}-{seed}",
                "sweeper.variant": variant,
                "sweeper.bleu_signature": signature,
            },
        )
        run_id = run.info.run_id
        dev = {"bleu_dev": [bleu - 1.0, bleu - 0.9], "attn_saturated": [0.3, 0.4], **(dev or {})}
        client.log_batch(
            run_id,
            params=[Param(k, v) for k, v in params.items()],
            metrics=[
                Metric("bleu_test_test", bleu, 0, 2),
                Metric("bleu_test_avg", bleu, 0, 2),
                Metric("multibleu_test_avg", bleu + 1, 0, 2),
                Metric("n_params", 1_500_000, 0, 2),
                *(Metric("epoch_time_s", t, 0, i + 1) for i, t in enumerate(time_per_epoch)),
                *(Metric(k, v, 0, i + 1) for k, values in dev.items() for i, v in enumerate(values)),
            ],
        )
        client.log_text(run_id, "\n".join(translations) + "\n", "translations/test.txt")
        client.log_text(run_id, "\n".join(refs) + "\n", "references/test.txt")
        if trace is not None:
            (folder / run_id).mkdir()
            for name in ("dev", "test"):
                write_traces(trace, str(folder / run_id / f"{name}.parquet"))
            client.log_artifacts(run_id, str(folder / run_id), "traces")
        client.set_terminated(run_id, "FINISHED")

    bad = [_degrade(r) for r in refs]
    saturated = {"attn_saturated": [0.97, 1.0], "attn_score_range": [80.0, 95.0]}
    trial("general+none", {}, 1, 20.0, bad, [2.0, 4.0], dev=saturated)
    trial("general+none", {}, 2, 22.0, bad, [3.0, 3.0], dev=saturated)
    words = [["le", "NOUN1", "VERB2", "ga"], ["la", "NOUN3", "ga"]]
    sact_trace = trace_table(
        [
            Translation([5, 6, 7, 8], 0.0, torch.full((4, 3), 1 / 3), [0.5, 2.0, 0.6, 3.0], None),
            Translation([5, 6, 7], 0.0, torch.full((3, 2), 0.5), [0.4, 2.5, 3.5], None),
        ],
        words,
    )
    at_bound = {
        "tau_at_bound": [0.5, 0.97],
        "tau_p5": [1.0, 3.96],
        "tau_p50": [2.0, 4.0],
        "tau_p95": [3.9, 4.0],
        "bleu_dev": [10.0, 20.0],
    }  # still rising steeply
    trial("general+sact4", {"temperature": "sact"}, 1, 25.0, refs, [5.0], sact_trace, at_bound)
    trial("general+sact4", {"temperature": "sact"}, 2, 27.0, refs, [5.0], sact_trace, at_bound)
    trial("general+tau0.8", {"temperature": "fixed", "tau": 0.8}, 1, 21.0, bad, [2.0])
    trial("general+tau1.2", {"temperature": "fixed", "tau": 1.2}, 1, 23.5, bad, [2.0])
    trial("general+tau2", {"temperature": "fixed", "tau": 2.0}, 1, 9.0, [" ".join(r.split()[:2]) for r in refs], [2.0])
    gated = trace_table(
        [
            Translation([5, 6, 7, 8], 0.0, torch.full((4, 3), 0.05), None, [0.95, 0.1, 0.92, 0.97]),
            Translation([5, 6, 7], 0.0, torch.full((3, 2), 0.02), None, [0.91, 0.2, 0.99]),
        ],
        words,
    )
    trial(
        "general+none+sentinel",
        {"sentinel": True},
        1,
        24.0,
        refs,
        [6.0],
        gated,
        {"sentinel_collapsed": [0.99, 0.98], "sentinel_mean": [0.004, 0.003]},
    )
    unfinished = client.create_run(experiment, tags={"mlflow.parentRunId": parent, "sweeper.role": "trial"})
    client.log_batch(unfinished.info.run_id, metrics=[Metric("bleu_dev", 1.0, 0, 1)])  # still running: left out
    return uri, folder


def test_bleu_table_numbers(store, tmp_path):
    uri, _ = store
    summary = summarize("hand", uri, tmp_path / "out", ["md"], resamples=1000)
    rows = {row.label: row for row in summary.rows}
    assert list(rows) == [
        "general+none",
        "general+none+sentinel",
        "general+sact4",
        "general+tau0.8",
        "general+tau1.2",
        "general+tau2",
    ]
    base, sact = rows["general+none"], rows["general+sact4"]
    assert base.is_baseline and base.delta is None
    assert base.average == pytest.approx((21.0, 2**0.5)) and base.tests["test"] == pytest.approx((21.0, 2**0.5))
    assert base.epoch_time_s == pytest.approx(3.0) and base.n_params == 1_500_000
    assert sact.average == pytest.approx((26.0, 2**0.5)) and sact.delta == pytest.approx(5.0)
    # 2 seeds a row: the seed-aware test. Var = s^2/n of each row's logged BLEU (2 / 2 each) + the shared sentence
    # part, here the whole variance of the resampled difference (every seed of a row has the same outputs, so none
    # is a seed's own), t with docs/statistics.md's df (the shared part with its Monte-Carlo variance)
    from scipy import stats as scipy_stats

    from nmt_core.training.evaluate import PairedBootstrap
    from tests.unit.test_evaluate import resample_terms, satterthwaite

    refs = load_trial_data(build_config({"data": DATA}).data).references["test"]
    bootstrap = PairedBootstrap({"test": refs}, 1000)
    base, system = (bootstrap.scores([{"test": hyps}] * 2).resampled for hyps in ([_degrade(r) for r in refs], refs))
    resampled = system.mean(0) - base.mean(0)
    variance = 2 / 2 + 2 / 2 + resampled.var(ddof=1)
    z = np.array(resample_terms(base.tolist(), system.tolist()))
    df = satterthwaite([2 / 2, 2 / 2], [2, 2], resampled.var(ddof=1), z.var(ddof=1) / 1000)
    expected = 2 * scipy_stats.t.sf(5.0 / variance**0.5, df)
    assert sact.p_value == pytest.approx(expected, rel=1e-9) and sact.p_adjusted == sact.p_value  # alone in its family
    assert sact.mark == ("**" if expected < 0.01 else "*" if expected < 0.05 else "")
    assert sact.against_baseline.covers == "seeds + sentences"
    # one seed a row: sacrebleu's test-set-only p (refs against degraded: the floor 1/1001), Holm over those 4 (its
    # first step: 4 / 1001), no mark
    sentinel, tau2 = rows["general+none+sentinel"], rows["general+tau2"]
    assert sentinel.p_value == pytest.approx(1 / 1001) and sentinel.p_adjusted == pytest.approx(4 / 1001)
    assert sentinel.mark == "" and tau2.mark == "" and sentinel.against_baseline.covers == "test-set variance only"
    tau08 = rows["general+tau0.8"]
    assert tau08.delta == pytest.approx(0.0) and tau08.p_value == 1.0 and tau08.mark == ""  # same translations
    assert tau2.delta == pytest.approx(-12.0) and tau2.p_adjusted == pytest.approx(4 / 1001)
    markdown = render_markdown(summary)
    low, high = sact.interval
    assert (
        f"| general+sact4 | 2 | 26.00 ± 1.41 | 26.00 ± 1.41 | 27.00 ± 1.41 | 1.50M | 5.0 | +5.00{sact.mark} | "
        f"[{low:+.2f}, {high:+.2f}] | {sact.p_adjusted:.3g} | seeds + sentences |"
    ) in markdown and low < 5.0 < high
    assert (
        "| general+none | 2 | 21.00 ± 1.41 | 21.00 ± 1.41 | 22.00 ± 1.41 | 1.50M | 3.0 | baseline |  |  |  |"
        in markdown
    )
    assert (
        "| general+tau1.2 | 1 | 23.50 | 23.50 | 24.50 | 1.50M | 2.0 | +2.50 | [+0.00, +0.00] | 1 | "
        "test-set variance only |" in markdown
    )
    assert "| general+tau2 | 1 | 9.00 | 9.00 | 10.00 | 1.50M | 2.0 | -12.00 | [" in markdown  # no mark on one seed
    assert (
        "seeds + sentences (1 comparison): a two-level test" in markdown
        and "Satterthwaite" in markdown
        and "1000 resamples" in markdown
        and "1-2 seeds per row" in markdown
        and "test-set variance only (4 comparisons, one seed a row)" in markdown
        and "Marks: significance.method paired_bootstrap: two-level seed x sentence test" in markdown
        and "nrefs:1|case:mixed|eff:no|tok:13a" in markdown
    )
    csv = render_csv(summary)
    assert f"general+sact4,2,26.0000,1.4142,26.0000,1.4142,27.0000,1.4142,1500000,5.000,5.0000,{sact.mark}," in csv
    assert csv.splitlines()[0].endswith(
        ",p_value,p_holm,ci_low,ci_high,variance_counted,detectable,equivalence_p,significance_method"
    )
    assert ',test-set variance only,,,"paired_bootstrap: two-level seed x sentence test' in csv.splitlines()[-1]
    latex = render_latex(summary)
    assert r"\toprule" in latex and r"26.00 $\pm$ 1.41" in latex and r"general{+}sact4" in latex
    assert r"& -12.00 &" in latex and r"\footnotesize Marks: paired\_bootstrap: two-level seed x sentence test" in latex


def test_degenerate_mechanisms_are_stated_before_the_table(store, tmp_path):
    uri, _ = store
    summary = summarize("hand", uri, tmp_path / "out", ["md"], resamples=1000)
    text = (tmp_path / "out" / "summary.md").read_text()
    warnings = text.split("| variant |")[0]
    assert "`general+none`: attention saturated from epoch 1" in warnings and "97% of dev steps" in warnings
    assert (
        "`general+sact4`: tau at its upper bound for 97% of dev tokens (p5 3.96, p95 4.00): SACT acts as a fixed "
        "temperature 4 here"
    ) in warnings
    assert "`general+none+sentinel`: sentinel gate collapsed: beta < 0.01 for 98% of dev tokens" in warnings
    assert "`general+sact4`: dev BLEU still rising at the last epoch (+10.00 to 20.00 in epoch 2)" in warnings
    # SACT's tau sat at 4 (tau_p50 at its best dev epoch, the second); the fixed taus beside it are 0.8, 1 (the
    # baseline), 1.2 and 2: none within a factor 1.2 of 4, and no learned row
    assert (
        "no temperature control at the scale SACT settled on for `general+sact4` (median tau 4.00 (seeds 4.00-4.00, "
        "std 0.00); nearest fixed tau 2; no learned row): a control is a learned temperature"
    ) in warnings
    few = (
        "fewer than 3 seeds in 6 of 6 rows (`general+none` (2), `general+none+sentinel` (1), `general+sact4` (2), "
        "`general+tau0.8` (1), `general+tau1.2` (1) and 1 more): a row with one seed is tested on test-set variance "
        "only and carries no mark; with two, the seed spread is barely estimated and the intervals are wide; run the "
        "sweep with search.repeats >= 3."
    )
    assert few in summary.warnings and f"- **{few}**" in warnings
    assert [w for w in summary.warnings if "`general+tau1.2`" in w] == [few]  # a healthy, flat variant: seeds only
    shows = text.split("## What this sweep shows, and what it cannot")[1]
    # SACT's gain (+5.00, 2 seeds a row, seed std 1.41) is not significant with the seed-aware test's df (p 0.051: the
    # seed part at its median-unbiased value, docs/statistics.md) and comes from a degenerate mechanism (tau at its
    # bound): never a plain win. The rows with one seed are tested on test-set variance only and make no claim. (The
    # significant-but-degenerate wording: test_each_claim_names_the_baseline_or_control_it_was_tested_against.)
    assert [c.mark for c in summary.comparisons if c.row.label == "general+sact4"] == [""]
    assert (
        "Against the baseline `general+none`: no significant difference: `general+sact4` (+5.00; these seeds detect a "
        "true difference of 6.96 or more (80% power at alpha 0.05, Holm's level)); test-set variance only, not marked: "
        "`general+none+sentinel` (+3.00), `general+tau0.8` (+0.00), `general+tau1.2` (+2.50), `general+tau2` (-12.00)."
    ) in shows
    assert "significantly better: " not in shows.replace("significantly better, but", "")
    assert "-epoch budget, not at convergence" in shows and "longer training could change the ranking" in shows
    assert "degenerate behaviour, not the method" in shows
    assert "do not count the spread of training runs: they are not claims" in shows
    assert (tmp_path / "out" / "dev_bleu_curves.png").stat().st_size > 2000


def test_figures_and_word_tables(store, tmp_path):
    uri, _ = store
    out = tmp_path / "out"
    summarize("hand", uri, out, ["csv", "latex"], resamples=100)
    for name in (
        "summary.md",
        "bleu_table.csv",
        "bleu_table.tex",
        "fixed_tau_curve.png",
        "fixed_tau_curve.svg",
        "temperature_heatmap.png",
    ):
        assert (out / name).stat().st_size > 200, name
    text = (out / "summary.md").read_text()
    # gates >= 0.9: le (0.95), VERB2 (0.92), ga (0.97, 0.99), la (0.91)
    assert (
        "| ga | 2 |" in text
        and "| le | 1 |" in text
        and "| la | 1 |" in text
        and "NOUN1" not in text.split("Li & Zhu")[1]
    )
    assert (
        "## Temperature and sentinel gate by word class (test)\n\nNot computed: no closed-class source for the target "
        "language `tgt` (data.tgt); available for es, vi, de, fr, en."
    ) in text  # synthetic data
    # the SACT trial's dev history (tau_p50 2.0 then 4.0; tau_at_bound 0.5 then 0.97), epoch by epoch
    assert "## Temperature by epoch (dev)" in text and "| 0.25-4 | 2 / 50% | 4 / 97% |" in text


def test_summary_is_logged_to_the_parent_run(store, tmp_path):
    uri, _ = store
    client = MlflowClient(uri)
    summarize("hand", uri, tmp_path / "out", ["md"], resamples=100)
    experiment = client.get_experiment_by_name("hand")
    [parent] = client.search_runs([experiment.experiment_id], filter_string="tags.`sweeper.role` = 'sweep'")
    assert "summary/summary.md" in {a.path for a in client.list_artifacts(parent.info.run_id, "summary")}


def test_clear_messages_for_missing_sweeps_and_baselines(store, tmp_path, capsys):
    uri, folder = store
    assert sweeper_main(["summarize", "nope", "--tracking-uri", uri, "--out", str(tmp_path)]) == 2  # bad input
    err = capsys.readouterr().err
    assert err.startswith("sweeper: error: sweeper summarize: NAME: no sweep named 'nope' in sqlite:")
    assert "sweeps there: hand" in err and err.count("\n") == 1
    assert (
        sweeper_main(["summarize", "hand", "--tracking-uri", uri, "--out", str(tmp_path / "r"), "--resamples", "50"])
        == 2
    )
    err = capsys.readouterr().err
    assert "sweeper summarize --resamples: significance.resamples: must be in [100, 1000000]" in err
    assert err.count("\n") == 1 and not (tmp_path / "r").exists()
    client = MlflowClient(uri)
    experiment = client.create_experiment("empty", artifact_location=str(folder / "empty"))
    client.create_run(experiment, tags={"sweeper.role": "sweep"})
    assert sweeper_main(["summarize", "empty", "--tracking-uri", uri, "--out", str(tmp_path)]) == 1
    assert "no finished trial" in capsys.readouterr().err


def test_run_id_picks_an_older_sweep_of_the_same_name(store, tmp_path, capsys):
    uri, _ = store
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("hand")
    [first] = client.search_runs([experiment.experiment_id], filter_string="tags.`sweeper.role` = 'sweep'")
    rerun = client.create_run(experiment.experiment_id, tags={"sweeper.role": "sweep"}).info.run_id  # no trials yet
    try:
        assert sweeper_main(["summarize", "hand", "--tracking-uri", uri, "--out", str(tmp_path / "a")]) == 1
        assert "no finished trial" in capsys.readouterr().err  # the newest sweep is the default
        assert (
            sweeper_main(
                [
                    "summarize",
                    "hand",
                    "--tracking-uri",
                    uri,
                    "--out",
                    str(tmp_path / "b"),
                    "--run-id",
                    first.info.run_id,
                ]
            )
            == 0
        )
        assert "general+sact4" in (tmp_path / "b" / "summary.md").read_text()
        assert sweeper_main(["summarize", "hand", "--tracking-uri", uri, "--run-id", "abc123"]) == 2
        assert (
            f"--run-id: abc123 is not a sweep run of 'hand'; its sweep runs, newest first: {rerun}"
            in capsys.readouterr().err
        )
    finally:
        client.delete_run(rerun)


def test_rows_with_the_same_variant_label_are_told_apart_by_their_settings():
    def record(run_id, lr, bleu):
        params = {**_params(), "train.lr": str(lr)}
        return TrialRecord(run_id, run_id, "general+none", params, {"bleu_test_test": bleu, "bleu_test_avg": bleu}, {})

    summary = build_summary(
        [record("a", 0.0012520653814999472, 20.0), record("b", 0.006, 21.0), record("c", 0.006, 23.0)], {}, {"test": []}
    )
    assert [row.label for row in summary.rows] == ["general+none (train.lr=0.00125)", "general+none (train.lr=0.006)"]
    assert [len(row.records) for row in summary.rows] == [1, 2]  # seeds of one setting still pool


def test_mean_and_sample_std():
    assert mean_std([1.0]) == (1.0, 0.0)
    assert mean_std([20.0, 22.0, 24.0]) == pytest.approx((22.0, 2.0))


def test_an_unknown_sweep_in_an_empty_folder_creates_no_store(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert sweeper_main(["summarize", "nope"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"sweeper: error: sweeper summarize: NAME: no sweep named 'nope': no "
        f"{tmp_path / 'sweeps' / 'nope' / 'sweeper.json'} and no tracking store "
        f"{tmp_path / 'mlflow.db'} (pass the --storage or --tracking-uri the sweep ran with)\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_the_parent_run_description_holds_the_table_and_the_warnings(store, tmp_path):
    uri, _ = store
    client = MlflowClient(uri)
    summary = summarize("hand", uri, tmp_path / "out", ["md"], resamples=100)
    experiment = client.get_experiment_by_name("hand")
    [parent] = client.search_runs([experiment.experiment_id], filter_string="tags.`sweeper.role` = 'sweep'")
    note = parent.data.tags["mlflow.note.content"]
    assert note.startswith("# Sweep `hand`") and "| variant | seeds |" in note
    link = f"#/experiments/{experiment.experiment_id}/runs?workflowType=machine_learning&orderByKey="
    assert f"[Compare its trials]({link}" in note  # no saved view written: the plain runs table
    assert "Compare their translations" not in note  # ... and no view of the translations
    assert all(warning in note for warning in summary.warnings)
    assert "Marks: significance.method paired_bootstrap: two-level seed x sentence test" in note


def test_a_parent_description_too_long_for_mlflow_leaves_out_the_conclusion_and_keeps_the_method(store, tmp_path):
    """MLflow keeps 8,000 characters of a tag and cuts the rest wherever it falls: a longer description leaves out
    whole parts, says which, and never loses the line naming the method behind the marks."""
    from types import SimpleNamespace

    from sweeper.summary.report import parent_note

    uri, _ = store
    summary = summarize("hand", uri, tmp_path / "out", ["md"], resamples=100)
    snapshot = SimpleNamespace(name="hand", records=[], added=())
    marks = "Marks: significance.method paired_bootstrap: two-level seed x sentence test"
    assert marks in parent_note(snapshot, summary) and "Left out" not in parent_note(snapshot, summary)
    links = "[Compare its trials](#/a) · [Compare their translations](#/b)\n\n"  # the saved views, side by side
    assert parent_note(snapshot, summary, "", "#/a", "#/b").startswith(f"# Sweep `hand`\n\n{links}")

    summary.conclusion = "a long conclusion. " * 500  # 9,500 characters
    note = parent_note(snapshot, summary)
    assert len(note) <= 8000 and "a long conclusion" not in note and marks in note
    assert "| variant | seeds |" in note and "Left out here to fit MLflow's 8,000 characters: the conclusion." in note

    summary.warnings = [f"warning {i}: " + "w" * 200 for i in range(60)]  # 12,000 characters before the table
    note = parent_note(snapshot, summary)
    assert len(note) <= 8000 and "warning 30:" in note and "warning 59:" not in note
    kept, cut = note.split("\n... cut here to fit MLflow's 8,000 characters.\n")
    assert cut.startswith(marks) and cut.endswith("Figures and the full summary: artifacts, summary/summary.md")
    assert "Left out here to fit MLflow's 8,000 characters: the conclusion" in cut

    summary.warnings, summary.conclusion = [], ""  # too long below the method line: it stays, once
    summary.notes = [f"note {i}: " + "n" * 300 for i in range(30)]
    note = parent_note(snapshot, summary)
    assert len(note) <= 8000 and note.count(marks) == 1 and "note 0:" in note and "note 29:" not in note
    assert "the conclusion" not in note


def test_alignment_table_tests_aer_and_gold_mass_as_bleu_is_tested():
    """Per-sentence link counts decide the table: AER 1 - 2|A & S| / (|A| + |S|) and gold mass, with a delta to
    the baseline marked better (**) in the direction that is better for each (lower AER, higher mass)."""
    import numpy as np

    from sweeper.space.spec import SignificanceSpec
    from sweeper.summary import alignment_table, render_alignment

    refs = {"test": ["a b c d", "e f g h", "i j k l", "m n o p"]}

    def record(variant, guided, seed, both, mass):
        metrics = {
            "bleu_test_test": 10.0,
            "bleu_test_avg": 10.0,
            "aer_test": 1 - 2 * both / 8,
            "gold_attention_test": mass / 4,
        }
        params = {
            "train.guided_alignment": guided,
            "attention.temperature": "none",
            "attention.sentinel": "False",
            "train.seed": str(seed),
        }
        stats = {"test": np.tile([4, 4, both, mass, 4], (4, 1)).astype(float)}
        return TrialRecord(f"{variant}{seed}", f"{variant}-{seed}", variant, params, metrics, {}), stats

    made = [
        record("plain", "0.0", 1, 1, 2),
        record("plain", "0.0", 2, 1, 2),
        record("guided", "0.5", 1, 3, 3),
        record("guided", "0.5", 2, 2, 3),
    ]
    records = [r for r, _ in made]
    summary = build_summary(records, {r.run_id: refs for r in records}, refs, {"train.guided_alignment": "0.0"})
    table = render_alignment(
        summary, alignment_table(summary, {r.run_id: s for r, s in made}, SignificanceSpec(resamples=200))
    )
    rows = {line.split(" | ")[0].strip("| "): line for line in table.splitlines() if line.startswith("| ")}
    assert "| 0.750 ± 0.000 | baseline |  | 0.500 ± 0.000 | baseline |" in rows["plain"]
    # the sentences are alike, so only the seeds vary: guided's AER 0.25 and 0.5 (std 0.177), plain's 0.75 twice:
    # Welch's t = -0.375 / sqrt(0.03125 / 2) = -3 with 1 degree of freedom, p = 0.205, no mark; its gold mass is
    # 0.75 on both seeds, so nothing varies and the difference is certain (p = 0)
    from scipy import stats

    p = 2 * stats.t.sf(3.0, 1)
    assert f"| 0.375 ± 0.177 | -0.375 | {p:.3g} | 0.750 ± 0.000 | +0.250** | 0 |" in rows["guided"] and 0.2 < p < 0.21


def test_a_full_summary_renders_from_a_snapshot_without_a_tracking_server(tmp_path, monkeypatch):
    """records -> statistics -> findings -> tables and figures: nothing after the one read needs MLflow (a tracking
    URI that nothing answers would fail any call)."""
    from collections import Counter

    from sweeper.summary import SweepSnapshot, write_report

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    refs = [f"w{i} x{i} y{i} z{i} end" for i in range(20)]
    words = [["le", "NOUN1", "VERB2", "ga"], ["la", "NOUN3", "ga"]]
    gated = trace_table(
        [
            Translation([5, 6, 7, 8], 0.0, torch.full((4, 3), 0.25), [0.5, 2.0, 0.6, 3.0], [0.95, 0.1, 0.92, 0.97]),
            Translation([5, 6, 7], 0.0, torch.full((3, 2), 0.5), [0.4, 2.5, 3.5], [0.91, 0.2, 0.99]),
        ],
        words,
    )

    def record(variant, attention, seed, bleu, settings=None):
        params = {**_params(**attention), "train.seed": str(seed), "data.tgt": "fr"}
        curves = {"bleu_dev": [bleu - 1.0, bleu - 0.9], "epoch_time_s": [2.0, 2.0], "attn_saturated": [0.3, 0.3]}
        return TrialRecord(
            f"{variant}-{seed}",
            f"t{seed}{variant[-1]}",
            variant,
            params,
            {"bleu_test_test": bleu, "bleu_test_avg": bleu, "multibleu_test_avg": bleu + 1, "n_params": 2e6},
            curves,
            {EXPLOITS: "1"} if settings else {},
            {"setting.train.lr": settings} if settings else {},
            [{"epoch": 1, "copied_from": "t1e"}] if settings else [],
        )

    records = [
        record("general+none", {}, 1, 20.0, {1: 0.005, 2: 0.004}),
        record("general+none", {}, 2, 21.0),
        record("general+tau4", {"temperature": "fixed", "tau": 4.0}, 1, 19.0),
        record("general+sact4+sentinel", {"temperature": "sact", "sentinel": True}, 1, 25.0),
    ]
    worse = [" ".join(r.split()[:2]) for r in refs]
    translations = {r.run_id: {"test": refs if "sact" in r.variant else worse} for r in records}
    snapshot = SweepSnapshot(
        "by-hand",
        "p0",
        "FINISHED",
        RecordedSpace(significance=SignificanceSpec(resamples=200)),
        records,
        Counter({"failed": 1}),
        {"test": refs},
        translations,
        traces={
            ("general+sact4+sentinel-1", "dev"): gated,
            ("general+sact4+sentinel-1", "test"): gated,
            ("general+sact4+sentinel-1", "forced/test"): forced_trace_table(
                [ForcedTrace(np.array([1.0, 0.5, 2.0, 0.25, 1.0, 4.0]), np.array([0.1, 0.2, 0.3, 0.9, 0.4, 0.5]))],
                [["le", "chat", "mange", "la", "souris", "."]],
            ),
        },
    )
    out = tmp_path / "out"
    summary = write_report(snapshot, out, ["csv", "latex"])
    text = (out / "summary.md").read_text()
    assert text.startswith("# Sweep `by-hand`\n\nMLflow parent run `p0` (FINISHED); 4 finished trials.\n")
    assert "| general+none | 2 | 20.50 ± 0.71 | 20.50 ± 0.71 | 21.50 ± 0.71 | 2.00M | 2.0 | baseline |  |" in text
    [sact_line] = [line for line in text.splitlines() if line.startswith("| general+sact4+sentinel | 1 | 25.00 |")]
    assert sact_line.startswith("| general+sact4+sentinel | 1 | 25.00 | 25.00 | 26.00 | 2.00M | 2.0 | +4.50 | [")
    assert sact_line.endswith("| 0.00995 | test-set variance only |")  # one seed: sacrebleu's p 1/201, Holm over 2
    assert (
        "## Fixed temperature vs SACT (SACT Figure 1)\n\nNo curve: this sweep has 2 constant temperatures (tau 1, 4; "
        "the baseline counts as tau = 1) with the same other settings, and a curve needs 3 or more"
    ) in text
    assert "Note: 1 trial(s) left out of every table and figure: 1 failed" in text
    for section in (
        "## What this sweep shows",
        "## Fixed temperature vs SACT",
        "## Temperature heatmap",
        "## Words with sentinel gate >= 0.9",
        "## Temperature and sentinel gate by word class (test)",
        "## Parameter importance",
        "## PBT schedules",
    ):
        assert section in text, section
    # teacher-forced, French (UD_French): le first, la closed, chat mange souris open, "." punctuation
    assert "UD_French (Universal Dependencies v1.3" in text and "(1 a row)" in text
    assert (
        "| general+sact4+sentinel | 1 | 0.250 | 1.000 | 4.000 | 1.000 | 0.250 (one seed, no interval) |" in text
        and "| general+sact4+sentinel | 1 | 0.900 | 0.300 | 0.500 | 0.100 | +0.600 (one seed, no interval) |" in text
    )
    assert "epochs 1-1: train.lr=0.005<br>epochs 2-2: train.lr=0.004 (weights of trial t1e at epoch 1)" in text
    for name in (
        "bleu_table.csv",
        "bleu_table.tex",
        "dev_bleu_curves.png",
        "temperature_heatmap.png",
        "parallel_coordinates.png",
    ):
        assert (out / name).stat().st_size > 200, name
    assert not (out / "fixed_tau_curve.png").exists()
    assert [row.label for row in summary.rows] == ["general+none", "general+sact4+sentinel", "general+tau4"]


@pytest.mark.parametrize("kind", ["sqlite", "http"])
def test_histories_are_read_in_bulk_with_the_latest_value_of_an_epoch_trained_again(kind, tmp_path, request):
    """One call per metric for up to 100 runs (a server's get-history-bulk, a database's bulk query), the same
    histories as one call per run: an epoch logged again after a PBT exploit counts with its latest value."""
    from sweeper.summary.records import bulk_values, by_epoch, read_histories

    uri = f"sqlite:///{tmp_path / 'bulk.db'}" if kind == "sqlite" else request.getfixturevalue("mlflow_server").uri
    client = MlflowClient(uri)
    experiment = client.create_experiment(f"bulk-{kind}-{tmp_path.name}")
    runs = [client.create_run(experiment).info.run_id for _ in range(3)]
    for i, run_id in enumerate(runs):
        client.log_batch(run_id, metrics=[Metric("bleu_dev", 10.0 * i + step, 1000 + step, step) for step in (1, 2, 3)])
    client.log_batch(runs[0], metrics=[Metric("bleu_dev", 99.0, 2000, 2)])  # epoch 2 trained again
    assert sorted(v[0] for v in bulk_values(client, "bleu_dev", runs)) == sorted(runs * 3 + runs[:1])
    histories = read_histories(client, [(run_id, "bleu_dev") for run_id in runs])
    assert histories == {(run_id, "bleu_dev"): by_epoch(client, run_id, "bleu_dev") for run_id in runs}
    assert histories[(runs[0], "bleu_dev")] == {1: 1.0, 2: 99.0, 3: 3.0}


REVIEW_REFS = [f"w{i} x{i} y{i} z{i} end of line {i}" for i in range(40)]


def _hyps(every: int, offset: int = 0) -> list[str]:
    """Every `every`-th sentence (from `offset`) loses its last three words (every=0: the references themselves)."""
    return [" ".join(r.split()[:-3]) if every and i % every == offset else r for i, r in enumerate(REVIEW_REFS)]


def _review_params(attention: dict) -> dict[str, str]:
    """A trial's params; `temperature: learned` (a learned tau = lambda^tanh(b), not yet a config value here) as
    such a trial logs it: the lambda it owns beside the other settings."""
    if attention.get("temperature") != "learned":
        return _params(**attention)
    return {**_params(), "attention.temperature": "learned", "attention.lambda": str(attention.get("lambda", 4.0))}


def _review_snapshot(
    rows: list[tuple[str, dict, float, int, dict]], seeds: int, significance: dict, seeds_differ: bool = False
):
    """A snapshot of rows (variant, attention, lr, degraded every, dev curves) with BLEU scored from the outputs;
    with `seeds_differ` each seed degrades other sentences (seed k from sentence k - 1 on)."""
    from collections import Counter

    from sweeper.summary import SweepSnapshot

    records, translations = [], {}
    for variant, attention, lr, every, dev in rows:
        for seed in range(1, seeds + 1):
            hyps, run_id = _hyps(every, (seed - 1) % every if seeds_differ and every else 0), f"{variant}-{lr}-{seed}"
            bleu = corpus_bleu(hyps, REVIEW_REFS).score
            params = {**_review_params(attention), "train.seed": str(seed), "train.lr": str(lr), "variant": variant}
            curves = {"bleu_dev": [bleu - 1.0, bleu - 0.95], "attn_saturated": [0.1, 0.1], **dev}
            records.append(
                TrialRecord(run_id, run_id, variant, params, {"bleu_test_test": bleu, "bleu_test_avg": bleu}, curves)
            )
            translations[run_id] = {"test": hyps}
    return SweepSnapshot(
        "review",
        "p0",
        "FINISHED",
        RecordedSpace(significance=SignificanceSpec(**significance)),
        records,
        Counter(),
        {"test": REVIEW_REFS},
        translations,
    )


AT_BOUND = {"tau_at_bound": [0.98, 0.98], "tau_p5": [3.9, 3.9], "tau_p50": [4.0, 4.0], "tau_p95": [4.0, 4.0]}


def test_each_claim_names_the_baseline_or_control_it_was_tested_against():
    """A grid over train.lr: two baselines, and each SACT row's two controls: the learned temperature (same lambda)
    and the fixed tau at the scale SACT settled on. At lr 0.001 SACT's tau settled at 0.5: tau = 0.5 is its fixed
    control and tau = 4 = lambda is not; at lr 0.005 it sat at its bound 4: there tau = 4 is. Each closing sentence
    names the row its claims were tested against, and a SACT whose tau sat at its bound is no plain win."""
    from sweeper.summary.findings import add_findings
    from sweeper.summary.report import compute, significance_of

    sact, learned = {"temperature": "sact", "lambda": 4.0}, {"temperature": "learned", "lambda": 4.0}
    settled = {"tau_p50": [0.6, 0.5]}  # the best dev epoch is the second: 0.5
    rows = []
    for lr, sact_dev in ((0.001, settled), (0.005, AT_BOUND)):
        rows += [
            ("general+none", {}, lr, 2, {}),
            ("general+sact4", sact, lr, 0, sact_dev),
            ("general+learned4", learned, lr, 4, {"tau_p50": [1.2, 1.3]}),
            ("general+tau0.5", {"temperature": "fixed", "tau": 0.5}, lr, 3, {}),
            ("general+tau4", {"temperature": "fixed", "tau": 4.0}, lr, 4 if lr == 0.001 else 2, {}),
        ]
    snapshot = _review_snapshot(rows, 3, {"resamples": 1000}, seeds_differ=True)
    summary = compute(snapshot, significance_of(snapshot, None))
    tested = [(c.row.label.split(" ")[0], c.against.label, c.kind, c.control) for c in summary.comparisons]
    assert tested[8:] == [
        ("general+sact4", "general+learned4 (train.lr=0.001)", "control", "learned"),
        ("general+sact4", "general+tau0.5 (train.lr=0.001)", "control", "fixed"),
        ("general+sact4", "general+learned4 (train.lr=0.005)", "control", "learned"),
        ("general+sact4", "general+tau4 (train.lr=0.005)", "control", "fixed"),
    ]
    assert [t[2] for t in tested[:8]] == ["baseline"] * 8 and all(c.test is not None for c in summary.comparisons)
    same = next(c for c in summary.comparisons if c.row.label == "general+tau4 (train.lr=0.005)")
    assert same.delta == 0 and same.p_value == 1.0 and same.interval == (0.0, 0.0) and same.mark == ""
    assert (
        same.detectable == 0
        and same.power == "these seeds detect a true difference of 0.00 or more (80% power at alpha 0.05, Holm's level)"
    )  # the largest p: Holm's level is alpha itself
    for c in summary.comparisons:
        assert c.interval[0] <= c.delta <= c.interval[1] and c.p_adjusted >= c.p_value
    assert "fewer than 3 seeds" not in " ".join(summary.warnings)
    assert not any("no temperature control" in w for w in summary.warnings)  # every SACT row has one
    lines = summary.conclusion.splitlines()
    assert lines[0] == (
        "Each claim names the row it was tested against (3 seeds per variant, 40 test sentences, "
        "Holm-corrected over the 12 comparisons of the table, by family as its footer says)."
    )
    # outputs this far apart are significant everywhere; tau = 4 at lr 0.005 has the baseline's outputs
    assert lines[1:7] == [
        "Against the baseline `general+none (train.lr=0.001)`: significantly better: `general+learned4 "
        "(train.lr=0.001)` (+10.78), `general+sact4 (train.lr=0.001)` (+20.61), `general+tau0.5 (train.lr=0.001)` "
        "(+7.29), `general+tau4 (train.lr=0.001)` (+10.78).",
        "Against the baseline `general+none (train.lr=0.005)`: significantly better: `general+learned4 "
        "(train.lr=0.005)` (+10.78), `general+tau0.5 (train.lr=0.005)` (+7.29); significantly better, but with a "
        "mechanism flagged as degenerate above (not a win of the method): `general+sact4 (train.lr=0.005)` (+20.61); "
        "no significant difference: `general+tau4 (train.lr=0.005)` (+0.00; these seeds detect a true difference of "
        "0.00 or more (80% power at alpha 0.05, Holm's level)).",
        "Against the learned-temperature control `general+learned4 (train.lr=0.001)` (the same lambda, every other "
        "setting equal): significantly better: `general+sact4 (train.lr=0.001)` (+9.83).",
        "Against the fixed-temperature control `general+tau0.5 (train.lr=0.001)` (tau 0.5, at the scale of SACT's "
        "median tau 0.50; every other setting equal): significantly better: `general+sact4 (train.lr=0.001)` (+13.31).",
        "Against the learned-temperature control `general+learned4 (train.lr=0.005)` (the same lambda, every other "
        "setting equal): significantly better, but with a mechanism flagged as degenerate above (not a win of the "
        "method): `general+sact4 (train.lr=0.005)` (+9.83).",
        "Against the fixed-temperature control `general+tau4 (train.lr=0.005)` (tau 4, at the scale of SACT's "
        "median tau 4.00; every other setting equal): significantly better, but with a mechanism flagged as "
        "degenerate above (not a win of the method): `general+sact4 (train.lr=0.005)` (+20.61).",
    ]
    markdown = render_markdown(summary)
    control = tested.index(("general+sact4", "general+tau0.5 (train.lr=0.001)", "control", "fixed"))
    c = summary.comparisons[control]
    assert (
        f"| general+sact4 (train.lr=0.001) | 100.00 ± 0.00 | general+tau0.5 (train.lr=0.001) | "
        f"{c.against.average[0]:.2f} ± {c.against.average[1]:.2f} | 0.5 (fixed) | {c.delta:+.2f}{c.mark} | "
        f"[{c.interval[0]:+.2f}, {c.interval[1]:+.2f}] | {c.p_value:.3g} | {c.p_adjusted:.3g} | seeds + sentences |"
    ) in markdown
    assert (
        "| general+learned4 (train.lr=0.001) | " in markdown
        and "| 1.30 (seeds 1.30-1.30, std 0.00) (learned) |" in (markdown)
    )
    assert "- `general+sact4 (train.lr=0.001)`: median tau 0.50 (seeds 0.50-0.50, std 0.00); learned control " in (
        markdown
    )
    assert (
        "seeds + sentences (12 comparisons: 8 against a baseline, 4 SACT against a control): a two-level test"
        in markdown
    )
    add_findings(summary)  # idempotent: the closing paragraph is rebuilt, not appended to
    assert summary.conclusion.count("Each claim names") == 1


def test_two_seeds_a_row_get_the_seed_aware_test_of_the_logged_bleu_and_the_resampled_sentences():
    """Var = s_A^2 / n_A + s_B^2 / n_B of the rows' logged per-seed BLEU + the shared part of the resampled
    seed-averaged difference (less each row's per-seed part over n, from the resampled scores of each seed); t with
    docs/statistics.md's df (the shared part with its Monte-Carlo variance). Each seed's outputs differ from the
    other's here."""
    from scipy import stats

    from nmt_core.training.evaluate import PairedBootstrap
    from sweeper.summary.report import compute, significance_of
    from tests.unit.test_evaluate import resample_terms, satterthwaite

    fixed = {"temperature": "fixed", "tau": 4.0}
    snapshot = _review_snapshot(
        [("general+none", {}, 0.001, 2, {}), ("general+tau4", fixed, 0.001, 5, {})], 2, {"resamples": 300}
    )
    for record in snapshot.records:  # seed 2 of each row degrades one sentence more
        if record.params["train.seed"] == "2":
            hyps = list(snapshot.translations[record.run_id]["test"])
            hyps[1] = "w1"
            snapshot.translations[record.run_id]["test"] = hyps
            record.metrics["bleu_test_avg"] = record.metrics["bleu_test_test"] = corpus_bleu(hyps, REVIEW_REFS).score
    summary = compute(snapshot, significance_of(snapshot, None))
    [comparison] = summary.comparisons
    test = PairedBootstrap({"test": REVIEW_REFS}, 300)
    by_row = {label: [r for r in snapshot.records if r.variant == label] for label in ("general+none", "general+tau4")}
    bleu = {label: [r.metrics["bleu_test_avg"] for r in records] for label, records in by_row.items()}
    per_seed = {
        label: test.scores([snapshot.translations[r.run_id] for r in records]).resampled
        for label, records in by_row.items()
    }
    resampled = {label: scores.mean(axis=0) for label, scores in per_seed.items()}
    own = {  # each row's per-seed part: (mean_i Var(seed i) - Var(average)) * n / (n - 1), n = 2
        label: max(0.0, (np.var(scores, axis=1, ddof=1).mean() - np.var(resampled[label], ddof=1)) * 2)
        for label, scores in per_seed.items()
    }
    whole = np.var(resampled["general+tau4"] - resampled["general+none"], ddof=1)
    shared = max(0.0, whole - own["general+none"] / 2 - own["general+tau4"] / 2)
    seed_terms = [np.var(bleu[label], ddof=1) / 2 for label in bleu]
    variance = sum(seed_terms) + shared
    z = np.array(resample_terms(*(per_seed[label].tolist() for label in ("general+none", "general+tau4"))))
    df = satterthwaite(seed_terms, [2, 2], shared, z.var(ddof=1) / 300)
    assert 0 < shared < whole
    delta = np.mean(bleu["general+tau4"]) - np.mean(bleu["general+none"])
    assert comparison.delta == pytest.approx(delta) and all(term > 0 for term in seed_terms)
    assert comparison.p_value == pytest.approx(2 * stats.t.sf(abs(delta) / variance**0.5, df), rel=1e-9)
    half = stats.t.ppf(0.975, df) * variance**0.5
    assert comparison.interval == pytest.approx((delta - half, delta + half), rel=1e-9)
    assert "fewer than 3 seeds in 2 of 2 rows (`general+none` (2), `general+tau4` (2))" in summary.warnings[-1]


@pytest.mark.parametrize("method,flag", [("approximate_randomization", "ar"), ("paired_bootstrap", "bs")])
def test_summary_p_values_are_sacrebleus_on_the_same_files(tmp_path, method, flag):
    """One seed per row, one test set: the table's p before Holm is `sacrebleu --paired-ar` / `--paired-bs`'s."""
    from sweeper.summary.report import compute, significance_of
    from tests.unit.test_evaluate import _sacrebleu_paired

    fixed = {"temperature": "fixed", "tau": 4.0}
    snapshot = _review_snapshot(
        [("general+none", {}, 0.001, 3, {}), ("general+tau4", fixed, 0.001, 4, {})],
        1,
        {"method": method, "resamples": 1000},
    )
    summary = compute(snapshot, significance_of(snapshot, None))
    [comparison] = summary.comparisons
    sacrebleu_p = _sacrebleu_paired(tmp_path, _hyps(3), _hyps(4), REVIEW_REFS, flag, 1000)
    assert comparison.p_value == pytest.approx(sacrebleu_p, abs=1e-12)
    assert 1 / 1001 < comparison.p_value < 1
    assert ("sacrebleu --paired-ar semantics" if flag == "ar" else "sacrebleu --paired-bs semantics") in summary.method
    assert comparison.covers == "test-set variance only" and comparison.test is None and comparison.mark == ""


def test_a_sact_row_finds_its_controls_with_the_parameters_a_real_trial_logs():
    """A real SACT trial logs what its part owns (attention.lambda and attention.sact_bias), a fixed one
    attention.tau, a learned one its lambda: the controls are found all the same. SACT's tau settled at 3.8 here, so
    tau = 4 is at its scale (within a factor 1.2) and tau = 2 is not."""
    refs = [f"w{i} x{i} y{i} z{i} end" for i in range(12)]

    def record(run: str, attention: dict, bleu: float, tau: float | None = None) -> TrialRecord:
        learned = attention.get("temperature") == "learned"
        cfg = build_config({"data": {"corpus": "synthetic"}, "attention": {} if learned else attention})
        params = {k: str(v) for k, v in cfg.active().items()}
        if learned:  # not yet a config value on this branch: the params such a trial logs
            params.update({"attention.temperature": "learned", "attention.lambda": "4.0"})
        curves = {"bleu_dev": [bleu], **({"tau_p50": [tau]} if tau else {})}
        return TrialRecord(run, run, run, params, {"bleu_test_test": bleu, "bleu_test_avg": bleu}, curves)

    records = [
        record("base", {}, 20.0),
        record("sact", {"temperature": "sact", "lambda": 4.0}, 21.0, tau=3.8),
        record("fixed", {"temperature": "fixed", "tau": 4.0}, 19.0),
        record("fixed2", {"temperature": "fixed", "tau": 2.0}, 19.5),
        record("learned", {"temperature": "learned"}, 20.5, tau=1.5),
    ]
    assert "attention.sact_bias" in records[1].params and "attention.sact_bias" not in records[2].params
    translations = {
        r.run_id: {"test": [" ".join(ref.split()[: 2 + i % 3]) for ref in refs]} for i, r in enumerate(records)
    }
    summary = build_summary(records, translations, {"test": refs}, significance=SignificanceSpec(resamples=100))
    controls = [
        (c.row.records[0].run_id, c.against.records[0].run_id, c.control)
        for c in summary.comparisons
        if c.kind == "control"
    ]
    assert controls == [("sact", "learned", "learned"), ("sact", "fixed", "fixed")]
    [found] = summary.controls.values()
    assert found.scale.seeds == [3.8] and found.fixed_tau == 4.0 and found.nearest_tau == 4.0


def test_a_sact_row_settled_near_one_is_controlled_by_its_baseline_in_one_comparison():
    """No temperature is tau = 1: a SACT row whose tau settled within a factor 1.2 of 1 has its baseline as its
    fixed control, one comparison answering both questions (tested once, in both tables)."""
    from sweeper.summary.findings import add_findings

    def record(run: str, attention: dict, seed: int, bleu: float, tau: float | None = None) -> TrialRecord:
        params = {**_params(**attention), "train.seed": str(seed)}
        curves = {"bleu_dev": [bleu - 1, bleu], **({"tau_p50": [tau, tau]} if tau else {})}
        return TrialRecord(f"{run}{seed}", run, run, params, {"bleu_test_test": bleu, "bleu_test_avg": bleu}, curves)

    records = [record("base", {}, s, 20.0 + s) for s in (1, 2, 3)]
    records += [record("sact", {"temperature": "sact"}, s, 21.0 + s, tau=0.9 + 0.05 * s) for s in (1, 2, 3)]
    translations = {r.run_id: {"test": _hyps(2 if r.variant == "base" else 4)} for r in records}
    summary = build_summary(records, translations, {"test": REVIEW_REFS}, significance=SignificanceSpec(resamples=100))
    [comparison] = summary.comparisons
    assert (comparison.kind, comparison.control, comparison.against.label) == ("baseline", "fixed", "base")
    scale = summary.controls[id(comparison.row)].scale
    assert scale.median == pytest.approx(1.0) and scale.text() == "1.00 (seeds 0.95-1.05, std 0.05)"
    add_findings(summary)
    assert "Against the baseline `base`" in summary.conclusion
    assert "Against the fixed-temperature control `base` (tau 1, at the scale of SACT's median tau 1.00" in (
        summary.conclusion
    )
    assert "no temperature control at the scale" not in " ".join(summary.warnings)
    markdown = render_markdown(summary)
    assert "| sact | 23.00 ± 1.00 | base | 22.00 ± 1.00 | 1 (fixed) | +1.00 |" in markdown


def test_no_control_at_sacts_scale_is_warned_with_where_sact_settled():
    """The study's case: SACT's tau settled near 0.5 on every seed, its constant temperatures are tau = 4 = lambda
    (its softest bound) and the baseline (tau = 1, the nearest), and the learned row settled elsewhere: the warning
    says so, and the learned row is still compared with it."""
    from sweeper.summary.checks import ScaleCheck, missing_scale_controls
    from sweeper.summary.findings import add_findings, scale_checks

    def record(run: str, attention: dict, seed: int, bleu: float, tau: float | None = None) -> TrialRecord:
        params = {**_review_params(attention), "train.seed": str(seed)}
        curves = {"bleu_dev": [bleu - 1, bleu], **({"tau_p50": [tau, tau]} if tau else {})}
        return TrialRecord(f"{run}{seed}", run, run, params, {"bleu_test_test": bleu, "bleu_test_avg": bleu}, curves)

    records = [record("base", {}, s, 4.5) for s in (1, 2, 3)]
    records += [record("sact4", {"temperature": "sact"}, s, 4.4, tau=0.45 + 0.05 * s) for s in (1, 2, 3)]
    records += [record("tau4", {"temperature": "fixed", "tau": 4.0}, s, 3.5) for s in (1, 2, 3)]
    records += [record("learned4", {"temperature": "learned"}, s, 4.2, tau=2.0) for s in (1, 2, 3)]
    translations = {r.run_id: {"test": _hyps(2)} for r in records}
    summary = build_summary(records, translations, {"test": REVIEW_REFS}, significance=SignificanceSpec(resamples=100))
    add_findings(summary)
    assert scale_checks(summary) == [
        ScaleCheck(
            "sact4",
            "0.55 (seeds 0.50-0.60, std 0.05)",
            False,
            1.0,
            "learned4",
            "2.00 (seeds 2.00-2.00, std 0.00)",
            False,
        )
    ]
    warning = missing_scale_controls(scale_checks(summary), 1.2)
    assert warning == (
        "no temperature control at the scale SACT settled on for `sact4` (median tau 0.55 (seeds 0.50-0.60, std "
        "0.05); nearest fixed tau 1; learned row `learned4` at 2.00 (seeds 2.00-2.00, std 0.00)): a control is a "
        "learned temperature (attention.temperature: learned, the same lambda) or a fixed tau within a factor 1.2 "
        "of SACT's median tau, every other setting the same; without one, a difference from SACT cannot be told "
        "apart from a different constant temperature."
    )
    assert warning in summary.warnings
    assert [(c.against.label, c.control) for c in summary.comparisons if c.kind == "control"] == [
        ("learned4", "learned")
    ]


def test_seeds_that_settled_at_different_scales_are_warned():
    """The quickstart's case: SACT's two seeds settled at tau 0.64 and 1.65 (median 1.15, within 1.2 of the baseline's
    tau = 1): the baseline is its fixed control by the rule, and a warning says that it stands for neither seed."""
    from sweeper.summary.findings import add_findings

    def record(run: str, attention: dict, seed: int, bleu: float, tau: float | None = None) -> TrialRecord:
        params = {**_params(**attention), "train.seed": str(seed)}
        curves = {"bleu_dev": [bleu - 1, bleu], **({"tau_p50": [tau, tau]} if tau else {})}
        return TrialRecord(f"{run}{seed}", run, run, params, {"bleu_test_test": bleu, "bleu_test_avg": bleu}, curves)

    taus = {1: 0.64, 2: 1.65}
    records = [record("base", {}, s, 10.0 + s / 2) for s in (1, 2)]
    records += [record("sact4", {"temperature": "sact"}, s, 9.0 + s / 3, tau=taus[s]) for s in (1, 2)]
    translations = {r.run_id: {"test": _hyps(2 if r.variant == "base" else 3)} for r in records}
    summary = build_summary(records, translations, {"test": REVIEW_REFS}, significance=SignificanceSpec(resamples=100))
    add_findings(summary)
    assert [c.control for c in summary.comparisons] == ["fixed"]
    assert (
        "SACT's seeds settled at different temperature scales in `sact4` (1.15 (seeds 0.64-1.65, std 0.71)): no "
        "constant tau is within a factor 1.2 of every seed's median tau"
    ) in " ".join(summary.warnings)
    records[3] = record("sact4", {"temperature": "sact"}, 2, 9.0 + 2 / 3, tau=0.9)  # 0.9 / 0.64 < 1.2^2: one scale
    summary = build_summary(records, translations, {"test": REVIEW_REFS}, significance=SignificanceSpec(resamples=100))
    add_findings(summary)
    assert not any("different temperature scales" in w for w in summary.warnings)


def _study_and_added_row(added_row: tuple, refs: list[str] | None = None):
    """The study (baseline, SACT, its learned control; 3 seeds) and a sweep run afterwards with one more row."""
    from dataclasses import replace

    sact, learned = {"temperature": "sact", "lambda": 4.0}, {"temperature": "learned", "lambda": 4.0}
    study = _review_snapshot(
        [
            ("general+none", {}, 0.001, 2, {}),
            ("general+sact4", sact, 0.001, 0, {"tau_p50": [0.6, 0.5]}),
            ("general+learned4", learned, 0.001, 4, {"tau_p50": [1.2, 1.3]}),
        ],
        3,
        {"resamples": 200},
        seeds_differ=True,
    )
    study.space = replace(study.space, varied=("attention.temperature", "attention.lambda"))
    added = _review_snapshot([added_row], 3, {"resamples": 200}, seeds_differ=True)
    added.name, added.parent_id = "study-fixed", "p1"
    added.space = replace(added.space, varied=("attention.temperature", "attention.tau"))
    if refs is not None:
        added.references = {"test": refs}
    return study, added


def test_a_row_run_afterwards_joins_the_study_as_sacts_fixed_control():
    """`summarize --with`: the added sweep's trials are rows of the study's table, tested as the study's are (here
    the fixed tau at SACT's scale becomes SACT's fixed control), and the header says where they came from."""
    from sweeper.summary.combine import combine
    from sweeper.summary.report import added_note, compute, significance_of

    study, added = _study_and_added_row(("general+tau0.5", {"temperature": "fixed", "tau": 0.5}, 0.001, 3, {}))
    combined = combine(study, [added])
    summary = compute(combined, significance_of(combined, None))
    assert sorted(row.label for row in summary.rows) == [
        "general+learned4",
        "general+none",
        "general+sact4",
        "general+tau0.5",
    ]
    controls = {(c.row.label, c.against.label, c.control) for c in summary.comparisons if c.kind == "control"}
    assert ("general+sact4", "general+tau0.5", "fixed") in controls
    assert len(combined.records) == 12 and set(combined.translations) == {r.run_id for r in combined.records}
    assert added_note(combined) == ", with those of sweep `study-fixed` (parent run `p1`, FINISHED)"


@pytest.mark.parametrize(
    "damage, refused",
    [
        ("lr", "train.lr is 0.001 in run general+none-0.001-1 (general+none) of sweep 'review' but 0.002 in run"),
        ("refs", "sweep 'study-fixed' scored test set 'test' against other references"),
        ("twice", "are the same trial (general+none, seed 1)"),
        ("scheduler", "sweep 'study-fixed' has scheduler 'pbt', sweep 'review' 'fifo': a combined summary needs"),
    ],
)
def test_a_row_that_differs_in_more_than_its_space_varies_is_refused(damage, refused):
    """Trials trained differently (a learning rate the study does not vary, another scheduler), scored on other
    sentences, or the same seed of a variant twice would make the table compare what it does not say: refused,
    with the setting and the runs named."""
    from sweeper.summary import SummaryError
    from sweeper.summary.combine import combine

    fixed = {"temperature": "fixed", "tau": 0.5}
    row = {
        "lr": ("general+tau0.5", fixed, 0.002, 3, {}),
        "refs": ("general+tau0.5", fixed, 0.001, 3, {}),
        "twice": ("general+none", {}, 0.001, 2, {}),
        "scheduler": ("general+tau0.5", fixed, 0.001, 3, {}),
    }[damage]
    study, added = _study_and_added_row(row, REVIEW_REFS[:-1] + ["another sentence"] if damage == "refs" else None)
    if damage == "scheduler":  # PBT changes settings in flight: its rows are not the study's
        added.space.scheduler = "pbt"
    with pytest.raises(SummaryError) as caught:
        combine(study, [added])
    assert refused in str(caught.value)
    if damage == "lr":  # a rate the study varies is one more value of a key its table shows
        added.space.varied += ("train.lr",)
        with pytest.raises(SummaryError):
            combine(study, [added])
        study.space.varied += ("train.lr",)
        assert len(combine(study, [added]).records) == 12


@pytest.mark.parametrize("sweeps", ["joined", "one grid"])
def test_each_row_is_compared_at_the_rate_its_dev_score_chose(sweeps, tmp_path):
    """`summarize --choose train.lr`: the study at lr 0.001, the same rows at 0.002 (run afterwards, or in the same
    sweep's grid). The baseline's and SACT's control's seeds score best on dev at 0.002, SACT's at 0.001, although
    the baseline tests better at 0.001: the choice reads dev only. Each row keeps its chosen rate's trials, the
    others are left out and counted, and SACT is tested against the baseline and matched with its control across
    the rates."""
    from dataclasses import replace

    from sweeper.summary.choose import choose_on_objective
    from sweeper.summary.combine import combine
    from sweeper.summary.figures import importance_sections
    from sweeper.summary.report import compute, significance_of

    sact, learned = {"temperature": "sact", "lambda": 4.0}, {"temperature": "learned", "lambda": 4.0}
    at_first = [
        ("general+none", {}, 0.001, 4, {"bleu_dev": [10.0, 11.0]}),
        ("general+sact4", sact, 0.001, 3, {"bleu_dev": [20.0, 22.0], "tau_p50": [0.6, 0.5]}),
        ("general+learned4", learned, 0.001, 3, {"bleu_dev": [10.0, 13.0], "tau_p50": [1.2, 1.3]}),
    ]
    at_second = [
        ("general+none", {}, 0.002, 2, {"bleu_dev": [20.0, 21.0]}),
        ("general+sact4", sact, 0.002, 0, {"bleu_dev": [10.0, 12.0], "tau_p50": [0.6, 0.5]}),
        ("general+learned4", learned, 0.002, 0, {"bleu_dev": [20.0, 23.0], "tau_p50": [1.2, 1.3]}),
    ]
    if sweeps == "joined":
        study = _review_snapshot(at_first, 3, {"resamples": 200}, seeds_differ=True)
        study.space = replace(study.space, varied=("attention.temperature", "attention.lambda"))
        added = _review_snapshot(at_second, 3, {"resamples": 200}, seeds_differ=True)
        added.name, added.parent_id = "study-lr2", "p1"
        study = combine(study, [added], ("train.lr",))
    else:
        study = _review_snapshot(at_first + at_second, 3, {"resamples": 200}, seeds_differ=True)
    chosen = choose_on_objective(study, ("train.lr",))
    assert {r.variant: r.params["train.lr"] for r in chosen.records} == {
        "general+none": "0.002",
        "general+sact4": "0.001",
        "general+learned4": "0.002",
    }
    assert len(chosen.records) == 9 and len(study.records) == 18
    assert chosen.left_out == {"at a value of train.lr their row's mean bleu_dev did not choose": 9}
    summary = compute(chosen, significance_of(chosen, None))
    none, sact, learned = (
        "general+none (train.lr=0.002 chosen)",
        "general+sact4 (train.lr=0.001 chosen)",
        ("general+learned4 (train.lr=0.002 chosen)"),
    )  # each row's label says the rate it is compared at
    assert sorted(row.label for row in summary.rows) == [learned, none, sact]
    tested = {(c.row.label, c.against.label, c.kind) for c in summary.comparisons}
    assert (sact, none, "baseline") in tested
    assert (sact, learned, "control") in tested
    assert "Each row's train.lr was chosen on the sweep's objective (its label names the value)" in summary.conclusion
    assert (
        "`general+none` at train.lr 0.002: the best mean bleu_dev of its seeds (0.002: 21.00, 3 seeds; 0.001: 11.00, "
        "3 seeds)"
    ) in summary.notes
    left_out = "9 trial(s) left out of every table and figure: 9 at a value of train.lr their row's mean bleu_dev"
    assert left_out in " ".join(summary.notes)
    importance = "".join(importance_sections(chosen.records, "bleu_dev", "max", tmp_path))
    assert "attention.temperature" in importance and "train.lr" not in importance  # the rate moves with its row


def test_the_choices_name_each_row_as_the_summary_and_mlflow_do():
    """`--choose train.lr` on a sweep whose runs carry their names (the tag sweeper.variant_name): each note names
    its row in the words of the summary's row and of its MLflow runs (`SACT λ4`), not by label (`general+sact4`)."""
    from dataclasses import replace

    from sweeper.summary.choose import choose_on_objective
    from sweeper.summary.report import compute, significance_of
    from sweeper.tracking.metrics import VARIANT_NAME

    names = {"general+none": "no temperature", "general+sact4": "SACT λ4"}
    sact = {"temperature": "sact", "lambda": 4.0}
    rows = [("general+none", {}, lr, 4, {}) for lr in (0.001, 0.002)]
    rows += [("general+sact4", sact, lr, every, {}) for lr, every in ((0.001, 3), (0.002, 0))]
    snapshot = _review_snapshot(rows, 2, {"resamples": 200})
    snapshot.records = [replace(r, tags={**r.tags, VARIANT_NAME: names[r.variant]}) for r in snapshot.records]
    chosen = choose_on_objective(snapshot, ("train.lr",))
    notes = [note for note in chosen.choices if note.startswith("`")]
    assert sorted(note.split("`")[1] for note in notes) == ["SACT λ4", "no temperature"]
    assert not any("general+" in note for note in chosen.choices)
    summary = compute(chosen, significance_of(chosen, None))
    assert {row.label.split(" (")[0] for row in summary.rows} == {"SACT λ4", "no temperature"}  # the same words


def test_a_chosen_setting_the_variant_label_names_still_makes_one_row():
    """`--choose attention.lambda`: SACT's rows are labelled by their lambda (`sact2`, `sact4`), yet they are one
    row whose lambda dev chooses; a lambda whose seeds logged no finite dev BLEU is named, never chosen, and so is
    each lambda's count of seeds that did not finish (a third seed of lambda 4 failed: chosen on the two that
    finished; lambda 20 failed on every seed, so no record has it)."""
    from sweeper.summary.choose import choose_on_objective
    from sweeper.summary.records import readable

    nan = float("nan")
    rows = [("general+none", {}, 0.001, 2, {})]
    rows += [
        (f"general+sact{lam:g}", {"temperature": "sact", "lambda": lam}, 0.001, every, {"bleu_dev": dev})
        for lam, every, dev in ((2.0, 3, [10.0, 12.0]), (4.0, 4, [10.0, 14.0]), (10.0, 0, [nan, nan]))
    ]
    snapshot = _review_snapshot(rows, 2, {"resamples": 200})
    failed = {**snapshot.records[-1].params, "attention.lambda": "4.0", "variant": "general+sact4", "train.seed": "3"}
    snapshot.unfinished = [failed, *({**failed, "attention.lambda": "20.0", "train.seed": s} for s in "12")]
    snapshot.unfinished.append({**snapshot.records[0].params, "train.seed": "3"})  # the baseline's, not SACT's
    hostile = {**failed, "attention.lambda": "\x1b[2J" + "9" * 300}  # stored state no trial config reads
    snapshot.unfinished = [params for params in [*snapshot.unfinished, hostile] if readable(params)]
    chosen = choose_on_objective(snapshot, ("attention.lambda",))
    assert sorted({r.variant for r in chosen.records}) == ["general+none", "general+sact4"]
    assert (
        "`general+sact4` at attention.lambda 4.0: the best mean bleu_dev of its seeds (4.0: 14.00, 2 seeds, 1 did "
        "not finish; 2.0: 12.00, 2 seeds; 10.0: no bleu_dev; 20.0: no bleu_dev, 2 did not finish), chosen on the "
        "seeds that finished"
    ) in chosen.choices
    assert chosen.left_out == {"at a value of attention.lambda their row's mean bleu_dev did not choose": 4}


def test_summarize_with_reads_a_sweep_run_afterwards_from_the_same_store(store, tmp_path, capsys):
    """`sweeper summarize hand --with hand-row`: the row run afterwards (here a fixed tau = 0.9) is read from its own
    experiment and shown in the study's table, and both the summary and the study's parent run say so."""
    uri, folder = store
    client = MlflowClient(uri)
    experiment = client.create_experiment("hand-row", artifact_location=str(folder / "hand-row"))
    parent = client.create_run(experiment, tags={"sweeper.role": "sweep"}).info.run_id
    client.log_text(
        parent, yaml.safe_dump({"name": "hand-row", "parameters": {"attention.tau": {"grid": [0.9]}}}), "space.yaml"
    )
    refs = load_trial_data(build_config({"data": DATA}).data).references["test"]
    tags = {"mlflow.parentRunId": parent, "sweeper.role": "trial", "sweeper.variant": "general+tau0.9"}
    tags["sweeper.bleu_signature"] = corpus_bleu(refs, refs).signature  # scored as the study's trials were
    run_id = client.create_run(experiment, tags=tags).info.run_id
    params = {**_params(temperature="fixed", tau=0.9), "train.seed": "1"}
    metrics = [Metric(k, 22.5, 0, 2) for k in ("bleu_test_test", "bleu_test_avg", "multibleu_test_avg")]
    client.log_batch(run_id, params=[Param(k, v) for k, v in params.items()], metrics=metrics)
    for path, lines in (("translations", [_degrade(r) for r in refs]), ("references", refs)):
        client.log_text(run_id, "\n".join(lines) + "\n", f"{path}/test.txt")
    client.set_terminated(run_id, "FINISHED")
    client.set_terminated(parent, "FINISHED")

    out = tmp_path / "out"
    argv = ["summarize", "hand", "--tracking-uri", uri, "--out", str(out), "--resamples", "100", "--with"]
    assert sweeper_main([*argv, "hand-rows"]) == 2  # a name that is no sweep there: the key that named it
    assert "sweeper summarize: --with: no sweep named 'hand-rows' in sqlite:" in capsys.readouterr().err
    assert not out.exists()
    assert sweeper_main([*argv, "hand-row"]) == 0
    assert "| general+tau0.9 |" in capsys.readouterr().out
    assert f", with those of sweep `hand-row` (parent run `{parent}`, FINISHED)." in (out / "summary.md").read_text()
    [study] = client.search_runs(
        [client.get_experiment_by_name("hand").experiment_id], filter_string="tags.`sweeper.role` = 'sweep'"
    )
    assert "with those of sweep `hand-row`" in study.data.tags["mlflow.note.content"]
    assert sweeper_main([*argv, "hand-row", "--choose", "train.lr", "--out", str(tmp_path / "chosen")]) == 1
    assert "--choose train.lr: every row ran one value of it, so there is nothing to choose" in capsys.readouterr().err
    assert not (tmp_path / "chosen").exists()

    rerun = client.create_run(experiment, tags={"sweeper.role": "sweep"}).info.run_id  # the row run again, unfinished
    assert sweeper_main([*argv, "hand-row", "--out", str(tmp_path / "newest")]) == 1  # --with reads the newest run
    assert "sweep 'hand-row' has no finished trial with test BLEU yet" in capsys.readouterr().err
    assert sweeper_main([*argv, f"hand-row@{study.info.run_id}", "--out", str(tmp_path / "other")]) == 2
    assert f"--with: {study.info.run_id} is not a sweep run of 'hand-row'; its sweep runs, newest first: {rerun}, " in (
        capsys.readouterr().err
    )
    assert sweeper_main([*argv, f"hand-row@{parent}", "--out", str(tmp_path / "at")]) == 0  # the run named
    assert (
        f", with those of sweep `hand-row` (parent run `{parent}`, FINISHED)."
        in (tmp_path / "at" / "summary.md").read_text()
    )


def test_a_baseline_comparison_that_is_also_a_control_is_counted_once_in_the_footer():
    """3 comparisons, one of them SACT against a baseline that is also its learned control: the footer's account
    adds up to 3 (2 + 2 - 1), not to 4."""
    from sweeper.summary.statistics import BASELINE, CONTROL, Comparison, family_of

    comparisons = [
        Comparison(None, None, BASELINE, 0.1),
        Comparison(None, None, BASELINE, 0.2, control="learned"),
        Comparison(None, None, CONTROL, 0.3, control="fixed"),
    ]
    assert family_of(comparisons) == ": 2 against a baseline, 2 SACT against a control, 1 of them both"
    assert family_of(comparisons[::2]) == ": 1 against a baseline, 1 SACT against a control"


def test_dev_curves_carry_the_mean_of_the_seeds_still_training_past_the_first_stop(tmp_path, monkeypatch):
    """Bold: the mean while every seed trains; dashed from there: the mean over the seeds still training (at 16
    epochs with early stopping, the bold mean alone ended where the first seed stopped)."""
    from sweeper.summary import plots

    drawn = []
    monkeypatch.setattr(plots.plt, "close", drawn.append)
    seeds = [[1.0, 2.0], [3.0, 4.0, 5.0, 6.0], [5.0, 6.0, 7.0]]
    plots.dev_curves([("general+sact4", seeds), ("general+none", [[2.0, 3.0], [4.0, 5.0]])], tmp_path / "c.png")
    lines = drawn[0].axes[0].get_lines()
    bold = [line for line in lines if line.get_linewidth() > 1.5]
    dashed = [line for line in lines if line.get_linestyle() == "--"]
    assert [list(line.get_xdata()) for line in bold] == [[1, 2], [1, 2]]
    assert list(bold[0].get_ydata()) == pytest.approx([(1 + 3 + 5) / 3, (2 + 4 + 6) / 3])
    assert len(dashed) == 1 and list(dashed[0].get_xdata()) == [2, 3, 4]  # general+none: both seeds ran to the end
    assert list(dashed[0].get_ydata()) == pytest.approx([(2 + 4 + 6) / 3, (5 + 7) / 2, 6.0])
    assert dashed[0].get_color() == bold[0].get_color()


def test_a_run_under_the_grouped_names_reads_as_one_under_the_flat_names(tmp_path):
    """Issue 59: a trial logged under MLflow's grouped names (end-of-run values at step 0, the UI's `seed` and `n/a`
    params) reads as the same record as one logged under Tune's flat keys, as sweeps were before."""
    from sweeper.summary.records import load_records

    client = MlflowClient(f"sqlite:///{tmp_path / 'm.db'}")
    experiment = client.create_experiment("names")
    parent = client.create_run(experiment, tags={"sweeper.role": "sweep"}).info.run_id
    active = {k: str(v) for k, v in build_config({"data": DATA}).active().items()}
    assert "attention.tau" not in active and "attention.lambda" not in active  # no temperature: both unused

    def trial(seed: int, grouped: bool) -> None:
        tags = {"mlflow.parentRunId": parent, "sweeper.role": "trial", "sweeper.variant": "general+none"}
        run_id = client.create_run(experiment, tags=tags).info.run_id
        params = {**active, "train.seed": str(seed), "variant": "general+none"}
        epochs = {"bleu_dev": "bleu/dev", "epoch_time_s": "speed/epoch_time_s", "setting.train.lr": "setting/train.lr"}
        end = {"bleu_test_avg": "result/bleu_test_avg", "best_epoch": "result/best_epoch"}
        if grouped:
            params.update({"seed": str(seed), "attention.tau": "n/a", "attention.lambda": "n/a"})
        name = (lambda key, names: names[key]) if grouped else (lambda key, names: key)
        values = {"bleu_dev": [1.0, 3.0], "epoch_time_s": [2.0, 4.0], "setting.train.lr": [0.1, 0.2]}
        metrics = [Metric(name(k, epochs), v, 0, i + 1) for k, vs in values.items() for i, v in enumerate(vs)]
        metrics += [
            Metric(name(k, end), v, 0, 0 if grouped else 2) for k, v in (("bleu_test_avg", 5.0), ("best_epoch", 2))
        ]
        if grouped:
            metrics.append(Metric("result/bleu_dev_best", 3.0, 0, 0))
        client.log_batch(run_id, params=[Param(k, v) for k, v in params.items()], metrics=metrics)
        client.set_terminated(run_id, "FINISHED")

    trial(1, grouped=False)
    trial(2, grouped=True)
    records, left_out, _ = load_records(client, experiment, parent)
    flat, grouped = sorted(records, key=lambda r: r.params["train.seed"])
    assert not left_out and flat.group == grouped.group and "seed" not in grouped.params
    expected = {"bleu_dev": 3.0, "epoch_time_s": 4.0, "setting.train.lr": 0.2, "bleu_test_avg": 5.0, "best_epoch": 2.0}
    assert flat.metrics == expected and grouped.metrics == {**expected, "bleu_dev_best": 3.0}
    for record in (flat, grouped):
        assert record.curves == {"bleu_dev": [1.0, 3.0], "epoch_time_s": [2.0, 4.0]}
        assert record.settings == {"setting.train.lr": {1: 0.1, 2: 0.2}}


def test_dev_curves_draw_each_variant_in_its_runs_colour(tmp_path, monkeypatch):
    """Issue 59: a row's curves take its trials' MLflow run colour; the palette in row order where a row has none
    (a sweep recorded before run colours) or two rows share one, so that no two rows are drawn alike."""
    from types import SimpleNamespace

    from sweeper.summary import plots
    from sweeper.summary.figures import row_colours
    from sweeper.tracking.metrics import PALETTE

    def row(colour):
        return SimpleNamespace(records=[SimpleNamespace(tags={"mlflow.runColor": colour} if colour else {})])

    assert row_colours([row("#17becf"), row("#ff7f0e")]) == ["#17becf", "#ff7f0e"]
    assert row_colours([row("#17becf"), row("#17becf")]) == list(PALETTE[:2])  # rows a label does not tell apart
    assert row_colours([row("#17becf"), row(None)]) == list(PALETTE[:2])
    drawn = []
    monkeypatch.setattr(plots.plt, "close", drawn.append)
    variants = [("general+sact4", [[1.0, 2.0]]), ("general+none", [[2.0, 3.0]])]
    plots.dev_curves(variants, tmp_path / "c.png", ["#17becf", "#ff7f0e"])
    assert {line.get_color() for line in drawn[0].axes[0].get_lines()} == {"#17becf", "#ff7f0e"}


def test_every_table_recomputes_from_the_data_beside_the_summary(store, tmp_path, capsys):
    """summarize writes data/ beside summary.md; `sweeper summarize NAME --from-data DIR` recomputes summary.md and
    the CSV table from it alone, the same bytes (figures aside), and --plan prints the planning figures. A data
    folder with a trial left out gives another table (the data are what the table is computed from)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    uri, _ = store
    summarize("hand", uri, tmp_path / "out", ["csv"], resamples=100)
    data = tmp_path / "out" / "data"
    assert {p.name for p in data.iterdir()} >= {"trials.parquet", "sentences.parquet", "references.parquet"}
    assert pq.read_table(data / "trials.parquet").num_rows == 8  # the finished trials, one seed each
    again = tmp_path / "again"
    argv = ["summarize", "hand", "--from-data", str(tmp_path / "out"), "--out", str(again), "--format", "csv"]
    assert sweeper_main([*argv, "--resamples", "100", "--plan", "0.5"]) == 0
    printed = capsys.readouterr().out
    assert "Planning, from this sweep's variances" in printed and "seeds a row to detect 0.5" in printed
    assert (again / "bleu_table.csv").read_text() == (tmp_path / "out" / "bleu_table.csv").read_text()
    assert (again / "summary.md").read_text() == (tmp_path / "out" / "summary.md").read_text()
    trials = pq.read_table(data / "trials.parquet")
    pq.write_table(trials.filter(pc.not_equal(trials["trial_id"], "general+tau2-1")), data / "trials.parquet")
    assert sweeper_main([*argv[:-4], "--out", str(tmp_path / "fewer"), "--resamples", "100"]) == 0
    assert "general+tau2" not in (tmp_path / "fewer" / "summary.md").read_text()
    assert sweeper_main(["summarize", "hand", "--from-data", str(tmp_path / "nowhere")]) == 2
    assert "--from-data" in capsys.readouterr().err
    (data / "trials.parquet").write_bytes(b"not parquet")
    assert sweeper_main(["summarize", "hand", "--from-data", str(data), "--out", str(tmp_path / "bad")]) == 2
    assert (
        "unreadable summary data (" in (err := capsys.readouterr().err)
        and "not a Parquet file this" in err
        and not (tmp_path / "bad").exists()
    )


def test_a_non_significant_comparison_says_what_its_seeds_detect_at_holms_level_and_its_equivalence():
    """Each seed-aware comparison that is not significant gets the minimum detectable difference at the level Holm
    compared its p with (alpha / (m - k + 1), k its rank), and with a margin the TOST verdict at that level."""
    from nmt_core.training.evaluate import SeedSentenceTest, detectable, equivalence_p
    from sweeper.summary.statistics import Comparison, mark_and_power

    def comparison(delta: float, p: float, se2: float) -> Comparison:
        test = SeedSentenceTest(delta, (se2 * 2.5, se2 * 2.5), (5, 5), 0.0, 8.0, p, (-1, 1), 0.0, 0.0, 0.0)
        return Comparison(None, None, "baseline", delta, p_value=p, p_adjusted=min(1.0, p * 3), test=test)

    found = [comparison(0.05, 0.8, 0.01), comparison(0.3, 0.2, 0.04), comparison(-0.2, 0.5, 0.02)]
    mark_and_power(found, margin=0.5)
    assert [c.alpha for c in found] == pytest.approx([0.05, 0.05 / 3, 0.05 / 2])
    for c in found:
        assert c.mark == "" and c.detectable == pytest.approx(detectable(c.test, c.alpha, 0.8))
        assert c.equivalence_p == pytest.approx(equivalence_p(c.test, 0.5))
    assert found[0].power.endswith(f"; equivalent within ±0.5 (TOST p {found[0].equivalence_p:.3g})")
    assert "not shown equivalent within ±0.5" in found[1].power
    mark_and_power(plain := [comparison(0.05, 0.8, 0.01)])
    assert plain[0].equivalence_p is None and "TOST" not in plain[0].power
