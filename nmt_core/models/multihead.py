"""Multi-head attention (Vaswani et al. 2017, V) with the attention family inside each head.

Every head h of a block computes its scores with the block's score part (scaled_dot by default: e^h = q^h k^hT /
sqrt(d_k); `attention.score` for the decoder's cross-attention), then, where the config asks, with the family's parts
built for this block (nmt_core.models.attention, one class each for both architectures; their docstrings give the maths)
and run through the family's `Pipeline`, the RNN's attention's, through the same hooks:
- a Gaussian localness bias G (Yang et al. 2018, Y eqs. 8-10) from each head's query;
- a sentinel slot (Li & Zhu 2017, A): one more key/value per position, s_i = g * tanh(W_s x_i) with
  g = sigmoid(W_x x_i + W_t x_{i-1}) (A eqs. 7-8; x_i the block's input, x_{i-1} standing in for the RNN's
  t_{i-1}), keyed and valued by the block's own W^K and W^V; the slot's weight is the head's gate beta;
- a temperature tau per head and position: softmax((e [+ G]; slot) / tau), dividing the scores, bias and slot as
  the RNN's Attention does. With `attention.qk_norm` (Henry et al. 2020) a tempered block scores unit queries and
  keys by their plain dot product, e = q^ k^T with q^ = q / ||q||, k^ = k / ||k|| per head (the slot's key too): the
  cosine, in [-1, 1], with no 1/sqrt(d_k), so that tau is the logits' only scale (W_Q and W_K cannot rescale them).
  SACT (S eqs. 1-2) reads c~_{t-1} as `attention.sact_reading` says (the readings below, the
  Transformer's own parts): `query` not at all; `first_pass` c0_{i-1}, the same head's context at i - 1 from a
  first pass with tau = 1 (c0_{-1} = 0); `tempered` the paper's own c~_{i-1}, the head's tempered context at i - 1,
  which makes tau sequential over the positions (only tau and its softmax: the scores stay parallel);
- alpha-entmax in place of the softmax, soft-capped logits, the decoding's entropy sharpening: in the blocks the
  temperature acts in (`attention.temperature_at`), through the pipeline's normaliser and `final` hooks.

What a part reads from the position before (the first pass, x_{i-1}) is shifted from all positions in training, and
carried under the part's name from one decoding step to the next (`BlockState`); what differs from the RNN's step is
the block's `BlockSite`. With none of these active a block runs
torch.nn.functional.scaled_dot_product_attention (fused kernels) unless it must report its weights (the decoder's
last cross-attention, which the traces and diagnostics read).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from nmt_core.family.parts import Implementation, implements
from nmt_core.family.variants import SACT_READINGS, SCORES
from nmt_core.models.attention import AttentionState, Pipeline, Site, Step, head_scalars

if TYPE_CHECKING:
    from nmt_core.config import AttentionConfig


@dataclass
class HeadTrace:
    """What one attention block did, per head: weights and raw scores (B, heads, T, S); tau and gate (B, heads, T).
    None where the block has no such part (or ran the fused kernel, which gives no weights)."""

    weights: Tensor | None = None
    scores: Tensor | None = None
    tau: Tensor | None = None
    gate: Tensor | None = None
    observed: dict[str, Tensor] = field(default_factory=dict)  # (B, heads, T) each: what the parts report


def shifted(x: Tensor, dim: int) -> Tensor:
    """x moved one position later along dim, zeros first: position i sees what was at i - 1."""
    first = torch.zeros_like(x.narrow(dim, 0, 1))
    return torch.cat([first, x.narrow(dim, 0, x.size(dim) - 1)], dim=dim)


@dataclass(frozen=True)
class BlockSite(Site):
    """One multi-head block: its W^K and W^V project the keys (and the sentinel's slot), a per-head vector is a
    (heads, size) matrix, and SACT reads c~_{t-1} as `attention.sact_reading` says."""

    projects_keys: ClassVar[bool] = True

    def per_head(self, values: Tensor) -> Tensor:
        return values.transpose(1, 2)

    def head_vector(self, size: int) -> nn.Parameter:
        bound = size**-0.5
        return nn.Parameter(torch.empty(self.heads, size).uniform_(-bound, bound))

    def per_head_constant(self, values: Tensor) -> Tensor:
        return values.view(self.heads, 1)

    def sact_reading(self, cfg: AttentionConfig) -> nn.Module:
        return SACT_READINGS.implementation(cfg.sact_reading)(self.heads, self.head_size)


class BlockState(AttentionState):
    """What a block's parts had at the position before: in training all positions are here and each reads the one
    before it (shifted); in decoding, what the step before carried under the part's name (zeros before the first
    step). It collects what this block carries to the next step: each part's last position."""

    def __init__(self, carried: dict[str, Tensor] | None):
        super().__init__({})
        self.carried, self.carry = carried, {}

    def start(self, name: str, like: Tensor) -> Tensor:
        """What `name` carried from the step before, zeros (like `like`) at the first position: where a part computes
        its positions one after another (SACT's tempered reading) and keeps its last (`carry`)."""
        if self.carried is not None and name in self.carried:
            return self.carried[name]
        return torch.zeros_like(like)

    def before(self, name: str, now: Tensor) -> Tensor:
        """`now` (..., T, size) at the position before, along its positions (the second axis from the end)."""
        self.carry[name] = now[..., -1:, :]
        if self.carried is None:
            return shifted(now, -2)
        return self.carried[name] if name in self.carried else torch.zeros_like(now)


# ---- SACT readings: what stands for c~_{t-1} inside a layer (attention.sact_reading) --------------------------


class SactReading(nn.Module, Implementation):
    """The term beta gets from the previous position's context (B, heads, T); none for the query-only reading."""

    needs_first_pass = False
    recurrent = False  # reads the tempered context at i - 1: the block computes tau position by position

    def __init__(self, heads: int, head_size: int):
        super().__init__()

    def forward(self, previous: Tensor | None) -> Tensor | int:
        return 0


@implements(SACT_READINGS, "query")
class QueryReading(SactReading):
    """beta_i = tanh(U_s x_i): the query alone. Cheapest, parallel; drops the paper's dependence on the past
    context, so it measures what an input-dependent temperature gives by itself."""


@implements(SACT_READINGS, "first_pass")
class FirstPassReading(SactReading):
    """beta_i = tanh(W_c c0_{i-1} + U_s x_i), c0 the head's plain (tau = 1) context: keeps S eq. 2's dependence on
    what attention read at the previous position, computed for all positions at once."""

    needs_first_pass = True

    def __init__(self, heads: int, head_size: int):
        super().__init__(heads, head_size)
        self.W_c = nn.Parameter(torch.empty(heads, head_size).uniform_(-(head_size**-0.5), head_size**-0.5))

    def forward(self, previous: Tensor | None) -> Tensor | int:
        return head_scalars(previous, self.W_c).squeeze(-1)  # W_c c0_{i-1}, each head's own W_c


@implements(SACT_READINGS, "tempered")
class TemperedReading(FirstPassReading):
    """beta_i = tanh(W_c c~_{i-1} + U_s x_i), c~_{i-1} the head's own tempered context at the position before (S eq. 2
    as the paper has it, c~_{-1} = 0): what attention read at the previous step, not a near-uniform first pass. tau_i
    needs c~_{i-1}, so the block runs tau and its softmax one position after another (`MultiHeadAttention.
    tempered_tau`); the scores, the values and the block's output stay parallel."""

    needs_first_pass = False
    recurrent = True


@dataclass(frozen=True)
class BlockParts:
    """Which parts one attention block has (the transformer decides per block and layer)."""

    score: str = "scaled_dot"
    temperature: str = "none"
    position_bias: str = "none"
    sentinel: bool = False
    normaliser: str = "softmax"
    softcap: bool = False
    entropy_sharpening: bool = False
    keep_weights: bool = False  # report weights even without a mechanism (the explicit path)
    fused: bool = True  # model.fast_path: scaled_dot_product_attention where no mechanism is active
    qk_norm: bool = False  # attention.qk_norm: the score compares unit queries and keys (`compared`)

    def flags(self) -> set[str]:
        """The on/off mechanisms this block runs (attention.* flags)."""
        return {name for name in ("sentinel", "softcap", "entropy_sharpening") if getattr(self, name)}

    def explicit(self) -> bool:
        plain = self.temperature == "none" and self.position_bias == "none" and self.normaliser == "softmax"
        plain = plain and not (self.flags() or self.qk_norm)
        return not (plain and SCORES.implementation(self.score).fused and self.fused and not self.keep_weights)


class MultiHeadAttention(Pipeline):
    """softmax(Q K^T / sqrt(d_k)) V over `heads` heads (V sec. 3.2.2), with the parts of `BlockParts` run through
    the family's pipeline (nmt_core.models.attention.Pipeline), as the RNN's attention runs them."""

    def __init__(self, size: int, heads: int, dropout: float, cfg: AttentionConfig, parts: BlockParts):
        super().__init__()
        self.heads, self.head_size, self.parts = heads, size // heads, parts
        self.W_Q, self.W_K, self.W_V, self.W_O = (nn.Linear(size, size) for _ in range(4))
        site = BlockSite(size, self.head_size, self.head_size, heads, step_input_size=size)
        named = {"score": parts.score, "temperature": parts.temperature, "position_bias": parts.position_bias}
        self.build_parts(site, cfg, {**named, "normaliser": parts.normaliser}, parts.flags())
        self.dropout = dropout

    def by_head(self, x: Tensor) -> Tensor:
        """(B, T, D) -> (B, heads, T, d_k)."""
        return x.view(x.size(0), x.size(1), self.heads, self.head_size).transpose(1, 2)

    def keys_values(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """The keys and values of memory (B, S, D), each (B, heads, S, d_k): computed once per batch for a cross-
        attention, once per step (and cached) for a decoder self-attention."""
        return self.by_head(self.W_K(memory)), self.by_head(self.W_V(memory))

    def forward(
        self,
        x: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Tensor | None,
        key_mask: Tensor | None = None,
        causal: bool = False,
        carried: dict[str, Tensor] | None = None,
    ) -> tuple[Tensor, HeadTrace, dict[str, Tensor]]:
        """x (B, T, D) attends over k, v (B, heads, S, d_k); mask (B, 1, T or 1, S) True where a key may be read
        (None: all; `causal` with it for a decoder's self-attention over all T positions). key_mask (B, S): real
        keys (the localness' I). `carried`: what the parts kept at the previous position (one decoding step); None:
        the T positions are all here and each reads the one before it. Returns the output, the trace and what this
        block carries to the next step."""
        q = self.by_head(self.W_Q(x))
        if not self.parts.explicit():
            dropout = self.dropout if self.training else 0.0
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=None if causal else mask, dropout_p=dropout, is_causal=causal
            )
            return self.W_O(out.transpose(1, 2).flatten(2)), HeadTrace(), {}
        if causal:  # position i reads keys 0..i
            mask = torch.ones(q.size(2), k.size(2), dtype=torch.bool, device=q.device).tril()[None, None]
        return self.explicit(x, q, k, v, mask, key_mask, carried)

    def compared(self, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor]:
        """The queries and keys as the score compares them: with `qk_norm` each head's q and k at unit norm,
        q / ||q|| and k / ||k|| (Henry et al. 2020), so that a dot-product score gives their cosine and the logits'
        scale is the temperature's alone; F.normalize's floor on ||.|| (1e-12) acts only on a vector of zeros."""
        if not self.parts.qk_norm:
            return q, k
        return F.normalize(q, dim=-1), F.normalize(k, dim=-1)

    def context_before(self, e: Tensor, mask: Tensor | None, step: Step) -> Tensor | None:
        """c0_{i-1}: each head's context at the position before from a first pass at tau = 1, where the temperature
        reads a context (SACT's first_pass reading); inside a layer the tempered one would make positions
        sequential."""
        if not self.temperature.reads_context:
            return None
        return step.state.before(self.temperature.name, step.average(self.normaliser(e, mask).to(step.dtype)))

    def tau_of(self, e: Tensor, mask: Tensor | None, step: Step) -> Tensor | None:
        reading = getattr(self.temperature, "reading", None)
        if reading is None or not reading.recurrent:
            return super().tau_of(e, mask, step)
        return self.tempered_tau(e, mask, step)

    def tempered_tau(self, e: Tensor, keep: Tensor, step: Step) -> Tensor:
        """tau_i = [tau_0] lambda^tanh(W_c c~_{i-1} + U_s x_i) with c~_{i-1} = sum_j alpha~_{i-1,j} v_j, alpha~_{i-1} =
        softmax(e_{i-1} / tau_{i-1}) (S eqs. 1-4 per head; the block's normaliser): one position after another,
        from c~_{-1} = 0 in training, or from what the step before carried in decoding; the last c~ is carried on."""
        name, taus = self.temperature.name, []
        context = step.state.start(name, e.new_zeros(*e.shape[:2], 1, self.head_size, dtype=step.dtype))
        for i in range(e.size(2)):
            tau = self.temperature(step.s[:, i : i + 1], context)  # (B, heads, 1)
            alpha = self.normaliser(e[:, :, i : i + 1] / tau.unsqueeze(-1), keep[:, :, i : i + 1])
            context = step.average(alpha.to(step.dtype))  # c~_i (B, heads, 1, d_k)
            taus.append(tau)
        step.state.carry[name] = context
        tau = torch.cat(taus, dim=-1)
        with torch.no_grad():
            step.observed.update(self.temperature.observe(tau, step.s))
        return tau

    def explicit(
        self,
        x: Tensor,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Tensor | None,
        key_mask: Tensor | None,
        carried: dict[str, Tensor] | None,
    ) -> tuple[Tensor, HeadTrace, dict[str, Tensor]]:
        """The attention with its parts, through the family's pipeline (what the module docstring describes)."""
        e = raw = self.score.head_scores(*self.compared(q, k))  # (B, h, T, S)
        keep = torch.ones_like(e, dtype=torch.bool) if mask is None else mask.expand_as(e)
        if key_mask is not None:
            bias, _ = self.position(q, key_mask, AttentionState({}))
            e = e if bias is None else e + bias

        def keyed(sentinel: Tensor) -> tuple[Tensor, Tensor]:
            """A slot keyed and valued by this block's W^K and W^V, scored by its score (A eq. 10 per head)."""
            slot_k, slot_v = self.by_head(self.W_K(sentinel)), self.by_head(self.W_V(sentinel))
            return slot_v, self.score.slot_scores(*self.compared(q, slot_k))

        state = BlockState(carried)
        step = Step(x, x, None, state, lambda weights: torch.matmul(weights, v), v.dtype, keyed)
        alpha, tau = self.weigh(e, keep, step)
        out, _, _ = self.read(F.dropout(alpha, self.dropout, self.training), step)
        alpha, gate = self.split(alpha)
        trace = HeadTrace(alpha, raw, tau, gate, step.observed)
        return self.W_O(out.transpose(1, 2).flatten(2)), trace, state.carry
