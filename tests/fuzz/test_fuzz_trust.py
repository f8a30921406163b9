"""Every case of tests/fuzz/trust_cases.py (the fourth hostile review's twelve classes, issue #70 item 9) keeps the
contract against this tree's code: stored_cases' contract (exit 2 or what a case allows, at most 3 short lines, no
control character, nothing outside storage printed or written, bounded time and memory) and no credential reaching
a host that is not the tracking server's. `python tests/fuzz/measure_gates.py --cases trust --trees OLD NEW`
measures the same cases against another tree."""

from __future__ import annotations

import os

import pytest

from tests.fuzz.measure_gates import results, suite

pytestmark = pytest.mark.timeout(1800)


def test_every_trust_case_keeps_the_contract():
    cases = suite("trust").all_cases()
    assert len(cases) >= 150 and len({case.kind for case in cases}) == 12
    outcomes = results(dict(os.environ), "trust")
    failed = [f"[{cases[i].kind}] {cases[i].name}: {why}" for i, why in sorted(outcomes.items()) if why is not None]
    assert not failed, "\n".join(failed)
