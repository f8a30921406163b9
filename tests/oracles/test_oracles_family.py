"""Oracle tests for the rest of the attention family (issue: placement, position bias, fertility, guided
alignment, intra-temporal, self-attention, bilingual symmetry), written out as plain Python from the formulas:
Cohn et al. 2016 (log position features, fertility, trace bonus), the slides' Gaussian bias (Yang et al. 2018),
Paulus et al. 2017 eq. 3, lecture 003 (guided alignment's H(A, alpha), dl4mt's conditional GRU), Bahdanau et al.
2015, and the course report's self-attention. Only the modules' learned parameters are read.
"""

from __future__ import annotations

import math

import pytest
import torch

from nmt_core.config import build_config
from nmt_core.data.alignment import alignment_matrix, guided_alignment_loss
from nmt_core.data.batches import Batch
from nmt_core.models.attention import FERTILITY_MAX, coverage_penalty
from nmt_core.models.rnn import BOS, EOS, PAD, Seq2Seq
from nmt_core.training.symmetry import reverse_batch, trace_bonus
from tests.oracles.test_oracles import (
    MASK,
    H,
    P,
    S,
    _attention,
    _inputs,
    _run,
    dot,
    mv,
    score_oracle,
    softmax,
    weighted_sum,
)

TOL = {"rel": 1e-9, "abs": 1e-12}


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


@pytest.mark.parametrize("kind", ["general", "concat"])
def test_log_position_features_over_two_steps(kind):
    """psi(j, i, I) = [log(1 + j), log(1 + i), log(1 + I)] (Cohn et al.): inside the additive score's tanh
    (+ W_p psi), added through its own tanh to a score without one (+ v_p^T tanh(W_p psi))."""
    module = _attention(score=kind, position_bias="log")
    h, queries, init, _ = _inputs()
    outputs = _run(module, h, queries[:2], init)
    W_p = P(module, "position.W_p.weight")
    for b in range(2):
        length = sum(MASK[b])
        for i, (out, _) in enumerate(outputs, start=1):
            s = queries[i - 1][b].tolist()
            psi = [[math.log(1 + j), math.log(1 + i), math.log(1 + length)] for j in range(1, S + 1)]
            if kind == "concat":
                W, U, v = P(module, "score.W.weight"), P(module, "score.U.weight"), P(module, "score.v.weight")[0]
                e = [
                    dot(v, [math.tanh(a + c + d) for a, c, d in zip(mv(W, s), mv(U, hj), mv(W_p, p))])
                    for hj, p in zip(h[b].tolist(), psi)
                ]
            else:
                v_p = P(module, "position.v_p.weight")[0]
                e = [
                    base + dot(v_p, [math.tanh(x) for x in mv(W_p, p)])
                    for base, p in zip(score_oracle(module, kind, s, h[b].tolist()), psi)
                ]
            assert out.weights[b].tolist() == pytest.approx(softmax(e, MASK[b]), **TOL)


def test_gaussian_bias_is_centred_where_the_state_says():
    """G_ij = -(j - P_i)^2 / (2 sigma_i^2), P_i = I sigmoid(v_p^T tanh(W_p s)),
    sigma_i = I sigmoid(v_d^T tanh(W_p s)) / 2."""
    module = _attention(score="dot", position_bias="gaussian", temperature="fixed", tau=1.5)
    h, queries, init, _ = _inputs()
    ((out, _),) = _run(module, h, queries[:1], init)
    W_p, v_p, v_d = (
        P(module, "position.W_p.weight"),
        P(module, "position.v_p.weight")[0],
        P(module, "position.v_d.weight")[0],
    )
    for b in range(2):
        s, length = queries[0][b].tolist(), sum(MASK[b])
        hidden = [math.tanh(x) for x in mv(W_p, s)]
        centre, sigma = length * sigmoid(dot(v_p, hidden)), length * sigmoid(dot(v_d, hidden)) / 2
        e = [dot(s, hj) - (j - centre) ** 2 / (2 * sigma**2) for j, hj in enumerate(h[b].tolist())]
        assert out.weights[b].tolist() == pytest.approx(softmax(e, MASK[b], tau=1.5), **TOL)


def test_intra_temporal_divides_by_the_past_exponentiated_scores():
    """Paulus et al. eq. 3-4: e'_ti = exp(e_ti) / sum_{j<t} exp(e_ji) (t > 1), e'_1i = exp(e_1i);
    alpha = e' / sum e'."""
    module = _attention(score="general", intra_temporal=True)
    h, queries, init, _ = _inputs()
    outputs = _run(module, h, queries, init)
    for b in range(2):
        past = [0.0] * S
        for t, (out, _) in enumerate(outputs):
            e = score_oracle(module, "general", queries[t][b].tolist(), h[b].tolist())
            penalised = [math.exp(x) / p if t else math.exp(x) for x, p in zip(e, past)]
            total = sum(v for v, real in zip(penalised, MASK[b]) if real)
            expected = [v / total if real else 0.0 for v, real in zip(penalised, MASK[b])]
            assert out.weights[b].tolist() == pytest.approx(expected, **TOL)
            past = [p + math.exp(x) for p, x in zip(past, e)]


def test_fertility_and_its_coverage_regulariser():
    """f_j = N sigmoid(W_j h_j) with N = 2; the regulariser is sum_j (f_j - sum_i alpha_ij)^2 (lecture 003)."""
    module = _attention(score="concat", coverage=True, coverage_weight=1.0, fertility=True)
    h, _, _, _ = _inputs()
    W_j = P(module, "fertility.W_j.weight")[0]
    fertility = module.fertility(h)
    weights = torch.rand(2, 2, S, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    tgt_mask = torch.tensor([[True, True], [True, False]])
    expected = 0.0
    for b in range(2):
        f = [FERTILITY_MAX * sigmoid(dot(W_j, hj)) for hj in h[b].tolist()]
        assert fertility[b].tolist() == pytest.approx(f, **TOL)
        for j in range(S):
            if MASK[b][j]:
                attended = sum(weights[b, i, j].item() for i in range(2) if tgt_mask[b, i])
                expected += (f[j] - attended) ** 2
    got = coverage_penalty(weights, torch.tensor(MASK), tgt_mask, fertility)
    assert got.item() == pytest.approx(expected, **TOL)


def test_guided_alignment_cross_entropy():
    """A_ij normalised over the source words of target word i; H = -1/T_y sum_i sum_j A_ij log alpha_ij per
    sentence, averaged over sentences."""
    links = [[(0, 0), (2, 0), (1, 1)], [(1, 0)]]
    A = alignment_matrix(links, src_len=3, tgt_len=3)
    assert A[0].tolist() == [[0.5, 0.0, 0.5], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]
    weights = torch.softmax(torch.randn(2, 3, 3, generator=torch.Generator().manual_seed(4)), -1)
    tgt_words = torch.tensor([2, 1])
    w = weights.tolist()
    first = -(0.5 * math.log(w[0][0][0]) + 0.5 * math.log(w[0][0][2]) + math.log(w[0][1][1])) / 2
    second = -math.log(w[1][0][1]) / 1
    assert guided_alignment_loss(weights, A, tgt_words).item() == pytest.approx((first + second) / 2, rel=1e-6)


def _double_model(attention: dict, **model) -> Seq2Seq:
    cfg = build_config({"model": {"emb_size": 3, "hidden_size": H, "dropout": 0.0, **model}, "attention": attention})
    torch.manual_seed(0)
    return Seq2Seq(cfg.model, cfg.attention, 10, 7).double()


def test_encoder_self_attention_adds_scaled_dot_product_context():
    """h'_i = h_i + sum_k softmax_k((W^Q h_i)^T (W^K h_k) / sqrt(H)) h_k over real words k."""
    encoder = _double_model({"self_attention": "encoder"}).encoder
    h, _, _, _ = _inputs()
    got = h + encoder.self_attention(h, h, encoder.self_attention.W_K(h), torch.tensor(MASK))
    W_Q, W_K = P(encoder, "self_attention.W_Q.weight"), P(encoder, "self_attention.W_K.weight")
    for b in range(2):
        rows = h[b].tolist()
        for i, hi in enumerate(rows):
            a = softmax([dot(mv(W_Q, hi), mv(W_K, hk)) / math.sqrt(H) for hk in rows], MASK[b])
            expected = [x + y for x, y in zip(hi, weighted_sum(a, rows))]
            assert got[b, i].tolist() == pytest.approx(expected, **TOL)


def gru_cell(module: torch.nn.GRU, x: list[float], h: list[float], suffix: str = "_l0") -> list[float]:
    """PyTorch's GRU equations: r, z = sigmoid(W x + b + U h + c); n = tanh(W_n x + b_n + r (U_n h + c_n));
    h' = (1 - z) n + z h."""
    W, U = P(module, f"weight_ih{suffix}"), P(module, f"weight_hh{suffix}")
    b, c = P(module, f"bias_ih{suffix}"), P(module, f"bias_hh{suffix}")
    n_h = len(h)
    wx, uh = [a + d for a, d in zip(mv(W, x), b)], [a + d for a, d in zip(mv(U, h), c)]
    r = [sigmoid(wx[k] + uh[k]) for k in range(n_h)]
    z = [sigmoid(wx[n_h + k] + uh[n_h + k]) for k in range(n_h)]
    n = [math.tanh(wx[2 * n_h + k] + r[k] * uh[2 * n_h + k]) for k in range(n_h)]
    return [(1 - z[k]) * n[k] + z[k] * h[k] for k in range(n_h)]


@pytest.mark.parametrize("placement", ["bahdanau", "cgru"])
def test_placement_of_attention_in_the_decoder_step(placement):
    """bahdanau: c_t = ATT(C, s_{t-1}), s_t = GRU([y_{t-1}; c_t], s_{t-1}); cgru: s'_t = GRU_1(y_{t-1}, s_{t-1}),
    c_t = ATT(C, s'_t), s_t = GRU_2(c_t, s'_t); then h~_t = tanh(W_c [c_t; s_t]) and logits W_o h~_t + b."""
    decoder = _double_model({"score": "dot", "placement": placement}, cell="gru").decoder
    with torch.no_grad():
        for parameter in decoder.parameters():
            parameter.normal_(0.0, 0.7)
    h, _, init, _ = _inputs()
    memory = decoder.attention.memory(h, torch.tensor(MASK))
    state = decoder.initial_state(init, memory)
    y = torch.tensor([4, 5])
    logits, _, out = decoder.step(y, state, memory)
    for b in range(2):
        s_prev = [
            math.tanh(a + c)
            for a, c in zip(mv(P(decoder, "bridge.weight"), init[b].tolist()), P(decoder, "bridge.bias"))
        ]  # s_0 = tanh(W_b h + b_b)
        emb = P(decoder, "embed.weight")[y[b].item()]
        rows = h[b].tolist()
        if placement == "bahdanau":
            alpha = softmax([dot(s_prev, hj) for hj in rows], MASK[b])
            c = weighted_sum(alpha, rows)
            s = gru_cell(decoder.rnn, emb + c, s_prev)
        else:
            s_prime = gru_cell(decoder.rnn, emb, s_prev)
            alpha = softmax([dot(s_prime, hj) for hj in rows], MASK[b])
            c = weighted_sum(alpha, rows)
            s = gru_cell(decoder.rnn2, c, s_prime)
        h_tilde = [math.tanh(v) for v in mv(P(decoder, "combine.weight"), c + s)]
        expected = [a + d for a, d in zip(mv(P(decoder, "output.weight"), h_tilde), P(decoder, "output.bias"))]
        assert out.weights[b].tolist() == pytest.approx(alpha, **TOL)
        assert logits[b].tolist() == pytest.approx(expected, **TOL)


def test_decoder_self_attention_reads_out_the_past_states():
    """d_t = sum_{k<t} softmax_k((W^Q s_t)^T (W^K s_k) / sqrt(H)) s_k over s_0..s_{t-1};
    h~_t = tanh(W_c [c_t; d_t; s_t])."""
    decoder = _double_model({"self_attention": "decoder"}).decoder
    _, queries, _, _ = _inputs()
    context, past_states = queries[2], [queries[0], queries[1]]
    keys = torch.stack([decoder.self_attention.W_K(q) for q in past_states], 1)
    got, (states, _) = decoder.read_out(context, queries[1] * 0.5, (torch.stack(past_states, 1), keys))
    W_Q, W_K, W_c = (
        P(decoder, n) for n in ("self_attention.W_Q.weight", "self_attention.W_K.weight", "combine.weight")
    )
    for b in range(2):
        s = (queries[1][b] * 0.5).tolist()
        past = [q[b].tolist() for q in past_states]
        a = softmax([dot(mv(W_Q, s), mv(W_K, k)) / math.sqrt(H) for k in past], [True, True])
        d = weighted_sum(a, past)
        assert got[b].tolist() == pytest.approx([math.tanh(v) for v in mv(W_c, context[b].tolist() + d + s)], **TOL)
        assert states[b, -1].tolist() == pytest.approx(s, **TOL)  # s_t joins the past for the next step


def test_reverse_batch_and_trace_bonus():
    """The reverse batch reads target words as source and source words between <s> and </s>; the trace bonus is
    B = sum_i sum_j alpha^{s->t}_ij alpha^{s<-t}_ji over real words only."""
    src = torch.tensor([[5, 6, 7], [8, 9, PAD]])
    tgt_out = torch.tensor([[10, 11, EOS], [12, EOS, PAD]])
    batch = Batch(
        src,
        torch.tensor([3, 2]),
        torch.tensor([[BOS, 10, 11], [BOS, 12, PAD]]),
        tgt_out,
        [0, 1],
        5,
        torch.tensor([3, 2]),
    )
    back = reverse_batch(batch)
    assert back.src.tolist() == [[10, 11, PAD], [12, PAD, PAD]] and back.src_lengths.tolist() == [2, 1]
    assert back.tgt_in.tolist() == [[BOS, 5, 6, 7], [BOS, 8, 9, PAD]]
    assert back.tgt_out.tolist() == [[5, 6, 7, EOS], [8, 9, EOS, PAD]] and back.n_tokens == 7
    g = torch.Generator().manual_seed(6)
    forward, backward = torch.rand(2, 3, 3, generator=g), torch.rand(2, 4, 3, generator=g)
    expected = sum(
        forward[b, i, j].item() * backward[b, j, i].item()
        for b, (n_tgt, n_src) in enumerate([(2, 3), (1, 2)])
        for i in range(n_tgt)
        for j in range(n_src)
    )
    assert trace_bonus(forward, backward, batch).item() == pytest.approx(expected, rel=1e-6)
