"""One read of a finished sweep from MLflow into a snapshot: the trials' metrics and per-epoch histories, their
translations and the references they were scored against, alignment statistics, attention traces and PBT events.
Everything after this (statistics, findings, tables, figures) works on the snapshot and needs no tracking server.

Reading is bulk where MLflow allows: one search for every trial's params, tags and latest metrics; per-epoch
histories one call per metric for up to 100 runs (the get-history-bulk read MLflow's server answers its own UI's
charts with, or a database store's bulk query; MlflowClient has no bulk history call), a few in parallel, and only
for the metrics the summary reads; artifacts are downloaded once, only those the summary uses. A store without the
bulk read (or an answer that hit its limit) is read one run at a time.
"""

from __future__ import annotations

import io
import statistics
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from mlflow.store.artifact.artifact_repo import ArtifactRepository
from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository
from mlflow.tracking import MlflowClient
from mlflow.utils.rest_utils import http_request

from nmt_core.config import ConfigError, TrialConfig, build_config, scalar, section_keys, set_dotted
from nmt_core.family.registry import is_adaptive
from nmt_core.gates.credentials import redact
from nmt_core.gates.deadline import carried
from nmt_core.gates.decoders import TEXT_LIMIT, read_json_file, read_parquet_file, read_text_file
from nmt_core.gates.yaml_input import read_text
from sweeper.space.spec import RecordedSpace, SpecError, recorded_space
from sweeper.tracking.metrics import (
    CURVES,
    DESIGN_TAG,
    EXPLOITS,
    FORCED,
    NOT_APPLICABLE,
    PARENT,
    PBT_EVENTS,
    ROLE,
    SEED_PARAM,
    SETTING_PREFIX,
    TRIAL_ID,
    VARIANT,
    VIEW_PREFIX,
    history_name,
    report_key,
)

SEED_KEY = "train.seed"
HISTORY_THREADS = 4  # history requests in flight at once
DOWNLOAD_THREADS = 8  # artifact downloads in flight at once
SEARCH_PAGE = 1000  # trial runs per search request
BULK_RUNS, BULK_LIMIT = 100, 25000  # what MLflow's get-history-bulk answers at most: runs, values per call
BULK_PATH = "/ajax-api/2.0/mlflow/metrics/get-history-bulk"
History = dict[int, float]  # a metric's value per epoch
TOP_ROWS = 20  # a table of more rows (a random sweep: a row per trial) shows its best rows and their baselines
LEFT_OUT = {"FAILED": "failed", "KILLED": "stopped early by the scheduler (no test BLEU)"}
FORCED_TRACES = FORCED.removeprefix("traces/")  # a trace name: forced/<test set> (sweeper.tracking.metrics.FORCED)


class SummaryError(ValueError):
    """A sweep that cannot be summarised; the message says why and what to do."""


def summary_error(key: str, message: str, source: str) -> SummaryError:
    """The gate's `error` for a trial's artifact that cannot be read (nmt_core.gates.decoders)."""
    return SummaryError(f"{source}: {message}" if key == "(file)" else f"{source}: {key}: {message}")


@dataclass
class TrialRecord:
    run_id: str
    trial_id: str
    variant: str
    params: dict[str, str]
    metrics: dict[str, float]
    curves: dict[str, list[float]]  # per-epoch dev history (CURVES), in epoch order
    tags: dict[str, str] = field(default_factory=dict)
    settings: dict[str, dict[int, float]] = field(default_factory=dict)  # PBT: `setting.<key>` by epoch
    pbt_events: list[dict[str, Any]] = field(default_factory=list)  # PBT exploits (pbt_events.json)
    artifact_uri: str = ""  # the run's artifact root (a record read from MLflow)
    tuned: frozenset[str] = frozenset()  # settings chosen per row on dev (`summarize --choose`): not a row's own

    @property
    def epoch_time_s(self) -> float | None:
        times = self.curves.get("epoch_time_s")
        return statistics.fmean(times) if times else None

    @cached_property
    def config(self) -> TrialConfig:
        """The trial's config, typed: the settings it logged (those active for its variant) over the defaults."""
        return trial_config_of(self.params)

    @cached_property
    def active(self) -> dict[str, Any]:
        """The settings the trial logged (those active for its variant), typed: what MLflow shows, as values."""
        flat = self.config.flat()
        return {key: flat[key] for key in self.params if key in flat}

    @cached_property
    def group(self) -> tuple:
        """The settings but the seed and those chosen per row on dev (a row of the tables), and then not the variant
        label either, which may name a chosen value (`sact4`); kept: choosing baselines reads it rows x rows times."""
        left_out = {SEED_KEY, *self.tuned, *(("variant",) if self.tuned else ())}
        return tuple(sorted((k, v) for k, v in self.params.items() if k not in left_out))

    @property
    def test_sets(self) -> list[str]:
        return sorted(
            k.removeprefix("bleu_test_") for k in self.metrics if k.startswith("bleu_test_") and k != "bleu_test_avg"
        )


@dataclass
class SweepSnapshot:
    """What a summary reads of one `sweeper run`, read once."""

    name: str
    parent_id: str
    parent_status: str
    space: RecordedSpace  # what the summary reads of the sweep's space.yaml (the defaults for a sweep without one)
    records: list[TrialRecord]
    left_out: Counter  # trials left out of every table, by why
    references: dict[str, list[str]]  # test set -> reference lines
    translations: dict[str, dict[str, list[str]]]  # run id -> test set -> hypothesis lines
    alignment: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # run id -> set -> ALIGNMENT_STATS
    traces: dict[tuple[str, str], pa.Table] = field(default_factory=dict)  # (run id, split) -> attention trace
    added: list[tuple[str, str, str]] = field(default_factory=list)  # sweeps joined to it: name, parent run, status
    choices: list[str] = field(default_factory=list)  # each row's setting chosen on dev (`summarize --choose`)
    unfinished: list[dict[str, str]] = field(default_factory=list)  # the settings of the trials left_out counts
    design_digest: str = ""  # the design's digest `sweeper run` froze on the parent run (DESIGN_TAG), if any


def find_parent(client: MlflowClient, name: str, run_id: str | None = None, key: str = "NAME") -> tuple[str, str]:
    """The sweep's parent run: `run_id` when given (an older sweep of the same name), else the newest; `key` is
    the argument that named the sweep (NAME, or `--with` for a sweep joined to it)."""
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        known = sorted(e.name for e in client.search_experiments() if e.name != "Default")
        raise ConfigError(
            key,
            f"no sweep named {name!r} in {redact(client.tracking_uri)} (check --tracking-uri); "
            f"sweeps there: {', '.join(known) or 'none'}",
            "sweeper summarize",
        )
    parents = client.search_runs(
        [experiment.experiment_id],
        filter_string=f"tags.`{ROLE}` = 'sweep'",
        order_by=["attributes.start_time DESC"],
        max_results=1000,
    )
    if not parents:
        raise SummaryError(f"sweep {name!r} has no sweep run in this tracking store")
    if run_id is None:
        return experiment.experiment_id, parents[0].info.run_id
    if run_id not in {p.info.run_id for p in parents}:
        raise ConfigError(
            "--run-id" if key == "NAME" else key,
            f"{run_id} is not a sweep run of {name!r}; its sweep runs, newest first: "
            + ", ".join(p.info.run_id for p in parents[:5]),
            "sweeper summarize",
        )
    return experiment.experiment_id, run_id


def by_epoch(client: MlflowClient, run_id: str, key: str) -> dict[int, float]:
    """A metric's value per epoch; an epoch trained again (after a PBT exploit) is logged again, and its
    latest value counts."""
    history = sorted(client.get_metric_history(run_id, key), key=lambda m: (m.step, m.timestamp))
    return {m.step: m.value for m in history if m.step > 0}


def load_records(
    client: MlflowClient, experiment_id: str, parent_id: str, objective: str = "bleu_dev"
) -> tuple[list[TrialRecord], Counter, list[dict[str, str]]]:
    """The finished trials of one `sweeper run` with their histories, how many trials were left out, by why, and
    the settings of those left out (choosing a row's rate counts a rate's failed seeds: choose.py)."""
    records, left_out, unfinished, logged = [], Counter(), [], {}
    for run in trial_runs(client, experiment_id, parent_id):
        metrics = {report_key(name): value for name, value in run.data.metrics.items()}  # grouped or flat names
        if run.info.status != "FINISHED" or "bleu_test_avg" not in metrics:
            left_out[LEFT_OUT.get(run.info.status, "unfinished")] += 1
            if readable(params := settings_of(run.data.params)):  # its settings reach a note: read as a record's are
                unfinished.append(params)
            continue
        logged[run.info.run_id] = set(run.data.metrics)
        records.append(
            TrialRecord(
                run.info.run_id,
                run.data.tags.get(TRIAL_ID, ""),
                run.data.tags.get(VARIANT, "?"),
                settings_of(run.data.params),
                metrics,
                {},
                dict(run.data.tags),
                artifact_uri=run.info.artifact_uri,
            )
        )
    for record in records:  # typed once, here: every table and figure reads record.config
        try:
            record.config  # noqa: B018 - built and kept (a cached property)
        except ConfigError as err:
            raise SummaryError(
                f"run {record.run_id}: its params are no trial config this version reads ({err})"
            ) from None
    wanted = [
        (record, key) for record in records for key in dict.fromkeys((*CURVES, objective)) if key in record.metrics
    ]
    wanted += [(record, key) for record in records for key in sorted(record.metrics) if key.startswith(SETTING_PREFIX)]
    names = {(record.run_id, key): history_name(key, logged[record.run_id]) for record, key in wanted}
    histories = read_histories(client, [(record.run_id, names[(record.run_id, key)]) for record, key in wanted])
    for record, key in wanted:
        history = histories[(record.run_id, names[(record.run_id, key)])]
        if key.startswith(SETTING_PREFIX):
            record.settings[key] = history
        else:
            record.curves[key] = [history[step] for step in sorted(history)]
    return records, left_out, unfinished


def trial_runs(client: MlflowClient, experiment_id: str, parent_id: str) -> Iterator[Any]:
    """Every trial run of the sweep, page by page: one search answers at most SEARCH_PAGE runs (a 10,000-trial
    sweep read in one page of 5,000 lost half of its trials)."""
    token = None
    while True:
        page = client.search_runs(
            [experiment_id],
            max_results=SEARCH_PAGE,
            page_token=token,
            filter_string=f"tags.`{PARENT}` = '{parent_id}' and tags.`{ROLE}` = 'trial'",
        )
        yield from page
        token = page.token
        if not token:
            return


def read_histories(client: MlflowClient, wanted: list[tuple[str, str]]) -> dict[tuple[str, str], History]:
    """The per-epoch history of each (run id, metric): a call per metric and BULK_RUNS runs, HISTORY_THREADS at once."""
    runs_of: dict[str, list[str]] = {}
    for run_id, key in wanted:
        runs_of.setdefault(key, []).append(run_id)
    jobs = [(key, runs[i : i + BULK_RUNS]) for key, runs in runs_of.items() for i in range(0, len(runs), BULK_RUNS)]
    histories: dict[tuple[str, str], History] = {}
    with ThreadPoolExecutor(HISTORY_THREADS) as pool:
        for part in pool.map(carried(lambda job: histories_of(client, *job)), jobs):  # the command's deadline too
            histories.update(part)
    return histories


def histories_of(client: MlflowClient, key: str, run_ids: list[str]) -> dict[tuple[str, str], History]:
    values = bulk_values(client, key, run_ids)
    if values is None:
        return {(run_id, key): by_epoch(client, run_id, key) for run_id in run_ids}
    histories: dict[tuple[str, str], History] = {(run_id, key): {} for run_id in run_ids}
    for run_id, step, _, value in sorted(values, key=lambda v: (v[1], v[2])):  # as by_epoch: the latest value counts
        if step > 0:
            histories[(run_id, key)][step] = value
    return histories


def bulk_values(client: MlflowClient, key: str, run_ids: list[str]) -> list[tuple[str, int, int, float]] | None:
    """(run id, step, timestamp, value) of every value of `key` logged in `run_ids`, in one call; None where the
    store has no bulk read or its answer may be cut at BULK_LIMIT."""
    store = client._tracking_client.store  # noqa: SLF001 - MlflowClient does not expose the bulk read
    try:
        if hasattr(store, "get_metric_history_bulk"):  # a database store
            found = [
                (m.run_id, m.step, m.timestamp, m.value)
                for m in store.get_metric_history_bulk(run_ids, key, BULK_LIMIT)
            ]
        elif hasattr(store, "get_host_creds"):  # MLflow's server
            response = http_request(
                store.get_host_creds(),
                BULK_PATH,
                "GET",
                max_retries=0,
                raise_on_status=False,
                params={"run_id": run_ids, "metric_key": key, "max_results": BULK_LIMIT},
            )
            if response.status_code != 200:
                return None
            found = [
                (m["run_id"], int(m.get("step", 0)), int(m.get("timestamp", 0)), float(m["value"]))
                for m in response.json().get("metrics", [])
            ]
        else:
            return None
    except Exception:  # noqa: BLE001 - an older or a proxied server without the endpoint: read run by run
        return None
    return found if len(found) < BULK_LIMIT else None


def settings_of(params: dict[str, str]) -> dict[str, str]:
    """A trial run's params as the summary reads them: its settings and variant, without what is logged only for
    MLflow's columns (the `seed` beside `train.seed`, a swept axis's `n/a` on a variant that does not use it, the
    `view/` params its charts read)."""
    return {
        key: value
        for key, value in params.items()
        if key != SEED_PARAM and value != NOT_APPLICABLE and not key.startswith(VIEW_PREFIX)
    }


def readable(params: dict[str, str]) -> bool:
    """Settings this version reads as a trial config (as every finished record's must be); a left-out trial's that
    are not are only counted, never shown."""
    try:
        trial_config_of(params)
    except ConfigError:
        return False
    return True


def trial_config_of(params: dict[str, str]) -> TrialConfig:
    """A trial's config from its MLflow params (strings): a string setting as logged, any other read as YAML reads
    it; `variant`, logged beside the config, left out."""
    nested: dict[str, Any] = {}
    for key, value in params.items():
        if "." in key:
            set_dotted(nested, key, typed_setting(key, value))
    return build_config(nested, source="MLflow params")


def typed_setting(key: str, value: Any) -> Any:
    """A dotted setting's value as a trial config reads it: a string (MLflow's params, a baseline written as text)
    read as YAML reads it ('True', '1e-3'), except for a string setting, which is kept as written."""
    section, _, name = key.partition(".")
    try:
        kind = section_keys(section)[name].type
    except KeyError:
        kind = None  # no config has the key: build_config names it
    return scalar(value) if isinstance(value, str) and kind != "str" else value


def has_gate_or_sact(record: TrialRecord) -> bool:
    """A variant whose tau or sentinel gate varies by word: its traces are worth reading."""
    attention = record.config.attention
    return is_adaptive(attention.temperature) or attention.sentinel


def best_of(records: list[TrialRecord]) -> TrialRecord:
    """The trial with the best test BLEU (ties: the larger run id, so that every caller picks the same one)."""
    return max(records, key=lambda record: (record.metrics["bleu_test_avg"], record.run_id))


def wanted_traces(records: list[TrialRecord]) -> list[tuple[str, str]]:
    """(run id, split) of the traces the figures draw: the best SACT trial's dev trace (the heatmap), the first test
    set's teacher-forced trace of every seed of each SACT or sentinel variant (word classes), and that set's output
    trace of each sentinel variant's best seed (sentinel words); of a sweep with more than TOP_ROWS variants, only
    the TOP_ROWS best variants' (as the tables show them)."""
    groups: dict[tuple, list[TrialRecord]] = {}
    for record in records:
        groups.setdefault(record.group, []).append(record)
    sact = [r for r in records if is_adaptive(r.config.attention.temperature)]
    wanted = [(best_of(sact).run_id, "dev")] if sact else []
    variants = list(groups.values())
    if len(variants) > TOP_ROWS:
        variants = sorted(variants, key=lambda members: -statistics.fmean(r.metrics["bleu_test_avg"] for r in members))
        variants = variants[:TOP_ROWS]
    test_set = records[0].test_sets[0]
    for members in (members for members in variants if has_gate_or_sact(members[0])):
        wanted += [(record.run_id, f"{FORCED_TRACES}/{test_set}") for record in members]
        if members[0].config.attention.sentinel:
            wanted.append((best_of(members).run_id, test_set))
    return wanted


def alignment_sets(records: list[TrialRecord]) -> list[str]:
    """Test sets on which every trial scored its attention against gold word alignments."""
    return sorted(
        k.removeprefix("aer_")
        for k in records[0].metrics
        if k.startswith("aer_") and all(k in r.metrics for r in records)
    )


def read_trials(client: MlflowClient, name: str, run_id: str | None, folder: Path, key: str = "NAME") -> SweepSnapshot:
    """A sweep's space, finished trials and test references, without the trials' artifacts: what joining sweeps
    (combine) and choosing each row's rate (choose) decide on, so that only the trials kept are downloaded."""
    repository.cache_clear()  # a repository's download budget and deadline (the gate's BoundedCopy) are one read's
    experiment_id, parent_id = find_parent(client, name, run_id, key)
    parent = client.get_run(parent_id)
    try:
        path = client.download_artifacts(parent_id, "space.yaml", str(folder))
    except Exception:  # an older sweep without space.yaml: default baseline
        path = None
    # read back through the gate, checked as on input (bounded, a mapping, objective and significance in range)
    space = recorded_space(read_text(path, SpecError), f"run {parent_id}: space.yaml") if path else RecordedSpace()
    records, left_out, unfinished = load_records(client, experiment_id, parent_id, space.objective.metric)
    if not records:
        raise SummaryError(f"sweep {name!r} has no finished trial with test BLEU yet (see `sweeper resume`)")
    first = records[0]
    references = {
        s: artifact_lines(client, first, f"references/{s}.txt", folder / first.run_id) for s in first.test_sets
    }
    return SweepSnapshot(
        name,
        parent_id,
        parent.info.status,
        space,
        records,
        left_out,
        references,
        {},
        unfinished=unfinished,
        design_digest=parent.data.tags.get(DESIGN_TAG, ""),
    )


def read_artifacts(client: MlflowClient, snapshot: SweepSnapshot, folder: Path) -> SweepSnapshot:
    """The snapshot with its trials' artifacts that the tables and figures read: translations, alignment
    statistics, the traces the figures draw (wanted_traces) and PBT's events."""
    records = snapshot.records
    test_sets, aligned, wanted = records[0].test_sets, alignment_sets(records), wanted_traces(records)
    by_id = {r.run_id: r for r in records}
    exploited = [r for r in records if r.tags.get(EXPLOITS)]
    with ThreadPoolExecutor(DOWNLOAD_THREADS) as pool:  # a few at once: a tracking server answers each in ms

        def each(read: Any, jobs: list[tuple]) -> Iterator[Any]:
            return pool.map(lambda job: read(*job), jobs)

        def lines(record: TrialRecord, path: str) -> list[str]:
            return artifact_lines(client, record, path, folder / record.run_id)

        texts = each(lines, [(r, f"translations/{s}.txt") for r in records for s in test_sets])
        snapshot.translations = {r.run_id: {s: next(texts) for s in test_sets} for r in records}
        stats = each(
            lambda r, s: read_alignment_stats(download(client, r, f"alignment/{s}.tsv", folder / r.run_id)),
            [(r, s) for r in records for s in aligned],
        )
        snapshot.alignment = {r.run_id: {s: next(stats) for s in aligned} for r in records} if aligned else {}
        snapshot.traces = {
            key: table
            for key, table in zip(
                wanted, each(lambda run, split: read_trace(client, by_id[run], split, folder / "trace"), wanted)
            )
            if table is not None
        }
        for record, events in zip(
            exploited, each(lambda r: download(client, r, PBT_EVENTS, folder / r.run_id), [(r,) for r in exploited])
        ):
            record.pbt_events = read_json_file(events, TEXT_LIMIT, summary_error)
    return snapshot


@cache
def repository(root: str, tracking_uri: str) -> ArtifactRepository:
    """One artifact repository per store root, shared by every download of one read (read_trials clears them): a
    tracking server's is asked what it supports once, before its first download, not once per file. Not longer: a
    local repository's downloads share one budget and one deadline from its making (DOWNLOAD_S), and a driver that
    reads its sweep after each look (`sweeper extend --until-decided`) outlived it at look 4's end."""
    return get_artifact_repository(root, tracking_uri)


def download(client: MlflowClient, record: TrialRecord, path: str, folder: Path) -> Path:
    """One artifact of a trial's run into folder/path, by its path under the run's artifact root (known from the
    search): one request to a tracking server, where mlflow.artifacts.download_artifacts makes three (it asks
    whether the path is a folder and what the server supports) and MlflowClient.download_artifacts more."""
    run_folder = f"/{record.run_id}/artifacts"  # MLflow's layout: <experiment's artifact root>/<run id>/artifacts
    shared = record.artifact_uri.endswith(run_folder)
    root = record.artifact_uri.removesuffix(run_folder) if shared else record.artifact_uri
    local = folder / path
    local.parent.mkdir(parents=True, exist_ok=True)
    below = f"{run_folder[1:]}/{path}" if shared else path
    repository(root, client.tracking_uri)._download_file(below, str(local))  # noqa: SLF001 - a one-file download
    return local


def read_trace(client: MlflowClient, record: TrialRecord, split: str, folder: Path) -> pa.Table | None:
    """traces/<split>.parquet of a trial; a teacher-forced one is None where the trial was made before they were
    recorded (the word classes say so)."""
    try:
        local = download(client, record, f"traces/{split}.parquet", folder / record.run_id / split)
    except Exception:  # noqa: BLE001 - MLflow raises several types for a missing artifact
        if split.startswith(f"{FORCED_TRACES}/"):
            return None
        raise
    return read_parquet_file(local, summary_error)


def read_alignment_stats(path: Path) -> np.ndarray:
    """alignment/<set>.tsv as sweeper.running.artifacts.write_alignment_stats writes it: a header, a row per
    sentence."""
    try:
        return np.loadtxt(io.StringIO(read_text_file(path, summary_error)), delimiter="\t", skiprows=1, ndmin=2)
    except ValueError as err:  # a row of another length, a word where a number goes
        raise summary_error("(file)", f"not the alignment table a trial writes ({str(err)[:100]})", str(path)) from None


def artifact_lines(client: MlflowClient, record: TrialRecord, path: str, folder: Path) -> list[str]:
    try:
        local = download(client, record, path, folder)
    except Exception as err:  # noqa: BLE001 - MLflow raises several types for a missing artifact
        raise SummaryError(
            f"run {record.run_id} has no {path} ({type(err).__name__}): it was made by an older "
            "version; re-run the sweep"
        ) from None
    return read_text_file(local, summary_error).splitlines()
