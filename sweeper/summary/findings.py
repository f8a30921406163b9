"""The summary's findings: the checks of sweeper.summary.checks over every row's per-epoch dev diagnostics (degenerate
mechanisms, dev curves still rising, SACT rows without a control at their scale), stated before the table, and the
caveats they add to what the sweep shows.
"""

from __future__ import annotations

import sweeper.summary.checks as checks
from sweeper.summary.statistics import (
    BASELINE,
    BETTER,
    FIXED,
    LEARNED,
    TAU_SCALE,
    WORSE,
    Comparison,
    SactControls,
    Summary,
    VariantRow,
    at_scale,
    seeds_phrase,
    tau_scale,
)
from sweeper.tracking.metrics import CURVES


def add_findings(summary: Summary) -> None:
    """Warnings from the dev diagnostics and seed counts of every row, and the closing paragraph with its caveats."""
    histories = [history_of(row) for row in summary.rows]
    flagged = {h.label: checks.degenerate(h) for h in histories}
    degenerate = [line for lines in flagged.values() for line in lines]
    not_converged = {
        h.label: [w for w in (checks.still_rising(h), checks.stopped_while_loss_fell(h)) if w] for h in histories
    }
    rising = [line for lines in not_converged.values() for line in lines]
    few = checks.few_seeds([(row.label, row.seeds) for row in summary.rows])
    scales = scale_checks(summary)
    controls = [checks.missing_scale_controls(scales, TAU_SCALE), checks.scattered_scales(scales, TAU_SCALE)]
    summary.warnings = degenerate + rising + [line for line in controls if line] + ([few] if few else [])
    summary.convergence = [checks.convergence(h) for h in histories]
    if not summary.comparisons:
        return
    caveats = []
    caveats.append(convergence_caveat(summary.convergence))
    if degenerate:
        caveats.append(
            "The variants flagged above did not work as their papers intend: their rows measure the "
            "degenerate behaviour, not the method."
        )
    if any(c.test is None for c in summary.comparisons):
        caveats.append(
            "Comparisons tested on test-set variance only (one seed a row, or approximate randomization) do not "
            "count the spread of training runs: they are not claims, and carry no mark."
        )
    summary.conclusion = checks.what_it_shows(
        [claim for c in summary.comparisons for claim in claims_of(c, summary.controls)],
        {label for label, lines in flagged.items() if lines},
        seeds_phrase(summary.rows),
        summary.sentences,
        len(summary.comparisons),
        caveats,
        tuple(sorted(set().union(*(row.records[0].tuned for row in summary.rows)))),
    )


def degeneracy_warnings(summary: Summary) -> list[str]:
    """The warnings of mechanisms that did not work as designed (saturated attention, a temperature at its bound, a
    collapsed or stuck gate), each row's, in the table's order: what a sweep's webhook is told one by one."""
    return [line for row in summary.rows for line in checks.degenerate(history_of(row))]


def convergence_caveat(rows: list[checks.Convergence]) -> str:
    """What the rows were compared at: convergence only where every row meets the measure (#69 item 6), else an
    equal epoch budget, saying how far from convergence the trials were."""
    if all(row.converged for row in rows):
        return (
            f"Every row converged by the measure of the convergence table: at most {checks.CONVERGED_SHARE:.0%} of "
            f"a row's trials had their best dev BLEU at their last epoch, and their last {checks.LAST_EPOCHS} epochs "
            f"added at most {checks.CONVERGED_RISE} BLEU."
        )
    budgets = sorted({row.budget for row in rows})
    best_last, trials = sum(row.best_last for row in rows), sum(row.trials for row in rows)
    return (
        f"Rows are compared at an equal {'/'.join(map(str, budgets))}-epoch budget, not at convergence: "
        f"{best_last} of {trials} trials had their best dev BLEU at their last epoch (the convergence table); "
        "longer training could change the ranking."
    )


def outcome(comparison: Comparison) -> str:
    if comparison.test is None:
        return "test set"
    return "better" if comparison.mark in BETTER else "worse" if comparison.mark in WORSE else "same"


def claims_of(comparison: Comparison, controls: dict[int, SactControls]) -> list[checks.Claim]:
    """The closing paragraph's claims of one comparison: against the baseline, or a control, or both (a SACT row
    whose fixed control at its scale is its baseline)."""
    c = comparison
    note = f"{c.delta:+.2f}" + (f"; {c.power}" if c.power else "")
    whom = []
    if c.kind == BASELINE:
        whom.append(f"the baseline `{c.against.label}`")
    if c.control == LEARNED:
        whom.append(f"the learned-temperature control `{c.against.label}` (the same lambda, every other setting equal)")
    if c.control == FIXED:
        tau, scale = controls[id(c.row)].fixed_tau, controls[id(c.row)].scale
        whom.append(
            f"the fixed-temperature control `{c.against.label}` (tau {tau:g}, at the scale of SACT's median tau "
            f"{scale.median:.2f}; every other setting equal)"
        )
    return [checks.Claim(c.row.label, against, outcome(c), note) for against in whom]


def scale_checks(summary: Summary) -> list[checks.ScaleCheck]:
    """Each SACT row's scale and candidate controls, as checks.missing_scale_controls reads them."""
    found = []
    for row in summary.rows:
        controls = summary.controls.get(id(row))
        if controls is None:
            continue
        learned = tau_scale(controls.learned) if controls.learned else None
        settled = learned is not None and controls.scale is not None and at_scale(learned.median, controls.scale)
        found.append(
            checks.ScaleCheck(
                row.label,
                controls.scale.text() if controls.scale else None,
                controls.fixed is not None,
                controls.nearest_tau,
                controls.learned.label if controls.learned else None,
                learned.text() if learned else None,
                settled,
                controls.scale is not None and max(controls.scale.seeds) > TAU_SCALE**2 * min(controls.scale.seeds),
            )
        )
    return found


def history_of(row: VariantRow) -> checks.VariantHistory:
    record = row.records[0]
    attention = record.config.attention
    curves = {key: [r.curves.get(key, []) for r in row.records] for key in CURVES}
    return checks.VariantHistory(
        row.label,
        attention.temperature,
        attention.lambda_ if "attention.lambda" in record.active else None,
        attention.sentinel,
        curves,
        record.config.train.early_stopping,
        record.config.train.epochs,
    )
