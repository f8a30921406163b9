"""`sweeper restore SPACE --from-data DIR`: a designed sweep rebuilt from the data its summary wrote
(sweeper/summary/data.py), so that `sweeper extend` can go on where its storage and tracking store are gone: a study
whose looks outlive a machine, a copy, or a reader who wants more seeds of a committed study.

The data holds everything the summary and the design read: every finished trial's settings, metrics, per-epoch
curves, tags, hypotheses, the references and the traces. The space file names what the data does not (the rows'
settings, the base config a new look's trials start from); its design must be the one the data's sweep froze (the
digests agree), so a restore cannot change a design after its first result. What is rebuilt: the MLflow parent run
(space.yaml, the design's digest, the saved views) and one child run per trial (its params as a sweep logs them, its
tags, its metrics under their MLflow names and epochs, its translations, references, alignment statistics and
traces), then sweeper.json (the looks the data reached, each done) and results.parquet. What the data never held is
not made up: checkpoints and models, the side-by-side translation tables (they need the sources), system metrics'
histories. Each restored run carries RESTORED_FROM, the run it was made from.
"""

from __future__ import annotations

import json
import statistics
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from mlflow.entities import Metric as MlflowMetric
from mlflow.entities import RunTag

import sweeper.storage.conditional_writes as conditional_writes
from nmt_core.gates.gate import clip_path
from sweeper.running.driver_lock import sweep_lock
from sweeper.running.runner import (
    new_state,
    open_sweep,
    planned_shared_words,
    resolved_base,
    results_table,
    sweep_view,
    tracking_callback,
    trial_config,
)
from sweeper.space.design import digest as design_digest
from sweeper.space.spec import SpecError, SweepSpec
from sweeper.storage.store import Storage, open_storage
from sweeper.storage.stored import LINK_KEY, RESTORED, STATE_FILE
from sweeper.summary.data import read_data
from sweeper.summary.records import SweepSnapshot, TrialRecord
from sweeper.tracking.metrics import (
    AGGREGATED,
    BEST,
    MEAN,
    PBT_EVENTS,
    PER_EPOCH,
    RESULTS_FILE,
    final_result,
    is_logged,
    mlflow_name,
    report_key,
)
from sweeper.tracking.mlflow_view import share_view
from sweeper.tracking.names import run_name
from sweeper.tracking.runs import MlflowTrackingCallback

RESTORED_FROM = "sweeper.restored_from"  # a restored trial run's tag: the run id it was made from
NOT_RESTORED = ("mlflow.loggedArtifacts", "mlflow.log-model.history")  # tags of artifacts and models the data lacks
MACHINE_KEYS = ("data.cache_dir",)  # a trial config's keys that name the machine's folders, not the question
METRICS_PER_CALL, TAGS_PER_CALL = 1000, 100  # the most MLflow's log_batch takes of each


def restore_sweep(spec: SweepSpec, data_dir: Path, storage_uri: str, tracking_uri: str | None) -> int:
    """The sweep of `spec` rebuilt from `data_dir` in new storage and a tracking store; everything checked (the data,
    that its trials are this space's, the design's digest, that no sweep of this name is stored there) before
    anything is written."""
    snapshot = read_data(data_dir)
    check_restorable(spec, snapshot, f"{clip_path(data_dir)}: data")
    check_no_sweep(open_storage(storage_uri, "sweeper restore").below(spec.name), spec.name, storage_uri)
    checked = open_sweep(spec, storage_uri, tracking_uri, "sweeper restore")  # may create a SQLite store
    experiment = checked.storage.below(spec.name)
    with sweep_lock(experiment, spec.name, "sweeper restore"):
        check_no_sweep(experiment, spec.name, storage_uri)  # again under the lock: no driver writes it meanwhile
        callback = tracking_callback(
            spec, checked.uri, "", checked.base, experiment.uri, None, planned_shared_words(spec)
        )
        tracker = callback.tracker
        plan = {"source": spec.source, "trials": len(snapshot.records), "algorithm": spec.search.algorithm}
        plan.update(scheduler=spec.scheduler.type, storage=experiment.uri, models=spec.models)
        plan.update(design=snapshot.design_digest, restored_from=snapshot.parent_id)  # the space's (checked above)
        parent_id = tracker.start_sweep(spec.text, plan)
        callback.parent_id = parent_id
        try:
            link = share_view(tracker.client, checked.uri, tracker.experiment_id, parent_id, sweep_view(spec))
            # oldest first, as they ran: MLflow lists a sweep's runs newest first, the order the data holds them in
            rows = [restore_trial(callback, record, snapshot) for record in reversed(snapshot.records)][::-1]
            experiment.write_parquet(results_table(rows, spec.significance), RESULTS_FILE)
            record = new_state(spec, checked.uri, parent_id, tracker.experiment_id, checked.base, len(rows), None, None)
            record |= {LINK_KEY: link, "looks": restored_looks(spec, snapshot.records)}
            record[RESTORED] = {"parent_run_id": snapshot.parent_id, "trials": len(rows)}
            conditional_writes.write_record(experiment, json.dumps(record, indent=2), STATE_FILE)  # the last write
        except BaseException:  # no sweeper.json: the storage holds no sweep, the half-made parent says FAILED
            tracker.client.set_terminated(parent_id, "FAILED")
            raise
        tracker.client.set_terminated(parent_id, "FINISHED")
    print(
        f"sweep {spec.name} restored from {clip_path(data_dir)}: {len(rows)} trials of {1 + len(record['looks'])} "
        f"look(s) (from MLflow run {snapshot.parent_id}); storage {experiment.uri}; tracking {checked.uri}\n"
        f"MLflow: {link}\nnext look: sweeper extend {spec.name} --storage {checked.storage.uri} --tracking-uri "
        f"{checked.uri}",
        flush=True,
    )
    return 0


def check_no_sweep(experiment: Storage, name: str, storage_uri: str) -> None:
    if experiment.exists(STATE_FILE):
        raise SpecError(
            "--storage",
            f"a sweep named {name!r} is already stored under {clip_path(storage_uri)}: restore into another --storage "
            "(a restore never writes over a sweep)",
            "sweeper restore",
        )


def check_restorable(spec: SweepSpec, snapshot: SweepSnapshot, where: str) -> None:
    """The data must be of this space's sweep: same name, the design it froze (same digest), every trial one of the
    space's rows with the space's settings (the machine's cache folder aside) at a seed the design allows, and every
    metric under an MLflow name of its own."""
    if snapshot.name != spec.name:
        raise SpecError("name", f"the data is of sweep {snapshot.name!r}, the space names {spec.name!r}", where)
    if not spec.design.declared or not snapshot.design_digest:
        raise SpecError(
            "design",
            "only a designed sweep is restored (a space with a `design:` section, whose data holds its digest): "
            "`sweeper extend` is what needs it",
            where,
        )
    if (digest := design_digest(spec.design)) != snapshot.design_digest:
        raise SpecError(
            "design",
            f"the space's design (digest {digest}) is not the one the sweep froze "
            f"({snapshot.design_digest}): a design is never changed after its first result",
            where,
        )
    base, rows = resolved_base(spec), {plan.variant: plan.params for plan in spec.plan}
    first = spec.base_config.train.seed
    for record in snapshot.records:
        seed = record.config.train.seed
        if record.variant not in rows or not first <= seed < first + spec.design.max_seeds:
            raise SpecError(
                "trials",
                f"trial {record.trial_id} ({record.variant}, seed {seed}) is not a trial of this space's design "
                f"(rows {', '.join(rows)}; seeds {first}-{first + spec.design.max_seeds - 1})",
                where,
            )
        planned = trial_config(base, rows[record.variant], seed).flat()
        differs = sorted(k for k, v in record.config.flat().items() if k not in MACHINE_KEYS and planned.get(k) != v)
        if differs:
            raise SpecError("trials", f"trial {record.trial_id} ran with other settings: {', '.join(differs)}", where)
        check_metric_names(record, where)


def check_metric_names(record: TrialRecord, where: str) -> None:
    """Each of a trial's metrics under an MLflow name that reads back as itself and as no other of its metrics."""
    keys = {*record.metrics, *record.curves, *record.settings}
    names = {key: mlflow_name(key) for key in keys}
    uses = Counter(names.values())
    clash = [key for key in sorted(keys) if report_key(names[key]) != key or uses[names[key]] > 1]
    if clash:
        raise SpecError(f"run {record.run_id}", f"metrics {', '.join(clash[:5])} read back as another name", where)


def restored_looks(spec: SweepSpec, records: list[TrialRecord]) -> list[dict[str, Any]]:
    """The looks past the first that the data's trials reached, as `sweeper extend` records them, each done: look k
    holds seeds first + (k-1)*n .. first + k*n - 1 of every row it ran (n: the design's seeds a look)."""
    first, per_look = spec.base_config.train.seed, spec.design.seeds_per_look
    by_look: dict[int, list[TrialRecord]] = {}
    for record in records:
        by_look.setdefault((record.config.train.seed - first) // per_look + 1, []).append(record)
    return [
        {
            "look": look,
            "folder": f"look-{look}",
            "trials": len(held),
            "seeds": sorted({r.config.train.seed for r in held}),
            "done": True,
            "rows": sorted({r.variant for r in held}),
        }
        for look, held in sorted(by_look.items())
        if look > 1
    ]


def restore_trial(callback: MlflowTrackingCallback, record: TrialRecord, snapshot: SweepSnapshot) -> dict[str, Any]:
    """One trial's run under the new parent, made as a sweep makes it (params, name, colour, tags), then its tags,
    metrics and artifacts from the data; its results.parquet row."""
    cfg = record.config
    name = callback.naming.variant(cfg)
    params = callback.trial_params(cfg.active(), record.variant, name)
    colour = callback.colour_of(record.variant)
    client = callback.tracker.client
    run_id, _ = callback.tracker.trial_run(
        callback.parent_id, record.trial_id, record.variant, params, look_first=False, run_colour=colour, name=name
    )
    # the sweep's own tags (role, parent, trial, variant, name, colour) are never the data's; the trial's provenance
    # (the code and versions it ran with) is the data's, not this machine's
    own = set(client.get_run(run_id).data.tags) - set(callback.tracker.source)
    tags = [RunTag(key, value) for key, value in record.tags.items() if key not in own and key not in NOT_RESTORED]
    tags.append(RunTag(RESTORED_FROM, record.run_id))
    for start in range(0, len(tags), TAGS_PER_CALL):
        client.log_batch(run_id, tags=tags[start : start + TAGS_PER_CALL])
    metrics = trial_metrics(record)
    for start in range(0, len(metrics), METRICS_PER_CALL):
        client.log_batch(run_id, metrics=metrics[start : start + METRICS_PER_CALL])
    with tempfile.TemporaryDirectory() as folder:
        write_artifacts(record, snapshot, Path(folder))
        client.log_artifacts(run_id, folder)
    client.set_terminated(run_id, "FINISHED")
    return restored_row(record, run_id, run_name(name, record.variant, cfg.train.seed))


def trial_metrics(record: TrialRecord) -> list[MlflowMetric]:
    """The trial's metrics as a sweep logs them: each curve per epoch (step 1, 2, ...), a PBT setting at its epochs,
    every other value once, a per-epoch one at the last epoch and an end-of-run one at step 0."""
    epochs = max((len(curve) for curve in record.curves.values()), default=0)
    logged = [
        MlflowMetric(mlflow_name(key), float(value), 0, step)
        for key, curve in record.curves.items()
        for step, value in enumerate(curve, start=1)
    ]
    logged += [
        MlflowMetric(mlflow_name(key), float(value), 0, int(epoch))
        for key, by_epoch in record.settings.items()
        for epoch, value in by_epoch.items()
    ]
    logged += [
        MlflowMetric(mlflow_name(key), float(value), 0, epochs if is_logged(key, PER_EPOCH) else 0)
        for key, value in record.metrics.items()
        if key not in record.curves and key not in record.settings
    ]
    return logged


def write_artifacts(record: TrialRecord, snapshot: SweepSnapshot, folder: Path) -> None:
    """What the summary reads of a trial, in the paths a trial writes: translations/ and references/<set>.txt,
    alignment/<set>.tsv, traces/<split>.parquet, pbt_events.json."""
    from sweeper.running.artifacts import write_alignment_stats  # the trial's writer (it imports the model code)

    for sub, texts in (("translations", snapshot.translations[record.run_id]), ("references", snapshot.references)):
        (folder / sub).mkdir()
        for test_set, lines in texts.items():
            (folder / sub / f"{test_set}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for test_set, stats in snapshot.alignment.get(record.run_id, {}).items():
        (folder / "alignment").mkdir(exist_ok=True)
        write_alignment_stats(stats, folder / "alignment" / f"{test_set}.tsv")
    for (run_id, split), table in snapshot.traces.items():
        if run_id == record.run_id:
            (folder / "traces" / split).parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, folder / "traces" / f"{split}.parquet")
    if record.pbt_events:
        (folder / PBT_EVENTS).write_text(json.dumps(record.pbt_events), encoding="utf-8")


def restored_row(record: TrialRecord, run_id: str, shown: str) -> dict[str, Any]:
    """The trial's results.parquet row as a finished trial's is made (runner.result_rows), from what the data holds:
    its curves give the means and the tested epoch's values, its metrics the final ones; no checkpoint."""
    cfg, curves = record.config, record.curves
    params = cfg.flat()
    dev = curves.get("bleu_dev", [])
    by = curves.get(cfg.train.early_stopping_metric, [])  # runner.tested_epoch: the first best, as training keeps it
    by = by if len(by) == len(dev) else dev
    tested = max(range(len(by)), key=by.__getitem__) if by else None
    row: dict[str, Any] = {
        "trial_id": record.trial_id,
        "status": "TERMINATED",
        "variant": record.variant,
        "run_name": shown,
        "seed": params["train.seed"],
        **params,
        "epochs": len(dev),
    }
    if tested is not None:
        row["bleu_dev"] = dev[tested]
        row["bleu_dev_by_epoch"] = list(dev)
        row.update({k: statistics.fmean(curves[k]) for k in AGGREGATED[MEAN] if curves.get(k)})
        row.update({k: curves[k][tested] for k in AGGREGATED[BEST] if len(curves.get(k, [])) == len(dev)})
    row.update({k: v for k, v in record.metrics.items() if final_result(k)})
    row.update(restores=0, error=None, mlflow_run_id=run_id, checkpoint=None)
    return row
