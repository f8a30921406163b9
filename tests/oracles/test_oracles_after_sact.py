"""Oracle tests for the mechanisms that followed SACT (issue 72), written out as plain Python from their papers'
formulas and reading only the modules' learned parameters (never a constant of the code under test):

- SACT with a learned base scale, tau_t = tau_0 lambda^tanh(W_c c~_{t-1} + U_s s_t) (Lin et al. 2018 eqs. 1-2 times
  tau_0), in the RNN and in a Transformer head whose beta reads its own tempered context at i - 1;
- SACT's released code: tau_t = e^tanh(MLP([c~_{t-1}; s_t]));
- Scalable-Softmax (Nakanishi 2025): p = softmax(s log(n) z), and its fixed control s = 1 / log(n_train);
- the selective query temperature (Zhang et al. 2024): logits times 1 + sigmoid(a) log n + tanh(w^T x);
- Gemma 2's soft-capping z <- c tanh(z / c);
- alpha-entmax (Peters et al. 2019; Correia et al. 2019), fixed and learned alpha: [(alpha - 1) z - t]_+^(1 / (alpha
  - 1)) with t found here by its own bisection, and sparsemax (alpha = 2) by its sort-based closed form (Martins and
  Astudillo 2016), an algorithm that shares nothing with the module's;
- the entropy sharpening at decoding (Velickovic et al. 2024): beta = max(poly(H), 1) where H exceeds the threshold.

Gradients: torch.autograd.gradcheck (float64) of alpha-entmax in z and alpha and of a Transformer block in each new
part's parameters, and autograd against central differences of the plain-loop oracles.
"""

from __future__ import annotations

import math

import pytest
import torch

from nmt_core.config import ConfigError, build_config
from nmt_core.models.attention import Attention, EntmaxBisect, decoding, masked_entmax, plain_decoding
from nmt_core.models.build import build_model
from nmt_core.models.multihead import BlockParts
from nmt_core.models.rnn import DecoderTrace
from nmt_core.training.diagnostic_keys import KEYS as DIAGNOSTIC_KEYS
from nmt_core.training.diagnostics import AttentionDiagnostics
from nmt_core.training.train import batch_loss
from sweeper.space.spec import variant_label
from tests.conftest import tiny_config
from tests.oracles.test_oracles import MASK, H, P, X, _attention, _inputs, _run, dot, mv, softmax, weighted_sum
from tests.oracles.test_transformer import HEADS, SIZE, _batch, block, head

TOL = {"rel": 1e-9, "abs": 1e-12}
POLYNOMIAL = (-0.037, 0.481, -2.3, 4.917, -1.791)  # Velickovic et al. 2024's code: beta of the entropy H


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def entmax(z: list[float], real: list[bool], alpha: float) -> list[float]:
    """alpha-entmax from its definition: p_i = [(alpha - 1) z_i - t]_+^(1 / (alpha - 1)) over the real keys, t such
    that the p_i sum to 1, found by halving [max - 1, max] 200 times (the sum falls as t grows)."""
    x = [(alpha - 1) * v for v, r in zip(z, real) if r]
    low, high = max(x) - 1, max(x)
    for _ in range(200):
        middle = (low + high) / 2
        if sum(max(v - middle, 0.0) ** (1 / (alpha - 1)) for v in x) >= 1:
            low = middle
        else:
            high = middle
    p = iter([max(v - low, 0.0) ** (1 / (alpha - 1)) for v in x])
    out = [next(p) if r else 0.0 for r in real]
    return [v / sum(out) for v in out]


def sparsemax(z: list[float], real: list[bool]) -> list[float]:
    """Martins and Astudillo 2016 (alg. 1): sort, k(z) = max{k: 1 + k z_(k) > sum_{j<=k} z_(j)}, t = (sum_{j<=k}
    z_(j) - 1) / k, p = [z - t]_+."""
    ranked = sorted((v for v, r in zip(z, real) if r), reverse=True)
    k = max(k for k in range(1, len(ranked) + 1) if 1 + k * ranked[k - 1] > sum(ranked[:k]))
    t = (sum(ranked[:k]) - 1) / k
    return [max(v - t, 0.0) if r else 0.0 for v, r in zip(z, real)]


def sharpened(z: list[float], real: list[bool], threshold: float) -> list[float]:
    """softmax(beta z), beta = max(poly(H), 1) if the entropy H of softmax(z) exceeds the threshold, else 1."""
    p = softmax(z, real)
    entropy = -sum(v * math.log(v) for v in p if v > 0)
    fit = sum(c * entropy ** (len(POLYNOMIAL) - 1 - k) for k, c in enumerate(POLYNOMIAL))
    beta = max(fit, 1.0) if entropy > threshold else 1.0
    return softmax([beta * v for v in z], real)


def capped_share(logits: list[float], real: list[bool], cap: float) -> float:
    return sum(abs(v) > cap for v, r in zip(logits, real) if r) / sum(real)


def real_keys(b: int) -> int:
    return sum(MASK[b])


# ---- the RNN's attention step, one sentence and step at a time ----------------------------------------------------


def rnn_steps(module, steps: int = 3, x=None):
    h, queries, init, _ = _inputs()
    return h, queries[:steps], init, _run(module, h, queries[:steps], init, x)


@pytest.mark.parametrize("learned", [True, False], ids=["ssmax", "ssmax_fixed"])
def test_scalable_softmax_scales_the_logits_by_s_log_n(learned):
    """p = softmax(s log(n) z), n the sentence's real source words; the fixed control's s = 1 / log(n_train)."""
    module = _attention(score="dot", temperature="ssmax" if learned else "ssmax_fixed", train_keys=7)
    h, queries, _, outputs = rnn_steps(module)
    s = P(module, "temperature.scale")[0] if learned else 1 / math.log(7)
    for t, (out, _) in enumerate(outputs):
        for b in range(2):
            scale = s * math.log(real_keys(b))
            e = [scale * dot(queries[t][b].tolist(), hj) for hj in h[b].tolist()]
            assert out.weights[b].tolist() == pytest.approx(softmax(e, MASK[b]), **TOL)
            assert out.tau[b].item() == pytest.approx(1 / scale, **TOL)
            assert out.observed["log_n_scale"][b].item() == pytest.approx(scale, **TOL)


def test_selective_temperature_reads_the_query_and_the_number_of_keys():
    """logits times 1 + sigmoid(a) log n + tanh(w^T s_t) (Zhang et al. 2024's tau_pos + tau_tok)."""
    module = _attention(score="dot", temperature="selective")
    h, queries, _, outputs = rnn_steps(module)
    a, w = P(module, "temperature.a")[0], P(module, "temperature.w.weight")[0]
    for t, (out, _) in enumerate(outputs):
        for b in range(2):
            s = queries[t][b].tolist()
            beta = 1 + sigmoid(a) * math.log(real_keys(b)) + math.tanh(dot(w, s))
            assert out.weights[b].tolist() == pytest.approx(
                softmax([beta * dot(s, hj) for hj in h[b].tolist()], MASK[b]), **TOL
            )
            assert out.tau[b].item() == pytest.approx(1 / beta, **TOL)


@pytest.mark.parametrize("base", [True, False], ids=["base", "no-base"])
def test_sact_with_a_base_scale_over_three_steps(base):
    """tau_t = tau_0 lambda^tanh(W_c c~_{t-1} + U_s s_t), c~_0 = s_0, c~_t the step's context; tau_0 = 1 without."""
    module = _attention(score="dot", temperature="sact", sact_base=base, **{"lambda": 3.0})
    h, queries, init, outputs = rnn_steps(module)
    W_c, U_s = P(module, "temperature.W_c.weight")[0], P(module, "temperature.U_s.weight")[0]
    tau_0 = math.exp(P(module, "temperature.log_tau0")[0]) if base else 1.0
    previous = init.tolist()
    for t, (out, _) in enumerate(outputs):
        contexts = []
        for b in range(2):
            s = queries[t][b].tolist()
            modulation = 3.0 ** math.tanh(dot(W_c, previous[b]) + dot(U_s, s))
            tau = tau_0 * modulation
            alpha = softmax([dot(s, hj) for hj in h[b].tolist()], MASK[b], tau)
            assert out.tau[b].item() == pytest.approx(tau, **TOL)
            assert out.weights[b].tolist() == pytest.approx(alpha, **TOL)
            if base:
                assert out.observed["tau_modulation"][b].item() == pytest.approx(modulation, **TOL)
            contexts.append(weighted_sum(alpha, h[b].tolist()))
        previous = contexts


def test_the_released_codes_sact_is_e_to_the_tanh_of_a_two_layer_mlp():
    """tau_t = e^tanh(W_2 tanh(W_1 [c~_{t-1}; s_t] + b_1) + b_2), c~_0 = s_0, over three steps."""
    model = {"input_feeding": False, "encoder_merge": "sum"}  # what the declaration asks with it
    torch.manual_seed(0)
    cfg = build_config({"model": model, "attention": {"score": "dot", "temperature": "sact_released"}})
    module = Attention(cfg.attention, H, X, "gru").double()
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.normal_(0.0, 0.7)
    h, queries, init, outputs = rnn_steps(module)
    W_1, b_1 = P(module, "temperature.mlp.0.weight"), P(module, "temperature.mlp.0.bias")
    W_2, b_2 = P(module, "temperature.mlp.2.weight")[0], P(module, "temperature.mlp.2.bias")[0]
    previous = init.tolist()
    for t, (out, _) in enumerate(outputs):
        contexts = []
        for b in range(2):
            s = queries[t][b].tolist()
            hidden = [math.tanh(v + c) for v, c in zip(mv(W_1, previous[b] + s), b_1)]
            tau = math.e ** math.tanh(dot(W_2, hidden) + b_2)
            alpha = softmax([dot(s, hj) for hj in h[b].tolist()], MASK[b], tau)
            assert out.tau[b].item() == pytest.approx(tau, **TOL)
            assert out.weights[b].tolist() == pytest.approx(alpha, **TOL)
            contexts.append(weighted_sum(alpha, h[b].tolist()))
        previous = contexts


def test_soft_capping_bounds_the_tempered_logits():
    """z <- c tanh(z / c) after the temperature (z = e / tau); capped: the share of real logits with |z| > c."""
    module = _attention(score="dot", temperature="fixed", tau=0.5, softcap=True, cap=1.5)
    h, queries, _, outputs = rnn_steps(module)
    shares = []
    for t, (out, _) in enumerate(outputs):
        for b in range(2):
            z = [dot(queries[t][b].tolist(), hj) / 0.5 for hj in h[b].tolist()]
            capped = [1.5 * math.tanh(v / 1.5) for v in z]
            assert out.weights[b].tolist() == pytest.approx(softmax(capped, MASK[b]), **TOL)
            shares.append(capped_share(z, MASK[b], 1.5))
            assert out.observed["capped"][b].item() == pytest.approx(shares[-1], rel=1e-6)  # a float32 share
    assert 0 < sum(shares) < len(shares)  # the cap acts on some logits, not all


@pytest.mark.parametrize("normaliser", ["entmax", "entmax_learned"])
def test_alpha_entmax_weights_and_their_exact_zeros(normaliser):
    """alpha-entmax of the dot scores, alpha fixed (1.5) or 1 + sigmoid(a) (learned); zeros: the share of real
    keys at exactly 0."""
    module = _attention(score="dot", normaliser=normaliser, alpha=1.5)
    h, queries, _, outputs = rnn_steps(module)
    alpha = 1 + sigmoid(P(module, "normaliser.a")[0]) if normaliser == "entmax_learned" else 1.5
    zeros = []
    for t, (out, _) in enumerate(outputs):
        for b in range(2):
            z = [dot(queries[t][b].tolist(), hj) for hj in h[b].tolist()]
            expected = entmax(z, MASK[b], alpha)
            assert out.weights[b].tolist() == pytest.approx(expected, rel=1e-7, abs=1e-10)
            zeros.append(sum(v == 0 and r for v, r in zip(expected, MASK[b])) / real_keys(b))
            assert out.observed["zeros"][b].item() == pytest.approx(zeros[-1])
            if normaliser == "entmax_learned":
                assert out.observed["alpha"][b].item() == pytest.approx(alpha, **TOL)
    assert 0 < sum(zeros)  # sparse: some real key gets exactly 0


def test_entmax_at_alpha_two_is_sparsemax():
    """An algorithm that shares nothing with the bisection: sparsemax's sort-based closed form."""
    g = torch.Generator().manual_seed(5)
    z = torch.randn(6, 7, generator=g, dtype=torch.float64) * 2
    keep = torch.ones(6, 7, dtype=torch.bool)
    keep[3:, 5:] = False
    p = masked_entmax(z, keep, torch.tensor(2.0, dtype=torch.float64))
    for row in range(6):
        real = keep[row].tolist()
        assert p[row].tolist() == pytest.approx(sparsemax(z[row].tolist(), real), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("threshold", [0.5, 0.95])  # the rows' entropies: 0.0 to 1.0, poly(H) > 1 from H ~ 0.85
def test_entropy_sharpening_acts_when_decoding_only(threshold):
    """In decoding, softmax(beta z) with beta = max(poly(H), 1) where H > threshold; elsewhere the plain softmax."""
    module = _attention(score="dot", entropy_sharpening=True, entropy_threshold=threshold).eval()
    h, queries, init, _ = _inputs()

    def expected(rule):
        return [[rule([dot(q[b].tolist(), hj) for hj in h[b].tolist()], MASK[b]) for b in range(2)] for q in queries]

    plain = expected(softmax)
    sharp = expected(lambda z, real: sharpened(z, real, threshold))
    assert sharp != plain  # some row is sharpened
    for mode, rows in ((None, plain), (decoding, sharp)):
        if mode is None:
            outputs = _run(module, h, queries, init)
        else:
            with mode(module):
                outputs = _run(module, h, queries, init)
        for (out, _), step in zip(outputs, rows):
            assert out.weights.tolist() == [pytest.approx(row, **TOL) for row in step]
    with decoding(module), plain_decoding(module):  # the control: the same weights decoded plainly
        for (out, _), step in zip(_run(module, h, queries, init), plain):
            assert out.weights.tolist() == [pytest.approx(row, **TOL) for row in step]


def test_a_model_with_entropy_sharpening_trains_as_the_model_without_it():
    """Training and the dev loss never see it: the same loss and gradients, bit for bit."""
    losses = []
    for sharpening in (False, True):
        cfg = tiny_config(attention={"entropy_sharpening": sharpening, "entropy_threshold": 0.0})
        torch.manual_seed(0)
        model = build_model(cfg.model, cfg.attention, 30, 30)
        loss, _ = batch_loss(model, _batch(), cfg)
        loss.backward()
        losses.append((loss.item(), [p.grad.clone() for p in model.parameters() if p.grad is not None]))
    assert losses[0][0] == losses[1][0]
    assert all(torch.equal(a, b) for a, b in zip(losses[0][1], losses[1][1]))


def test_the_encoder_sums_its_directions_for_the_released_codes_sact():
    """h_i = h->_i + h<-_i (H units each direction) and the bridge reads h->_n + h<-_1 (model.encoder_merge: sum)."""
    cfg = tiny_config(
        model={"encoder_merge": "sum", "input_feeding": False}, attention={"temperature": "sact_released"}
    )
    torch.manual_seed(0)
    model = build_model(cfg.model, cfg.attention, 30, 30).double().eval()
    batch = _batch()
    h, final = model.encoder(batch.src, batch.src_lengths)
    lstm = model.encoder.rnn
    assert lstm.hidden_size == cfg.model.hidden_size
    for b, n in enumerate(batch.src_lengths.tolist()):
        emb = model.encoder.embed(batch.src[b, :n]).unsqueeze(0)
        both, (h_n, _) = lstm(emb)  # one unpadded sentence: no packing to disagree with
        forward, backward = both[0].split(cfg.model.hidden_size, dim=-1)
        torch.testing.assert_close(h[b, :n], forward + backward)
        torch.testing.assert_close(final[b], h_n[0, 0] + h_n[1, 0])


def test_declarations_labels_and_refusals():
    cfg = build_config(
        {"model": {"input_feeding": False, "encoder_merge": "sum"}, "attention": {"temperature": "sact_released"}}
    )
    assert variant_label(cfg) == "general+sact_released"
    with pytest.raises(
        ConfigError, match="model.input_feeding: must be false with attention.temperature sact_released"
    ):
        build_config({"model": {"encoder_merge": "sum"}, "attention": {"temperature": "sact_released"}})
    with pytest.raises(ConfigError, match="attention.alpha: must be < 2 with attention.normaliser entmax_learned"):
        build_config({"attention": {"normaliser": "entmax_learned", "alpha": 2.0}})
    with pytest.raises(ConfigError, match="attention.entropy_sharpening: must be false unless attention.normaliser"):
        build_config({"attention": {"entropy_sharpening": True, "normaliser": "entmax"}})
    fair = {"temperature": "sact", "sact_base": True, "sact_reading": "tempered", "qk_norm": True, "lambda": 10}
    assert variant_label(build_config({"model": {"arch": "transformer"}, "attention": fair})) == (
        "transformer-qknorm+sact10-base-tempered"
    )
    with pytest.raises(ConfigError, match="attention.sentinel: must be false with attention.sact_reading tempered"):
        build_config({"model": {"arch": "transformer"}, "attention": {**fair, "sentinel": True}})
    assert variant_label(build_config({"attention": {"normaliser": "entmax_learned", "softcap": True}})) == (
        "general+none+entmax_learned1.5+softcap50"
    )


# ---- a Transformer block, one batch row, head and position at a time -----------------------------------------------


def tau_of_head(m, cfg, b: int, i: int, h: int, x, n: int, previous) -> float:
    """The head's temperature at position i from the papers' formulas (1 without one)."""
    kind = m.parts.temperature
    if kind == "ssmax":
        return 1 / (m.temperature.scale[h].item() * math.log(n))
    if kind == "selective":
        a, w = m.temperature.a[h].item(), m.temperature.w.weight[h]
        return 1 / (1 + sigmoid(a) * math.log(n) + math.tanh(float(w @ x[b, i])))
    if kind == "sact":  # tau_0 lambda^tanh(U_s x_i + W_c c~_{i-1}), c~_{i-1} the head's tempered context
        beta = float(m.temperature.U_s.weight[h] @ x[b, i]) + float(m.temperature.reading.W_c[h] @ previous)
        return math.exp(m.temperature.log_tau0[h].item()) * cfg.lambda_ ** math.tanh(beta)
    return 1.0


def block_oracle(m, x, memory, real: list[int], cfg):
    """outputs (B, T, D) and taus (B, heads, T): scores q k / sqrt(d_k), the temperature, the cap, the normaliser."""
    d = SIZE // HEADS
    B, T = x.size(0), x.size(1)
    outs = torch.zeros(B, T, SIZE, dtype=torch.float64)
    taus = torch.zeros(B, HEADS, T, dtype=torch.float64)
    for b in range(B):
        contexts = [[None] * HEADS for _ in range(T)]
        for h in range(HEADS):
            keys = [head(m.W_K, memory[b, j], h) for j in range(real[b])]
            values = [head(m.W_V, memory[b, j], h).tolist() for j in range(real[b])]
            previous = torch.zeros(d, dtype=torch.float64)  # c~_{-1} = 0
            for i in range(T):
                q = head(m.W_Q, x[b, i], h)
                tau = tau_of_head(m, cfg, b, i, h, x, real[b], previous)
                z = [float(q @ k) / math.sqrt(d) / tau for k in keys]
                if m.parts.softcap:
                    z = [cfg.cap * math.tanh(v / cfg.cap) for v in z]
                everywhere = [True] * len(z)
                if m.parts.normaliser == "entmax_learned":
                    alpha = entmax(z, everywhere, 1 + sigmoid(m.normaliser.a[h].item()))
                else:
                    alpha = softmax(z, everywhere)
                contexts[i][h] = weighted_sum(alpha, values)
                previous = torch.tensor(contexts[i][h], dtype=torch.float64)
                taus[b, h, i] = tau
        for i in range(T):
            joined = torch.tensor([v for h in range(HEADS) for v in contexts[i][h]], dtype=torch.float64)
            outs[b, i] = m.W_O.weight @ joined + m.W_O.bias
    return outs, taus


BLOCKS = [
    (BlockParts(temperature="ssmax"), {"temperature": "ssmax"}),
    (BlockParts(temperature="selective"), {"temperature": "selective"}),
    (
        BlockParts(temperature="sact"),
        {"temperature": "sact", "lambda": 3.0, "sact_base": True, "sact_reading": "tempered"},
    ),
    (BlockParts(normaliser="entmax_learned"), {"normaliser": "entmax_learned"}),
    (BlockParts(temperature="selective", softcap=True), {"temperature": "selective", "softcap": True, "cap": 1.0}),
]


def block_inputs():
    torch.manual_seed(1)
    x, memory = torch.randn(2, 4, SIZE, dtype=torch.float64), torch.randn(2, 5, SIZE, dtype=torch.float64)
    key_mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    return x, memory, key_mask


@pytest.mark.parametrize("parts,attention", BLOCKS, ids=lambda p: str(p))
def test_each_transformer_head_matches_its_formula(parts, attention):
    m = block(parts, **attention)
    cfg = build_config({"model": {"arch": "transformer"}, "attention": attention}).attention
    x, memory, key_mask = block_inputs()
    with torch.no_grad():
        out, trace, carry = m(x, *m.keys_values(memory), key_mask[:, None, None, :], key_mask)
        expected, taus = block_oracle(m, x, memory, [5, 3], cfg)
    torch.testing.assert_close(out, expected)
    if parts.temperature != "none":
        torch.testing.assert_close(trace.tau, taus)
    if attention.get("sact_reading") == "tempered":  # the last tempered context goes on to the next decoding step
        assert carry["sact"].shape == (2, HEADS, 1, SIZE // HEADS)


GRADIENT_PARTS = {  # block parts, attention keys, the parameters of the part to differentiate
    "ssmax": (BlockParts(temperature="ssmax"), {"temperature": "ssmax"}, ("temperature.scale",)),
    "selective": (
        BlockParts(temperature="selective"),
        {"temperature": "selective"},
        ("temperature.a", "temperature.w.weight"),
    ),
    "sact tempered base": (
        BlockParts(temperature="sact"),
        {"temperature": "sact", "sact_base": True, "sact_reading": "tempered"},
        ("temperature.log_tau0", "temperature.reading.W_c", "temperature.U_s.weight"),
    ),
    "entmax learned": (
        BlockParts(normaliser="entmax_learned"),
        {"normaliser": "entmax_learned"},
        ("normaliser.a", "W_Q.weight"),
    ),
    "softcap": (
        BlockParts(temperature="fixed", softcap=True),
        {"temperature": "fixed", "tau": 0.3, "softcap": True, "cap": 1.0},
        ("W_Q.weight",),
    ),
}


@pytest.mark.parametrize("name", GRADIENT_PARTS)
def test_gradcheck_of_a_block_in_each_parts_parameters(name):
    parts, attention, names = GRADIENT_PARTS[name]
    m = block(parts, **attention)
    x, memory, key_mask = block_inputs()
    parameters = dict(m.named_parameters())

    def output(*values):
        out = torch.func.functional_call(
            m, dict(zip(names, values)), (x, *m.keys_values(memory), key_mask[:, None, None, :], key_mask)
        )[0]
        return out.sum() + (out**2).sum()

    inputs = tuple(parameters[n].detach().clone().requires_grad_() for n in names)
    assert torch.autograd.gradcheck(output, inputs, eps=1e-6, atol=1e-7)


def test_gradcheck_of_alpha_entmax_in_the_logits_and_alpha():
    g = torch.Generator().manual_seed(2)
    z = (torch.randn(3, 2, 6, generator=g, dtype=torch.float64) * 2).requires_grad_()
    alpha = torch.tensor([[[1.3]], [[1.6]], [[1.9]]], dtype=torch.float64, requires_grad=True)  # one per row group
    keep = torch.ones(3, 2, 6, dtype=torch.bool)
    keep[:, 1, 4:] = False
    assert torch.autograd.gradcheck(lambda z, a: masked_entmax(z, keep, a), (z, alpha), eps=1e-6, atol=1e-7)
    assert (EntmaxBisect.apply(z.detach(), alpha.detach()) == 0).any()  # the support is not everything


def test_the_learned_alphas_gradient_against_central_differences_of_the_oracle():
    """d L / d a, L = sum_t sum_b p_t . u (u fixed weights), alpha = 1 + sigmoid(a): autograd against the plain-loop
    entmax's central differences."""
    module = _attention(score="dot", normaliser="entmax_learned")
    h, queries, init, outputs = rnn_steps(module)
    u = [0.3, -1.1, 0.7]
    loss = sum((out.weights * torch.tensor(u, dtype=torch.float64)).sum() for out, _ in outputs)
    loss.backward()

    def plain(a: float) -> float:
        return sum(
            dot(u, entmax([dot(q[b].tolist(), hj) for hj in h[b].tolist()], MASK[b], 1 + sigmoid(a)))
            for q in queries
            for b in range(2)
        )

    a = P(module, "normaliser.a")[0]
    expected = (plain(a + 1e-6) - plain(a - 1e-6)) / 2e-6
    assert module.normaliser.a.grad.item() == pytest.approx(expected, rel=1e-5, abs=1e-8)


def test_diagnostics_summarise_what_each_part_observes_and_count_the_bound_on_lambda_to_the_beta():
    """Each observed value as <name>_mean/_p5/_p50/_p95 over the counted tokens (and heads); with a base scale the
    share at a bound is of lambda^beta, which lies in (1/lambda, lambda), not of tau = tau_0 lambda^beta."""
    cfg = build_config({"attention": {"temperature": "sact", "sact_base": True, "lambda": 4.0}}).attention
    modulation = torch.tensor([[0.25, 1.0, 4.0], [2.0, 0.25, 9.9]], dtype=torch.float64)  # 9.9: padding, not counted
    tau = modulation * 3.0  # tau_0 = 3: tau itself sits at no bound
    counted = torch.tensor([[True, True, True], [True, True, False]])
    trace = DecoderTrace(
        weights=torch.full((2, 3, 2), 0.5),
        tau=tau,
        gate=None,
        scores=torch.zeros(2, 3, 2),
        observed={"tau_modulation": modulation, "zeros": torch.tensor([[0.0, 0.5, 1.0], [0.5, 0.0, 7.0]])},
    )
    diagnostics = AttentionDiagnostics(cfg)
    diagnostics.add(trace, torch.ones(2, 2, dtype=torch.bool), counted)
    report = diagnostics.report()
    assert report["tau_at_bound"] == pytest.approx(3 / 5)  # 0.25, 4.0, 0.25 of the five counted
    values = sorted([0.0, 0.5, 1.0, 0.5, 0.0])
    assert report["zeros_mean"] == pytest.approx(sum(values) / 5)
    assert report["zeros_p50"] == pytest.approx(0.5)
    assert report["tau_modulation_p50"] == pytest.approx(1.0)  # of 0.25, 0.25, 1, 2, 4
    names = {f"{name}_{s}" for name in ("capped", "zeros", "alpha", "log_n_scale") for s in ("mean", "p5", "p95")}
    assert names <= set(DIAGNOSTIC_KEYS)  # MLflow and results.parquet route them
