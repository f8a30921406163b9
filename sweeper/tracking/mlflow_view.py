"""The one link that opens a sweep's runs in MLflow's UI as a researcher compares them (issue 59).

MLflow 3's UI opens an experiment on its GenAI overview unless the link asks for `workflowType=machine_learning`,
and it keeps the runs table's columns, grouping and sort per browser. A view shared in the UI ("Share") is written
as an experiment tag `mlflow.sharedViewState.<key>` that a link's `viewStateShareKey=<key>` restores in any browser.
Here that tag is written by the sweep itself: its trials grouped by variant and all shown, the columns that answer
the sweep's question (the variant, its swept settings, the seed, best dev BLEU, test BLEU, median tau), sorted by
the best dev BLEU (the last epoch's is not the trial's result). A second saved view, the same without grouping,
opens MLflow's evaluation view on the trials' translations, which it compares sentence by sentence and refuses to
show while runs are grouped: its link is printed beside the comparison's and in the parent run's description.

The tag's value is the UI's own state (the experiment page's search facets and UI state, read by
`useSharedExperimentViewState` in MLflow's JS bundle), not a public API: it is written only for a tracking server
within TESTED_MLFLOW, the range the browser test (`tests/e2e/test_mlflow_view.py`) checked; outside it the link is
the plain runs table, and the sweep says so once.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import quote

import mlflow
from mlflow.tracking import MlflowClient

from nmt_core.gates.credentials import redact
from sweeper.tracking.metrics import RESULT, SEED_PARAM, VARIANT_NAME

log = logging.getLogger("sweeper.tracking.mlflow_view")

TESTED_MLFLOW = ((3, 17), (3, 18))  # the UI versions whose saved-view format the browser test checked: >= 3.17, < 3.18
SHARE_TAG_PREFIX = "mlflow.sharedViewState."  # MLflow UI: EXPERIMENT_PAGE_VIEW_STATE_SHARE_TAG_PREFIX
SHARE_URL_KEY = "viewStateShareKey"  # MLflow UI: EXPERIMENT_PAGE_VIEW_STATE_SHARE_URL_PARAM_KEY

# the trials' end-of-run values the view shows (sweeper.tracking.metrics: logged once, at step 0): the best epoch's dev
# BLEU, the mean test BLEU over the test sets, the best epoch's median temperature
BEST_DEV, TEST_AVG, TAU_MEDIAN = RESULT + "bleu_dev_best", RESULT + "bleu_test_avg", RESULT + "tau_p50_best"


def column(kind: str, key: str) -> str:
    """A runs-table column as the UI names it (makeCanonicalSortKey): `params.`attention.tau``."""
    return f"{kind}.`{key}`"


# the runs table's column of run names, pinned left; the UI applies a saved width only to a column named in the saved
# order (applyColumnState over `columnOrder`), so it is named there too
RUN_NAME = "attributes.`Run Name`"
# pixels: `SACT λ4 + sentinel · seed 2` and its group's `Group: ...` uncut; the seed a narrow number, so that the
# columns up to the mean test BLEU fit a 1600-pixel-wide window
WIDTHS = {RUN_NAME: 250, column("params", SEED_PARAM): 90}
COLUMN_WIDTH = 170  # the others: `result/bleu_dev_best` uncut
# the charts' section of the parallel coordinates, one card a row: the UI cuts an axis label wider than 0.8 of the
# card's width over its axes to 15 characters (`attent...rature`), and a card of three a row is ~350 pixels wide. The
# UI sorts sections by name: this one follows the `result` section of the end-of-run bars.
SETTINGS_SECTION = {"uuid": "sweeper-settings", "name": RESULT.rstrip("/") + " by swept setting", "columns": 1}
TRANSLATIONS_VIEW = "-translations"  # the key of the saved view without grouping: view_key(...) + this
EVALUATION = "compareRunsMode=ARTIFACT"  # the runs page's evaluation view ("Artifact evaluation")


def view_key(parent_run_id: str) -> str:
    """One saved view per `sweeper run` (its parent run): a rerun of the same sweep name gets its own."""
    return f"sweep-{parent_run_id}"


def view_state(parent_run_id: str, axes: list[str]) -> dict[str, Any]:
    """The experiment page's state the link restores: this run's trials only (its parent hidden by the filter),
    grouped by variant name with every group open and every trial shown in the charts, the reading columns, best
    dev BLEU first. `axes`: the sweep's swept settings (params), shown after the variant."""
    columns = [column("tags", VARIANT_NAME)] + [column("params", axis) for axis in axes]
    columns += [column("params", SEED_PARAM)] + [column("metrics", m) for m in (BEST_DEV, TEST_AVG, TAU_MEDIAN)]
    return {
        # search facets (the URL's part of the state)
        "searchFilter": f"tags.`mlflow.parentRunId` = '{parent_run_id}'",
        "orderByKey": column("metrics", BEST_DEV),
        "orderByAsc": False,
        "startTime": "ALL",
        "lifecycleFilter": "Active",
        "datasetsFilter": [],
        "modelVersionFilter": "All Runs",
        # UI state
        "selectedColumns": columns,
        "columnOrder": [RUN_NAME, *columns],  # the variant first (the UI's own order: metrics, params, tags last)
        "columnWidths": {name: WIDTHS.get(name, COLUMN_WIDTH) for name in [RUN_NAME, *columns]},
        "groupBy": {"aggregateFunction": "average", "groupByKeys": [{"mode": "tag", "groupByData": VARIANT_NAME}]},
        "groupsExpanded": {},  # a group not named here is open
        "runsHiddenMode": "SHOW_ALL",  # the UI's default draws only the first 10 runs in its charts
        "runsHidden": [],
        "runsVisibilityMap": {},
        "useGroupedValuesInCharts": False,  # every trial's bar, in its variant's colour, not one per group
        "hideEmptyCharts": True,
        **charts(axes),
    }


def translations_state(parent_run_id: str, axes: list[str]) -> dict[str, Any]:
    """The same view without grouping: MLflow's evaluation view, which lines up a logged table's rows (a trial's
    translations/<set>.json) across the first 10 runs shown, is disabled while runs are grouped."""
    return {**view_state(parent_run_id, axes), "groupBy": None}


def charts(axes: list[str]) -> dict[str, Any]:
    """The charts view's own cards: parallel coordinates over the swept settings and the seed to best dev BLEU, in
    a section of its own (SETTINGS_SECTION). The UI adds a card for every metric no card shows (its
    updateChartAndSectionConfigs, a section per name group, sorted) when the state has cards; without any it draws
    the metrics only, and a parallel-coordinates card a researcher adds opens on no axes at all."""
    parallel = {
        "uuid": "sweeper-parallel",
        "type": "PARALLEL",
        "metricSectionId": SETTINGS_SECTION["uuid"],
        "runsCountToCompare": 10,
        "deleted": False,
        "isGenerated": False,
        "selectedParams": [*axes, SEED_PARAM],
        "selectedMetrics": [BEST_DEV],
        "showAllRuns": True,
    }
    section = {**SETTINGS_SECTION, "display": True, "isReordered": False, "deleted": False}
    return {"compareRunCharts": [parallel], "compareRunSections": [section]}


def server_version(client: MlflowClient, uri: str) -> str | None:
    """The MLflow version whose UI will show the link: a tracking server's own (GET /version), else this install's
    (`mlflow ui`, printed with the link, runs from it). None when the server does not say."""
    if not uri.startswith(("http://", "https://")):
        return mlflow.__version__
    from mlflow.utils.credentials import get_default_host_creds
    from mlflow.utils.rest_utils import http_request

    try:
        answer = http_request(get_default_host_creds(uri), "/version", "GET", max_retries=0, timeout=10)
    except Exception as err:  # noqa: BLE001 - an older server or a proxy that hides it: the plain link
        log.debug("MLflow /version: %s", err)
        return None
    return answer.text.strip() if answer.ok else None


def in_tested_range(version: str | None) -> bool:
    """Whether the UI of MLflow `version` restores the view as the browser test checked."""
    try:
        major_minor = tuple(int(part) for part in (version or "").split(".")[:2])
    except ValueError:
        return False
    return TESTED_MLFLOW[0] <= major_minor < TESTED_MLFLOW[1]


def page(uri: str, path: str) -> str:
    """A page of MLflow's UI: on the tracking server, or for a database the command that serves it and the page;
    a password in the URI shows as *** (the printed line goes to logs)."""
    if uri.startswith(("http://", "https://")):
        return redact(uri).rstrip("/") + path
    return f"mlflow ui --backend-store-uri {redact(uri)}   then open http://127.0.0.1:5000{path}"


def runs_page(experiment_id: str, query: str) -> str:
    """The runs table in the model-training view (MLflow 3 otherwise lands on its GenAI overview)."""
    return f"/#/experiments/{experiment_id}/runs?workflowType=machine_learning&{query}"


def plain_query() -> str:
    """The fallback's query: best dev BLEU first, without the saved view's grouping and columns."""
    return f"orderByKey={quote(column('metrics', BEST_DEV), safe='')}&orderByAsc=false"


def share_view(client: MlflowClient, uri: str, experiment_id: str, parent_run_id: str, axes: list[str]) -> str:
    """Write the sweep's saved views as experiment tags (the comparison; its translations, without grouping) and
    return the one link to the comparison (saved_pages gives both); on a server outside TESTED_MLFLOW (or one that
    does not say its version) the plain runs link, said once here."""
    version = server_version(client, uri)
    if not in_tested_range(version):
        low, high = (".".join(map(str, v)) for v in TESTED_MLFLOW)
        print(
            f"note: MLflow {version or '(version not given by the server)'} is outside the range whose UI the "
            f"sweep's saved view was tested with (>= {low}, < {high}): the link opens the plain runs table"
        )
        return page(uri, runs_page(experiment_id, plain_query()))
    key = view_key(parent_run_id)
    for saved, state in ((key, view_state), (key + TRANSLATIONS_VIEW, translations_state)):
        value = json.dumps(state(parent_run_id, axes), separators=(",", ":"))
        client.set_experiment_tag(experiment_id, SHARE_TAG_PREFIX + saved, value)
    return page(uri, runs_page(experiment_id, shared_query(key)))


def shared_query(key: str) -> str:
    return f"{SHARE_URL_KEY}={quote(key, safe='')}"


def saved_pages(client: MlflowClient, parent_run_id: str) -> tuple[str, str | None]:
    """The pages `share_view` linked to, as the experiment's tags say: the comparison (the saved view's, else the
    plain runs table) and the trials' translations side by side in the evaluation view (None without its view)."""
    experiment_id = client.get_run(parent_run_id).info.experiment_id
    saved = client.get_experiment(experiment_id).tags
    key = view_key(parent_run_id)
    runs = runs_page(experiment_id, shared_query(key) if SHARE_TAG_PREFIX + key in saved else plain_query())
    flat = key + TRANSLATIONS_VIEW
    translations = (
        runs_page(experiment_id, f"{shared_query(flat)}&{EVALUATION}") if SHARE_TAG_PREFIX + flat in saved else None
    )
    return runs, translations


def translations_link(client: MlflowClient, uri: str, parent_run_id: str) -> str | None:
    """The printed link to the trials' translations side by side (None where no saved view was written)."""
    translations = saved_pages(client, parent_run_id)[1]
    return page(uri, translations) if translations else None


def described_links(client: MlflowClient, uri: str, parent_run_id: str) -> tuple[str, str | None]:
    """The same pages for the parent run's description; on a database store the page's own part
    (`#/experiments/...`), which opens in whichever `mlflow ui` shows the description."""
    runs, translations = saved_pages(client, parent_run_id)
    if uri.startswith(("http://", "https://")):
        return page(uri, runs), translations and page(uri, translations)
    return runs.removeprefix("/"), translations and translations.removeprefix("/")
