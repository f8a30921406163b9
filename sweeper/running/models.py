"""What a sweep stores: MLflow models by `tracking.models`, and the storage it takes.

`tracking.models: best` (the default) logs, when a sweep ends, the MLflow model of the best finished trial of each
variant, made from that trial's final checkpoint; `all` has every trial save its model and the driver log it as the
trial completes (as before); `none` logs none. A trial without a model keeps its final checkpoint (the best-dev
weights, the config, the vocabularies and the input example) in storage, and `sweeper promote NAME TRIAL` makes and
logs its model later, the same LoggedModel the trial would have had.
"""

from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

import pyarrow.fs as pafs

from nmt_core.gates.network import DOWNLOAD_S
from nmt_core.gates.yaml_input import shown
from sweeper.space.spec import SpecError, check_name, variant_label
from sweeper.storage.store import Storage, open_storage
from sweeper.storage.stored import LOOK_FOLDER
from sweeper.tracking.metrics import MODEL, MODEL_EXAMPLE, TRIAL_ID, VARIANT, VARIANT_NAME, is_result
from sweeper.tracking.names import model_name

TRIAL_ID_RULE = re.compile(r"[0-9a-f]{5,32}(?:_\d{5})?")  # grid/random 8f3a1_00004, Optuna's 8287bf51
EXAMPLE_LIMIT = 1_000_000  # bytes of model_example.json: a few source sentences
CHECKPOINT_DIR = re.compile(r"^checkpoint_(\d+)$")  # Ray Tune's numbered checkpoint folders in a trial's folder


def human(size: float) -> str:
    """Bytes as a person reads them: 1.2 GB (powers of 1000, as storage is billed)."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")


def variant_bests(rows: list[dict[str, Any]], metric: str, mode: str) -> list[dict[str, Any]]:
    """The finished trial with the best objective of each variant (with a run and a final checkpoint)."""
    best: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["status"] != "TERMINATED" or row.get(metric) is None or not row.get("mlflow_run_id"):
            continue
        if not row.get("checkpoint"):
            continue
        held = best.get(row["variant"])
        if held is None or (row[metric] > held[metric] if mode == "max" else row[metric] < held[metric]):
            best[row["variant"]] = row
    return list(best.values())


def model_from_checkpoint(tracker, run_id: str, final: Storage) -> tuple[str, int]:
    """Make a trial's MLflow model from its final checkpoint and log it as its run's LoggedModel, named after its
    variant (`model` for a run recorded before names), with the trial's active settings as params and its final
    metrics linked (as a trial logging its own model does). Returns the model's id and its size in bytes. A model
    logged already is kept (`log_model` is idempotent)."""
    from nmt_core.mlflow_model import save_model
    from nmt_core.training import checkpoint

    with tempfile.TemporaryDirectory() as folder:
        local = Path(folder)
        # bounded as every checkpoint read is (was 256 MB here: a base Transformer's last.pt could not be promoted)
        (local / checkpoint.LAST).write_bytes(final.read_bytes(checkpoint.LAST, limit=checkpoint.MAX_CHECKPOINT_BYTES))
        state = checkpoint.load(local / checkpoint.LAST, within=local)  # weights only: storage is not trusted here
        example = final.read_json(MODEL_EXAMPLE, limit=EXAMPLE_LIMIT) if final.exists(MODEL_EXAMPLE) else None
        cfg = checkpoint.check_weights(state, final.display(checkpoint.LAST))[0]  # before a model is built of it
        save_model(state, local / "model", example if isinstance(example, list) and example else None)
        size = sum(p.stat().st_size for p in (local / "model").rglob("*") if p.is_file())
        run = tracker.client.get_run(run_id)
        variant = variant_label(cfg)
        metrics = {k: v for k, v in run.data.metrics.items() if is_result(k)}
        model_id = tracker.log_model(
            run_id,
            local / "model",
            {**cfg.active(), "variant": variant},
            {TRIAL_ID: run.data.tags.get(TRIAL_ID, ""), VARIANT: variant},
            metrics,
            *final_point(tracker, run_id, metrics),
            name=model_name(run.data.tags[VARIANT_NAME]) if VARIANT_NAME in run.data.tags else MODEL,
        )
    return model_id, size


def final_point(tracker, run_id: str, metrics: dict[str, float]) -> tuple[int, int]:
    """The step and time at which the trial logged its final metrics: linked to the model at that same point, each
    stays one point of its history (a new time would add a second one)."""
    if not metrics:
        return tracker.logged_steps(run_id), int(time.time() * 1000)
    history = tracker.client.get_metric_history(run_id, next(iter(metrics)))
    last = max(history, key=lambda m: (m.step, m.timestamp))
    return last.step, last.timestamp


def log_best_models(tracker, experiment: Storage, rows: list[dict[str, Any]], metric: str, mode: str) -> list[int]:
    """`tracking.models: best` at the end of a sweep: each variant's best trial gets its model. Returns the sizes of
    the models logged; a model that cannot be made is reported and never fails the finished sweep."""
    sizes = []
    for row in variant_bests(rows, metric, mode):
        try:
            sizes.append(model_from_checkpoint(tracker, row["mlflow_run_id"], experiment.below(row["checkpoint"]))[1])
        except Exception as err:  # noqa: BLE001 - the sweep finished; `sweeper promote` can try again
            print(
                f"model of trial {row['run_name']} ({row['trial_id']}) not logged ({type(err).__name__}: "
                f"{str(err).splitlines()[0][:160] if str(err) else ''}); retry with `sweeper promote "
                f"{tracker.experiment} {row['trial_id']}`"
            )
    return sizes


def final_checkpoint(experiment: Storage, trial: str) -> Storage | None:
    """A trial's last checkpoint in storage (the numbered folder Ray Tune wrote last that holds a training state)."""
    from nmt_core.training.checkpoint import LAST

    folders = experiment.info(pafs.FileSelector(experiment.root, allow_not_found=True))
    found = [f.base_name for f in folders if f.type == pafs.FileType.Directory and f.base_name.startswith(f"{trial}_")]
    for folder in sorted(found):
        inside = experiment.info(pafs.FileSelector(experiment.path(folder), allow_not_found=True))
        numbered = sorted(
            ((int(m.group(1)), f.base_name) for f in inside if (m := CHECKPOINT_DIR.match(f.base_name))), reverse=True
        )
        for _, name in numbered:
            if experiment.exists(folder, name, LAST):
                return experiment.below(folder, name)
    return None


def promote(name: str, trial: str, storage_uri: str, tracking_uri: str | None) -> dict[str, Any]:
    """`sweeper promote NAME TRIAL`: the trial's model from its final checkpoint, logged on its run."""
    from nmt_core.gates.tracking_store import choose_tracking_uri
    from sweeper.storage.stored import STATE_FILE, read_state
    from sweeper.tracking.runs import SweepTracker, resolve_uri
    from sweeper.tracking.store import check_holds_run, check_reachable

    source = "sweeper promote"
    check_name(name, "NAME", source)
    if not isinstance(trial, str) or not TRIAL_ID_RULE.fullmatch(trial):
        raise SpecError("TRIAL", f"must be a trial id such as 8f3a1_00004 (got {shown(trial)})", source)
    experiment = open_storage(storage_uri, source).below(name)
    if not experiment.exists(STATE_FILE):
        raise SpecError("NAME", f"no sweep named {name!r} at {experiment.uri} (pass the --storage it ran with)", source)
    state = read_state(experiment)
    uri = resolve_uri(choose_tracking_uri(tracking_uri, state.tracking_uri))
    check_reachable(uri)
    if uri != state.tracking_uri:
        check_holds_run(uri, state.parent_run_id, state.tracking_uri)
    tracker = SweepTracker(uri, name)
    run_id = tracker.find_trial_run(state.parent_run_id, trial)
    final = final_checkpoint(experiment, trial)
    if run_id is None or final is None:
        missing = "no MLflow run" if run_id is None else f"no checkpoint in {experiment.uri}"
        raise SpecError("TRIAL", f"sweep {name} has no trial {trial} ({missing}); results.parquet lists them", source)
    model_id, size = model_from_checkpoint(tracker, run_id, final)
    return {"name": name, "trial": trial, "run_id": run_id, "model_id": model_id, "bytes": size}


def storage_usage(experiment: Storage, trial_dir: re.Pattern) -> dict[str, Any]:
    """What the sweep's folder in storage holds: in all, and per trial folder (checkpoints, artifacts), a designed
    sweep's look trials included (`look-4/<trial>/...`: the end of look 4 said "0 trial folders")."""
    everything = pafs.FileSelector(experiment.root, allow_not_found=True, recursive=True)
    files = experiment.bounded(experiment.fs.get_file_info, everything, seconds=DOWNLOAD_S)  # a listing in pages
    total, per_trial = 0, {}
    for file in files:
        if file.type != pafs.FileType.File:
            continue
        total += file.size or 0
        folder, _, inside = file.path[len(experiment.root) :].lstrip("/").partition("/")
        trial = folder
        if LOOK_FOLDER.fullmatch(folder):
            trial, _, inside = inside.partition("/")
            folder = f"{folder}/{trial}"
        if trial_dir.match(trial) and inside:
            per_trial[folder] = per_trial.get(folder, 0) + (file.size or 0)
    sizes = sorted(per_trial.values())
    return {
        "bytes": total,
        "trials": len(sizes),
        "trial_bytes_median": int(median(sizes)) if sizes else 0,
        "trial_bytes_max": sizes[-1] if sizes else 0,
    }
