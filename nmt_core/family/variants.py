"""The attention family declared: one torch-free class per `attention.*` value, saying what the rest of the project
asks about it (nmt_core.family.parts) and nothing of how it computes.

The classes that compute the parts carry the same config values (`@implements(SCORES, "concat")`): the RNN's
pipeline and the family's maths in nmt_core.models.attention, the RNN's placements in nmt_core.models.rnn, the
Transformer's SACT readings in nmt_core.models.multihead. The equations are in their docstrings.
"""

from __future__ import annotations

import math
from typing import ClassVar

from nmt_core.family.parts import (
    BOTH,
    MECHANISMS,
    NORMALISERS,
    PLACEMENTS,
    POSITION_BIASES,
    RNN,
    SACT_READINGS,
    SCORES,
    SELECTED_BY,
    SELF_ATTENTIONS,
    TEMPERATURES,
    TRANSFORMER,
    AttentionSettings,
    Control,
    Part,
    Rule,
    TrialSettings,
    declare,
)

__all__ = [
    "MECHANISMS",
    "NORMALISERS",
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


AT_SCALE = Control("fixed", at_scale=True)  # a fixed tau at the scale the row's tau settled on (its median)


def learned_control(lam: float | None = None) -> Control:
    """The learned temperature as a control: one tau = [tau_0] lambda^tanh(b) per head, SACT without its input, with
    the row's lambda and base scale (`lam` where the row's lambda is not a setting: the released code's e), or any
    lambda (the row has none: a per-head constant is the question)."""

    def settings(a: AttentionSettings) -> dict[str, object]:
        if lam is None and "attention.lambda" not in TEMPERATURES[a.temperature].settings:
            return {"temperature": "learned"}
        return {"temperature": "learned", "lambda": lam or a.lambda_, "sact_base": a.sact_base}

    return Control("learned", settings)


class LambdaPower(TemperaturePart):
    """tau = [tau_0] lambda^tanh(.): tau / tau_0 lies in (1/lambda, lambda), its bound; its label is its name and
    lambda (`sact4`, `sact4-base` with a learned base scale tau_0 per head), its title how papers write it."""

    settings = ("attention.lambda", "attention.sact_base")
    written: ClassVar[str] = ""  # its name as papers write it, where that is not its config value

    @classmethod
    def label(cls, a: AttentionSettings) -> str | None:
        return f"{cls.name}{a.lambda_:g}" + ("-base" if a.sact_base else "")

    @classmethod
    def title(cls, a: AttentionSettings) -> str | None:
        return f"{cls.written or cls.name} λ{a.lambda_:g}" + (" × learned τ0" if a.sact_base else "")

    @classmethod
    def tau_bound(cls, a: AttentionSettings) -> float | None:
        return a.lambda_


@declare(TEMPERATURES, "sact")
class Sact(LambdaPower):
    adaptive = True
    written = "SACT"
    # the reading: the Transformer's
    settings = ("attention.lambda", "attention.sact_base", "attention.sact_bias", "attention.sact_reading")
    observes = ("tau_modulation",)  # lambda^beta = tau / tau_0: what lies in (1/lambda, lambda) with a base scale
    controls = (learned_control(), AT_SCALE)
    rules = (
        Rule(
            "attention.sentinel",
            "false with attention.sact_reading tempered (the tempered context would be c+, which mixes in the "
            "sentinel's slot after the temperature)",
            lambda c: c.attention.sact_reading != "tempered" or not c.attention.sentinel,
        ),
    )


@declare(TEMPERATURES, "learned")
class Learned(LambdaPower):
    observes = ("tau_modulation",)


@declare(TEMPERATURES, "sact_released")
class SactReleased(TemperaturePart):
    """SACT as its released code computes it (DESIGN: lambda fixed at e, a two-layer MLP for beta, no input
    feeding, encoder directions summed), beside the paper's equations (`sact`)."""

    architectures = (RNN,)
    adaptive = True
    rules = (
        Rule(
            "model.input_feeding",
            "false with attention.temperature sact_released (SACT's released code has no input feeding)",
            lambda c: not c.model.input_feeding,
        ),
        Rule(
            "model.encoder_merge",
            "sum with attention.temperature sact_released (SACT's released code sums the encoder's directions)",
            lambda c: c.model.encoder_merge == "sum",
        ),
    )
    controls = (learned_control(math.e), AT_SCALE)

    @classmethod
    def title(cls, a: AttentionSettings) -> str | None:
        return "SACT (released code)"

    @classmethod
    def tau_bound(cls, a: AttentionSettings) -> float | None:
        return math.e


class LengthScaled(TemperaturePart):
    """A temperature read from n, the number of keys a query attends over (the source length in cross-attention):
    1 / tau = s log n (Scalable-Softmax)."""

    settings = ("attention.train_keys",)
    observes = ("log_n_scale",)  # s log n, the logits' multiplier (1 / tau)


@declare(TEMPERATURES, "ssmax")
class ScalableSoftmax(LengthScaled):
    """Nakanishi 2025: s learned per head (per model in the RNN); its controls: the fixed log-n scaling, and none."""

    controls = (
        Control("fixed log n", lambda a: {"temperature": "ssmax_fixed", "train_keys": a.train_keys}),
        Control("none", lambda a: {"temperature": "none"}),
    )

    @classmethod
    def title(cls, a: AttentionSettings) -> str | None:
        return "SSMax"


@declare(TEMPERATURES, "ssmax_fixed")
class FixedLogScale(LengthScaled):
    """SSMax's fixed control: s = 1 / log(n_train), logits times log(n) / log(n_train)."""

    @classmethod
    def label(cls, a: AttentionSettings) -> str | None:
        return f"logn{a.train_keys}"

    @classmethod
    def title(cls, a: AttentionSettings) -> str | None:
        return f"log n / log {a.train_keys}"


@declare(TEMPERATURES, "selective")
class Selective(TemperaturePart):
    """Zhang et al. 2024's query temperature: 1 / tau_i = tau_pos(n_i) + tau_tok(x_i), per head; its control the
    learned per-head constant."""

    adaptive = True
    controls = (learned_control(),)


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


def _softmax_normalised(cfg: TrialSettings) -> bool:
    return cfg.attention.normaliser == "softmax"


@declare(MECHANISMS, "softcap")
class Softcap(Part):
    """Gemma 2's logit soft-capping, z <- c tanh(z / c): the production bound on the logits' sharpness; its control
    the same model uncapped."""

    architectures = BOTH
    settings = ("attention.cap",)
    observes = ("capped",)  # the share of a token's real logits beyond the cap (|z| > c)
    controls = (Control("none", lambda a: {"softcap": False}),)

    @classmethod
    def label(cls, a: AttentionSettings) -> str | None:
        return f"softcap{a.cap:g}"

    @classmethod
    def title(cls, a: AttentionSettings) -> str | None:
        return f"soft-cap {a.cap:g}"


@declare(MECHANISMS, "entropy_sharpening")
class EntropySharpening(Part):
    """Velickovic et al. 2024's adaptive temperature, at decoding only: a row whose attention entropy exceeds the
    threshold is sharpened; training and the dev loss never see it. Its control is the same checkpoint decoded
    plainly, which the trial decodes too."""

    architectures = BOTH
    decodes_only = True
    settings = ("attention.entropy_threshold",)
    rules = (
        Rule(
            "attention.entropy_sharpening",
            "false unless attention.normaliser is softmax (Velickovic et al. fit their sharpening to softmax's "
            "entropy)",
            _softmax_normalised,
        ),
    )
    controls = (Control("plain decoding", same_checkpoint=True),)

    @classmethod
    def label(cls, a: AttentionSettings) -> str | None:
        return f"sharpen{a.entropy_threshold:g}"

    @classmethod
    def title(cls, a: AttentionSettings) -> str | None:
        return f"entropy sharpening > {a.entropy_threshold:g}"


# ---- normalisers: the logits -> the weights ------------------------------------------------------------------


@declare(NORMALISERS, "softmax")
class Softmax(Part):
    architectures = BOTH

    @classmethod
    def label(cls, a: AttentionSettings) -> str | None:
        return None


@declare(NORMALISERS, "entmax")
class Entmax(Part):
    """alpha-entmax with a fixed alpha (Peters et al. 2019; 1.5 in Correia et al.'s fixed rows): sparse weights, exact
    zeros; its control softmax."""

    architectures = BOTH
    settings = ("attention.alpha",)
    observes = ("zeros",)  # the share of a token's real keys with weight exactly 0
    controls = (Control("softmax", lambda a: {"normaliser": "softmax"}),)

    @classmethod
    def label(cls, a: AttentionSettings) -> str | None:
        return f"{cls.name}{a.alpha:g}"

    @classmethod
    def title(cls, a: AttentionSettings) -> str | None:
        return f"{a.alpha:g}-entmax"


@declare(NORMALISERS, "entmax_learned")
class LearnedEntmax(Entmax):
    """Correia, Niculae and Martins 2019: alpha in (1, 2) learned per head, from attention.alpha; its controls the
    fixed alpha it starts at, and softmax."""

    observes = ("alpha", "zeros")
    rules = (
        Rule(
            "attention.alpha",
            "< 2 with attention.normaliser entmax_learned (alpha = 1 + sigmoid(a) lies in (1, 2))",
            lambda c: c.attention.alpha < 2,
        ),
    )
    controls = (
        Control("fixed alpha", lambda a: {"normaliser": "entmax", "alpha": a.alpha}),
        Control("softmax", lambda a: {"normaliser": "softmax"}),
    )

    @classmethod
    def title(cls, a: AttentionSettings) -> str | None:
        return f"learned-alpha entmax (from {a.alpha:g})"


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


@declare(SACT_READINGS, "tempered")
class TemperedReading(Part):
    """The paper's own c~_{t-1}: each head's tempered context at the position before, computed position by position
    (SACT's declaration refuses the sentinel with it)."""

    architectures = (TRANSFORMER,)
