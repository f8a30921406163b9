"""The sweep's saved view in MLflow's UI (sweeper.tracking.mlflow_view): what the tag holds, the link, the version
fallback. What a browser makes of it: tests/e2e/test_mlflow_view.py."""

from __future__ import annotations

import json
import socket
from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

import pytest
from mlflow.tracking import MlflowClient

from sweeper.tracking import mlflow_view
from sweeper.tracking.metrics import SEED_TAG, VARIANT_NAME
from sweeper.tracking.mlflow_charts import categorical_axes, decoding, group_colour, group_colours, view_params
from sweeper.tracking.mlflow_view import (
    SHARE_TAG_PREFIX,
    TRANSLATIONS_VIEW,
    SweepView,
    described_links,
    free_port,
    in_tested_range,
    recorded_port,
    share_view,
    translations_link,
    translations_state,
    view_key,
    view_state,
)


@pytest.fixture
def store(tmp_path):
    """A SQLite tracking store with an experiment and a parent run: (uri, client, experiment id, parent run id)."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment_id = client.create_experiment("view")
    parent = client.create_run(experiment_id, run_name="view-sweep").info.run_id
    return uri, client, experiment_id, parent


def query(link: str) -> dict[str, list[str]]:
    """The query of a link's page (the part after `#/...?`), whatever the store."""
    return parse_qs(urlsplit(link.split("then open ")[-1]).fragment.partition("?")[2])


VIEW = SweepView(("attention.temperature", "attention.lambda"), ("attention.lambda",), decoding(4, 1))


def test_the_view_groups_by_variant_shows_every_trial_and_puts_the_results_first():
    state = view_state("abc123", VIEW)
    results = ["metrics.`result/bleu_test_avg`", "metrics.`result/bleu_dev_best`", "metrics.`result/tau_p50_best`"]
    settings = ["params.`attention.temperature`", "params.`attention.lambda`"]
    assert state["selectedColumns"] == [*results, *settings, f"tags.`{SEED_TAG}`"]  # no variant: its group names it
    assert state["columnOrder"] == ["attributes.`Run Name`", *state["selectedColumns"], "duration"]
    # the UI widens only a column named in the saved order: the run names' too, wider than the rest
    widths = state["columnWidths"]
    assert set(widths) == set(state["columnOrder"]) - {"duration"}
    assert widths["attributes.`Run Name`"] > max(w for c, w in widths.items() if c != "attributes.`Run Name`")
    assert (state["orderByKey"], state["orderByAsc"]) == ("metrics.`result/bleu_dev_best`", False)
    assert state["groupBy"]["groupByKeys"] == [{"mode": "tag", "groupByData": VARIANT_NAME}]
    assert state["groupBy"]["aggregateFunction"] == "average" and state["useGroupedValuesInCharts"] is True
    assert state["groupsExpanded"] == {} and state["runsHiddenMode"] == "SHOW_ALL"
    assert state["searchFilter"] == "tags.`mlflow.parentRunId` = 'abc123'"  # this run's trials, not its parent


def test_the_comparisons_charts_open_on_the_answer_a_bar_per_variant_and_the_dev_curves_with_their_band():
    state = view_state("abc123", VIEW)
    section, results = state["compareRunSections"]
    # the UI sorts sections by name (localeCompare, case and punctuation aside): before `attention`, `bleu`, ...
    assert section["name"] == "Answer: BLEU, test beam 4, dev greedy" and section["name"].casefold() < "attention"
    # two cards a row: at 1280 pixels `result/bleu_dev_best` and `result/bleu_dev_final_beam` read whole
    assert section["columns"] == results["columns"] == 2 and results["name"] == "result"
    cards = {card["uuid"]: card for card in state["compareRunCharts"]}
    assert {card["metricSectionId"] for card in cards.values()} == {section["uuid"]}
    assert list(cards) == ["sweeper-answer-test", "sweeper-answer-curve", "sweeper-answer-dev"]  # a row: bars, band
    bars = [card["metricKey"] for card in cards.values() if card["type"] == "BAR"]
    assert bars == ["result/bleu_test_avg", "result/bleu_dev_best"]
    [curve] = [card for card in cards.values() if card["type"] == "LINE"]
    assert curve["metricKey"] == "bleu/dev" and curve["xAxisKey"] == "step"
    assert all(card["runsCountToCompare"] >= 20 for card in cards.values())  # not the UI's first 10 only
    # no parallel coordinates here: the UI draws grouped text values as nothing
    assert not [card for card in cards.values() if card["type"] == "PARALLEL"]


def test_the_ungrouped_view_draws_every_trial_a_dot_per_seed_and_every_one_in_the_parallel_coordinates():
    """MLflow's evaluation view compares the translations tables across runs only while runs are not grouped; its
    charts draw every trial."""
    grouped, flat = view_state("abc123", VIEW), translations_state("abc123", VIEW)
    assert flat["groupBy"] is None and flat["useGroupedValuesInCharts"] is False
    table = ("selectedColumns", "columnOrder", "columnWidths", "searchFilter", "orderByKey", "runsHiddenMode")
    assert {k: flat[k] for k in table} == {k: grouped[k] for k in table}
    cards = {card["type"]: card for card in flat["compareRunCharts"]}
    assert cards["SCATTER"]["xaxis"] == {"key": "view/variant", "type": "PARAM"}  # a category a variant
    assert cards["SCATTER"]["yaxis"] == {"key": "result/bleu_test_avg", "type": "METRIC"}
    parallel = cards["PARALLEL"]
    assert parallel["selectedParams"] == ["attention.temperature", "view/attention.lambda"]  # no seed; as text
    assert parallel["selectedMetrics"] == ["result/bleu_dev_best"] and parallel["showAllRuns"] is True
    [section] = flat["compareRunSections"]
    assert section["columns"] == 1 and section["name"].casefold() < "attention"


def test_an_axis_that_mixes_n_a_with_numbers_is_logged_as_text_too():
    """MLflow's parallel coordinates drop a run whose value is a number where most are text, or the reverse."""
    lam = SimpleNamespace(key="attention.lambda", kind="grid", values=[4, 8], condition={"t": ["sact"]})
    tau = SimpleNamespace(key="attention.tau", kind="uniform", values=[0.5, 2.0], condition={"t": ["fixed"]})
    score = SimpleNamespace(key="attention.score", kind="choice", values=["dot", "general"], condition={})
    temperature = SimpleNamespace(key="t", kind="grid", values=["none", "sact"], condition={})
    assert categorical_axes([lam, tau, score, temperature]) == ("attention.lambda",)
    assert view_params({"attention.lambda": 4.0}, ["attention.lambda"], "SACT λ4") == {
        "view/attention.lambda": "lambda=4",
        "view/variant": "SACT λ4",
    }
    assert view_params({}, ["attention.lambda"], None) == {"view/attention.lambda": "n/a"}


def test_a_sweeps_runs_take_the_colours_mlflow_gives_their_groups_unless_two_collide():
    """The colours MLflow 3.17.2's bundle computes for these groups (its getStableColorForRun, run with node on
    `tag.sweeper.variant_name.<name>`)."""
    expected = {"no temperature": "#e65b77", "learned λ4": "#facb66", "SACT λ4": "#445461", "sentinel": "#9e102c"}
    assert {name: group_colour(name) for name in expected} == expected
    names = {"general+none": "no temperature", "general+sact4": "SACT λ4"}
    assert group_colours(names) == {"general+none": "#e65b77", "general+sact4": "#445461"}
    assert group_colour("no temperature + sentinel") == "#445461"  # SACT λ4's: the runs keep tab10 instead
    assert group_colours({**names, "general+none+sentinel": "no temperature + sentinel"}) == {}


@pytest.mark.parametrize(
    "version, inside",
    [("3.17.2", True), ("3.17.0", True), ("3.18.0", False), ("3.16.9", False), ("4.0.0", False), (None, False)],
)
def test_tested_range(version, inside):
    assert in_tested_range(version) is inside
    assert in_tested_range("3.17.dev0") and not in_tested_range("nightly")


def served(link: str) -> tuple[int, str]:
    """The port an `mlflow ui` command names and the page its link opens there (after `http://127.0.0.1:<port>/`)."""
    port = recorded_port(link)
    assert port is not None and f" --port {port}   then open http://127.0.0.1:{port}/#/" in link, link
    return port, link.split(f"then open http://127.0.0.1:{port}/")[1]


def test_share_view_writes_the_views_as_experiment_tags_and_links_to_them(store, capsys):
    uri, client, experiment_id, parent = store
    link = share_view(client, uri, experiment_id, parent, VIEW)
    assert link.startswith(f"mlflow ui --backend-store-uri {uri} --port ")
    assert query(link) == {"workflowType": ["machine_learning"], "viewStateShareKey": [view_key(parent)]}
    tags = client.get_experiment(experiment_id).tags
    assert json.loads(tags[SHARE_TAG_PREFIX + view_key(parent)]) == view_state(parent, VIEW)
    flat = view_key(parent) + TRANSLATIONS_VIEW
    assert json.loads(tags[SHARE_TAG_PREFIX + flat]) == translations_state(parent, VIEW)
    port, _ = served(link)
    translations = translations_link(client, uri, parent, port)
    assert translations.startswith(link.split("#")[0])  # the same `mlflow ui` command, another page
    assert query(translations) == {
        "workflowType": ["machine_learning"],
        "viewStateShareKey": [flat],
        "compareRunsMode": ["ARTIFACT"],  # the evaluation view
    }
    pages = described_links(client, uri, parent)
    assert [pages.runs, pages.translations] == [served(page)[1] for page in (link, translations)]
    assert query(pages.trials) == {**query(translations), "compareRunsMode": ["CHART"]}
    assert "note:" not in capsys.readouterr().out


def test_the_mlflow_ui_command_names_a_free_port_and_its_link_opens_it():
    with socket.socket() as held:  # another UI on the first port the sweep would name
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        mlflow_view.UI_PORT, before = taken, mlflow_view.UI_PORT
        try:
            port = free_port()
        finally:
            mlflow_view.UI_PORT = before
    assert port != taken and taken < port < taken + mlflow_view.UI_PORTS
    link = mlflow_view.page("sqlite:////data/m.db", "/#/experiments/1/runs", 5123)
    assert served(link) == (5123, "#/experiments/1/runs") and recorded_port("http://mlflow:5000/#/x") is None


def test_a_server_outside_the_tested_range_gets_the_plain_link_said_once(store, capsys, monkeypatch):
    uri, client, experiment_id, parent = store
    monkeypatch.setattr(mlflow_view.mlflow, "__version__", "3.18.1")
    link = share_view(client, uri, experiment_id, parent, VIEW)
    assert query(link) == {
        "workflowType": ["machine_learning"],
        "orderByKey": ["metrics.`result/bleu_dev_best`"],
        "orderByAsc": ["false"],
    }
    assert capsys.readouterr().out.count("MLflow 3.18.1 is outside the range") == 1
    assert not [key for key in client.get_experiment(experiment_id).tags if key.startswith(SHARE_TAG_PREFIX)]
    assert described_links(client, uri, parent) == (served(link)[1], None, None)
    assert translations_link(client, uri, parent) is None  # no view of translations: no line says there is one


def test_a_password_in_the_store_uri_is_not_printed():
    link = mlflow_view.page("postgresql://me:hunter2@db/mlflow", "/#/experiments/1/runs")
    assert "hunter2" not in link and "postgresql://***@db/mlflow" in link
    assert "hunter2" not in mlflow_view.page("https://me:hunter2@mlflow.lab", "/#/x")
