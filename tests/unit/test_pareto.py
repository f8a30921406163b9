"""Several objectives (issue 73): `objective` as a list, checked in one line; Optuna's multi-objective samplers; the
summary's Pareto front, a row marked dominated only where that is significant over seeds. Expected p-values are
computed here from Welch's formula, not by the code under test."""

from __future__ import annotations

import json
import math

import jsonschema
import pytest
from scipy import stats

from sweeper.space.spec import ObjectiveSpec, RecordedSpace, SpecError, parse_spec, recorded_space
from sweeper.summary import SweepSnapshot, TrialRecord
from sweeper.summary.pareto import DOMINATED, FRONT, WITHIN_NOISE, pareto_front
from sweeper.summary.statistics import Summary, VariantRow
from tests.unit.test_schema import QUICKSTART, validator

TWO = [{"metric": "bleu_dev", "mode": "max"}, {"metric": "n_params", "mode": "min"}]


def space(objective, **sections) -> str:
    return json.dumps({**QUICKSTART, "objective": objective, **sections})


def test_objective_takes_a_list_and_a_single_objective_reads_as_before():
    spec = parse_spec(space(TWO), "q.yaml")
    assert [(o.metric, o.mode) for o in spec.objectives] == [("bleu_dev", "max"), ("n_params", "min")]
    assert (spec.metric, spec.mode) == ("bleu_dev", "max")  # the first: schedulers, progress, the registered best
    single = parse_spec(space({"metric": "chrf_dev", "mode": "max"}), "q.yaml")
    assert single.objectives == () and single.metric == "chrf_dev"
    assert parse_spec(space([TWO[0]]), "q.yaml").objectives == ()  # a list of one is one objective
    assert validator("sweep.schema.json").is_valid(json.loads(space(TWO)))
    assert not validator("sweep.schema.json").is_valid(json.loads(space([{"metric": "bleu_dev", "mode": "up"}])))
    recorded = recorded_space(space(TWO), "run p: space.yaml")
    assert recorded.objective == ObjectiveSpec("bleu_dev", "max") and len(recorded.objectives) == 2
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(json.loads(space([*TWO, *TWO, *TWO])), validator("sweep.schema.json").schema)


@pytest.mark.parametrize(
    ("objective", "sections", "said"),
    [
        ([TWO[0], {"metric": "bleu_dev", "mode": "up"}], {}, r"objective\[1\]\.mode: must be one of max, min"),
        ([TWO[0], {"metric": "bleu", "mode": "max"}], {}, r"objective\[1\]\.metric: must be one of bleu_dev"),
        ([TWO[0], TWO[0]], {}, "objective: each metric once"),
        ([TWO[0]] * 5, {}, "objective: a list of 1 to 4 objectives"),
        (TWO, {"scheduler": {"type": "asha"}}, "scheduler.type: must be fifo with several objectives"),
        (
            {"metric": "n_params", "mode": "min"},
            {"scheduler": {"type": "asha"}},
            "scheduler.type: must be fifo with n_params",
        ),
        (TWO, {"search": {"algorithm": "optuna", "sampler": "gp"}}, "search.sampler: gp takes one objective"),
    ],
)
def test_a_bad_list_of_objectives_is_one_line_naming_the_item(objective, sections, said):
    with pytest.raises(SpecError, match=f"q.yaml: {said}") as caught:
        parse_spec(space(objective, **sections), "q.yaml")
    assert "\n" not in str(caught.value)


def test_optuna_gets_every_objective_and_nsga2():
    from optuna.samplers import NSGAIISampler

    from sweeper.running.optuna_search import make_sampler, optuna_searcher

    spec = parse_spec(space(TWO, search={"algorithm": "optuna", "sampler": "nsga2", "num_samples": 4}), "q.yaml")
    searcher = optuna_searcher(spec, None)
    assert searcher.metric == ["bleu_dev", "n_params"] and searcher.mode == ["max", "min"]
    assert isinstance(make_sampler(spec.search), NSGAIISampler)
    searcher.set_search_properties(None, None, {})
    assert [d.name for d in searcher._ot_study.directions] == ["MAXIMIZE", "MINIMIZE"]


def row(label: str, bleu: list[float], params: list[float]) -> VariantRow:
    records = [
        TrialRecord(f"{label}{i}", f"{label}{i}", label, {}, {"n_params": p}, {"bleu_dev": [b - 1, b]})
        for i, (b, p) in enumerate(zip(bleu, params))
    ]
    return VariantRow(label, records, {}, (0.0, 0.0), None, int(params[0]), None)


def welch_greater(b: list[float], a: list[float]) -> float:
    """One-sided Welch p of mean(b) > mean(a), from its formula."""
    va, vb = (sum((x - sum(v) / len(v)) ** 2 for x in v) / (len(v) - 1) / len(v) for v in (a, b))
    t = (sum(b) / len(b) - sum(a) / len(a)) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    return float(stats.t.sf(t, df))


def test_a_row_is_marked_dominated_only_where_that_is_significant_over_seeds():
    """B beats A on BLEU by 5 at equal size: dominated, p from Welch. C ties B's BLEU mean with more parameters:
    dominated by means, not significantly (its BLEU not shown worse). D, one seed, smaller than all: on the front.
    E, one seed, dominated by B by means: never marked (no spread to test)."""
    three, more = [1e6] * 3, [2e6] * 3
    a, b, c = row("A", [20, 21, 20.5], three), row("B", [25, 25.5, 26], three), row("C", [24, 27, 25.5], more)
    d, e = row("D", [10], [1e5]), row("E", [19], [3e6])
    front = pareto_front(Summary([a, b, c, d, e], ["test"]), tuple(ObjectiveSpec(**o) for o in TWO))
    place = {p.row.label: p for p in front.points}
    assert {label for label, p in place.items() if p.status == FRONT} == {"B", "D"}
    assert place["A"].dominators == [b] and place["A"].status == DOMINATED
    expected_a = welch_greater([25, 25.5, 26], [20, 21, 20.5])  # the parameter count ties exactly: no doubt there
    assert place["A"].p_value == pytest.approx(expected_a, rel=1e-9)
    assert place["C"].p_value == pytest.approx(welch_greater([25, 25.5, 26], [24, 27, 25.5]), rel=1e-9) and (
        place["C"].status == WITHIN_NOISE
    )
    assert (
        [r.label for r in place["E"].dominators] == ["A", "B", "C"]
        and place["E"].p_value == 1.0
        and place["E"].status == WITHIN_NOISE
    )
    holm = sorted([place["A"].p_value, place["C"].p_value, 1.0])
    assert place["A"].p_adjusted == pytest.approx(3 * holm[0])


def test_the_summary_gives_the_front_as_a_table_and_a_figure(tmp_path):
    from sweeper.summary.report import write_report
    from tests.unit.test_summary import _review_snapshot

    rows = [("general+none", {}, 0.001, 2, {}), ("general+tau4", {"temperature": "fixed", "tau": 4.0}, 0.001, 5, {})]
    snapshot = _review_snapshot(rows, 2, {"resamples": 100})
    for record in snapshot.records:
        record.metrics["tokens_per_s"] = 1000.0 + (500 if record.variant == "general+none" else 0) + len(record.run_id)
    objectives = (ObjectiveSpec("bleu_dev", "max"), ObjectiveSpec("tokens_per_s", "max"))
    snapshot = SweepSnapshot(**{**vars(snapshot), "space": RecordedSpace(objectives=objectives)})
    write_report(snapshot, tmp_path, ["md"])
    summary = (tmp_path / "summary.md").read_text()
    assert (
        "## Pareto front" in summary and "| variant | seeds | bleu_dev (max) | tokens_per_s (max) | place |" in summary
    )
    assert "![Pareto front](pareto_front.png)" in summary and (tmp_path / "pareto_front.png").stat().st_size > 2000
    single = tmp_path / "single"
    write_report(_review_snapshot(rows, 2, {"resamples": 100}), single, ["md"])
    assert "Pareto" not in (single / "summary.md").read_text()


def test_mlflow_shows_the_front_as_each_trials_tag_and_the_views_first_column(tmp_path):
    """#73 item 2's last part: each trial's run is tagged with its row's place, and a sweep with several objectives
    shows that tag first in its saved view's runs table."""
    from mlflow.tracking import MlflowClient

    from sweeper.summary.pareto import FRONT
    from sweeper.summary.report import tag_pareto, write_report
    from sweeper.tracking.metrics import PARETO_TAG
    from sweeper.tracking.mlflow_view import SweepView, view_state
    from tests.unit.test_summary import _review_snapshot

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("front")
    rows = [("general+none", {}, 0.001, 2, {}), ("general+tau4", {"temperature": "fixed", "tau": 4.0}, 0.001, 5, {})]
    snapshot = _review_snapshot(rows, 2, {"resamples": 100})
    for record in snapshot.records:
        record.run_id = client.create_run(experiment).info.run_id
        record.metrics["tokens_per_s"] = 1000.0 + (500 if record.variant == "general+none" else 0)
    snapshot.translations = {r.run_id: t for r, t in zip(snapshot.records, snapshot.translations.values())}
    objectives = (ObjectiveSpec("bleu_dev", "max"), ObjectiveSpec("tokens_per_s", "max"))
    snapshot = SweepSnapshot(**{**vars(snapshot), "space": RecordedSpace(objectives=objectives)})
    summary = write_report(snapshot, tmp_path / "out", ["md"])
    tag_pareto(client, summary)
    places = {client.get_run(r.run_id).data.tags[PARETO_TAG] for r in snapshot.records}
    assert places and FRONT in places  # both rows lead on one objective: both on the front
    state = view_state("p0", SweepView(("attention.temperature",), pareto=True))
    assert state["columnOrder"][1] == f"tags.`{PARETO_TAG}`"
