"""The local Ray a sweep starts listens on the loopback only (issue #26 item 6): read from /proc while it runs."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_the_sweepers_local_ray_listens_on_127_0_0_1_only(tracked_sweep):
    """Every TCP socket that the process tree of the tracked sweep's driver (its local Ray's GCS, raylet, agents and
    workers) listened on while it ran, sampled every 0.5 s by tests.e2e.sweeps.run_watched."""
    seen = tracked_sweep.listening
    names = {name for name, _ in seen}
    assert {"gcs_server", "raylet"} <= names and any(n.startswith("ray::") for n in names), seen
    outside = {(name, ip) for name, ip in seen if ip not in ("127.0.0.1", "::ffff:127.0.0.1", "::1")}
    assert not outside, f"listening beyond the loopback: {sorted(outside)}"
