"""MLflow: one experiment per sweep name, a parent run per `sweeper run`, a child run per trial.

The driver is the only writer, through `MlflowTrackingCallback` (a Tune callback): SQLite stays safe,
and a retried or resumed trial finds its own run by its trial id and skips epochs it already logged.
A tracking server that drops out mid-sweep costs nothing: what it misses waits in storage and is replayed.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import queue
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pyarrow.fs as pafs
from mlflow.entities import (
    Dataset,
    DatasetInput,
    InputTag,
    LoggedModel,
    LoggedModelOutput,
    LoggedModelStatus,
    Metric,
    Param,
    RunTag,
)
from mlflow.environment_variables import MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT
from mlflow.models import Model
from mlflow.models.model import MLMODEL_FILE_NAME as MLMODEL_FILE
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT, MLFLOW_MODEL_VERSIONS
from ray.tune import Callback

from nmt_core.gates import artifact_locations
from nmt_core.gates.gate import ConfigError
from nmt_core.gates.tracking_store import mlflow_store
from nmt_core.gates.yaml_input import load_yaml_file
from sweeper.space.spec import MODELS_BEFORE_POLICY, describe_trial
from sweeper.storage.store import open_storage
from sweeper.tracking.backlog import Backlog, Write
from sweeper.tracking.metrics import (
    ARTIFACTS,
    AT_END,
    EPOCH_ENDED,
    ERROR_FILE,
    EXPLOITS,
    FINAL,
    FLAT_NAMES,
    GROUPED_NAMES,
    MODEL,
    NOT_APPLICABLE,
    NOTE,
    PARENT,
    PBT_EVENT,
    PBT_EVENTS,
    PER_EPOCH,
    RESTORES,
    ROLE,
    RUN_COLOUR,
    SEED_PARAM,
    SEED_TAG,
    SIGNATURE_TAGS,
    TRANSLATIONS,
    TRIAL_ID,
    VARIANT,
    VARIANT_NAME,
    colour,
    history_name,
    mlflow_metrics,
)
from sweeper.tracking.mlflow_charts import view_params
from sweeper.tracking.mlflow_tables import mark_tables, tables_in
from sweeper.tracking.mlflow_view import page, runs_page
from sweeper.tracking.names import TrialNames, model_name, run_name
from sweeper.tracking.provenance import DATASET, as_tags, code_version, package_versions, source_tags
from sweeper.tracking.sqlite_urls import resolve_uri  # noqa: F401 (where the sweeper's modules import it)

log = logging.getLogger("sweeper.tracking.runs")
T = TypeVar("T")


def runs_link(uri: str, experiment_id: str, metric: str, mode: str) -> str:
    """The runs table in the Model training view, best trial first: MLflow 3's UI otherwise opens an
    experiment on its GenAI overview page, where child runs are labelled "Evaluations"."""
    query = f"orderByKey=metrics.%60{metric}%60&orderByAsc={'true' if mode == 'min' else 'false'}"
    return page(uri, runs_page(experiment_id, query))


RETRY_ATTEMPTS = 4  # with waits of 1, 2, 4 s between them
GRANT_ENDPOINT = "/api/3.0/mlflow/users/permissions/grant"  # MLflow's basic-auth app (mlflow.server.auth.routes)
RECONNECT_S = 10.0  # while writes wait in the backlog, how often the driver asks the server again


def _retry(
    call: Callable[[], T], what: str, attempts: int | None = None, failed: Callable[[], None] | None = None
) -> T:
    """`failed` counts every attempt that failed (the tracking load figures)."""
    attempts = attempts or RETRY_ATTEMPTS
    for attempt in range(attempts):
        try:
            return call()
        except Exception as err:  # the server's or the network's: retry, the trial must not die of it
            if failed is not None:
                failed()
            if attempt == attempts - 1:
                raise
            wait = 2**attempt
            log.warning("MLflow: %s failed (%s); retrying in %ss", what, err, wait)
            time.sleep(wait)
    raise AssertionError("unreachable")


class SweepTracker:
    """Thin layer over MlflowClient with the project's names and the retry policy."""

    def __init__(self, uri: str, experiment: str, client: MlflowClient | None = None, user: str | None = None):
        # MLflow's client prints its own run and experiment links (`🏃 View run ...`), which open them on the UI's
        # GenAI side; the sweep prints its links, in the model-training view (sweeper.tracking.mlflow_view)
        os.environ.setdefault(MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT.name, "true")
        self.uri, self.experiment, self.user = uri, experiment, user  # user: a submitted sweep's submitter
        self.client = client or MlflowClient(uri)
        self.experiment_id = _retry(self._get_or_create, "get or create experiment")
        self._check_artifact_root()

    def _check_artifact_root(self) -> None:
        """Before any run or artifact: the experiment's artifact root is one this program writes to with the user's
        credentials (nmt_core/gates/artifact_locations.py). Whoever creates an experiment of the sweep's name first
        sets its root; a root on another host is refused in one line, not handed the password with each upload."""
        root = _retry(lambda: self.client.get_experiment(self.experiment_id), "get experiment").artifact_location
        artifact_locations.check_location(root, self.uri)

    def _get_or_create(self) -> str:
        """The experiment's id, created if it does not exist. Each attempt asks by name first: a create whose answer
        was lost (a server slower than the client's timeout) may have made it, and creating it again is refused."""
        found = self.client.get_experiment_by_name(self.experiment)
        return found.experiment_id if found else self.client.create_experiment(self.experiment)

    def start_sweep(self, space_yaml: str, plan: dict[str, Any]) -> str:
        about = (
            f"Sweep `{self.experiment}` ({plan.get('source', '?')}): {plan.get('trials', '?')} trials, "
            f"{plan.get('algorithm', '?')} search, {plan.get('scheduler', '?')} scheduling. The parent run (role "
            "`sweep`) carries the summary and the best trial's metrics; each child run is one trial."
        )
        self.client.set_experiment_tag(self.experiment_id, NOTE, about)
        run = self.client.create_run(
            self.experiment_id,
            run_name=f"{self.experiment}-sweep",
            tags={
                ROLE: "sweep",
                **self.source,
                **{f"sweeper.plan.{k}": str(v) for k, v in plan.items()},
                "sweeper.code": self.code,
                "sweeper.versions": package_versions(),
                NOTE: about + "\n\nThe summary appears here when the sweep ends.",
            },
        )
        self.client.log_text(run.info.run_id, space_yaml, "space.yaml")
        self.client.log_batch(run.info.run_id, params=[Param(f"plan.{k}", str(v)[:500]) for k, v in plan.items()])
        return run.info.run_id

    @functools.cached_property
    def code(self) -> str:
        """The driver's code version (git asked once: 0.1 s)."""
        return code_version()

    @functools.cached_property
    def source(self) -> dict[str, str]:
        """MLflow's Source and User columns of the sweep's runs: the driver's code, whoever runs it."""
        return source_tags(self.code, self.user)

    def log_datasets(self, run_id: str, inputs: list[dict[str, Any]]) -> None:
        """The trial's corpus splits (provenance.corpus_datasets) as its run's inputs, in their order, each with its
        context (train, dev, test) and digest: MLflow's Dataset column. The store keeps one input of a dataset's
        name and digest: a replayed write adds none."""
        datasets = [
            DatasetInput(Dataset(**one["dataset"]), tags=[InputTag(MLFLOW_DATASET_CONTEXT, one["context"])])
            for one in inputs
        ]
        self.client.log_inputs(run_id, datasets=datasets)

    def find_trial_run(self, parent_id: str, trial_id: str) -> str | None:
        runs = self.client.search_runs(
            [self.experiment_id],
            max_results=1,
            filter_string=f"tags.`{PARENT}` = '{parent_id}' and tags.`{TRIAL_ID}` = '{trial_id}'",
        )
        return runs[0].info.run_id if runs else None

    def trial_run(
        self,
        parent_id: str,
        trial_id: str,
        variant: str,
        params: dict[str, Any],
        look_first: bool = True,
        run_colour: str | None = None,
        name: str | None = None,
    ) -> tuple[str, bool]:
        """The trial's run and whether it was created now: found by its trial id when it may exist (retry,
        resume: `look_first`), else created, named by its variant's `name` (sweeper.tracking.names; without one, a sweep
        begun before names, by its label, untagged) and seed and coloured by its variant. Its params are logged either
        way (the same values again are a no-op): a run found may be one whose creation's answer was lost before its
        params went in."""
        run_id = self.find_trial_run(parent_id, trial_id) if look_first else None
        created = run_id is None
        if created:
            note = (
                f"Trial {trial_id} of sweep `{self.experiment}`: variant `{variant}`, seed "
                f"{params.get('train.seed')}. Params are the settings active for this variant, and every axis the "
                f"sweep searches (`{NOT_APPLICABLE}` where this variant does not use it). Metrics: per epoch by "
                "what they measure (bleu/, loss/, temperature/, attention/, speed/), the end's values at step 0 "
                "(result/). Artifacts: translations/*.tsv (source, reference, hypothesis), traces/, plots/ (if "
                "drawn: tracking.plots). Its model (best-dev weights, an MLflow pyfunc), if logged, is the "
                "LoggedModel named after its variant in the Models tab: `models:/<model id>`, or "
                "`nmt translate --model runs:/<run id>/model`."
            )
            tags = {PARENT: parent_id, ROLE: "trial", TRIAL_ID: trial_id, VARIANT: variant, NOTE: note, **self.source}
            seed = params.get(SEED_PARAM, params.get("train.seed"))  # a param before issue 71, a tag since
            tags[SEED_TAG] = str(seed)
            if name:
                tags[VARIANT_NAME] = name
            if run_colour:
                tags[RUN_COLOUR] = run_colour
            shown = run_name(name, variant, seed) if seed is not None else f"{variant}-{trial_id}"
            run = self.client.create_run(self.experiment_id, run_name=shown, tags=tags)
            run_id = run.info.run_id
        self.client.log_batch(run_id, params=[Param(k, str(v)) for k, v in sorted(params.items())])
        return run_id, created

    def grant(self, user: str, registered_model: bool = False) -> str | None:
        """MANAGE on the sweep's experiment (or its registered model) for `user`, the MLflow user who submitted the
        sweep when the driver runs under the cluster's own account: MLflow's basic auth then lets that user, and
        nobody else without a grant, read and manage it. None when done or not needed (the driver is that user, a
        store without auth); else why it failed, in one line. The auth app's REST call, as its client makes it
        (importing that client imports MLflow's whole server)."""
        from mlflow.exceptions import MlflowException
        from mlflow.utils.credentials import get_default_host_creds
        from mlflow.utils.rest_utils import http_request, verify_rest_response

        if not self.uri.startswith(("http://", "https://")) or user == os.environ.get("MLFLOW_TRACKING_USERNAME"):
            return None
        kind, resource = ("experiment", self.experiment_id)
        if registered_model:
            kind, resource = "registered_model", self.experiment
        grant = {"username": user, "resource_type": kind, "resource_id": resource, "permission": "MANAGE"}
        try:
            response = http_request(get_default_host_creds(self.uri), GRANT_ENDPOINT, "POST", json=grant)
            verify_rest_response(response, GRANT_ENDPOINT)
        except MlflowException as err:
            if err.get_http_status_code() == 404 and "user" not in str(err).lower():  # a server without basic auth
                return None
            return str(err).splitlines()[0][:200]
        return None

    def register_best(self, run_id: str, description: str, owner: str | None = None) -> str:
        """Register a trial's model under the sweep's name, alias `best`; returns the version. `owner`: the user
        granted the registered model it creates (`grant`)."""
        from mlflow.exceptions import MlflowException

        try:
            self.client.get_registered_model(self.experiment)
        except MlflowException:
            self.client.create_registered_model(self.experiment, description=f"Best models of sweep {self.experiment}")
            if owner and (why := self.grant(owner, registered_model=True)):
                log.warning("MLflow: %s was not granted the registered model %s: %s", owner, self.experiment, why)
        model = self.trial_model(run_id)
        if model is None:
            raise LookupError(f"run {run_id} has no LoggedModel")
        with mlflow_store(self.uri):  # a SQL registry resolves a models:/<model id> source through it
            version = self.client.create_model_version(
                self.experiment, f"models:/{model.model_id}", run_id, description=description, model_id=model.model_id
            )
        # the Models tab's "Registered models" column reads this tag, which `mlflow.register_model` sets
        versions = json.loads(model.tags.get(MLFLOW_MODEL_VERSIONS, "[]"))
        versions.append({"name": self.experiment, "version": version.version})
        self.client.set_logged_model_tags(model.model_id, {MLFLOW_MODEL_VERSIONS: json.dumps(versions)})
        self.client.set_registered_model_alias(self.experiment, "best", version.version)
        return version.version

    def trial_model(self, run_id: str) -> LoggedModel | None:
        """The trial run's LoggedModel, if it was created: a trial run has one, named after its variant (`model`
        in a sweep recorded before names), so it is found by its run, whatever its name."""
        found = self.client.search_logged_models(
            [self.experiment_id], filter_string=f"source_run_id = '{run_id}'", max_results=1
        )
        return found[0] if found else None

    def log_model(
        self,
        run_id: str,
        folder: Path,
        params: dict[str, Any],
        tags: dict[str, str],
        metrics: dict[str, float],
        step: int,
        timestamp: int,
        look_first: bool = True,
        name: str = MODEL,
    ) -> str:
        """A trial's saved pyfunc folder as an MLflow 3 LoggedModel of its run named `name` (sweeper.tracking.names'
        model_name of its variant), as `mlflow.pyfunc.log_model` makes one (output of the run at `step`, params,
        metrics linked, READY), written here by the driver.

        Idempotent for a replayed write (`look_first`): a READY model is kept, one left PENDING is uploaded again.
        """
        model = self.trial_model(run_id) if look_first else None
        if model is not None and model.status == LoggedModelStatus.READY:
            return model.model_id
        if model is None:
            model = self.client.create_logged_model(
                self.experiment_id,
                name=name,
                source_run_id=run_id,
                tags=tags,
                params={k: str(v)[:500] for k, v in params.items()},
            )
        self.client.log_model_artifacts(model.model_id, str(folder))
        with tempfile.TemporaryDirectory() as tmp:  # MLmodel names the model and its run, as log_model's does
            # the folder this process saved: read as a file, not through MLflow's artifact repositories (the gate
            # refuses local folders there, which only a tracking server would name)
            mlmodel = Model.from_dict(load_yaml_file(str(Path(folder) / MLMODEL_FILE), ConfigError))
            mlmodel.model_id = mlmodel.model_uuid = model.model_id
            mlmodel.run_id, mlmodel.artifact_path = run_id, model.artifact_location
            mlmodel.save(Path(tmp) / "MLmodel")
            self.client.log_model_artifact(model.model_id, str(Path(tmp) / "MLmodel"))
        self.client.log_outputs(run_id, [LoggedModelOutput(model.model_id, step)])
        self.client.log_batch(
            run_id, metrics=[Metric(k, float(v), timestamp, step, model_id=model.model_id) for k, v in metrics.items()]
        )
        self.client.finalize_logged_model(model.model_id, LoggedModelStatus.READY)
        return model.model_id

    def logged_steps(self, run_id: str) -> int:
        """The last epoch already logged (0 if none): a resumed trial does not log it twice. Dev BLEU is logged
        every epoch, as `bleu/dev` or (a sweep started before the grouped names) `bleu_dev`."""
        logged = self.client.get_run(run_id).data.metrics
        name = history_name("bleu_dev", logged)
        history = self.client.get_metric_history(run_id, name) if name else []
        return max((m.step for m in history), default=0)

    def set_tags(self, run_id: str, tags: dict[str, str]) -> None:
        self.client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])

    def log_metrics(
        self,
        run_id: str,
        metrics: dict[str, float],
        step: int,
        timestamp: int | None = None,
        tags: dict[str, str] | None = None,
    ) -> None:
        """One request for a report's metrics and tags. A fixed timestamp makes a replayed write the same row:
        the store keeps it once."""
        now = timestamp or int(time.time() * 1000)
        self.client.log_batch(
            run_id,
            metrics=[Metric(k, float(v), now, step) for k, v in metrics.items()],
            tags=[RunTag(k, v) for k, v in (tags or {}).items()],
        )


def ended_at(result: dict[str, Any]) -> float | None:
    """When the trial ended the epoch of this result (its clock: one host's, or NTP's across nodes)."""
    try:
        return float(result[EPOCH_ENDED])
    except (KeyError, TypeError, ValueError):
        return None


def dataset_inputs(write: Write) -> list[dict[str, Any]]:
    """An input write's dataset inputs: the corpus's splits; a write queued before splits (a backlog that
    `sweeper resume` replays) holds the whole corpus, logged as it was then, in the context train."""
    return write.get("datasets") or [{"context": "train", "dataset": write["dataset"]}]


class MlflowTrackingCallback(Callback):
    """Mirrors Tune's trials into MLflow child runs of one parent run.

    Every write goes through `_write`, which hands it to one sender thread, so Tune's scheduling loop never
    waits on the server: the sender sends in order while the server answers, else queues in the sweep's storage
    (`Backlog`) and replays in order when it answers again, so a run is FINISHED only once all of its epochs,
    tags and artifacts are in.
    """

    def __init__(
        self,
        uri: str,
        experiment: str,
        parent_id: str,
        base: dict[str, Any],
        storage_uri: str | None = None,
        new_sweep: bool = False,
        models: str = MODELS_BEFORE_POLICY,
        axes: tuple[str, ...] = (),
        user: str | None = None,
        shared: dict[str, str] | None = None,
        colours: dict[str, str] | None = None,
        categorical: tuple[str, ...] = (),
    ):
        self.uri, self.experiment, self.parent_id = uri, experiment, parent_id
        self.shared = shared or {}  # the title words every planned variant shares: run names leave them out
        self.names = GROUPED_NAMES  # the MLflow names this sweep's runs hold (sweeper.tracking.metrics), kept on resume
        self.axes = axes  # the keys the sweep's search varies: a param on every trial, `n/a` where one does not apply
        self._colours: dict[str, str] = dict(colours or {})  # variant label -> its colour: planned, else as met
        self.categorical = categorical  # swept axes also logged as text for the charts (mlflow_charts.view_params)
        self.user = user  # MLflow's User of the trial runs: a submitted sweep's submitter (else whoever runs it)
        self.models = models  # tracking.models: only `all` logs each trial's model as it completes
        # the parent run was created by this driver: a trial's run or model not tried yet cannot exist, so it is
        # created without a search first; False once pickled for `sweeper resume`
        self.new_sweep = new_sweep
        self._tried: set[tuple[str, str]] = set()  # (trial id, "open" | "model") sent at least once
        self.base = base  # the sweep's base trial config: a trial's params are the whole config
        self.storage_uri = storage_uri  # the sweep's folder in storage: the backlog, the trials' artifacts
        self._tracker: SweepTracker | None = None
        self._backlog: Backlog | None = None
        self._last_try = 0.0
        self._runs: dict[str, str] = {}  # trial id -> run id
        self._server_step: dict[str, int] = {}  # trial id -> the last epoch the server holds
        self._last_step: dict[str, int] = {}  # trial id -> the last epoch sent or queued
        self._exploits: dict[str, list[dict[str, Any]]] = {}  # trial id -> its PBT exploits, in order
        self._final: dict[str, Write] = {}  # trial id -> its final metrics' write (linked to its model too)
        self._outbox: queue.Queue[Write] | None = None  # writes the sender thread has not taken yet
        self.outcomes: dict[str, str] = {}  # trial id -> "complete" | "error"; kept in Tune's experiment state
        self.delays: list[float] = []  # seconds from each epoch's end in its trial to MLflow holding it
        self.failed_requests = 0  # tracking requests that failed (each retry counts)

    models = MODELS_BEFORE_POLICY  # for a callback restored from a sweep started before tracking.models
    names = FLAT_NAMES  # for one restored from a sweep started before the grouped names: its runs keep Tune's keys
    axes: tuple[str, ...] = ()  # ... before every axis was logged on every trial
    user: str | None = None  # ... before the User column
    shared: dict[str, str] | None = None  # ... before variant names: its new runs are named by label, as its others
    categorical: tuple[str, ...] | None = None  # ... before issue 71: its new runs log a seed param, as its others

    def __getstate__(self) -> dict[str, Any]:  # pickled into Tune's experiment state for `sweeper resume`
        state = self.__dict__.copy()
        state.update(
            _tracker=None,
            _backlog=None,
            _last_try=0.0,
            _runs={},
            _server_step={},
            _last_step={},
            outcomes={},
            _exploits={},
            _final={},
            _outbox=None,
            new_sweep=False,
            _tried=set(),
            delays=[],
            failed_requests=0,
        )
        return state

    @property
    def tracker(self) -> SweepTracker:
        if self._tracker is None:
            self._tracker = SweepTracker(self.uri, self.experiment, user=self.user)
        return self._tracker

    @property
    def backlog(self) -> Backlog:
        if self._backlog is None:  # a resumed sweep's driver finds what the last one could not send
            self._backlog = Backlog(open_storage(self.storage_uri, "--storage") if self.storage_uri else None)
        return self._backlog

    def _run_id(self, trial_id: str) -> str:
        """The trial's run, opened by this driver or (before a resume) by an earlier one."""
        if trial_id not in self._runs:
            run_id = self.tracker.find_trial_run(self.parent_id, trial_id)
            if run_id is None:
                raise LookupError(f"no MLflow run for trial {trial_id} under parent run {self.parent_id}")
            self._adopt(trial_id, run_id)
        return self._runs[trial_id]

    def run_ids(self) -> dict[str, str]:
        """trial id -> run of every trial this driver opened or found (all it tracked, once `flush` returned):
        results.parquet takes them from here instead of one search per trial (O(trials) each at the sweep's end)."""
        return dict(self._runs)

    def _adopt(self, trial_id: str, run_id: str, created: bool = False) -> None:
        """Remember a trial's run and the last epoch the server already holds for it (none if created now)."""
        self._runs[trial_id], self._server_step[trial_id] = run_id, 0 if created else self.tracker.logged_steps(run_id)

    def _look_first(self, write: Write) -> bool:
        """Whether a trial's run or model may exist already: a resumed sweep, or a write tried before (a request
        that failed may have reached the store)."""
        key = (write["trial"], write["kind"])
        tried = key in self._tried
        self._tried.add(key)
        return tried or not self.new_sweep

    def _write(self, write: Write) -> None:
        """Hand a write to the sender thread (started with the first one); it returns at once."""
        if self._outbox is None:
            self._outbox = queue.Queue()
            threading.Thread(target=self._send_forever, name="sweeper-tracking", daemon=True).start()
        self._outbox.put(write)

    def drain(self) -> None:
        """Wait until the sender thread has sent or queued in storage every write handed to it."""
        if self._outbox is not None:
            self._outbox.join()

    def _send_forever(self) -> None:
        while True:
            write = self._outbox.get()
            try:
                self._deliver(write)
            except Exception:  # noqa: BLE001 - the storage itself failed; the thread must live on
                log.exception("MLflow: could not send or keep a %s write for trial %s", write["kind"], write["trial"])
            finally:
                self._outbox.task_done()

    def _deliver(self, write: Write) -> None:
        """Send now, or queue behind what already waits (order is kept: an epoch never overtakes a run's end)."""
        if len(self.backlog) and not self.reconnect():
            self.backlog.append(write)
            return
        try:
            _retry(lambda: self._send(write), f"{write['kind']} for trial {write['trial']}", failed=self._failed)
        except Exception as err:  # noqa: BLE001 - the server's or the network's: trials never see it
            log.warning(
                "MLflow: %s does not answer (%s); tracking writes are kept in storage and sent when it answers again",
                self.uri,
                str(err).splitlines()[0][:200] if str(err) else type(err).__name__,
            )
            self._last_try = time.monotonic()
            self.backlog.append(write)

    def _failed(self) -> None:
        self.failed_requests += 1

    def load(self) -> dict[str, Any]:
        """The tracking path under this sweep's load: how long epochs took from their trial to MLflow (median, p99,
        longest) and how many requests failed; recorded with the sweep's status and printed at its end."""
        ordered = sorted(self.delays)

        def quantile(q: float) -> float | None:
            return round(ordered[min(int(q * len(ordered)), len(ordered) - 1)], 3) if ordered else None

        return {
            "epochs": len(ordered),
            "median_s": quantile(0.5),
            "p99_s": quantile(0.99),
            "max_s": round(ordered[-1], 3) if ordered else None,
            "failed_requests": self.failed_requests,
        }

    def reconnect(self, now: bool = False) -> bool:
        """Replay the backlog (at most every RECONNECT_S unless `now`); True when nothing waits any more."""
        if not now and time.monotonic() - self._last_try < RECONNECT_S:
            return False
        self._last_try, waiting = time.monotonic(), len(self.backlog)
        try:
            self.backlog.replay(self._send)
        except Exception:  # noqa: BLE001 - still down: try again later
            return False
        if waiting:
            log.warning("MLflow: %s answers again; %d queued tracking writes sent", self.uri, waiting)
        return True

    def flush(self, wait_s: float) -> bool:
        """At the end of a sweep: wait up to wait_s for the server to take the backlog."""
        self.drain()
        deadline = time.monotonic() + wait_s
        while not self.reconnect(now=True):
            if time.monotonic() > deadline:
                return False
            print(
                f"waiting for the tracking server {self.uri}: {len(self.backlog)} tracking writes to send", flush=True
            )
            time.sleep(RECONNECT_S)
        return True

    def _send(self, write: Write) -> None:
        trial_id, kind = write["trial"], write["kind"]
        if kind == "open":
            self._adopt(
                trial_id,
                *self.tracker.trial_run(
                    self.parent_id,
                    trial_id,
                    write["variant"],
                    write["params"],
                    self._look_first(write),
                    write.get("colour"),  # a write queued before colours has none
                    write.get("name"),  # ... before names
                ),
            )
            return
        run_id = self._run_id(trial_id)
        if kind == "metrics":
            if write["epoch"] and write["step"] <= self._server_step.get(trial_id, 0):
                if write.get("tags"):  # the epoch is in already before a retry or a resume; its tags may not be
                    self.tracker.set_tags(run_id, write["tags"])
                return
            self.tracker.log_metrics(run_id, write["metrics"], write["step"], write["timestamp"], write.get("tags"))
            if write["epoch"]:
                self._server_step[trial_id] = write["step"]
                if write.get("ended_at"):
                    self.delays.append(time.time() - write["ended_at"])
        elif kind == "tags":
            self.tracker.set_tags(run_id, write["tags"])
        elif kind == "input":
            self.tracker.log_datasets(run_id, dataset_inputs(write))
        elif kind == "exploits":
            self.tracker.client.log_dict(run_id, write["events"], PBT_EVENTS)
            self.tracker.set_tags(run_id, {EXPLOITS: str(len(write["events"]))})
            # the trial went back to the donor's epoch: the epochs after it are trained (and logged) again
            self._server_step[trial_id] = min(self._server_step.get(trial_id, 0), write["rewind_to"])
        elif kind == "artifacts":
            with self._local_copy(write["path"]) as folder:
                if folder is not None:
                    self.tracker.client.log_artifacts(run_id, str(folder))
                    mark_tables(self.tracker.client, run_id, tables_in(folder, TRANSLATIONS))
        elif kind == "model":
            with self._local_copy(write["path"]) as folder:
                if folder is not None:
                    self.tracker.log_model(
                        run_id,
                        folder,
                        write["params"],
                        write["tags"],
                        write["metrics"],
                        write["step"],
                        write["timestamp"],
                        self._look_first(write),
                        write.get("name", MODEL),  # a write queued before names: the name it had
                    )
        elif kind == "end":
            self.tracker.client.set_terminated(run_id, write["status"])

    @contextmanager
    def _local_copy(self, path: str) -> Iterator[Path | None]:
        """A checkpoint's folder on this machine, wherever the storage is (downloaded first from object
        storage); None when the checkpoint has no such folder."""
        storage = self.backlog.storage
        fs = storage.fs if storage else pafs.LocalFileSystem()
        if fs.get_file_info(path).type != pafs.FileType.Directory:
            yield None
        elif isinstance(fs, pafs.LocalFileSystem):
            yield Path(path)
        else:
            with tempfile.TemporaryDirectory() as folder:
                pafs.copy_files(path, folder, source_filesystem=fs, destination_filesystem=pafs.LocalFileSystem())
                yield Path(folder)

    def _open(self, trial) -> None:
        if trial.trial_id not in self._last_step:
            cfg, variant = describe_trial(trial.config, self.base)
            self._last_step[trial.trial_id] = 0
            self._write(
                {
                    "kind": "open",
                    "trial": trial.trial_id,
                    "variant": variant,
                    "params": self.trial_params(cfg.active(), variant, self.naming.variant(cfg)),
                    "colour": self.colour_of(variant),
                    "name": self.naming.variant(cfg),
                }
            )

    def trial_params(self, active: dict[str, Any], variant: str, name: str | None = None) -> dict[str, Any]:
        """A trial run's params: the settings active for its variant, the variant, every swept axis (`n/a` where the
        variant does not use it), so that MLflow's columns line up, and what its charts read (mlflow_charts). The
        seed is a tag (SEED_TAG): MLflow averages params in a group's row; a sweep begun before it, a param."""
        unused = {axis: NOT_APPLICABLE for axis in self.axes if axis not in active}
        params = {**active, **unused, "variant": variant}
        if self.categorical is None:
            return params | {SEED_PARAM: active["train.seed"]}
        return params | view_params(active, self.categorical, name)

    @property
    def naming(self) -> TrialNames:
        """The sweep's naming rule (sweeper.tracking.names), which the console and results.parquet are handed too:
        made from `base` and `shared`, the attributes a callback pickled into Tune's state by any earlier version
        has (`shared` None, the class's, in one pickled before names: its runs keep labels)."""
        return TrialNames(self.base, self.shared)

    def colour_of(self, variant: str) -> str:
        """The variant's colour: the next of the palette for a variant the sweep meets first (kept on resume)."""
        colours = self.__dict__.setdefault("_colours", {})  # a callback pickled before colours has none
        return colours.setdefault(variant, colour(len(colours)))

    def on_trial_start(self, iteration, trials, trial, **info):
        self._open(trial)

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self._open(trial)
        trial_id, step = trial.trial_id, int(result.get("epoch", 0))
        now = int(time.time() * 1000)
        tags = as_tags(result)  # code, versions, device and node of the process that trains the trial
        if result.get(DATASET):  # the corpus it trains on, with a process's first report
            self._write({"kind": "input", "trial": trial_id, "datasets": json.loads(result[DATASET])})
        if result.get(PBT_EVENT):  # also on a final result: a donor that had trained every epoch leaves none
            event = json.loads(result[PBT_EVENT])
            events = self._exploits.setdefault(trial_id, [])
            events.append(event)
            self._write(
                {"kind": "exploits", "trial": trial_id, "events": list(events), "rewind_to": int(event["epoch"])}
            )
            self._last_step[trial_id] = min(self._last_step[trial_id], int(event["epoch"]))
        if result.get(FINAL):
            metrics = mlflow_metrics(result, AT_END, self.names)
            tags.update({tag: str(result.get(key, "")) for key, tag in SIGNATURE_TAGS.items()})
            tags[RESTORES] = str(result.get("restores", 0))
            self._final[trial_id] = {
                "kind": "metrics",
                "trial": trial_id,
                "metrics": metrics,
                "step": 0 if self.names == GROUPED_NAMES else step,  # at step 0 MLflow draws bars, not lines
                "timestamp": now,
                "epoch": False,
                "tags": tags,
            }
            self._write(self._final[trial_id])
            return
        if step <= self._last_step[trial_id]:  # Tune re-reported an epoch after a retry
            if tags:
                self._write({"kind": "tags", "trial": trial_id, "tags": tags})
            return
        # the epoch's numbers, PBT's settings in force and the trial's CPU/memory/GPU, with its tags: one request
        metrics = mlflow_metrics(result, PER_EPOCH, self.names)
        self._write(
            {
                "kind": "metrics",
                "trial": trial_id,
                "metrics": metrics,
                "step": step,
                "timestamp": now,
                "epoch": True,
                "tags": tags,
                "ended_at": ended_at(result),
            }
        )
        self._last_step[trial_id] = step

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.outcomes[trial.trial_id] = "complete"
        self._open(trial)
        if trial.checkpoint:
            self._write({"kind": "artifacts", "trial": trial.trial_id, "path": f"{trial.checkpoint.path}/{ARTIFACTS}"})
            if self.models == "all":  # else the sweep logs the models its policy names when it ends
                self._write_model(trial)
        status = "FINISHED" if (trial.last_result or {}).get(FINAL) else "KILLED"  # KILLED: stopped early (ASHA)
        self._write({"kind": "end", "trial": trial.trial_id, "status": status})

    def _write_model(self, trial) -> None:
        """The final checkpoint's MLflow model as the run's LoggedModel, with the trial's params and final
        metrics."""
        cfg, variant = describe_trial(trial.config, self.base)
        final = self._final.pop(trial.trial_id, {})  # the last use of it: a sweep of thousands keeps none
        step = final.get("step", int((trial.last_result or {}).get("epoch", 0)))
        self._write(
            {
                "kind": "model",
                "trial": trial.trial_id,
                "path": f"{trial.checkpoint.path}/{MODEL}",
                "params": self.trial_params(cfg.active(), variant),
                "tags": {TRIAL_ID: trial.trial_id, VARIANT: variant},
                "name": model_name(name) if (name := self.naming.variant(cfg)) else MODEL,
                "metrics": final.get("metrics", {}),
                "step": step,
                "timestamp": final.get("timestamp", int(time.time() * 1000)),
            }
        )

    def on_trial_error(self, iteration, trials, trial, **info):
        self.outcomes[trial.trial_id] = "error"
        self._open(trial)
        error = str(getattr(trial, "error_file", "") or "")
        self._write({"kind": "tags", "trial": trial.trial_id, "tags": {ERROR_FILE: error}})
        self._write({"kind": "end", "trial": trial.trial_id, "status": "FAILED"})

    def get_state(self) -> dict[str, Any]:
        return {"outcomes": dict(self.outcomes), "colours": dict(self.__dict__.get("_colours", {}))}

    def set_state(self, state: dict[str, Any]) -> None:
        self.outcomes = dict(state.get("outcomes", {}))
        self._colours = dict(state.get("colours", {}))  # a resumed sweep's variants keep their colours
