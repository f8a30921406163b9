"""A small model must learn 50 short sentence pairs by heart: the plainest proof the model can learn."""

import random

import pytest
import torch

from nmt_core.config import DecodeConfig
from nmt_core.data.batches import Example, make_batches
from nmt_core.models.rnn import Seq2Seq
from nmt_core.training.decode import translate
from nmt_core.training.train import batch_loss, build_optimizer, optimizer_step
from tests.conftest import tiny_config


def _pairs(n=50, seed=3):
    """Random token sequences: nothing to generalise, only to memorise."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        src = [rng.randrange(4, 40) for _ in range(rng.randint(3, 7))]
        tgt = [rng.randrange(4, 30) for _ in range(rng.randint(3, 7))]
        pairs.append(Example(src, tgt))
    return pairs


@pytest.mark.parametrize(
    "attention",
    [
        {"temperature": "none"},
        {"temperature": "sact", "lambda": 4.0},
        {"sentinel": True},
        {"temperature": "fixed", "tau": 0.8, "score": "concat"},
    ],
)
def test_small_model_memorises_fifty_pairs(attention):
    cfg = tiny_config(
        model={"emb_size": 32, "hidden_size": 64}, attention=attention, train={"lr": 1e-2, "batch_size": 10}
    )
    torch.manual_seed(0)
    model = Seq2Seq(cfg.model, cfg.attention, 40, 30)
    optimizer = build_optimizer(model, cfg)
    examples = _pairs()
    for epoch in range(150):
        model.train()
        for batch in make_batches(examples, 10, shuffle_seed=epoch):
            loss, _ = batch_loss(model, batch, cfg)
            optimizer_step(optimizer, loss, model.parameters(), 5.0)
        if loss.item() < 0.01:
            break
    decoded = translate(model, examples, DecodeConfig(), 1, 25, torch.device("cpu"))
    exact = sum(d.tokens == e.tgt for d, e in zip(decoded, examples))
    assert exact == len(examples), f"{exact}/50 memorised"
