"""The questions the rest of the project asks the attention declarations (the way Sockeye registers its attention).

A part is one declaration under its `attention.*` value (nmt_core.family.parts, nmt_core.family.variants: what it
answers without being built), an architecture one under its `model.arch` (nmt_core.family.architectures). Every module
this one imports is torch-free, so config validation, labels and the summary load no model: the values config validation
allows (`choices`), the parts a config selects (`parts_of`), their rules, settings and label words, and whether a
temperature is adaptive.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nmt_core.family.architectures import ARCHITECTURES
from nmt_core.family.parts import LABEL_ORDER, AttentionSettings, Part, Rule, TrialSettings
from nmt_core.family.variants import MECHANISMS, SELECTED_BY, TEMPERATURES

__all__ = ["TEMPERATURES"]  # diagnostics and the summary read the temperatures' declarations here


def choices() -> dict[str, tuple[str, ...]]:
    """attention.<key> -> the registered values, for config validation and the JSON Schema."""
    return {f"attention.{key}": tuple(registry) for key, registry in SELECTED_BY.items()}


def serving(arch: str, key: str) -> tuple[str, ...]:
    """The values of attention.<key> whose part has a meaning in model.arch `arch`."""
    return tuple(value for value, part in SELECTED_BY[key].items() if arch in part.architectures)


def lookup(key: str, value: Any) -> type[Part] | None:
    """The part registered for attention.<key> = value; None for a value nothing answers to (a run recorded by a
    version that had it)."""
    return SELECTED_BY[key].get(value)


def selected(a: AttentionSettings) -> Iterator[tuple[str, type[Part]]]:
    """(attention field, part) of every part a config selects, in label order, then any other switched-on
    mechanism."""
    for field in LABEL_ORDER + tuple(m for m in MECHANISMS if m not in LABEL_ORDER):
        if field in SELECTED_BY:
            yield field, SELECTED_BY[field][getattr(a, field)]
        elif getattr(a, field):
            yield field, MECHANISMS[field]


def parts_of(a: AttentionSettings) -> Iterator[type[Part]]:
    """The parts a config selects, in label order, then any other switched-on mechanism."""
    return (part for _, part in selected(a))


def label_words(cfg: TrialSettings) -> list[str]:
    """A variant's label words: each selected part names itself (None: says nothing), as its architecture writes
    them (the Transformer's score is `transformer`, its SACT names its reading)."""
    return list(part_words(cfg, "label").values())


def part_words(cfg: TrialSettings, kind: str) -> dict[str, str]:
    """attention field -> the selected part's `label` or `title` word (`kind`), as its architecture writes it; a
    part whose word is None says nothing. Keyed by field, so names can leave out what a sweep's variants share."""
    a = cfg.attention
    words = {field: word for field, part in selected(a) if (word := getattr(part, kind)(a)) is not None}
    ARCHITECTURES[cfg.model.arch].relabel(cfg, words)
    return words


def settings(a: AttentionSettings | None = None) -> set[str]:
    """The keys the parts a config selects read (every registered part's with no config): a key some part owns is
    left out of a run's parameters unless a selected part reads it, so MLflow compares what acted."""
    parts = parts_of(a) if a is not None else (p for r in (*SELECTED_BY.values(), MECHANISMS) for p in r.values())
    return {key for part in parts for key in part.settings}


def observed_names() -> tuple[str, ...]:
    """Every per-token value some registered part observes (Part.observes), in declaration order: the traces' and
    the diagnostics' columns beside tau and the gate."""
    parts = (p for r in (*SELECTED_BY.values(), MECHANISMS) for p in r.values())
    return tuple(dict.fromkeys(name for part in parts for name in part.observes))


def rules_of(cfg: TrialSettings) -> Iterator[Rule]:
    """The rules of every part the config selects."""
    for part in parts_of(cfg.attention):
        yield from part.rules


def bound_of(a: AttentionSettings) -> float:
    """b where the temperature's tau (lambda^beta beside a base scale) lies in (1/b, b), as heatmaps and the
    tau-by-epoch table draw it: what the temperature declares (e for the released code's SACT), else lambda."""
    part = lookup("temperature", a.temperature)
    return (part.tau_bound(a) if part is not None else None) or a.lambda_


def is_adaptive(temperature: Any) -> bool:
    """Whether attention.temperature = `temperature` varies tau_t by token (SACT): what the temperature heatmap,
    the per-word tau statistics and the at-bound finding are about."""
    part = lookup("temperature", temperature)
    return part is not None and part.adaptive
