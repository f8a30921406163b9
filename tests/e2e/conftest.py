"""Sweeps that many end-to-end tests read: each runs once per session, on the xdist worker that runs its readers.

A new test that only reads a finished sweep asks for one of these fixtures (or adds one here: a small sweep, run
with tests.e2e.sweeps.run_watched) instead of running its own; tests/conftest.py puts every test that asks for a
session or module fixture of the tests on that fixture's worker, so the sweep runs once.
"""

from __future__ import annotations

import pytest

from tests.e2e.sweeps import SPACE, FinishedSweep, run_watched, write_space


@pytest.fixture(scope="session")
def tracked_sweep(tmp_path_factory, mlflow_server) -> FinishedSweep:
    """SPACE's three trials (general+none, general+sact4, general+sact4+sentinel; 2 epochs; lowercased data) against
    the session's MLflow server, on the local Ray that `sweeper run` starts; `tracking.plots: all`, which
    tests/e2e/test_plots_policy.py checks (one trial a variant: under `best` the same trials would draw, in the
    summary instead)."""
    folder = tmp_path_factory.mktemp("tracked")
    space = write_space(
        folder, name="e2e-tracking", data={**SPACE["data"], "lowercase": True}, tracking={"plots": "all"}
    )
    sweep = run_watched(space, folder, mlflow_server.uri)
    assert sweep.returncode == 0, sweep.stdout[-3000:] + sweep.stderr[-3000:]
    return sweep
