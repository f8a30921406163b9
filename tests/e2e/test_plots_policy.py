"""`tracking.plots`: what each trial's run holds under `all`, read on the tracked sweep (tests/e2e/conftest.py: three
variants, a real MLflow server over HTTP). `best` (the default: only each variant's best trial draws, and the summary
shows its heatmaps) is checked on the sweep of tests/e2e/test_sweeps_by_name.py (sweeps.check_best_plots: two
variants, two seeds each); `none` on tests/unit/test_metrics.py's LEAN_TRACKING sweep."""

from __future__ import annotations

import pytest

from tests.e2e.sweeps import artifacts, child_runs, heatmap_data

pytestmark = pytest.mark.slow


def test_all_has_every_trial_draw(tracked_sweep, tmp_path):
    """`none` (trials log the heatmaps' data, nobody draws) is held by the LEAN_TRACKING sweep of
    tests/unit/test_metrics.py, which runs with it anyway."""
    assert "summary skipped" not in tracked_sweep.stdout, tracked_sweep.stdout[-3000:]
    client = tracked_sweep.client
    _, children = child_runs(client, tracked_sweep.name)
    assert len(children) == 3
    for child in children:
        data = heatmap_data(client, child.info.run_id, tmp_path)
        assert data["sentences"]
        drawn = [f"attention_dev{s['index']}.png" for s in data["sentences"]]
        drawn += ["temperature_heatmap.png"] if data["lambda"] is not None else []  # SACT's
        assert artifacts(client, child.info.run_id, "plots") == sorted(drawn)
    summary = (tracked_sweep.storage / tracked_sweep.name / "summary" / "summary.md").read_text()
    assert "## Attention heatmaps" not in summary  # the trials drew them
