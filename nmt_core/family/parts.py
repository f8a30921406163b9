"""What an attention part is, apart from how it is built: the frame of the declarations and their registries.

A part is declared once, torch-free (nmt_core.family.variants), as a class of what the rest of the project asks about a
variant without building it: the architectures it serves (`architectures`), the rules it checks against the rest of
the config (`rules`), its words in a variant label (`label`) and in a readable name (`title`), the settings that
act only with it (`settings`), which diagnostics it has (`observes`, per token; temperatures: `adaptive`,
`tau_bound`) and the rows that are its controls (`controls`: what the summary compares it with). Config
validation, variant labels and the summary read only these declarations, so validating a YAML file loads no torch.

The nn.Module that computes a part (nmt_core.models.attention, the RNN's nmt_core.models.rnn, the Transformer's
nmt_core.models.multihead) is bound to its declaration by name with `implements`, when the model modules load: building
a model (nmt_core.models.build) imports them. This module imports nothing of nmt_core, not even for type hints, so that
nmt_core.config, which reads the declarations, closes no import circle through it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

T = TypeVar("T", bound=type)
RNN, TRANSFORMER = "rnn", "transformer"  # model.arch
BOTH = (RNN, TRANSFORMER)

# The config as the declarations read it: nmt_core.config's TrialConfig and AttentionConfig. Named, not imported
# (not even under TYPE_CHECKING): config imports this layer, and an arrow back would close a circle.
TrialSettings = Any
AttentionSettings = Any


@dataclass(frozen=True)
class Rule:
    """One condition a part puts on the rest of the config: `key` must be `allowed` (for the message) when
    `holds(cfg)` is false."""

    key: str
    allowed: str  # may name the attention config's values: "{a.placement}"
    holds: Callable[[TrialSettings], bool]

    def message(self, cfg: TrialSettings) -> str:
        return self.allowed.format(a=cfg.attention)


@dataclass(frozen=True)
class Control:
    """A row a part's row is compared with, to ask what the part adds beyond something simpler (the summary's control
    table): SACT against its learned temperature asks "adaptivity, or a learned constant?".

    `settings(a)` gives the attention.* values the control row has, from the part's row's own settings `a` (SACT's
    learned control: `{"temperature": "learned", "lambda": a.lambda_}`); every other setting is the row's, but those
    the two rows' parts own, which a control may leave free (`attention.lambda` of a learned control that only asks
    for a per-head constant). `at_scale`: a constant temperature at the scale the row's tau settled on (the fixed tau
    nearest its median tau), which the summary finds from the row's diagnostics."""

    name: str  # its word in the table: learned, fixed, none, softmax, ...
    settings: Callable[[AttentionSettings], dict[str, Any]] = lambda a: {}
    at_scale: bool = False
    same_checkpoint: bool = False  # the row's own checkpoints decoded without the part (a decoding-only part)


class Part:
    """What every declared part answers without being built."""

    name: ClassVar[str] = ""  # its config value (set by `declare`)
    architectures: ClassVar[tuple[str, ...]] = (RNN,)  # the model.arch values it has a meaning in
    rules: ClassVar[tuple[Rule, ...]] = ()
    settings: ClassVar[tuple[str, ...]] = ()  # dotted keys that act only with this part (`attention.lambda`: SACT)
    # what the part reports per (token, head) beside tau and the gate: the share of capped logits, of exact zeros, ...
    # (the keys of the traces' `observed`, which the diagnostics summarise per epoch)
    observes: ClassVar[tuple[str, ...]] = ()
    controls: ClassVar[tuple[Control, ...]] = ()  # the rows the summary compares this part's rows with
    decodes_only: ClassVar[bool] = False  # acts when a trained model decodes, never in training or the dev loss

    @classmethod
    def label(cls, a: AttentionSettings) -> str | None:
        """Its word in variant labels; None where it is the default and says nothing."""
        return cls.name

    @classmethod
    def title(cls, a: AttentionSettings) -> str | None:
        """Its words in the names a researcher reads (the summary's rows, MLflow's run names): `SACT λ4` where the
        label, a key machines join on, says `sact4`. Its label with spaces for underscores unless it says more."""
        label = cls.label(a)
        return None if label is None else label.replace("_", " ")


class Registry(dict[str, type[Part]]):
    """config value -> declared part, in declaration order (the order config errors and the schema list them),
    and the implementations bound to the declarations by name as the model modules load."""

    def __init__(self, field: str):
        super().__init__()
        self.field = field  # the attention.* key (or on/off flag, for the mechanisms) whose values it holds
        self.implementations: dict[str, type] = {}

    def implementation(self, name: str) -> type:
        """The class that computes the part declared as `name`."""
        if name not in self.implementations:
            raise LookupError(f"attention.{self.field}: {name} is declared but nothing implements it")
        return self.implementations[name]


def declare(registry: Registry, name: str) -> Callable[[T], T]:
    """Class decorator: the declaration answers to `name` (its config value, or its flag in MECHANISMS)."""

    def add(cls: T) -> T:
        cls.name = name
        registry[name] = cls
        return cls

    return add


def implements(registry: Registry, name: str) -> Callable[[T], T]:
    """Class decorator: the class computes the part declared as `name` (a declaration must come first: a misspelt
    name fails where the module loads, not where a config selects it)."""

    def bind(cls: T) -> T:
        if name not in registry:
            raise LookupError(f"attention.{registry.field}: {cls.__name__} implements {name}, which is not declared")
        cls.name = name
        registry.implementations[name] = cls
        return cls

    return bind


# config value -> declaration; nmt_core.family.variants fills them
SCORES = Registry("score")
TEMPERATURES = Registry("temperature")
POSITION_BIASES = Registry("position_bias")
PLACEMENTS = Registry("placement")  # the RNN's
SELF_ATTENTIONS = Registry("self_attention")  # the RNN's
SACT_READINGS = Registry("sact_reading")  # the Transformer's: how a head reads SACT's c~_{t-1}
NORMALISERS = Registry("normaliser")  # what turns the logits into weights: softmax, alpha-entmax
MECHANISMS = Registry("mechanism")  # on/off mechanisms by their attention.* flag, in the order the pipeline runs them
SELECTED_BY = {
    "score": SCORES,
    "temperature": TEMPERATURES,
    "placement": PLACEMENTS,
    "position_bias": POSITION_BIASES,
    "self_attention": SELF_ATTENTIONS,
    "sact_reading": SACT_READINGS,
    "normaliser": NORMALISERS,
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
    "normaliser",
)  # as variant labels have always named the parts (a new key's default says nothing, so old labels stay)


class Implementation:
    """A class that computes a declared part: it knows its config value (set by `implements`), under which it keeps
    its state and names its modules."""

    name: ClassVar[str] = ""
