"""Sweep YAML -> validated SweepSpec -> the list of trial configurations (or an Optuna define-by-run space).

Everything a user can get wrong is caught here, before Ray starts: one line naming the file, the dotted
key and what is allowed. Conditional parameters (`if:`) are resolved here too, for every algorithm, so
the plan `sweeper validate` prints is exactly the set of trials `sweeper run` starts.
"""
from __future__ import annotations

import copy
import math
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from nmt_core.config import ConfigError, TrialConfig, all_keys, build_config, set_dotted

DISTRIBUTIONS = ("choice", "grid", "uniform", "loguniform", "int")
ALGORITHMS = ("grid", "random", "optuna")
SCHEDULERS = ("fifo", "asha", "hyperband", "pbt")
TOP_LEVEL = ("name", "description", "data", "base", "parameters", "search", "objective", "scheduler",
             "resources", "failure", "tracking", "baseline", "significance")
OBJECTIVE_METRICS = ("bleu_dev", "dev_loss", "dev_ppl", "train_loss")
SIGNIFICANCE_METHODS = ("paired_bootstrap",)  # nmt_core.evaluate.PairedBootstrap
MIN_RESAMPLES = 100
NAME_PATTERN = re.compile(r"^[A-Za-z0-9._-]+$")


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


@dataclass
class SearchSpec:
    algorithm: str = "grid"
    num_samples: int = 1
    max_concurrent: int = 4
    seed: int = 0
    repeats: int = 1


@dataclass
class SchedulerSpec:
    type: str = "fifo"
    grace_period: int = 1  # asha: epochs before the first stop
    reduction_factor: int = 2  # asha, hyperband
    perturbation_interval: int = 2  # pbt: epochs between exploit/explore decisions
    quantile_fraction: float = 0.25  # pbt: the bottom share copies the top share
    mutations: dict[str, Any] = field(default_factory=dict)  # pbt: key -> [values] or {uniform|loguniform: [lo, hi]}


# what PBT may change while a trial trains: read afresh every step, or (lr) set on the optimiser at restore
PBT_MUTABLE = ("train.lr", "train.label_smoothing", "train.clip_norm", "attention.coverage_weight")


@dataclass
class SignificanceSpec:
    """How `sweeper summarize` tests each variant against the baseline."""

    method: str = "paired_bootstrap"
    resamples: int = 1000

    def check(self, source: str) -> "SignificanceSpec":
        if self.method not in SIGNIFICANCE_METHODS:
            raise SpecError("significance.method", "must be one of " + ", ".join(SIGNIFICANCE_METHODS)
                            + f" (got {self.method!r})", source)
        if self.resamples < MIN_RESAMPLES:
            raise SpecError("significance.resamples", f"must be >= {MIN_RESAMPLES} (got {self.resamples}): fewer "
                            "resamples cannot resolve p < 0.01", source)
        return self


@dataclass
class SweepSpec:
    name: str
    source: str
    base: dict[str, Any]  # nested trial config every trial starts from (with `data` merged in)
    parameters: list[Parameter]
    search: SearchSpec
    metric: str
    mode: str
    scheduler: SchedulerSpec
    cpu: float
    gpu: float
    max_retries: int
    tracking_uri: str | None
    baseline: dict[str, Any]  # dotted key -> value naming the baseline variant for the summary
    significance: "SignificanceSpec"
    text: str  # the YAML as written, logged to MLflow as space.yaml
    system_metrics: bool = True  # tracking.system_metrics: CPU/memory/GPU of every trial, logged as system/...

    @property
    def epochs(self) -> int:
        return build_config(self.base).train.epochs


@dataclass
class TrialPlan:
    """One trial: the parameters that vary, its seed, and a short label."""

    params: dict[str, Any]
    seed: int
    variant: str

    def config(self, base: Mapping[str, Any]) -> TrialConfig:
        return trial_config(base, self.params, self.seed)


def trial_config(base: Mapping[str, Any], params: Mapping[str, Any], seed: int) -> TrialConfig:
    nested = copy.deepcopy(dict(base))
    for key, value in params.items():
        set_dotted(nested, key, value)
    set_dotted(nested, "train.seed", seed)
    return build_config(nested)


def variant_label(cfg: TrialConfig) -> str:
    """A short human label: score + temperature (+ tau) (+ sentinel) (+ coverage), then whatever else departs from
    the defaults (placement, position bias, ...), e.g. `general+sact4`, `concat+none+coverage+fertility+bahdanau`."""
    a, t = cfg.attention, cfg.train
    temperature = {"none": "none", "fixed": f"tau{a.tau:g}", "sact": f"sact{a.lambda_:g}"}[a.temperature]
    parts = [a.score, temperature] + ["sentinel"] * a.sentinel + ["coverage"] * a.coverage + ["fertility"] * a.fertility
    parts += [a.placement] * (a.placement != "luong") + [f"pos-{a.position_bias}"] * (a.position_bias != "none")
    parts += ["intra"] * a.intra_temporal + [f"self-{a.self_attention}"] * (a.self_attention != "none")
    parts += [f"guided{t.guided_alignment:g}"] * (t.guided_alignment > 0) + [f"sym{t.symmetry_weight:g}"] * (t.symmetry_weight > 0)
    return "+".join(parts)


class SpecError(ConfigError):
    """A sweep YAML that cannot run."""


def _mapping(value: Any, key: str, source: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SpecError(key, f"expected a mapping, got {value!r}", source)
    return dict(value)


def _fields(raw: Mapping, key: str, allowed: dict[str, type], source: str) -> dict[str, Any]:
    """Check a small section's keys and types (int accepted where float is expected)."""
    out = {}
    for name, value in raw.items():
        dotted = f"{key}.{name}"
        if name not in allowed:
            raise SpecError(dotted, "unknown key; allowed: " + ", ".join(allowed), source)
        typ = allowed[name]
        ok = isinstance(value, typ) and not (isinstance(value, bool) and typ is not bool)
        if typ is float and isinstance(value, int) and not isinstance(value, bool):
            ok, value = True, float(value)
        if not ok:
            raise SpecError(dotted, f"expected {typ.__name__}, got {value!r}", source)
        out[name] = value
    return out


def _parameter(key: str, raw: Any, base: dict, source: str) -> Parameter:
    dotted = f"parameters.{key}"
    if key not in all_keys():
        raise SpecError(dotted, "not a trial-config key; allowed keys look like attention.lambda "
                                "(sections data, model, attention, train, decode)", source)
    raw = _mapping(raw, dotted, source)
    condition = _mapping(raw.pop("if", None), f"{dotted}.if", source)
    kinds = [k for k in raw if k in DISTRIBUTIONS]
    unknown = [k for k in raw if k not in DISTRIBUTIONS]
    if unknown or len(kinds) != 1:
        raise SpecError(dotted, "expected exactly one distribution (" + ", ".join(DISTRIBUTIONS) + ") and "
                        f"optionally `if`, got {', '.join(map(str, raw)) or 'nothing'}", source)
    kind, values = kinds[0], raw[kinds[0]]
    where = f"{dotted}.{kind}"
    if not isinstance(values, list) or not values:
        raise SpecError(where, "expected a non-empty list" + (" [low, high]" if kind not in ("choice", "grid") else ""),
                        source)
    values = ["none" if v is None else v for v in values]  # YAML reads a bare `none` as null
    if kind in ("uniform", "loguniform", "int"):
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        if len(values) != 2 or not numeric or not values[0] < values[1]:
            raise SpecError(where, f"expected [low, high] with low < high, got {values}", source)
        if kind == "loguniform" and values[0] <= 0:
            raise SpecError(where, f"expected low > 0 for a log scale, got {values}", source)
        if kind == "int" and not all(isinstance(v, int) for v in values):
            raise SpecError(where, f"expected two integers, got {values}", source)
    for value in values:  # every value (every bound) must make a valid trial config
        try:
            nested = copy.deepcopy(base)
            set_dotted(nested, key, value)
            build_config(nested)
        except ConfigError as err:
            raise SpecError(where, f"value {value!r}: {str(err).split(': ', 2)[-1]}", source) from None
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
                raise SpecError(where, f"{bad[0]!r} is not a value of {key}; allowed: "
                                + ", ".join(map(str, parent.values)), source)
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
    (kind, (low, high)), = raw.items()
    return kind, low, high


def _check_pbt(scheduler: SchedulerSpec, search: SearchSpec, base: dict, source: str) -> None:
    """PBT's mutations: numeric keys it may change mid-training, each a list of numbers or a [low, high] range."""
    if scheduler.type != "pbt":
        if scheduler.mutations:
            raise SpecError("scheduler.mutations", f"only with scheduler.type pbt (got {scheduler.type})", source)
        return
    if not scheduler.mutations:
        raise SpecError("scheduler.mutations", "pbt needs at least one mutation, e.g. {train.lr: {loguniform: "
                        "[1.0e-4, 1.0e-2]}}; allowed keys: " + ", ".join(PBT_MUTABLE), source)
    if search.algorithm == "optuna":
        raise SpecError("scheduler.type", "pbt explores by itself: use search.algorithm grid or random", source)
    if scheduler.perturbation_interval < 1 or not 0 < scheduler.quantile_fraction <= 0.5:
        raise SpecError("scheduler", "perturbation_interval must be >= 1 and quantile_fraction in (0, 0.5]", source)
    for key, raw in scheduler.mutations.items():
        where = f"scheduler.mutations.{key}"
        if key not in PBT_MUTABLE:
            raise SpecError(where, "PBT can change only " + ", ".join(PBT_MUTABLE) + " while a trial trains", source)
        values = raw if isinstance(raw, list) else next(iter(raw.values()), None) if isinstance(raw, Mapping) else None
        if isinstance(raw, Mapping) and (len(raw) != 1 or next(iter(raw)) not in ("uniform", "loguniform")):
            raise SpecError(where, f"expected a list of numbers or {{uniform|loguniform: [low, high]}}, got {raw!r}",
                            source)
        numbers = isinstance(values, list) and values and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        if not numbers:
            raise SpecError(where, f"mutations must be numbers: expected a list of numbers or {{uniform|loguniform: "
                            f"[low, high]}}, got {raw!r}", source)
        if isinstance(raw, Mapping) and (len(values) != 2 or not 0 <= values[0] < values[1]
                                         or (values[0] <= 0 and "loguniform" in raw)):
            raise SpecError(where, f"expected [low, high] with 0 <= low < high (low > 0 on a log scale), got {values}",
                            source)
        for value in values:
            nested = copy.deepcopy(base)
            set_dotted(nested, key, value)
            try:
                build_config(nested)
            except ConfigError as err:
                raise SpecError(where, f"value {value!r}: {str(err).split(': ', 2)[-1]}", source) from None


def parse_spec(text: str, source: str) -> SweepSpec:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise SpecError("(file)", f"not valid YAML: {' '.join(str(err).split())}", source) from None
    raw = _mapping(raw, "(file)", source)
    for key in raw:
        if key not in TOP_LEVEL:
            raise SpecError(str(key), "unknown key; allowed: " + ", ".join(TOP_LEVEL), source)
    name = raw.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise SpecError("name", f"must match [A-Za-z0-9._-]+ (got {name!r})", source)
    base = _mapping(raw.get("base"), "base", source)
    data = _mapping(raw.get("data"), "data", source)
    base["data"] = {**_mapping(base.get("data"), "base.data", source), **data}
    try:
        build_config(base)
    except ConfigError as err:
        key, message = str(err).split(": ", 2)[1:]
        from_top_level_data = key.startswith("data.") and key.split(".", 1)[1] in data
        raise SpecError(key if from_top_level_data else f"base.{key}", message, source) from None
    parameters = [_parameter(k, v, base, source) for k, v in _mapping(raw.get("parameters"), "parameters", source).items()]
    parameters = _order_by_conditions(parameters, source)

    search = SearchSpec(**_fields(_mapping(raw.get("search"), "search", source), "search",
                                  {"algorithm": str, "num_samples": int, "max_concurrent": int, "seed": int,
                                   "repeats": int}, source))
    if search.algorithm not in ALGORITHMS:
        raise SpecError("search.algorithm", "must be one of " + ", ".join(ALGORITHMS) + f" (got {search.algorithm!r})", source)
    for key in ("num_samples", "max_concurrent", "repeats"):
        if getattr(search, key) < 1:
            raise SpecError(f"search.{key}", f"must be >= 1 (got {getattr(search, key)})", source)
    if search.algorithm == "optuna" and search.repeats != 1:
        raise SpecError("search.repeats", "must be 1 with algorithm optuna (TPE learns from one result per "
                        "configuration; use grid or random to repeat seeds)", source)

    objective = _fields(_mapping(raw.get("objective"), "objective", source), "objective",
                        {"metric": str, "mode": str}, source)
    metric, mode = objective.get("metric", "bleu_dev"), objective.get("mode", "max")
    if metric not in OBJECTIVE_METRICS:
        raise SpecError("objective.metric", "must be one of " + ", ".join(OBJECTIVE_METRICS) + f" (got {metric!r})", source)
    if mode not in ("max", "min"):
        raise SpecError("objective.mode", f"must be one of max, min (got {mode!r})", source)

    scheduler = SchedulerSpec(**_fields(_mapping(raw.get("scheduler"), "scheduler", source), "scheduler",
                                        {"type": str, "grace_period": int, "reduction_factor": int,
                                         "perturbation_interval": int, "quantile_fraction": float,
                                         "mutations": dict}, source))
    if scheduler.type not in SCHEDULERS:
        raise SpecError("scheduler.type", "must be one of " + ", ".join(SCHEDULERS) + f" (got {scheduler.type!r})", source)
    if scheduler.grace_period < 1 or scheduler.reduction_factor < 2:
        raise SpecError("scheduler", "grace_period must be >= 1 and reduction_factor >= 2", source)
    _check_pbt(scheduler, search, base, source)

    resources = _fields(_mapping(raw.get("resources"), "resources", source), "resources",
                        {"cpu": float, "gpu": float}, source)
    cpu, gpu = resources.get("cpu", 1.0), resources.get("gpu", 0.0)
    if cpu <= 0:
        raise SpecError("resources.cpu", f"must be > 0 (got {cpu:g})", source)
    if gpu < 0 or (gpu > 1 and not float(gpu).is_integer()):
        raise SpecError("resources.gpu", f"must be 0, a fraction in (0, 1] to pack trials, or a whole number (got {gpu:g})", source)
    failure = _fields(_mapping(raw.get("failure"), "failure", source), "failure", {"max_retries": int}, source)
    if failure.get("max_retries", 2) < 0:
        raise SpecError("failure.max_retries", "must be >= 0", source)
    tracking = _fields(_mapping(raw.get("tracking"), "tracking", source), "tracking",
                       {"uri": str, "system_metrics": bool}, source)
    baseline = _mapping(raw.get("baseline"), "baseline", source)
    for key in baseline:
        if key not in all_keys():
            raise SpecError(f"baseline.{key}", "not a trial-config key", source)
    significance = SignificanceSpec(**_fields(_mapping(raw.get("significance"), "significance", source), "significance",
                                              {"method": str, "resamples": int}, source)).check(source)
    return SweepSpec(name, source, base, parameters, search, metric, mode, scheduler, cpu, gpu,
                     failure.get("max_retries", 2), tracking.get("uri"), baseline, significance, text,
                     tracking.get("system_metrics", True))


def load_spec(path: str, overrides: list[tuple[str, Any]] = ()) -> SweepSpec:
    """Read and validate a sweep YAML; `overrides` are `--set` pairs on the YAML's dotted keys."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise SpecError("(file)", f"cannot read: {err.strerror}", path) from None
    if overrides:
        raw = yaml.safe_load(text)
        if not isinstance(raw, dict):
            raise SpecError("(file)", "expected a mapping", path)
        for key, value in overrides:
            section, _, rest = key.partition(".")
            if section not in TOP_LEVEL:
                raise SpecError(key, "unknown key; --set takes dotted YAML keys such as base.train.epochs", "--set")
            if section == "parameters" and rest:  # parameter names have dots of their own
                raw.setdefault("parameters", {})[rest] = value
            else:
                set_dotted(raw, key, value)
        merged = (f"# {path} with --set " + " ".join(f"{k}={v}" for k, v in overrides) + "\n"
                  + yaml.safe_dump(raw, sort_keys=False))
        return parse_spec(merged, path)  # the merged YAML is what runs, what MLflow shows and what a job gets
    return parse_spec(text, path)


def _expand(parameters: list[Parameter], rng: random.Random) -> list[dict[str, Any]]:
    """One pass over the space: grid values branch, other distributions draw once; inactive ones vanish."""
    assignments: list[dict[str, Any]] = [{}]
    for p in parameters:
        grown = []
        for assignment in assignments:
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
    base_seed = build_config(spec.base).train.seed
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
    return [f"{p.key} only if " + ", ".join(f"{k} in {v}" for k, v in p.condition.items())
            for p in spec.parameters if p.condition]


def grid_product_size(spec: SweepSpec) -> int:
    """What the grid would be without conditionals (shown so users see what `if` saved)."""
    return math.prod(len(p.values) for p in spec.parameters if p.kind == "grid") if spec.parameters else 1

