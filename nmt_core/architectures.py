"""`model.arch` -> the encoder-decoder class: the one place training, checkpoints and translation build a model."""

from __future__ import annotations

from torch import nn

from nmt_core.config import AttentionConfig, ModelConfig
from nmt_core.model import Seq2Seq
from nmt_core.transformer import Transformer

ARCHITECTURES: dict[str, type[nn.Module]] = {"rnn": Seq2Seq, "transformer": Transformer}


def build_model(model: ModelConfig, attention: AttentionConfig, src_vocab: int, tgt_vocab: int) -> nn.Module:
    return ARCHITECTURES[model.arch](model, attention, src_vocab, tgt_vocab)
