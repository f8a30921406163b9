"""nmt_core's training as a Ray Tune function trainable: report and checkpoint every epoch, restore on retry.

Trials never talk to MLflow: they hand metrics and artifact files to Tune, and the driver's tracking
callback is the only writer (SQLite breaks under concurrent writers; one writer also makes retries
idempotent).
"""

from __future__ import annotations

import functools
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import ray
import torch
from ray import tune

from nmt_core.config import TrialConfig
from nmt_core.data.batches import TrialData, load_trial_data
from nmt_core.gates.network import configure_network
from nmt_core.mlflow_model import save_model
from nmt_core.training import checkpoint
from nmt_core.training.evaluate import PAPER_BLEU
from nmt_core.training.train import TrainingDiverged, TrainResult, evaluate_split, resolve_device, train
from sweeper.running.artifacts import write_trial_artifacts
from sweeper.running.compute import DEVICE_SO_FAR, DEVICE_TOTAL, WALL_TOTAL, TrialClock, device_share, device_unit
from sweeper.running.progress import TrialProgress

# NoRetryAfterDivergence: sweeps started before it moved to trial_context hold it by this module's name in their
# tuner.pkl, which `sweeper resume` and `extend` unpickle
from sweeper.running.trial_context import NoRetryAfterDivergence, SweepContext  # noqa: F401
from sweeper.space.spec import describe_trial
from sweeper.storage.store import Storage
from sweeper.tracking.metrics import ARTIFACTS, EPOCH_ENDED, FINAL, MODEL, MODEL_EXAMPLE, PBT_EVENT, SETTING_PREFIX
from sweeper.tracking.provenance import DATASET, PREFIX, corpus_datasets, trial_provenance

DIVERGED = "diverged.txt"  # left in the trial folder by a trial whose loss became NaN


def share_gpu_memory(gpus_per_trial: float) -> None:
    """A trial packed onto a shared GPU (resources.gpu < 1) may hold only its share of the GPU's memory: Ray
    divides the GPU's compute by scheduling, not its memory, so one trial's caching allocator could otherwise take
    what its neighbours need and fail them with out-of-memory errors. Over its share a trial fails alone."""
    if 0 < gpus_per_trial < 1 and torch.cuda.is_available():
        torch.cuda.set_per_process_memory_fraction(gpus_per_trial)


def restore(trial_id: str, settings: dict[str, Any], unsent: dict[str, Any]) -> tuple[dict | None, int]:
    """The checkpoint Tune hands this trial (a retry's own, or a PBT donor's) and how often the trial restored its
    own; a PBT exploit goes into `unsent`, reported with the next result."""
    saved = tune.get_checkpoint()
    if not saved:
        return None, 0
    with saved.as_directory() as folder:
        resume = checkpoint.load_resume(Path(folder))  # its weights checked before a model is built
    donor = resume.get("trial_id", trial_id)
    if donor != trial_id:  # PBT exploit: another trial's weights, this trial's new (explored) settings
        unsent[PBT_EVENT] = json.dumps({"epoch": resume["epoch"], "copied_from": donor, "settings": settings})
        print(
            f"PBT: continuing from trial {donor}'s checkpoint of epoch {resume['epoch']} with {settings}",
            file=sys.stderr,
        )
        return resume, 0
    restores = int(resume.get("restores", 0)) + 1
    print(f"restored from the checkpoint of epoch {resume['epoch']} (restore #{restores})", file=sys.stderr)
    return resume, restores


# what trained a trial: the same for every trial of a (reused) worker process, and git's answer costs 0.1 s a trial
process_provenance = functools.cache(trial_provenance)
_loaded: dict[str, tuple[TrialData, str]] = {}  # the last corpus this worker tokenised, by what shaped it, with
# its MLflow dataset inputs


def trial_data(cfg: TrialConfig) -> tuple[TrialData, str]:
    """A reused worker process trains trial after trial on the same data settings: it tokenises the corpus
    once (a third of a second of a tiny trial) and keeps that one corpus, not one per setting, and its dataset
    inputs (provenance.corpus_datasets: the digests read every pair once)."""
    links, cut = cfg.train.guided_alignment > 0, cfg.decode.max_src_len
    key = repr((cfg.data, links, cut))
    if key not in _loaded:
        _loaded.clear()
        data = load_trial_data(
            cfg.data, training_links=links, eval_max_len=cut, log=lambda line: print(line, file=sys.stderr)
        )
        _loaded[key] = data, corpus_datasets(cfg.data.corpus, data.corpus.splits)
    return _loaded[key]


def prepare_worker(context: SweepContext) -> None:
    """A trial's process set up as the driver's: its threads and GPU share, and its network calls (an HTTP call
    through requests, an artifact store's client) under the driver's deadline and size cap (nmt_core/gates/network.py).
    Trials hand MLflow nothing themselves, but a Ray worker is a process of its own that the driver's wrapper does
    not reach, and whatever talks to a server in it is held to the same bounds."""
    torch.set_num_threads(max(1, int(context.cpus_per_trial)))
    share_gpu_memory(context.gpus_per_trial)
    configure_network()


def train_trial(config: dict[str, Any], context: SweepContext, entered: float) -> None:
    prepare_worker(context)
    cfg, _ = describe_trial(config, context.base)
    trial_id = tune.get_context().get_trial_id()
    settings = {k: v for k, v in cfg.flat().items() if k in context.mutable}  # PBT: the values in force now
    # what trained this trial, reported with the first result of this process (the driver tags the run)
    unsent = dict(process_provenance(resolve_device(cfg.train.device), ray.get_runtime_context().get_node_id()))
    resume, restores = restore(trial_id, settings, unsent)
    clock = TrialClock(float((resume or {}).get(WALL_TOTAL, 0.0)), entered)  # PBT exploit: on from its donor's count
    latest = {"state": resume}
    in_force = {f"{SETTING_PREFIX}{k}": v for k, v in settings.items()}
    share = device_share(context.cpus_per_trial, context.gpus_per_trial)

    def on_epoch_end(report: dict, state: dict, is_best: bool) -> None:
        ended, wall = f"{time.time():.3f}", clock.wall_s()
        latest["state"] = {**state, "restores": restores, "trial_id": trial_id, WALL_TOTAL: wall}
        system = sampler.take() if sampler else {}
        spent = {
            DEVICE_SO_FAR: wall * share,
            "restores": restores,
            EPOCH_ENDED: ended,
            **known_so_far(state, wall * share),
        }
        with tempfile.TemporaryDirectory() as folder:
            checkpoint.save(latest["state"], Path(folder) / checkpoint.LAST)
            tune.report(
                {**report, **in_force, **unsent, **system, **spent}, checkpoint=tune.Checkpoint.from_directory(folder)
            )
        unsent.clear()

    # training is deterministic: a trial that diverged would diverge again from its checkpoint, so a retry
    # stops at once, on whichever node it lands (the marker is in the sweep's storage)
    storage = tune.get_context().get_storage()
    trial_folder = Storage(storage.trial_fs_path, storage.storage_filesystem, storage.trial_fs_path)
    if trial_folder.exists(DIVERGED):
        raise TrainingDiverged(f"{trial_folder.read_text(DIVERGED)} (not retried: it would diverge again)")
    data = None  # a restored trial's own vocabularies come with its checkpoint: train() loads the corpus with them
    if not resume:
        data, unsent[DATASET] = trial_data(cfg)  # the corpus's splits logged as the run's inputs, with the first report
    sampler = None  # started just before training, stopped after it: a reused worker keeps no sampling thread
    if context.system_metrics:
        from sweeper.tracking.system_metrics import SystemSampler  # MLflow's monitors: only where they are used

        sampler = SystemSampler()
    try:
        result = train(
            cfg,
            on_epoch_end,
            resume,
            log=lambda line: print(line, file=sys.stderr),
            data=data,
            step_progress=TrialProgress(context.sweep, trial_id),
        )
    except TrainingDiverged as err:
        trial_folder.write_text(str(err), DIVERGED)
        raise
    finally:
        if sampler:
            sampler.stop()
    report_final(result, cfg, context, latest["state"], {"restores": restores, **unsent}, clock)


def metric_signatures(result: TrainResult) -> dict[str, str]:
    """chrF's and TER's sacrebleu signatures, as the first test set was scored (every set is scored alike)."""
    first = next(iter(result.tests.values()))
    return {f"{name}_signature": score.signature for name, score in first.scores.items()}


def known_so_far(state: dict[str, Any], device_s: float) -> dict[str, Any]:
    """The values an objective may name that a trial otherwise reports only at its end (spec.AT_END_ONLY), as they
    stand after an epoch: Ray Tune checks every result for each metric the search ranks by. The parameter count is
    the model's weights' (its state holds parameters only: no model registers buffers)."""
    return {"n_params": sum(t.numel() for t in state["model"].values()), DEVICE_TOTAL: device_s}


def spent(clock: TrialClock, context: SweepContext) -> dict[str, Any]:
    """A trial's total cost for its last report: wall seconds, device-seconds and what a device is here (a tag)."""
    wall = clock.wall_s()
    share = device_share(context.cpus_per_trial, context.gpus_per_trial)
    return {WALL_TOTAL: wall, DEVICE_TOTAL: wall * share, f"{PREFIX}device_unit": device_unit(context.gpus_per_trial)}


def report_final(
    result: TrainResult,
    cfg: TrialConfig,
    context: SweepContext,
    state: dict | None,
    extra: dict[str, Any],
    clock: TrialClock | None = None,
) -> None:
    """The last report: the best epoch's numbers, the dev beam search and the tests, with the final checkpoint
    (artifacts, the training state, the model's input example and, under `tracking.models: all`, the model), and
    what the trial cost (`clock`: its wall time across restores)."""
    device = next(result.model.parameters()).device
    sets = {"dev": evaluate_split(result.model, result.data, "dev", cfg, device, cfg.decode.beam_size), **result.tests}
    last_epoch = result.history[-1]["epoch"] if result.history else 0
    best = next((r for r in result.history if r["epoch"] == result.final["best_epoch"]), {})
    with tempfile.TemporaryDirectory() as folder:
        write_trial_artifacts(result, sets, Path(folder) / ARTIFACTS, draw=context.plots == "all")
        if state is not None:  # a restore after this point finds the trained model, not nothing
            checkpoint.save(state, Path(folder) / checkpoint.LAST)
            example = result.data.sources["dev"][:2]
            (Path(folder) / MODEL_EXAMPLE).write_text(json.dumps(example), encoding="utf-8")  # for a later model
            if context.models == "all":
                save_model(state, Path(folder) / MODEL, example)
        # the best epoch's report (schedulers and searchers read the objective from the last result)
        tune.report(
            {
                **best,
                **result.final,
                "epoch": last_epoch,
                "bleu_dev_final_beam": sets["dev"].bleu,
                "bleu_signature": sets["dev"].signature,
                f"{PAPER_BLEU}_signature": sets["dev"].paper_signature,
                **metric_signatures(result),
                **extra,  # restores, and what was restored after the last epoch (unsent)
                **(spent(clock, context) if clock else {}),
                FINAL: 1,
            },
            checkpoint=tune.Checkpoint.from_directory(folder),
        )
