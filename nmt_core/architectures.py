"""`model.arch` -> the encoder-decoder class: the one place training, checkpoints and translation build a model,
and where config validation finds what each architecture declares (its own keys and defaults, its labels)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch import nn

from nmt_core.model import Seq2Seq
from nmt_core.parts import RNN, TRANSFORMER, Architecture
from nmt_core.transformer import Transformer

if TYPE_CHECKING:
    from nmt_core.config import AttentionConfig, ModelConfig

ARCHITECTURES: dict[str, type[Architecture]] = {RNN: Seq2Seq, TRANSFORMER: Transformer}


def build_model(model: ModelConfig, attention: AttentionConfig, src_vocab: int, tgt_vocab: int) -> nn.Module:
    return ARCHITECTURES[model.arch](model, attention, src_vocab, tgt_vocab)
