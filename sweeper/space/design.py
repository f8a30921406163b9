"""A study's design, declared in the space file before any result (#69): which comparisons decide it, at what error
rates, for what smallest effect, and how seeds are added look by look (`sweeper extend`).

A sweep read after every batch of seeds, and stopped at the first 'significant' or 'equivalent', errs far more often
than its nominal 5% (6-13% in the issue's simulations); a design fixed before the first result, with its alpha spent
across the looks (Lan and DeMets' spending functions), keeps the error at alpha however the data turn out. So the
design is part of the space: `sweeper validate` prints its boundaries and expected seeds, `sweeper run` freezes its
digest on the sweep (sweeper.json and the MLflow parent run), and the summary reads the sweep only at its looks.

This module reads the `design:` section and checks it against the sweep's rows; the numbers (boundaries, plans) are
sweeper.design's.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from nmt_core.config import all_keys
from nmt_core.gates.gate import ErrorType, shown
from nmt_core.gates.settings import Bound, setting

TESTS = ("superiority", "non_inferiority", "equivalence")
SPENDINGS = ("obrien_fleming", "pocock")
CHOICES = ("dev",)  # how a comparison's control is chosen among several matching rows: the best on dev at look 1
COMPARISON_KEYS = ("test", "treatment", "control", "margin", "choose")
MAX_SEEDS = 1000  # per row: a study past this is a typo, and every look trains a block of seeds per row
BLEU = "BLEU points"


@dataclass
class DesignSpec:
    """The `design:` section. Without comparisons a sweep has no design and is read as before (every comparison a
    secondary one)."""

    comparisons: list[dict[str, Any]] = setting(
        [], "the primary comparisons: test (superiority, non_inferiority, equivalence), treatment, control, margin"
    )
    alpha: float = setting(
        0.05,
        "the error rate over all primary comparisons (split equally among them)",
        Bound(0, 0.2, open_low=True, note="a familywise level"),
    )
    power: float = setting(0.8, "the power each comparison is planned for at `effect`", Bound(0.5, 0.99))
    effect: float | None = setting(
        None, "the smallest difference that matters (superiority's planned effect)", Bound(0, open_low=True, note=BLEU)
    )
    sd: float | None = setting(
        None,
        "the seeds' standard deviation the plan assumes (a pilot's, or an earlier sweep's)",
        Bound(0, open_low=True, note=BLEU),
    )
    seeds_per_look: int = setting(
        3, "seeds each row still undecided gets at each look (the first look: search.repeats)", Bound(2, 100)
    )
    max_seeds: int = setting(
        15, "seeds a row at the last look (a multiple of seeds_per_look)", Bound(2, MAX_SEEDS, note="per row")
    )
    spending: str = setting("obrien_fleming", "how alpha is spent across the looks", choices=SPENDINGS)
    futility: bool = setting(True, "a superiority comparison may stop early for futility (non-binding)")

    @property
    def looks(self) -> int:
        return self.max_seeds // self.seeds_per_look

    @property
    def declared(self) -> bool:
        return bool(self.comparisons)


@dataclass(frozen=True)
class Primary:
    """One primary comparison: `treatment` against `control`, each the settings that pick its row (dotted keys, as
    `baseline:` names one); `choose: dev` picks the control among several rows that match (a grid of constants)."""

    test: str
    treatment: dict[str, Any]
    control: dict[str, Any]
    margin: float | None = None
    choose: str | None = None
    index: int = 0

    @property
    def name(self) -> str:
        return f"{self.test.replace('_', '-')} {words(self.treatment)} vs {words(self.control)}"


def words(criteria: Mapping[str, Any]) -> str:
    return ", ".join(f"{key.rsplit('.', 1)[-1]} {value}" for key, value in criteria.items())


def digest(design: DesignSpec) -> str:
    """The design's fingerprint, frozen on the sweep when it starts: a summary compares it with the design it reads."""
    text = json.dumps(asdict(design), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def primaries(design: DesignSpec) -> list[Primary]:
    """The comparisons typed (check_design has checked them)."""
    return [
        Primary(c["test"], dict(c["treatment"]), dict(c["control"]), c.get("margin"), c.get("choose"), index=i)
        for i, c in enumerate(design.comparisons)
    ]


def check_design(design: DesignSpec, rows: list[dict[str, Any]], repeats: int, source: str, error: ErrorType) -> None:
    """The section against itself and against the sweep: the looks divide the maximum, the first look is the
    sweep's repeats, each comparison names a test, its margin and two rows that exist. `rows`: each planned row's
    settings (dotted key -> value)."""
    if not design.declared:
        return
    if design.max_seeds % design.seeds_per_look or design.looks < 2:
        raise error(
            "design.max_seeds",
            f"must be a multiple of seeds_per_look ({design.seeds_per_look}), at least two looks (got "
            f"{design.max_seeds})",
            source,
        )
    if repeats != design.seeds_per_look:
        raise error(
            "search.repeats",
            f"must equal design.seeds_per_look ({design.seeds_per_look}): the first look runs that many seeds a "
            f"row (got {repeats})",
            source,
        )
    for key in ("effect", "sd"):
        if getattr(design, key) is None:
            raise error(f"design.{key}", f"must be set ({BLEU}): the plan's seeds depend on it", source)
    for i, raw in enumerate(design.comparisons):
        _check_comparison(raw, f"design.comparisons.{i}", rows, source, error)


def _check_comparison(raw: Any, where: str, rows: list[dict[str, Any]], source: str, error: ErrorType) -> None:
    if not isinstance(raw, Mapping):
        raise error(where, f"expected a mapping with {', '.join(COMPARISON_KEYS)} (got {shown(raw)})", source)
    for key in raw:
        if key not in COMPARISON_KEYS:
            raise error(f"{where}.{key}", "unknown key; allowed: " + ", ".join(COMPARISON_KEYS), source)
    if raw.get("test") not in TESTS:
        raise error(f"{where}.test", f"must be one of {', '.join(TESTS)} (got {shown(raw.get('test'))})", source)
    margin = raw.get("margin")
    if raw["test"] == "superiority" and margin is not None:
        raise error(f"{where}.margin", "only non_inferiority and equivalence take a margin", source)
    if raw["test"] != "superiority" and not (isinstance(margin, (int, float)) and 0 < margin < 100):
        raise error(f"{where}.margin", f"must be a number of {BLEU} in (0, 100) (got {shown(margin)})", source)
    if raw.get("choose") not in (None, *CHOICES):
        raise error(f"{where}.choose", f"must be one of {', '.join(CHOICES)} (got {shown(raw.get('choose'))})", source)
    found = {
        side: _rows_matching(raw.get(side), f"{where}.{side}", rows, source, error) for side in ("treatment", "control")
    }
    if len(found["treatment"]) != 1:
        raise error(
            f"{where}.treatment", f"must pick one row of the sweep (it picks {len(found['treatment'])})", source
        )
    if len(found["control"]) != 1 and not raw.get("choose"):
        raise error(
            f"{where}.control",
            f"must pick one row of the sweep (it picks {len(found['control'])}; `choose: dev` picks among several)",
            source,
        )
    if set(found["treatment"]) & set(found["control"]):
        raise error(f"{where}.control", "picks the treatment's own row", source)


def _rows_matching(criteria: Any, where: str, rows: list[dict[str, Any]], source: str, error: ErrorType) -> list[int]:
    if not isinstance(criteria, Mapping) or not criteria:
        raise error(where, f"expected a mapping of trial settings picking a row (got {shown(criteria)})", source)
    for key in criteria:
        if key not in all_keys():
            raise error(f"{where}.{key}", "not a trial-config key", source)
    return [i for i, row in enumerate(rows) if all(row.get(k) == v for k, v in criteria.items())]


def plan_lines(design: DesignSpec) -> list[str]:
    """What `sweeper validate` prints of a design: its looks, and per comparison the boundaries, the seeds a row
    it expects to take with no difference and at the planned effect (or margin), its maximum, and the fixed design
    with the same alpha and power (normal theory, the seeds' sd as declared)."""
    from sweeper.design.decision import Plan, boundaries
    from sweeper.design.designs import stopping
    from sweeper.design.sample_size import fixed_seeds, fixed_seeds_equivalence

    share = design.alpha / len(design.comparisons)
    futility = ", futility bounds (non-binding)" if design.futility else ""
    lines = [
        f"  design: {len(design.comparisons)} primary comparison(s), alpha {design.alpha:g} over them "
        f"({share:.3g} each), power {design.power:g}, {design.spending} spending{futility}; looks every "
        f"{design.seeds_per_look} seeds a row up to {design.max_seeds} ({design.looks} looks); sd {design.sd:g}"
    ]
    for primary in primaries(design):
        plan = Plan(primary.test, design.looks, share, design.power, design.spending, design.futility, primary.margin)
        looks = boundaries(plan)
        effect = design.effect if primary.test == "superiority" else primary.margin
        drift = effect / (design.sd * math.sqrt(2 / design.max_seeds))  # Z's mean at the last look
        if primary.test == "equivalence":
            fixed = fixed_seeds_equivalence(design.sd, effect, share, design.power)
            looks, at_effect, null = replace(looks, drift=drift), 0.0, drift
        else:
            sides = 2 if primary.test == "superiority" else 1
            fixed = fixed_seeds(design.sd, effect, share, design.power, sides)
            at_effect, null = drift, 0.0
        power = float(stopping(looks, at_effect).rejected.sum())
        expected = [design.max_seeds * stopping(looks, d).expected_fraction for d in (null, at_effect)]
        lines += [
            f"  {primary.name}: boundary p per look "
            + ", ".join(f"{p:.2g}" for p in looks.nominal_p)
            + (" (futility |Z| <= " + ", ".join(f"{a:.2f}" for a in looks.futility) + ")" if looks.futility else ""),
            f"    seeds a row: expected {expected[0]:.1f} "
            + ("with no difference" if primary.test != "equivalence" else "if the difference is the margin")
            + f", {expected[1]:.1f} "
            + ("at the effect" if primary.test != "equivalence" else "if there is none")
            + f", at most {design.max_seeds} (power {power:.2f}); one fixed analysis: {fixed}",
        ]
    return lines
