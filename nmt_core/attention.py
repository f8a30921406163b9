"""Attention = score x temperature x sentinel gate x coverage, each chosen independently.

One interface for every variant (the shape Sockeye and joeynmt use): the encoder side is projected once
per batch (`Attention.memory`), and each decoder step calls `forward(query, memory, state, step_input)`,
which returns the context, the weights and the next `AttentionState`. A variant keeps what it needs from
the previous step in that state, so the decoder never changes when a variant is added.

Notation: h_i encoder state i (size H, both directions concatenated), s_t decoder output at step t,
e_{t,i} score, alpha_{t,i} weight, c_t context.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

import torch
from torch import Tensor, nn

from nmt_core.config import AttentionConfig


@dataclass
class Memory:
    """The encoder side of attention, computed once per batch."""

    values: Tensor  # (B, S, H): what the context averages (h_i, or the value half for key_value)
    keys: Tensor  # (B, S, K): what the score compares against (projected once per batch)
    mask: Tensor  # (B, S) bool, True on real source tokens

    def select(self, index: Tensor) -> "Memory":
        return Memory(*(getattr(self, f.name).index_select(0, index) for f in fields(self)))


@dataclass
class AttentionState:
    """What a variant needs from the previous step; fields a variant does not use stay None."""

    prev_context: Tensor | None = None  # SACT: c~_{t-1}, (B, H); c~_0 = the decoder's initial state
    coverage: Tensor | None = None  # sum_{k<t} alpha_k, (B, S)
    prev_query: Tensor | None = None  # sentinel: t_{i-1}, the previous decoder output, (B, H)

    def select(self, index: Tensor) -> "AttentionState":
        return replace(self, **{f.name: getattr(self, f.name).index_select(0, index)
                                for f in fields(self) if getattr(self, f.name) is not None})


@dataclass
class AttentionOutput:
    context: Tensor  # (B, H): c_t, or c+_t with the sentinel
    weights: Tensor  # (B, S): weights on source positions (with the sentinel they sum to 1 - beta_t)
    tau: Tensor | None  # (B,): temperature tau_t; None when temperature is `none`
    gate: Tensor | None  # (B,): sentinel gate beta_t; None without the sentinel
    scores: Tensor  # (B, S): raw scores e_t before temperature and masking (diagnostics: saturation)


class Score(nn.Module):
    """e_{t,i} for every source position at once; `keys` turns h into what `forward` compares against."""

    def __init__(self, kind: str, hidden: int, coverage: bool = False):
        super().__init__()
        self.kind, self.hidden = kind, hidden
        if coverage:  # V in e = v^T tanh(W s + U h + V C) (concat only, checked by the config)
            self.coverage_V = nn.Parameter(torch.empty(hidden).uniform_(-hidden ** -0.5, hidden ** -0.5))
        if kind in ("general", "scaled_dot"):
            self.W = nn.Linear(hidden, hidden, bias=False)
        elif kind == "concat":  # v^T tanh(W_a [s; h]) = v^T tanh(W s + U h): no bias (Luong eq. 8, Bahdanau)
            self.W = nn.Linear(hidden, hidden, bias=False)  # W s
            self.U = nn.Linear(hidden, hidden, bias=False)  # U h
            self.v = nn.Linear(hidden, 1, bias=False)
        elif kind == "key_value":
            self.W_kv = nn.Linear(hidden, 2 * hidden, bias=False)  # [k_i; v_i] = W_kv h_i

    def memory(self, h: Tensor, mask: Tensor) -> Memory:
        if self.kind in ("general", "scaled_dot"):
            return Memory(values=h, keys=self.W(h), mask=mask)
        if self.kind == "concat":
            return Memory(values=h, keys=self.U(h), mask=mask)
        if self.kind == "key_value":
            key, value = self.W_kv(h).chunk(2, dim=-1)
            return Memory(values=value, keys=key, mask=mask)
        return Memory(values=h, keys=h, mask=mask)

    def forward(self, s: Tensor, memory: Memory, coverage: Tensor | None = None) -> Tensor:
        """coverage (B, S): C_{t-1}, fed inside the additive score (Tu et al. 2016 eq. 6); None without it."""
        if self.kind == "concat":  # e = v^T tanh(W s + U h [+ V C])   (Bahdanau, "additive")
            hidden = self.W(s).unsqueeze(1) + memory.keys
            if coverage is not None:
                hidden = hidden + coverage.unsqueeze(-1) * self.coverage_V
            return self.v(torch.tanh(hidden)).squeeze(-1)
        e = torch.bmm(memory.keys, s.unsqueeze(-1)).squeeze(-1)  # s^T h | s^T W h | s^T k
        if self.kind == "scaled_dot":  # s^T W h / sqrt(d)
            e = e / math.sqrt(self.hidden)
        return e


class Attention(nn.Module):
    def __init__(self, cfg: AttentionConfig, hidden: int, step_input_size: int):
        super().__init__()
        self.cfg = cfg
        self.score = Score(cfg.score, hidden, cfg.coverage)
        if cfg.temperature == "sact":
            self.sact_W_c = nn.Linear(hidden, 1, bias=False)  # W_c c~_{t-1}
            self.sact_U_s = nn.Linear(hidden, 1, bias=cfg.sact_bias)  # U_s s_t (eq. 2 has no bias)
        if cfg.sentinel:
            self.gate_W_x = nn.Linear(step_input_size, hidden, bias=True)  # W_x x_i (x_i: the decoder's input)
            self.gate_W_t = nn.Linear(hidden, hidden, bias=False)  # W_t t_{i-1}
            self.sentinel_W_s = nn.Linear(hidden, hidden, bias=False)  # W_s t_i
            self.slot_W = nn.Linear(hidden, hidden, bias=False)  # W_s s_i in eq. 10
            self.slot_U = nn.Linear(hidden, hidden, bias=True)  # U_a t_i in eq. 10
            self.slot_v = nn.Linear(hidden, 1, bias=False)  # W_h^T

    def memory(self, h: Tensor, mask: Tensor) -> Memory:
        return self.score.memory(h, mask)

    def initial_state(self, memory: Memory, decoder_init: Tensor) -> AttentionState:
        batch, src_len = memory.mask.shape
        return AttentionState(
            prev_context=decoder_init if self.cfg.temperature == "sact" else None,
            coverage=memory.keys.new_zeros(batch, src_len) if self.cfg.coverage else None,
            prev_query=decoder_init if self.cfg.sentinel else None,
        )

    def temperature(self, s: Tensor, state: AttentionState) -> Tensor | None:
        cfg = self.cfg
        if cfg.temperature == "fixed":
            return s.new_full(s.shape[:1], cfg.tau)
        if cfg.temperature == "sact":
            beta = torch.tanh(self.sact_W_c(state.prev_context) + self.sact_U_s(s)).squeeze(-1)  # eq. 2
            return torch.exp(beta * math.log(cfg.lambda_))  # tau_t = lambda^beta_t, eq. 1
        return None

    def forward(self, s: Tensor, memory: Memory, state: AttentionState,
                step_input: Tensor | None = None) -> tuple[AttentionOutput, AttentionState]:
        """One decoder step: s (B, H) the decoder output, step_input (B, *) its input (sentinel only)."""
        e = self.score(s, memory, state.coverage)  # (B, S)
        raw_scores, mask = e, memory.mask
        if self.cfg.sentinel:
            g = torch.sigmoid(self.gate_W_x(step_input) + self.gate_W_t(state.prev_query))  # eq. 7
            sentinel = g * torch.tanh(self.sentinel_W_s(s))  # eq. 8
            slot = self.slot_v(torch.tanh(self.slot_W(sentinel) + self.slot_U(s)))  # eq. 10
            e = torch.cat([e, slot], dim=-1)
            mask = torch.cat([mask, mask.new_ones(mask.size(0), 1)], dim=-1)
        tau = self.temperature(s, state)
        if tau is not None:
            e = e / tau.unsqueeze(-1)  # softmax(e / tau_t), eq. 4
        e = e.masked_fill(~mask, float("-inf"))  # padding never gets weight (after tau: no inf * 0 in backward)
        precise = torch.promote_types(e.dtype, torch.float32)  # bf16 logits normalised in fp32, fp64 kept
        alpha = torch.softmax(e.to(precise), dim=-1).to(memory.values.dtype)  # A eq. 11 with the sentinel slot
        gate = None
        if self.cfg.sentinel:
            alpha, gate = alpha[:, :-1], alpha[:, -1]  # beta_i = alpha^[J+1]; alpha^[:J] = (1 - beta) alpha
        context = torch.bmm(alpha.unsqueeze(1), memory.values).squeeze(1)  # c~_t = sum_i alpha~_ti h_i, S eq. 3
        if self.cfg.sentinel:
            context = context + gate.unsqueeze(-1) * sentinel  # c+ = beta s + (1 - beta) c, A eq. 9
        next_state = AttentionState(  # with the sentinel, SACT's c~_{t-1} is c+_{t-1}: the context attention gave
            prev_context=context if self.cfg.temperature == "sact" else None,
            coverage=state.coverage + alpha if self.cfg.coverage else None,  # C_t = C_{t-1} + alpha_t (Tu eq. 7, no fertility)
            prev_query=s if self.cfg.sentinel else None,
        )
        return AttentionOutput(context, alpha, tau, gate, raw_scores), next_state


def coverage_penalty(weights: Tensor, src_mask: Tensor, tgt_mask: Tensor) -> Tensor:
    """sum_j (1 - sum_i alpha_ij)^2 over real source positions j, summed over the batch.

    weights (B, T, S); the sum over target steps i counts real target tokens only.
    """
    attended = (weights * tgt_mask.unsqueeze(-1).to(weights.dtype)).sum(dim=1)  # (B, S)
    return ((1.0 - attended) ** 2 * src_mask.to(weights.dtype)).sum()
