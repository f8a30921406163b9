"""The summary's temperature-by-epoch table (issue 62): where a bounded temperature sat, epoch by epoch."""

from __future__ import annotations

from sweeper.summary.tau_epochs import render_tau_epochs


def _seed(medians: list[float], shares: list[float]) -> dict[str, list[float]]:
    return {"tau_p50": medians, "tau_at_bound": shares, "bleu_dev": [1.0] * len(medians)}


def test_each_cell_is_the_median_tau_over_seeds_and_the_mean_share_at_a_bound():
    seeds = [_seed([0.30, 0.25], [0.40, 0.80]), _seed([0.60, 0.26], [0.20, 0.60]), _seed([0.35], [0.30])]
    (section,) = render_tau_epochs([("SACT λ4", 4.0, seeds)])
    row = next(line for line in section.splitlines() if line.startswith("| SACT"))
    # epoch 1: median of 0.30, 0.60, 0.35 = 0.35 (their mean would be 0.417); mean of 40%, 20%, 30% = 30%;
    # all three seeds reached it
    # epoch 2: two seeds (the third stopped): median of 0.25 and 0.26 = 0.255; mean of 80% and 60% = 70%
    assert row == "| SACT λ4 | 0.25-4 | 0.35 / 30% | 0.255 / 70% (2 seeds) |"
    assert "| row | bounds | epoch 1 | epoch 2 |" in section


def test_rows_without_bounds_are_left_out_and_no_bounded_row_means_no_section():
    fixed = [{"tau_p50": [0.5, 0.5], "bleu_dev": [1.0, 2.0]}]
    assert render_tau_epochs([("fixed tau 0.5", 1.0, fixed)]) == []
    learned = [_seed([0.12], [0.05])]
    (section,) = render_tau_epochs([("fixed tau 0.5", 1.0, fixed), ("learned λ10", 10.0, learned)])
    assert "fixed tau" not in section and "| learned λ10 | 0.1-10 | 0.12 / 5% |" in section
