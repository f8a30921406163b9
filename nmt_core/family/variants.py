"""The attention family declared: one torch-free class per `attention.*` value, saying what the rest of the project
asks about it (nmt_core.family.parts) and nothing of how it computes.

The classes that compute the parts carry the same config values (`@implements(SCORES, "concat")`): the RNN's
pipeline and the family's maths in nmt_core.models.attention, the RNN's placements in nmt_core.models.rnn, the
Transformer's SACT readings in nmt_core.models.multihead. The equations are in their docstrings.
"""

from __future__ import annotations

from typing import ClassVar

from nmt_core.family.parts import (
    BOTH,
    MECHANISMS,
    PLACEMENTS,
    POSITION_BIASES,
    SACT_READINGS,
    SCORES,
    SELECTED_BY,
    SELF_ATTENTIONS,
    TEMPERATURES,
    TRANSFORMER,
    AttentionSettings,
    Part,
    Rule,
    TrialSettings,
    declare,
)

__all__ = [
    "MECHANISMS",
    "PLACEMENTS",
    "POSITION_BIASES",
    "SACT_READINGS",
    "SCORES",
    "SELECTED_BY",
    "SELF_ATTENTIONS",
    "TEMPERATURES",
]

# ---- scores ---------------------------------------------------------------------------------------------------


@declare(SCORES, "dot")
class Dot(Part):
    architectures = BOTH
    rules = (
        Rule(
            "attention.qk_norm",
            "false with attention.score dot (on unit queries and keys both dot products are the cosine: "
            "keep the transformer's scaled_dot)",
            lambda c: not c.attention.qk_norm,
        ),
    )


@declare(SCORES, "general")
class General(Part):
    pass


@declare(SCORES, "concat")
class Concat(Part):
    pass


@declare(SCORES, "scaled_dot")
class ScaledDot(Part):
    architectures = BOTH


@declare(SCORES, "key_value")
class KeyValue(Part):
    rules = (
        Rule(
            "attention.sentinel",
            "false with attention.score key_value (its context has hidden_size / 2 units; "
            "Li & Zhu mix the sentinel, of hidden_size units, into it)",
            lambda c: not c.attention.sentinel,
        ),
        Rule(
            "model.readout",
            "luong or auto with attention.score key_value (c + s needs a context of hidden_size units)",
            lambda c: c.model.readout != "sum",
        ),
        Rule(
            "model.hidden_size",
            "a multiple of 4 with attention.score key_value (each direction splits into key and value)",
            lambda c: c.model.hidden_size % 4 == 0,
        ),
    )


# ---- temperatures ---------------------------------------------------------------------------------------------


class TemperaturePart(Part):
    """A temperature serves both architectures unless it says otherwise, and says which diagnostics it has."""

    architectures = BOTH
    adaptive: ClassVar[bool] = False  # tau_t changes from token to token: heatmaps and word statistics show it

    @classmethod
    def tau_bound(cls, a: AttentionSettings) -> float | None:
        """b where tau_t lies in (1/b, b) (diagnostics count the tokens at a bound); None: unbounded or constant."""
        return None


@declare(TEMPERATURES, "none")
class NoTemperature(TemperaturePart):
    rules = (
        Rule(
            "attention.qk_norm",
            "false with attention.temperature none (qk_norm scores the cosine, in [-1, 1], which nearly evens out "
            "the softmax: the temperature is its only scale; choose fixed, learned or sact)",
            lambda c: not c.attention.qk_norm,
        ),
    )

    @classmethod
    def title(cls, a: AttentionSettings) -> str | None:
        return "no temperature"


@declare(TEMPERATURES, "fixed")
class Fixed(TemperaturePart):
    settings = ("attention.tau",)

    @classmethod
    def label(cls, a: AttentionSettings) -> str | None:
        return f"tau{a.tau:g}"

    @classmethod
    def title(cls, a: AttentionSettings) -> str | None:
        return f"fixed τ{a.tau:g}"


class LambdaPower(TemperaturePart):
    """tau = lambda^tanh(.): tau lies in (1/lambda, lambda), its bound; its label is its name and lambda (`sact4`),
    its title how papers write it (`SACT λ4`)."""

    settings = ("attention.lambda",)
    written: ClassVar[str] = ""  # its name as papers write it, where that is not its config value

    @classmethod
    def label(cls, a: AttentionSettings) -> str | None:
        return f"{cls.name}{a.lambda_:g}"

    @classmethod
    def title(cls, a: AttentionSettings) -> str | None:
        return f"{cls.written or cls.name} λ{a.lambda_:g}"

    @classmethod
    def tau_bound(cls, a: AttentionSettings) -> float | None:
        return a.lambda_


@declare(TEMPERATURES, "sact")
class Sact(LambdaPower):
    adaptive = True
    written = "SACT"
    settings = ("attention.lambda", "attention.sact_bias", "attention.sact_reading")  # the reading: the Transformer's


@declare(TEMPERATURES, "learned")
class Learned(LambdaPower):
    pass


# ---- on/off mechanisms, in the order the pipeline runs them ---------------------------------------------------


def _attends_after_step(cfg: TrialSettings) -> bool:
    """Whether the placement attends from the state after the RNN step (t_i, which the sentinel mixes in)."""
    return PLACEMENTS[cfg.attention.placement].attends_after_step


@declare(MECHANISMS, "sentinel")
class Sentinel(Part):
    architectures = BOTH
    rules = (
        Rule(
            "attention.sentinel",
            "false with attention.placement {a.placement} (Li & Zhu's sentinel mixes in "
            "the state after the RNN step, t_i, which that placement attends before)",
            _attends_after_step,
        ),
    )


@declare(MECHANISMS, "intra_temporal")
class IntraTemporal(Part):
    @classmethod
    def label(cls, a: AttentionSettings) -> str | None:
        return "intra"

    @classmethod
    def title(cls, a: AttentionSettings) -> str | None:
        return "intra-temporal"


@declare(MECHANISMS, "coverage")
class Coverage(Part):
    rules = (
        Rule(
            "attention.coverage",
            "false unless attention.score is concat (Tu et al. feed coverage inside the additive score's tanh)",
            lambda c: c.attention.score == "concat",
        ),
    )
    settings = ("attention.coverage_weight",)


@declare(MECHANISMS, "fertility")
class Fertility(Part):
    rules = (
        Rule(
            "attention.fertility",
            "false unless attention.coverage is true (fertility is what coverage is drawn towards)",
            lambda c: c.attention.coverage,
        ),
    )


# ---- position biases ------------------------------------------------------------------------------------------


class PositionBiasPart(Part):
    @classmethod
    def label(cls, a: AttentionSettings) -> str | None:
        return f"pos-{cls.name}"

    @classmethod
    def title(cls, a: AttentionSettings) -> str | None:
        return None if cls.label(a) is None else f"{cls.name} position bias"


@declare(POSITION_BIASES, "none")
class NoPositionBias(PositionBiasPart):
    architectures = BOTH

    @classmethod
    def label(cls, a: AttentionSettings) -> str | None:
        return None


@declare(POSITION_BIASES, "log")
class Log(PositionBiasPart):
    pass


@declare(POSITION_BIASES, "gaussian")
class Gaussian(PositionBiasPart):
    architectures = BOTH


# ---- the RNN's self-attention sides (report 004) --------------------------------------------------------------


class Sides(Part):
    """`attention.self_attention`: whether the encoder and the decoder each have a SelfAttention layer."""

    encoder: ClassVar[bool] = False
    decoder: ClassVar[bool] = False

    @classmethod
    def label(cls, a: AttentionSettings) -> str | None:
        return f"self-{cls.name}" if cls.encoder or cls.decoder else None

    @classmethod
    def title(cls, a: AttentionSettings) -> str | None:
        return f"self-attention ({cls.name})" if cls.encoder or cls.decoder else None


@declare(SELF_ATTENTIONS, "none")
class NoSides(Sides):
    pass


@declare(SELF_ATTENTIONS, "encoder")
class EncoderSide(Sides):
    encoder = True


@declare(SELF_ATTENTIONS, "decoder")
class DecoderSide(Sides):
    decoder = True


@declare(SELF_ATTENTIONS, "both")
class BothSides(Sides):
    encoder = decoder = True


# ---- the RNN's placements: where attention sits in a decoder step ---------------------------------------------


class PlacementPart(Part):
    attends_after_step: ClassVar[bool] = False  # attends from s_t, the state after this step's RNN (the sentinel's t_i)
    feeds_input: ClassVar[bool] = False  # the RNN reads h~_{t-1} (input feeding), so `model.input_feeding` acts


@declare(PLACEMENTS, "luong")
class Luong(PlacementPart):
    attends_after_step = feeds_input = True
    settings = ("model.input_feeding",)  # the others feed c_t instead

    @classmethod
    def label(cls, a: AttentionSettings) -> str | None:
        return None


@declare(PLACEMENTS, "bahdanau")
class Bahdanau(PlacementPart):
    pass


@declare(PLACEMENTS, "cgru")
class ConditionalGRU(PlacementPart):
    rules = (
        Rule(
            "model.decoder_layers",
            "1 with attention.placement cgru (its two transitions are the decoder's layers)",
            lambda c: c.model.decoder_layers == 1,
        ),
    )


# ---- the Transformer's SACT readings: what stands for c~_{t-1} inside a layer ---------------------------------


@declare(SACT_READINGS, "query")
class QueryReading(Part):
    architectures = (TRANSFORMER,)


@declare(SACT_READINGS, "first_pass")
class FirstPassReading(Part):
    architectures = (TRANSFORMER,)
