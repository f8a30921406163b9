"""Multi-head attention (Vaswani et al. 2017, V) with the attention family inside each head.

Every head h of a block computes e^h = q^h k^hT / sqrt(d_k) over its keys, then, where the config asks:
- a Gaussian localness bias G (Yang et al. 2018, Y eqs. 8-10): e + G, G_ij = -(j - P_i)^2 / (2 sigma_i^2), the
  centre P_i = I sigmoid(v_p^T tanh(W_p q_i)) and window D_i = I sigmoid(v_d^T tanh(W_p q_i)), sigma_i = D_i / 2,
  I the number of real keys; W_p is shared by the heads, v_p and v_d are each head's own;
- a sentinel slot (Li & Zhu 2017, A): one more key/value per position, s_i = g * tanh(W_s x_i) with
  g = sigmoid(W_x x_i + W_t x_{i-1}) (A eqs. 7-8; x_i the block's input, x_{i-1} standing in for the RNN's
  t_{i-1}), keyed and valued by the block's own W^K and W^V; the slot's weight is the head's gate beta;
- a temperature tau per head and position: softmax((e [+ G]; slot) / tau), as the RNN's Attention divides its
  scores, bias and slot. `fixed`: a constant; `sact` (Lin et al. 2018, S eqs. 1-2): tau = lambda^beta,
  beta = tanh(U_s x_i [+ W_c c0_{i-1}]) per head, where the reading (`attention.sact_reading`) decides what stands
  for the paper's c~_{t-1}: `query` none; `first_pass` c0_{i-1}, the same head's context at i - 1 from a first
  pass with tau = 1 (c0_{-1} = 0). Inside a layer the paper's own c~_{t-1} (the tempered context of the step
  before) would make positions sequential; both readings keep training parallel.

With none of these active a block runs torch.nn.functional.scaled_dot_product_attention (fused kernels) unless it
must report its weights (the decoder's last cross-attention, which the traces and diagnostics read).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from nmt_core.config import AttentionConfig
from nmt_core.registry import HEAD_POSITION_BIASES, HEAD_TEMPERATURES, SACT_READINGS, register


@dataclass
class HeadTrace:
    """What one attention block did, per head: weights and raw scores (B, heads, T, S); tau and gate (B, heads, T).
    None where the block has no such part (or ran the fused kernel, which gives no weights)."""

    weights: Tensor | None = None
    scores: Tensor | None = None
    tau: Tensor | None = None
    gate: Tensor | None = None


def shifted(x: Tensor, dim: int) -> Tensor:
    """x moved one position later along dim, zeros first: position i sees what was at i - 1."""
    first = torch.zeros_like(x.narrow(dim, 0, 1))
    return torch.cat([first, x.narrow(dim, 0, x.size(dim) - 1)], dim=dim)


# ---- SACT readings: what stands for c~_{t-1} inside a layer ------------------------------------------------


class SactReading(nn.Module):
    """The term beta gets from the previous position's context (B, heads, T); none for the query-only reading."""

    needs_first_pass = False

    def __init__(self, heads: int, head_size: int):
        super().__init__()

    def forward(self, previous: Tensor | None) -> Tensor | int:
        return 0


@register(SACT_READINGS, "query")
class QueryReading(SactReading):
    """beta_i = tanh(U_s x_i): the query alone. Cheapest, parallel; drops the paper's dependence on the past
    context, so it measures what an input-dependent temperature gives by itself."""


@register(SACT_READINGS, "first_pass")
class FirstPassReading(SactReading):
    """beta_i = tanh(W_c c0_{i-1} + U_s x_i), c0 the head's plain (tau = 1) context: keeps S eq. 2's dependence on
    what attention read at the previous position, computed for all positions at once."""

    needs_first_pass = True

    def __init__(self, heads: int, head_size: int):
        super().__init__(heads, head_size)
        self.W_c = nn.Parameter(torch.empty(heads, head_size).uniform_(-(head_size**-0.5), head_size**-0.5))

    def forward(self, previous: Tensor | None) -> Tensor | int:
        return torch.einsum("bhtd,hd->bht", previous, self.W_c)


# ---- temperatures per head ---------------------------------------------------------------------------------


class HeadTemperature(nn.Module):
    """tau (B, heads, T) from the block's input x (B, T, D) and c0_{i-1} (B, heads, T, d_k); None: tau = 1."""

    needs_first_pass = False

    def __init__(self, size: int, heads: int, cfg: AttentionConfig):
        super().__init__()
        self.cfg, self.heads = cfg, heads

    def forward(self, x: Tensor, previous: Tensor | None) -> Tensor | None:
        return None


@register(HEAD_TEMPERATURES, "none")
class NoHeadTemperature(HeadTemperature):
    """A plain softmax."""


@register(HEAD_TEMPERATURES, "fixed")
class FixedHeadTemperature(HeadTemperature):
    """softmax(e / tau), one constant for every head and position."""

    def forward(self, x: Tensor, previous: Tensor | None) -> Tensor | None:
        return x.new_full((x.size(0), self.heads, x.size(1)), self.cfg.tau)


@register(HEAD_TEMPERATURES, "sact")
class SactHeadTemperature(HeadTemperature):
    """tau = lambda^beta (S eq. 1) per head, beta = tanh(U_s x_i + reading) (S eq. 2; U_s has a bias only with
    `attention.sact_bias`); tau lies in (1/lambda, lambda)."""

    def __init__(self, size: int, heads: int, cfg: AttentionConfig):
        super().__init__(size, heads, cfg)
        self.U_s = nn.Linear(size, heads, bias=cfg.sact_bias)
        self.reading = SACT_READINGS[cfg.sact_reading](heads, size // heads)
        self.needs_first_pass = self.reading.needs_first_pass

    def forward(self, x: Tensor, previous: Tensor | None) -> Tensor | None:
        beta = torch.tanh(self.U_s(x).transpose(1, 2) + self.reading(previous))
        return torch.exp(beta * math.log(self.cfg.lambda_))


# ---- position biases per head ------------------------------------------------------------------------------


class HeadPositionBias(nn.Module):
    """A bias (B, heads, T, S) added to the scores from the queries (B, heads, T, d_k) and the real keys (B, S)."""

    def __init__(self, heads: int, head_size: int):
        super().__init__()

    def forward(self, q: Tensor, key_mask: Tensor) -> Tensor | None:
        return None


@register(HEAD_POSITION_BIASES, "none")
class NoHeadPositionBias(HeadPositionBias):
    """No localness."""


@register(HEAD_POSITION_BIASES, "gaussian")
class GaussianLocalness(HeadPositionBias):
    """Y eqs. 8-10 per head: P_i, D_i = I sigmoid(v^T tanh(W_p q_i)), G_ij = -(j - P_i)^2 / (2 (D_i / 2)^2)."""

    def __init__(self, heads: int, head_size: int):
        super().__init__(heads, head_size)
        bound = head_size**-0.5
        self.W_p = nn.Linear(head_size, head_size, bias=False)
        self.v_p = nn.Parameter(torch.empty(heads, head_size).uniform_(-bound, bound))
        self.v_d = nn.Parameter(torch.empty(heads, head_size).uniform_(-bound, bound))

    def forward(self, q: Tensor, key_mask: Tensor) -> Tensor | None:
        hidden = torch.tanh(self.W_p(q))
        length = key_mask.sum(-1).to(q.dtype)[:, None, None]  # I (B, 1, 1)
        centre = length * torch.sigmoid(torch.einsum("bhtd,hd->bht", hidden, self.v_p))  # P_i
        sigma = (length * torch.sigmoid(torch.einsum("bhtd,hd->bht", hidden, self.v_d)) / 2).clamp_min(1e-3)
        j = torch.arange(key_mask.size(-1), device=q.device, dtype=q.dtype)
        return -((j - centre.unsqueeze(-1)) ** 2) / (2 * sigma.unsqueeze(-1) ** 2)


class HeadSentinel(nn.Module):
    """s_i = g * tanh(W_s x_i), g = sigmoid(W_x x_i + W_t x_{i-1}) (A eqs. 7-8 with the block's input for the
    decoder state): what the decoder already knows, offered to every head as one more key and value."""

    def __init__(self, size: int):
        super().__init__()
        self.W_x = nn.Linear(size, size, bias=False)
        self.W_t = nn.Linear(size, size, bias=False)
        self.W_s = nn.Linear(size, size, bias=False)

    def forward(self, x: Tensor, x_previous: Tensor) -> Tensor:
        return torch.sigmoid(self.W_x(x) + self.W_t(x_previous)) * torch.tanh(self.W_s(x))


@dataclass(frozen=True)
class BlockParts:
    """Which mechanisms one attention block has (the transformer decides per block and layer)."""

    temperature: str = "none"
    position_bias: str = "none"
    sentinel: bool = False
    keep_weights: bool = False  # report weights even without a mechanism (the explicit path)
    fused: bool = True  # model.fast_path: scaled_dot_product_attention where no mechanism is active

    def explicit(self) -> bool:
        plain = self.temperature == "none" and self.position_bias == "none" and not self.sentinel
        return not (plain and self.fused and not self.keep_weights)


class MultiHeadAttention(nn.Module):
    """softmax(Q K^T / sqrt(d_k)) V over `heads` heads (V sec. 3.2.2), with the parts of `BlockParts`."""

    def __init__(self, size: int, heads: int, dropout: float, cfg: AttentionConfig, parts: BlockParts):
        super().__init__()
        self.heads, self.head_size, self.parts = heads, size // heads, parts
        self.W_Q, self.W_K, self.W_V, self.W_O = (nn.Linear(size, size) for _ in range(4))
        self.temperature = HEAD_TEMPERATURES[parts.temperature](size, heads, cfg)
        self.position = HEAD_POSITION_BIASES[parts.position_bias](heads, self.head_size)
        self.sentinel = HeadSentinel(size) if parts.sentinel else None
        self.dropout = dropout

    def split(self, x: Tensor) -> Tensor:
        """(B, T, D) -> (B, heads, T, d_k)."""
        return x.view(x.size(0), x.size(1), self.heads, self.head_size).transpose(1, 2)

    def keys_values(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """The keys and values of memory (B, S, D), each (B, heads, S, d_k): computed once per batch for a cross-
        attention, once per step (and cached) for a decoder self-attention."""
        return self.split(self.W_K(memory)), self.split(self.W_V(memory))

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
        keys (the localness' I). `carried`: what the previous position left (one decoding step); None: the T
        positions are all here and each reads the one before it. Returns the output, the trace and what this
        block carries to the next step."""
        q = self.split(self.W_Q(x))
        if not self.parts.explicit():
            dropout = self.dropout if self.training else 0.0
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=None if causal else mask, dropout_p=dropout, is_causal=causal
            )
            return self.W_O(out.transpose(1, 2).flatten(2)), HeadTrace(), {}
        if causal:  # position i reads keys 0..i
            mask = torch.ones(q.size(2), k.size(2), dtype=torch.bool, device=q.device).tril()[None, None]
        return self.explicit(x, q, k, v, mask, key_mask, carried)

    def previous(self, now: Tensor, carried: dict[str, Tensor] | None, name: str, dim: int) -> Tensor:
        """What position i - 1 had of `now` (its last position when decoding step by step)."""
        return shifted(now, dim) if carried is None else carried[name]

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
        """The attention with its mechanisms, spelled out (what the module docstring describes)."""
        e = raw = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_size)  # (B, h, T, S)
        keep = torch.ones_like(e, dtype=torch.bool) if mask is None else mask.expand_as(e)
        bias = self.position(q, key_mask) if key_mask is not None else None
        if bias is not None:
            e = e + bias
        carry: dict[str, Tensor] = {}
        previous = None
        if self.temperature.needs_first_pass:
            c0 = torch.matmul(softmax(e, keep).to(v.dtype), v)  # the first pass: tau = 1
            previous, carry["first_pass"] = self.previous(c0, carried, "first_pass", 2), c0[:, :, -1:]
        tau = self.temperature(x, previous)
        slot_v = None
        if self.sentinel is not None:
            sentinel = self.sentinel(x, self.previous(x, carried, "input", 1))
            carry["input"] = x[:, -1:]
            slot_k, slot_v = self.split(self.W_K(sentinel)), self.split(self.W_V(sentinel))
            slot = (q * slot_k).sum(-1, keepdim=True) / math.sqrt(self.head_size)  # A eq. 10 with this block's score
            e, keep = torch.cat([e, slot], -1), torch.cat([keep, keep.new_ones(*keep.shape[:-1], 1)], -1)
        if tau is not None:
            e = e / tau.unsqueeze(-1)
        alpha = softmax(e, keep).to(v.dtype)
        dropped = F.dropout(alpha, self.dropout, self.training)
        gate = None
        if slot_v is None:
            out = torch.matmul(dropped, v)
        else:  # c+ = beta s + sum_j alpha_j v_j (A eq. 9 per head); beta is the slot's weight
            out = torch.matmul(dropped[..., :-1], v) + dropped[..., -1:] * slot_v
            alpha, gate = alpha[..., :-1], alpha[..., -1]
        return self.W_O(out.transpose(1, 2).flatten(2)), HeadTrace(alpha, raw, tau, gate), carry


def softmax(e: Tensor, keep: Tensor) -> Tensor:
    """softmax over the last axis where `keep`; bf16 scores normalised in fp32, fp64 kept."""
    precise = torch.promote_types(e.dtype, torch.float32)
    return torch.softmax(e.masked_fill(~keep, float("-inf")).to(precise), dim=-1)
