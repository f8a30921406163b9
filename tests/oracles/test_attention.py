"""The attention family: every combination trains, and each variant does what its equations say."""

import itertools

import pytest
import torch

from nmt_core.config import CHOICES
from nmt_core.family.parts import SCORES, TEMPERATURES
from nmt_core.models.rnn import PAD, Seq2Seq
from tests.conftest import tiny_config

SCORES_UNDER_TEST = ["dot", "general", "concat", "scaled_dot", "key_value"]
TEMPERATURES_UNDER_TEST = ["none", "fixed", "sact", "learned"]
# the temperatures that followed SACT (issue 72): their oracles are tests/oracles/test_oracles_after_sact.py
TEMPERATURES_AFTER_SACT = ["sact_released", "ssmax", "ssmax_fixed", "selective"]


def test_every_allowed_value_has_its_registered_class_and_no_other():
    """The config's allowed values and the attention registries cannot drift apart."""
    assert sorted(SCORES) == sorted(CHOICES["attention.score"]) == sorted(SCORES_UNDER_TEST)
    assert (
        sorted(TEMPERATURES)
        == sorted(CHOICES["attention.temperature"])
        == sorted(TEMPERATURES_UNDER_TEST + TEMPERATURES_AFTER_SACT)
    )


def _batch(seed=0, batch=4, src_len=7, tgt_len=5):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, 30, (batch, src_len), generator=g)
    lengths = torch.tensor([src_len, 3, 5, 1][:batch])
    for row, n in enumerate(lengths):
        src[row, n:] = PAD
    tgt = torch.randint(4, 20, (batch, tgt_len), generator=g)
    return src, lengths, tgt


def _model(**attention):
    cfg = tiny_config(attention=attention)
    torch.manual_seed(0)
    return Seq2Seq(cfg.model, cfg.attention, 30, 20)


COMBINATIONS = [
    (score, temperature, sentinel, coverage)
    for score, temperature, sentinel, coverage in itertools.product(
        SCORES_UNDER_TEST, TEMPERATURES_UNDER_TEST, [False, True], [False, True]
    )
    if (score == "concat" or not coverage)  # coverage lives inside the additive score (Tu et al.)
    and not (score == "key_value" and sentinel)
]  # c+ would mix vectors of different sizes


@pytest.mark.parametrize("score, temperature, sentinel, coverage", COMBINATIONS)
def test_every_combination_runs_and_every_parameter_learns(score, temperature, sentinel, coverage):
    model = _model(
        score=score,
        temperature=temperature,
        sentinel=sentinel,
        coverage=coverage,
        coverage_weight=0.5 if coverage else 0.0,
        tau=0.8,
    )
    src, lengths, tgt = _batch()
    logits, trace = model(src, lengths, tgt)
    assert logits.shape == (4, 5, 20) and torch.isfinite(logits).all()
    logits.logsumexp(-1).sum().backward()
    no_grad = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert no_grad == []
    assert (trace.tau is None) == (temperature == "none")
    assert (trace.gate is None) == (not sentinel)


@pytest.mark.parametrize("score", SCORES_UNDER_TEST)
def test_fixed_temperature_one_equals_plain_softmax(score):
    plain, fixed = _model(score=score), _model(score=score, temperature="fixed", tau=1.0)
    fixed.load_state_dict(plain.state_dict())
    plain.eval(), fixed.eval()
    src, lengths, tgt = _batch()
    (a, ta), (b, tb) = plain(src, lengths, tgt), fixed(src, lengths, tgt)
    assert torch.allclose(a, b, atol=1e-6) and torch.allclose(ta.weights, tb.weights, atol=1e-6)


def test_fixed_temperature_changes_sharpness():
    sharp, soft = _model(temperature="fixed", tau=0.5), _model(temperature="fixed", tau=2.0)
    soft.load_state_dict(sharp.state_dict())
    src, lengths, tgt = _batch()
    entropy = lambda w: -(w.clamp_min(1e-12).log() * w).sum(-1).mean()  # noqa: E731
    assert entropy(sharp.eval()(src, lengths, tgt)[1].weights) < entropy(soft.eval()(src, lengths, tgt)[1].weights)


@pytest.mark.parametrize("lam", [2.0, 4.0, 10.0])
def test_sact_temperature_stays_in_its_bounds_and_varies(lam):
    model = _model(temperature="sact", **{"lambda": lam}).eval()
    src, lengths, tgt = _batch(batch=4, tgt_len=9)
    with torch.no_grad():  # larger weights spread beta_t over most of (-1, 1)
        model.decoder.attention.temperature.U_s.weight.mul_(3)
    tau = model(src, lengths, tgt)[1].tau
    assert tau.shape == (4, 9)
    assert (tau > 1 / lam).all() and (tau < lam).all()
    assert tau.max() / tau.min() > lam**0.5, "tau should use a good part of its range"
    assert tau.std(dim=1).min() > 0, "tau must vary across steps"
    assert tau.std(dim=0).min() > 0, "tau must vary across sentences"
    with torch.no_grad():  # saturated tanh: float32 reaches the closed bounds, never beyond
        model.decoder.attention.temperature.U_s.weight.mul_(100)
    tau = model(src, lengths, tgt)[1].tau
    assert (tau >= (1 - 1e-6) / lam).all() and (tau <= lam * (1 + 1e-6)).all()


@pytest.mark.parametrize("score, temperature, sentinel, coverage", COMBINATIONS)
def test_padding_gets_exactly_zero_weight_and_weights_sum_to_one(score, temperature, sentinel, coverage):
    model = _model(score=score, temperature=temperature, sentinel=sentinel, coverage=coverage).eval()
    src, lengths, tgt = _batch()
    trace = model(src, lengths, tgt)[1]
    for row, n in enumerate(lengths.tolist()):
        assert (trace.weights[row, :, n:] == 0).all()
    total = trace.weights.sum(-1) + (trace.gate if sentinel else 0)
    assert torch.allclose(total, torch.ones_like(total), atol=1e-5)
    if sentinel:
        assert ((trace.gate > 0) & (trace.gate < 1)).all()


def test_keys_are_projected_once_per_batch_not_per_step():
    model = _model(score="concat")
    calls = []
    model.decoder.attention.score.U.register_forward_hook(lambda *_: calls.append(1))
    src, lengths, tgt = _batch(tgt_len=6)
    model(src, lengths, tgt)
    assert len(calls) == 1


@pytest.mark.parametrize("score", SCORES_UNDER_TEST)
@pytest.mark.parametrize("input_feeding", [True, False])
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_teacher_forcing_matches_step_by_step_decoding(cell, input_feeding, score):
    """forward() over the whole target and step() one token at a time compute the same thing, for every score
    with SACT and (where defined) the sentinel and coverage; LSTM + sentinel without input feeding takes the
    step-by-step path because the sentinel reads the memory cell of every step."""
    attention = {"score": score, "temperature": "sact", "sentinel": score != "key_value", "coverage": score == "concat"}
    assert_teacher_forcing_matches_steps(
        tiny_config(model={"cell": cell, "input_feeding": input_feeding}, attention=attention)
    )


def assert_teacher_forcing_matches_steps(cfg) -> None:
    """forward() over a batch's whole target and step() one token at a time: the same logits and weights (and tau)."""
    torch.manual_seed(0)
    model = Seq2Seq(cfg.model, cfg.attention, 30, 20).eval()
    src, lengths, tgt = _batch()
    logits, trace = model(src, lengths, tgt)
    memory, state = model.encode(src, lengths)
    for t in range(tgt.size(1)):
        step_logits, state, out = model.decoder.step(tgt[:, t], state, memory)
        assert torch.allclose(step_logits, logits[:, t], atol=1e-5)
        assert torch.allclose(out.weights, trace.weights[:, t], atol=1e-6)
        if out.tau is not None:
            assert torch.allclose(out.tau, trace.tau[:, t], atol=1e-6)
