"""The controls each attention part declares (issue 72) are the rows the summary compares it with: SSMax against the
fixed log-n scaling and no scaling, soft-capping against none, learned-alpha entmax against its fixed alpha and
softmax, the selective temperature against the learned per-head constant, SACT's fair Transformer port against the
learned temperature with the same base scale, the released code's SACT against the learned temperature at lambda e;
the decoding-only entropy sharpening against the same checkpoints decoded plainly, paired per checkpoint. Rows are
built by hand from trial parameters, as the summary reads them from MLflow."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
from scipy import stats

from nmt_core.family.parts import Control
from nmt_core.family.registry import bound_of
from sweeper.summary.checks import VariantHistory, degenerate
from sweeper.summary.records import TrialRecord
from sweeper.summary.statistics import (
    CONTROL,
    Comparison,
    Summary,
    VariantRow,
    declared_controls,
    family_of,
    is_control,
    pairs_of,
    plain_decoding,
    sact_controls,
)
from sweeper.summary.tables import render_declared, render_plain_decoding
from sweeper.summary.tau_epochs import render_observed_epochs

LR = {"train.lr": "0.001"}


def _row(label: str, metrics: list[dict[str, float]] | None = None, tau_p50: float | None = None, **params: str):
    """A table row, one record per seed (`metrics` each), as the summary reads them: params and curves."""
    seeds = metrics or [{}]
    curves = {"tau_p50": [tau_p50]} if tau_p50 else {}
    records = [
        TrialRecord(f"{label}-{i}", f"{label}-{i}", label, {"variant": label, **params}, m, dict(curves))
        for i, m in enumerate(seeds)
    ]
    return SimpleNamespace(label=label, records=records, average=(0.0, 0.0), seeds=len(records))


def _found(rows) -> set[tuple[str, str, str]]:
    return {(row.label, against.label, name) for row, against, name in declared_controls(rows)}


def test_ssmax_finds_the_fixed_log_n_scaling_and_no_scaling_with_every_other_setting_equal():
    rows = [
        _row("ssmax", **{"attention.temperature": "ssmax", "attention.train_keys": "12"}, **LR),
        _row("logn12", **{"attention.temperature": "ssmax_fixed", "attention.train_keys": "12"}, **LR),
        _row("logn20", **{"attention.temperature": "ssmax_fixed", "attention.train_keys": "20"}, **LR),
        _row("none", **{"attention.temperature": "none"}, **LR),
        _row("none lr", **{"attention.temperature": "none", "train.lr": "0.003"}),
    ]
    assert _found(rows) == {("ssmax", "logn12", "fixed log n"), ("ssmax", "none", "none")}


def test_softcap_entmax_and_their_controls():
    rows = [
        _row("cap", **{"attention.softcap": "true", "attention.cap": "5"}),
        _row("plain", **{"attention.softcap": "false"}),
        _row("learned", **{"attention.normaliser": "entmax_learned", "attention.alpha": "1.5"}),
        _row("entmax1.5", **{"attention.normaliser": "entmax", "attention.alpha": "1.5"}),
        _row("entmax1.8", **{"attention.normaliser": "entmax", "attention.alpha": "1.8"}),
        _row("softmax", **{"attention.normaliser": "softmax"}),
    ]
    assert _found(rows) == {
        ("cap", "plain", "none"),
        ("learned", "entmax1.5", "fixed alpha"),
        ("learned", "softmax", "softmax"),
        ("entmax1.5", "softmax", "softmax"),
        ("entmax1.8", "softmax", "softmax"),
    }


def test_the_temperatures_learned_controls_are_the_ones_they_declare():
    """SACT's fair port (a base scale) against the learned temperature with the same lambda and base; the released
    code's SACT against the learned one at lambda e; the selective temperature against a learned one at any lambda."""
    base = {"attention.lambda": "10", "attention.sact_base": "true"}
    model = {"model.input_feeding": "false", "model.encoder_merge": "sum"}  # what the released code's SACT asks
    rows = [
        _row("fair", tau_p50=0.3, **{"attention.temperature": "sact", **base}),
        _row("learned10", **{"attention.temperature": "learned", "attention.lambda": "10"}),
        _row("learned10-base", **{"attention.temperature": "learned", **base}),
        _row("released", tau_p50=0.8, **{"attention.temperature": "sact_released", **model}),
        _row("learned-e", **{"attention.temperature": "learned", "attention.lambda": repr(math.e), **model}),
        _row("selective", tau_p50=0.5, **{"attention.temperature": "selective"}),
        _row("learned2", **{"attention.temperature": "learned", "attention.lambda": "2"}),
        _row("tau0.8", **{"attention.temperature": "fixed", "attention.tau": "0.8", **model}),
        _row("tau0.5", **{"attention.temperature": "fixed", "attention.tau": "0.5"}),
    ]
    found = sact_controls(rows)
    assert found[id(rows[0])].learned is rows[2]
    assert found[id(rows[3])].learned is rows[4] and found[id(rows[3])].fixed is rows[7]
    assert found[id(rows[5])].learned is rows[1]  # any lambda, the first: a per-head constant
    assert found[id(rows[5])].fixed is None  # the selective temperature declares no fixed control
    assert declared_controls(rows) == []  # learned and fixed are SACT's question, asked by sact_controls


def test_pairs_and_the_family_line_count_declared_controls_apart_from_sacts():
    rows = [_row("cap", **{"attention.softcap": "true"}), _row("plain", **{"attention.softcap": "false"})]
    pairs = pairs_of(rows, {"attention.softcap": False})
    assert [(a.label, b.label, kind, control) for a, b, kind, control in pairs] == [
        ("cap", "plain", "baseline", "none")  # the control is also the baseline: one comparison answers both
    ]
    comparisons = [Comparison(rows[0], rows[1], CONTROL, 0.3, control="none")]
    assert family_of(comparisons) == ": 0 against a baseline, 1 against a declared control"


def test_a_control_declared_by_hand_is_found_by_its_settings():
    control = Control("tau one", lambda a: {"temperature": "fixed", "tau": 1.0})
    row = _row("sact", **{"attention.temperature": "sact"})
    assert is_control(row, _row("tau1", **{"attention.temperature": "fixed", "attention.tau": "1"}), control)
    assert not is_control(row, _row("tau2", **{"attention.temperature": "fixed", "attention.tau": "2"}), control)


def test_the_declared_control_table():
    rows = [_row("cap", **{"attention.softcap": "true"}), _row("plain")]
    comparison = Comparison(rows[0], rows[1], CONTROL, 0.25, (-0.1, 0.6), 0.2, 0.4, control="none")
    summary = Summary(rows=rows, test_sets=["test"], comparisons=[comparison])
    lines = render_declared(summary)
    assert "| cap | 0.00 | none | plain | 0.00 | +0.25 | [-0.10, +0.60] | 0.2 | 0.4 | test-set variance only |" in lines


def test_entropy_sharpening_against_the_same_checkpoints_decoded_plainly():
    """Per seed the test average with the part minus without; the paired t-test over seeds as scipy computes it."""
    scores = [(20.1, 19.5), (21.0, 20.9), (19.4, 19.0)]
    metrics = [{"bleu_test_avg": a, "plain_bleu_test_avg": b} for a, b in scores]
    row = _row("sharpen", metrics, **{"attention.entropy_sharpening": "true"})
    found = plain_decoding(row)
    assert found.deltas == pytest.approx([0.6, 0.1, 0.4])
    assert found.with_part == pytest.approx(20.1667, abs=1e-4) and found.plain == pytest.approx(19.8, abs=1e-4)
    assert found.p_value == pytest.approx(stats.ttest_rel([a for a, _ in scores], [b for _, b in scores]).pvalue)
    lines = render_plain_decoding(Summary(rows=[row], test_sets=["test"]))
    assert "| sharpen | 20.17 | 19.80 | +0.37 ± 0.25 (n=3) | " in lines[-1]
    assert plain_decoding(_row("other", [{"bleu_test_avg": 20.0}])) is None


def test_what_the_mechanisms_observed_by_epoch():
    seeds = [{"zeros_mean": [0.1, 0.3]}, {"zeros_mean": [0.2, 0.5]}, {"zeros_mean": [0.4]}]
    (section,) = render_observed_epochs([("entmax", seeds), ("softmax", [{}])])
    assert "| entmax | zeros | 0.2 | 0.4 (2 seeds) |" in section and "softmax" not in section.split("\n", 3)[-1]
    assert render_observed_epochs([("softmax", [{}])]) == []


def test_the_bound_of_each_temperature():
    attention = SimpleNamespace(temperature="sact_released", lambda_=4.0)
    assert bound_of(attention) == pytest.approx(math.e)
    assert bound_of(SimpleNamespace(temperature="sact", lambda_=10.0)) == 10.0
    assert bound_of(SimpleNamespace(temperature="fixed", lambda_=4.0)) == 4.0


def test_variant_rows_of_the_real_type_work_too():
    """VariantRow as the summary builds it (not only the SimpleNamespace stand-ins above)."""
    records = _row("cap", **{"attention.softcap": "true"}).records + _row("plain").records
    rows = [VariantRow(r.variant, [r], {}, (0.0, 0.0), None, 0, None) for r in records]
    assert _found(rows) == {("cap", "plain", "none")}


def test_the_at_bound_warning_of_sact_with_a_base_scale_names_tau_0():
    """With a base scale, what sits at the bound is lambda^beta (tau_modulation), not tau: the warning says SACT acts
    as tau_0 times the bound, and reads which bound from lambda^beta's median, not tau's."""
    curves = {"tau_at_bound": [[0.9]], "tau_p50": [[2.5]], "tau_p5": [[2.4]], "tau_p95": [[2.6]]}
    plain = degenerate(VariantHistory("sact10", "sact", 10.0, False, dict(curves)))
    assert any("SACT acts as a fixed temperature 10 here" in w for w in plain)
    based = degenerate(VariantHistory("sact10-base", "sact", 10.0, False, {**curves, "tau_modulation_p50": [[0.1]]}))
    assert any("lower bound" in w and "SACT acts as its base scale tau_0 times 1/10 here" in w for w in based)
