"""The sweep's saved view in MLflow's UI (sweeper.tracking.mlflow_view): what the tag holds, the link, the version
fallback. What a browser makes of it: tests/e2e/test_mlflow_view.py."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

import pytest
from mlflow.tracking import MlflowClient

from sweeper.tracking import mlflow_view
from sweeper.tracking.metrics import VARIANT_NAME
from sweeper.tracking.mlflow_view import (
    SHARE_TAG_PREFIX,
    TRANSLATIONS_VIEW,
    described_links,
    in_tested_range,
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


def test_the_view_groups_by_variant_shows_every_trial_and_sorts_by_best_dev_bleu():
    state = view_state("abc123", ["attention.lambda", "attention.tau"])
    assert state["selectedColumns"] == [
        f"tags.`{VARIANT_NAME}`",
        "params.`attention.lambda`",
        "params.`attention.tau`",
        "params.`seed`",
        "metrics.`result/bleu_dev_best`",
        "metrics.`result/bleu_test_avg`",
        "metrics.`result/tau_p50_best`",
    ]
    assert state["columnOrder"] == ["attributes.`Run Name`", *state["selectedColumns"]]
    # the UI widens only a column named in the saved order: the run names' too, wider than the rest
    assert set(state["columnWidths"]) == set(state["columnOrder"])
    widths = state["columnWidths"]
    assert widths["attributes.`Run Name`"] > max(w for c, w in widths.items() if c != "attributes.`Run Name`")
    assert (state["orderByKey"], state["orderByAsc"]) == ("metrics.`result/bleu_dev_best`", False)
    assert state["groupBy"]["groupByKeys"] == [{"mode": "tag", "groupByData": VARIANT_NAME}]
    assert state["groupsExpanded"] == {} and state["runsHiddenMode"] == "SHOW_ALL"
    assert state["searchFilter"] == "tags.`mlflow.parentRunId` = 'abc123'"  # this run's trials, not its parent
    [parallel] = state["compareRunCharts"]  # the charts' own card; the UI adds one per metric beside it
    assert parallel["type"] == "PARALLEL" and parallel["selectedMetrics"] == ["result/bleu_dev_best"]
    assert parallel["selectedParams"] == ["attention.lambda", "attention.tau", "seed"]
    # in a section of its own, one card a row: its axes' labels uncut (the UI cuts a label wider than 0.8 of the
    # card over its axes), placed after `result` (the UI sorts sections by name)
    [section] = state["compareRunSections"]
    assert (section["name"], section["columns"]) == ("result by swept setting", 1)
    assert parallel["metricSectionId"] == section["uuid"] and "result" < section["name"] < "speed"


def test_the_translations_view_is_the_same_view_without_grouping():
    """MLflow's evaluation view compares the translations tables across runs only while runs are not grouped."""
    grouped, flat = view_state("abc123", ["attention.lambda"]), translations_state("abc123", ["attention.lambda"])
    assert flat["groupBy"] is None and grouped["groupBy"]
    assert {k: v for k, v in flat.items() if k != "groupBy"} == {k: v for k, v in grouped.items() if k != "groupBy"}


@pytest.mark.parametrize(
    "version, inside",
    [("3.17.2", True), ("3.17.0", True), ("3.18.0", False), ("3.16.9", False), ("4.0.0", False), (None, False)],
)
def test_tested_range(version, inside):
    assert in_tested_range(version) is inside
    assert in_tested_range("3.17.dev0") and not in_tested_range("nightly")


def test_share_view_writes_the_view_as_an_experiment_tag_and_links_to_it(store, capsys):
    uri, client, experiment_id, parent = store
    link = share_view(client, uri, experiment_id, parent, ["attention.lambda"])
    assert link.startswith(f"mlflow ui --backend-store-uri {uri}   then open http://127.0.0.1:5000/#/experiments/")
    assert query(link) == {"workflowType": ["machine_learning"], "viewStateShareKey": [view_key(parent)]}
    tags = client.get_experiment(experiment_id).tags
    assert json.loads(tags[SHARE_TAG_PREFIX + view_key(parent)]) == view_state(parent, ["attention.lambda"])
    flat = view_key(parent) + TRANSLATIONS_VIEW
    assert json.loads(tags[SHARE_TAG_PREFIX + flat]) == translations_state(parent, ["attention.lambda"])
    translations = translations_link(client, uri, parent)
    assert translations.startswith(link.split("#")[0])  # the same `mlflow ui` command, another page
    assert query(translations) == {
        "workflowType": ["machine_learning"],
        "viewStateShareKey": [flat],
        "compareRunsMode": ["ARTIFACT"],  # the evaluation view
    }
    described = [page.split("then open http://127.0.0.1:5000/")[1] for page in (link, translations)]
    assert list(described_links(client, uri, parent)) == described
    assert "note:" not in capsys.readouterr().out


def test_a_server_outside_the_tested_range_gets_the_plain_link_said_once(store, capsys, monkeypatch):
    uri, client, experiment_id, parent = store
    monkeypatch.setattr(mlflow_view.mlflow, "__version__", "3.18.1")
    link = share_view(client, uri, experiment_id, parent, ["attention.lambda"])
    assert query(link) == {
        "workflowType": ["machine_learning"],
        "orderByKey": ["metrics.`result/bleu_dev_best`"],
        "orderByAsc": ["false"],
    }
    assert capsys.readouterr().out.count("MLflow 3.18.1 is outside the range") == 1
    assert not [key for key in client.get_experiment(experiment_id).tags if key.startswith(SHARE_TAG_PREFIX)]
    assert described_links(client, uri, parent) == (link.split("then open http://127.0.0.1:5000/")[1], None)
    assert translations_link(client, uri, parent) is None  # no view of translations: no line says there is one


def test_a_password_in_the_store_uri_is_not_printed():
    link = mlflow_view.page("postgresql://me:hunter2@db/mlflow", "/#/experiments/1/runs")
    assert "hunter2" not in link and "postgresql://***@db/mlflow" in link
    assert "hunter2" not in mlflow_view.page("https://me:hunter2@mlflow.lab", "/#/x")
