"""The suite's parallel run keeps its groups: tests sharing a cluster or a sweep run on one xdist worker
(tests/conftest.py), so each is set up once. Groups that xdist ignores cost minutes, silently: each worker then sets
up the shared clusters and sweeps of the tests it draws (pytest 9.2 keeps a test's id where pytest-xdist 3.8 writes
its group, and `--dist loadgroup` falls back to one test at a time)."""

from __future__ import annotations

import pytest


@pytest.mark.xdist_group("harness")
def test_an_xdist_worker_schedules_by_group(request):
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not an xdist worker of `--dist loadgroup` (pyproject.toml's addopts with -n)")
    assert request.node.nodeid.endswith("@harness"), (
        f"pytest-xdist ignores the xdist groups ({request.node.nodeid}): this pytest and pytest-xdist do not work "
        "together; install the versions constraints.txt pins"
    )
