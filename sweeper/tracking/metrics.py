"""Every metric and tag name a sweep writes, and where each one goes: one table that tracking, results.parquet,
the parent run and the summary read, so a metric added in nmt_core is routed by one line here (a name that
matched no prefix list was silently dropped before: `reverse_bleu_test_<set>` reached neither MLflow nor
results.parquet).

A metric is logged per epoch (step = epoch) or once when the trial is final (after testing); the best trial's
copy goes to the sweep's parent run where `parent` is set; results.parquet holds it as `results` says.

MLflow's names are not Tune's keys (issue 59): MLflow's UI makes one chart section per prefix before `/`, so a
per-epoch metric is logged as `<what it measures>/<key>` (`bleu/dev`, `loss/train`, `temperature/tau_p50`), an
end-of-run value as `result/<key>` at step 0 (MLflow draws a step-0 metric as a bar that groups by run), and the
parent run's copy of the best trial's as `sweep/<key>`, a name no trial has. Tune's keys (a space's objective
`bleu_dev`, results.parquet's columns) stay as they are. Runs recorded before this hold the flat keys themselves:
`report_key` reads either, and a sweep started with the flat names goes on writing them (FLAT_NAMES).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from nmt_core.training.diagnostic_keys import KEYS as DIAGNOSTICS
from nmt_core.training.diagnostic_keys import TAU_P50
from nmt_core.training.evaluate import MT_METRICS, PAPER_BLEU, PLAIN

PER_EPOCH, AT_END = "epoch", "end"  # when a metric is logged: every epoch, or once after testing
BEST, MEAN, LAST = "best", "mean", "last"  # results.parquet: the best dev epoch's, the mean over epochs, the final
SETTING_PREFIX = "setting."  # `setting.<key>`: the value of a PBT-mutated key in force during an epoch
SYSTEM_PREFIX = "system/"  # MLflow's prefix for system metrics: its UI groups them in a "System metrics" section
# the names a trial's reports and checkpoints share with the driver (runner, tracking, progress)
ARTIFACTS = "artifacts"  # folder inside the final checkpoint that the tracking callback uploads
MODEL = "model"  # the MLflow model's folder in the final checkpoint (its LoggedModel is named after its variant)
MODEL_EXAMPLE = "model_example.json"  # in the final checkpoint: the input example of a model made from it later
FINAL = "final"  # the key that marks the last report of a trial (test BLEU, n_params)
# when a trial ended the epoch it reports (time.time(), as text: Tune keeps running statistics of every numeric key
# of every trial, and this one is only read once, by the driver's epoch-to-MLflow latency figures)
EPOCH_ENDED = "epoch_ended_at"
PBT_EVENT = "pbt_event"  # JSON of an exploit: the epoch, the trial copied from, the settings explored
# paths in a trial run's artifacts that the trial (or the driver) writes and the summary reads
HEATMAPS = "traces/heatmaps.json"  # what a trial's heatmaps are drawn from, by the trial or later by the summary
FORCED = "traces/forced"  # <set>.parquet: tau and gate at every reference token of a test set, teacher-forced
PLOTS_FOLDER = "plots"  # the heatmaps drawn, by a trial with `tracking.plots: all` or the summary with `best`
TRANSLATIONS = (
    "translations"  # <set>.txt, .tsv and .json (an MLflow table, sweeper.tracking.mlflow_tables) of every set
)
PBT_EVENTS = "pbt_events.json"  # a trial's PBT exploits (the artifact; their count is the tag EXPLOITS)
# what a sweep's folder in storage holds besides Tune's files: the runner writes them; the summary, `sweeper list` and
# the API read them without importing the runner (and Ray Tune, seconds of a command's start)
RESULTS_FILE = "results.parquet"
SUMMARY_DIR = "summary"  # also the parent run's artifact folder of the summary


RESULT, SWEEP = "result/", "sweep/"  # MLflow's prefixes of a trial's end-of-run values and of the parent's own
FLAT_NAMES, GROUPED_NAMES = "flat", "grouped"  # MLflow names: Tune's keys (sweeps before issue 59), or the groups


@dataclass(frozen=True)
class Metric:
    """One metric name, or a family of names sharing a prefix (`bleu_test_<set>`, `bleu_test_avg`)."""

    name: str
    when: str  # PER_EPOCH or AT_END
    prefix: bool = False  # `name` starts every key of the family
    parent: bool = False  # the best trial's value is copied to the sweep's parent run
    results: str | None = None  # BEST, MEAN or LAST in results.parquet; None: MLflow only
    curve: bool = False  # the summary reads its per-epoch history (findings, dev curves, s/epoch)
    mlflow: str = ""  # its MLflow name (of a family: the prefix that replaces `name`); "" for AT_END: result/<name>
    best: str = ""  # a per-epoch metric whose best epoch's value is also logged at the end, under this name

    def matches(self, key: str) -> bool:
        return key.startswith(self.name) if self.prefix else key == self.name

    def renamed(self, key: str) -> str:
        """`key`'s MLflow name (one of this family's keys)."""
        new = self.mlflow or RESULT + self.name
        return new + key[len(self.name) :] if self.prefix else new


def _diagnostic(key: str) -> Metric:
    """An attention diagnostic: the temperature's own (`tau_*`) in one chart section, the weights' in another."""
    section = "temperature" if key.startswith("tau_") else "attention"
    best = f"{RESULT}{key}_best" if key == TAU_P50 else ""
    return Metric(key, PER_EPOCH, results=BEST, curve=True, mlflow=f"{section}/{key}", best=best)


METRICS = (
    Metric("train_loss", PER_EPOCH, mlflow="loss/train"),
    Metric("dev_loss", PER_EPOCH, curve=True, mlflow="loss/dev"),  # findings: did early stopping end a falling loss
    Metric("dev_ppl", PER_EPOCH, mlflow="loss/dev_ppl"),
    Metric(
        "bleu_dev", PER_EPOCH, parent=True, results=BEST, curve=True, mlflow="bleu/dev", best=RESULT + "bleu_dev_best"
    ),
    Metric(
        "chrf_dev", PER_EPOCH, parent=True, results=BEST, curve=True, mlflow="chrf/dev", best=RESULT + "chrf_dev_best"
    ),
    Metric("epoch_time_s", PER_EPOCH, results=MEAN, curve=True, mlflow="speed/epoch_time_s"),
    Metric("tokens_per_s", PER_EPOCH, results=MEAN, mlflow="speed/tokens_per_s"),
    *(_diagnostic(key) for key in DIAGNOSTICS),
    Metric(SETTING_PREFIX, PER_EPOCH, prefix=True, mlflow="setting/"),
    Metric(SYSTEM_PREFIX, PER_EPOCH, prefix=True, mlflow=SYSTEM_PREFIX),
    Metric("bleu_test_", AT_END, prefix=True, parent=True, results=LAST),
    Metric(f"{PAPER_BLEU}_test_", AT_END, prefix=True, parent=True, results=LAST),
    *(Metric(f"{name}_test_", AT_END, prefix=True, parent=True, results=LAST) for name in MT_METRICS),  # chrF, TER
    Metric("reverse_bleu_test_", AT_END, prefix=True, parent=True, results=LAST),  # train.symmetry_weight > 0
    Metric(f"{PLAIN}bleu_test_", AT_END, prefix=True, parent=True, results=LAST),  # a decoding-only part's control
    Metric("aer_", AT_END, prefix=True, parent=True, results=LAST),
    Metric("gold_attention_", AT_END, prefix=True, results=LAST),
    Metric("n_params", AT_END, results=LAST),
    Metric("best_epoch", AT_END),
    Metric("bleu_dev_final_beam", AT_END),
    Metric("compile_time_s", AT_END, results=LAST),  # model.compile: seconds the trial spent compiling
    # what the trial cost (sweeper.running.compute): its spending so far each epoch, its totals at the end
    Metric("device_s_so_far", PER_EPOCH, mlflow="compute/device_s"),
    Metric("device_s", AT_END, results=LAST),
    Metric("wall_s", AT_END, results=LAST),
)
CURVES = tuple(m.name for m in METRICS if m.curve)  # per-epoch histories the summary reads
AGGREGATED = {how: tuple(m.name for m in METRICS if m.when == PER_EPOCH and m.results == how) for how in (BEST, MEAN)}

# tags: the run's role in a sweep, and what the driver records about a trial or the sweep
ROLE, TRIAL_ID, VARIANT = "sweeper.role", "sweeper.trial_id", "sweeper.variant"  # VARIANT: the label machines join on
VARIANT_NAME = (
    "sweeper.variant_name"  # the variant's name as the summary writes it (sweeper.tracking.names): to group by
)
RUN_COLOUR = "mlflow.runColor"  # a run's colour in MLflow's charts and runs table, `#rrggbb`
SEED_PARAM = "seed"  # a trial's seed as a param of its own, a column beside the variant (sweeps before issue 71)
SEED_TAG = "sweeper.seed"  # the seed as a tag: MLflow averages params in a group's row (seed 1.5), never tags
VIEW_PREFIX = "view/"  # params logged for MLflow's charts only (sweeper.tracking.mlflow_charts): no summary reads them
NOT_APPLICABLE = "n/a"  # the param of a swept axis on a trial whose variant does not use it
# one colour per variant, in the order a sweep meets its variants: matplotlib's tab10, which the summary's figures draw
# with, so a variant has one colour in MLflow's charts and in the summary's
PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip
PARENT = "mlflow.parentRunId"
NOTE = "mlflow.note.content"  # what MLflow's UI shows as an experiment's or a run's description
EXPLOITS, RESTORES, ERROR_FILE = "sweeper.pbt_exploits", "sweeper.restores", "sweeper.error_file"
BEST_RUN_ID, BEST_VARIANT = "sweeper.best_run_id", "sweeper.best_variant"
PARETO_TAG = "sweeper.pareto"  # several objectives: a trial's row on the front, dominated, or within noise (summary)
DESIGN_TAG = "sweeper.plan.design"  # a designed sweep's design digest, frozen on its parent run before any result
SIGNATURE_TAGS = {
    "bleu_signature": "sweeper.bleu_signature",
    f"{PAPER_BLEU}_signature": f"sweeper.{PAPER_BLEU}_signature",
    **{f"{name}_signature": f"sweeper.{name}_signature" for name in MT_METRICS},  # chrF's and TER's (sacrebleu's)
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


def colour(index: int) -> str:
    """The colour of a sweep's `index`-th variant (from 0): tab10's, round again past ten."""
    return PALETTE[index % len(PALETTE)]


def mlflow_metrics(report: dict[str, Any], when: str, names: str = GROUPED_NAMES) -> dict[str, Any]:
    """The metrics of a report MLflow logs at this time (PER_EPOCH or AT_END), under their MLflow names. The final
    report carries the best epoch's values too: a per-epoch metric with `best` is logged with the end's values."""
    logged = {}
    for key, value in report.items():
        metric = metric_of(key)
        if metric is None:
            continue
        if metric.when == when:
            logged[key if names == FLAT_NAMES else metric.renamed(key)] = value
        elif when == AT_END and metric.best and names == GROUPED_NAMES:
            logged[metric.best] = value
    return logged


def parent_metrics(best_row: dict[str, Any], names: str = GROUPED_NAMES) -> dict[str, float]:
    """The best trial's values (a results.parquet row: `bleu_dev` is its best epoch's) the sweep's parent run
    holds: `sweep/<the trial's result name>`, never a name a trial has (flat names: the row's own, as before)."""
    copied = {}
    for key, value in best_row.items():
        metric = metric_of(key)
        if metric is None or not metric.parent or not isinstance(value, (int, float)):
            continue
        copied[key if names == FLAT_NAMES else SWEEP + (metric.best or metric.renamed(key)).removeprefix(RESULT)] = (
            value
        )
    return copied


def report_key(name: str) -> str:
    """Tune's key of a logged MLflow metric, new name or flat (a flat name is the key itself); a per-epoch metric's
    best epoch logged at the end reads as `<key>_best`, and a name outside the schema as itself."""
    for metric in METRICS:
        if name == metric.best:
            return f"{metric.name}_best"
    for metric in METRICS:
        new = metric.renamed(metric.name)
        if metric.prefix and name.startswith(new):
            return metric.name + name[len(new) :]
        if name == new:
            return metric.name
    return name


def mlflow_name(key: str) -> str:
    """The grouped MLflow name of Tune's `key` as report_key reads it back: a best epoch's `<key>_best` under its
    metric's `best` name, a key of the schema under its MLflow name, any other (a system metric) as itself."""
    for metric in METRICS:
        if metric.best and key == f"{metric.name}_best":
            return metric.best
    metric = metric_of(key)
    return metric.renamed(key) if metric else key


def history_name(key: str, logged: Iterable[str]) -> str | None:
    """Under which name a run logged the per-epoch history of Tune's `key`: the grouped name or the flat one."""
    names = set(logged)
    metric = metric_of(key)
    grouped = metric.renamed(key) if metric else key
    return grouped if grouped in names else key if key in names else None


def is_result(name: str) -> bool:
    """Whether a logged MLflow metric is one of a trial's end-of-run values (new name or flat)."""
    return name.startswith(RESULT) or is_logged(name, AT_END)
