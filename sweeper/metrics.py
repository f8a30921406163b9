"""Every metric and tag name a sweep writes, and where each one goes: one table that tracking, results.parquet,
the parent run and the summary read, so a metric added in nmt_core is routed by one line here (a name that
matched no prefix list was silently dropped before: `reverse_bleu_test_<set>` reached neither MLflow nor
results.parquet).

A metric is logged per epoch (step = epoch) or once when the trial is final (after testing); the best trial's
copy goes to the sweep's parent run where `parent` is set; results.parquet holds it as `results` says.
"""

from __future__ import annotations

from dataclasses import dataclass

from nmt_core.diagnostics import KEYS as DIAGNOSTICS
from nmt_core.train import PAPER_BLEU

PER_EPOCH, AT_END = "epoch", "end"  # when a metric is logged: every epoch, or once after testing
BEST, MEAN, LAST = "best", "mean", "last"  # results.parquet: the best dev epoch's, the mean over epochs, the final
SETTING_PREFIX = "setting."  # `setting.<key>`: the value of a PBT-mutated key in force during an epoch
SYSTEM_PREFIX = "system/"  # MLflow's prefix for system metrics: its UI groups them in a "System metrics" section
# the names a trial's reports and checkpoints share with the driver (runner, tracking, progress)
ARTIFACTS = "artifacts"  # folder inside the final checkpoint that the tracking callback uploads
MODEL = "model"  # the MLflow model's folder in the final checkpoint, logged as the run's LoggedModel `model`
FINAL = "final"  # the key that marks the last report of a trial (test BLEU, n_params)
# when a trial ended the epoch it reports (time.time(), as text: Tune keeps running statistics of every numeric key
# of every trial, and this one is only read once, by the driver's epoch-to-MLflow latency figures)
EPOCH_ENDED = "epoch_ended_at"
PBT_EVENT = "pbt_event"  # JSON of an exploit: the epoch, the trial copied from, the settings explored
# paths in a trial run's artifacts that the trial (or the driver) writes and the summary reads
HEATMAPS = "traces/heatmaps.json"  # what a trial's heatmaps are drawn from, by the trial or later by the summary
FORCED = "traces/forced"  # <set>.parquet: tau and gate at every reference token of a test set, teacher-forced
PLOTS_FOLDER = "plots"  # the heatmaps drawn, by a trial with `tracking.plots: all` or the summary with `best`
PBT_EVENTS = "pbt_events.json"  # a trial's PBT exploits (the artifact; their count is the tag EXPLOITS)
# what a sweep's folder in storage holds besides Tune's files: the runner writes them; the summary, `sweeper list` and
# the API read them without importing the runner (and Ray Tune, seconds of a command's start)
RESULTS_FILE = "results.parquet"
SUMMARY_DIR = "summary"  # also the parent run's artifact folder of the summary


@dataclass(frozen=True)
class Metric:
    """One metric name, or a family of names sharing a prefix (`bleu_test_<set>`, `bleu_test_avg`)."""

    name: str
    when: str  # PER_EPOCH or AT_END
    prefix: bool = False  # `name` starts every key of the family
    parent: bool = False  # the best trial's value is copied to the sweep's parent run
    results: str | None = None  # BEST, MEAN or LAST in results.parquet; None: MLflow only
    curve: bool = False  # the summary reads its per-epoch history (findings, dev curves, s/epoch)

    def matches(self, key: str) -> bool:
        return key.startswith(self.name) if self.prefix else key == self.name


METRICS = (
    Metric("train_loss", PER_EPOCH),
    Metric("dev_loss", PER_EPOCH, curve=True),  # the findings ask whether early stopping ended a falling loss
    Metric("dev_ppl", PER_EPOCH),
    Metric("bleu_dev", PER_EPOCH, parent=True, results=BEST, curve=True),
    Metric("epoch_time_s", PER_EPOCH, results=MEAN, curve=True),
    Metric("tokens_per_s", PER_EPOCH, results=MEAN),
    *(Metric(key, PER_EPOCH, results=BEST, curve=True) for key in DIAGNOSTICS),
    Metric(SETTING_PREFIX, PER_EPOCH, prefix=True),
    Metric(SYSTEM_PREFIX, PER_EPOCH, prefix=True),
    Metric("bleu_test_", AT_END, prefix=True, parent=True, results=LAST),
    Metric(f"{PAPER_BLEU}_test_", AT_END, prefix=True, parent=True, results=LAST),
    Metric("reverse_bleu_test_", AT_END, prefix=True, parent=True, results=LAST),  # train.symmetry_weight > 0
    Metric("aer_", AT_END, prefix=True, parent=True, results=LAST),
    Metric("gold_attention_", AT_END, prefix=True, results=LAST),
    Metric("n_params", AT_END, results=LAST),
    Metric("best_epoch", AT_END),
    Metric("bleu_dev_final_beam", AT_END),
    Metric("compile_time_s", AT_END, results=LAST),  # model.compile: seconds the trial spent compiling
)
CURVES = tuple(m.name for m in METRICS if m.curve)  # per-epoch histories the summary reads
AGGREGATED = {how: tuple(m.name for m in METRICS if m.when == PER_EPOCH and m.results == how) for how in (BEST, MEAN)}

# tags: the run's role in a sweep, and what the driver records about a trial or the sweep
ROLE, TRIAL_ID, VARIANT = "sweeper.role", "sweeper.trial_id", "sweeper.variant"
PARENT = "mlflow.parentRunId"
NOTE = "mlflow.note.content"  # what MLflow's UI shows as an experiment's or a run's description
EXPLOITS, RESTORES, ERROR_FILE = "sweeper.pbt_exploits", "sweeper.restores", "sweeper.error_file"
BEST_RUN_ID, BEST_VARIANT = "sweeper.best_run_id", "sweeper.best_variant"
SIGNATURE_TAGS = {
    "bleu_signature": "sweeper.bleu_signature",
    f"{PAPER_BLEU}_signature": f"sweeper.{PAPER_BLEU}_signature",
}


def metric_of(key: str) -> Metric | None:
    """The schema's entry for a logged key; None for a key no one reads (Tune's own, `epoch`, ...)."""
    return next((m for m in METRICS if m.matches(key)), None)


def is_logged(key: str, when: str) -> bool:
    """Whether tracking logs `key` at this time (PER_EPOCH: with every epoch's step; AT_END: once, after testing)."""
    metric = metric_of(key)
    return metric is not None and metric.when == when


def to_parent(key: str) -> bool:
    """Whether the best trial's value of `key` is copied to the sweep's parent run."""
    metric = metric_of(key)
    return metric is not None and metric.parent


def final_result(key: str) -> bool:
    """Whether results.parquet holds the final report's value of `key`."""
    metric = metric_of(key)
    return metric is not None and metric.results == LAST
