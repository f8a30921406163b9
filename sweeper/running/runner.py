"""Build the Tuner (search algorithm, scheduler, resources, failures), run it, resume it, write results."""

from __future__ import annotations

import copy
import json
import math
import os
import pickle
import posixpath
import random
import re
import tempfile
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, replace
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq
import ray
from mlflow.tracking import MlflowClient
from ray import tune
from ray.tune.experiment import Trial
from ray.tune.logger import JsonLoggerCallback
from ray.tune.schedulers import ASHAScheduler, HyperBandScheduler, PopulationBasedTraining
from ray.tune.search import ConcurrencyLimiter

import sweeper.storage.conditional_writes as conditional_writes
from nmt_core.data.corpora import default_cache_dir, load_corpus
from nmt_core.gates.credentials import redact
from nmt_core.gates.tracking_store import choose_tracking_uri
from sweeper.running.compute import DEVICE_SO_FAR, DEVICE_TOTAL, ComputeWatch, Spending
from sweeper.running.console import console, ray_calls
from sweeper.running.driver_lock import check_lockable, sweep_lock
from sweeper.running.models import human, log_best_models, storage_usage
from sweeper.running.progress import SweepProgress, failure_cause, open_board
from sweeper.running.stop_signals import sigterm_as_ctrl_c
from sweeper.running.study import describe as describe_study
from sweeper.running.study import shown, study_url
from sweeper.running.sweeps import ENDED, FINISHING, clear_stop, job_from_environment, origin, write_status
from sweeper.running.trial_context import NoRetryAfterDivergence, SweepContext
from sweeper.running.trial_handoff import run_trial
from sweeper.running.webhook import EVENTS, FAILED, WARNING, Webhook, message, webhook_url
from sweeper.space.design import digest as design_digest
from sweeper.space.spec import (
    SIGNIFICANCE_TESTS,
    SignificanceSpec,
    SpecError,
    SweepSpec,
    TrialPlan,
    describe_trial,
    mutation_range,
    trial_config,
)
from sweeper.storage.store import Storage, check_writable, first_line, open_storage
from sweeper.storage.stored import LINK_KEY, RESTORED, STATE_FILE, SweepState, damaged, read_state, state_from
from sweeper.tracking.backlog import BACKLOG_FILE
from sweeper.tracking.metrics import (
    AGGREGATED,
    BEST,
    BEST_RUN_ID,
    BEST_VARIANT,
    FINAL,
    MEAN,
    RESULTS_FILE,
    SUMMARY_DIR,
    final_result,
    parent_metrics,
)
from sweeper.tracking.mlflow_charts import categorical_axes, decoding, group_colours
from sweeper.tracking.mlflow_view import SweepView, page, recorded_port, saved_pages, share_view, translations_link
from sweeper.tracking.names import TrialNames, shared_words, variant_name
from sweeper.tracking.runs import (
    MlflowTrackingCallback,
    SweepTracker,
    resolve_uri,
    runs_link,
)
from sweeper.tracking.store import check_holds_run, check_reachable

TUNER_FILE = "tuner.pkl"  # Ray Tune's pickled Tuner, which `Tuner.restore` loads
SIGNIFICANCE_KEY = b"sweeper.significance"  # results.parquet's metadata: the test whose marks the summary prints
COMPUTE_KEY = b"sweeper.compute"  # results.parquet's metadata: what the whole sweep spent (sweeper.running.compute)
TRACKING_WAIT_S = 300.0  # at the end of a sweep, how long to wait for a tracking server that went away
NO_AUTO_LOGGERS = "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"  # Ray Tune's switch for its default result loggers
TRIAL_DIR = re.compile(r"^([0-9a-f]+(?:_\d{5})?)_")  # grid/random ids read 8f3a1_00004, Optuna's 8287bf51


def resolved_base(spec: SweepSpec) -> dict[str, Any]:
    """Trials run in their own working folders: make every path in the base config absolute."""
    base = copy.deepcopy(spec.base)
    data = base.setdefault("data", {})
    corpus = Path(str(data.get("corpus", "synthetic"))).expanduser()
    if corpus.is_dir():
        data["corpus"] = str(corpus.resolve())
    data["cache_dir"] = str(Path(data.get("cache_dir") or default_cache_dir()).expanduser().resolve())
    return base


LOCAL_RAY = "local"  # Ray's word for "start a new local Ray": here, the loopback-only one


def cluster_address(address: str | None) -> str | None:
    """The Ray cluster a sweep joins: --address, else $RAY_ADDRESS (as Ray reads it); None (and `local`, Ray's
    word for a new local instance) means a local Ray bound to 127.0.0.1, whatever the variable says."""
    address = address or os.environ.get("RAY_ADDRESS")
    return None if not address or address == LOCAL_RAY else address


def init_ray(address: str | None) -> None:
    if ray.is_initialized():
        return
    key = "--address" if address else "RAY_ADDRESS"
    address = cluster_address(address)
    if address:
        try:
            ray.init(address=address)
        except (ConnectionError, TimeoutError, ValueError, RuntimeError) as err:  # an address no cluster answers at
            raise SpecError(
                key,
                f"{redact(address, bare_address=True)}: no Ray cluster answers there ({type(err).__name__}; Ray's "
                "own words, which repeat the address, are not shown); pass the head's address (ray://HEAD:10001, "
                "HEAD:6379, or auto on a node of the cluster)",
                "Ray",
            ) from None
    else:
        start_local_ray()


RAY_STARTUP_TIMEOUT = "timed out during startup"  # Ray 2.60's words when its raylet missed its 30 s (or agents 15 s)


def start_local_ray(tries: int = 2) -> None:
    """The sweep's own Ray on this machine; a start that timed out (Ray's raylet waits a fixed time for its agents,
    which a loaded machine can exceed) is tried once more after Ray's own clean-up."""
    for attempt in range(tries):
        try:
            with loopback_only():  # address="local": Ray starts its own and reads no $RAY_ADDRESS
                ray.init(address=LOCAL_RAY, num_cpus=os.cpu_count(), include_dashboard=False, configure_logging=False)
            return
        except Exception as err:  # noqa: BLE001 - Ray raises a bare Exception for this
            if RAY_STARTUP_TIMEOUT not in str(err) or attempt == tries - 1:
                raise
            ray.shutdown()
            print(f"note: the local Ray {RAY_STARTUP_TIMEOUT} (a loaded machine?); starting it again", flush=True)


@contextmanager
def ray_for_one_sweep() -> Iterator[None]:
    """The Ray a sweep connected to (a local one it started, or a cluster it joined) is disconnected when the sweep
    ends, inside the console's routing (sweeper/running/console.py): disconnecting prints the worker lines Ray's
    deduplication still holds ("... [repeated 2x across cluster]"), which at the process's exit would reach the
    console after the summary; here they go to the sweep's log. A Ray the caller had connected stays connected."""
    connected_before = ray.is_initialized()
    try:
        yield
    finally:
        if not connected_before and ray.is_initialized():
            with ray_calls():
                ray.shutdown()


@contextmanager
def loopback_only() -> Iterator[None]:
    """A local Ray for one sweep serves no other machine: its GCS, raylet, workers and agents listen on 127.0.0.1.

    Ray binds its servers to the node's IP, which on Linux it resolves to an outside interface even when asked for
    127.0.0.1 (`ray.init(_node_ip_address=...)` maps loopback to it). Ray's single-machine mode (the variable
    RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, Windows' and macOS's default) takes the loopback instead. Ray reads the
    variable when it is imported, so it is set for the processes Ray starts and Ray's copy of it for this one, both
    only while Ray starts: a later `ray start` or `ray.init(address=...)` from this process joins clusters again."""
    from ray._private import ray_constants

    saved, ray_constants.ENABLE_RAY_CLUSTER = ray_constants.ENABLE_RAY_CLUSTER, False
    try:
        with environment(ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR, "0"):
            yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved


@contextmanager
def environment(variable: str, value: str) -> Iterator[None]:
    """An environment variable set while the block runs, then put back as it was."""
    before = os.environ.get(variable)
    os.environ[variable] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = before


def check_gpus(spec: SweepSpec) -> None:
    """A cluster without GPUs now is fine if its autoscaler can add GPU nodes (a cold cluster scales from min 0)."""
    if spec.gpu <= 0:
        return
    available = ray.cluster_resources().get("GPU", 0)
    if available >= spec.gpu:
        return
    reachable = autoscaler_max_gpus()
    if reachable >= spec.gpu:
        print(
            f"the Ray cluster has {available:g} GPUs now; its autoscaler can add up to {reachable:g}: trials wait "
            "for GPU nodes to start (often minutes)",
            flush=True,
        )
        return
    raise SpecError(
        "resources.gpu",
        f"{spec.gpu:g} GPU per trial asked for, but the Ray cluster has {available:g} "
        "GPUs and no autoscaler node type with GPUs; set resources.gpu: 0 or run on a cluster with GPUs",
        spec.source,
    )


def autoscaler_max_gpus() -> float:
    """The GPUs the autoscaler's node types can reach (the cluster config it reports to the GCS; 0 if none)."""
    from ray._private.state import state

    try:
        return float((state.get_max_resources_from_cluster_config() or {}).get("GPU", 0))
    except Exception:  # noqa: BLE001 - a cluster without an autoscaler, or an older GCS: nothing to wait for
        return 0.0


def build_trainable(state: SweepState):
    """The trial function with what every trial needs, from the sweep's state (sweeper.json: a resumed sweep's
    trials run as its first ones did; stored.later_keys fills what older sweeps did not keep)."""
    context = SweepContext(
        base=state.base,
        cpus_per_trial=state.cpu,
        gpus_per_trial=state.gpu,
        sweep=state.name,
        mutable=state.mutable,
        system_metrics=state.system_metrics,
        plots=state.plots,
        models=state.models,
    )
    resources = {"cpu": state.cpu, "gpu": state.gpu}
    return tune.with_resources(tune.with_parameters(run_trial, context=context), resources)


def trial_name(trial: Trial, base: dict[str, Any]) -> str:
    """Tune's own name of a trial, `<variant>-<trial id>`, in Ray's lines (the sweep's log); a person reads its run
    name (sweeper.tracking.names.TrialNames). Sweeps started before that kept this as their progress callback's
    `name_of`."""
    return f"{describe_trial(trial.config, base)[1]}-{trial.trial_id}"


def trial_folder_name(trial: Trial, base: dict[str, Any]) -> str:
    """`<trial id>_<variant>_seed<N>`, e.g. `f4bd1_00003_general+sact4_seed1`: Ray's default names the folder
    after the whole config, cut off at a fixed length, so the variant is often lost."""
    cfg, variant = describe_trial(trial.config, base)
    return f"{trial.trial_id}_{variant}_seed{cfg.train.seed}"


def build_tune_config(
    spec: SweepSpec, base: dict[str, Any], study: str | None = None
) -> tuple[tune.TuneConfig, dict[str, Any]]:
    """`study`: where an Optuna sweep keeps its study (sweeper.running.study.study_url; None: in memory)."""
    scheduler = None
    # reuse_actors: a finished trial's worker process runs the next trial, so torch and the rest are imported once
    # per worker, not once per trial (every trial seeds its own RNGs and sets its own thread count)
    every_search = {
        "trial_name_creator": partial(trial_name, base=base),
        "trial_dirname_creator": partial(trial_folder_name, base=base),
        "reuse_actors": True,
    }
    if spec.scheduler.type == "asha":
        # max_t beyond the last epoch: ASHA must never stop a trial at its last epoch, before its test BLEU
        scheduler = ASHAScheduler(
            time_attr="epoch",
            max_t=spec.epochs + 1,
            grace_period=spec.scheduler.grace_period,
            reduction_factor=spec.scheduler.reduction_factor,
        )
    elif spec.scheduler.type == "hyperband":
        scheduler = HyperBandScheduler(
            time_attr="epoch", max_t=spec.epochs + 1, reduction_factor=spec.scheduler.reduction_factor
        )
    elif spec.scheduler.type == "pbt":
        scheduler = pbt_scheduler(spec)
    if spec.search.algorithm == "optuna":
        from sweeper.running.optuna_search import optuna_searcher

        searcher = optuna_searcher(spec, study)
        config = tune.TuneConfig(
            metric=spec.metric,
            mode=spec.mode,
            scheduler=scheduler,
            search_alg=ConcurrencyLimiter(searcher, max_concurrent=spec.search.max_concurrent),
            num_samples=spec.search.num_samples,
            **every_search,
        )
        return config, {}
    plans = spec.plan
    if spec.scheduler.type == "pbt":
        plans = with_initial_values(plans, spec)
    config = tune.TuneConfig(
        metric=spec.metric,
        mode=spec.mode,
        scheduler=scheduler,
        num_samples=1,
        max_concurrent_trials=spec.search.max_concurrent,
        **every_search,
    )
    return config, {"trial": tune.grid_search([asdict(p) for p in plans])}


def _domain(raw: list | dict):
    """A mutation as PBT takes it: a list stays a list (PBT shifts to a neighbour), a range a Tune domain."""
    if (found := mutation_range(raw)) is None:
        return list(raw)
    kind, low, high = found
    return tune.loguniform(low, high) if kind == "loguniform" else tune.uniform(low, high)


class SweepPBT(PopulationBasedTraining):
    """PBT without Ray Tune 2.60's lost trial: a trial exploited while its PAUSE checkpoint is still being saved.

    Synchronous PBT pauses each trial at the perturbation interval with a save; when the last trial arrives before
    a bottom trial's save has resolved, `_exploit` pauses that trial again without a checkpoint, and Tune's
    `_schedule_trial_stop` caches a STOP for a trial that is saving (tune_controller.py, "Scheduling STOP after
    save resolved") while dropping the save that would have consumed it. The trial restarts from its donor's
    checkpoint, and its next save after the restore pops that stale STOP: Tune completes it one epoch later,
    without its final report (no test BLEU, "stopped early", its MLflow run KILLED). After an exploit the trial is
    PAUSED with no actor and no save pending, so nothing cached for it is still meant: drop it."""

    def _exploit(self, tune_controller, trial, trial_to_clone) -> None:
        super()._exploit(tune_controller, trial, trial_to_clone)
        controller = getattr(tune_controller, "_tune_controller", tune_controller)  # under Tune's API wrapper
        controller._cached_trial_decisions.pop(trial.trial_id, None)


def pbt_scheduler(spec: SweepSpec) -> PopulationBasedTraining:
    """PBT over the planned trials' params (config["trial"]["params"]); ranges are clamped after a perturbation
    (PBT multiplies by 0.8 or 1.2, which can leave [low, high])."""
    mutations = spec.scheduler.mutations

    def clamp(config: dict[str, Any]) -> dict[str, Any]:
        params = config["trial"]["params"]
        for key, raw in mutations.items():
            if (found := mutation_range(raw)) is not None:
                _, low, high = found
                params[key] = min(max(params[key], low), high)
        return config

    return SweepPBT(
        time_attr="epoch",
        perturbation_interval=spec.scheduler.perturbation_interval,
        quantile_fraction=spec.scheduler.quantile_fraction,
        synch=spec.scheduler.synch,
        custom_explore_fn=clamp,
        hyperparam_mutations={"trial": {"params": {k: _domain(v) for k, v in mutations.items()}}},
    )


def with_initial_values(plans: list[TrialPlan], spec: SweepSpec) -> list[TrialPlan]:
    """Every PBT trial starts from its own draw of each mutated key that the grid does not set (seeded)."""
    rng = random.Random(spec.search.seed)
    out = []
    for plan in plans:
        params = dict(plan.params)
        for key, raw in spec.scheduler.mutations.items():
            if key in params:
                continue
            if (found := mutation_range(raw)) is None:
                params[key] = rng.choice(raw)
            else:
                kind, low, high = found
                params[key] = (
                    math.exp(rng.uniform(math.log(low), math.log(high)))
                    if kind == "loguniform"
                    else rng.uniform(low, high)
                )
        out.append(TrialPlan(params, plan.seed, plan.variant))
    return out


def planned_shared_words(spec: SweepSpec) -> dict[str, str]:
    """The title words every planned variant shares, which trial names leave out (for random and Optuna searches,
    those of the plan's draws: a field one of them varies is named in every run)."""
    return shared_words(plan.config(spec.base) for plan in spec.plan)


def planned_colours(spec: SweepSpec, shared: dict[str, str]) -> dict[str, str]:
    """label -> colour of each planned variant: the colour MLflow gives its group (mlflow_charts.group_colours),
    so that the runs, their groups and the summary's figures share one palette; none where two of them collide."""
    names = {plan.variant: variant_name(plan.config(spec.base), shared) for plan in spec.plan}
    return group_colours(names)


def sweep_view(spec: SweepSpec) -> SweepView:
    """What the sweep's saved views show: its swept settings (the seed has a column of its own), those its
    parallel coordinates read as text, and how its test and dev BLEU decode."""
    cfg = spec.base_config
    return SweepView(
        tuple(dict.fromkeys(p.key for p in spec.parameters if p.key != "train.seed")),
        categorical_axes(spec.parameters),
        decoding(cfg.decode.beam_size, cfg.decode.dev_beam_size),
        pareto=len(spec.objectives) > 1,
    )


def tracking_callback(
    spec: SweepSpec,
    uri: str,
    parent_id: str,
    base: dict[str, Any],
    storage_uri: str,
    user: str | None,
    shared: dict[str, str],
) -> MlflowTrackingCallback:
    """A new sweep's MLflow writer: its trial runs hold every axis the search varies (those its charts read as text
    twice), `user` (a submitted sweep's submitter) as MLflow's User, names without the `shared` words
    (planned_shared_words) and the colours MLflow gives their groups (planned_colours)."""
    axes = tuple(dict.fromkeys(parameter.key for parameter in spec.parameters))
    settings = {"new_sweep": True, "models": spec.models, "axes": axes, "user": user, "shared": shared}
    settings.update(colours=planned_colours(spec, shared), categorical=categorical_axes(spec.parameters))
    return MlflowTrackingCallback(uri, spec.name, parent_id, base, storage_uri, **settings)


def run_sweep(spec: SweepSpec, storage_uri: str, tracking_uri: str | None, address: str | None) -> int:
    """A new sweep: everything checked (open_sweep), then its driver's lock taken (sweeper/running/driver_lock.py), then
    Ray, MLflow and the trials: a run refused by a check or by a live driver has written nothing."""
    checked = open_sweep(spec, storage_uri, tracking_uri)
    hook = webhook_url(spec.tracking.webhook)  # a bad $SWEEPER_WEBHOOK_URL is refused before anything is written
    with sweep_lock(checked.storage.below(spec.name), spec.name, "sweeper run"), failure_told(hook, spec.name):
        return drive_sweep(spec, checked, address)


class CheckedSweep(NamedTuple):
    """What open_sweep checked: the storage, the tracking URI, the job record of a submitted sweep's driver, an
    earlier sweep's state under this name, and the base trial config with absolute paths."""

    storage: Storage
    uri: str
    job: dict[str, Any] | None
    earlier: SweepState | None
    base: dict[str, Any]
    new_store: bool = False  # a SQLite tracking store MLflow creates (none was there)


def drive_sweep(spec: SweepSpec, checked: CheckedSweep, address: str | None) -> int:
    """run_sweep's sweep, its driver's lock held: the parent run, sweeper.json, the Tuner and the results."""
    storage, uri, job, earlier, base, new_store = checked
    opening = open_tracking(uri, address)
    experiment = storage.below(spec.name)
    start_ray(spec, address, base)
    study = study_url(spec, experiment, uri) if spec.search.algorithm == "optuna" else None
    tune_config, param_space = build_tune_config(spec, base, study)
    n_trials = len(param_space["trial"]["grid_search"]) if param_space else spec.search.num_samples
    submitter = (job or {}).get("mlflow_user")  # the User of the sweep's runs where the cluster's account tracks
    tracker = SweepTracker(uri, spec.name, opening.result(), user=submitter)
    plan = {"source": spec.source, "trials": n_trials, "algorithm": spec.search.algorithm}
    plan.update(scheduler=spec.scheduler.type, storage=storage.display(spec.name), models=spec.models)
    if spec.design.declared:  # frozen on the parent run before any trial starts (sweeper.space.design)
        plan["design"] = design_digest(spec.design)
    parent_id = tracker.start_sweep(spec.text, plan)
    link = share_view(tracker.client, uri, tracker.experiment_id, parent_id, sweep_view(spec))
    print_notes(spec.name, experiment.uri, earlier, uri if new_store else None)
    record = new_state(spec, uri, parent_id, tracker.experiment_id, base, n_trials, study, job) | {LINK_KEY: link}
    conditional_writes.write_record(experiment, json.dumps(record, indent=2), STATE_FILE)
    state = state_from(record, experiment.display(STATE_FILE))
    clear_stop(experiment)  # a request that stopped an earlier run of this name is not this one's
    grant_submitter(tracker, job)
    print(
        f"sweep {spec.name}: {n_trials} trials ({spec.search.algorithm}, {spec.scheduler.type}), "
        f"{spec.cpu:g} CPU / {spec.gpu:g} GPU each; storage {experiment.uri}; tracking {uri}",
        flush=True,
    )
    if spec.search.algorithm == "optuna":
        print(describe_study(spec, study), flush=True)
    shared = planned_shared_words(spec)  # once: the console names trials as the tracking callback names runs
    callback = tracking_callback(spec, uri, parent_id, base, experiment.uri, submitter, shared)
    board = open_board(spec.name)  # noqa: F841 - held while the sweep runs: the board dies with its last handle
    progress = SweepProgress(spec.name, n_trials, callback.naming, spec.metric, experiment.uri)  # as MLflow's
    accountant = ComputeWatch(spec.name, experiment.uri, spec.cpu, spec.gpu, state.budget, state.budget_unit)
    progress.watch(spec.mode, spec.cpu, spec.gpu, accountant)
    tuner = new_tuner(spec, state, (tune_config, param_space), (spec.name, storage), [callback, progress, accountant])
    return finish(fit(tuner), callback, storage, tracker, state, accountant)


def new_tuner(
    spec: SweepSpec,
    state: SweepState,
    planned: tuple[tune.TuneConfig, dict[str, Any]],
    where: tuple[str, Storage],
    callbacks: list,
) -> tune.Tuner:
    """The Tuner of a sweep, or of a designed sweep's look: Tune's experiment `where[0]` below storage `where[1]`."""
    (tune_config, param_space), (name, storage) = planned, where
    return tune.Tuner(
        build_trainable(state),
        param_space=param_space,
        tune_config=tune_config,
        run_config=tune.RunConfig(  # verbose 0: our progress lines instead of Tune's tables
            name=name,
            storage_path=storage.root,
            storage_filesystem=storage.fs,
            callbacks=[NoRetryAfterDivergence(), *callbacks, JsonLoggerCallback()],
            verbose=0,
            failure_config=tune.FailureConfig(max_failures=spec.max_retries),
            # PBT copies other trials' checkpoints: keep enough of them
            checkpoint_config=tune.CheckpointConfig(num_to_keep=4 if spec.scheduler.type == "pbt" else 2),
        ),
    )


def fit(tuner: tune.Tuner):
    """Run the trials. Tune's JSON result logger is passed (results.parquet reads each trial's result.json); its CSV
    and TensorBoard loggers, which it adds unless NO_AUTO_LOGGERS is set, write files nothing reads at a cost to
    its loop per trial. SIGTERM stops Tune as Ctrl+C does (sweeper/running/stop_signals.py), not as Ray's handler."""
    with ray_calls(), environment(NO_AUTO_LOGGERS, "1"), sigterm_as_ctrl_c():
        return tuner.fit()


def print_notes(name: str, folder: str, earlier: SweepState | None, new_store: str | None) -> None:
    """What a new sweep tells before it starts: the tracking store it created, an earlier sweep of its name."""
    if new_store:
        print(f"note: created the MLflow tracking store {redact(new_store)} (there was none)", flush=True)
    if earlier:
        print(
            f"note: {folder} holds an earlier sweep {name!r}: its trial folders stay, results.parquet "
            f"will describe this run, and `sweeper summarize {name} --run-id {earlier.parent_run_id}` still "
            "summarises the earlier one",
            flush=True,
        )


def open_sweep(
    spec: SweepSpec, storage_uri: str, tracking_uri: str | None, command: str = "sweeper run"
) -> CheckedSweep:
    """Everything checked before anything is written: the storage, the tracking store, the job record a submitted
    sweep's driver gets, an earlier sweep's state under this name, the base trial config."""
    storage = open_storage(storage_uri, command)
    check_lockable(storage, command)
    uri = resolve_uri(choose_tracking_uri(tracking_uri, spec.tracking_uri))
    new_store = check_reachable(uri, create=True)
    check_writable(storage, command)
    job = job_from_environment()
    experiment = storage.below(spec.name)
    earlier = read_state(experiment) if experiment.exists(STATE_FILE) else None
    base = resolved_base(spec)
    trial_config(base, {}, 1)  # the resolved base still validates
    return CheckedSweep(storage, uri, job, earlier, base, new_store)


def open_tracking(uri: str, address: str | None) -> Future:
    """A cluster that must answer, joined before MLflow writes (joining one is quick; a local Ray starts later,
    while MLflow opens its store), and the MLflow client being opened (a new SQLite database takes about 2 s)."""
    if cluster_address(address):
        with ray_calls():
            init_ray(address)
    pool = ThreadPoolExecutor(max_workers=1)
    opening = pool.submit(MlflowClient, uri)
    pool.shutdown(wait=False)  # its one thread ends with the store opened, not with the sweep
    return opening


def start_ray(spec: SweepSpec, address: str | None, base: dict[str, Any]) -> None:
    """Ray (a local one starts here), the GPUs the space asks for, and the corpus (fetched once, cached)."""
    with ray_calls():  # Ray's banners and warnings: to the sweep's log (sweeper/running/console.py)
        init_ray(address)
    check_gpus(spec)
    data = base["data"]
    load_corpus(data.get("corpus", "synthetic"), data.get("src", ""), data.get("tgt", ""), data["cache_dir"])


def new_state(
    spec: SweepSpec,
    uri: str,
    parent_id: str,
    experiment_id: str,
    base: dict[str, Any],
    n_trials: int,
    study: str | None,
    job: dict[str, Any] | None,
) -> dict[str, Any]:
    """sweeper.json: what `sweeper resume` needs that Tune does not keep, and who started the sweep, how."""
    return {
        "name": spec.name,
        "source": spec.source,
        "tracking_uri": uri,
        "parent_run_id": parent_id,
        "experiment_id": experiment_id,
        "base": base,
        "cpu": spec.cpu,
        "gpu": spec.gpu,
        "metric": spec.metric,
        "mode": spec.mode,
        "trials": n_trials,
        "mutable": list(spec.scheduler.mutations),
        "system_metrics": spec.system_metrics,
        "plots": spec.plots,
        "significance": asdict(spec.significance),
        "models": spec.models,
        "budget": spec.resources.budget,
        "budget_unit": spec.resources.budget_unit,
        "webhook": spec.tracking.webhook,  # checked free of credentials: $SWEEPER_WEBHOOK_URL's is never stored
        "study": {"name": spec.name, "storage": shown(study)} if study else None,
        **origin(job),
        **frozen_design(spec),
    }


def frozen_design(spec: SweepSpec) -> dict[str, Any]:
    """What a designed sweep keeps for `sweeper extend`: the space as it ran, the design's digest, and its looks
    beyond the first (none yet); nothing for a sweep without a design."""
    if not spec.design.declared:
        return {}
    return {"space": spec.text, "design_digest": design_digest(spec.design), "looks": []}


def grant_submitter(tracker: SweepTracker, job: dict[str, Any] | None) -> None:
    """A submitted sweep tracks under the cluster's own MLflow account: its submitter gets its experiment."""
    if job and job.get("mlflow_user") and (why := tracker.grant(job["mlflow_user"])):
        print(f"note: MLflow user {job['mlflow_user']!r} was not granted experiment {tracker.experiment}: {why}")


def resume_sweep(
    name: str, storage_uri: str, address: str | None, tracking_uri: str | None = None, budget: float | None = None
) -> int:
    """An interrupted sweep: everything checked (open_resume), then its driver's lock taken, then Ray and the
    Tuner: a resume refused by a check or by a live driver has written nothing. `budget` replaces the state's."""
    storage, state, uri, job = open_resume(name, storage_uri, tracking_uri)
    if RESTORED in state.record and not pending_look(state):  # its earlier looks have no Tune state to resume
        raise SpecError(
            "NAME",
            f"sweep {name!r} was restored from data and has no look to finish: `sweeper extend {name}` runs its next",
            "sweeper resume",
        )
    if budget is not None:
        state = state.with_record(state.name, budget=budget)
    hook = webhook_url(state.webhook)
    with sweep_lock(storage.below(name), name, "sweeper resume"), failure_told(hook, name, state.record.get(LINK_KEY)):
        return drive_resume(name, storage, state, uri, job, address)


@contextmanager
def failure_told(url: str | None, name: str, link: str | None = None) -> Iterator[None]:
    """The webhook told when the driver itself fails (an exception out of the sweep; a trial's failure is not one),
    then the exception goes on as before."""
    try:
        yield
    except Exception as err:
        verdict = f"failed: {type(err).__name__}: {first_line(err)[:300]}"
        Webhook(url).notify(message(name, FAILED, verdict, link or ""), log=lambda line: print(line, file=console()))
        raise


def open_resume(
    name: str, storage_uri: str, tracking_uri: str | None, command: str = "sweeper resume"
) -> tuple[Storage, SweepState, str, dict[str, Any] | None]:
    """Everything checked before a resume writes: the storage (on object storage, that it can be written), the
    sweep's state and Tune's, the tracking store and that it holds the sweep's parent run, the job record."""
    storage = open_storage(storage_uri, command)
    check_lockable(storage, command)
    if not storage.is_local:  # a folder is checked by the lock's write; a store that cannot be used is its one line
        check_writable(storage, command)
    experiment = storage.below(name)
    state = read_state(experiment) if experiment.exists(STATE_FILE) else None
    # a restored sweep's first looks ran elsewhere (sweeper.running.restore): Tune's state is only that of its looks
    tuned = state is not None and (
        RESTORED in state.record or tune.Tuner.can_restore(experiment.root, storage_filesystem=storage.fs)
    )
    if not tuned:
        raise SpecError(
            "NAME",
            f"no sweep named {name!r} to {command.split()[-1]} under {storage.uri} (pass the --storage the sweep "
            "ran with)",
            command,
        )
    uri = resolve_uri(choose_tracking_uri(tracking_uri, state.tracking_uri))
    check_reachable(uri)
    if uri != state.tracking_uri:  # the same store at another address, or the wrong store: ask it
        check_holds_run(uri, state.parent_run_id, state.tracking_uri)
    return storage, state, uri, job_from_environment()


def drive_resume(
    name: str, storage: Storage, state: SweepState, uri: str, job: dict[str, Any] | None, address: str | None
) -> int:
    """resume_sweep's sweep, its driver's lock held: Tune's state restored, sweeper.json rewritten, the rest run."""
    experiment = storage.below(name)
    look = pending_look(state)  # a designed sweep's look that `sweeper extend` began: its own Tune experiment
    with ray_calls():
        init_ray(address)
    board = open_board(name)  # noqa: F841 - held while the sweep runs
    tuner = restore_tuner(experiment.below(look) if look else experiment, storage, replace(state, name=name))
    state = state.with_record(experiment.display(STATE_FILE), job=job)  # this driver's, not a submitted sweep's job
    conditional_writes.write_record(experiment, state.written(), STATE_FILE)
    clear_stop(experiment)
    tracker = SweepTracker(uri, state.name)
    study = state.study  # the searcher comes back with Tune's state and reconnects to its study
    print(
        f"resuming sweep {name}{f' ({look})' if look else ''} from {experiment.uri}; finished trials are kept, not "
        "re-run" + (f"; Optuna study {study['name']!r} in {study['storage']} continues" if study else ""),
        flush=True,
    )
    # the callbacks come back from Tune's saved experiment state, the parent run id in the tracking one
    callbacks = tuner._local_tuner.get_run_config().callbacks
    [callback] = [c for c in callbacks if isinstance(c, MlflowTrackingCallback)]
    callback.uri = uri  # and the store's address as resolved now
    accountant = resumed_accountant(callbacks, state, experiment.uri)
    for progress in (c for c in callbacks if isinstance(c, SweepProgress)):
        progress.watch(state.mode, state.cpu, state.gpu, accountant)
        progress.name_of = callback.naming  # a sweep begun before run names had Tune's
    code = finish(fit(tuner), callback, storage, tracker, state, accountant)
    return mark_look_done(experiment) if look and code == 0 else code


def resumed_accountant(callbacks: list, state: SweepState, experiment_uri: str) -> ComputeWatch:
    """The restored sweep's accountant (its wall time so far came back with Tune's state) with the budget the state
    holds now (`sweeper resume --budget`); a sweep begun before accounting gets one from now on."""
    found = next((c for c in callbacks if isinstance(c, ComputeWatch)), None)
    if found is None:
        found = ComputeWatch(state.name, experiment_uri, state.cpu, state.gpu, None, state.budget_unit)
        callbacks.insert(len(callbacks) - 1, found)  # before Tune's JSON logger, as a new sweep has it
    found.budget, found.unit, found.experiment_uri = state.budget, state.budget_unit, experiment_uri
    return found


def mark_look_done(experiment: Storage) -> int:
    """A designed sweep's last look has ended: `resume` no longer looks for it. Exit code 0."""
    state = read_state(experiment)
    looks = state.record["looks"]
    conditional_writes.write_record(
        experiment, state.written(looks=[*looks[:-1], {**looks[-1], "done": True}]), STATE_FILE
    )
    return 0


def pending_look(state: SweepState) -> str | None:
    """The folder of a designed sweep's last look if it has not ended (`sweeper extend` records it first)."""
    looks = state.record.get("looks") or []
    return looks[-1]["folder"] if looks and not looks[-1].get("done") else None


def restore_tuner(experiment: Storage, storage: Storage, state: SweepState) -> tune.Tuner:
    """Ray Tune's Tuner of the sweep, from storage; a tuner.pkl it cannot load is damage (one line, exit 2)."""
    try:  # Tune unpickles tuner.pkl: storage must be writable only by people the resuming user trusts
        return tune.Tuner.restore(
            experiment.root,
            trainable=build_trainable(state),
            resume_unfinished=True,
            resume_errored=True,
            storage_filesystem=storage.fs,
        )
    except (
        pickle.UnpicklingError,
        EOFError,
        AttributeError,
        KeyError,
        TypeError,
        ValueError,
        IndexError,
        ImportError,
    ) as err:
        raise damaged(
            experiment,
            TUNER_FILE,
            f"Ray Tune cannot load it ({type(err).__name__}: {str(err).splitlines()[0][:100] if str(err) else ''})",
        ) from None


def error_summary(error: BaseException) -> str:
    """The exception line of a trial's error (Ray's first lines only name the actor)."""
    return failure_cause(str(error)) or type(error).__name__


def trial_id_of(trial_dir: Path) -> str:
    """Trial folders read <trial id>_<variant>_seed<N> (`trial_folder_name`)."""
    match = TRIAL_DIR.match(trial_dir.name)
    return match.group(1) if match else trial_dir.name


def trial_status(outcome: str | None, finished: bool) -> str:
    """TERMINATED (trained and tested), STOPPED (early, by the scheduler), ERROR, or UNFINISHED (interrupted)."""
    if outcome == "error":
        return "ERROR"
    if outcome == "complete":
        return "TERMINATED" if finished else "STOPPED"
    return "UNFINISHED"


def result_rows(
    grid,
    outcomes: dict[str, str],
    tracker: SweepTracker | None,
    parent_id: str,
    base: dict[str, Any],
    run_ids: dict[str, str] | None = None,
    names: TrialNames | None = None,
) -> list[dict[str, Any]]:
    """One row per trial: status, variant, its run's name (`names`: the sweep's; without, by label), the flattened
    config, best dev BLEU, test BLEU, cost, run id (from `run_ids`, the tracking callback's, else searched: a trial
    tracked only by the driver before a resume)."""
    rows, run_ids, names = [], run_ids or {}, names or TrialNames(base, None)
    for result in grid:
        config = result.config or {}
        trial_id = (result.metrics or {}).get("trial_id") or trial_id_of(Path(result.path))
        history = result.metrics_dataframe
        epochs = history[history[FINAL] != 1] if history is not None and FINAL in history else history
        last = result.metrics or {}
        cfg, variant = describe_trial(config, base)
        params = cfg.flat()
        finished = bool(last.get(FINAL))
        row: dict[str, Any] = {
            "trial_id": trial_id,
            "status": trial_status(outcomes.get(trial_id, "error" if result.error else None), finished),
            "variant": variant,
            "run_name": names.of(config),
            "seed": params["train.seed"],
            **params,
            "epochs": int(epochs["epoch"].max()) if epochs is not None and len(epochs) else 0,
        }
        if epochs is not None and len(epochs):
            best = tested_epoch(epochs, cfg.train.early_stopping_metric)  # the epoch whose weights are tested
            row["bleu_dev"] = float(best["bleu_dev"])
            row["bleu_dev_by_epoch"] = [float(v) for v in epochs.sort_values("epoch")["bleu_dev"]]
            row.update({k: float(epochs[k].mean()) for k in AGGREGATED[MEAN] if k in epochs})
            row.update({k: float(best[k]) for k in AGGREGATED[BEST] if k in epochs and not math.isnan(best[k])})
        row.update({k: v for k, v in last.items() if finished and final_result(k)})
        if not finished and DEVICE_SO_FAR in last:  # stopped, failed or interrupted: what it spent up to then
            row[DEVICE_TOTAL] = float(last[DEVICE_SO_FAR])
        row["restores"] = int(last.get("restores", 0))
        row["error"] = error_summary(result.error) if result.error else None
        known = run_ids.get(trial_id)
        row["mlflow_run_id"] = (known or tracker.find_trial_run(parent_id, trial_id)) if tracker else None
        # the final checkpoint, below the sweep's folder: a model by tracking.models or `sweeper promote` reads it
        row["checkpoint"] = (
            posixpath.join(posixpath.basename(result.path), posixpath.basename(result.checkpoint.path))
            if result.checkpoint
            else None
        )
        rows.append(row)
    return rows


def tested_epoch(epochs, metric: str):
    """The epoch whose weights a trial tests: its best by train.early_stopping_metric (the first of a tie, as training
    keeps it); a trial from before chrF was scored every epoch has only BLEU's curve."""
    return epochs.loc[epochs[metric if metric in epochs else "bleu_dev"].idxmax()]


def results_table(
    rows: list[dict[str, Any]], significance: SignificanceSpec | None = None, spent: Spending | None = None
) -> pa.Table:
    """One row per trial; its schema's metadata names the significance test `sweeper summarize` marks with, and
    what the whole sweep spent (COMPUTE_KEY: device- and wall hours, its budget)."""
    columns = list(dict.fromkeys(k for row in rows for k in row))
    table = pa.table({c: [row.get(c) for row in rows] for c in columns}) if rows else pa.table({})
    metadata = {COMPUTE_KEY: json.dumps(spent.record()).encode()} if spent is not None else {}
    if significance is not None:
        test = {"method": significance.method, "resamples": significance.resamples}
        marks = f"{significance.method}: {SIGNIFICANCE_TESTS[significance.method]}"
        metadata[SIGNIFICANCE_KEY] = json.dumps({**test, "marks": marks}).encode()
    return table.replace_schema_metadata(metadata) if metadata else table


def print_best(rows: list[dict[str, Any]], metric: str, mode: str, limit: int = 20) -> None:
    ranked = sorted((r for r in rows if r.get(metric) is not None), key=lambda r: r[metric], reverse=mode == "max")
    shown = ranked[:limit]
    width = max([len("trial"), *(len(row["run_name"]) for row in shown)])  # names as MLflow's runs have them
    print(f"\n{'trial':<{width}} {'status':<10} {metric:>9} {'test avg':>9} {'params':>10}")
    for row in shown:
        test = row.get("bleu_test_avg")
        print(
            f"{row['run_name']:<{width}} {row['status']:<10} {row[metric]:>9.2f} "
            f"{'' if test is None else f'{test:.2f}':>9} {row.get('n_params') or '':>10}"
        )
    left_out = len(rows) - len(shown)
    if left_out:
        print(
            f"({left_out} more trial{'s' if left_out > 1 else ''} not shown: {len(ranked) - len(shown)} ranked "
            f"lower, {len(rows) - len(ranked)} without {metric}; all are in results.parquet)"
        )


def best_row(rows: list[dict[str, Any]], metric: str, mode: str) -> dict[str, Any] | None:
    """The finished trial with the best objective: the parent run's best trial, and the sweep's registered model
    unless tracking.models is none."""
    done = [r for r in rows if r["status"] == "TERMINATED" and r.get(metric) is not None and r.get("mlflow_run_id")]
    return (max if mode == "max" else min)(done, key=lambda r: r[metric]) if done else None


def record_best(
    tracker: SweepTracker, parent_id: str, rows: list[dict[str, Any]], metric: str, mode: str, names: str
) -> dict[str, Any] | None:
    """The best trial's metrics and run on the parent run, whatever tracking.models says (MLflow's UI compares
    sweeps by their parent runs), under `sweep/` names no trial has (a sweep begun with flat names: its own); the
    best row, None when no trial finished."""
    best = best_row(rows, metric, mode)
    if best is not None:
        tracker.log_metrics(parent_id, parent_metrics(best, names), step=0)
        tracker.set_tags(parent_id, {BEST_RUN_ID: best["mlflow_run_id"], BEST_VARIANT: best["variant"]})
    return best


def register_best(tracker: SweepTracker, best: dict[str, Any], metric: str, mode: str, owner: str | None) -> None:
    """The best trial's model in the registry (alias `best`); `owner`: the submitter granted the registered model
    (a sweep tracked under the cluster's account)."""
    description = (
        f"Best trial of sweep {tracker.experiment} by {mode} {metric} = {best[metric]:.2f}: {best['run_name']} "
        f"(trial {best['trial_id']}, variant {best['variant']}), test BLEU avg "
        f"{best.get('bleu_test_avg', float('nan')):.2f} (run {best['mlflow_run_id']}). Best-dev weights."
    )
    try:
        version = tracker.register_best(best["mlflow_run_id"], description, owner)
        print(
            f"model: registered as models:/{tracker.experiment}/{version} (alias @best); translate with "
            f"`nmt translate --model models:/{tracker.experiment}@best --tracking-uri {tracker.uri}`"
        )
    except Exception as err:  # noqa: BLE001 - a store without a registry must not fail a finished sweep
        print(
            f"model: not registered ({type(err).__name__}: {str(err).splitlines()[0][:160]}); the best trial's "
            f"model is at runs:/{best['mlflow_run_id']}/model"
        )


def tally(rows: list[dict[str, Any]]) -> dict[str, int]:
    return {s: sum(r["status"] == s for r in rows) for s in ("TERMINATED", "STOPPED", "ERROR", "UNFINISHED")}


class Ending(NamedTuple):
    """How a sweep's run ended: its exit code, its trials' rows, and the summary written (None: none was)."""

    code: int
    rows: list[dict[str, Any]]
    summary: Any = None  # sweeper.summary.statistics.Summary


def finish(
    grid,
    callback: MlflowTrackingCallback,
    storage: Storage,
    tracker: SweepTracker,
    state: SweepState,
    accountant: ComputeWatch | None = None,
) -> int:
    """settle the sweep's results, then tell its webhook how it ended; exit 0 (some trial finished), 1 (none), 3
    (tracking writes wait in storage for `sweeper resume`), 130 (interrupted or stopped)."""
    ending = settle(grid, callback, storage, tracker, state, accountant)
    tell(state, ending, mlflow_link(state, tracker))
    return ending.code


def settle(
    grid,
    callback: MlflowTrackingCallback,
    storage: Storage,
    tracker: SweepTracker,
    state: SweepState,
    accountant: ComputeWatch | None,
) -> Ending:
    """results.parquet, the best trials, their models by tracking.models, the summary, the MLflow link, the storage
    and compute the sweep took."""
    experiment, parent_id, significance = storage.below(tracker.experiment), state.parent_run_id, state.significance
    record_finishing(experiment, state)
    names = callback.naming  # results.parquet's and the ranking's names, as MLflow's
    look = pending_look(state)  # a designed sweep's look: its trials lie in its own folder below the sweep's
    if not callback.flush(TRACKING_WAIT_S):  # results are safe in storage; MLflow gets them on resume
        rows = result_rows(grid, callback.outcomes, None, parent_id, state.base, names=names)
        rows = with_earlier_looks(experiment, state, below_look(rows, look))
        spent = sweep_spending(rows, state, accountant)
        experiment.write_parquet(results_table(rows, significance, spent), RESULTS_FILE)
        print(
            f"\ntracking server {tracker.uri} did not answer for {TRACKING_WAIT_S:.0f} s: "
            f"{len(callback.backlog)} tracking writes wait in {experiment.display(BACKLOG_FILE)}; once it "
            f"answers, `sweeper resume {tracker.experiment} --storage {storage.uri}` sends them"
        )
        record_end(experiment, None, state, 3, rows, callback.load(), spent)
        return Ending(3, rows)
    rows = result_rows(grid, callback.outcomes, tracker, parent_id, state.base, callback.run_ids(), names)
    rows = with_earlier_looks(experiment, state, below_look(rows, look))
    spent = sweep_spending(rows, state, accountant)
    table = results_table(rows, significance, spent)
    experiment.write_parquet(table, RESULTS_FILE)
    with tempfile.TemporaryDirectory() as folder:
        pq.write_table(table, Path(folder) / RESULTS_FILE)
        tracker.client.log_artifact(parent_id, str(Path(folder) / RESULTS_FILE))
    count = tally(rows)
    print_best(rows, state.metric, state.mode)
    print(
        f"\n{count['TERMINATED']}/{len(rows)} trials finished, {count['STOPPED']} stopped early, "
        f"{count['ERROR']} failed; results: {experiment.display(RESULTS_FILE)}"
    )
    unfinished = count["UNFINISHED"] + max(state.trials - len(rows), 0)  # Tune creates trials lazily
    if not unfinished:  # models and the registry when the sweep ends, not before each resume
        keep_models(tracker, experiment, rows, state, callback.names)
    ok = count["TERMINATED"] + count["STOPPED"]
    code = 130 if unfinished else 0 if ok else 1
    record_end(experiment, tracker, state, code, rows, callback.load(), spent)
    if unfinished:
        tracker.client.set_terminated(parent_id, "KILLED")
        print(f"MLflow: {mlflow_link(state, tracker)}")
        print(
            f"interrupted with {unfinished} of {state.trials} trials unfinished; continue with: "
            f"sweeper resume {tracker.experiment} --storage {storage.uri}"
        )
        return Ending(130, rows)
    tracker.client.set_terminated(parent_id, "FINISHED" if ok else "FAILED")
    summary = write_summary(experiment, tracker, parent_id) if count["TERMINATED"] else None
    print_links(state, tracker)
    return Ending(code, rows, summary)


def tell(state: SweepState, ending: Ending, link: str) -> None:
    """The webhook's messages (sweeper.running.webhook): how the sweep ended, with its verdict line and the answer
    (the summary's comparisons, as its headline words them, in plain text: a chat shows markdown's marks as they
    are), then each degeneracy warning of its summary; a receiver's failure is one line on the console."""
    from sweeper.summary.findings import degeneracy_warnings  # as write_summary imports the summary: at the end
    from sweeper.summary.headline import plain_lines, verdict_lines

    hook = Webhook(webhook_url(state.webhook))
    if not hook.url:
        return
    log = lambda line: print(line, file=console())  # noqa: E731 - one line, said once
    warnings = degeneracy_warnings(ending.summary) if ending.summary is not None else []
    answer = plain_lines(verdict_lines(ending.summary)) if ending.summary is not None else []
    verdict = verdict_line(state, ending)
    hook.notify(message(state.name, EVENTS[ending.code], verdict, link, answer=answer, warnings=len(warnings)), log)
    for warning in warnings:
        hook.notify(message(state.name, WARNING, verdict, link, warning=warning), log)


def verdict_line(state: SweepState, ending: Ending) -> str:
    """`finished: 6/6 trials finished, 0 stopped early, 0 failed; best bleu_dev 23.41 (SACT λ4 · seed 2), test
    BLEU avg 21.30`: what a message says of the sweep in one line."""
    count, best = tally(ending.rows), best_row(ending.rows, state.metric, state.mode)
    line = (
        f"{EVENTS[ending.code]}: {count['TERMINATED']}/{state.trials} trials finished, {count['STOPPED']} stopped "
        f"early, {count['ERROR']} failed"
    )
    if best is None:
        return line
    test = best.get("bleu_test_avg")
    return (
        line
        + f"; best {state.metric} {best[state.metric]:.2f} ({best['run_name']})"
        + (f", test BLEU avg {test:.2f}" if test is not None else "")
    )


def print_links(state: SweepState, tracker: SweepTracker) -> None:
    """The sweep's last lines: every trial's charts and translations (the ungrouped saved view, where it was
    written), then the comparison; on a database store each the `mlflow ui` command on the comparison's port."""
    link = mlflow_link(state, tracker)
    port = recorded_port(link)
    if translations := translations_link(tracker.client, tracker.uri, state.parent_run_id, port):
        trials = saved_pages(tracker.client, state.parent_run_id).trials
        print(f"every trial, a dot per seed and the parallel coordinates: {page(tracker.uri, trials, port)}")
        print(f"translations side by side (the first 10 trials by best dev BLEU): {translations}")
    print(f"MLflow: {link}")  # the sweep's last line: where to compare its trials


def below_look(rows: list[dict[str, Any]], look: str | None) -> list[dict[str, Any]]:
    """A look's rows with their checkpoints named from the sweep's folder (`look-4/<trial>/checkpoint_...`), where
    the models of `tracking.models` and `sweeper promote` read them (named from the look's folder, look 4's best
    models were looked for below the sweep's and not found)."""
    for row in rows if look else []:
        if row.get("checkpoint"):
            row["checkpoint"] = posixpath.join(look, row["checkpoint"])
    return rows


def with_earlier_looks(experiment: Storage, state: SweepState, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A designed sweep past its first look: its results hold every look's trials (each look is a Tune experiment
    of its own), this look's rows replacing any it wrote before it was interrupted."""
    if not state.record.get("looks") or not experiment.exists(RESULTS_FILE):
        return rows
    now = {row["trial_id"] for row in rows}
    earlier = experiment.read_parquet(RESULTS_FILE).to_pylist()
    return [row for row in earlier if row["trial_id"] not in now] + rows


def mlflow_link(state: SweepState, tracker: SweepTracker) -> str:
    """The link `sweeper run` recorded (the saved view's, or the plain one); a sweep started before it was
    recorded gets the plain runs table."""
    return state.record.get(LINK_KEY) or runs_link(tracker.uri, tracker.experiment_id, state.metric, state.mode)


def keep_models(
    tracker: SweepTracker, experiment: Storage, rows: list[dict[str, Any]], state: SweepState, names: str
) -> None:
    """`tracking.models: best`: each variant's best trial gets its model now; the best trial goes on the parent run
    (under the sweep's MLflow `names`), and its model (unless `none`) into the registry."""
    policy, metric, mode = state.models, state.metric, state.mode
    if policy == "best":
        sizes = log_best_models(tracker, experiment, rows, metric, mode)
        print(
            f"models: {len(sizes)} logged ({human(sum(sizes))}), each variant's best trial (tracking.models: best); "
            f"any other trial's: sweeper promote {tracker.experiment} TRIAL"
        )
    elif policy == "none":
        print(f"models: none logged (tracking.models: none); a trial's: sweeper promote {tracker.experiment} TRIAL")
    best = record_best(tracker, state.parent_run_id, rows, metric, mode, names)
    if best is not None and policy != "none":
        register_best(tracker, best, metric, mode, (state.job or {}).get("mlflow_user"))


def sweep_spending(rows: list[dict[str, Any]], state: SweepState, accountant: ComputeWatch | None) -> Spending | None:
    """What the sweep spent: its trials' device-seconds (results.parquet's `device_s`, or what the accountant saw
    where a stop cut an epoch short) and its wall time across its runs; None for a sweep driven without one."""
    if accountant is None:
        return None
    device_s = accountant.total({row["trial_id"]: row.get(DEVICE_TOTAL) or 0.0 for row in rows})
    return Spending(device_s, accountant.wall_s(), state.budget, state.budget_unit, accountant.device)


def compute_line(spent: Spending, trials: int) -> str:
    """`compute: 1.2 CPU core-hours over 6 trials (0.2 a trial), 0.35 h wall; budget 2 device-hours, 0.8 left`."""
    hours = spent.device_s / 3600
    line = (
        f"compute: {hours:.3g} {spent.device}-hours over {trials} trials ({hours / max(trials, 1):.3g} a trial), "
        f"{spent.wall_s / 3600:.3g} h wall"
    )
    if spent.budget is None:
        return line
    return line + f"; budget {spent.budget:g} {spent.unit.replace('_', '-')}, {spent.left_hours:.3g} left"


def record_finishing(experiment: Storage, state: SweepState) -> None:
    """status.json while the driver records the results: too late for `sweeper stop` to stop anything."""
    try:
        write_status(experiment, {"state": FINISHING, "trials": state.trials})
    except Exception as err:  # noqa: BLE001 - the status is a convenience
        print(f"note: the sweep's status was not recorded ({type(err).__name__}: {first_line(err)[:160]})")


def record_end(
    experiment: Storage,
    tracker: SweepTracker | None,
    state: SweepState,
    code: int,
    rows: list[dict[str, Any]],
    load: dict[str, Any],
    spent: Spending | None = None,
) -> None:
    """How the sweep ended, for `sweeper list | status` (status.json), and what it stores, what it cost and how its
    tracking went, printed and recorded (sweeper.json, the parent run's metrics); never fails the sweep."""
    usage = storage_usage(experiment, TRIAL_DIR)
    print(
        f"storage: {human(usage['bytes'])} in {experiment.uri} ({usage['trials']} trial folders, "
        f"{human(usage['trial_bytes_median'])} a trial, median; largest {human(usage['trial_bytes_max'])})"
    )
    if load["epochs"]:
        print(
            f"tracking: {load['epochs']} epochs reached MLflow {load['median_s']:.2f} s (median), "
            f"{load['p99_s']:.2f} s (p99) after their trial ended them; {load['failed_requests']} failed requests"
        )
    count, best = tally(rows), best_row(rows, state.metric, state.mode)
    status = {"state": ENDED[code], "trials": state.trials, "done": count["TERMINATED"] + count["STOPPED"]}
    status.update(failed=count["ERROR"], running=0, pending=count["UNFINISHED"] + max(state.trials - len(rows), 0))
    status.update(best=best[state.metric] if best else None, exit_code=code, tracking=load)
    if spent is not None:
        print(compute_line(spent, len(rows)))
        status["compute"] = spent.record()
    try:
        write_status(experiment, status)
        conditional_writes.write_record(experiment, state.written(storage=usage), STATE_FILE)
        if tracker is not None:
            mb = {"storage_mb": usage["bytes"] / 1e6, "storage_mb_per_trial": usage["trial_bytes_median"] / 1e6}
            hours = {} if spent is None else {"device_hours": spent.device_s / 3600, "wall_hours": spent.wall_s / 3600}
            tracker.log_metrics(state.parent_run_id, {**mb, **hours}, step=0)
    except Exception as err:  # noqa: BLE001 - the sweep's results are written; its record is a convenience
        print(f"note: the sweep's status was not recorded ({type(err).__name__}: {first_line(err)[:160]})")


def write_summary(experiment: Storage, tracker: SweepTracker, parent_id: str) -> Any:
    """The papers' tables at the end of a run, into storage beside results.parquet, and the console's end: the tables,
    then the verdict (sweeper.summary.headline); the Summary, or None where it could not be written: a summary
    problem never fails a finished sweep."""
    from sweeper.summary import render_markdown, summarize
    from sweeper.summary.headline import headline
    from sweeper.summary.report import changed_head
    from sweeper.summary.tables import render_metrics

    try:
        with tempfile.TemporaryDirectory() as folder:
            summary = summarize(tracker.experiment, tracker.uri, Path(folder), ["md"], run_id=parent_id)
            experiment.upload(Path(folder), SUMMARY_DIR)
        metrics = "" if summary.metric_table is None else "\n" + render_metrics(summary, summary.metric_table)
        verdict = changed_head(summary) + headline(summary, "summary.md (the next line)", fenced=False)
        print("\n" + render_markdown(summary) + metrics + "\n" + "".join(line + "\n" for line in verdict), end="")
        print(f"summary: {experiment.display(SUMMARY_DIR, 'summary.md')}")
    except Exception as err:  # noqa: BLE001 - reported, the sweep itself succeeded
        print(f"summary skipped: {err} (run `sweeper summarize {tracker.experiment}` to retry)")
        return None
    return summary
