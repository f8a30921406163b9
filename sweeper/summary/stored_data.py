"""A summary's data/ folder re-checked where `--from-data` reads it (issue #70 item 6): the same declarations and
bounds as a live summary, so that anything the folder holds is one line naming the file and the key (exit 2), never
a program fault further on.

A live summary reads its space's sections through the spec's declarations (`recorded_space`), its trials' params
through the trial config's bounds, and metrics MLflow stored as numbers; a data/ folder is a file anyone may have
edited. On main, `"resamples": 1e12` in sweep.json asked for 146 TiB (MemoryError, "internal error"), a metric
stored as text, BLEU 1e308 or a zero-row trials table ended in exit 1, and escape and bidi characters in a variant's
name were printed raw.
"""

from __future__ import annotations

import math
from typing import Any

from nmt_core.config import EPOCHS, ConfigError
from sweeper.space.spec import NAME_RULE, RecordedSpace, SpecError, read_objectives, read_section
from sweeper.summary.records import TrialRecord
from sweeper.tracking.metrics import VARIANT, VARIANT_NAME

NAME_CHARS = 200  # a run id, trial id, variant label or tag shown as a name
NAME_TAGS = (VARIANT, VARIANT_NAME, "mlflow.runName")  # the tags a summary names its rows and figures by
BLEU_RANGE = (0.0, 100.0)
METRIC_BOUND = 1e15  # any other metric: a loss, a time, a count; far beyond what a trial logs, far below overflow


def recorded_space(space: Any, source: str) -> RecordedSpace:
    """sweep.json's `space` through the spec's declarations, as a live summary reads a parent run's space.yaml."""
    if not isinstance(space, dict):
        raise SpecError("space", "must be a mapping, as summarize writes it", source)
    varied, scheduler, baseline = space.get("varied", []), space.get("scheduler", "fifo"), space.get("baseline", {})
    if not isinstance(varied, list) or not all(isinstance(key, str) and key.isprintable() for key in varied):
        raise SpecError("space.varied", "must be a list of dotted keys", source)
    if not isinstance(scheduler, str) or not isinstance(baseline, dict):
        raise SpecError("space", "its scheduler is a name and its baseline a mapping", source)
    return RecordedSpace(
        read_section("objective", space.get("objective"), source),
        read_section("significance", space.get("significance"), source),
        read_section("tracking", space.get("tracking"), source),
        baseline,
        tuple(varied),
        scheduler,
        read_section("design", space.get("design"), source),  # a designed sweep's, checked as on input
        objectives=several_objectives(space.get("objectives"), source),
    )


def several_objectives(raw: Any, source: str) -> tuple:
    """A sweep's several objectives, checked as on input; () for one, or for data from before they were kept."""
    objectives = read_objectives(raw, source) if raw else []
    return tuple(objectives) if len(objectives) > 1 else ()


def check_name(value: Any, key: str, source: str, rule: Any = None) -> str:
    """A name that is shown (a sweep's, a run's, a variant's): printable text of at most NAME_CHARS characters."""
    if not isinstance(value, str) or not value.isprintable() or not 0 < len(value) <= NAME_CHARS:
        raise SpecError(key, f"must be printable text of 1-{NAME_CHARS} characters (no escape or bidi)", source)
    if rule is not None and not rule.fullmatch(value):
        raise SpecError(key, f"must match {rule.pattern}", source)
    return value


def check_sweep_name(value: Any, source: str) -> str:
    return check_name(value, "name", source, NAME_RULE)


def check_records(records: list[TrialRecord], source: str) -> None:
    """At least one trial, each with printable names, finite metrics in range and a trial config this version
    reads."""
    if not records:
        raise SpecError("(rows)", "no trial: a summary's data holds at least one", source)
    for record in records:
        where = f"{source}: run {record.run_id[:NAME_CHARS]!r}"
        for key in ("run_id", "trial_id", "variant"):
            check_name(getattr(record, key) or "?", key, source)
        if not isinstance(record.tags, dict) or not all(
            isinstance(v, str) for v in (*record.tags, *record.tags.values())
        ):
            raise SpecError("tags", "must map names to text, as MLflow holds a run's tags", where)
        for key in NAME_TAGS:
            if key in record.tags:
                check_name(record.tags[key], f"tags.{key}", where)
        _check_numbers(record, where)
        try:
            record.config  # noqa: B018 - built and kept (a cached property), as load_records does
        except ConfigError as err:
            raise SpecError("params", f"no trial config this version reads ({err.key}: {err.message})", where) from None


def _check_numbers(record: TrialRecord, where: str) -> None:
    for key, value in record.metrics.items():
        check_metric(key, value, f"metrics.{key}", where)
    for key, values in record.curves.items():
        if not isinstance(values, list):
            raise SpecError(f"curves.{key}", "must be a list of numbers", where)
        for value in values:
            check_metric(key, value, f"curves.{key}", where)
    for key, by_epoch in record.settings.items():
        for epoch, value in by_epoch.items():
            if not 0 < epoch <= EPOCHS:
                raise SpecError(f"settings.{key}", f"epochs must lie in [1, {EPOCHS:,}] (got {epoch})", where)
            check_metric(key, value, f"settings.{key}", where)


def check_test_sets(names: list[Any], source: str) -> None:
    """A test set's name: a file name in a trial's artifacts (translations/<set>.txt) and a column of the tables, so
    a sweep name's rule (never '..', a '/' or a newline)."""
    for name in names:
        check_name(name, "set", source, NAME_RULE)


def check_metric(name: str, value: Any, key: str, where: str) -> float:
    """A finite number; a BLEU score within [0, 100], any other metric within +-METRIC_BOUND."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SpecError(key[:NAME_CHARS], f"must be a finite number (got a {type(value).__name__})", where)
    low, high = BLEU_RANGE if "bleu" in str(name).lower() else (-METRIC_BOUND, METRIC_BOUND)
    if not low <= value <= high:
        raise SpecError(key[:NAME_CHARS], f"must lie in [{low:g}, {high:g}] (got {value:g})", where)
    return float(value)
