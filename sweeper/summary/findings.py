"""The summary's findings: the checks of sweeper.findings over every row's per-epoch dev diagnostics (degenerate
mechanisms, dev curves still rising, missing controls), stated before the table, and the caveats they add to what
the sweep shows.
"""
from __future__ import annotations

from sweeper import findings as checks
from sweeper.metrics import CURVES
from sweeper.summary.statistics import Summary, VariantRow


def add_findings(summary: Summary) -> None:
    """Warnings from the dev diagnostics of every row, and the caveats they add to the conclusion."""
    histories = [history_of(row) for row in summary.rows]
    degenerate = [line for h in histories for line in checks.degenerate(h)]
    rising = [line for line in map(checks.still_rising, histories) if line]
    summary.warnings = degenerate + rising + checks.missing_controls(histories)
    caveats = []
    if rising:
        caveats.append(f"Training stopped while dev BLEU was still rising for {len(rising)} of {len(histories)} "
                       "variants (see the warnings and the dev curves): the ranking may not hold at convergence.")
    else:
        caveats.append("No variant's dev BLEU rose by more than 2% in its last epoch (dev curves below).")
    if degenerate:
        caveats.append("The variants flagged above did not work as their papers intend: their rows measure the "
                       "degenerate behaviour, not the method.")
    if summary.conclusion:
        summary.conclusion += "\n".join(caveats) + "\n"


def history_of(row: VariantRow) -> checks.VariantHistory:
    params = row.records[0].params
    lam, tau = (float(params[key]) if key in params else None for key in ("attention.lambda", "attention.tau"))
    curves = {key: [r.curves.get(key, []) for r in row.records] for key in CURVES}
    return checks.VariantHistory(row.label, params.get("attention.temperature", "none"), lam, tau,
                                 params.get("attention.sentinel") == "True", curves)

