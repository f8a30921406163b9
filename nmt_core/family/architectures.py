"""`model.arch` declared: what each encoder-decoder is to config validation and variant labels, torch-free.

Each architecture declares the keys only it reads (the other refuses them away from their defaults), the values
it reads in place of a key's common default, and how it writes its variants' labels. The nn.Modules that are these
architectures (the RNN's nmt_core.models.rnn.Seq2Seq, nmt_core.models.transformer.Transformer) are bound to them by name
in nmt_core.models.build, which imports them when a model is built.
"""

from __future__ import annotations

from typing import ClassVar

from nmt_core.family.parts import RNN, TRANSFORMER, TrialSettings
from nmt_core.family.variants import TEMPERATURES


class Architecture:
    """What an encoder-decoder class (`model.arch`) declares about the config."""

    own_keys: ClassVar[tuple[str, ...]] = ()
    own_defaults: ClassVar[dict[str, str]] = {}  # key -> what this architecture reads where the config has the default

    @classmethod
    def relabel(cls, cfg: TrialSettings, words: dict[str, str]) -> None:
        """Adjust the label words of the parts (by their attention.* field) to say what this architecture runs."""


class RnnArchitecture(Architecture):
    """`model.arch: rnn`: Luong et al.'s encoder-decoder with the attention family."""

    own_keys = (  # what only the RNN reads; the Transformer refuses them away from their defaults
        "model.cell",
        "model.compile",
        "model.input_feeding",
        "model.encoder_merge",
        "model.readout",
        "model.encoder_layers",
        "model.decoder_layers",
        "attention.placement",
        "attention.coverage",
        "attention.coverage_weight",
        "attention.fertility",
        "attention.intra_temporal",
        "attention.self_attention",
    )


class TransformerArchitecture(Architecture):
    """`model.arch: transformer`: Vaswani et al.'s, the family inside its heads."""

    own_keys = (  # what only the Transformer reads; the RNN refuses them away from their defaults
        "model.layers",
        "model.heads",
        "model.ff_size",
        "model.norm",
        "attention.sact_reading",
        "attention.temperature_at",
        "attention.position_layers",
        "attention.qk_norm",
    )
    own_defaults = {"attention.score": "scaled_dot"}  # Vaswani's, where the config keeps the RNN's default

    @classmethod
    def relabel(cls, cfg: TrialSettings, words: dict[str, str]) -> None:
        """`transformer` for the score (`transformer-dot` for another; `-qknorm` with unit queries and keys), SACT's
        word with its reading, and where the temperature acts when that is not the cross-attention: e.g.
        transformer+sact4-first_pass@both+sentinel, transformer-qknorm+learned16."""
        a = cfg.attention
        own = a.score == cls.own_defaults["attention.score"]
        words["score"] = "transformer" if own else f"transformer-{words['score']}"
        if a.qk_norm:
            words["score"] += "-qknorm"
        if "attention.sact_reading" in TEMPERATURES[a.temperature].settings:
            words["temperature"] += f"-{a.sact_reading}"
        if a.temperature != "none" and a.temperature_at != "cross":
            words["temperature"] += f"@{a.temperature_at}"


ARCHITECTURES: dict[str, type[Architecture]] = {RNN: RnnArchitecture, TRANSFORMER: TransformerArchitecture}
