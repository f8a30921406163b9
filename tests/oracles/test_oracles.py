"""Oracle tests: the attention module against the papers' formulas, written out as plain Python loops.

Each expected value is computed here, independently of nmt_core.models.attention's tensor code, from the equations
(Luong et al. 2015 eq. 8; Vaswani et al. 2017; SACT eq. 1-4; Tu et al. 2016 eq. 6-7; Li & Zhu eq. 7-11),
reading only the module's learned parameters. Changing a formula (dropping 1/sqrt(d), adding a bias to
SACT's eq. 2, swapping c~ and s) makes one of these fail.
"""

from __future__ import annotations

import math

import pytest
import torch

from nmt_core.config import build_config
from nmt_core.models.attention import Attention, coverage_penalty
from nmt_core.models.rnn import Seq2Seq

H, S, X = 4, 3, 5  # hidden size, source length, decoder input size (sentinel's x_i)
MASK = [[True, True, True], [True, True, False]]  # the second sentence has 2 real source words


def _attention(cell: str = "gru", **cfg) -> Attention:
    torch.manual_seed(0)
    module = Attention(build_config({"attention": cfg}).attention, H, X, cell).double()
    with torch.no_grad():  # no parameter stays at a special value (zeros, ones) that could hide a term
        for parameter in module.parameters():
            parameter.normal_(0.0, 0.7)
    return module


def _inputs(seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(2, S, H, generator=g, dtype=torch.float64)
    queries = [torch.randn(2, H, generator=g, dtype=torch.float64) for _ in range(3)]
    init = torch.randn(2, H, generator=g, dtype=torch.float64)
    x = torch.randn(2, X, generator=g, dtype=torch.float64)
    return h, queries, init, x


# plain-Python linear algebra: no tensor op of the module is reused
def mv(matrix: list[list[float]], vector: list[float]) -> list[float]:
    return [sum(w * v for w, v in zip(row, vector)) for row in matrix]


def dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b))


def softmax(scores: list[float], real: list[bool], tau: float = 1.0) -> list[float]:
    """alpha_i = exp(e_i / tau) / sum_j exp(e_j / tau) over real words; padding gets exactly 0."""
    top = max(e / tau for e, r in zip(scores, real) if r)
    exps = [math.exp(e / tau - top) if r else 0.0 for e, r in zip(scores, real)]
    return [v / sum(exps) for v in exps]


def weighted_sum(weights: list[float], vectors: list[list[float]]) -> list[float]:
    return [sum(w * v[k] for w, v in zip(weights, vectors)) for k in range(len(vectors[0]))]


def P(module: torch.nn.Module, name: str):
    return dict(module.named_parameters())[name].tolist()


def score_oracle(
    module: Attention, kind: str, s: list[float], h: list[list[float]], coverage: list[float] | None = None
) -> list[float]:
    if kind == "dot":  # s^T h (Luong eq. 8)
        return [dot(s, hi) for hi in h]
    if kind == "key_value":  # w^T tanh(W_Y k_j + W_h k_t) (Daniluk et al.), k: each direction's first half
        W_Y, W_h, w = P(module, "score.W_Y.weight"), P(module, "score.W_h.weight"), P(module, "score.w.weight")[0]
        query = mv(W_h, s[: H // 2])
        keys = [hj[: H // 4] + hj[H // 2 : 3 * H // 4] for hj in h]
        return [dot(w, [math.tanh(a + b) for a, b in zip(mv(W_Y, k), query)]) for k in keys]
    if kind in ("general", "scaled_dot"):  # s^T W h (Luong eq. 8), / sqrt(d) (Vaswani et al.)
        W = P(module, "score.W.weight")
        scale = math.sqrt(H) if kind == "scaled_dot" else 1.0
        return [dot(s, mv(W, hi)) / scale for hi in h]
    # concat: v^T tanh(W s + U h [+ V C_j]) (Luong eq. 8 / Bahdanau; Tu et al. eq. 6 with coverage)
    W, U, v = P(module, "score.W.weight"), P(module, "score.U.weight"), P(module, "score.v.weight")[0]
    Ws = mv(W, s)
    out = []
    for j, hj in enumerate(h):
        Uh = mv(U, hj)
        V = P(module, "score.coverage_V") if coverage is not None else [0.0] * H
        cov = coverage[j] if coverage is not None else 0.0
        out.append(dot(v, [math.tanh(Ws[k] + Uh[k] + V[k] * cov) for k in range(H)]))
    return out


def values_oracle(kind: str, h: list[list[float]]) -> list[list[float]]:
    """What the context averages: h itself, or (key_value) each direction's second half."""
    return [hj[H // 4 : H // 2] + hj[3 * H // 4 :] for hj in h] if kind == "key_value" else h


def _run(module: Attention, h, queries, init, x=None):  # a GRU-style sentinel (no memory cell) at most
    memory = module.memory(h, torch.tensor(MASK))
    state = module.initial_state(memory, init)
    outputs = []
    for s in queries:
        out, state = module(s, memory, state, x)
        outputs.append((out, state))
    return outputs


@pytest.mark.parametrize("kind", ["dot", "general", "scaled_dot", "concat", "key_value"])
def test_scores_weights_and_context_match_the_formulas(kind):
    module = _attention(score=kind)
    h, queries, init, _ = _inputs()
    ((out, _),) = _run(module, h, queries[:1], init)
    for b in range(2):
        e = score_oracle(module, kind, queries[0][b].tolist(), h[b].tolist())
        alpha = softmax(e, MASK[b])
        real = [j for j in range(S) if MASK[b][j]]
        assert out.scores[b, real].tolist() == pytest.approx([e[j] for j in real], rel=1e-10, abs=1e-12)
        assert out.weights[b].tolist() == pytest.approx(alpha, rel=1e-10, abs=1e-12)
        values = values_oracle(kind, h[b].tolist())
        assert out.context[b].tolist() == pytest.approx(weighted_sum(alpha, values), rel=1e-10, abs=1e-12)


def test_fixed_temperature_divides_the_scores():
    module = _attention(score="general", temperature="fixed", tau=0.7)
    h, queries, init, _ = _inputs()
    ((out, _),) = _run(module, h, queries[:1], init)
    for b in range(2):
        e = score_oracle(module, "general", queries[0][b].tolist(), h[b].tolist())
        assert out.weights[b].tolist() == pytest.approx(softmax(e, MASK[b], tau=0.7), rel=1e-10, abs=1e-12)
        assert out.tau[b].item() == 0.7


@pytest.mark.parametrize("bias", [False, True])
def test_sact_temperature_and_context_recurrence_over_three_steps(bias):
    """tau_t = lambda^beta_t (eq. 1), beta_t = tanh(W_c c~_{t-1} + U_s s_t) (eq. 2, + b only with sact_bias),
    c~_t = sum alpha~ h (eq. 3), alpha~ = softmax(e / tau_t) (eq. 4), c~_0 = the decoder's initial state."""
    lam = 3.0
    module = _attention(score="general", temperature="sact", **{"lambda": lam, "sact_bias": bias})
    assert ("temperature.U_s.bias" in dict(module.named_parameters())) == bias
    h, queries, init, _ = _inputs()
    outputs = _run(module, h, queries, init)
    W_c, U_s = P(module, "temperature.W_c.weight")[0], P(module, "temperature.U_s.weight")[0]
    b_s = P(module, "temperature.U_s.bias")[0] if bias else 0.0
    for b in range(2):
        previous = init[b].tolist()  # c~_0
        for t, (out, state) in enumerate(outputs):
            s = queries[t][b].tolist()
            beta = math.tanh(dot(W_c, previous) + dot(U_s, s) + b_s)
            tau = lam**beta
            alpha = softmax(score_oracle(module, "general", s, h[b].tolist()), MASK[b], tau)
            context = weighted_sum(alpha, h[b].tolist())
            assert out.tau[b].item() == pytest.approx(tau, rel=1e-10)
            assert out.weights[b].tolist() == pytest.approx(alpha, rel=1e-10, abs=1e-12)
            assert out.context[b].tolist() == pytest.approx(context, rel=1e-10, abs=1e-12)
            assert state["sact"][b].tolist() == pytest.approx(context, rel=1e-10, abs=1e-12)
            previous = context


def test_coverage_enters_the_additive_score_and_accumulates():
    """Tu et al. 2016: e_tj = v^T tanh(W s_t + U h_j + V C_{t-1,j}) (eq. 6), C_tj = C_{t-1,j} + alpha_tj (eq. 7)."""
    module = _attention(score="concat", coverage=True, coverage_weight=1.0)
    h, queries, init, _ = _inputs()
    outputs = _run(module, h, queries, init)
    for b in range(2):
        coverage = [0.0] * S
        for t, (out, state) in enumerate(outputs):
            alpha = softmax(score_oracle(module, "concat", queries[t][b].tolist(), h[b].tolist(), coverage), MASK[b])
            assert out.weights[b].tolist() == pytest.approx(alpha, rel=1e-10, abs=1e-12)
            coverage = [c + a for c, a in zip(coverage, alpha)]
            assert state["coverage"][b].tolist() == pytest.approx(coverage, rel=1e-10, abs=1e-12)


def test_coverage_penalty_counts_real_words_only():
    """sum_j (1 - sum_i alpha_ij)^2 over real source words j, the sum over real target steps i."""
    g = torch.Generator().manual_seed(3)
    weights = torch.rand(2, 4, S, generator=g, dtype=torch.float64)
    src_mask = torch.tensor(MASK)
    tgt_mask = torch.tensor([[True, True, True, True], [True, True, False, False]])
    expected = 0.0
    for b in range(2):
        for j in range(S):
            if MASK[b][j]:
                attended = sum(weights[b, i, j].item() for i in range(4) if tgt_mask[b, i])
                expected += (1.0 - attended) ** 2
    assert coverage_penalty(weights, src_mask, tgt_mask).item() == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("kind, cell", [("dot", "gru"), ("dot", "lstm"), ("concat", "gru")])
def test_sentinel_gate_slot_and_mixed_context(kind, cell):
    """Li & Zhu: g = sigmoid(W_x x_i + W_t t_{i-1}) (eq. 7); s_i = g * tanh(W_s t_i) (eq. 8, GRU) or
    g * tanh(m_i) (LSTM memory cell, Lu et al.); slot W_h^T tanh(W_s s_i + U_a t_i) (eq. 10, W_s shared with
    eq. 8, U_a with the additive score); alpha^ = softmax over J + 1 (eq. 11); beta = alpha^[J+1];
    c+ = beta s + (1 - beta) c (eq. 9). t_0 is the decoder's initial state."""
    module = _attention(cell, score=kind, sentinel=True)
    assert (module.sentinel.U_a is getattr(module.score, "U", None)) == (kind == "concat")  # eq. 10 shares eq. 6's U_a
    h, queries, init, x = _inputs()
    cells = [torch.randn(2, H, dtype=torch.float64, generator=torch.Generator().manual_seed(9 + t)) for t in range(2)]
    memory = module.memory(h, torch.tensor(MASK))
    state = module.initial_state(memory, init)
    W_x, W_t, W_s = P(module, "sentinel.W_x.weight"), P(module, "sentinel.W_t.weight"), P(module, "sentinel.W_s.weight")
    U_a = P(module, "score.U.weight") if kind == "concat" else P(module, "sentinel.U_a.weight")
    W_h = P(module, "sentinel.W_h.weight")[0]
    previous = init.tolist()  # t_{i-1}
    for t in range(2):
        out, state = module(queries[t], memory, state, x, cells[t] if cell == "lstm" else None)
        for b in range(2):
            s = queries[t][b].tolist()
            gx, gt = mv(W_x, x[b].tolist()), mv(W_t, previous[b])
            g = [1 / (1 + math.exp(-(gx[k] + gt[k]))) for k in range(H)]
            inner = cells[t][b].tolist() if cell == "lstm" else mv(W_s, s)
            sentinel = [g[k] * math.tanh(inner[k]) for k in range(H)]
            a, u = mv(W_s, sentinel), mv(U_a, s)
            slot = dot(W_h, [math.tanh(a[k] + u[k]) for k in range(H)])
            alpha = softmax(score_oracle(module, kind, s, h[b].tolist()) + [slot], MASK[b] + [True])
            beta = alpha[-1]
            context = [beta * sentinel[k] + v for k, v in enumerate(weighted_sum(alpha[:-1], h[b].tolist()))]
            assert out.gate[b].item() == pytest.approx(beta, rel=1e-10)
            assert out.weights[b].tolist() == pytest.approx(alpha[:-1], rel=1e-10, abs=1e-12)
            assert out.context[b].tolist() == pytest.approx(context, rel=1e-10, abs=1e-12)
        previous = queries[t].tolist()


@pytest.mark.parametrize("readout, sentinel", [("auto", True), ("auto", False), ("sum", False), ("luong", True)])
def test_readout_is_eq_12_with_the_sentinel_and_luong_eq_5_otherwise(readout, sentinel):
    """Li & Zhu eq. 12: p = softmax(W_p (c+ + t)); Luong eq. 5-6: p = softmax(W_s tanh(W_c [c; s]))."""
    cfg = build_config(
        {
            "model": {"emb_size": 4, "hidden_size": H, "dropout": 0.0, "readout": readout},
            "attention": {"sentinel": sentinel},
        }
    )
    torch.manual_seed(0)
    decoder = Seq2Seq(cfg.model, cfg.attention, 10, 7).decoder.double()
    g = torch.Generator().manual_seed(5)
    context, s = (
        torch.randn(2, H, generator=g, dtype=torch.float64),
        torch.randn(2, H, generator=g, dtype=torch.float64),
    )
    got, _ = decoder.read_out(context, s, None)
    uses_sum = readout == "sum" or (readout == "auto" and sentinel)
    for b in range(2):
        c, q = context[b].tolist(), s[b].tolist()
        if uses_sum:
            expected = [c[k] + q[k] for k in range(H)]
        else:
            expected = [math.tanh(v) for v in mv(P(decoder, "combine.weight"), c + q)]
        assert got[b].tolist() == pytest.approx(expected, rel=1e-12)


def test_sact_with_the_sentinel_reads_the_mixed_context_of_the_last_step():
    """Neither paper defines the combination: SACT's c~_{t-1} is then what attention handed the decoder, c+_{t-1}
    (not the source-only part (1 - beta) c)."""
    lam = 4.0
    module = _attention(score="dot", temperature="sact", sentinel=True, **{"lambda": lam})
    h, queries, init, x = _inputs()
    (first, _), (second, _) = _run(module, h, queries[:2], init, x)
    W_c, U_s = P(module, "temperature.W_c.weight")[0], P(module, "temperature.U_s.weight")[0]
    for b in range(2):
        beta = math.tanh(dot(W_c, first.context[b].tolist()) + dot(U_s, queries[1][b].tolist()))
        assert second.tau[b].item() == pytest.approx(lam**beta, rel=1e-10)
