"""The convergence warning judges each seed by its own last epochs: seeds that early stopping ended at different
epochs must not be compared with each other (a sweep's 5-seed SACT row once read "still rising" from the dip its
seeds shared at epoch 6 against the later peaks of the seeds that ran on)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sweeper.summary.checks import VariantHistory, still_rising, stopped_while_loss_fell
from sweeper.summary.findings import history_of
from sweeper.summary.records import TrialRecord
from sweeper.summary.statistics import sact_controls


def history(*curves: list[float], patience: int = 0) -> VariantHistory:
    return VariantHistory("scaled_dot+sact4", "sact", 4.0, False, {"bleu_dev": [list(c) for c in curves]}, patience)


def test_seeds_stopped_early_at_different_epochs_are_not_still_rising():
    stopped = [2.0, 5.0, 4.9, 4.8]  # early stopping: no better dev BLEU for two epochs
    flat = [2.0, 4.0, 5.0, 6.0, 6.05, 6.1]  # ran on, +0.05 in its last epoch
    assert still_rising(history(stopped, flat)) is None


def test_seeds_rising_at_their_own_last_epochs_are_flagged_with_those_epochs():
    warning = still_rising(history([1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0, 5.0]))
    assert warning == (
        "`scaled_dot+sact4`: dev BLEU still rising at the last epoch (+1.00 to 4.00 in each seed's last epoch (3-5)): "
        "not converged, longer training could change the ranking."
    )


def test_seeds_of_equal_length_name_the_epoch():
    warning = still_rising(history([1.0, 2.0], [3.0, 4.0]))
    assert warning is not None and "(+1.00 to 3.00 in epoch 2)" in warning


def test_a_small_last_step_is_converged():
    assert still_rising(history([5.0, 6.0, 6.1], [5.0, 6.0, 6.05])) is None


def test_a_seed_early_stopping_ended_has_converged_even_when_its_last_epoch_climbs_back():
    dipped = [2.0, 6.0, 4.0, 5.5]  # best at epoch 2, then 2 epochs without a better one: patience 2 ends it
    assert still_rising(history(dipped, dipped, patience=2)) is None
    assert still_rising(history(dipped, dipped)) is not None  # without early stopping, the same climb is a rise
    assert still_rising(history(dipped, dipped, patience=3)) is not None  # patience 3 had not ended it


def test_only_the_seeds_early_stopping_did_not_end_are_judged_and_the_warning_says_how_many():
    stopped = [2.0, 6.0, 4.0, 5.5]
    capped = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]  # still setting new bests when the epoch cap ended it
    warning = still_rising(history(stopped, capped, patience=2))
    assert warning is not None
    assert "(+1.00 to 6.00 in epoch 6; 1 of 2 seeds, early stopping ended the other)" in warning
    assert "; 1 of 3 seeds, early stopping ended the others)" in still_rising(
        history(stopped, stopped, capped, patience=2)
    )


def test_the_summary_reads_the_patience_from_the_trials_parameters():
    params = {"attention.temperature": "sact", "attention.lambda": "4", "train.early_stopping": "3"}
    record = TrialRecord("r", "t", "scaled_dot+sact4", params, {}, {"bleu_dev": [2.0, 6.0, 5.0, 4.0, 5.9]})
    row = SimpleNamespace(label="scaled_dot+sact4", records=[record])
    assert history_of(row).patience == 3 and still_rising(history_of(row)) is None


def _row(label: str, tau_p50: float | None = None, **params: str) -> SimpleNamespace:
    """A table row of one seed, as sact_controls reads it: its params, and SACT's median tau where it has one."""
    record = TrialRecord(
        label, label, label, {"variant": label, **params}, {}, {"tau_p50": [tau_p50]} if tau_p50 else {}
    )
    return SimpleNamespace(label=label, records=[record])


def test_a_fixed_tau_at_sacts_scale_that_differs_in_another_setting_is_no_control():
    """A control shares every other setting: tau = 4 at another learning rate is none for a SACT row whose tau sat
    at 3.9; the nearest constant temperature with its settings is the baseline's tau = 1, too far to be one."""
    sact = {"attention.temperature": "sact", "attention.lambda": "4"}
    rows = [
        _row("sact4 (lr 1e-3)", 3.9, **sact, **{"train.lr": "0.001"}),
        _row("sact4 (lr 5e-3)", 3.9, **sact, **{"train.lr": "0.005"}),
        _row("tau4 (lr 1e-3)", **{"attention.temperature": "fixed", "attention.tau": "4", "train.lr": "0.001"}),
        _row("none (lr 5e-3)", **{"attention.temperature": "none", "train.lr": "0.005"}),
    ]
    controls = sact_controls(rows)
    assert controls[id(rows[0])].fixed is rows[2] and controls[id(rows[0])].fixed_tau == 4.0
    assert controls[id(rows[1])].fixed is None and controls[id(rows[1])].nearest_tau == 1.0
    assert controls[id(rows[1])].learned is None and controls[id(rows[1])].scale.median == 3.9


def test_the_fixed_control_is_the_constant_temperature_nearest_sacts_median_in_ratio():
    """The fixed control is the constant temperature nearest SACT's median tau in ratio (|log(tau / median)|), if
    within a factor 1.2 of it; a learned row of another lambda is no control."""
    sact = {"attention.temperature": "sact", "attention.lambda": "4"}
    rows = [
        _row("sact4", 0.55, **sact),
        *(_row(f"tau{t}", **{"attention.temperature": "fixed", "attention.tau": str(t)}) for t in (0.4, 0.5, 0.66)),
        _row("learned2", **{"attention.temperature": "learned", "attention.lambda": "2"}),
        _row("learned4", **{"attention.temperature": "learned", "attention.lambda": "4.0"}),
    ]
    found = sact_controls(rows)[id(rows[0])]
    assert found.fixed is rows[2] and found.learned is rows[5]
    rows[0].records[0].curves["tau_p50"] = [0.58]  # 0.08 from 0.5 and 0.66; in ratio 0.66 / 0.58 = 1.14 < 1.16
    assert sact_controls(rows)[id(rows[0])].fixed is rows[3]
    rows[0].records[0].curves["tau_p50"] = [2.0]  # 2 / 0.66 = 3: out of reach
    assert sact_controls(rows)[id(rows[0])].fixed is None


def test_a_seed_early_stopping_ended_while_its_dev_loss_still_fell_is_not_converged():
    """The study's tau = 4 seed 4: dev BLEU 3.61 at epoch 5, three epochs below it, dev loss lowest at epoch 8."""
    bleu = [1.46, 1.30, 2.14, 2.71, 3.61, 2.94, 3.56, 3.47]
    falling = [5.12, 4.65, 4.48, 4.31, 4.22, 4.22, 4.18, 4.17]
    flat = [5.12, 4.65, 4.48, 4.31, 4.16, 4.22, 4.18, 4.17]  # lowest at epoch 5, where dev BLEU peaked
    row = VariantHistory(
        "scaled_dot+tau4", "fixed", None, False, {"bleu_dev": [bleu, bleu], "dev_loss": [falling, flat]}, 3
    )
    assert stopped_while_loss_fell(row) == (
        "`scaled_dot+tau4`: early stopping ended 1 of 2 seeds while their dev loss was still falling (lowest at their "
        "last epoch: epoch 8): dev BLEU's patience stopped them, not convergence; a larger train.early_stopping "
        "would tell."
    )
    row.curves["dev_loss"] = [flat, flat]
    assert stopped_while_loss_fell(row) is None
    row.patience = 4  # then early stopping had not ended them: the BLEU check judges them
    row.curves["dev_loss"] = [falling, falling]
    assert stopped_while_loss_fell(row) is None
    row.patience, row.max_epochs = 3, 8  # the cap ended them at epoch 8, where patience ran out too: not early stopping
    assert stopped_while_loss_fell(row) is None
    row.max_epochs = 10  # a cap they did not reach: early stopping ended them
    assert stopped_while_loss_fell(row).startswith("`scaled_dot+tau4`: early stopping ended 2 of 2 seeds")


def test_a_seed_that_ran_every_epoch_is_judged_by_its_curve_not_as_ended_by_early_stopping():
    """The Transformer study's SACT seeds (docs/results/sact_study_transformer_tatoeba_cpu.md): 10 epochs of 10,
    a seed whose best dev BLEU came 2 epochs before the last counted as ended by early stopping (patience 2), so the
    still-rising check left it out."""
    dipped = [20.0, 22.0, 24.0, 23.0, 23.5]  # best at epoch 3, patience 2 ran out at epoch 5, the cap
    rising = [20.0, 21.0, 22.0, 23.0, 24.0]
    row = VariantHistory("sact", "sact", 4.0, False, {"bleu_dev": [dipped, rising]}, 2, 5)
    assert "+0.75 to 23.75 in epoch 5)" in still_rising(row)  # both seeds' last epochs: (0.5 + 1.0) / 2
    row.max_epochs = 8  # had the cap been 8, early stopping ended the dipped seed at 5: the rising one alone
    assert "+1.00 to 24.00 in epoch 5; 1 of 2 seeds, early stopping ended the other)" in still_rising(row)


@pytest.mark.parametrize("fixed_logs_reading", [False, True])
def test_each_transformer_sact_reading_is_controlled_by_the_fixed_tau_row(fixed_logs_reading):
    """The reading is SACT's own setting: a fixed-tau Transformer row does not log it (one recorded before it did,
    at its default, first_pass), and the SACT row of either reading finds the fixed row at its scale as its control."""
    sact = {"model.arch": "transformer", "attention.temperature": "sact", "attention.lambda": "4"}
    fixed = {"model.arch": "transformer", "attention.temperature": "fixed", "attention.tau": "4"}
    rows = [
        _row("sact4-query", 3.8, **sact, **{"attention.sact_reading": "query"}),
        _row("sact4-first_pass", 4.0, **sact, **{"attention.sact_reading": "first_pass"}),
        _row("tau4", **fixed, **({"attention.sact_reading": "first_pass"} if fixed_logs_reading else {})),
    ]
    assert [controls.fixed for controls in sact_controls(rows).values()] == [rows[2], rows[2]]


def test_sacts_tau_is_read_at_the_epoch_whose_weights_were_tested():
    """The trial's best_epoch; without it, its first best dev BLEU (as training keeps it); else its last epoch."""
    from sweeper.summary.statistics import tau_scale

    row = _row("sact4", **{"attention.temperature": "sact", "attention.lambda": "4"})
    record = row.records[0]
    record.curves = {"tau_p50": [0.5, 3.9, 3.95], "bleu_dev": [5.0, 4.0, 5.0]}
    assert tau_scale(row).seeds == [0.5]
    record.metrics = {"best_epoch": 2}
    assert tau_scale(row).seeds == [3.9]
    record.metrics, record.curves["bleu_dev"] = {}, [5.0]  # a history that does not cover every epoch
    assert tau_scale(row).seeds == [3.95]
