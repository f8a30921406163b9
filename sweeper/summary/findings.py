"""The summary's findings: the checks of sweeper.summary.checks over every row's per-epoch dev diagnostics (degenerate
mechanisms, dev curves still rising, missing controls), stated before the table, and the caveats they add to what
the sweep shows.
"""

from __future__ import annotations

from sweeper.metrics import CURVES
from sweeper.summary import checks
from sweeper.summary.statistics import (
    BETTER,
    WORSE,
    Summary,
    VariantRow,
    sact_controls,
    seeds_phrase,
)


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
    controls = checks.missing_controls(uncontrolled(summary.rows))
    summary.warnings = degenerate + rising + controls + ([few] if few else [])
    if not summary.comparisons:
        return
    caveats = []
    if rising:
        caveats.append(
            f"Training stopped before convergence in {sum(map(bool, not_converged.values()))} of {len(histories)} "
            "variants (see the warnings and the dev curves): the ranking may not hold at convergence."
        )
    else:
        caveats.append(
            "Every variant's dev BLEU had flattened: each seed was ended by early stopping (with its dev loss no "
            "longer falling), or its last epoch "
            f"added at most {checks.MIN_RISE} BLEU or {checks.STILL_RISING:.0%} (dev curves below)."
        )
    if degenerate:
        caveats.append(
            "The variants flagged above did not work as their papers intend: their rows measure the "
            "degenerate behaviour, not the method."
        )
    if few:
        caveats.append(
            f"Rows with fewer than {checks.MIN_SEEDS} seeds (see the warnings): their marks are not to be published."
        )
    claims = [(c.row.label, c.against.label, c.kind, outcome(c.mark)) for c in summary.comparisons]
    summary.conclusion = checks.what_it_shows(
        claims,
        {label for label, lines in flagged.items() if lines},
        seeds_phrase(summary.rows),
        summary.sentences,
        len(summary.comparisons),
        caveats,
    )


def outcome(mark: str) -> str:
    return "better" if mark in BETTER else "worse" if mark in WORSE else "same"


def uncontrolled(rows: list[VariantRow]) -> list[tuple[str, float]]:
    """(label, lambda) of each SACT row that has no control to be compared with (statistics.sact_controls)."""
    controls = sact_controls(rows)
    return [
        (row.label, float(row.records[0].params["attention.lambda"]))
        for row in rows
        if id(row) in controls and controls[id(row)] is None
    ]


def history_of(row: VariantRow) -> checks.VariantHistory:
    params = row.records[0].params
    lam = float(params["attention.lambda"]) if "attention.lambda" in params else None
    curves = {key: [r.curves.get(key, []) for r in row.records] for key in CURVES}
    return checks.VariantHistory(
        row.label,
        params.get("attention.temperature", "none"),
        lam,
        params.get("attention.sentinel") == "True",
        curves,
        int(params.get("train.early_stopping", 0)),
    )
