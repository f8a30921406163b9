"""Attention diagnostics on dev: is a mechanism working, or has it degenerated?

A softmax whose logits spread by tens of units puts all weight on one word and passes no gradient to the
others; a SACT temperature that sits at lambda is a constant divisor, not an adaptive one; a sentinel gate
stuck at 0 is a sentinel the model does not use. These numbers, computed per epoch over the target words of
the teacher-forced dev pass, let the summary say so in words. The `</s>` step is left out: with nothing left
to translate it behaves apart (a quickstart sentinel gated 0.997 there and < 0.01 on 99.6% of words, which
an average over all steps hid).

Beside tau, each part reports what it observes per (token, head) (its declaration's `observes`): the share of a
token's logits beyond the soft-cap, of its keys at exactly 0 (entmax), entmax's alpha, SSMax's s log n, and SACT's
lambda^beta where a base scale tau_0 multiplies it (what then lies between the bounds). Each comes out as
`<name>_mean`, `_p5`, `_p50` and `_p95` over the epoch's dev tokens.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from nmt_core.config import AttentionConfig
from nmt_core.family.registry import TEMPERATURES
from nmt_core.models.rnn import DecoderTrace
from nmt_core.training.diagnostic_keys import (
    BOUND_TOLERANCE,
    COLLAPSED_GATE,
    ENTROPY,
    GATE_COLLAPSED,
    GATE_MEAN,
    MODULATION,
    SATURATED,
    SATURATED_WEIGHT,
    SCORE_RANGE,
    STATISTICS,
    TAU_AT_BOUND,
    TAU_MEAN,
    TAU_P5,
    TAU_P50,
    TAU_P95,
    TAU_STD,
)


class AttentionDiagnostics:
    """Collects per-token values over dev batches; `report()` turns them into the epoch's numbers."""

    def __init__(self, cfg: AttentionConfig):
        self.cfg = cfg
        self.values: dict[str, list[Tensor]] = {"range": [], "entropy": [], "max": [], "tau": [], "gate": []}
        self.observed: dict[str, list[Tensor]] = {}

    def add(self, trace: DecoderTrace, src_mask: Tensor, tgt_mask: Tensor) -> None:
        """trace of one batch; src_mask (B, S) True on real source tokens, tgt_mask (B, T) on the steps to count."""
        # a Transformer's trace has every head of its last cross-attention: each (token, head) counts once
        per_head = getattr(trace, "head_weights", None) is not None
        weights, scores = (trace.head_weights, trace.head_scores) if per_head else (trace.weights, trace.scores)
        real = src_mask[:, None, None, :] if per_head else src_mask.unsqueeze(1)  # (B, 1, [1,] S)
        scores = scores.float()
        spread = scores.masked_fill(~real, -math.inf).amax(-1) - scores.masked_fill(~real, math.inf).amin(-1)
        weights = weights.float()
        entropy = -(weights * weights.clamp_min(1e-30).log()).sum(-1)
        for name, value in (
            ("range", spread),
            ("entropy", entropy),
            ("max", weights.amax(-1)),
            ("tau", trace.tau),
            ("gate", trace.gate),
        ):
            if value is not None:
                self.values[name].append(value.float()[tgt_mask])
        for name, value in trace.observed.items():  # (B, T) or, per head, (B, T, K): each (token, head) counts once
            self.observed.setdefault(name, []).append(value.float()[tgt_mask])

    def report(self) -> dict[str, float]:
        v = {name: torch.cat(parts).cpu() for name, parts in self.values.items() if parts}
        out = {
            SCORE_RANGE: v["range"].median().item(),
            ENTROPY: v["entropy"].mean().item(),
            SATURATED: (v["max"] > SATURATED_WEIGHT).float().mean().item(),
        }
        observed = {name: torch.cat(parts).cpu().double() for name, parts in self.observed.items() if parts}
        if "tau" in v:
            out.update(self.tau_report(v["tau"].double(), observed.get(MODULATION)))
        if "gate" in v:
            out.update(
                {GATE_MEAN: v["gate"].mean().item(), GATE_COLLAPSED: (v["gate"] < COLLAPSED_GATE).float().mean().item()}
            )
        for name, values in observed.items():
            out.update({f"{name}_{statistic}": value for statistic, value in zip(STATISTICS, summarised(values))})
        return out

    def tau_report(self, tau: Tensor, modulation: Tensor | None) -> dict[str, float]:
        """tau's mean, spread and quantiles, and where its part is bounded the share at a bound: of lambda^beta where
        a base scale multiplies it (`modulation`), else of tau itself."""
        _, p5, p50, p95 = summarised(tau)
        out = {TAU_MEAN: tau.mean().item(), TAU_STD: tau.std(unbiased=False).item(), TAU_P5: p5, TAU_P50: p50}
        out[TAU_P95] = p95
        lam = TEMPERATURES[self.cfg.temperature].tau_bound(self.cfg)  # SACT's lambda
        if lam is not None:
            bounded = tau if modulation is None else modulation
            at_bound = (bounded >= lam * (1 - BOUND_TOLERANCE)) | (bounded <= (1 + BOUND_TOLERANCE) / lam)
            out[TAU_AT_BOUND] = at_bound.double().mean().item()
        return out


def summarised(values: Tensor) -> tuple[float, float, float, float]:
    """The mean and the 5th, 50th and 95th percentiles of float64 values."""
    p5, p50, p95 = torch.quantile(values, torch.tensor([0.05, 0.5, 0.95], dtype=values.dtype)).tolist()
    return values.mean().item(), p5, p50, p95
