"""Designed studies hold their error rate (#69 item 4): the whole procedure (looks, alpha spending, the two-level
seed x sentence test, seeds added look by look) on simulated studies (benchmarks/sequential_calibration.py), for
superiority and equivalence, 3 and 5 looks, in the data's regime (no system x sentence part), with a large shared
part, and with heavy-tailed seeds (15% of runs 2 BLEU low). Reading every look at the nominal alpha, the habit a
design replaces, must leave the window: the test can fail.

Each cell runs STUDIES null studies (no difference for superiority, the true difference at the margin for
equivalence): the rate of a wrong declaration must stay under alpha plus three Monte-Carlo standard errors.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
from sequential_calibration import REGIMES, calibrate  # noqa: E402

ALPHA, STUDIES = 0.05, 800
CEILING = ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / STUDIES)  # 0.073
pytestmark = pytest.mark.slow  # about 30 s of CPU


@pytest.mark.parametrize("regime", sorted(REGIMES))
@pytest.mark.parametrize("looks", [3, 5])
@pytest.mark.parametrize("test", ["superiority", "equivalence"])
def test_a_design_holds_its_error_rate(test, looks, regime):
    found = calibrate(test, looks, REGIMES[regime], STUDIES, seed=looks, alternatives=False)
    assert found["error"] <= CEILING, found


@pytest.mark.parametrize("test", ["superiority", "equivalence"])
def test_reading_every_look_at_the_nominal_level_fails_the_same_window(test):
    found = calibrate(test, 5, REGIMES["data"], STUDIES, seed=1, spend=False, alternatives=False)
    assert found["error"] > CEILING, found
