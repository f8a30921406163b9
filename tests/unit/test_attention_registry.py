"""A variant is one declaration and one class that computes it, for both architectures: a toy score and a toy
adaptive temperature, declared and implemented here only, go through config validation, one training step, greedy
and beam decoding, the dev diagnostics, a variant label and a summary row in the RNN and in the Transformer, without
any other file knowing them."""

from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor, nn

from nmt_core.config import CHOICES, AttentionConfig, ConfigError, build_config
from nmt_core.data.batches import Example, collate
from nmt_core.family.parts import SCORES, TEMPERATURES, Part, Rule, declare, implements
from nmt_core.family.registry import is_adaptive
from nmt_core.family.variants import TemperaturePart
from nmt_core.models.attention import AttentionState, Memory, Score, Site, Temperature
from nmt_core.models.build import build_model
from nmt_core.models.rnn import PAD
from nmt_core.training import diagnostics
from nmt_core.training.decode import beam_search, greedy
from nmt_core.training.train import batch_loss, build_optimizer, dev_pass, optimizer_step
from sweeper.space.spec import variant_label
from sweeper.summary import TrialRecord, build_summary
from sweeper.summary import checks as findings
from sweeper.summary.findings import history_of

SOURCES, TARGETS = [[4, 5, 6, 7], [8, 4], [6, 7, 5]], [[4, 5, 4], [5, 4, 5, 4], [4]]
ARCHS = ["rnn", "transformer"]


def unit(x: Tensor) -> Tensor:
    return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-6)


class Cosine(Part):
    """The toy score declared: it serves both architectures."""

    architectures = ("rnn", "transformer")


class CosineScore(Score):
    """e = g cos(q, k): a learned gain g on the cosine of query and key (scale-free, unlike q^T k). The RNN compares
    s_t with h_i (`keys` once per batch, `forward` each step); a Transformer block its heads' q with their k."""

    def __init__(self, site: Site, cfg: AttentionConfig):
        super().__init__(site, cfg)
        self.gain = nn.Parameter(torch.tensor(3.0))

    def keys(self, h: Tensor) -> Tensor:
        return unit(h)

    def forward(self, s: Tensor, memory: Memory, state: AttentionState) -> Tensor:
        return self.gain * memory.match(unit(s))

    def head_scores(self, q: Tensor, k: Tensor) -> Tensor:
        return self.gain * torch.matmul(unit(q), unit(k).transpose(-1, -2))


class Gated(TemperaturePart):
    """The toy temperature declared: adaptive, bounded by attention.tau, which acts only with it."""

    adaptive = True
    settings = ("attention.tau",)  # in a run's parameters with this temperature only
    rules = (
        Rule(
            "attention.tau",
            "> 1 with attention.temperature toy_gated (tau_t lies in (1/tau, tau))",
            lambda c: c.attention.tau > 1,
        ),
    )

    @classmethod
    def label(cls, a: AttentionConfig) -> str | None:
        return f"gated{a.tau:g}"

    @classmethod
    def tau_bound(cls, a: AttentionConfig) -> float | None:
        return a.tau


class GatedTemperature(Temperature):
    """tau = tau^(2 sigmoid(u^T x) - 1), in (1/tau, tau): a per-token temperature read from the step's input alone
    (s_t, or a Transformer block's x_i), one u per head."""

    def __init__(self, site: Site, cfg: AttentionConfig):
        super().__init__(site, cfg)
        self.u = nn.Linear(site.input_size, site.heads, bias=False)

    def forward(self, query: Tensor, previous: Tensor | None) -> Tensor | None:
        return torch.exp((2 * torch.sigmoid(self.site.per_head(self.u(query))) - 1) * math.log(self.cfg.tau))


@pytest.fixture
def toy_parts():
    """The two toy parts declared and implemented for one test and taken out after it (the suite's registries stay
    built-in)."""
    declare(SCORES, "toy_cosine")(Cosine)
    implements(SCORES, "toy_cosine")(CosineScore)
    declare(TEMPERATURES, "toy_gated")(Gated)
    implements(TEMPERATURES, "toy_gated")(GatedTemperature)
    yield
    del SCORES["toy_cosine"], TEMPERATURES["toy_gated"]
    del SCORES.implementations["toy_cosine"], TEMPERATURES.implementations["toy_gated"]


def _config(arch: str = "rnn", **attention):
    model = {"emb_size": 8, "hidden_size": 8, "dropout": 0.0}
    if arch == "transformer":
        model |= {"arch": "transformer", "layers": 2, "heads": 2, "ff_size": 16}
    return build_config(
        {
            "model": model,
            "attention": {"score": "toy_cosine", "temperature": "toy_gated", "tau": 3.0, **attention},
            "decode": {"beam_size": 3, "max_len_offset": 3},
        }
    )


def test_toy_parts_are_validated_like_the_built_in_ones(toy_parts):
    assert "toy_cosine" in CHOICES["attention.score"] and "toy_gated" in CHOICES["attention.temperature"]
    cfg = _config(position_bias="log")
    assert (cfg.attention.score, cfg.attention.temperature) == ("toy_cosine", "toy_gated")
    cfg = _config("transformer", position_bias="gaussian")
    assert (cfg.attention.score, cfg.attention.temperature) == ("toy_cosine", "toy_gated")
    for arch in ARCHS:
        with pytest.raises(
            ConfigError,
            match=r"^<config>: attention.tau: must be > 1 with attention.temperature toy_gated .*\(got 0.5\)$",
        ):
            _config(arch, tau=0.5)  # the toy's own rule
    with pytest.raises(ConfigError, match="attention.score: must be one of .*toy_cosine"):
        _config(score="toy_sine")
    with pytest.raises(ConfigError, match=r"attention.score: must be one of dot, scaled_dot, toy_cosine with model"):
        _config("transformer", score="concat")  # a score with no form for heads


def test_toy_parts_are_gone_outside_their_test():
    assert "toy_cosine" not in CHOICES["attention.score"]
    with pytest.raises(ConfigError, match="attention.temperature: must be one of none, fixed, sact"):
        build_config({"attention": {"temperature": "toy_gated"}})


@pytest.mark.parametrize("arch", ARCHS)
def test_toy_parts_train_decode_and_report(toy_parts, arch):
    cfg = _config(arch)
    torch.manual_seed(0)
    model = build_model(cfg.model, cfg.attention, 10, 8)
    scores = [m for m in model.modules() if isinstance(m, CosineScore)]
    temperatures = [m for m in model.modules() if isinstance(m, GatedTemperature)]
    assert len(scores) == len(temperatures) == (1 if arch == "rnn" else 2)  # the RNN's, or each cross-attention's
    batch = collate([Example(s, t, None) for s, t in zip(SOURCES, TARGETS)], [0, 1, 2])
    optimizer = build_optimizer(model, cfg)
    gains, us = [m.gain.item() for m in scores], [m.u.weight.clone() for m in temperatures]
    loss, trace = batch_loss(model, batch, cfg)
    optimizer_step(optimizer, loss, model.parameters(), cfg.train.clip_norm)
    assert math.isfinite(loss.item())
    assert all(m.gain.item() != gain for m, gain in zip(scores, gains))  # both toy parts learn
    assert all(not torch.equal(m.u.weight, u) for m, u in zip(temperatures, us))
    tau = trace.tau[batch.tgt_out != PAD]  # (words,) or (words, heads)
    assert ((tau > 1 / 3) & (tau < 3)).all() and tau.std() > 0  # adaptive, within its bound

    model.eval()
    with torch.no_grad():
        for translations in (greedy(model, batch, cfg.decode), beam_search(model, batch, cfg.decode, 3)):
            assert len(translations) == 3
            assert all(t.tau is not None and len(t.tau) == len(t.tokens) for t in translations)
    assert diagnostics.TAU_AT_BOUND in dev_pass(model, [batch], cfg, torch.device("cpu"))  # from its tau_bound


def test_toy_variant_label_and_summary_row(toy_parts):
    toy, baseline = _config(position_bias="log"), build_config({})
    heads, heads_baseline = _config("transformer", position_bias="gaussian"), _config("transformer", score="scaled_dot")
    assert variant_label(toy) == "toy_cosine+gated3+pos-log"
    assert variant_label(baseline) == "general+none"
    assert variant_label(heads) == "transformer-toy_cosine+gated3+pos-gaussian"
    assert variant_label(heads_baseline) == "transformer+gated3"

    def record(run_id: str, cfg, seed: int, bleu: float) -> TrialRecord:
        params = {k: str(v) for k, v in cfg.active().items() if k != "train.seed"} | {"train.seed": str(seed)}
        curves = {
            "bleu_dev": [bleu - 2, bleu],
            diagnostics.TAU_AT_BOUND: [0.95, 0.95],
            **{key: [2.9, 2.9] for key in (diagnostics.TAU_P5, diagnostics.TAU_P50, diagnostics.TAU_P95)},
        }
        return TrialRecord(
            run_id, run_id, variant_label(cfg), params, {"bleu_test_test": bleu, "bleu_test_avg": bleu}, curves
        )

    references = ["the cat sat on the mat", "a dog ran in the park", "birds sing at dawn"]
    translations = {run: {"test": references} for run in "abcde"}
    runs = [(baseline, 1, 20.0), (toy, 1, 22.0), (toy, 2, 23.0), (heads, 1, 24.0), (heads, 2, 26.0)]
    summary = build_summary(
        [record(run_id, *run) for run_id, run in zip("abcde", runs)], translations, {"test": references}
    )
    rows = {row.label: row for row in summary.rows}
    assert {label: len(row.records) for label, row in rows.items()} == {
        "general+none": 1,
        "toy_cosine+gated3+pos-log": 2,
        "transformer-toy_cosine+gated3+pos-gaussian": 2,
    }
    assert rows["toy_cosine+gated3+pos-log"].average == (22.5, pytest.approx(math.sqrt(0.5)))
    assert rows["transformer-toy_cosine+gated3+pos-gaussian"].average == (25.0, pytest.approx(math.sqrt(2)))
    for label in ("toy_cosine+gated3+pos-log", "transformer-toy_cosine+gated3+pos-gaussian"):
        params = rows[label].records[0].params
        assert params["attention.tau"] == "3.0" and params["attention.score"] == "toy_cosine"  # what acted
        assert findings.degenerate(history_of(rows[label])) == [
            (
                f"`{label}`: tau at its upper bound for 95% of dev tokens (p5 2.90, p95 2.90): the "
                "temperature acts as a fixed one here, not an adaptive one."
            )
        ]
    assert "attention.tau" not in rows["general+none"].records[0].params
    assert is_adaptive("toy_gated") and not is_adaptive("fixed") and not is_adaptive("retired_temperature")
