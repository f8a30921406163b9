"""The sweep's saved view in MLflow's UI (sweeper.mlflow_view): what the tag holds, the link, the version fallback.
What a browser makes of it: tests/e2e/test_mlflow_view.py."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

import pytest
from mlflow.tracking import MlflowClient

from sweeper import mlflow_view
from sweeper.metrics import VARIANT_NAME
from sweeper.mlflow_view import (
    SHARE_TAG_PREFIX,
    described_link,
    in_tested_range,
    share_view,
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
    assert [s["name"] for s in state["compareRunSections"]] == ["result"]
    assert parallel["metricSectionId"] == state["compareRunSections"][0]["uuid"]


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
    written = client.get_experiment(experiment_id).tags[SHARE_TAG_PREFIX + view_key(parent)]
    assert json.loads(written) == view_state(parent, ["attention.lambda"])
    assert described_link(client, uri, parent) == link.split("then open http://127.0.0.1:5000/")[1]
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
    assert described_link(client, uri, parent) == link.split("then open http://127.0.0.1:5000/")[1]


def test_a_password_in_the_store_uri_is_not_printed():
    link = mlflow_view.page("postgresql://me:hunter2@db/mlflow", "/#/experiments/1/runs")
    assert "hunter2" not in link and "postgresql://***@db/mlflow" in link
    assert "hunter2" not in mlflow_view.page("https://me:hunter2@mlflow.lab", "/#/x")
