"""Attention diagnostics on dev: is a mechanism working, or has it degenerated?

A softmax whose logits spread by tens of units puts all weight on one word and passes no gradient to the
others; a SACT temperature that sits at lambda is a constant divisor, not an adaptive one; a sentinel gate
stuck at 0 is a sentinel the model does not use. These numbers, computed per epoch over the target words of
the teacher-forced dev pass, let the summary say so in words. The `</s>` step is left out: with nothing left
to translate it behaves apart (a quickstart sentinel gated 0.997 there and < 0.01 on 99.6% of words, which
an average over all steps hid).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from nmt_core.config import AttentionConfig
from nmt_core.family.registry import TEMPERATURES
from nmt_core.models.rnn import DecoderTrace

SATURATED_WEIGHT = 0.95  # a step is saturated when one source word takes more than this
BOUND_TOLERANCE = 0.01  # tau within 1% of 1/lambda or lambda counts as "at a bound"
COLLAPSED_GATE = 0.01  # a sentinel gate below this means "attend to the source as usual"

# what `report` returns; the epoch report, MLflow and results.parquet use these names
SCORE_RANGE, ENTROPY, SATURATED = "attn_score_range", "attn_entropy", "attn_saturated"
TAU_P5, TAU_P50, TAU_P95, TAU_AT_BOUND = "tau_p5", "tau_p50", "tau_p95", "tau_at_bound"
TAU_MEAN, TAU_STD = "tau_mean", "tau_std"
GATE_MEAN, GATE_COLLAPSED = "sentinel_mean", "sentinel_collapsed"
KEYS = (
    SCORE_RANGE,
    ENTROPY,
    SATURATED,
    TAU_MEAN,
    TAU_STD,
    TAU_P5,
    TAU_P50,
    TAU_P95,
    TAU_AT_BOUND,
    GATE_MEAN,
    GATE_COLLAPSED,
)


class AttentionDiagnostics:
    """Collects per-token values over dev batches; `report()` turns them into the epoch's numbers."""

    def __init__(self, cfg: AttentionConfig):
        self.cfg = cfg
        self.values: dict[str, list[Tensor]] = {"range": [], "entropy": [], "max": [], "tau": [], "gate": []}

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

    def report(self) -> dict[str, float]:
        v = {name: torch.cat(parts).cpu() for name, parts in self.values.items() if parts}
        out = {
            SCORE_RANGE: v["range"].median().item(),
            ENTROPY: v["entropy"].mean().item(),
            SATURATED: (v["max"] > SATURATED_WEIGHT).float().mean().item(),
        }
        if "tau" in v:
            tau = v["tau"].double()
            p5, p50, p95 = torch.quantile(tau, torch.tensor([0.05, 0.5, 0.95], dtype=tau.dtype)).tolist()
            out.update(
                {
                    TAU_MEAN: tau.mean().item(),
                    TAU_STD: tau.std(unbiased=False).item(),
                    TAU_P5: p5,
                    TAU_P50: p50,
                    TAU_P95: p95,
                }
            )
            lam = TEMPERATURES[self.cfg.temperature].tau_bound(self.cfg)  # SACT's lambda
            if lam is not None:
                at_bound = (tau >= lam * (1 - BOUND_TOLERANCE)) | (tau <= (1 + BOUND_TOLERANCE) / lam)
                out[TAU_AT_BOUND] = at_bound.double().mean().item()
        if "gate" in v:
            out.update(
                {GATE_MEAN: v["gate"].mean().item(), GATE_COLLAPSED: (v["gate"] < COLLAPSED_GATE).float().mean().item()}
            )
        return out
