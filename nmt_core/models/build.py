"""`model.arch` -> the encoder-decoder module: the one place training, checkpoints and translation build a model.

Importing this module loads the model's modules (and torch); config validation reads only the architectures'
declarations (nmt_core.family.architectures), so it never does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch import nn

from nmt_core.family.architectures import ARCHITECTURES
from nmt_core.family.parts import RNN, TRANSFORMER
from nmt_core.models.rnn import Seq2Seq
from nmt_core.models.transformer import Transformer

if TYPE_CHECKING:
    from nmt_core.config import AttentionConfig, ModelConfig

MODELS: dict[str, type[nn.Module]] = {RNN: Seq2Seq, TRANSFORMER: Transformer}  # bound to ARCHITECTURES by name
assert MODELS.keys() == ARCHITECTURES.keys(), "every declared architecture has its module, and only those"


def build_model(model: ModelConfig, attention: AttentionConfig, src_vocab: int, tgt_vocab: int) -> nn.Module:
    return MODELS[model.arch](model, attention, src_vocab, tgt_vocab)
