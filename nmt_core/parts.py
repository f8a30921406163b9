"""What an attention part is, and the registries the parts join: one class per `attention.*` value.

Every part states, as class attributes and class methods read without building it, what the rest of the project
asks about a variant: the architectures it serves (`architectures`), the rules it checks against the rest of the
config (`rules`), its words in a variant label (`label`), the settings that act only with it (`settings`) and which
diagnostics it has (temperatures: `adaptive`, `tau_bound`). The modules that define parts (nmt_core.attention, the
RNN's nmt_core.model, the Transformer's nmt_core.multihead) import this module and register into it; nmt_core.registry
answers questions over the filled registries. This module imports nothing of nmt_core, so no import circle runs
through it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, TypeVar

if TYPE_CHECKING:
    from nmt_core.config import AttentionConfig, TrialConfig

T = TypeVar("T", bound=type)
RNN, TRANSFORMER = "rnn", "transformer"  # model.arch


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
    architectures: ClassVar[tuple[str, ...]] = (RNN,)  # the model.arch values it has a meaning in
    rules: ClassVar[tuple[Rule, ...]] = ()
    settings: ClassVar[tuple[str, ...]] = ()  # dotted keys that act only with this part (`attention.lambda`: SACT)

    @classmethod
    def label(cls, a: AttentionConfig) -> str | None:
        """Its word in variant labels; None where it is the default and says nothing."""
        return cls.name


class Architecture:
    """What an encoder-decoder class (`model.arch`) declares about the config: the keys only it reads (the other
    architecture refuses them away from their defaults), the values it reads in place of a key's common default,
    and how it writes its variants' labels."""

    own_keys: ClassVar[tuple[str, ...]] = ()
    own_defaults: ClassVar[dict[str, str]] = {}  # key -> what this architecture reads where the config has the default

    @classmethod
    def relabel(cls, cfg: TrialConfig, words: dict[str, str]) -> None:
        """Adjust the label words of the parts (by their attention.* field) to say what this architecture runs."""


# config value -> part; a part's class owns everything about it
SCORES: dict[str, type] = {}
TEMPERATURES: dict[str, type] = {}
POSITION_BIASES: dict[str, type] = {}
PLACEMENTS: dict[str, type] = {}  # the RNN's (nmt_core.model)
SELF_ATTENTIONS: dict[str, type] = {}  # the RNN's (nmt_core.model)
SACT_READINGS: dict[str, type] = {}  # the Transformer's (nmt_core.multihead): how a head reads SACT's c~_{t-1}
MECHANISMS: dict[str, type] = {}  # on/off mechanisms by their attention.* flag, in the order the pipeline runs them
SELECTED_BY = {
    "score": SCORES,
    "temperature": TEMPERATURES,
    "placement": PLACEMENTS,
    "position_bias": POSITION_BIASES,
    "self_attention": SELF_ATTENTIONS,
    "sact_reading": SACT_READINGS,
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
