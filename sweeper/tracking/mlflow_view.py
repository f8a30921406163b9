"""The one link that opens a sweep's runs in MLflow's UI as a researcher compares them (issues 59, 71).

MLflow 3's UI opens an experiment on its GenAI side unless the link asks for `workflowType=machine_learning` (every
link here does; nothing else, not the `mlflow.experimentKind` tag, decides it in 3.17), and it keeps the runs
table's columns, grouping and sort per browser. A view shared in the UI ("Share") is written as an experiment tag
`mlflow.sharedViewState.<key>` that a link's `viewStateShareKey=<key>` restores in any browser. Here that tag is
written by the sweep itself: its trials grouped by variant, every one shown, the results right after the names
(best dev BLEU sorts them: the last epoch's is not the trial's result), the charts grouped too and opening on the
answer (sweeper.tracking.mlflow_charts). A second saved view shows every trial on its own: MLflow's evaluation view
(the trials' translations side by side), which it refuses to show while runs are grouped, and charts of every
trial (a dot per seed, the parallel coordinates), which grouped values cannot draw: its links are printed beside
the comparison's and in the parent run's description.

The tag's value is the UI's own state (the experiment page's search facets and UI state, read by
`useSharedExperimentViewState` in MLflow's JS bundle), not a public API: it is written only for a tracking server
within TESTED_MLFLOW, the range the browser test (`tests/e2e/test_mlflow_view.py`) checked; outside it the link is
the plain runs table, and the sweep says so once. On a database store the link is the `mlflow ui` command, on a
free port it names, and the page there.
"""

from __future__ import annotations

import json
import logging
import re
import socket
from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import quote

import mlflow
from mlflow.tracking import MlflowClient

from nmt_core.gates.credentials import redact
from sweeper.tracking.metrics import PARETO_TAG, RESULT, SEED_TAG, VARIANT_NAME
from sweeper.tracking.mlflow_charts import BEST_DEV, TEST_AVG, answer_charts, trial_charts

log = logging.getLogger("sweeper.tracking.mlflow_view")

TESTED_MLFLOW = ((3, 17), (3, 18))  # the UI versions whose saved-view format the browser test checked: >= 3.17, < 3.18
SHARE_TAG_PREFIX = "mlflow.sharedViewState."  # MLflow UI: EXPERIMENT_PAGE_VIEW_STATE_SHARE_TAG_PREFIX
SHARE_URL_KEY = "viewStateShareKey"  # MLflow UI: EXPERIMENT_PAGE_VIEW_STATE_SHARE_URL_PARAM_KEY
TAU_MEDIAN = RESULT + "tau_p50_best"  # the best epoch's median temperature


def column(kind: str, key: str) -> str:
    """A runs-table column as the UI names it (makeCanonicalSortKey): `params.`attention.tau``."""
    return f"{kind}.`{key}`"


# the runs table's column of run names, pinned left; the UI applies a saved width only to a column named in the saved
# order (applyColumnState over `columnOrder`), so it is named there too
RUN_NAME = "attributes.`Run Name`"
DURATION = "duration"  # the Duration column's id (AG Grid's field: it has no canonical key); always shown, movable
SEED = column("tags", SEED_TAG)
# pixels: `SACT λ4 + sentinel · seed 2` and its group's `Group: ...` uncut; the result columns' keys uncut
# (`result/bleu_test_avg`), the seed a narrow number: at 1280 pixels the three results show beside the names
WIDTHS = {RUN_NAME: 230, SEED: 70}
COLUMN_WIDTH = 150
TRANSLATIONS_VIEW = "-translations"  # the key of the saved view without grouping: view_key(...) + this
EVALUATION, CHARTS = "compareRunsMode=ARTIFACT", "compareRunsMode=CHART"  # the runs page's evaluation view, charts
UI_PORT = 5000  # `mlflow ui`'s own default, where it is free
UI_PORTS = 100  # ports tried from UI_PORT for one free on 127.0.0.1


@dataclass(frozen=True)
class SweepView:
    """What the saved views show of a sweep, fixed when it starts: the settings it sweeps (params), those of them
    its parallel coordinates read as text (mlflow_charts.categorical_axes), and how its BLEU decodes, which the
    answer section's title says (the card titles are the metric keys)."""

    axes: tuple[str, ...] = ()
    categorical: tuple[str, ...] = ()
    decoding: str = ""
    pareto: bool = False  # several objectives: the summary tags each trial with its row's place (PARETO_TAG)


def view_key(parent_run_id: str) -> str:
    """One saved view per `sweeper run` (its parent run): a rerun of the same sweep name gets its own."""
    return f"sweep-{parent_run_id}"


def table_state(parent_run_id: str, axes: tuple[str, ...], pareto: bool = False) -> dict[str, Any]:
    """The runs table: this run's trials only (its parent hidden by the filter), every one shown, best dev BLEU
    first; the results right after the names (test BLEU, best dev BLEU, median tau), then the swept settings and
    the seed (a tag: empty in a group's row, where MLflow would average a param), Duration last. No variant column:
    a group's row names it. MLflow shows every value as logged (15 digits) and has no number format to set."""
    columns = [column("metrics", m) for m in (TEST_AVG, BEST_DEV, TAU_MEDIAN)]
    columns = [column("tags", PARETO_TAG)] * pareto + columns  # the front, first where there is one
    columns += [column("params", axis) for axis in axes] + [SEED]
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
        "columnOrder": [RUN_NAME, *columns, DURATION],
        "columnWidths": {name: WIDTHS.get(name, COLUMN_WIDTH) for name in [RUN_NAME, *columns]},
        "groupsExpanded": {},  # a group not named here is open
        "runsHiddenMode": "SHOW_ALL",  # the UI's default draws only the first 10 runs in its charts
        "runsHidden": [],
        "runsVisibilityMap": {},
        "hideEmptyCharts": True,
    }


def view_state(parent_run_id: str, view: SweepView) -> dict[str, Any]:
    """The comparison the link opens: the table grouped by variant name, every group open, a group's row the mean
    over its seeds; the charts grouped the same way, the answer's section first (mlflow_charts.answer_charts)."""
    return {
        **table_state(parent_run_id, view.axes, view.pareto),
        "groupBy": {"aggregateFunction": "average", "groupByKeys": [{"mode": "tag", "groupByData": VARIANT_NAME}]},
        "useGroupedValuesInCharts": True,
        **answer_charts(view.decoding),
    }


def translations_state(parent_run_id: str, view: SweepView) -> dict[str, Any]:
    """Every trial on its own: MLflow's evaluation view, which lines up a logged table's rows (a trial's
    translations/<set>.json) across the first 10 runs shown, is disabled while runs are grouped; its charts draw a
    dot per seed and the parallel coordinates, a line a trial, which grouped values cannot draw."""
    return {
        **table_state(parent_run_id, view.axes, view.pareto),
        "groupBy": None,
        "useGroupedValuesInCharts": False,
        **trial_charts(list(view.axes), view.categorical),
    }


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


def free_port() -> int:
    """A port on 127.0.0.1 nothing listens on, from `mlflow ui`'s default up (another UI, a server or a notebook
    often holds 5000): the printed command names it and its link opens it."""
    for port in range(UI_PORT, UI_PORT + UI_PORTS):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    return UI_PORT


def recorded_port(link: str | None) -> int | None:
    """The port a recorded `mlflow ui` command names (None: a tracking server's URL, or a sweep before ports)."""
    found = re.search(r" --port (\d+) ", link or "")
    return int(found.group(1)) if found else None


def page(uri: str, path: str, port: int | None = None) -> str:
    """A page of MLflow's UI: on the tracking server, or for a database the command that serves it on `port` (a
    free one when not given) and the page there; a password in the URI shows as *** (the printed line goes to
    logs)."""
    if uri.startswith(("http://", "https://")):
        return redact(uri).rstrip("/") + path
    port = port or free_port()
    return f"mlflow ui --backend-store-uri {redact(uri)} --port {port}   then open http://127.0.0.1:{port}{path}"


ROUTE = "workflowType=machine_learning"  # MLflow 3.17 opens a page without it on its GenAI side (Traces, Evaluations)


def runs_page(experiment_id: str, query: str) -> str:
    """The runs table in the model-training view (MLflow 3 otherwise lands on its GenAI overview)."""
    return f"/#/experiments/{experiment_id}/runs?{ROUTE}&{query}"


def artifact_page(experiment_id: str, run_id: str, path: str) -> str:
    """A run's artifact, previewed by MLflow's artifact view (an .html inline, a .md rendered), in the model-training
    view."""
    return f"/#/experiments/{experiment_id}/runs/{run_id}/artifacts/{path}?{ROUTE}"


def plain_query() -> str:
    """The fallback's query: best dev BLEU first, without the saved view's grouping and columns."""
    return f"orderByKey={quote(column('metrics', BEST_DEV), safe='')}&orderByAsc=false"


def share_view(client: MlflowClient, uri: str, experiment_id: str, parent_run_id: str, view: SweepView) -> str:
    """Write the sweep's saved views as experiment tags (the comparison; every trial on its own) and return the one
    link to the comparison (saved_pages gives the others); on a server outside TESTED_MLFLOW (or one that does not
    say its version) the plain runs link, said once here."""
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
        value = json.dumps(state(parent_run_id, view), separators=(",", ":"))
        client.set_experiment_tag(experiment_id, SHARE_TAG_PREFIX + saved, value)
    return page(uri, runs_page(experiment_id, shared_query(key)))


def shared_query(key: str) -> str:
    return f"{SHARE_URL_KEY}={quote(key, safe='')}"


class Pages(NamedTuple):
    """The pages `share_view` linked to: the comparison (the saved view's, else the plain runs table), and without
    its view none of the others: every trial's translations side by side (the evaluation view), every trial's
    charts (a dot per seed, the parallel coordinates)."""

    runs: str
    translations: str | None = None
    trials: str | None = None


def saved_pages(client: MlflowClient, parent_run_id: str) -> Pages:
    """The pages of the sweep's saved views, as the experiment's tags say."""
    experiment_id = client.get_run(parent_run_id).info.experiment_id
    saved = client.get_experiment(experiment_id).tags
    key = view_key(parent_run_id)
    runs = runs_page(experiment_id, shared_query(key) if SHARE_TAG_PREFIX + key in saved else plain_query())
    flat = key + TRANSLATIONS_VIEW
    if SHARE_TAG_PREFIX + flat not in saved:
        return Pages(runs)
    views = (runs_page(experiment_id, f"{shared_query(flat)}&{mode}") for mode in (EVALUATION, CHARTS))
    return Pages(runs, *views)


def translations_link(client: MlflowClient, uri: str, parent_run_id: str, port: int | None = None) -> str | None:
    """The printed link to the trials' translations side by side (None where no saved view was written), served
    on `port` for a database (the comparison's printed command's)."""
    translations = saved_pages(client, parent_run_id).translations
    return page(uri, translations, port) if translations else None


def described(uri: str, path: str | None) -> str | None:
    """A page as the parent run's description links it: on a database store the page's own part (`#/experiments/
    ...`), which opens in whichever `mlflow ui` shows the description."""
    if path is None:
        return None
    return page(uri, path) if uri.startswith(("http://", "https://")) else path.removeprefix("/")


def described_links(client: MlflowClient, uri: str, parent_run_id: str) -> Pages:
    """The saved views' pages for the parent run's description."""
    return Pages(*(described(uri, path) for path in saved_pages(client, parent_run_id)))
