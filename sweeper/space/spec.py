"""Sweep YAML -> validated SweepSpec -> the list of trial configurations (or an Optuna define-by-run space).

One pass, in order: read (the gate's bounded read), parse (YAML with its limits, once; `--set` pairs and the API's
overrides are applied to the parsed mapping), check every key against the declarations (`check_space`), then plan
(`SweepSpec.plan`, built once and shared by the design's check, `validate`, the runner and `extend`).
Everything a user can get wrong is caught here, before Ray starts: one line naming the file, the dotted
key and what is allowed. Conditional parameters (`if:`) are resolved here too, for every algorithm, so
the plan `sweeper validate` prints is exactly the set of trials `sweeper run` starts.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import json
import math
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from nmt_core.config import EPOCHS, MAX_SEED, SEEDS, ConfigError, TrialConfig, all_keys, build_config, set_dotted
from nmt_core.data.corpus_names import CorpusError
from nmt_core.data.corpus_names import check_name as check_corpus_name
from nmt_core.family.registry import label_words
from nmt_core.gates.credentials import check_uri
from nmt_core.gates.gate import check_tree, escape
from nmt_core.gates.settings import Bound, Setting, accept, declared, setting
from nmt_core.gates.yaml_input import SHOWN_CHARS, parse_yaml, read_text, shown
from sweeper.space.design import DesignSpec, check_design

DISTRIBUTIONS = ("choice", "grid", "uniform", "loguniform", "int")
ALGORITHMS = ("grid", "random", "optuna")
# Optuna's samplers by `search.sampler`, with the modules each needs beyond Optuna itself
SAMPLERS = {"tpe": (), "cmaes": ("cmaes",), "gp": ("scipy", "torch"), "random": (), "qmc": ("scipy",), "nsga2": ()}
STUDY_SCHEMES = ("sqlite", "postgresql", "mysql")  # what Optuna's RDBStorage opens (an SQLAlchemy URL)
SCHEDULERS = ("fifo", "asha", "hyperband", "pbt")
TOP_LEVEL = (
    "name",
    "description",
    "data",
    "base",
    "parameters",
    "search",
    "objective",
    "scheduler",
    "resources",
    "failure",
    "tracking",
    "baseline",
    "significance",
    "design",
)
OBJECTIVE_METRICS = (
    "bleu_dev",
    "chrf_dev",
    "dev_loss",
    "dev_ppl",
    "train_loss",
    "tokens_per_s",
    "n_params",
    "device_s",
)
AT_END_ONLY = ("n_params", "device_s")  # reported once a trial is tested: no scheduler can rank trials by them
MAX_OBJECTIVES = 4  # a Pareto front of more is rarely read, and Optuna's samplers need many trials for it
MULTI_SAMPLERS = ("tpe", "nsga2", "random", "qmc")  # Optuna's samplers that take several objectives
MODES = ("max", "min")
# nmt_core.training.evaluate.seed_sentence_test over PairedBootstrap's resamples (one seed a row: sacrebleu
# --paired-bs), ApproximateRandomization (sacrebleu --paired-ar)
SIGNIFICANCE_METHODS = ("paired_bootstrap", "approximate_randomization")
# what produces the marks of each method, in a line: the summary's footer, the parent run and results.parquet say it
SIGNIFICANCE_TESTS = {
    "paired_bootstrap": "two-level seed x sentence test (Welch's seed variance plus the system x sentence part the "
    "seeds share, from the paired bootstrap, t-referenced); one seed a row: sacrebleu --paired-bs, test-set "
    "variance only, no marks",
    "approximate_randomization": "paired approximate randomization over test sentences (sacrebleu --paired-ar): "
    "test-set variance only, no marks",
}
PLOTS = ("best", "all", "none")  # tracking.plots: whose attention heatmaps are drawn (every trial logs traces)
MODELS = ("best", "all", "none")  # tracking.models: whose MLflow model is logged (every trial keeps its checkpoint)
MODELS_BEFORE_POLICY = "all"  # how a sweep stored before tracking.models existed ran: every trial logged its model
MIN_RESAMPLES = 100
MAX_RESAMPLES = 1_000_000  # the bootstrap's time and memory grow with it; 10,000 already resolves p < 0.001
MAX_TRIALS = 10_000  # a plan beyond this is a typo (num_samples: 1000000000); refused before it is enumerated
NAME_RULE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")  # every sweep name, in full (DESIGN.md)
GPU_SHARES = "a fraction in (0, 1] to pack trials, or a whole number"
BUDGET_UNITS = ("device_hours", "wall_hours")  # resources.budget_unit (sweeper.running.compute)
MAX_BUDGET_HOURS = 8784.0  # a leap year: a budget beyond it is a typo, not a plan
PLAN = f"samples x repeats x the grid: at most {MAX_TRIALS:,} trials, counted before they are built"


@dataclass
class Parameter:
    key: str  # dotted trial-config key
    kind: str  # one of DISTRIBUTIONS
    values: list[Any]  # choice/grid: the values; uniform/loguniform/int: [low, high]
    condition: dict[str, list[Any]] = field(default_factory=dict)  # `if:` key -> allowed values

    def active(self, assignment: Mapping[str, Any]) -> bool:
        return all(k in assignment and assignment[k] in allowed for k, allowed in self.condition.items())

    def sample(self, rng: random.Random) -> Any:
        low, high = self.values[0], self.values[-1]
        if self.kind in ("choice", "grid"):
            return rng.choice(self.values)
        if self.kind == "uniform":
            return rng.uniform(low, high)
        if self.kind == "loguniform":
            return math.exp(rng.uniform(math.log(low), math.log(high)))
        return rng.randint(low, high)

    def admits(self, value: Any) -> bool:
        """Whether `value` is one this parameter can take (a starting point must be)."""
        if self.kind in ("choice", "grid"):
            return value in self.values
        numeric = int if self.kind == "int" else (int, float)
        return isinstance(value, numeric) and not isinstance(value, bool) and self.values[0] <= value <= self.values[-1]


@dataclass
class SearchSpec:
    algorithm: str = setting("grid", "grid: every combination; random: draws; optuna: a sampler", choices=ALGORITHMS)
    num_samples: int = setting(1, "passes over the space (random draws, Optuna trials)", Bound(1, note=PLAN))
    max_concurrent: int = setting(
        4, "trials running at once", Bound(1, MAX_TRIALS, note="no more run at once than a plan holds")
    )
    seed: int = setting(0, "seeds the random draws and Optuna's sampler", Bound(0, MAX_SEED, note=SEEDS))
    repeats: int = setting(1, "seeds per configuration (train.seed, +1, +2, ...)", Bound(1, note=PLAN))
    sampler: str = setting("tpe", "optuna: the sampler", choices=tuple(SAMPLERS))
    points_to_evaluate: list[dict[str, Any]] = setting([], "optuna: tried first, in this order")
    study_storage: str | None = setting(None, "optuna: an RDB URL for the study (default: see sweeper.running.study)")


OPTUNA_ONLY = ("sampler", "points_to_evaluate", "study_storage")  # search keys only Optuna reads


@dataclass
class ObjectiveSpec:
    metric: str = setting(
        "bleu_dev",
        "what the search and the schedulers rank trials by (its best epoch's value)",
        choices=OBJECTIVE_METRICS,
    )
    mode: str = setting("max", "max or min the metric", choices=MODES)


@dataclass
class SchedulerSpec:
    type: str = setting("fifo", "fifo: every trial to the end; asha, hyperband: early stops; pbt", choices=SCHEDULERS)
    grace_period: int = setting(1, "asha: epochs before the first stop", Bound(1, EPOCHS))
    reduction_factor: int = setting(2, "asha, hyperband: 1/n of the trials go on at each rung", Bound(2))
    perturbation_interval: int = setting(2, "pbt: epochs between exploit/explore decisions", Bound(1, EPOCHS))
    quantile_fraction: float = setting(0.25, "pbt: the bottom share copies the top share", Bound(0, 0.5, open_low=True))
    synch: bool = setting(False, "pbt: the population waits at each perturbation, then exploits at once (Tune's synch)")
    mutations: dict[str, Any] = setting({}, "pbt: key -> [values] or {uniform|loguniform: [lo, hi]}")


# what PBT may change while a trial trains: read afresh every step, or (lr) set on the optimiser at restore
PBT_MUTABLE = ("train.lr", "train.label_smoothing", "train.clip_norm", "attention.coverage_weight")


@dataclass
class ResourcesSpec:
    cpu: float = setting(
        1.0, "CPUs per trial (its torch threads)", Bound(0, 1024, open_low=True, note="threads: no node has more")
    )
    gpu: float = setting(0.0, "GPUs per trial", Bound(0, 64, note=f"{GPU_SHARES}; no node has more"))
    budget: float | None = setting(
        None,
        "hours of budget_unit the sweep may spend; then it stops as `sweeper stop` does (resume: --budget)",
        Bound(0, MAX_BUDGET_HOURS, open_low=True, note="hours (a year at most); null: no limit"),
    )
    budget_unit: str = setting(
        "device_hours",
        "device_hours: trials' wall time x their GPUs (else CPU cores); wall_hours: the sweep's own",
        choices=BUDGET_UNITS,
    )


@dataclass
class FailureSpec:
    max_retries: int = setting(
        2,
        "a trial that fails is retried from its last checkpoint this many times",
        Bound(0, 100, note="a trial failing more often is broken, not unlucky"),
    )


@dataclass
class TrackingSpec:
    uri: str | None = setting(None, "the MLflow tracking URI (--tracking-uri and $MLFLOW_TRACKING_URI come first)")
    system_metrics: bool = setting(True, "CPU/memory/GPU of every trial, logged as system/...")
    plots: str = setting(
        "best", "whose attention heatmaps are drawn: best (by the summary), all (by every trial), none", choices=PLOTS
    )
    models: str = setting(
        "best", "whose MLflow model is logged: best (each variant's best trial, at the end), all, none", choices=MODELS
    )
    webhook: str | None = setting(
        None, "an http(s) URL told when the sweep ends and of each degeneracy warning ($SWEEPER_WEBHOOK_URL first)"
    )


@dataclass
class SignificanceSpec:
    """How `sweeper summarize` tests each variant against its baseline, and each SACT row against its controls."""

    method: str = setting("paired_bootstrap", "how rows are compared", choices=SIGNIFICANCE_METHODS)
    resamples: int = setting(
        1000,
        "bootstrap resamples, or approximate randomization's shuffles (sacrebleu's default: 10000)",
        Bound(MIN_RESAMPLES, MAX_RESAMPLES, note="fewer cannot resolve p < 0.01; more cost time and memory"),
    )
    margin: float | None = setting(
        None,
        "BLEU points: a non-significant difference is tested for equivalence within it (null: no test)",
        Bound(0, open_low=True, note="BLEU points, the equivalence margin"),
    )


# the sections of a sweep YAML read as dataclasses: their fields declare each key (nmt_core.gates.settings.declared)
SECTIONS: dict[str, type] = {
    "search": SearchSpec,
    "objective": ObjectiveSpec,
    "scheduler": SchedulerSpec,
    "resources": ResourcesSpec,
    "failure": FailureSpec,
    "tracking": TrackingSpec,
    "significance": SignificanceSpec,
    "design": DesignSpec,
}


# every setting of the sweep sections by dotted key (what stored state, the schema and the docs table read)
SPEC_SETTINGS: dict[str, Setting] = {
    f"{section}.{key}": d for section, cls in SECTIONS.items() for key, d in declared(cls).items()
}


@dataclass
class SweepSpec:
    name: str
    source: str
    base: dict[str, Any]  # nested trial config every trial starts from (with `data` merged in)
    base_config: TrialConfig  # the same, typed
    parameters: list[Parameter]
    search: SearchSpec
    objective: ObjectiveSpec
    scheduler: SchedulerSpec
    resources: ResourcesSpec
    failure: FailureSpec
    tracking: TrackingSpec
    significance: SignificanceSpec
    design: DesignSpec  # the study's design (sweeper.space.design): none without comparisons
    baseline: dict[str, Any]  # dotted key -> value naming the baseline variant for the summary
    text: str  # the YAML as written, logged to MLflow as space.yaml
    objectives: tuple[ObjectiveSpec, ...] = ()  # `objective` as a list: every objective, the first as `objective`

    @property
    def epochs(self) -> int:
        return self.base_config.train.epochs

    # the sections' values by the names the driver gives them (runner, api, submit, optuna_search)
    @property
    def metric(self) -> str:
        return self.objective.metric

    @property
    def mode(self) -> str:
        return self.objective.mode

    @property
    def cpu(self) -> float:
        return self.resources.cpu

    @property
    def gpu(self) -> float:
        return self.resources.gpu

    @property
    def max_retries(self) -> int:
        return self.failure.max_retries

    @property
    def tracking_uri(self) -> str | None:
        return self.tracking.uri

    @property
    def system_metrics(self) -> bool:
        return self.tracking.system_metrics

    @property
    def plots(self) -> str:
        return self.tracking.plots

    @property
    def models(self) -> str:
        return self.tracking.models

    @functools.cached_property
    def plan(self) -> list[TrialPlan]:
        """The trials of a grid or random search (an Optuna space's draws, for names), built once: the design's
        check, `validate`, the runner and `extend` read this list, never a second expansion."""
        return plan_trials(self)


@dataclass
class RecordedSpace:
    """What the summary reads of a sweep's space.yaml, typed: the sections `sweeper validate` checked."""

    objective: ObjectiveSpec = field(default_factory=ObjectiveSpec)
    significance: SignificanceSpec = field(default_factory=SignificanceSpec)
    tracking: TrackingSpec = field(default_factory=TrackingSpec)
    baseline: dict[str, Any] = field(default_factory=dict)  # dotted key -> value naming the baseline variant
    varied: tuple[str, ...] = ()  # the keys of `parameters`: what an added sweep's trials may differ in (combine)
    scheduler: str = "fifo"  # scheduler.type: sweeps summarised together must share it (combine)
    design: DesignSpec = field(default_factory=DesignSpec)  # the design the summary reads the sweep at
    objectives: tuple[ObjectiveSpec, ...] = ()  # several objectives (the summary's Pareto front); () for one


@dataclass
class TrialPlan:
    """One trial: the parameters that vary, its seed, and a short label."""

    params: dict[str, Any]
    seed: int
    variant: str

    def config(self, base: Mapping[str, Any]) -> TrialConfig:
        return trial_config(base, self.params, self.seed)


def trial_config(base: Mapping[str, Any], params: Mapping[str, Any], seed: int | None = None) -> TrialConfig:
    """The base with the trial's parameters (and its seed, where given) set: the trial's validated config."""
    nested = copy.deepcopy(dict(base))
    for key, value in params.items():
        set_dotted(nested, key, value)
    if seed is not None:
        set_dotted(nested, "train.seed", seed)
    return build_config(nested)


DESCRIBED_MAX = 4096  # trial configs a process keeps (a driver's every trial of a large sweep; a trial's one)
_described: dict[str, tuple[TrialConfig, str]] = {}


def describe_trial(config: Mapping[str, Any], base: Mapping[str, Any]) -> tuple[TrialConfig, str]:
    """Tune's dict of one trial as its TrialConfig and variant label: the one place it becomes typed. grid/random
    hand over the planned trial under `trial` (TrialPlan's fields), Optuna its suggestions as flat dotted keys (the
    seed is the base's). Built once per trial and process: the driver asks for a trial's name, folder, runs and
    results row with the same dict. The config is shared: read it, do not change it."""
    key = json.dumps([base, config], sort_keys=True, default=repr)
    if key not in _described:
        if len(_described) >= DESCRIBED_MAX:
            _described.clear()
        if "trial" in config:
            cfg = trial_config(base, config["trial"]["params"], int(config["trial"]["seed"]))
        else:
            cfg = trial_config(base, {k: v for k, v in config.items() if "." in k})
        _described[key] = cfg, variant_label(cfg)
    return _described[key]


def variant_label(cfg: TrialConfig) -> str:
    """A short human label: score + temperature (+ tau) (+ sentinel) (+ coverage), then whatever else departs from
    the defaults (placement, position bias, ...), e.g. `general+sact4`, `concat+none+coverage+fertility+bahdanau`,
    `transformer+sact4-first_pass@both+sentinel`."""
    t = cfg.train
    parts = label_words(cfg)  # each part names itself, as its architecture writes it
    parts += [f"guided{t.guided_alignment:g}"] * (t.guided_alignment > 0) + [f"sym{t.symmetry_weight:g}"] * (
        t.symmetry_weight > 0
    )
    return "+".join(parts)


class SpecError(ConfigError):
    """A sweep YAML that cannot run."""


def check_name(name: Any, key: str, source: str) -> str:
    """The one rule for a sweep's name (YAML, --name, resume and summarize NAME): it becomes a folder below the
    storage root, an MLflow experiment and a word in printed shell lines, so never '..', a '/' or a newline."""
    if not isinstance(name, str) or not NAME_RULE.fullmatch(name):
        raise SpecError(
            key,
            f"must be 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit (got {shown(name)})",
            source,
        )
    return name


def _mapping(value: Any, key: str, source: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SpecError(key, f"expected a mapping, got {shown(value)}", source)
    return dict(value)


def read_section(section: str, raw: Any, source: str) -> Any:
    """One section of a sweep YAML as its dataclass (SECTIONS): every key known and as its declaration allows
    (nmt_core.gates.settings); keys left out keep the field's default."""
    settings, values = declared(SECTIONS[section]), {}
    for name, value in _mapping(raw, section, source).items():
        key = f"{section}.{name}"
        if name not in settings:
            raise SpecError(key, "unknown key; allowed: " + ", ".join(settings), source)
        values[name] = accept(key, value, settings[name], source, SpecError)
    return SECTIONS[section](**values)


def _where(base: dict, condition: Mapping[str, Any]) -> dict:
    """The base with each `if:` key at its first allowed value (model.heads if model.arch is transformer is checked on
    a transformer), or the base itself where that is no valid config: _order_by_conditions names a wrong `if:`."""
    nested = copy.deepcopy(base)
    try:
        for other, allowed in condition.items():
            set_dotted(nested, other, allowed[0] if isinstance(allowed, list) and allowed else allowed)
        build_config(nested)
    except ConfigError:
        return copy.deepcopy(base)
    return nested


def _parameter(key: str, raw: Any, base: dict, source: str) -> Parameter:
    dotted = f"parameters.{key}"
    if key not in all_keys():
        raise SpecError(
            dotted,
            "not a trial-config key; allowed keys look like attention.lambda "
            "(sections data, model, attention, train, decode)",
            source,
        )
    raw = _mapping(raw, dotted, source)
    condition = _mapping(raw.pop("if", None), f"{dotted}.if", source)
    kinds = [k for k in raw if k in DISTRIBUTIONS]
    unknown = [k for k in raw if k not in DISTRIBUTIONS]
    if unknown or len(kinds) != 1:
        raise SpecError(
            dotted,
            "expected exactly one distribution (" + ", ".join(DISTRIBUTIONS) + ") and "
            f"optionally `if`, got {', '.join(map(str, raw)) or 'nothing'}",
            source,
        )
    kind, values = kinds[0], raw[kinds[0]]
    where = f"{dotted}.{kind}"
    if not isinstance(values, list) or not values:
        raise SpecError(
            where, "expected a non-empty list" + (" [low, high]" if kind not in ("choice", "grid") else ""), source
        )
    if len(values) > MAX_TRIALS:  # each value is checked below by building a config: refuse a typo's list first
        raise SpecError(where, f"{len(values):,} values; at most {MAX_TRIALS:,} (the trial limit)", source)
    values = ["none" if v is None else v for v in values]  # YAML reads a bare `none` as null
    if kind in ("uniform", "loguniform", "int"):
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        if len(values) != 2 or not numeric or not values[0] < values[1]:
            raise SpecError(where, f"expected [low, high] with low < high, got {shown(values)}", source)
        if kind == "loguniform" and values[0] <= 0:
            raise SpecError(where, f"expected low > 0 for a log scale, got {shown(values)}", source)
        if kind == "int" and not all(isinstance(v, int) for v in values):
            raise SpecError(where, f"expected two integers, got {shown(values)}", source)
    where_it_acts = _where(base, condition)
    for value in values:  # every value (every bound) must make a valid trial config, where its `if:` holds
        try:
            nested = copy.deepcopy(where_it_acts)
            set_dotted(nested, key, value)
            build_config(nested)
        except ConfigError as err:
            raise SpecError(where, f"value {shown(value)}: {err.message}", source) from None
    return Parameter(key, kind, values, {k: v if isinstance(v, list) else [v] for k, v in condition.items()})


def _order_by_conditions(parameters: list[Parameter], source: str) -> list[Parameter]:
    """Check every `if` (it names a choice/grid parameter, with values it can take) and order parameters
    so that each comes after those its condition reads (YAML order does not matter)."""
    by_key = {p.key: p for p in parameters}
    for p in parameters:
        for key, allowed in p.condition.items():
            where = f"parameters.{p.key}.if.{key}"
            parent = by_key.get(key)
            if parent is None or parent.kind not in ("choice", "grid"):
                raise SpecError(where, "must name a choice or grid parameter of this space", source)
            allowed = ["none" if v is None else v for v in allowed]
            p.condition[key] = allowed
            bad = [v for v in allowed if v not in parent.values]
            if bad:
                raise SpecError(
                    where, f"{shown(bad[0])} is not a value of {key}; allowed: " + _listed(parent.values), source
                )
    ordered: list[Parameter] = []
    pending = list(parameters)
    while pending:
        ready = [p for p in pending if all(k in {o.key for o in ordered} for k in p.condition)]
        if not ready:
            raise SpecError(f"parameters.{pending[0].key}.if", "conditions form a cycle", source)
        ordered.extend(ready)
        pending = [p for p in pending if p not in ready]
    return ordered


def mutation_range(raw: list | Mapping) -> tuple[str, float, float] | None:
    """A checked mutation's (uniform|loguniform, low, high), or None for a list of values."""
    if isinstance(raw, list):
        return None
    ((kind, (low, high)),) = raw.items()
    return kind, low, high


def _check_pbt(scheduler: SchedulerSpec, search: SearchSpec, base: dict, source: str) -> None:
    """PBT's mutations: numeric keys it may change mid-training, each a list of numbers or a [low, high] range."""
    if scheduler.type != "pbt":
        if scheduler.mutations:
            raise SpecError("scheduler.mutations", f"only with scheduler.type pbt (got {scheduler.type})", source)
        return
    if not scheduler.mutations:
        raise SpecError(
            "scheduler.mutations",
            "pbt needs at least one mutation, e.g. {train.lr: {loguniform: "
            "[1.0e-4, 1.0e-2]}}; allowed keys: " + ", ".join(PBT_MUTABLE),
            source,
        )
    if search.algorithm == "optuna":
        raise SpecError("scheduler.type", "pbt explores by itself: use search.algorithm grid or random", source)
    for key, raw in scheduler.mutations.items():
        where = f"scheduler.mutations.{key}"
        if key not in PBT_MUTABLE:
            raise SpecError(where, "PBT can change only " + ", ".join(PBT_MUTABLE) + " while a trial trains", source)
        values = raw if isinstance(raw, list) else next(iter(raw.values()), None) if isinstance(raw, Mapping) else None
        if isinstance(raw, Mapping) and (len(raw) != 1 or next(iter(raw)) not in ("uniform", "loguniform")):
            raise SpecError(
                where, f"expected a list of numbers or {{uniform|loguniform: [low, high]}}, got {shown(raw)}", source
            )
        numbers = (
            isinstance(values, list)
            and values
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        )
        if not numbers:
            raise SpecError(
                where,
                f"mutations must be numbers: expected a list of numbers or {{uniform|loguniform: "
                f"[low, high]}}, got {shown(raw)}",
                source,
            )
        if isinstance(raw, Mapping) and (
            len(values) != 2 or not 0 <= values[0] < values[1] or (values[0] <= 0 and "loguniform" in raw)
        ):
            raise SpecError(
                where,
                f"expected [low, high] with 0 <= low < high (low > 0 on a log scale), got {shown(values)}",
                source,
            )
        for value in values:
            nested = copy.deepcopy(base)
            set_dotted(nested, key, value)
            try:
                build_config(nested)
            except ConfigError as err:
                raise SpecError(where, f"value {shown(value)}: {err.message}", source) from None


def _check_optuna_search(search: SearchSpec, parameters: list[Parameter], source: str) -> None:
    """The sampler (its packages installed), the study's storage URL and the starting points: Optuna only."""
    if search.algorithm != "optuna":
        defaults = declared(SearchSpec)
        given = [k for k in OPTUNA_ONLY if getattr(search, k) != defaults[k].default]
        if given:
            raise SpecError(f"search.{given[0]}", f"only with search.algorithm optuna (got {search.algorithm})", source)
        return
    missing = [m for m in SAMPLERS[search.sampler] if importlib.util.find_spec(m) is None]
    if missing:
        raise SpecError(
            "search.sampler", f"{search.sampler} needs {', '.join(missing)}: pip install " + " ".join(missing), source
        )
    if search.study_storage is not None and not re.match(
        rf"^({'|'.join(STUDY_SCHEMES)})(\+\w+)?://", search.study_storage
    ):
        raise SpecError(
            "search.study_storage",
            "expected an SQLAlchemy URL Optuna's RDBStorage opens: "
            "sqlite:///path/optuna.db, postgresql://host/db or mysql://host/db",
            source,
        )
    if search.study_storage is not None:
        check_uri(search.study_storage, "database", "search.study_storage", source)
    search.points_to_evaluate = [
        _check_point(point, f"search.points_to_evaluate[{i}]", parameters, source)
        for i, point in enumerate(search.points_to_evaluate)
    ]


def _check_point(point: Any, where: str, parameters: list[Parameter], source: str) -> dict[str, Any]:
    """A starting point: parameters of the space, each with a value it can take and active at that point (a
    parameter the point leaves out is suggested)."""
    if not isinstance(point, Mapping) or not point:
        raise SpecError(where, f"expected a mapping of parameter keys to values, got {_short(point)}", source)
    point = {k: "none" if v is None else v for k, v in point.items()}  # YAML reads a bare `none` as null
    by_key = {p.key: p for p in parameters}
    for key, value in point.items():
        parameter = by_key.get(key)
        if parameter is None:
            raise SpecError(f"{where}.{key}", "not a parameter of this space; parameters: " + ", ".join(by_key), source)
        if not parameter.admits(value):
            raise SpecError(f"{where}.{key}", f"{_short(value)} is outside {parameter.kind} {parameter.values}", source)
        if all(k in point for k in parameter.condition) and not parameter.active(point):
            raise SpecError(
                f"{where}.{key}",
                "not active at this point: only if " + ", ".join(f"{k} in {v}" for k, v in parameter.condition.items()),
                source,
            )
    return point


def _listed(values: list) -> str:
    """A parameter's values for an error line, cut to SHOWN_CHARS characters (a grid may hold thousands)."""
    text = ", ".join(map(str, values))
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}... ({len(values):,} values)"


def _short(value: Any) -> str:
    """At most ~100 characters of an offending value."""
    text = repr(value)
    return text if len(text) <= 100 else text[:97] + "..."


def parse_spec(text: str, source: str) -> SweepSpec:
    """A sweep YAML's text (a stored space.yaml, a test's) parsed and checked whole."""
    return check_space(parse_yaml(text, source, SpecError), text, source)


def check_space(parsed: Any, text: str, source: str) -> SweepSpec:
    """A parsed space checked whole: every key, type and value, each parameter against the trial config, the
    sections against each other, the plan's size, and the design against the planned rows. `text` is the YAML that
    runs (what MLflow shows and a job gets)."""
    raw = _mapping(parsed, "(file)", source)
    for key in raw:
        if key not in TOP_LEVEL:
            raise SpecError(str(key), "unknown key; allowed: " + ", ".join(TOP_LEVEL), source)
    name = check_name(raw.get("name"), "name", source)
    base, base_config, data = _base_config(raw, source)
    raw_parameters = _mapping(raw.get("parameters"), "parameters", source)
    _check_unconditional_grids(raw_parameters, source)
    parameters = [_parameter(k, v, base, source) for k, v in raw_parameters.items()]
    parameters = _order_by_conditions(parameters, source)
    _check_corpora(base_config.data.corpus, "data" if "corpus" in data else "base.data", parameters, source)
    objectives = read_objectives(raw.get("objective"), source)
    sections = {
        section: read_section(section, raw.get(section), source) for section in SECTIONS if section != "objective"
    }
    sections["objective"] = objectives[0]
    _check_sections(sections, parameters, base, source)
    _check_objectives(objectives, sections, source)
    baseline = _mapping(raw.get("baseline"), "baseline", source)
    for key in baseline:
        if key not in all_keys():
            raise SpecError(f"baseline.{key}", "not a trial-config key", source)
    several = tuple(objectives) if len(objectives) > 1 else ()
    spec = SweepSpec(
        name, source, base, base_config, parameters, **sections, baseline=baseline, text=text, objectives=several
    )
    _check_plan_size(spec)
    _check_design(spec)
    return spec


def planned_rows(spec: SweepSpec) -> list[dict[str, Any]]:
    """Each planned row's active settings (dotted key -> value), in plan order: what a design's comparison picks."""
    firsts: dict[str, TrialPlan] = {}
    for plan in spec.plan:
        firsts.setdefault(plan.variant, plan)
    return [plan.config(spec.base).active() for plan in firsts.values()]


def _check_design(spec: SweepSpec) -> None:
    """A design asks for a grid run to the end (no scheduler stops a seed its comparison needs) and rows it can
    pick; the rest is the section's own (sweeper.space.design.check_design)."""
    if not spec.design.declared:
        return
    if spec.search.algorithm != "grid" or spec.scheduler.type != "fifo":
        raise SpecError(
            "design",
            "needs search.algorithm grid and scheduler.type fifo (every row trained to its end at each look)",
            spec.source,
        )
    check_design(spec.design, planned_rows(spec), spec.search.repeats, spec.source, SpecError)


def _check_unconditional_grids(raw: Mapping[str, Any], source: str) -> None:
    """Refuse, before any value is checked (each by building a config: seconds for 10,000), grids whose sizes alone
    pass MAX_TRIALS: a grid without `if` branches every assignment, so their product is a lower bound on the plan."""
    sizes = [
        len(spec["grid"])
        for spec in raw.values()
        if isinstance(spec, Mapping)
        and "if" not in spec
        and isinstance(spec.get("grid"), list)
        and len(spec["grid"]) <= MAX_TRIALS  # a longer list is refused by _parameter, by its own length
    ]
    product = 1
    for size in sizes:
        product *= max(size, 1)
        if product > MAX_TRIALS:
            raise SpecError(
                "parameters",
                f"grids without `if` of {' x '.join(f'{n:,}' for n in sizes)} values make more than {MAX_TRIALS:,} "
                "trials",
                source,
            )


def read_objectives(raw: Any, source: str) -> list[ObjectiveSpec]:
    """`objective`: one mapping (metric, mode), or a list of them (several objectives, the first also the one the
    schedulers, the progress lines and the registered best trial go by); errors name the item (`objective[1].mode`)."""
    if not isinstance(raw, list):
        return [read_section("objective", raw, source)]
    if not 1 <= len(raw) <= MAX_OBJECTIVES:
        raise SpecError("objective", f"a list of 1 to {MAX_OBJECTIVES} objectives (got {len(raw)})", source)
    objectives = []
    for i, item in enumerate(raw):
        try:
            objectives.append(read_section("objective", item, source))
        except SpecError as err:
            raise SpecError(err.key.replace("objective", f"objective[{i}]", 1), err.message, source) from None
    metrics = [o.metric for o in objectives]
    if len(set(metrics)) < len(metrics):
        raise SpecError("objective", f"each metric once (got {', '.join(metrics)})", source)
    return objectives


def _check_objectives(objectives: list[ObjectiveSpec], sections: dict[str, Any], source: str) -> None:
    """What several objectives, or an objective known only at a trial's end, ask of the search and the scheduler."""
    scheduler, search = sections["scheduler"].type, sections["search"]
    at_end = [o.metric for o in objectives if o.metric in AT_END_ONLY]
    if scheduler != "fifo" and (len(objectives) > 1 or at_end):
        why = "several objectives" if len(objectives) > 1 else f"{at_end[0]} (known only once a trial is tested)"
        raise SpecError(
            "scheduler.type", f"must be fifo with {why}: Tune's schedulers rank by one epoch metric", source
        )
    if len(objectives) > 1 and search.algorithm == "optuna" and search.sampler not in MULTI_SAMPLERS:
        raise SpecError(
            "search.sampler",
            f"{search.sampler} takes one objective; with several: " + ", ".join(MULTI_SAMPLERS),
            source,
        )


def recorded_space(text: str, source: str) -> RecordedSpace:
    """A sweep's space.yaml read back from its parent run (the summary's door to it), held to the input's rules:
    bounded YAML, a mapping, and the sections the summary reads (objective, significance, tracking) checked as
    `sweeper validate` checks them. The rest is not re-checked: a corpus folder the sweep read may not exist where
    it is summarised."""
    raw = _mapping(parse_yaml(text, source, SpecError), "(file)", source)
    objectives = read_objectives(raw.get("objective"), source)
    return RecordedSpace(
        objectives[0],
        read_section("significance", raw.get("significance"), source),
        read_section("tracking", raw.get("tracking"), source),
        _mapping(raw.get("baseline"), "baseline", source),
        *_recorded_plan(raw),
        read_section("design", raw.get("design"), source),
        objectives=tuple(objectives) if len(objectives) > 1 else (),
    )


def _recorded_plan(raw: dict) -> tuple[tuple[str, ...], str]:
    """The keys a recorded space varies and its scheduler's type, for `summarize --with` alone: read leniently (a
    damaged section varies nothing, which makes the join stricter), so that a plain summary never fails on them."""
    parameters, scheduler = raw.get("parameters"), raw.get("scheduler")
    varied = tuple(key for key in parameters if isinstance(key, str)) if isinstance(parameters, Mapping) else ()
    kind = scheduler.get("type", "fifo") if isinstance(scheduler, Mapping) else scheduler or "fifo"
    return varied, kind if isinstance(kind, str) else shown(kind)


def _base_config(raw: dict, source: str) -> tuple[dict, TrialConfig, dict]:
    """`base` with the top-level `data` merged in, checked as a trial config (and that config); errors name the key
    as written."""
    base = _mapping(raw.get("base"), "base", source)
    data = _mapping(raw.get("data"), "data", source)
    base["data"] = {**_mapping(base.get("data"), "base.data", source), **data}
    try:
        return base, build_config(base), data
    except ConfigError as err:
        from_top_level_data = err.key.startswith("data.") and err.key.split(".", 1)[1] in data
        raise SpecError(err.key if from_top_level_data else f"base.{err.key}", err.message, source) from None


def _check_sections(sections: dict[str, Any], parameters: list[Parameter], base: dict, source: str) -> None:
    """What a section asks of the others and of the trial config: Optuna's options, PBT's mutations, a whole
    number of GPUs above one, a tracking URI without credentials."""
    search = sections["search"]
    if search.algorithm == "optuna" and search.repeats != 1:
        raise SpecError(
            "search.repeats",
            "must be 1 with algorithm optuna (TPE learns from one result per "
            "configuration; use grid or random to repeat seeds)",
            source,
        )
    _check_optuna_search(search, parameters, source)
    _check_pbt(sections["scheduler"], search, base, source)
    gpu = sections["resources"].gpu
    if gpu > 1 and not float(gpu).is_integer():
        raise SpecError("resources.gpu", f"must be 0, {GPU_SHARES} (got {gpu:g})", source)
    check_uri(sections["tracking"].uri or "", "tracking", "tracking.uri", source)
    if sections["tracking"].webhook is not None:
        check_webhook(sections["tracking"].webhook, "tracking.webhook", source)


def check_webhook(url: Any, key: str, source: str, stored: bool = True) -> str:
    """A webhook's URL: http(s) with a host; one that is stored (the space's, sweeper.json's) also without a
    credential in it (userinfo, a secret query key). One line naming `key` otherwise (exit 2)."""
    if stored:
        check_uri(url, "webhook", key, source)
    parts = urlsplit(url) if isinstance(url, str) and url.isprintable() else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise SpecError(key, f"must be an http:// or https:// URL with a host (got {shown(url)})", source)
    return url


def _check_corpora(corpus: str, section: str, parameters: list[Parameter], source: str) -> None:
    """Every corpus name the sweep would load, checked before anything is created: a typo would otherwise leave a
    tracking store and storage behind and fail every trial."""
    names = [(f"{section}.corpus", corpus)] + [
        (f"parameters.data.corpus.{p.kind}", name) for p in parameters if p.key == "data.corpus" for name in p.values
    ]
    for where, name in names:
        try:
            check_corpus_name(name)
        except CorpusError as err:
            raise SpecError(where, str(err).split(": ", 1)[1], source) from None


def _check_plan_size(spec: SweepSpec) -> None:
    """Refuse a plan of more than MAX_TRIALS trials without building it: samples x seeds and the grid's size
    without conditionals bound it arithmetically; only a conditional grid above the bound is counted, and the
    count stops at the bound."""
    search = spec.search
    passes = search.num_samples * search.repeats
    if passes > MAX_TRIALS:
        raise SpecError(
            "search.num_samples",
            f"{search.num_samples:,} samples x {search.repeats} seeds is more than {MAX_TRIALS:,} trials",
            spec.source,
        )
    if search.algorithm == "optuna" or passes * grid_product_size(spec) <= MAX_TRIALS:
        return
    rng, trials = random.Random(search.seed), 0
    for _ in range(search.num_samples):
        trials += len(_expand(spec.parameters, rng, limit=MAX_TRIALS)) * search.repeats
        if trials > MAX_TRIALS:
            raise SpecError(
                "parameters",
                f"the plan (grid configurations x {search.num_samples:,} samples x "
                f"{search.repeats} seeds) has more than {MAX_TRIALS:,} trials",
                spec.source,
            )


def load_spec(path: str, overrides: list[tuple[str, Any]] = ()) -> SweepSpec:
    """Read and validate a sweep YAML; `overrides` are `--set` pairs on the YAML's dotted keys."""
    text = read_text(path, SpecError)
    parsed = parse_yaml(text, path, SpecError)
    if overrides:
        parsed, text = with_overrides(parsed, overrides, path, f"# {path} with --set ", "--set")
    return check_space(parsed, text, path)


def spec_from_mapping(
    raw: Mapping[str, Any],
    overrides: list[tuple[str, Any]] = (),
    source: str = "<dict>",
    header: str = "# with overrides ",
    label: str = "--set",
) -> SweepSpec:
    """A space as a mapping (the Python API's dict), validated as a file is: held to a file's limits first."""
    if not isinstance(raw, Mapping):
        raise SpecError("(file)", f"expected a mapping, got {type(raw).__name__}", source)
    check_tree(raw, source, SpecError)  # a dict is held to a file's limits before it is copied
    return check_space(*with_overrides(raw, overrides, source, header, label), source)


def with_overrides(
    raw: Mapping[str, Any], overrides: list[tuple[str, Any]], source: str, header: str, label: str
) -> tuple[dict, str]:
    """The parsed space with its dotted overrides set (a copy), and the YAML it becomes: what runs, what MLflow
    shows and what a job gets, headed by one comment line naming the overrides. The mapping is checked, not the
    YAML parsed back: it holds plain YAML types only (safe-loaded, or a dict check_tree passed), which safe_dump
    writes so that they read back equal (tests/unit/test_space.py parses the text again)."""
    check_tree(dict(overrides), label, SpecError)
    raw = copy.deepcopy(dict(raw))
    for key, value in overrides:
        section, _, rest = key.partition(".")
        if section not in TOP_LEVEL:
            raise SpecError(key, f"unknown key; {label} takes dotted YAML keys such as base.train.epochs", label)
        if section == "parameters" and rest:  # parameter names have dots of their own
            raw.setdefault("parameters", {})[rest] = value
        else:
            set_dotted(raw, key, value)
    import yaml  # here, not with the module: `sweeper --help` reads the declarations and writes no YAML

    try:
        text = yaml.safe_dump(raw, sort_keys=False)
    except yaml.YAMLError as err:
        raise SpecError("(file)", f"not representable as YAML: {' '.join(str(err).split())[:100]}", source) from None
    if overrides:
        text = header + escape(" ".join(f"{k}={v}" for k, v in overrides)) + "\n" + text  # one comment line
    return raw, text


def _expand(parameters: list[Parameter], rng: random.Random, limit: int = 0) -> list[dict[str, Any]]:
    """One pass over the space: grid values branch, other distributions draw once; inactive ones vanish.

    With a limit, the pass stops growing once it holds more than that many assignments (a count, not a plan)."""
    assignments: list[dict[str, Any]] = [{}]
    for p in parameters:
        if limit and len(assignments) > limit:
            break
        grown = []
        for assignment in assignments:
            if limit and len(grown) > limit:  # a grid of 10,000 values times another is 10^8 dicts: stop before
                break
            if not p.active(assignment):
                grown.append(assignment)
            elif p.kind == "grid":
                grown.extend({**assignment, p.key: v} for v in p.values)
            else:
                grown.append({**assignment, p.key: p.sample(rng)})
        assignments = grown
    return assignments


def plan_trials(spec: SweepSpec) -> list[TrialPlan]:
    """grid/random: the grid (conditionals resolved) x num_samples draws of the rest x repeats seeds."""
    rng = random.Random(spec.search.seed)
    base_seed = spec.base_config.train.seed
    plans = []
    for _ in range(spec.search.num_samples):
        for params in _expand(spec.parameters, rng):
            for repeat in range(spec.search.repeats):
                seed = params.get("train.seed", base_seed) + repeat
                cfg = trial_config(spec.base, params, seed)
                plans.append(TrialPlan(params, seed, variant_label(cfg)))
    return plans


@dataclass
class OptunaSpace:
    """A define-by-run space for OptunaSearch: conditional parameters are only suggested when active.

    A class, not a closure: Tune pickles the searcher (and this space with it) at every experiment checkpoint.
    """

    parameters: list[Parameter]

    def __call__(self, trial) -> None:
        assignment: dict[str, Any] = {}
        for p in self.parameters:
            if not p.active(assignment):
                continue
            if p.kind in ("choice", "grid"):
                assignment[p.key] = trial.suggest_categorical(p.key, p.values)
            elif p.kind == "int":
                assignment[p.key] = trial.suggest_int(p.key, *p.values)
            else:
                assignment[p.key] = trial.suggest_float(p.key, *p.values, log=p.kind == "loguniform")


def count_grid(spec: SweepSpec) -> int:
    """Configurations in one pass over the grid (what `validate` reports next to the trial count)."""
    return len(_expand(spec.parameters, random.Random(0)))


def conditional_summary(spec: SweepSpec) -> list[str]:
    return [
        f"{p.key} only if " + ", ".join(f"{k} in {v}" for k, v in p.condition.items())
        for p in spec.parameters
        if p.condition
    ]


def grid_product_size(spec: SweepSpec) -> int:
    """What the grid would be without conditionals (shown so users see what `if` saved)."""
    return math.prod(len(p.values) for p in spec.parameters if p.kind == "grid") if spec.parameters else 1
