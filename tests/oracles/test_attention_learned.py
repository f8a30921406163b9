"""`attention.temperature: learned`: SACT without its input. One learned temperature per model (per head of every
tempered block in the Transformer), in SACT's own parameterisation: tau = lambda^tanh(b), b a learned scalar,
b = 0 at the start (tau = 1). The control that tells adaptivity (SACT: tau_t from the token) from a learned
rescaling (this: one tau for every token).

Expected values come from the formula in plain Python (math, lists), reading only b from the module; gradients with
respect to b are checked against the derivative of the formula and against central finite differences of the
plain-loop attention (float64).
"""

from __future__ import annotations

import math

import pytest
import torch

from nmt_core.config import ConfigError, build_config
from nmt_core.family.registry import is_adaptive
from nmt_core.models.attention import Attention
from nmt_core.models.build import build_model
from nmt_core.training.diagnostics import TAU_AT_BOUND, AttentionDiagnostics
from sweeper.space.spec import variant_label
from tests.conftest import tiny_config
from tests.oracles.test_transformer import HEADS, _batch, transformer_config

H, S, X = 4, 3, 5
MASK = [[True, True, True], [True, True, False]]


def tau_of(b: float, lam: float) -> float:
    """tau = lambda^tanh(b)."""
    return lam ** math.tanh(b)


def dtau_db(b: float, lam: float) -> float:
    """d tau / d b = tau ln(lambda) (1 - tanh(b)^2)."""
    return tau_of(b, lam) * math.log(lam) * (1 - math.tanh(b) ** 2)


def rnn_attention(lam: float, b: float) -> Attention:
    torch.manual_seed(0)
    module = Attention(
        build_config({"attention": {"score": "dot", "temperature": "learned", "lambda": lam}}).attention, H, X, "gru"
    ).double()
    with torch.no_grad():
        module.temperature.b.fill_(b)
    return module


def inputs():
    g = torch.Generator().manual_seed(3)
    h = torch.randn(2, S, H, generator=g, dtype=torch.float64)
    queries = [torch.randn(2, H, generator=g, dtype=torch.float64) for _ in range(3)]
    return h, queries, torch.randn(2, H, generator=g, dtype=torch.float64)


def run(module: Attention, h, queries, init):
    memory = module.memory(h, torch.tensor(MASK))
    state = module.initial_state(memory, init)
    outs = []
    for s in queries:
        out, state = module(s, memory, state)
        outs.append(out)
    return outs


def plain_contexts(b: float, lam: float, h, queries) -> list[list[list[float]]]:
    """c_t = sum_i alpha_ti h_i, alpha_t = softmax(s_t^T h / tau) over the real words, tau = lambda^tanh(b): every
    step and sentence, in plain Python."""
    tau = tau_of(b, lam)
    contexts = []
    for s in queries:
        rows = []
        for row in range(2):
            hs, q = h[row].tolist(), s[row].tolist()
            e = [sum(x * y for x, y in zip(q, hj)) / tau for hj in hs]
            top = max(v for v, real in zip(e, MASK[row]) if real)
            exps = [math.exp(v - top) if real else 0.0 for v, real in zip(e, MASK[row])]
            alpha = [x / sum(exps) for x in exps]
            rows.append([sum(a * hj[k] for a, hj in zip(alpha, hs)) for k in range(H)])
        contexts.append(rows)
    return contexts


@pytest.mark.parametrize("lam, b", [(4.0, 0.37), (2.0, -0.8), (10.0, 1.9)])
def test_rnn_tau_is_lambda_to_the_tanh_of_b_for_every_token_and_step(lam, b):
    module = rnn_attention(lam, b)
    h, queries, init = inputs()
    outs = run(module, h, queries, init)
    for out, expected in zip(outs, plain_contexts(b, lam, h, queries)):
        assert out.tau.tolist() == pytest.approx([tau_of(b, lam)] * 2, rel=1e-12)
        assert out.context.tolist() == [pytest.approx(row, rel=1e-10, abs=1e-12) for row in expected]


@pytest.mark.parametrize("lam, b", [(4.0, 0.37), (2.0, -0.8), (10.0, 1.9)])
def test_rnn_gradient_with_respect_to_b(lam, b):
    """d tau / d b as the formula's derivative, and d L / d b of L = sum of every context against central
    differences of the plain-loop attention."""
    module = rnn_attention(lam, b)
    h, queries, init = inputs()
    outs = run(module, h, queries, init)
    outs[0].tau[0].backward(retain_graph=True)
    assert module.temperature.b.grad.item() == pytest.approx(dtau_db(b, lam), rel=1e-10)
    module.temperature.b.grad = None
    sum(out.context.sum() for out in outs).backward()

    def loss(value: float) -> float:
        return sum(x for step in plain_contexts(value, lam, h, queries) for row in step for x in row)

    eps = 1e-6
    expected = (loss(b + eps) - loss(b - eps)) / (2 * eps)
    assert module.temperature.b.grad.item() == pytest.approx(expected, rel=1e-6, abs=1e-9)


def test_b_starts_at_zero_so_tau_starts_at_one_and_is_not_adaptive():
    for arch, cfg in (
        ("rnn", tiny_config(attention={"temperature": "learned"})),
        ("transformer", transformer_config(temperature="learned")),
    ):
        torch.manual_seed(0)
        model = build_model(cfg.model, cfg.attention, 20, 20)
        bs = [p for name, p in model.named_parameters() if name.endswith("temperature.b")]
        assert bs and all((p == 0).all() for p in bs)  # one per model, or one per head of each tempered block
        assert [p.numel() for p in bs] == ([1] if arch == "rnn" else [HEADS] * 2)
        batch = _batch()
        _, trace = model(batch.src, batch.src_lengths, batch.tgt_in)
        assert torch.equal(trace.tau, torch.ones_like(trace.tau))
    assert not is_adaptive("learned")


def test_transformer_tau_per_head_and_its_gradient():
    cfg = transformer_config(temperature="learned", temperature_at="both", **{"lambda": 3.0})
    torch.manual_seed(0)
    model = build_model(cfg.model, cfg.attention, 20, 20).double()
    bs = [p for name, p in model.named_parameters() if name.endswith("temperature.b")]
    values = [[0.3, -1.1, 2.0], [-0.2, 0.9, 0.05], [1.4, -0.6, 0.0], [-2.5, 0.7, 0.4]]  # per block, per head
    with torch.no_grad():
        for p, v in zip(bs, values):
            p.copy_(torch.tensor(v, dtype=torch.float64))
    batch = _batch()
    _, trace = model(batch.src, batch.src_lengths, batch.tgt_in)
    expected = [tau_of(b, 3.0) for block in values for b in block]  # columns in Transformer.head_labels() order
    assert len(model.head_labels()) == trace.tau.size(-1) == len(expected)
    for column, tau in enumerate(expected):
        assert trace.tau[..., column].flatten().tolist() == pytest.approx([tau] * trace.tau[..., 0].numel(), rel=1e-12)
    trace.tau[0, 0].sum().backward()  # one token: d tau_h / d b_h of every head
    for p, block in zip(bs, values):
        assert p.grad.tolist() == pytest.approx([dtau_db(b, 3.0) for b in block], rel=1e-10)


def test_config_label_settings_and_diagnostics():
    cfg = build_config({"attention": {"temperature": "learned", "lambda": 4}})
    assert variant_label(cfg) == "general+learned4"
    active = cfg.active()
    assert active["attention.lambda"] == 4.0 and "attention.tau" not in active and "attention.sact_bias" not in active
    with pytest.raises(ConfigError, match=r"attention.lambda: must be > 1 .*\(got 1.0\)"):
        build_config({"attention": {"temperature": "learned", "lambda": 1.0}})
    heads = build_config({"model": {"arch": "transformer"}, "attention": {"temperature": "learned"}})
    assert variant_label(heads) == "transformer+learned4" and "attention.sact_reading" not in heads.active()
    model = build_model(tiny_config().model, tiny_config(attention={"temperature": "learned"}).attention, 30, 20)
    batch = _batch()
    with torch.no_grad():
        _, trace = model(batch.src, batch.src_lengths, batch.tgt_in)
    diagnostics = AttentionDiagnostics(tiny_config(attention={"temperature": "learned"}).attention)
    diagnostics.add(trace, batch.src != 0, batch.tgt_out != 0)
    report = diagnostics.report()
    assert report["tau_mean"] == pytest.approx(1.0) and report["tau_std"] == 0.0
    assert report[TAU_AT_BOUND] == 0.0  # tau = 1 is far from 1/lambda and lambda
