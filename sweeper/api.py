"""The sweeper from Python, for notebooks and scripts, and the one path every `sweeper` subcommand takes: the CLI
parses its arguments, calls the function here of the same name, and prints what it returns.

    from sweeper import api
    sweep = api.run("search_spaces/quickstart.yaml", overrides={"base.train.epochs": 2}, storage="/tmp/sweeps")
    sweep.results.sort_values("bleu_dev")  # results.parquet as a pandas DataFrame
    api.translate(["how are you ?"], sweep.best_model_uri, tracking_uri=sweep.tracking_uri)

Every function first passes its arguments through `check_arguments` (the gate's rules for names, URIs, run ids,
storage, overrides; nmt_core/gates/gate.py), before anything is read or written; every error is a SweeperError whose
message is the line the CLI prints after `sweeper: error: `. Heavy imports (Ray, MLflow, torch) wait for the call:
importing this module stays cheap.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from nmt_core.config import ConfigError
from nmt_core.gates.deadline import LIGHT_COMMAND_S, SUMMARY_COMMAND_S, command_deadline
from nmt_core.gates.faults import exit_code, fault_line
from nmt_core.gates.gate import check_text, clip_path, one_line, output_folder, shown, write_file
from nmt_core.gates.settings import Bound, accept, declared, setting

if TYPE_CHECKING:
    import pandas as pd

    from sweeper.running.sweeps import SweepInfo
    from sweeper.space.spec import SchedulerSpec, SweepSpec
    from sweeper.storage.store import Storage
    from sweeper.summary import Summary

T = TypeVar("T")
MAX_ADDED = 8  # sweeps one summary joins (`--with`): a study and its added rows, not a catalogue
MAX_CHOSEN = 4  # settings `--choose` picks per row on dev: a rate, a warm-up; a search is a sweep's job
# Where sweeps are kept unless told: beside the caller; a submitted sweep's driver, in its user's home on the head
# (a relative folder there would land in Ray's per-job working dir). Here, not in sweeper/storage/store.py, so that
# `sweeper --help` needs no pyarrow.
DEFAULT_STORAGE = "./sweeps"
SUBMITTED_STORAGE = "~/sweeps"
STATUS = {0: "finished", 1: "failed", 3: "tracking pending", 130: "interrupted"}  # run_sweep's exit codes


class SweeperError(Exception):
    """Bad input, or a store, corpus or model that cannot be used: one line, and the CLI's exit code. `fault` holds
    an unforeseen exception it stands for (its traceback is for debugging, never shown unasked: it may carry a
    server's own text)."""

    def __init__(self, message: str, exit_code: int = 2, fault: BaseException | None = None):
        super().__init__(one_line(message))  # the gate out: one line, control characters escaped, bounded
        self.exit_code = exit_code
        self.fault = fault


def entry_point(function: Callable[..., T]) -> Callable[..., T]:
    """A public function of the API behind the last-resort handler: its arguments converted to plain values first
    (an object whose __fspath__, __iter__ or __str__ raises is refused, not trusted), and whatever it raises that is
    not a SweeperError becomes one (nmt_core/gates/faults.py: exit code 2 for a store or server that failed, 1 for a
    fault), raised without its chain so that no traceback shows a server's text; the original is `fault`."""

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> T:
        try:
            args = tuple(plain(value, function.__name__) for value in args)
            kwargs = {key: plain(value, function.__name__, key) for key, value in kwargs.items()}
            return function(*args, **kwargs)
        except SweeperError:
            raise
        except Exception as err:  # noqa: BLE001 - the last resort
            raise SweeperError(fault_line(err), exit_code(err), fault=err) from None

    return call


def plain(value: Any, source: str, key: str = "argument") -> Any:
    """An argument as a plain value: a str, int or float subclass as the base type (its own methods are never
    called), a path-like as its string, a list or tuple rebuilt from plain items; a mapping is checked as a file
    is, later. An object that fails to convert is refused as bad input."""
    try:
        if isinstance(value, (bool, type(None), Mapping)):
            return value
        for base, convert in ((str, str.__str__), (int, int.__int__), (float, float.__float__)):
            if isinstance(value, base):  # the base type's own conversion: a subclass's methods are not called
                return convert(value)
        if isinstance(value, os.PathLike):
            path = os.fspath(value)
            return str.__str__(path) if isinstance(path, str) else path
        if isinstance(value, (list, tuple)):
            base = list if isinstance(value, list) else tuple
            return base(plain(item, source, key) for item in base.__iter__(value))
        return value
    except SweeperError:
        raise
    except Exception as err:  # noqa: BLE001 - a hostile object
        raise SweeperError(
            f"{source}: {key}: must be a plain value (a string, number, path, list or mapping); its "
            f"{type(value).__name__} could not be read ({type(err).__name__})"
        ) from None


DRIVER_ENVIRONMENT = {
    # Tune warns about frequent experiment snapshots whenever trials are short; that is the expected case here
    "TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S": "0",
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",  # one bar per downloaded file is noise here
}


def configure_driver() -> None:
    """The sweep driver's defaults, set by the entry points (the CLI, run() and summarize()) and never at import:
    importing sweeper changes nothing in a process that embeds it; a value already set wins. MLflow's network
    calls are bounded by $NMT_SWEEPER_TIMEOUT (nmt_core/gates/gate.py): seconds, not minutes. The bound wraps requests,
    imported here: `sweeper --help` and `validate`, which call no server, never load it."""
    from nmt_core.gates.network import configure_network

    with one_error():
        configure_network(ConfigError)
    for key, value in DRIVER_ENVIRONMENT.items():
        os.environ.setdefault(key, value)


def within_command(command: str, default_s: float = LIGHT_COMMAND_S, extra_s: float = 0.0):
    """The command's one deadline (nmt_core/gates/deadline.py): every network call inside the block ends within
    $NMT_SWEEPER_COMMAND_TIMEOUT seconds (`default_s` unset) of its start. `sweeper run`, `resume` and `submit`
    take none: a sweep's calls keep their own deadlines for as long as it runs."""
    return command_deadline(command, default_s, ConfigError, extra_s)


BAD_INPUT_ELSEWHERE = {"nmt_core.data.corpora": "CorpusError", "nmt_core.training.checkpoint": "CheckpointError"}


def bad_input() -> tuple[type[Exception], ...]:
    """The errors whose message is one line naming what to fix (exit 2). A module not yet imported raised none of
    its errors, so its class is taken only once it is loaded: neither importing this module nor an error in a
    command that reads no corpus or checkpoint (`sweeper status` of a sweep not there) imports pyarrow or torch."""
    loaded = (getattr(sys.modules.get(module), name, None) for module, name in BAD_INPUT_ELSEWHERE.items())
    return (ConfigError, *(kind for kind in loaded if kind is not None))


@contextlib.contextmanager
def one_error(kinds: tuple[type[Exception], ...] = (), exit_code: int = 2) -> Iterator[None]:
    """The project's one-line errors (`kinds`, else bad input) as the API's one exception type."""
    try:
        yield
    except kinds or bad_input() as err:  # noqa: B030 (a tuple of exception classes, chosen at run time)
        raise SweeperError(str(err), exit_code) from err


@dataclass
class SweepResult:
    """One `run()`: its exit code as the CLI exits with it, and where everything it made is."""

    name: str
    exit_code: int  # 0 some trial finished, 1 none, 3 tracking writes wait in storage, 130 interrupted
    storage: str  # the sweep's folder: trials, results.parquet, summary/, sweep.log
    tracking_uri: str
    parent_run_id: str | None
    results: pd.DataFrame  # one row per trial (results.parquet)
    summary_path: str | None  # summary.md, written when some trial finished
    best_model_uri: str | None  # models:/<sweep>/<version> (registered), else models:/<model id>; None: no model

    @property
    def status(self) -> str:
        return STATUS.get(self.exit_code, f"exit {self.exit_code}")


@dataclass
class SummaryResult:
    """One `summarize()`: the tables as data and as Markdown, and the folder they were written to."""

    summary: Summary
    markdown: str
    folder: str


@entry_point
def load_space(space: str | Path | Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> SweepSpec:
    """A sweep YAML's path, or the same content as a mapping (labelled `<dict>` in errors), validated alike: a
    mapping is held to a file's limits (size, depth, no shared parts; nmt_core/gates/gate.py)."""
    from sweeper.space.spec import load_spec, spec_from_mapping

    with one_error():
        check_arguments("sweeper", space=space, overrides=overrides)
        pairs = list((overrides or {}).items())
        if isinstance(space, Mapping):
            return spec_from_mapping(space, pairs, "<dict>", label="overrides")
        return load_spec(os.fspath(space), pairs)


@dataclass
class Validation:
    """One `validate()`: the checked space and the plan, as lines for a person."""

    spec: SweepSpec
    lines: list[str]


@entry_point
def validate(space: str | Path | Mapping[str, Any], *, overrides: Mapping[str, Any] | None = None) -> Validation:
    """Check a space as `sweeper validate` does, and describe its plan: trials, resources, conditionals."""
    spec = load_space(space, overrides)
    with one_error():
        return Validation(spec, plan_lines(spec))


def plan_lines(spec: SweepSpec) -> list[str]:
    """What `sweeper validate` prints about a valid space: objective, resources, parameters, the plan."""
    lines = [
        f"{clip_path(spec.source)}: valid sweep {spec.name!r}",
        f"  algorithm {spec.search.algorithm}, scheduler {scheduler_words(spec.scheduler)}, {objective_words(spec)}",
        f"  resources per trial: {spec.cpu:g} CPU, {spec.gpu:g} GPU; retries {spec.max_retries}{budget_words(spec)}",
    ]
    lines += [
        f"  {p.key}: {p.kind} {p.values}" + (f"  if {p.condition}" if p.condition else "") for p in spec.parameters
    ]
    lines += optuna_plan(spec) if spec.search.algorithm == "optuna" else grid_plan(spec)
    if not spec.design.declared:
        return lines
    from sweeper.space.design import plan_lines as design_lines  # scipy's integration: only for a design

    return lines + design_lines(spec.design)


def budget_words(spec: SweepSpec) -> str:
    """`; budget 40 device-hours` where the space sets resources.budget."""
    budget = spec.resources.budget
    return "" if budget is None else f"; budget {budget:g} {spec.resources.budget_unit.replace('_', '-')}"


def objective_words(spec: SweepSpec) -> str:
    """`objective max bleu_dev`, or several: `objectives max bleu_dev, max tokens_per_s (a Pareto front)`."""
    if not spec.objectives:
        return f"objective {spec.mode} {spec.metric}"
    return "objectives " + ", ".join(f"{o.mode} {o.metric}" for o in spec.objectives) + " (a Pareto front)"


def scheduler_words(scheduler: SchedulerSpec) -> str:
    """The scheduler with the settings its type reads: what decides which trials stop or copy others is checked
    before a sweep spends its budget (PBT's synch changes which trials exploit, and when)."""
    if scheduler.type == "asha":
        return f"asha (grace period {scheduler.grace_period} epochs, reduction factor {scheduler.reduction_factor})"
    if scheduler.type == "hyperband":
        return f"hyperband (reduction factor {scheduler.reduction_factor})"
    if scheduler.type == "pbt":
        waits = "synchronous" if scheduler.synch else "asynchronous"
        mutated = ", ".join(scheduler.mutations) or "nothing"
        return (
            f"pbt ({waits}: every {scheduler.perturbation_interval} epochs the bottom {scheduler.quantile_fraction:g} "
            f"copy the top; mutates {mutated})"
        )
    return scheduler.type


def optuna_plan(spec: SweepSpec) -> list[str]:
    from sweeper.running.study import describe, study_url_in

    default = (Path(DEFAULT_STORAGE).resolve() / spec.name).as_posix()  # the sweep's folder at `run`'s default
    where = f" (with --storage {DEFAULT_STORAGE}; beside a SQLite tracking store when --storage is s3:// or gs://)"
    where = "" if spec.search.study_storage else where
    return [
        f"  plan: {spec.search.num_samples} trials suggested by Optuna's {spec.search.sampler} sampler "
        f"(at most {spec.search.max_concurrent} at once); conditionals are suggested only when active",
        f"  {describe(spec, study_url_in(spec, default, ''))}{where}",
    ]


def grid_plan(spec: SweepSpec) -> list[str]:
    from sweeper.space.spec import conditional_summary, count_grid, grid_product_size

    plans = spec.plan
    variants: dict[str, int] = {}
    for plan in plans:
        variants[plan.variant] = variants.get(plan.variant, 0) + 1
    return [
        f"  plan: {len(plans)} trials = {count_grid(spec)} configurations x {spec.search.num_samples} samples "
        f"x {spec.search.repeats} seeds (grid without conditionals: {grid_product_size(spec)})",
        *(f"  conditional: {line}" for line in conditional_summary(spec)),
        "  variants: " + ", ".join(f"{v} x{n}" for v, n in variants.items()),
    ]


@entry_point
def run(
    space: str | Path | Mapping[str, Any],
    *,
    overrides: Mapping[str, Any] | None = None,
    name: str | None = None,
    storage: str = DEFAULT_STORAGE,
    tracking_uri: str | None = None,
    address: str | None = None,
    verbose: bool = False,
) -> SweepResult:
    """Run a sweep as `sweeper run` does: our lines on stdout, Ray's in `<storage>/<name>/sweep.log` (and on
    stdout too with verbose); `overrides` are dotted YAML keys, e.g. {"base.train.epochs": 1}."""
    from sweeper.running.console import sweep_console
    from sweeper.running.runner import ray_for_one_sweep, run_sweep
    from sweeper.storage.store import open_storage

    configure_driver()
    with one_error():
        check_arguments(
            "sweeper run", name=name, storage=storage, tracking_uri=tracking_uri, address=address, verbose=verbose
        )
        spec = load_space(space, overrides)
        if name:
            spec.name = name
        experiment = open_storage(storage, "sweeper run").below(spec.name)  # the sweep takes its lock (runner.py)
        with sweep_console(experiment, verbose), ray_for_one_sweep():
            code = run_sweep(spec, storage, tracking_uri, address)
        return sweep_result(experiment, spec.name, code)


@entry_point
def resume(
    name: str,
    *,
    storage: str = DEFAULT_STORAGE,
    tracking_uri: str | None = None,
    address: str | None = None,
    verbose: bool = False,
    budget: float | None = None,
) -> SweepResult:
    """Finish an interrupted sweep as `sweeper resume` does: finished trials are kept, not re-run; `budget` (hours
    of the sweep's resources.budget_unit) replaces the one it ran with, e.g. to go on after it was spent."""
    from sweeper.running.console import sweep_console
    from sweeper.running.runner import ray_for_one_sweep, resume_sweep
    from sweeper.storage.store import open_storage

    configure_driver()
    with one_error():
        check_arguments(
            "sweeper resume",
            sweep=name,
            storage=storage,
            tracking_uri=tracking_uri,
            address=address,
            verbose=verbose,
            budget=budget,
        )
        experiment = open_storage(storage, "sweeper resume").below(name)  # the sweep takes its lock (runner.py)
        with sweep_console(experiment, verbose), ray_for_one_sweep():
            code = resume_sweep(name, storage, address, tracking_uri, budget)
        return sweep_result(experiment, name, code)


@entry_point
def extend(
    name: str,
    *,
    until_decided: bool = False,
    storage: str = DEFAULT_STORAGE,
    tracking_uri: str | None = None,
    address: str | None = None,
    verbose: bool = False,
    job: bool = False,
    wait: bool = False,
) -> SweepResult | int:
    """A designed sweep's next look as `sweeper extend` runs it: seeds for every row still in an undecided primary
    comparison; `until_decided`: look after look to a decision or the design's maximum (docs/sweeps.md). With
    `job`, as a Ray Job on the cluster whose dashboard `address` names (the job's exit code with `wait`)."""
    from sweeper.running.console import sweep_console
    from sweeper.running.extend import extend_sweep
    from sweeper.running.runner import ray_for_one_sweep
    from sweeper.running.submit import submit_extend
    from sweeper.storage.store import open_storage

    configure_driver()
    with one_error():
        check_arguments(
            "sweeper extend",
            sweep=name,
            storage=storage,
            tracking_uri=tracking_uri,
            address=address,
            verbose=verbose,
            wait=wait,
            ship_code=job,
        )
        if job:
            open_storage(storage, "sweeper extend")  # the scheme is checked here; the cluster opens it
            return submit_extend(name, address, storage, tracking_uri, until_decided, wait)
        experiment = open_storage(storage, "sweeper extend").below(name)
        with sweep_console(experiment, verbose), ray_for_one_sweep():
            code = extend_sweep(name, storage, address, tracking_uri, until_decided)
        return sweep_result(experiment, name, code)


@entry_point
def restore(
    space: str | Path | Mapping[str, Any],
    *,
    from_data: str,
    storage: str = DEFAULT_STORAGE,
    tracking_uri: str | None = None,
    verbose: bool = False,
) -> SweepResult:
    """Rebuild a designed sweep from the data its summary wrote (`from_data`: a summary folder or its data/), as
    `sweeper restore` does: its MLflow runs, sweeper.json and results.parquet, in new storage; `space` is the file it
    ran with (its design's digest must be the data's). `sweeper extend` then runs its next look."""
    from sweeper.running.console import sweep_console
    from sweeper.running.restore import restore_sweep
    from sweeper.storage.store import open_storage

    configure_driver()
    with one_error():
        check_arguments(
            "sweeper restore", storage=storage, tracking_uri=tracking_uri, verbose=verbose, from_data=from_data
        )
        spec = load_space(space)
        experiment = open_storage(storage, "sweeper restore").below(spec.name)  # the restore takes its lock
        with sweep_console(experiment, verbose):
            code = restore_sweep(spec, Path(from_data), storage, tracking_uri)
        return sweep_result(experiment, spec.name, code)


@entry_point
def submit(
    space: str | Path | Mapping[str, Any],
    *,
    overrides: Mapping[str, Any] | None = None,
    name: str | None = None,
    storage: str = SUBMITTED_STORAGE,
    tracking_uri: str | None = None,
    address: str | None = None,
    wait: bool = False,
    ship_code: bool = True,
) -> int:
    """Run a sweep on a Ray cluster as a Ray Job, as `sweeper submit` does; the job's exit code with `wait`."""
    from sweeper.running.submit import submit as submit_job
    from sweeper.storage.store import open_storage

    configure_driver()
    with one_error():
        check_arguments(
            "sweeper submit",
            name=name,
            storage=storage,
            tracking_uri=tracking_uri,
            address=address,
            wait=wait,
            ship_code=ship_code,
        )
        spec = load_space(space, overrides)
        open_storage(storage, "sweeper submit")  # the scheme is checked here; the cluster opens it
        if name:
            spec.name = name
        return submit_job(spec, address, storage, tracking_uri, wait, ship_code=ship_code)


@entry_point
def schema(out: str | Path | None = None) -> list[Path]:
    """Write the JSON Schemas of the sweep YAML and the trial config into `out` (default: the package's)."""
    from sweeper.space.schema import SCHEMA_DIR, write

    with one_error():
        check_arguments("sweeper schema", out=out)
        return write(Path(out) if out is not None else SCHEMA_DIR)


# ---- the gate for arguments: one check per kind of argument, whatever the command ----


@dataclass
class ValueArguments:
    """The API's arguments that are values rather than names, each declared once (nmt_core.gates.settings) and checked
    by that declaration under the flag a user types (FLAGS)."""

    tail: int | None = setting(
        None, "only the last N lines of a sweep's log", Bound(1, 1_000_000, note="the lines are held in memory")
    )
    wait_s: float = setting(0.0, "seconds `sweeper stop` waits for the driver", Bound(0, 86_400, note="a day"))
    format: str = setting("md", "the summary table's format", choices=("md", "csv", "latex"))
    verbose: bool = setting(False, "also show Ray's output")
    wait: bool = setting(False, "stream a submitted job's log and return its result")
    ship_code: bool = setting(True, "ship this checkout's code with a submitted job")


FLAGS = {"tail": "--tail", "wait_s": "--wait", "format": "--format"}  # the others are named as in Python


def _check_value(name: str) -> Callable[[Any, str], None]:
    """An argument checked by its declaration in ValueArguments, of its type already (passed on as given)."""

    def check(value: Any, source: str) -> None:
        accept(FLAGS.get(name, name), value, declared(ValueArguments)[name], source, ConfigError, exact=True)

    return check


def _check_run_id(value: Any, source: str, key: str = "--run-id") -> None:
    """An MLflow run id: 32 hex digits in MLflow's stores; letters, digits, '-' and '_' in any."""
    check_text(value, key, source, ConfigError, limit=64)
    if not (value.isascii() and value.replace("-", "").replace("_", "").isalnum()):
        raise ConfigError(key, f"must be an MLflow run id: letters and digits (got {shown(value)})", source)


def _check_overrides(value: Any, source: str) -> None:
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise ConfigError("overrides", f"must be a mapping of dotted keys to values (got {shown(value)})", source)


def _check_space(value: Any, source: str) -> None:
    if isinstance(value, Mapping):
        return  # checked as a file is, by spec_from_mapping
    if not isinstance(value, (str, os.PathLike)):
        raise ConfigError("space", f"must be a YAML file's path or a mapping (got {shown(value)})", source)
    check_text(os.fspath(value), "space", source, ConfigError)


def _check_resamples(value: Any, source: str) -> None:
    """--resamples: the space's significance.resamples, as that setting declares it."""
    from sweeper.space.spec import SPEC_SETTINGS, SpecError

    key = "significance.resamples"
    accept(key, value, SPEC_SETTINGS[key], f"{source} --resamples", SpecError, exact=True)


def _check_budget(value: Any, source: str) -> None:
    """--budget: the space's resources.budget, as that setting declares it."""
    from sweeper.space.spec import SPEC_SETTINGS, SpecError

    key = "resources.budget"
    accept(key, value, SPEC_SETTINGS[key], f"{source} --budget", SpecError)


def _check_trial(value: Any, source: str) -> None:
    from sweeper.running.models import TRIAL_ID_RULE

    if not isinstance(value, str) or not TRIAL_ID_RULE.fullmatch(value):
        raise ConfigError("TRIAL", f"must be a trial id such as 8f3a1_00004 (got {shown(value)})", source)


def _check_added(value: Any, source: str) -> None:
    """`--with`: sweep names, each once, each at its newest run or at `NAME@RUN_ID` (an earlier run of a row rerun
    since); summarize also refuses the summarised sweep's own: its trials are in."""
    if not isinstance(value, (list, tuple)) or len(value) > MAX_ADDED:
        raise ConfigError("--with", f"must be at most {MAX_ADDED} sweep names (got {shown(value)})", source)
    names = []
    for other in value:
        check_text(other, "--with", source, ConfigError, limit=200)
        name, run_id = added_sweep(other)
        _check_name("--with")(name, source)
        if run_id is not None:
            _check_run_id(run_id, source, "--with")
        names.append(name)
    if len(set(names)) < len(names):
        raise ConfigError("--with", "must name each sweep once", source)


def added_sweep(value: str) -> tuple[str, str | None]:
    """`--with OTHER` (its newest run) or `--with OTHER@RUN_ID`: the sweep's name and its parent run, if given
    (a sweep name has no `@`)."""
    name, at, run_id = value.partition("@")
    return name, run_id if at else None


def _check_chosen(value: Any, source: str) -> None:
    """`--choose`: trial settings, each once; never the seed (what a row's spread is measured over)."""
    from nmt_core.config import TrialConfig
    from sweeper.summary.records import SEED_KEY

    if not isinstance(value, (list, tuple)):
        raise ConfigError("--choose", f"must be a list of trial settings (got {shown(value)})", source)
    if len(value) > MAX_CHOSEN:
        raise ConfigError("--choose", f"must be at most {MAX_CHOSEN} settings (got {shown(value)})", source)
    settings = set(TrialConfig().flat()) - {SEED_KEY}
    for key in value:
        if not isinstance(key, str) or key not in settings:
            allowed = f"must be a trial setting other than {SEED_KEY}, such as train.lr"
            raise ConfigError("--choose", f"{allowed} (got {shown(key)})", source)
    if len(set(value)) < len(value):
        raise ConfigError("--choose", "must name each setting once", source)


def _check_name(key: str) -> Callable[[Any, str], None]:
    def check(value: Any, source: str) -> None:
        from sweeper.space.spec import check_name

        check_name(value, key, source)

    return check


def _check_uri(kind: str, key: str, named: str | None = None) -> Callable[[Any, str], None]:
    def check(value: Any, source: str) -> None:
        from nmt_core.gates.credentials import check_uri

        check_uri(value, kind, key, named or source)

    return check


def _check_path(key: str) -> Callable[[Any, str], None]:
    def check(value: Any, source: str) -> None:
        check_text(os.fspath(value) if isinstance(value, os.PathLike) else value, key, source, ConfigError)

    return check


ARGUMENTS: dict[str, Callable[[Any, str], None]] = {
    "name": _check_name("--name"),  # a new sweep's name
    "sweep": _check_name("NAME"),  # an existing sweep, named on the command line
    "storage": _check_uri("storage", "--storage"),  # a folder or an object store's URI
    "tracking_uri": _check_uri("tracking", "tracking.uri", "--tracking-uri"),
    "address": _check_uri("ray", "--address"),
    "run_id": _check_run_id,
    "added": _check_added,
    "chosen": _check_chosen,
    "space": _check_space,
    "overrides": _check_overrides,
    "resamples": _check_resamples,
    "budget": _check_budget,
    "format": _check_value("format"),
    "tail": _check_value("tail"),
    "wait_s": _check_value("wait_s"),
    "trial": _check_trial,
    "out": _check_path("--out"),
    "from_data": _check_path("--from-data"),
    "verbose": _check_value("verbose"),
    "wait": _check_value("wait"),
    "ship_code": _check_value("ship_code"),
}
# what a command cannot do without: None is refused, not skipped
REQUIRED = {"sweep": "NAME", "space": "space", "trial": "TRIAL", "from_data": "--from-data"}
# what a command reads from the environment when an argument it takes is not given, checked like that argument
ENVIRONMENT: dict[str, tuple[str, Callable[[Any, str], None]]] = {
    "address": ("RAY_ADDRESS", _check_uri("ray", "RAY_ADDRESS")),
    "tracking_uri": ("MLFLOW_TRACKING_URI", _check_uri("tracking", "tracking.uri", "MLFLOW_TRACKING_URI")),
}


def check_arguments(source: str, **values: Any) -> None:
    """The gate for a command's arguments, before anything is read or written: each value given passes the check of
    its kind (ARGUMENTS), and an environment variable read in place of one not given (ENVIRONMENT) passes the same
    check. A new command names its arguments here and so gets their checks."""
    for kind, value in values.items():
        if kind not in ARGUMENTS:
            raise TypeError(f"check_arguments: no check for {kind!r}")  # a programming error, not a user's
        if value is None and kind in REQUIRED:
            raise ConfigError(REQUIRED[kind], "is required (got None)", source)
        if value is not None:
            check_one(kind, value, source)
        elif kind in ENVIRONMENT and os.environ.get(ENVIRONMENT[kind][0]):
            variable, check = ENVIRONMENT[kind]
            check(os.environ[variable], source)


def check_one(kind: str, value: Any, source: str) -> None:
    """One argument's check; an object that breaks it (its __eq__, __iter__ or __len__ raising) is refused as bad
    input, named by its type, not let through as its own exception."""
    try:
        ARGUMENTS[kind](value, source)
    except ConfigError:
        raise
    except Exception as err:  # noqa: BLE001 - never trusted to behave
        raise ConfigError(kind, f"cannot be read ({type(value).__name__}: {type(err).__name__})", source) from None


def sweep_result(experiment: Storage, name: str, code: int) -> SweepResult:
    """What a finished `run_sweep` left: sweeper.json, results.parquet, summary.md, the parent run's best trial."""
    import pandas as pd

    from sweeper.storage.stored import read_state
    from sweeper.tracking.metrics import RESULTS_FILE, SUMMARY_DIR

    state = read_state(experiment)
    results = experiment.read_parquet(RESULTS_FILE).to_pandas() if experiment.exists(RESULTS_FILE) else pd.DataFrame()
    written = code == 0 and experiment.exists(SUMMARY_DIR, "summary.md")  # not an earlier run's
    logged = code == 0 and state.models != "none"  # tracking.models: none logs no model (the best run is tagged)
    best = best_model_uri(state.tracking_uri, state.parent_run_id, name) if logged else None
    return SweepResult(
        name,
        code,
        experiment.uri,
        state.tracking_uri,
        state.parent_run_id,
        results,
        experiment.display(SUMMARY_DIR, "summary.md") if written else None,
        best,
    )


def best_model_uri(tracking_uri: str, parent_run_id: str, name: str) -> str | None:
    """The registered version of the sweep's best trial (the parent run's `sweeper.best_run_id`), else its run's
    model; None when no trial finished."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    best = client.get_run(parent_run_id).data.tags.get("sweeper.best_run_id")
    if best is None:
        return None
    try:
        versions = client.search_model_versions(f"name = '{name}' and run_id = '{best}'")
    except Exception:  # noqa: BLE001 - a store without a registry: the run's model
        versions = []
    if versions:
        return f"models:/{name}/{versions[0].version}"
    experiment = client.get_run(best).info.experiment_id  # the run's LoggedModel, whatever its name
    models = client.search_logged_models([experiment], filter_string=f"source_run_id = '{best}'", max_results=1)
    return f"models:/{models[0].model_id}" if models else f"runs:/{best}/model"


def added_sweeps(name: str, added: tuple[str, ...]) -> tuple[tuple[str, str | None], ...]:
    """`--with`'s sweeps as (name, parent run or None): others than the one summarised, whose trials are in."""
    added_runs = tuple(added_sweep(other) for other in added)
    if name in (other for other, _ in added_runs):
        raise ConfigError("--with", f"must name other sweeps than {name!r}: its own trials are in", "sweeper summarize")
    return added_runs


@entry_point
def summarize(
    name: str,
    *,
    storage: str = DEFAULT_STORAGE,
    tracking_uri: str | None = None,
    out: str | None = None,
    format: str = "md",
    resamples: int | None = None,
    run_id: str | None = None,
    added: tuple[str, ...] = (),
    chosen: tuple[str, ...] = (),
) -> SummaryResult:
    """The papers' tables and figures of a finished sweep, as `sweeper summarize` writes them: into `out`, else
    beside results.parquet in storage; the tracking URI defaults to the one the sweep ran with. `added` names
    sweeps in the same tracking store whose trials join this one's (`--with`: a control row run afterwards),
    each at its newest run or at `NAME@RUN_ID`; `chosen` settings (`--choose train.lr`) are chosen per row on dev."""
    configure_driver()
    with one_error():  # bad input is refused before anything is read, written or (slowly) imported
        check_arguments(
            "sweeper summarize",
            sweep=name,
            storage=storage,
            tracking_uri=tracking_uri,
            out=out,
            format=format,
            resamples=resamples,
            run_id=run_id,
            added=added,
            chosen=chosen,
        )
        added_runs = added_sweeps(name, added)
    from nmt_core.gates.gate import check_output_folder
    from sweeper.storage.store import open_storage
    from sweeper.summary import SummaryError, render_markdown
    from sweeper.summary import summarize as write_summary
    from sweeper.tracking.metrics import SUMMARY_DIR

    with (
        one_error(),
        one_error((SummaryError,), exit_code=1),  # no finished trial yet: exit 1
        within_command("sweeper summarize", SUMMARY_COMMAND_S),
    ):
        experiment = open_storage(storage, "sweeper summarize").below(name)
        uri = summary_store(experiment, name, tracking_uri)
        # checked now, made when the summary is there: a summary that fails leaves no folder behind
        target = check_output_folder(out, "--out", "sweeper summarize", ConfigError) if out else None
        with tempfile.TemporaryDirectory() as staging:  # written here, then into storage or --out
            folder = Path(staging)
            joined = {"run_id": run_id, "added": added_runs, "chosen": tuple(chosen)}
            summary = write_summary(name, uri, folder, [format], resamples, **joined)
            if target is None:
                experiment.upload(folder, SUMMARY_DIR)
            else:
                copy_folder(folder, target, "--out")
        return SummaryResult(summary, render_markdown(summary), out or experiment.display(SUMMARY_DIR))


@entry_point
def summarize_from_data(
    name: str, data: str, *, out: str | None = None, format: str = "md", resamples: int | None = None
) -> SummaryResult:
    """`sweeper summarize NAME --from-data DIR`: every table and figure recomputed from a summary's data/ folder
    alone (no tracking store), into `out` (default: ./NAME-from-data)."""
    from nmt_core.gates.gate import check_output_folder
    from sweeper.summary import SummaryError, render_markdown, summarize_data

    folder = out or f"{name}-from-data"
    with one_error():
        check_arguments("sweeper summarize", sweep=name, out=folder, format=format, resamples=resamples)
        target = check_output_folder(folder, "--out", "sweeper summarize", ConfigError)
    with one_error(), one_error((SummaryError,), exit_code=1):
        with tempfile.TemporaryDirectory() as staging:
            summary = summarize_data(name, Path(data), Path(staging), [format], resamples)
            copy_folder(Path(staging), target, "--out")
        return SummaryResult(summary, render_markdown(summary), folder)


def summary_store(experiment: Storage, name: str, tracking_uri: str | None) -> str:
    """The tracking store a summary reads: --tracking-uri, $MLFLOW_TRACKING_URI, the one sweeper.json recorded,
    else the default; it must answer, and a SQLite store must exist (a summary never creates one)."""
    from nmt_core.gates.tracking_store import choose_tracking_uri
    from sweeper.storage.stored import STATE_FILE, read_state
    from sweeper.tracking.sqlite_urls import resolve_uri
    from sweeper.tracking.store import check_reachable

    recorded = read_state(experiment).tracking_uri if experiment.exists(STATE_FILE) else None
    uri = resolve_uri(choose_tracking_uri(tracking_uri, recorded))
    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).exists():  # never create one
        raise ConfigError(
            "NAME",
            f"no sweep named {name!r}: no {experiment.display(STATE_FILE)} and no tracking store "
            f"{clip_path(uri.removeprefix('sqlite:///'))} (pass the --storage or --tracking-uri the sweep ran with)",
            "sweeper summarize",
        )
    check_reachable(uri)  # an existing SQLite file only if it is an MLflow store (never migrated, never made one)
    return uri


def copy_folder(source: Path, target: Path, key: str) -> None:
    """The files of `source` into `target` through the gate's writes: never through a link, never over something
    that is not a regular file."""
    for path in sorted(source.rglob("*")):
        if path.is_file() and not path.is_symlink():
            folder = output_folder(target / path.parent.relative_to(source), key, "sweeper summarize", ConfigError)
            write_file(folder, path.name, path.read_bytes(), ConfigError, key)


@entry_point
def translate(
    sentences: list[str], model_uri: str, *, beam_size: int | None = None, tracking_uri: str | None = None
) -> list[str]:
    """Translate raw source sentences with an MLflow model (models:/<sweep>@best, models:/<sweep>/<version>,
    runs:/<id>/model) as `nmt translate --model` does; beam_size defaults to the model's decode.beam_size."""
    from nmt_core.mlflow_model import downloaded_model
    from nmt_core.training import checkpoint
    from nmt_core.training.inference import check_beam_size, check_sentences, translate_lines

    configure_driver()
    with one_error():  # a model URI or store that gives no model, too
        check_sentences(sentences, "sentences", "translate")
        if beam_size is not None:
            check_beam_size(beam_size, "beam_size", "translate")
        check_arguments("translate", tracking_uri=tracking_uri)
        with downloaded_model(model_uri, tracking_uri) as path:  # the copy is removed once the model is loaded
            loaded = checkpoint.load_for_inference(path)
        return translate_lines(list(sentences), loaded, beam_size or loaded.config.decode.beam_size)[0]


@dataclass
class StopResult:
    """One `stop_sweep()`: the sweep as it is afterwards, and what was done (the line `sweeper stop` prints)."""

    sweep: SweepInfo
    message: str


@dataclass
class SweepLog:
    """One `sweep_logs()`: where the log came from (a Ray job, or sweep.log in storage) and its text."""

    source: str
    text: str


@entry_point
def sweep_infos(storage: str = DEFAULT_STORAGE, address: str | None = None) -> list[SweepInfo]:
    """Every sweep in `storage`, and on the Ray cluster at `address` (else $RAY_ADDRESS, where set), as `sweeper
    list` prints them: state (running, waiting for resources, stopping, stopped, finished, failed), trials planned,
    done, running, failed and pending, the best objective so far, who started it and when, its Ray job. Plain
    records (`list_sweeps` is the same as a DataFrame; `sweeper list` needs no pandas). A cluster that does not
    answer raises SweeperError (exit code 2)."""
    import sweeper.running.sweeps as sweeps

    configure_driver()
    with one_error():
        check_arguments("sweeper list", storage=storage, address=address)
        with within_command("sweeper list"):
            return sweeps.list_sweeps(storage, address)


@entry_point
def list_sweeps(storage: str = DEFAULT_STORAGE, address: str | None = None) -> pd.DataFrame:
    """`sweep_infos` as a DataFrame, one row per sweep (without the board: `sweep_status` has it), its times as
    UTC timestamps."""
    import pandas as pd

    from sweeper.running.sweeps import SweepInfo

    rows = [info.row() for info in sweep_infos(storage, address)]
    columns = [f for f in SweepInfo.__dataclass_fields__ if f != "board"]
    frame = pd.DataFrame(rows, columns=columns)
    for column in ("started_at", "updated_at"):
        frame[column] = pd.to_datetime(frame[column], utc=True)
    return frame


@entry_point
def sweep_status(name: str, *, storage: str = DEFAULT_STORAGE, address: str | None = None) -> SweepInfo:
    """One sweep by its name, as `sweeper status` shows it: its state, counts and best so far, and the lines of its
    progress board as its driver last wrote them (`board`, `updated_at`)."""
    import sweeper.running.sweeps as sweeps

    configure_driver()
    with one_error():
        check_arguments("sweeper status", sweep=name, storage=storage, address=address)
        with within_command("sweeper status"):
            return sweeps.find(name, storage, address, "sweeper status")[0]


@entry_point
def stop_sweep(
    name: str, *, storage: str = DEFAULT_STORAGE, address: str | None = None, wait_s: float = 0.0
) -> StopResult:
    """Stop a running sweep gracefully, as `sweeper stop` does: Ray Tune saves the experiment, running trials keep
    the checkpoint of their last finished epoch, and `resume` finishes the sweep later. With `wait_s`, wait up to
    that long for its driver to have stopped."""
    import sweeper.running.sweeps as sweeps

    configure_driver()
    with one_error():
        check_arguments("sweeper stop", sweep=name, storage=storage, address=address, wait_s=wait_s)
        with within_command("sweeper stop", extra_s=wait_s):  # --wait's seconds are waited on purpose
            return StopResult(*sweeps.stop(name, storage, address, wait_s))


@entry_point
def sweep_logs(
    name: str, *, storage: str = DEFAULT_STORAGE, address: str | None = None, tail: int | None = None
) -> SweepLog:
    """A sweep's log, as `sweeper logs` prints it: a submitted sweep's Ray job log, else sweep.log in storage."""
    import sweeper.running.sweeps as sweeps

    configure_driver()
    with one_error():
        check_arguments("sweeper logs", sweep=name, storage=storage, address=address, tail=tail)
        with within_command("sweeper logs"):
            return SweepLog(*sweeps.logs(name, storage, address, tail))


@entry_point
def promote(
    name: str, trial: str, *, storage: str = DEFAULT_STORAGE, tracking_uri: str | None = None
) -> dict[str, Any]:
    """Log the MLflow model of a trial that has none (`tracking.models: best | none`) from its final checkpoint in
    storage, as `sweeper promote` does; returns its run id, model id (models:/<id>) and size in bytes."""
    from sweeper.running.models import promote as log_trial_model

    configure_driver()
    with one_error():
        check_arguments("sweeper promote", sweep=name, trial=trial, storage=storage, tracking_uri=tracking_uri)
        return log_trial_model(name, trial, storage, tracking_uri)
