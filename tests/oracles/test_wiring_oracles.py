"""Wiring oracles: the whole model (encoder, decoder, attention) against the papers' equations, step by step.

The oracles in test_oracles.py and test_oracles_family.py call one module with inputs the test chooses, so they
cannot see how the parts are wired: which state reaches SACT as c~_0, what the cGRU carries to the next step,
whether the encoder keeps its residual, what guided alignment divides by, how beam search ranks. Here a tiny
float64 Seq2Seq with random weights reads several sentences of different lengths for at least three target
steps, and a plain-Python re-computation from its own parameters (read by name) follows Luong et al. 2015
(eq. 5-8, input feeding), SACT (Lin et al. 2018, eq. 1-4), Li & Zhu 2017 (eq. 7-12; the LSTM sentinel from the
memory cell, Lu et al. 2017), the slides' Gaussian bias (Yang et al. 2018), dl4mt's conditional GRU and guided
alignment (lecture 003), fertility (Tu et al. 2016, N = 2) and the course report's self-attention (report 004).
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from nmt_core.config import build_config
from nmt_core.data.batches import Example, collate
from nmt_core.models.rnn import BOS, EOS, Seq2Seq
from nmt_core.training.decode import beam_search
from nmt_core.training.train import batch_loss
from tests.oracles.test_oracles import P, dot, mv, softmax, weighted_sum
from tests.oracles.test_oracles_family import gru_cell, sigmoid

H, E, V_SRC, V_TGT = 4, 3, 9, 6  # hidden size, embedding size, vocabularies (ids 0-3 are <pad> <unk> <s> </s>)
SOURCES = [[4, 5, 6, 7], [8, 4], [6, 7, 5]]
TARGETS = [[4, 5, 4], [5, 4, 5, 4], [4]]  # target words T_y = 3, 4, 1: no sentence has as many as its source
LINKS = [[(0, 0), (2, 0), (1, 1), (3, 2)], [(0, 0), (1, 1), (1, 2), (0, 3)], [(2, 0)]]  # (source, target)
TOL = {"rel": 1e-9, "abs": 1e-12}


def _config(attention: dict, model: dict | None = None, **sections):
    return build_config(
        {
            "model": {"emb_size": E, "hidden_size": H, "dropout": 0.0, **(model or {})},
            "attention": attention,
            **sections,
        }
    )


def _model(cfg) -> Seq2Seq:
    torch.manual_seed(0)
    model = Seq2Seq(cfg.model, cfg.attention, V_SRC, V_TGT).double()
    with torch.no_grad():  # no parameter stays at a special value (zeros, ones) that could hide a term
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.7)
    return model.eval()


def _batch(links: bool = False):
    examples = [Example(s, t, link if links else None) for s, t, link in zip(SOURCES, TARGETS, LINKS)]
    return collate(examples, list(range(len(examples))))


# ---- the model, written out: plain Python over the model's own parameters ---------------------------------


def lstm_cell(
    module: nn.LSTM, x: list[float], h: list[float], m: list[float], suffix: str = "_l0"
) -> tuple[list[float], list[float]]:
    """PyTorch's LSTM equations: i, f, g, o = W x + b + U h + c (sigmoid, sigmoid, tanh, sigmoid);
    m' = f m + i g; h' = o tanh(m')."""
    z = [
        a + b + c + d
        for a, b, c, d in zip(
            mv(P(module, f"weight_ih{suffix}"), x),
            P(module, f"bias_ih{suffix}"),
            mv(P(module, f"weight_hh{suffix}"), h),
            P(module, f"bias_hh{suffix}"),
        )
    ]
    n = len(h)
    m_next = [sigmoid(z[n + k]) * m[k] + sigmoid(z[k]) * math.tanh(z[2 * n + k]) for k in range(n)]
    return [sigmoid(z[3 * n + k]) * math.tanh(m_next[k]) for k in range(n)], m_next


def recur(rnn: nn.Module, x: list[float], s: list[float], m: list[float]) -> tuple[list[float], list[float]]:
    """One step of a one-layer decoder RNN: (s_t, memory cell m_t; the GRU has none and keeps m)."""
    return lstm_cell(rnn, x, s, m) if isinstance(rnn, nn.LSTM) else (gru_cell(rnn, x, s), m)


def encoder_oracle(model: Seq2Seq, src: list[int]) -> tuple[list[list[float]], list[float]]:
    """h_i = [h->_i; h<-_i] over the real words only, with self-attention h_i + sum_k a_ik h_k,
    a_ik = softmax_k((W^Q h_i)^T (W^K h_k) / sqrt(H)) (report 004); and the final state [h->_n; h<-_1]."""
    encoder = model.encoder
    embedded = [P(encoder, "embed.weight")[w] for w in src]
    forward, backward = [], []
    h = m = [0.0] * (H // 2)
    for x in embedded:
        h, m = lstm_cell(encoder.rnn, x, h, m)
        forward.append(h)
    h = m = [0.0] * (H // 2)
    for x in reversed(embedded):
        h, m = lstm_cell(encoder.rnn, x, h, m, "_l0_reverse")
        backward.insert(0, h)
    states = [f + b for f, b in zip(forward, backward)]
    final = forward[-1] + backward[0]
    if encoder.self_attention is not None:
        W_Q, W_K = P(encoder, "self_attention.W_Q.weight"), P(encoder, "self_attention.W_K.weight")
        real = [True] * len(states)
        states = [
            [
                x + y
                for x, y in zip(
                    hi,
                    weighted_sum(
                        softmax([dot(mv(W_Q, hi), mv(W_K, hk)) / math.sqrt(H) for hk in states], real), states
                    ),
                )
            ]
            for hi in states
        ]
    return states, final


def initial_state(model: Seq2Seq, final: list[float]) -> dict[str, list[float]]:
    """s_0 = tanh(W_b [h->_n; h<-_1] + b); SACT's c~_0 and the sentinel's t_0 are s_0; m_0 = 0, h~_0 = 0; the
    first target position i is 1."""
    decoder = model.decoder
    s_0 = [math.tanh(a + b) for a, b in zip(mv(P(decoder, "bridge.weight"), final), P(decoder, "bridge.bias"))]
    return {"s": s_0, "m": [0.0] * H, "feed": [0.0] * H, "sact": s_0, "t": s_0, "i": 1}


def attend(
    model: Seq2Seq, h: list[list[float]], s: list[float], state: dict, x: list[float] | None, m: list[float]
) -> dict:
    """Dot attention from s over the real source words: e_j = s^T h_j (L eq. 8), + G_j (the Gaussian bias) or
    + v_p^T tanh(W_p psi(j, i, I)) (the log features);
    SACT: softmax(e / tau_t), tau_t = lambda^beta_t, beta_t = tanh(W_c c~_{t-1} + U_s s_t) (S eq. 1, 2, 4);
    the sentinel's slot joins that softmax (A eq. 7-11). tau divides every logit: the bias and the slot too."""
    attention = model.decoder.attention
    cfg = attention.cfg
    e = [dot(s, hj) for hj in h]
    if cfg.position_bias == "gaussian":
        hidden = [math.tanh(v) for v in mv(P(attention, "position.W_p.weight"), s)]
        centre = len(h) * sigmoid(dot(P(attention, "position.v_p.weight")[0], hidden))  # P_i (Y eq. 8)
        sigma = len(h) * sigmoid(dot(P(attention, "position.v_d.weight")[0], hidden)) / 2  # D_i / 2 (Y eq. 9)
        e = [ej - (j - centre) ** 2 / (2 * sigma**2) for j, ej in enumerate(e)]  # + G_ij (Y eq. 10)
    if cfg.position_bias == "log":  # psi(j, i, I) = [log(1 + j), log(1 + i), log(1 + I)], j and i from 1 (Cohn)
        W_p, v_p = P(attention, "position.W_p.weight"), P(attention, "position.v_p.weight")[0]
        psi = [[math.log(1 + j), math.log(1 + state["i"]), math.log(1 + len(h))] for j in range(1, len(h) + 1)]
        e = [ej + dot(v_p, [math.tanh(v) for v in mv(W_p, features)]) for ej, features in zip(e, psi)]
    tau = None
    if cfg.temperature == "sact":
        W_c, U_s = P(attention, "temperature.W_c.weight")[0], P(attention, "temperature.U_s.weight")[0]
        tau = cfg.lambda_ ** math.tanh(dot(W_c, state["sact"]) + dot(U_s, s))
    logits = [ej / (tau or 1.0) for ej in e]
    if cfg.sentinel:  # g = sigmoid(W_x x_t + W_t t_{t-1}), s~ = g tanh(m_t), slot W_h^T tanh(W_s s~ + U_a s_t)
        gx, gt = mv(P(attention, "sentinel.W_x.weight"), x), mv(P(attention, "sentinel.W_t.weight"), state["t"])
        sentinel = [sigmoid(gx[k] + gt[k]) * math.tanh(m[k]) for k in range(H)]
        a, u = mv(P(attention, "sentinel.W_s.weight"), sentinel), mv(P(attention, "sentinel.U_a.weight"), s)
        slot = dot(P(attention, "sentinel.W_h.weight")[0], [math.tanh(a[k] + u[k]) for k in range(H)])
        logits.append(slot / (tau or 1.0))
    alpha = softmax(logits, [True] * len(logits))
    context = weighted_sum(alpha[: len(h)], h)
    gate = None
    if cfg.sentinel:  # beta = alpha[J + 1]; c+ = beta s~ + sum_j alpha_j h_j (A eq. 9)
        gate = alpha[-1]
        context = [c + gate * v for c, v in zip(context, sentinel)]
    return {"weights": alpha[: len(h)], "tau": tau, "gate": gate, "context": context}


def step_oracle(model: Seq2Seq, h: list[list[float]], state: dict, y: int) -> tuple[list[float], dict, dict]:
    """One target step from y_{t-1}: luong with input feeding, s_t = LSTM([y_{t-1}; h~_{t-1}], s_{t-1}),
    c_t = ATT(C, s_t) (L sec. 3.3); cgru: s'_t = RNN_1(y_{t-1}, s_{t-1}), c_t = ATT(C, s'_t),
    s_t = RNN_2(c_t, s'_t), and the next step starts from s_t. Readout h~_t = tanh(W_c [c_t; s_t]) (L eq. 5) or
    c+_t + s_t with the sentinel (A eq. 12); logits W_o h~_t + b."""
    decoder, cfg = model.decoder, model.decoder.attention.cfg
    embedded = P(decoder, "embed.weight")[y]
    if cfg.placement == "cgru":
        s_prime, m = recur(decoder.rnn, embedded, state["s"], state["m"])
        out = attend(model, h, s_prime, state, None, m)
        s, m = recur(decoder.rnn2, out["context"], s_prime, m)
    else:
        x = embedded + state["feed"]
        s, m = recur(decoder.rnn, x, state["s"], state["m"])
        out = attend(model, h, s, state, x, m)
    c = out["context"]
    if cfg.sentinel:
        h_tilde = [a + b for a, b in zip(c, s)]
    else:
        h_tilde = [math.tanh(v) for v in mv(P(decoder, "combine.weight"), c + s)]
    logits = [a + b for a, b in zip(mv(P(decoder, "output.weight"), h_tilde), P(decoder, "output.bias"))]
    return logits, {"s": s, "m": m, "feed": h_tilde, "sact": c, "t": s, "i": state["i"] + 1}, out


def teacher_forced_oracle(model: Seq2Seq, src: list[int], tgt_in: list[int]) -> list[tuple[list[float], dict]]:
    h, final = encoder_oracle(model, src)
    state, steps = initial_state(model, final), []
    for y in tgt_in:
        logits, state, out = step_oracle(model, h, state, y)
        steps.append((logits, out))
    return steps


def log_softmax(logits: list[float]) -> list[float]:
    top = max(logits)
    log_total = top + math.log(sum(math.exp(v - top) for v in logits))
    return [v - log_total for v in logits]


# ---- the tests ------------------------------------------------------------------------------------------

WIRINGS = {
    "sact: c~_0 = s_0, then c~_t carried": ({"score": "dot", "temperature": "sact", "lambda": 3.0}, {}),
    "sentinel with sact: slot / tau, gate": ({"score": "dot", "temperature": "sact", "sentinel": True}, {}),
    "gaussian bias with sact: (e + G) / tau": (
        {"score": "dot", "temperature": "sact", "position_bias": "gaussian"},
        {},
    ),
    "log position features with sact: (e + v_p^T tanh(W_p psi)) / tau": (
        {"score": "dot", "temperature": "sact", "position_bias": "log"},
        {},
    ),
    "cgru carries s_t": ({"score": "dot", "placement": "cgru"}, {"cell": "gru"}),
    "encoder self-attention with residual": ({"score": "dot", "self_attention": "encoder"}, {}),
}


@pytest.mark.parametrize("attention, model", WIRINGS.values(), ids=WIRINGS.keys())
def test_teacher_forced_model_follows_the_equations(attention, model):
    """Logits, attention weights, tau_t and the sentinel gate of every real target step of every sentence."""
    seq2seq = _model(_config(attention, model))
    batch = _batch()
    logits, trace = seq2seq(batch.src, batch.src_lengths, batch.tgt_in)
    assert batch.tgt_in.size(1) >= 4  # at least three steps carry state from one to the next
    for b, (src, tgt) in enumerate(zip(SOURCES, TARGETS)):
        for t, (expected, out) in enumerate(teacher_forced_oracle(seq2seq, src, [BOS] + tgt)):
            assert trace.weights[b, t, : len(src)].tolist() == pytest.approx(out["weights"], **TOL)
            assert logits[b, t].tolist() == pytest.approx(expected, **TOL)
            if out["tau"] is not None:
                assert trace.tau[b, t].item() == pytest.approx(out["tau"], **TOL)
            if out["gate"] is not None:
                assert trace.gate[b, t].item() == pytest.approx(out["gate"], **TOL)


def test_fertility_of_every_source_word_of_the_model():
    """f_j = N sigmoid(W_j h_j) with N = 2 (Tu et al. 2016 eq. 11, lecture 003), h_j the encoder's states."""
    n_max = 2.0
    seq2seq = _model(_config({"score": "concat", "coverage": True, "coverage_weight": 1.0, "fertility": True}))
    batch = _batch()
    _, trace = seq2seq(batch.src, batch.src_lengths, batch.tgt_in)
    W_j = P(seq2seq, "decoder.attention.fertility.W_j.weight")[0]
    for b, src in enumerate(SOURCES):
        h, _ = encoder_oracle(seq2seq, src)
        assert trace.fertility[b, : len(src)].tolist() == pytest.approx(
            [n_max * sigmoid(dot(W_j, hj)) for hj in h], **TOL
        )


def test_guided_alignment_divides_by_the_target_words():
    """loss = -1/N sum log p(y_t) over the N target tokens (</s> included) + w H(A, alpha), with
    H(A, alpha) = -1/T_y sum_i sum_j A_ij log alpha_ij per sentence (lecture 003), T_y the sentence's target words
    (no </s>), averaged over sentences; A_ij = 1 / (links of target word i) on its linked source words."""
    weight = 0.5
    cfg = _config(
        {"score": "dot"}, data={"corpus": "bible-grc-en", "tokenizer": "space"}, train={"guided_alignment": weight}
    )
    seq2seq = _model(cfg)
    loss, _ = batch_loss(seq2seq, _batch(links=True), cfg)
    cross_entropy, guided, n_tokens = 0.0, 0.0, 0
    for src, tgt, links in zip(SOURCES, TARGETS, LINKS):
        steps = teacher_forced_oracle(seq2seq, src, [BOS] + tgt)
        for (logits, _), y in zip(steps, tgt + [EOS]):
            cross_entropy -= log_softmax(logits)[y]
            n_tokens += 1
        t_y = len(tgt)
        for i in range(t_y):
            linked = [j for j, target in links if target == i]
            guided -= sum(math.log(steps[i][1]["weights"][j]) for j in linked) / len(linked) / t_y
    expected = cross_entropy / n_tokens + weight * guided / len(SOURCES)
    assert loss.item() == pytest.approx(expected, rel=1e-6)  # H(A, alpha) is computed in float32


def test_beam_search_picks_by_the_length_normalised_score():
    """Beam search returns argmax over hypotheses y of log p(y) / |y| ** length_penalty (|y| with </s>). Beams as
    wide as every hypothesis of at most `steps` tokens make it exact, so the oracle enumerates them all."""
    length_penalty, steps = 1.0, 3
    cfg = _config(
        {"score": "dot"}, decode={"length_penalty": length_penalty, "max_len_ratio": 0.01, "max_len_offset": steps}
    )
    seq2seq = _model(cfg)
    batch = _batch()
    got = beam_search(seq2seq, batch, cfg.decode, beam_size=V_TGT**steps)
    picks_differ = False
    for b, src in enumerate(SOURCES):
        h, final = encoder_oracle(seq2seq, src)
        finished = []  # (log p, tokens without </s>)

        def expand(state: dict, y: int, prefix: list[int], log_p: float) -> None:
            logits, state, _ = step_oracle(seq2seq, h, state, y)  # noqa: B023 (recursion within one sentence)
            for word, log_q in enumerate(log_softmax(logits)):
                if word == EOS:
                    finished.append((log_p + log_q, prefix))  # noqa: B023
                elif len(prefix) + 1 < steps:
                    expand(state, word, prefix + [word], log_p + log_q)

        expand(initial_state(seq2seq, final), BOS, [], 0.0)
        ranked = sorted(
            ((log_p / (len(tokens) + 1) ** length_penalty, tokens) for log_p, tokens in finished), reverse=True
        )
        assert ranked[0][0] - ranked[1][0] > 1e-4  # no near tie that float32 could flip
        assert got[b].tokens == ranked[0][1]
        assert got[b].score == pytest.approx(ranked[0][0], rel=1e-5)
        picks_differ |= max(finished)[1] != ranked[0][1]
    assert picks_differ  # without normalisation some sentence would get another translation
