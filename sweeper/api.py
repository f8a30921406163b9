"""The sweeper from Python, for notebooks and scripts: what `sweeper run` and `sweeper summarize` do, returning
objects; the CLI calls these functions (one code path) and prints.

    from sweeper import api
    sweep = api.run("search_spaces/quickstart.yaml", overrides={"base.train.epochs": 2}, storage="/tmp/sweeps")
    sweep.results.sort_values("bleu_dev")  # results.parquet as a pandas DataFrame
    api.translate(["how are you ?"], sweep.best_model_uri, tracking_uri=sweep.tracking_uri)

Every error is a SweeperError whose message is the line the CLI prints after `sweeper: error: `.
Heavy imports (Ray, MLflow, torch) wait for the call: importing this module stays cheap.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nmt_core.config import ConfigError

if TYPE_CHECKING:
    import pandas as pd

    from sweeper.space import SweepSpec
    from sweeper.storage import Storage
    from sweeper.summary import Summary
    from sweeper.sweeps import SweepInfo

STATUS = {0: "finished", 1: "failed", 3: "tracking pending", 130: "interrupted"}  # run_sweep's exit codes


class SweeperError(Exception):
    """Bad input, or a store, corpus or model that cannot be used: one line, and the CLI's exit code."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code


DRIVER_ENVIRONMENT = {
    # fail over in seconds, not minutes (MLflow's own defaults retry 7 times with a growing backoff)
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "20",
    # Tune warns about frequent experiment snapshots whenever trials are short; that is the expected case here
    "TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S": "0",
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",  # one bar per downloaded file is noise here
}


def configure_driver() -> None:
    """The sweep driver's defaults, set by the entry points (the CLI, run() and summarize()) and never at import:
    importing sweeper changes nothing in a process that embeds it; a value already set wins."""
    for key, value in DRIVER_ENVIRONMENT.items():
        os.environ.setdefault(key, value)


def bad_input() -> tuple[type[Exception], ...]:
    """The errors whose message is one line naming what to fix (exit 2); read when one is raised, so that importing
    this module imports no corpus code (pyarrow)."""
    from nmt_core.corpora import CorpusError

    return ConfigError, CorpusError


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
    best_model_uri: str | None  # models:/<sweep>/<version> (registered), else runs:/<id>/model

    @property
    def status(self) -> str:
        return STATUS.get(self.exit_code, f"exit {self.exit_code}")


@dataclass
class SummaryResult:
    """One `summarize()`: the tables as data and as Markdown, and the folder they were written to."""

    summary: Summary
    markdown: str
    folder: str


def load_space(space: str | Path | Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> SweepSpec:
    """A sweep YAML's path, or the same content as a mapping (labelled `<dict>` in errors), validated alike."""
    from sweeper.space import load_spec, spec_from_mapping

    pairs = list((overrides or {}).items())
    with one_error():
        if isinstance(space, Mapping):
            return spec_from_mapping(space, pairs, "<dict>", label="overrides")
        return load_spec(str(space), pairs)


def run(
    space: str | Path | Mapping[str, Any],
    *,
    overrides: Mapping[str, Any] | None = None,
    name: str | None = None,
    storage: str = "./sweeps",
    tracking_uri: str | None = None,
    address: str | None = None,
    verbose: bool = False,
) -> SweepResult:
    """Run a sweep as `sweeper run` does: our lines on stdout, Ray's in `<storage>/<name>/sweep.log` (and on
    stdout too with verbose); `overrides` are dotted YAML keys, e.g. {"base.train.epochs": 1}."""
    from sweeper.console import sweep_console
    from sweeper.runner import run_sweep
    from sweeper.storage import open_storage

    configure_driver()
    with one_error():
        check_arguments(name, tracking_uri, address, "--name", "sweeper run", uses_ray=True)
        spec = load_space(space, overrides)
        if name:
            spec.name = name
        experiment = open_storage(storage, "sweeper run").below(spec.name)
        with sweep_console(experiment, verbose):
            code = run_sweep(spec, storage, tracking_uri, address)
        return sweep_result(experiment, spec.name, code)


def check_arguments(
    name: str | None, tracking_uri: str | None, address: str | None, name_key: str, source: str, uses_ray: bool = False
) -> None:
    """A sweep's name, the tracking URI and the Ray address (a command that uses Ray: --address, else
    $RAY_ADDRESS, as Ray reads it), before anything is read or written (--storage is checked where it is opened):
    the name rule, and no credential in a URI."""
    from nmt_core.credentials import check_uri
    from sweeper.space import check_name

    if name is not None:
        check_name(name, name_key, source)
    if tracking_uri:
        check_uri(tracking_uri, "tracking", "tracking.uri", "--tracking-uri")
    if address:
        check_uri(address, "ray", "--address", source)
    elif uses_ray and os.environ.get("RAY_ADDRESS"):
        check_uri(os.environ["RAY_ADDRESS"], "ray", "RAY_ADDRESS", source)


def sweep_result(experiment: Storage, name: str, code: int) -> SweepResult:
    """What a finished `run_sweep` left: sweeper.json, results.parquet, summary.md, the parent run's best trial."""
    import pandas as pd

    from sweeper.runner import RESULTS_FILE, SUMMARY_DIR, read_state

    state = read_state(experiment)
    results = experiment.read_parquet(RESULTS_FILE).to_pandas() if experiment.exists(RESULTS_FILE) else pd.DataFrame()
    written = code == 0 and experiment.exists(SUMMARY_DIR, "summary.md")  # not an earlier run's
    best = best_model_uri(state["tracking_uri"], state["parent_run_id"], name) if code == 0 else None
    return SweepResult(
        name,
        code,
        experiment.uri,
        state["tracking_uri"],
        state["parent_run_id"],
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
    return f"models:/{name}/{versions[0].version}" if versions else f"runs:/{best}/model"


def summarize(
    name: str,
    *,
    storage: str = "./sweeps",
    tracking_uri: str | None = None,
    out: str | None = None,
    format: str = "md",
    resamples: int | None = None,
    run_id: str | None = None,
) -> SummaryResult:
    """The papers' tables and figures of a finished sweep, as `sweeper summarize` writes them: into `out`, else
    beside results.parquet in storage; the tracking URI defaults to the one the sweep ran with."""
    from sweeper.space import SignificanceSpec

    configure_driver()
    with one_error():  # bad input is refused before anything is read, written or (slowly) imported
        check_arguments(name, tracking_uri, None, "NAME", "sweeper summarize")
        if resamples is not None:
            SignificanceSpec(resamples=resamples).check("sweeper summarize --resamples")
    from nmt_core.mlflow_model import choose_tracking_uri
    from sweeper.runner import STATE_FILE, SUMMARY_DIR, read_state
    from sweeper.storage import open_storage
    from sweeper.summary import SummaryError, render_markdown
    from sweeper.summary import summarize as write_summary
    from sweeper.tracking import check_reachable, resolve_uri

    with one_error(), one_error((SummaryError,), exit_code=1):  # no finished trial yet: exit 1
        experiment = open_storage(storage, "sweeper summarize").below(name)
        has_state = experiment.exists(STATE_FILE)
        recorded = read_state(experiment)["tracking_uri"] if has_state else None
        uri = resolve_uri(choose_tracking_uri(tracking_uri, recorded))
        check_reachable(uri)
        if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).exists():  # never create one
            raise ConfigError(
                "NAME",
                f"no sweep named {name!r}: no {experiment.display(STATE_FILE)} and no tracking "
                f"store {uri.removeprefix('sqlite:///')} (pass the --storage or --tracking-uri the sweep "
                "ran with)",
                "sweeper summarize",
            )
        with tempfile.TemporaryDirectory() as staging:
            folder = Path(out) if out else Path(staging)  # by default into storage, beside results.parquet
            summary = write_summary(name, uri, folder, [format], resamples, run_id=run_id)
            if not out:
                experiment.upload(folder, SUMMARY_DIR)
        return SummaryResult(summary, render_markdown(summary), out or experiment.display(SUMMARY_DIR))


def translate(
    sentences: list[str], model_uri: str, *, beam_size: int | None = None, tracking_uri: str | None = None
) -> list[str]:
    """Translate raw source sentences with an MLflow model (models:/<sweep>@best, models:/<sweep>/<version>,
    runs:/<id>/model) as `nmt translate --model` does; beam_size defaults to the model's decode.beam_size."""
    from nmt_core import checkpoint
    from nmt_core.inference import translate_lines
    from nmt_core.mlflow_model import download_model

    with one_error((*bad_input(), checkpoint.CheckpointError)):  # a model URI or store that gives no model
        if isinstance(sentences, str) or not all(isinstance(s, str) for s in sentences):
            raise ConfigError("sentences", "must be a list of strings", "translate")
        if beam_size is not None and (not isinstance(beam_size, int) or beam_size < 1):
            raise ConfigError("beam_size", f"must be an integer >= 1 (got {beam_size!r:.100})", "translate")
        loaded = checkpoint.load_for_inference(download_model(model_uri, tracking_uri))
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


def list_sweeps(storage: str = "./sweeps", address: str | None = None) -> pd.DataFrame:
    """Every sweep in `storage`, and on the Ray cluster at `address` (else $RAY_ADDRESS, where set): one row each,
    as `sweeper list` shows them: state (running, waiting for resources, stopping, stopped, finished, failed),
    trials planned, done, running, failed and pending, the best objective so far, who started it and when, its Ray
    job. A cluster that does not answer raises SweeperError (exit code 2)."""
    import pandas as pd

    from sweeper import sweeps

    configure_driver()
    with one_error():
        check_arguments(None, None, address, "NAME", "sweeper list", uses_ray=True)
        rows = [info.row() for info in sweeps.list_sweeps(storage, address)]
    columns = [f for f in sweeps.SweepInfo.__dataclass_fields__ if f != "board"]
    frame = pd.DataFrame(rows, columns=columns)
    for column in ("started_at", "updated_at"):
        frame[column] = pd.to_datetime(frame[column], utc=True)
    return frame


def sweep_status(name: str, *, storage: str = "./sweeps", address: str | None = None) -> SweepInfo:
    """One sweep by its name, as `sweeper status` shows it: its state, counts and best so far, and the lines of its
    progress board as its driver last wrote them (`board`, `updated_at`)."""
    from sweeper import sweeps

    configure_driver()
    with one_error():
        check_arguments(name, None, address, "NAME", "sweeper status", uses_ray=True)
        return sweeps.find(name, storage, address, "sweeper status")[0]


def stop_sweep(name: str, *, storage: str = "./sweeps", address: str | None = None, wait_s: float = 0.0) -> StopResult:
    """Stop a running sweep gracefully, as `sweeper stop` does: Ray Tune saves the experiment, running trials keep
    the checkpoint of their last finished epoch, and `resume` finishes the sweep later. With `wait_s`, wait up to
    that long for its driver to have stopped."""
    from sweeper import sweeps

    configure_driver()
    with one_error():
        check_arguments(name, None, address, "NAME", "sweeper stop", uses_ray=True)
        return StopResult(*sweeps.stop(name, storage, address, wait_s))


def sweep_logs(
    name: str, *, storage: str = "./sweeps", address: str | None = None, tail: int | None = None
) -> SweepLog:
    """A sweep's log, as `sweeper logs` prints it: a submitted sweep's Ray job log, else sweep.log in storage."""
    from sweeper import sweeps

    configure_driver()
    with one_error():
        check_arguments(name, None, address, "NAME", "sweeper logs", uses_ray=True)
        if tail is not None and (not isinstance(tail, int) or isinstance(tail, bool) or tail < 1):
            raise ConfigError("--tail", f"must be a whole number >= 1 (got {tail!r:.100})", "sweeper logs")
        return SweepLog(*sweeps.logs(name, storage, address, tail))


def promote(name: str, trial: str, *, storage: str = "./sweeps", tracking_uri: str | None = None) -> dict[str, Any]:
    """Log the MLflow model of a trial that has none (`tracking.models: best | none`) from its final checkpoint in
    storage, as `sweeper promote` does; returns its run id, model id (models:/<id>) and size in bytes."""
    from nmt_core.checkpoint import CheckpointError
    from sweeper.models import promote as log_trial_model

    configure_driver()
    with one_error((*bad_input(), CheckpointError)):
        check_arguments(name, tracking_uri, None, "NAME", "sweeper promote")
        return log_trial_model(name, trial, storage, tracking_uri)
