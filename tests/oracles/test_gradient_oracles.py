"""Gradient oracles: every state a decoder carries from one step to the next passes its gradient back through the
steps (issue 39, item 4).

The value oracles (test_oracles*.py, test_wiring_oracles.py, test_transformer.py) check what each step computes;
a carried state cut from the graph (`.detach()` on SACT's c~_{t-1}) computes the same values and passes them all,
while training no longer learns through the recurrence. Here, in float64 with dropout 0:

- `torch.autograd.gradcheck` of the whole unrolled loss (4 and 3 decoder steps, two sentences of different lengths)
  over the weights the carried state depends on: autograd against central finite differences of the same
  function. A detached carry leaves the forward value as it was, so the finite differences keep the path autograd
  lost, and the two disagree. Each carry on the teacher-forced training loss (`batch_loss`), with and without
  `model.fast_path`, and on the loss of step-by-step decoding (`encode` + `decoder.step`: the Transformer's
  `carried` path). atol is 1e-8, not 1e-5: the loss is a mean per token with gradients of ~1e-3, and a detached
  SACT c~_{t-1} moved W_c's by 1.5 times a tolerance of 1e-5 at most (84 times at 1e-8; a detached coverage carry
  stayed below 1e-5 on some weights), while autograd and the finite differences (eps = 1e-6) agree to 7e-10;
- autograd against central finite differences of the papers' equations written out in plain Python (the whole RNN
  model of test_wiring_oracles.py, the attention module with coverage or intra-temporal attention, the Transformer
  block of test_transformer.py): these also catch a wrong formula, which gradcheck, comparing the code with
  itself, cannot.

Models, batches and losses come through public entry points (config keys, `build_model`, `batch_loss`, `encode` /
`decoder.step`); the weights to differentiate are picked by the paper's symbol in their names.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from nmt_core.data.batches import Example, collate
from nmt_core.models.build import build_model
from nmt_core.models.rnn import BOS, EOS, PAD
from nmt_core.training.train import batch_loss
from tests.conftest import tiny_config
from tests.oracles import test_oracles as oracles
from tests.oracles import test_transformer as transformer
from tests.oracles import test_wiring_oracles as wiring

SRC_VOCAB, TGT_VOCAB = 11, 9
SOURCES = [[4, 5, 6, 7, 8], [9, 4, 10]]
TARGETS = [[5, 6, 7], [8, 4]]  # 4 and 3 decoder steps (</s> included): the second sentence has target padding
RNN = {"emb_size": 6, "hidden_size": 8}
TRANSFORMER = {"arch": "transformer", "emb_size": 8, "hidden_size": 8, "heads": 2, "layers": 1, "ff_size": 12}

# mechanism: (attention keys, model keys, fragments of the names of the parameters to differentiate): the carry's
# own weights and one upstream of the carried state (`bridge.bias` gives s_0, where every RNN carry starts)
CARRIES = {
    "sact c~_{t-1}": ({"temperature": "sact"}, RNN, ("W_c", "bridge.bias")),
    "coverage C_t": ({"score": "concat", "coverage": True}, RNN, ("coverage_V", "score.v", "bridge.bias")),
    "fertility": (
        {"score": "concat", "coverage": True, "coverage_weight": 0.5, "fertility": True},
        RNN,
        ("W_j", "coverage_V", "score.v"),
    ),
    "sentinel t_{i-1} lstm": ({"sentinel": True}, RNN, ("sentinel.W_h", "bridge.bias")),
    "sentinel t_{i-1} gru": ({"sentinel": True}, {**RNN, "cell": "gru"}, ("sentinel.W_h", "bridge.bias")),
    "intra-temporal log-sum": ({"intra_temporal": True}, RNN, ("score.W", "bridge.bias")),
    "cgru s_t gru": ({"placement": "cgru"}, {**RNN, "cell": "gru"}, ("rnn2.bias_hh", "bridge.bias")),
    "cgru s_t lstm": ({"placement": "cgru"}, RNN, ("rnn2.bias_hh", "bridge.bias")),
    "input feeding h~_{t-1}": ({}, RNN, ("decoder.embed", "bridge.bias")),
    "decoder self-attention s_0..s_{t-1}": (
        {"self_attention": "decoder"},
        RNN,
        ("decoder.self_attention.W_K", "bridge.bias"),
    ),
    "transformer sact first_pass cross": (
        {"temperature": "sact"},
        TRANSFORMER,
        ("reading.W_c", "decoder.layers.0.cross_attention.W_V.bias"),
    ),
    "transformer sact first_pass self": (
        {"temperature": "sact", "temperature_at": "self"},
        TRANSFORMER,
        ("reading.W_c", "decoder.layers.0.self_attention.W_V.bias"),
    ),
    "transformer qk_norm sact first_pass both": (
        {"temperature": "sact", "temperature_at": "both", "qk_norm": True},
        TRANSFORMER,
        ("reading.W_c", "decoder.layers.0.self_attention.W_K.bias", "decoder.layers.0.cross_attention.W_Q.bias"),
    ),
    "transformer sentinel x_{i-1}": ({"sentinel": True}, TRANSFORMER, ("sentinel.W_t", "decoder.embed")),
    "sact_released c~_{t-1}": (
        {"temperature": "sact_released"},
        {**RNN, "input_feeding": False, "encoder_merge": "sum"},
        ("temperature.mlp.0", "bridge.bias"),
    ),
    "transformer sact tempered c~_{i-1}": (
        {"temperature": "sact", "sact_reading": "tempered", "sact_base": True, "qk_norm": True},
        TRANSFORMER,
        ("reading.W_c", "log_tau0", "decoder.layers.0.cross_attention.W_V.bias"),
    ),
    "transformer self-attention keys and values": ({}, TRANSFORMER, ("decoder.layers.0.self_attention.W_V.bias",)),
}


def _model(attention: dict, model: dict, fast_path: bool = True):
    cfg = tiny_config(attention=attention, model={**model, "fast_path": fast_path})
    torch.manual_seed(0)
    seq2seq = build_model(cfg.model, cfg.attention, SRC_VOCAB, TGT_VOCAB).double()
    with torch.no_grad():  # weights large enough that every path through the steps carries a visible gradient
        for parameter in seq2seq.parameters():
            parameter.normal_(0.0, 0.5)
    return cfg, seq2seq.eval()


def _batch():
    return collate([Example(s, t) for s, t in zip(SOURCES, TARGETS)], [0, 1])


def stepwise_loss(model: nn.Module, batch) -> Tensor:
    """Mean cross-entropy per target token of step-by-step decoding forced through the references: what greedy and
    beam search run, one `decoder.step` at a time with the state each step hands the next."""
    memory, state = model.encode(batch.src, batch.src_lengths)
    total = batch.src.new_zeros((), dtype=torch.float64)
    for y_prev, y in zip(batch.tgt_in.unbind(1), batch.tgt_out.unbind(1)):
        logits, state, _ = model.decoder.step(y_prev, state, memory)
        total = total + F.cross_entropy(logits, y, ignore_index=PAD, reduction="sum")
    return total / batch.n_tokens


def picked(model: nn.Module, fragments: tuple[str, ...]) -> list[str]:
    """Names of the parameters whose name holds one of the fragments; each fragment must name one at least."""
    names = [name for name, _ in model.named_parameters()]
    for fragment in fragments:
        assert any(fragment in name for name in names), f"no parameter named *{fragment}*: {names}"
    return [name for name in names if any(fragment in name for fragment in fragments)]


class _LossOf(nn.Module):
    """A loss of a model as a module, so that torch.func.functional_call can hand it other parameter values."""

    def __init__(self, model: nn.Module, loss):
        super().__init__()
        self.model, self.loss = model, loss

    def forward(self) -> Tensor:
        return self.loss(self.model)


def gradcheck_over(model: nn.Module, loss, fragments: tuple[str, ...]) -> None:
    """torch.autograd.gradcheck of loss(model) over the picked parameters (raises on a mismatch)."""
    names = picked(model, fragments)
    parameters = dict(model.named_parameters())
    wrapped = _LossOf(model, loss)

    def loss_at(*values: Tensor) -> Tensor:
        return torch.func.functional_call(wrapped, {f"model.{n}": v for n, v in zip(names, values)}, ())

    inputs = tuple(parameters[name].detach().clone().requires_grad_() for name in names)
    assert torch.autograd.gradcheck(loss_at, inputs, eps=1e-6, atol=1e-8)


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast", "plain"])
@pytest.mark.parametrize("mechanism", CARRIES)
def test_teacher_forced_gradient_flows_through_the_carried_state(mechanism, fast_path):
    """Training: the teacher-forced loss of `batch_loss` (with fertility, its coverage regulariser)."""
    attention, model, fragments = CARRIES[mechanism]
    cfg, seq2seq = _model(attention, model, fast_path)
    batch = _batch()
    gradcheck_over(seq2seq, lambda m: batch_loss(m, batch, cfg)[0], fragments)


@pytest.mark.parametrize("mechanism", CARRIES)
def test_stepwise_decoding_gradient_flows_through_the_carried_state(mechanism):
    """Decoding: each step reads what the last one handed it (no regulariser: fertility's W_j gets no gradient)."""
    attention, model, fragments = CARRIES[mechanism]
    _, seq2seq = _model(attention, model)
    batch = _batch()
    gradcheck_over(seq2seq, lambda m: stepwise_loss(m, batch), fragments)


# ---- against the plain equations: finite differences of the papers' formulas written out in loops ---------------


def central_difference(value, tensor: Tensor, direction: Tensor, eps: float = 1e-6) -> float:
    """d/dh value() at tensor + h direction, h = 0, by central differences; the tensor is put back as it was."""
    saved = tensor.detach().clone()
    with torch.no_grad():
        tensor.copy_(saved + eps * direction)
        up = value()
        tensor.copy_(saved - eps * direction)
        down = value()
        tensor.copy_(saved)
    return (up - down) / (2 * eps)


def assert_directional_derivatives_match(value, gradients: dict[str, tuple[Tensor, Tensor]], directions: int = 3):
    """Along random directions u of each tensor: autograd's <grad, u> against central differences of `value`."""
    g = torch.Generator().manual_seed(7)
    for name, (tensor, gradient) in gradients.items():
        for _ in range(directions):
            u = torch.randn(tensor.shape, generator=g, dtype=tensor.dtype)
            expected = central_difference(value, tensor, u)
            assert (gradient * u).sum().item() == pytest.approx(expected, rel=1e-6, abs=1e-8), name


# the carries test_wiring_oracles.py writes out for the whole RNN model: (attention keys, model keys, parameters)
WIRED = {
    "sact c~_{t-1}": ({"score": "dot", "temperature": "sact", "lambda": 3.0}, {}, ("W_c", "U_s", "bridge.bias")),
    "sentinel t_{i-1} with sact": (
        {"score": "dot", "temperature": "sact", "sentinel": True},
        {},
        ("W_c", "sentinel.W_t", "sentinel.W_h", "bridge.bias"),
    ),
    "cgru s_t": ({"score": "dot", "placement": "cgru"}, {"cell": "gru"}, ("rnn2.bias_hh", "bridge.bias")),
}


def plain_loss(model: nn.Module) -> float:
    """The mean cross-entropy per target token (</s> included) of test_wiring_oracles' plain-Python model."""
    total, tokens = 0.0, 0
    for src, tgt in zip(wiring.SOURCES, wiring.TARGETS):
        for (logits, _), y in zip(wiring.teacher_forced_oracle(model, src, [BOS] + tgt), tgt + [EOS]):
            total -= wiring.log_softmax(logits)[y]
            tokens += 1
    return total / tokens


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast", "plain"])
@pytest.mark.parametrize("mechanism", WIRED)
def test_training_gradient_is_the_derivative_of_the_plain_equations(mechanism, fast_path):
    """The gradient of `batch_loss` through 3-4 steps against finite differences of the equations in loops (SACT
    eq. 1-4, Li & Zhu eq. 7-12, dl4mt's cGRU, Luong eq. 5-8): a detached carry or a wrong formula shows here."""
    attention, model, fragments = WIRED[mechanism]
    cfg = wiring._config(attention, {**model, "fast_path": fast_path})
    seq2seq = wiring._model(cfg)
    loss, _ = batch_loss(seq2seq, wiring._batch(), cfg)
    parameters = dict(seq2seq.named_parameters())
    names = picked(seq2seq, fragments)
    gradients = torch.autograd.grad(loss, [parameters[name] for name in names])
    assert_directional_derivatives_match(
        lambda: plain_loss(seq2seq), {n: (parameters[n], g) for n, g in zip(names, gradients)}
    )
    assert loss.item() == pytest.approx(plain_loss(seq2seq), rel=1e-9)  # the same function, differentiated


def plain_attention_loss(
    module: nn.Module, kind: str, keys: dict, h: Tensor, queries: list[Tensor], readout: list[Tensor]
) -> float:
    """sum over 3 steps t and both sentences of readout_t . c_t, the attention written out: coverage inside the
    additive score, e_tj = v^T tanh(W s_t + U h_j + V C_{t-1,j}), C_t = C_{t-1} + alpha_t, C_0 = 0 (Tu et al.
    eq. 6-7); intra-temporal e'_tj = exp(e_tj) / sum_{k<t} exp(e_kj), e'_1j = exp(e_1j) (Paulus et al. eq. 3-4)."""
    total = 0.0
    for b in range(2):
        rows = h[b].tolist()
        coverage = [0.0] * len(rows) if keys.get("coverage") else None
        past = [0.0] * len(rows)  # sum_{k<t} exp(e_kj)
        for t, s in enumerate(queries):
            e = oracles.score_oracle(module, kind, s[b].tolist(), rows, coverage)
            if keys.get("intra_temporal"):
                e, past = (
                    [x - math.log(p) if t else x for x, p in zip(e, past)],
                    [p + math.exp(x) for p, x in zip(past, e)],
                )
            alpha = oracles.softmax(e, oracles.MASK[b])
            total += oracles.dot(readout[t][b].tolist(), oracles.weighted_sum(alpha, rows))
            if coverage is not None:
                coverage = [c + a for c, a in zip(coverage, alpha)]
    return total


ATTENTION_CARRIES = {
    "coverage C_t": ("concat", {"coverage": True}, "coverage_V"),
    "intra-temporal log-sum": ("general", {"intra_temporal": True}, "score.W"),
}


@pytest.mark.parametrize("mechanism", ATTENTION_CARRIES)
def test_attention_gradient_is_the_derivative_of_the_formulas(mechanism):
    """Three steps of the attention module differentiated against finite differences of the equations in loops,
    with respect to the encoder states h (which reach step t through C_{t-1} or the running sum as well as
    directly), the queries and the mechanism's weights."""
    kind, keys, fragment = ATTENTION_CARRIES[mechanism]
    module = oracles._attention(score=kind, **keys)
    h, queries, init, _ = oracles._inputs()
    g = torch.Generator().manual_seed(3)
    readout = [torch.randn(q.shape, generator=g, dtype=torch.float64) for q in queries]
    inputs = {"h": h.requires_grad_(), **{f"s_{t + 1}": q.requires_grad_() for t, q in enumerate(queries)}}
    inputs.update({name: dict(module.named_parameters())[name] for name in picked(module, (fragment,))})
    outputs = oracles._run(module, h, queries, init)
    loss = sum((r * out.context).sum() for r, (out, _) in zip(readout, outputs))
    gradients = torch.autograd.grad(loss, list(inputs.values()))
    assert_directional_derivatives_match(
        lambda: plain_attention_loss(module, kind, keys, h, queries, readout),
        {name: (tensor, gradient) for (name, tensor), gradient in zip(inputs.items(), gradients)},
    )
    assert loss.item() == pytest.approx(plain_attention_loss(module, kind, keys, h, queries, readout), rel=1e-9)


# the blocks of test_transformer.py whose position i reads position i - 1: SACT's first pass, the sentinel's x_{i-1}
READS_THE_PREVIOUS_POSITION = [
    (parts, attention)
    for parts, attention in transformer.MECHANISMS
    if attention.get("sact_reading") == "first_pass" or attention.get("sentinel")
]


@pytest.mark.parametrize(
    "parts, attention",
    READS_THE_PREVIOUS_POSITION,
    ids=[str(attention) for _, attention in READS_THE_PREVIOUS_POSITION],
)
def test_transformer_block_gradient_is_the_derivative_of_the_formulas(parts, attention):
    """Teacher forcing's parallel path (each position reads the one before it, `shifted`) differentiated against
    finite differences of test_transformer's per-row oracle (S eq. 1-2 with c0_{i-1}; A eq. 7-10 with x_{i-1}),
    with respect to the block's input x, through which position i - 1 reaches position i."""
    assert_block_gradient_matches_the_oracle(parts, attention, ("x",))


@pytest.mark.parametrize("parts, attention", transformer.QK_NORM, ids=[str(a) for _, a in transformer.QK_NORM])
def test_qk_normalised_block_gradient_is_the_derivative_of_the_formulas(parts, attention):
    """Unit queries and keys (Henry et al. 2020) under each temperature: autograd through the normalisation against
    finite differences of the oracle's q / ||q|| and k / ||k||, with respect to the block's input x (the queries,
    and SACT's input) and the memory (the keys)."""
    assert_block_gradient_matches_the_oracle(parts, attention, ("x", "memory"))


def assert_block_gradient_matches_the_oracle(parts, attention: dict, inputs: tuple[str, ...]) -> None:
    """A test_transformer block's gradient of a loss of every output, with respect to `inputs` (x, memory), against
    central differences of the block's per-row oracle."""
    block = transformer.block(parts, **attention)
    cfg = transformer.transformer_config(**attention).attention
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 4, transformer.SIZE, generator=g, dtype=torch.float64, requires_grad=True)
    memory = torch.randn(2, 5, transformer.SIZE, generator=g, dtype=torch.float64, requires_grad=True)
    key_mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    readout = torch.randn(2, 4, transformer.SIZE, generator=g, dtype=torch.float64)  # a loss of every output
    out, _, _ = block(x, *block.keys_values(memory), key_mask[:, None, None, :], key_mask)
    tensors = {"x": x, "memory": memory}
    gradients = torch.autograd.grad((out * readout).sum(), [tensors[name] for name in inputs])
    with torch.no_grad():
        assert_directional_derivatives_match(
            lambda: (transformer.oracle(block, x, memory, [5, 3], cfg)[0] * readout).sum().item(),
            {name: (tensors[name], gradient) for name, gradient in zip(inputs, gradients)},
            directions=4,
        )
