"""The registries of attention parts: one class per `attention.*` value, the way Sockeye registers its attention.

Every part states, as class attributes and class methods read without building it, what the rest of the project
asks about a variant: the values config validation allows (`choices`), the rules it checks against the rest of the
config (`rules`), its words in a variant label (`label`) and which diagnostics it has (`adaptive`, `tau_bound`).
The modules (nmt_core.attention, nmt_core.model) register the built-in parts; this module imports neither torch nor
them until a question needs the registries filled, so the config can read it without a circular import.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

if TYPE_CHECKING:
    from nmt_core.config import AttentionConfig, TrialConfig

T = TypeVar("T", bound=type)


@dataclass(frozen=True)
class Rule:
    """One condition a part puts on the rest of the config: `key` must be `allowed` (for the message) when
    `holds(cfg)` is false."""

    key: str
    allowed: str  # may name the attention config's values: "{a.placement}"
    holds: Callable[[TrialConfig], bool]

    def message(self, cfg: TrialConfig) -> str:
        return self.allowed.format(a=cfg.attention)


class Part:
    """What every registered part answers without being built."""

    name: ClassVar[str] = ""  # its config value (set by `register`)
    rules: ClassVar[tuple[Rule, ...]] = ()
    settings: ClassVar[tuple[str, ...]] = ()  # dotted keys that act only with this part (`attention.lambda`: SACT)

    @classmethod
    def label(cls, a: AttentionConfig) -> str | None:
        """Its word in variant labels; None where it is the default and says nothing."""
        return cls.name


# config value -> part; a part's class owns everything about it
SCORES: dict[str, type] = {}
TEMPERATURES: dict[str, type] = {}
POSITION_BIASES: dict[str, type] = {}
PLACEMENTS: dict[str, type] = {}
SELF_ATTENTIONS: dict[str, type] = {}
MECHANISMS: dict[str, type] = {}  # on/off mechanisms by their attention.* flag, in the order the pipeline runs them
# the Transformer's parts of multi-head attention (nmt_core.multihead), under the same attention.* values
HEAD_TEMPERATURES: dict[str, type] = {}
HEAD_POSITION_BIASES: dict[str, type] = {}
SACT_READINGS: dict[str, type] = {}  # attention.sact_reading: how a head reads SACT's c~_{t-1} without recurrence
SELECTED_BY = {
    "score": SCORES,
    "temperature": TEMPERATURES,
    "placement": PLACEMENTS,
    "position_bias": POSITION_BIASES,
    "self_attention": SELF_ATTENTIONS,
}
LABEL_ORDER = (
    "score",
    "temperature",
    "sentinel",
    "coverage",
    "fertility",
    "placement",
    "position_bias",
    "intra_temporal",
    "self_attention",
)  # as variant labels have always named the parts


def register(registry: dict[str, type], name: str) -> Callable[[T], T]:
    """Class decorator: the part answers to `name` (its config value, or its flag in MECHANISMS)."""

    def add(cls: T) -> T:
        cls.name = name
        registry[name] = cls
        return cls

    return add


def _builtins() -> None:
    """Fill the registries with the built-in parts (their modules register them on import)."""
    for module in ("nmt_core.model", "nmt_core.multihead"):
        if module not in sys.modules:
            importlib.import_module(module)


def choices() -> dict[str, tuple[str, ...]]:
    """attention.<key> -> the registered values, for config validation and the JSON Schema."""
    _builtins()
    return {
        **{f"attention.{key}": tuple(registry) for key, registry in SELECTED_BY.items()},
        "attention.sact_reading": tuple(SACT_READINGS),
    }


def head_choices() -> dict[str, tuple[str, ...]]:
    """attention.<key> -> the values multi-head attention has a part for (model.arch transformer)."""
    _builtins()
    return {"attention.temperature": tuple(HEAD_TEMPERATURES), "attention.position_bias": tuple(HEAD_POSITION_BIASES)}


def lookup(key: str, value: Any) -> type | None:
    """The part registered for attention.<key> = value; None for a value nothing answers to (a run recorded by a
    version that had it)."""
    _builtins()
    return SELECTED_BY[key].get(value)


def parts_of(a: AttentionConfig) -> Iterator[type]:
    """The parts a config selects, in label order, then any other switched-on mechanism."""
    _builtins()
    for field in LABEL_ORDER + tuple(m for m in MECHANISMS if m not in LABEL_ORDER):
        if field in SELECTED_BY:
            yield SELECTED_BY[field][getattr(a, field)]
        elif getattr(a, field):
            yield MECHANISMS[field]


def settings(a: AttentionConfig | None = None) -> set[str]:
    """The keys the parts a config selects read (every registered part's with no config): a key some part owns is
    left out of a run's parameters unless a selected part reads it, so MLflow compares what acted."""
    _builtins()
    parts = parts_of(a) if a is not None else (p for r in (*SELECTED_BY.values(), MECHANISMS) for p in r.values())
    return {key for part in parts for key in part.settings}


def rules_of(cfg: TrialConfig) -> Iterator[Rule]:
    """The rules of every part the config selects."""
    for part in parts_of(cfg.attention):
        yield from part.rules


def is_adaptive(temperature: Any) -> bool:
    """Whether attention.temperature = `temperature` varies tau_t by token (SACT): what the temperature heatmap,
    the per-word tau statistics and the at-bound finding are about."""
    part = lookup("temperature", temperature)
    return part is not None and part.adaptive
