"""A study's design (#69): declared in the space and checked there (one line per mistake), printed as a plan by
`sweeper validate`, read by the summary only at its looks with group-sequential boundaries, and refused as a verdict
where it changed after the first result. The error rates: tests/unit/test_sequential_calibration.py."""

from __future__ import annotations

import dataclasses

import pytest
import yaml
from scipy.special import ndtr

from nmt_core.training.evaluate import PairedBootstrap, corpus_bleu
from sweeper import api
from sweeper.design.decision import Plan, Reading, boundaries, read_look
from sweeper.space.design import DesignSpec, digest, primaries
from sweeper.space.spec import SpecError, load_spec
from sweeper.summary.report import compute, significance_of, write_report
from sweeper.summary.sequential import PrimaryReading, verdict_line
from tests.unit.test_summary import REVIEW_REFS, _review_snapshot

DESIGNED = "search_spaces/sact_study_tatoeba_cpu_designed.yaml"
# Lan-DeMets O'Brien-Fleming-type bounds, two-sided 0.05 (0.025 a side), five equally spaced looks: the published
# 4.8769, 3.3569, 2.6803, 2.2898, 2.0310 (ldbounds' vignette, ldBounds(5)); the nominal levels are 1 - Phi of them
OBF_FIVE_LOOKS = (4.8769, 3.3569, 2.6803, 2.2898, 2.0310)


def space_with(tmp_path, **design) -> str:
    raw = yaml.safe_load(open(DESIGNED, encoding="utf-8"))
    raw["design"] = {**raw["design"], **design}
    path = tmp_path / "designed.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return str(path)


def test_the_shipped_designed_space_validates_and_prints_its_plan():
    lines = api.validate(DESIGNED).lines
    plan = "\n".join(lines)
    assert "design: 3 primary comparison(s), alpha 0.05 over them (0.0167 each)" in plan
    assert "looks every 3 seeds a row up to 30 (10 looks)" in plan
    assert plan.count("boundary p per look") == 3 and "one fixed analysis:" in plan


@pytest.mark.parametrize(
    "design, key, says",
    [
        ({"effect": None}, "design.effect", "must be set"),
        ({"max_seeds": 14}, "design.max_seeds", "must be a multiple of seeds_per_look (3)"),
        ({"seeds_per_look": 2, "max_seeds": 4}, "search.repeats", "must equal design.seeds_per_look (2)"),
        (
            {
                "comparisons": [
                    {
                        "test": "superiority",
                        "margin": 1,
                        "treatment": {"attention.temperature": "sact"},
                        "control": {"attention.temperature": "none"},
                    }
                ]
            },
            "design.comparisons.0.margin",
            "only non_inferiority and equivalence take a margin",
        ),
        (
            {
                "comparisons": [
                    {
                        "test": "superiority",
                        "treatment": {"attention.temperature": "learned"},
                        "control": {"attention.temperature": "none"},
                    }
                ]
            },
            "design.comparisons.0.treatment",
            "must pick one row of the sweep (it picks 0)",
        ),
        (
            {
                "comparisons": [
                    {
                        "test": "equivalence",
                        "margin": 0.5,
                        "treatment": {"attention.temperature": "sact"},
                        "control": {"attention.temperature": "fixed"},
                    }
                ]
            },
            "design.comparisons.0.control",
            "must pick one row of the sweep (it picks 3; `choose: dev` picks among several)",
        ),
        (
            {"comparisons": [{"test": "better", "treatment": {}, "control": {}}]},
            "design.comparisons.0.test",
            "must be one of superiority, non_inferiority, equivalence",
        ),
    ],
)
def test_a_bad_design_is_one_line_naming_the_key(tmp_path, design, key, says):
    path = space_with(tmp_path, **design)
    with pytest.raises(SpecError) as refused:
        load_spec(path)
    assert str(refused.value).startswith(f"{path}: {key}: {says}") and "\n" not in str(refused.value)


def test_the_digest_changes_with_any_value_of_the_design():
    design = load_spec(DESIGNED).design
    assert digest(design) == digest(dataclasses.replace(design))
    assert digest(design) != digest(dataclasses.replace(design, alpha=0.04))
    assert digest(design) != digest(dataclasses.replace(design, comparisons=design.comparisons[:2]))


def test_a_look_compares_the_tests_p_with_the_published_boundarys_nominal_level():
    plan = Plan("superiority", looks=5, alpha=0.05, power=0.8, spending="obrien_fleming", futility=False)
    design = boundaries(plan)
    nominal = [float(ndtr(-c)) for c in OBF_FIVE_LOOKS]
    assert design.nominal_p == pytest.approx(nominal, rel=2e-3)
    # se 1, df 1e9 (a z test): at look 3, delta 2.70 passes 2.6803, 2.66 does not; 2.04 passes the last look's 2.0310
    assert read_look(plan, design, 3, 2.70, 1.0, 1e9).verdict == "better"
    assert read_look(plan, design, 3, -2.70, 1.0, 1e9).verdict == "worse"
    assert read_look(plan, design, 3, 2.66, 1.0, 1e9).verdict == "undecided"
    assert read_look(plan, design, 5, 2.04, 1.0, 1e9).verdict == "better"
    assert read_look(plan, design, 5, 2.02, 1.0, 1e9).verdict == "undecided at the maximum"
    # a t with 4 df needs more than the Z bound: 2.70 at df 4 has p 0.027 > 0.0037
    assert read_look(plan, design, 3, 2.70, 1.0, 4).verdict == "undecided"


def test_equivalence_is_declared_inside_the_margin_and_refused_outside_it():
    plan = Plan("equivalence", looks=2, alpha=0.05, power=0.8, spending="obrien_fleming", futility=False, margin=0.5)
    design = boundaries(plan)
    assert read_look(plan, design, 2, 0.0, 0.1, 1e9).verdict == "equivalent within ±0.5"
    assert read_look(plan, design, 1, 1.5, 0.1, 1e9).verdict == "not equivalent"
    assert read_look(plan, design, 1, 0.3, 0.2, 1e9).verdict == "undecided"


DESIGN = DesignSpec(
    comparisons=[
        {
            "test": "superiority",
            "treatment": {"attention.temperature": "fixed"},
            "control": {"attention.temperature": "none"},
        }
    ],
    effect=1.0,
    sd=0.5,
    seeds_per_look=2,
    max_seeds=4,
    futility=False,
)


def designed_snapshot(seeds: int, frozen: str | None = None):
    """Two rows (no temperature, a fixed tau) whose seeds degrade different sentences, the design above on them."""
    fixed = {"temperature": "fixed", "tau": 4.0}
    snapshot = _review_snapshot(
        [("general+none", {}, 0.001, 2, {}), ("general+tau4", fixed, 0.001, 5, {})],
        seeds,
        {"resamples": 200},
        seeds_differ=True,
    )
    for record in snapshot.records:  # seed k loses k - 1 more sentences: every seed's BLEU its own
        seed = int(record.params["train.seed"])
        hyps = [("w0" if i < seed - 1 else line) for i, line in enumerate(snapshot.translations[record.run_id]["test"])]
        snapshot.translations[record.run_id]["test"] = hyps
        record.metrics["bleu_test_avg"] = record.metrics["bleu_test_test"] = corpus_bleu(hyps, REVIEW_REFS).score
    snapshot.space = dataclasses.replace(snapshot.space, design=DESIGN)
    snapshot.design_digest = digest(DESIGN) if frozen is None else frozen
    return snapshot


def test_the_summary_reads_a_designed_sweep_at_its_looks_and_says_interim_between_them(tmp_path):
    at_look = compute(designed_snapshot(4), significance_of(designed_snapshot(4), None))
    [found] = at_look.design
    first = [r for r in designed_snapshot(4).records if int(r.params["train.seed"]) <= found.seeds]
    means = {v: [r.metrics["bleu_test_avg"] for r in first if r.variant == v] for v in ("general+tau4", "general+none")}
    expected = sum(means["general+tau4"]) / len(means["general+tau4"]) - sum(means["general+none"]) / len(
        means["general+none"]
    )
    assert found.reading.delta == pytest.approx(expected) and found.seeds in (2, 4)
    assert found.reading.look == found.seeds // 2 and found.note == ""
    between = compute(designed_snapshot(3), significance_of(designed_snapshot(3), None)).design[0]
    assert between.note.startswith("3 and 3 seeds: looks at 2, 4 seeds a row")
    summary = write_report(designed_snapshot(4), tmp_path / "out", ["md"])
    text = (tmp_path / "out" / "summary.md").read_text(encoding="utf-8")
    assert "## Primary comparisons" in text and "## BLEU (secondary comparisons)" in text
    assert summary.design[0].reading.verdict in text


def test_a_designed_summary_extracts_each_trials_bleu_statistics_once(monkeypatch):
    """The BLEU table's tests and the looks resample the same trials: sacrebleu extracts each trial's sentence
    statistics once for both (it did twice: once for the table, once for the looks)."""
    extracted, extract = [], PairedBootstrap.stats
    monkeypatch.setattr(PairedBootstrap, "stats", lambda self, hyps: extracted.extend(hyps) or extract(self, hyps))
    snapshot = designed_snapshot(4)
    summary = compute(snapshot, significance_of(snapshot, None))
    assert summary.design[0].reading is not None and summary.comparisons
    assert len(extracted) == len(snapshot.records) == 8
    assert sorted(map(id, extracted)) == sorted(id(snapshot.translations[r.run_id]) for r in snapshot.records)


def test_a_design_changed_after_the_first_result_gives_no_verdict_and_says_so_first(tmp_path):
    snapshot = designed_snapshot(4, frozen="0" * 16)
    summary = write_report(snapshot, tmp_path / "out", ["md"])
    text = (tmp_path / "out" / "summary.md").read_text(encoding="utf-8")
    assert summary.design_changed and summary.design == []
    assert text.startswith("**the design changed after the sweep's first result: no verdict**")
    assert "## Primary comparisons" not in text


def test_an_extension_as_a_ray_job_runs_sweeper_extend_on_the_sweeps_storage(monkeypatch):
    """`sweeper extend NAME --job`: the job's driver runs `sweeper extend` on the sweep's storage; its tracking store
    is the one the sweep recorded unless --tracking-uri names another (no MLFLOW_TRACKING_URI then). The submission
    itself is `sweeper submit`'s (tests/e2e/test_submit_e2e.py runs one against a real Ray head)."""
    from sweeper.running import submit

    sent = {}
    monkeypatch.setattr(submit, "connect", lambda address: "client")
    monkeypatch.setattr(submit, "submit_when_an_agent_is_up", lambda client, **job: sent.update(job) or "job-1")
    assert submit.submit_extend("designed", "http://head:8265", "s3://lab/sweeps", None, True, wait=False) == 0
    assert sent["entrypoint"] == (
        "python -m sweeper.cli --debug extend designed --storage s3://lab/sweeps --until-decided"
    )
    assert "MLFLOW_TRACKING_URI" not in sent["runtime_env"]["env_vars"]


@pytest.mark.parametrize(
    "interval, says",
    [
        ((-0.71, +1.21), "+0.25 [-0.71, +1.21] (repeated 98% CI), 3 seeds a row"),
        ((-1278666.43, +1278665.98), "+0.25 (repeated 98% CI: wider than any BLEU difference at this look), 3 seeds"),
    ],
)
def test_a_repeated_interval_wider_than_bleus_range_says_it_bounds_nothing_yet(interval, says):
    """Look 1 of 10 of an O'Brien-Fleming design on 3 seeds a row: the interval is valid and about a million BLEU
    wide (docs/results/sact_study_tatoeba_cpu_designed.md); the line says what that means instead of printing it."""
    primary = primaries(load_spec(DESIGNED).design)[0]
    reading = Reading(1, 0.25, interval, 0.98, 7.2e-17, 0.29, "undecided")
    line = verdict_line(PrimaryReading(primary, None, None, seeds=3, reading=reading))
    assert says in line and line.endswith("look 1 (boundary p ≤ 7.2e-17, p 0.29)")
