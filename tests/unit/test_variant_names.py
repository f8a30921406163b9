"""A variant's name in the summary's words (sweeper.tracking.names): the parts' titles less what a sweep's variants
share, the same in MLflow's run names and the summary's rows; the label stays the key; a LoggedModel's safe name."""

from __future__ import annotations

import pytest

from nmt_core.config import build_config
from sweeper.space.spec import load_spec, plan_trials, variant_label
from sweeper.summary.records import TrialRecord
from sweeper.tracking.metrics import VARIANT_NAME
from sweeper.tracking.names import model_name, names_of, shared_words, title_words, variant_name


def config(**attention) -> object:
    return build_config({"attention": {"score": "general", **attention}})


NONE, SACT, LEARNED, FIXED = (
    config(temperature="none"),
    config(temperature="sact", **{"lambda": 4.0}),
    config(temperature="learned", **{"lambda": 4.0}),
    config(temperature="fixed", tau=0.8),
)


def test_titles_say_what_each_part_is_as_papers_write_it():
    assert title_words(SACT) == {"score": "general", "temperature": "SACT λ4"}
    assert title_words(LEARNED)["temperature"] == "learned λ4"
    assert title_words(FIXED)["temperature"] == "fixed τ0.8"
    assert title_words(NONE)["temperature"] == "no temperature"
    sentinel = config(temperature="sact", sentinel=True, **{"lambda": 4.0})
    assert title_words(sentinel) == {"score": "general", "temperature": "SACT λ4", "sentinel": "sentinel"}
    guided = build_config({"train": {"guided_alignment": 0.5}})
    assert title_words(guided)["guided"] == "guided alignment 0.5" and variant_label(guided).endswith("+guided0.5")


def test_a_name_leaves_out_the_words_every_variant_shares():
    shared = shared_words([NONE, SACT, LEARNED, FIXED])
    assert shared == {"score": "general"}
    names = [variant_name(cfg, shared) for cfg in (NONE, SACT, LEARNED, FIXED)]
    assert names == ["no temperature", "SACT λ4", "learned λ4", "fixed τ0.8"]
    concat = config(score="concat", temperature="sact", **{"lambda": 4.0})
    assert variant_name(concat, shared) == "concat + SACT λ4"  # a draw outside the plan keeps the word it varies
    sentinel = config(temperature="sact", sentinel=True, **{"lambda": 4.0})
    assert shared_words([SACT, sentinel]) == {"score": "general", "temperature": "SACT λ4"}
    assert variant_name(sentinel, shared_words([SACT, sentinel])) == "sentinel"
    assert variant_name(SACT, shared_words([SACT, sentinel])) == "general + SACT λ4"  # all shared: every word
    assert shared_words([SACT, SACT]) == {}  # one variant: its full name


def test_the_quickstarts_runs_read_as_the_issue_asks():
    spec = load_spec("search_spaces/quickstart.yaml")
    configs = [plan.config(spec.base) for plan in plan_trials(spec)]
    shared = shared_words(configs)
    assert sorted({variant_name(cfg, shared) for cfg in configs}) == ["SACT λ4", "learned λ4", "no temperature"]


def record(run_id: str, cfg, name: str | None) -> TrialRecord:
    params = {key: str(value) for key, value in cfg.active().items()}
    tags = {VARIANT_NAME: name} if name else {}
    return TrialRecord(run_id, run_id, variant_label(cfg), params, {}, {}, tags=tags)


def test_the_summary_names_rows_as_their_runs_were_named_else_afresh():
    one_sweep = [record("a", NONE, "plain"), record("b", NONE, "plain"), record("c", SACT, "SACT λ4")]
    assert names_of(one_sweep) == {"general+none": "plain", "general+sact4": "SACT λ4"}  # what MLflow shows
    before_names = [record("a", NONE, None), record("c", SACT, None)]  # MLflow shows them as `<label> · seed <n>`
    assert names_of(before_names) == {"general+none": "general+none", "general+sact4": "general+sact4"}
    concat = config(score="concat", temperature="sact", **{"lambda": 4.0})
    joined = [record("a", SACT, "SACT λ4"), record("b", concat, "SACT λ4")]  # two sweeps, each left out its score
    assert names_of(joined) == {"general+sact4": "general", "concat+sact4": "concat"}
    partly = [record("a", NONE, "plain"), record("c", SACT, None), record("d", FIXED, None)]  # a named sweep joined
    assert names_of(partly) == {  # with one recorded before names: all named afresh, alike
        "general+none": "no temperature",
        "general+sact4": "SACT λ4",
        "general+tau0.8": "fixed τ0.8",
    }


@pytest.mark.parametrize(
    "name, slug",
    [
        ("SACT λ4", "SACT-lambda4"),
        ("fixed τ0.8", "fixed-tau0_8"),
        ("general + SACT λ4 + sentinel", "general-SACT-lambda4-sentinel"),
        ("λ", "lambda"),
        ("' / : %", "model"),
    ],
)
def test_a_logged_models_name_is_a_slug_mlflow_takes(name, slug):
    from mlflow.utils.validation import _validate_logged_model_name

    assert model_name(name) == slug
    _validate_logged_model_name(model_name(name))  # refuses '/', ':', '.', '%' and quotes


def test_the_summarys_table_and_legends_name_the_rows_as_mlflow_names_the_runs():
    """One sweep's runs, named as the tracking callback names them: the BLEU table's rows and the dev curves' legend
    say `fixed τ0.8`, the label stays each record's key."""
    from sweeper.summary.figures import figure_data
    from sweeper.summary.statistics import build_summary
    from sweeper.summary.tables import render_markdown

    shared = shared_words([NONE, FIXED])
    records = []
    for run_id, cfg, bleu in (("a", NONE, 20.0), ("b", NONE, 21.0), ("c", FIXED, 23.0), ("d", FIXED, 24.0)):
        named = record(run_id, cfg, variant_name(cfg, shared))
        named.metrics.update(bleu_test_test=bleu, bleu_test_avg=bleu)
        named.curves["bleu_dev"] = [bleu - 1, bleu]
        records.append(named)
    references = ["the cat sat on the mat", "a dog ran in the park"]
    summary = build_summary(records, {r.run_id: {"test": references} for r in records}, {"test": references})
    assert sorted(row.label for row in summary.rows) == ["fixed τ0.8", "no temperature"]
    assert {row.records[0].variant for row in summary.rows} == {"general+none", "general+tau0.8"}
    table = render_markdown(summary)
    assert "| fixed τ0.8 | 2 |" in table and "| no temperature | 2 |" in table and "general+" not in table
    assert sorted(label for label, _ in figure_data(summary, {}).dev_curves) == ["fixed τ0.8", "no temperature"]
