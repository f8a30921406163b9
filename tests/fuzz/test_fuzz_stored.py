"""Every case of tests/fuzz/stored_cases.py (hostile stored state and input forms, issue #61) keeps the contract
against this tree's code: exit 2 (or SweeperError), at most 3 lines and 600 bytes, no control character, nothing of
a file outside storage printed, nothing written outside storage, bounded time and memory. The same cases measure
the version before these gates (tests/fuzz/measure_gates.py --trees)."""

from __future__ import annotations

import os

import pytest

from tests.fuzz.measure_gates import results
from tests.fuzz.stored_cases import all_cases

pytestmark = pytest.mark.timeout(1800)


def test_every_hostile_stored_case_keeps_the_contract():
    cases = all_cases()
    assert len(cases) >= 100
    outcomes = results(dict(os.environ))
    failed = [f"[{cases[i].kind}] {cases[i].name}: {why}" for i, why in sorted(outcomes.items()) if why is not None]
    assert not failed, "\n".join(failed)
