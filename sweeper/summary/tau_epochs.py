"""Where each bounded temperature sat, epoch by epoch: the question a temperature that can run to its bound raises
(issue 62: in the first Transformer study SACT's tau reached its bound lambda in epoch 2 and stayed there).

One line per row whose trials logged `tau_at_bound` (SACT and the learned temperature; a fixed tau has no bounds):
for each epoch, the median over seeds of the dev median tau (tau_p50) and the mean over seeds of the share of dev
(token, head) pairs within 1% of either bound, 1/lambda or lambda (nmt_core.training.diagnostics). Which bound the
median sits at tells which one the share is mostly at. An epoch that not every seed reached says how many did: early
stopping ends seeds at different epochs, and a mean over fewer seeds is not the row's.

Beside it, what the mechanisms after SACT report per token (issue 72), by epoch: the share of logits beyond the
soft-cap, of keys at exactly 0 (entmax), entmax's alpha, SSMax's s log n, and SACT's lambda^beta with a base scale
(nmt_core.training.diagnostics: `<name>_mean` over dev (token, head) pairs), the median over seeds.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from nmt_core.training.diagnostic_keys import BOUND_TOLERANCE, OBSERVED, TAU_AT_BOUND, TAU_P50

Curves = dict[str, list[float]]  # a trial's per-epoch dev history, metric -> values in epoch order


def epoch_cell(seeds: Sequence[Curves], epoch: int) -> str:
    """`median tau / share at a bound` at one epoch (0-based) over the seeds that reached it."""
    reached = [c for c in seeds if len(c.get(TAU_AT_BOUND, [])) > epoch and len(c.get(TAU_P50, [])) > epoch]
    if not reached:
        return ""
    tau = statistics.median(c[TAU_P50][epoch] for c in reached)
    share = statistics.fmean(c[TAU_AT_BOUND][epoch] for c in reached)
    fewer = f" ({len(reached)} seeds)" if len(reached) < len(seeds) else ""
    return f"{tau:.3g} / {share:.0%}{fewer}"


def render_tau_epochs(rows: Sequence[tuple[str, float, Sequence[Curves]]]) -> list[str]:
    """The section for rows given as (name, lambda, each seed's curves); nothing when no row logged the share."""
    bounded = [(name, lam, seeds) for name, lam, seeds in rows if any(c.get(TAU_AT_BOUND) for c in seeds)]
    if not bounded:
        return []
    epochs = max(len(c.get(TAU_AT_BOUND, [])) for _, _, seeds in bounded for c in seeds)
    lines = [
        "## Temperature by epoch (dev): does it stay off its bounds?\n",
        "Each cell: the median over seeds of the dev median tau (tau_p50), then the mean over seeds of the share "
        f"of dev (token, head) pairs within {BOUND_TOLERANCE:.0%} of a bound (1/lambda or lambda; tau_at_bound). "
        "The median tells which bound the share is at.\n",
        "| row | bounds | " + " | ".join(f"epoch {e + 1}" for e in range(epochs)) + " |",
        "|---|---|" + "---|" * epochs,
    ]
    for name, lam, seeds in bounded:
        cells = [epoch_cell(seeds, e) for e in range(epochs)]
        lines.append(f"| {name} | {1 / lam:.3g}-{lam:g} | " + " | ".join(cells) + " |")
    return ["\n".join(lines) + "\n"]


def observed_cell(seeds: Sequence[Curves], key: str, epoch: int) -> str:
    """The median over the seeds that reached the epoch (0-based) of one observed mean."""
    reached = [c[key][epoch] for c in seeds if len(c.get(key, [])) > epoch]
    fewer = f" ({len(reached)} seeds)" if len(reached) < len(seeds) else ""
    return f"{statistics.median(reached):.3g}{fewer}" if reached else ""


def render_observed_epochs(rows: Sequence[tuple[str, Sequence[Curves]]]) -> list[str]:
    """The section for rows given as (name, each seed's curves): one line per row and observed value it logged;
    nothing when no row logged one."""
    lines = [
        f"| {name} | {observed} | " + " | ".join(observed_cell(seeds, key, e) for e in range(epochs)) + " |"
        for name, seeds in rows
        for observed in OBSERVED
        if (key := f"{observed}_mean") and (epochs := max((len(c.get(key, [])) for c in seeds), default=0))
    ]
    if not lines:
        return []
    width = max(line.count("|") for line in lines) - 3
    head = [
        "## What the mechanisms after SACT did, by epoch (dev)\n",
        "Each cell: the median over seeds of the mean over dev (token, head) pairs: `capped` the share of a token's "
        "logits beyond the soft-cap, `zeros` the share of its keys at exactly 0 (entmax), `alpha` entmax's alpha, "
        "`log_n_scale` SSMax's s log n, `tau_modulation` SACT's lambda^beta beside its base scale.\n",
        "| row | value | " + " | ".join(f"epoch {e + 1}" for e in range(width)) + " |",
        "|---|---|" + "---|" * width,
    ]
    return ["\n".join(head + lines) + "\n"]
