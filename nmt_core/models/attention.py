"""The attention family's modules, one class per part, serving every architecture where it has a meaning, and
the one pipeline both architectures run: score (+ position bias) -> temperature -> the mechanisms' stages (the
sentinel's slot) -> softmax -> context.

Each part is declared torch-free under its config value (nmt_core.family.variants: its rules, label, settings and
diagnostics), and computed by one class here bound to that value (`@implements(SCORES, "concat")` ->
`ConcatScore`), the way Sockeye registers its attention types; an on/off mechanism (`attention.sentinel`) is bound
to its flag. A part is built for a `Site`: the RNN's attention step (`StepSite`) or one multi-head block of the
Transformer (nmt_core.models.multihead's `BlockSite`); it asks the site for what differs (the layout of tau, a per-head
vector, who projects the keys), never which architecture it is in. Both run `Pipeline`: the RNN's `Attention` one
decoder step at a time, a block all its heads and positions at once, through the same hooks, so a temperature, a
bias or a mechanism written once acts the same way in both; the masked fp32 softmax, SACT's tau = lambda^tanh(.),
the Gaussian bias and the sentinel's gate are each written once, here.

One interface for every variant (Sockeye, joeynmt): the encoder side is projected once per batch
(`Attention.memory`), and each decoder step calls `forward(query, memory, state, step_input)`, which
returns the context, the weights and the next `AttentionState`. A part that needs something from the
previous step (SACT's c~_{t-1}, the coverage vector, the sentinel's t_{i-1}) keeps it in that state
under its own name; a block's state (nmt_core.models.multihead's `BlockState`) shifts it from the position before.

Notation: h_i encoder state i (size H, both directions concatenated), s_t decoder output at step t,
e_{t,i} score, alpha_{t,i} weight, c_t context. Equations: Luong et al. 2015 (L), Vaswani et al. 2017 (V),
SACT (Lin et al. 2018, S), Li & Zhu 2017 (A), Tu et al. 2016 (T), Cohn et al. 2016 (C), Paulus et al. 2017 (P),
Yang et al. 2018 (Y, the slides' Gaussian bias G), the lecture on attention variants (lecture 003) and the
course report (report 004).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import Tensor, nn

from nmt_core.family.parts import Implementation, implements
from nmt_core.family.variants import MECHANISMS, NORMALISERS, POSITION_BIASES, SCORES, TEMPERATURES

if TYPE_CHECKING:
    from nmt_core.config import AttentionConfig

FERTILITY_MAX = 2.0  # N in f_j = N sigmoid(W_j h_j): a source word covers at most two target words (Tu et al.)
# Velickovic et al. 2024's fit of the inverse temperature to a row's entropy H (the polynomial of their code listing),
# highest power first, as numpy.polyval reads it: beta(H) = -0.037 H^4 + 0.481 H^3 - 2.3 H^2 + 4.917 H - 1.791
SHARPENING_POLYNOMIAL = (-0.037, 0.481, -2.3, 4.917, -1.791)


@dataclass(frozen=True)
class Site:
    """Where a part is built, which fixes the layout of what it reads and returns, and what the site offers in place
    of a part's own parameters. A part asks its site, never which architecture it is in.

    The RNN's step (`StepSite`: one head, one step at a time): the query s_t (B, H) is both what the step reads and
    the head's query; scores (B, S), tau and the gate one per row (B,). A Transformer block (`BlockSite`,
    nmt_core.models.multihead): x (B, T, D) the block's input, q (B, heads, T, d_k) the heads' queries, scores (B,
    heads, T, S), tau (B, heads, T)."""

    input_size: int  # what the step reads: s_t (H), or the block's input x (D)
    head_size: int  # a head's query and key: H, or d_k
    context_size: int  # the context c_t: the score's (H, H / 2 with key_value), or a head's (d_k)
    heads: int = 1
    step_input_size: int = 0  # the RNN decoder's input x_t (the sentinel's gate reads it)
    cell: str = ""  # the RNN decoder's cell: lstm | gru
    # the site projects its keys and values itself (a block's W^K, W^V): they stand for a score's own W, and they key,
    # value and score the sentinel's slot as the heads' own keys
    projects_keys: ClassVar[bool] = False

    def per_head(self, values: Tensor) -> Tensor:
        """(..., heads) values read from the step's input -> tau's layout: (B,) or (B, heads, T)."""
        raise NotImplementedError

    def head_vector(self, size: int) -> nn.Linear | nn.Parameter:
        """A vector v per head, v^T h one scalar per query (`head_scalars`)."""
        raise NotImplementedError

    def per_head_constant(self, values: Tensor) -> Tensor:
        """One value per head (heads,) shaped to broadcast over tau's layout: (1,) over (B,), (heads, 1) over
        (B, heads, T)."""
        raise NotImplementedError

    def past_context_weight(self) -> nn.Linear | None:
        """SACT's W_c where the site carries c~_{t-1}, the tempered context of the step before (the RNN's)."""
        return None

    def sact_reading(self, cfg: AttentionConfig) -> nn.Module | None:
        """What stands for SACT's c~_{t-1} where the site does not carry it (a block's `attention.sact_reading`)."""
        return None


@dataclass(frozen=True)
class StepSite(Site):
    """The RNN decoder's attention step."""

    def per_head(self, values: Tensor) -> Tensor:
        return values.squeeze(-1)

    def head_vector(self, size: int) -> nn.Linear:
        return nn.Linear(size, 1, bias=False)

    def per_head_constant(self, values: Tensor) -> Tensor:
        return values

    def past_context_weight(self) -> nn.Linear:
        return nn.Linear(self.context_size, 1, bias=False)


# ---- the maths the architectures share ------------------------------------------------------------------


def masked_softmax(e: Tensor, keep: Tensor | None) -> Tensor:
    """softmax over the last axis where `keep` (None: everywhere); padding gets exactly 0 (masked after tau: no
    inf * 0 in backward). bf16 scores are normalised in fp32, fp64 kept."""
    if keep is not None:
        e = e.masked_fill(~keep, float("-inf"))
    precise = torch.promote_types(e.dtype, torch.float32)
    return torch.softmax(e.to(precise), dim=-1)


def real_keys(keep: Tensor | None, e: Tensor) -> Tensor:
    """n, the number of keys each query reads (True in `keep`; all of e's last axis where None), in tau's layout."""
    if keep is None:
        return e.new_full(e.shape[:-1], e.size(-1))
    return keep.sum(-1).to(e.dtype)


def log_keys(n: Tensor) -> Tensor:
    """log n, read as log 2 where a query has a single key: its weight is 1 at any scale, and tau stays finite."""
    return torch.log(n.clamp_min(2))


def share(flags: Tensor, keep: Tensor | None) -> Tensor:
    """The share of each query's real keys where `flags` holds (per token, per head): a diagnostic, no gradient."""
    if keep is None:
        return flags.float().mean(-1)
    return (flags & keep).sum(-1).float() / keep.sum(-1).clamp_min(1).float()


def entmax_threshold(x: Tensor, alpha: Tensor) -> Tensor:
    """tau* with sum_i [x_i - tau*]_+^(1 / (alpha - 1)) = 1 for x = (alpha - 1) z, by bisection (Peters et al. 2019
    sec. 3; Blondel et al. 2019): the sum falls as tau grows, from >= 1 at max(x) - 1 (the largest term is 1) to
    <= 1 at max(x) - (1 / n)^(alpha - 1) (every term at most 1 / n). Halving that bracket once per bit of the
    mantissa leaves it below the dtype's resolution."""
    power = 1 / (alpha - 1)
    top = x.amax(-1, keepdim=True)
    low, high = top - 1, top - x.size(-1) ** -(alpha - 1)
    for _ in range(round(-math.log2(torch.finfo(x.dtype).eps)) + 2):  # mantissa bits + 2
        middle = (low + high) / 2
        enough = (x - middle).clamp_min(0).pow(power).sum(-1, keepdim=True) >= 1
        low, high = torch.where(enough, middle, low), torch.where(enough, high, middle)
    return low


class EntmaxBisect(torch.autograd.Function):
    """alpha-entmax(z)_i = [(alpha - 1) z_i - tau*]_+^(1 / (alpha - 1)) (Peters et al. 2019; Correia et al. 2019; the
    papers after SACT are not in the project's collection, so they are cited by name, not equation number): alpha ->
    1 is softmax, 2 sparsemax; masked keys (z = -inf) get exactly 0. Its gradients in closed form, not through the
    bisection's comparisons: with g = p^(2 - alpha) on the support, dp/dz = diag(g) - g g^T / sum(g) (Peters et al.),
    and dp/dalpha = (p - g^) / (alpha - 1)^2 - (p log p - g^ sum_j p_j log p_j) / (alpha - 1), g^ = g / sum(g)
    (Correia et al.), both held to gradcheck. `alpha` broadcasts over z's rows (one per head)."""

    @staticmethod
    def forward(ctx: Any, z: Tensor, alpha: Tensor) -> Tensor:
        x = (alpha - 1) * z
        p = (x - entmax_threshold(x, alpha)).clamp_min(0).pow(1 / (alpha - 1))
        p = p / p.sum(-1, keepdim=True)  # the last bisection step's residue
        ctx.save_for_backward(p, alpha)
        return p

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor | None]:
        p, alpha = ctx.saved_tensors
        support = p > 0
        g = torch.where(support, p.pow(2 - alpha), 0.0)
        skewed = g / g.sum(-1, keepdim=True)  # g^
        grad_z = g * grad - skewed * (g * grad).sum(-1, keepdim=True)
        if not ctx.needs_input_grad[1]:
            return grad_z, None
        plogp = torch.where(support, p * p.clamp_min(torch.finfo(p.dtype).tiny).log(), 0.0)
        dp = (p - skewed) / (alpha - 1) ** 2 - (plogp - skewed * plogp.sum(-1, keepdim=True)) / (alpha - 1)
        return grad_z, (grad * dp).sum(-1, keepdim=True).sum_to_size(alpha.shape)


def masked_entmax(e: Tensor, keep: Tensor | None, alpha: Tensor) -> Tensor:
    """alpha-entmax over the last axis where `keep`, in fp32 or fp64 as masked_softmax normalises: padding gets 0."""
    if keep is not None:
        e = e.masked_fill(~keep, float("-inf"))
    precise = torch.promote_types(e.dtype, torch.float32)
    return EntmaxBisect.apply(e.to(precise), alpha.to(precise))


def entropy_sharpening(e: Tensor, keep: Tensor | None, threshold: float) -> tuple[Tensor, Tensor]:
    """Velickovic et al. 2024's adaptive temperature: a row's logits times beta = max(poly(H), 1) where its softmax's
    entropy H (nats) exceeds `threshold`, else 1 (their code: sharpen only, never soften; leave low-entropy rows
    be). Returns the logits and beta."""
    p = masked_softmax(e, keep)
    entropy = -torch.where(p > 0, p * p.clamp_min(1e-30).log(), 0.0).sum(-1)
    fit = torch.zeros_like(entropy)
    for coefficient in SHARPENING_POLYNOMIAL:  # Horner's rule, highest power first
        fit = fit * entropy + coefficient
    beta = torch.where(entropy > threshold, fit.clamp_min(1.0), torch.ones_like(entropy))
    return e * beta.unsqueeze(-1).to(e.dtype), beta


def lambda_power(beta_input: Tensor, lam: float) -> Tensor:
    """tau = lambda^beta with beta = tanh(beta_input) (S eqs. 1-2): tau lies in (1/lambda, lambda)."""
    return torch.exp(torch.tanh(beta_input) * math.log(lam))


def gaussian_bias(length: Tensor, centre_input: Tensor, width_input: Tensor, j: Tensor) -> Tensor:
    """G_ij = -(j - P_i)^2 / (2 sigma_i^2) with P_i = I sigmoid(centre_input), D_i = I sigmoid(width_input),
    sigma_i = D_i / 2 (Y eqs. 8-10); I the source length, j = 0 .. I - 1. sigma is kept above 1e-3: a bf16
    sigmoid can reach 0."""
    centre = length * torch.sigmoid(centre_input)  # P_i
    sigma = (length * torch.sigmoid(width_input) / 2).clamp_min(1e-3)  # D_i / 2
    return -((j - centre) ** 2) / (2 * sigma**2)


def head_scalars(hidden: Tensor, v: nn.Linear | Tensor) -> Tensor:
    """v^T hidden for every query: (B, 1) from the RNN's nn.Linear(size, 1), (B, heads, T, 1) from a Transformer
    block's (heads, size) vectors, one per head."""
    if isinstance(v, nn.Linear):
        return v(hidden)
    return torch.einsum("bhtd,hd->bht", hidden, v).unsqueeze(-1)


def with_slot(e: Tensor, keep: Tensor | None, slot: Tensor) -> tuple[Tensor, Tensor | None]:
    """One more softmax slot after the source's (the sentinel's, A eq. 11): scores and mask along the last axis."""
    if keep is not None:
        keep = torch.cat([keep, keep.new_ones(*keep.shape[:-1], 1)], dim=-1)
    return torch.cat([e, slot], dim=-1), keep


def split_slot(alpha: Tensor) -> tuple[Tensor, Tensor]:
    """The weights on the source and the slot's weight beta: alpha^[:J] = (1 - beta) alpha, beta = alpha^[J+1]."""
    return alpha[..., :-1], alpha[..., -1]


def mix_slot(context: Tensor, beta: Tensor, value: Tensor) -> Tensor:
    """c+ = beta s + (1 - beta) c (A eq. 9): `context` already weighs the source by (1 - beta) alpha."""
    return context + beta.unsqueeze(-1) * value


@dataclass
class Memory:
    """The encoder side of attention, computed once per batch.

    Beam search decodes R = B * k rows, k hypotheses per sentence; they share their sentence's values and keys
    instead of k copies, so that a step reads each sentence's memory once (one small matrix product per sentence,
    not k matrix-vector products over copies).
    """

    values: Tensor  # (B, S, H): what the context averages (h_i)
    keys: Tensor  # (B, S, K): what the score compares against (projected once per batch)
    mask: Tensor  # (R, S) bool, True on real source tokens
    rows_per_sentence: int = 1

    def for_hypotheses(self, k: int) -> Memory:
        """The memory of k consecutive rows per sentence (beam search's hypotheses)."""
        return Memory(self.values, self.keys, self.mask.repeat_interleave(k, dim=0), k)

    def by_sentence(self, rows: Tensor) -> Tensor:
        """(R, *) -> (B, k, *)."""
        return rows.view(-1, self.rows_per_sentence, *rows.shape[1:])

    def match(self, query: Tensor) -> Tensor:
        """k_i^T q for every row's query (R, K) and source position i -> (R, S)."""
        if self.rows_per_sentence == 1:  # a matrix-vector product per row, rounded as training always has been
            return torch.bmm(self.keys, query.unsqueeze(-1)).squeeze(-1)
        return torch.bmm(self.by_sentence(query), self.keys.transpose(1, 2)).flatten(0, 1)  # (B, k, S) -> (R, S)

    def plus_keys(self, projected: Tensor) -> Tensor:
        """k_i + p for every row's p (R, K) and source position i -> (R, S, K): an additive score's tanh input."""
        return (self.by_sentence(projected).unsqueeze(2) + self.keys.unsqueeze(1)).flatten(0, 1)

    def average(self, weights: Tensor) -> Tensor:
        """sum_i alpha_i h_i for every row's weights (R, S) -> (R, H)."""
        return torch.bmm(self.by_sentence(weights), self.values).flatten(0, 1)


@dataclass
class AttentionState:
    """What parts carry from step to step, under their names ("sact": c~_{t-1}, "coverage": C, "sentinel": t_{i-1})."""

    parts: dict[str, Tensor]

    def __getitem__(self, name: str) -> Tensor | None:
        return self.parts.get(name)

    def before(self, name: str, now: Tensor) -> Tensor:
        """What the part `name` had at the step before of what it reads now (the sentinel's t_{i-1}): what it kept
        (a Transformer block's state shifts `now` instead)."""
        return self.parts[name]

    def select(self, index: Tensor) -> AttentionState:
        return AttentionState({name: value.index_select(0, index) for name, value in self.parts.items()})


@dataclass
class AttentionOutput:
    context: Tensor  # (B, H): c_t, or c+_t with the sentinel
    weights: Tensor  # (B, S): weights on source positions (with the sentinel they sum to 1 - beta_t)
    tau: Tensor | None  # (B,): temperature tau_t; None when temperature is `none`
    gate: Tensor | None  # (B,): sentinel gate beta_t; None without the sentinel
    scores: Tensor  # (B, S): raw scores e_t before temperature and masking (diagnostics: saturation)
    observed: dict[str, Tensor] = field(default_factory=dict)  # (B,) each: what the parts observe (Part.observes)


# ---- scores: e_{t,i} for every source position at once -------------------------------------------


class Score(nn.Module, Implementation):
    """The RNN: `memory` turns h into what `forward` compares s against (the base class compares s with h itself).
    A Transformer block: `head_scores` compares its heads' queries with their keys, which the block projects (its
    W_Q and W_K stand for the score's own W): a score that serves the Transformer says how."""

    fused: ClassVar[bool] = False  # torch's scaled_dot_product_attention computes it (a block may run fused)

    def __init__(self, site: Site, cfg: AttentionConfig):
        super().__init__()
        self.hidden = site.head_size
        self.context_size = self.context_size_of(self.hidden)

    @staticmethod
    def context_size_of(hidden: int) -> int:
        """The size of c_t (what the values have)."""
        return hidden

    def memory(self, h: Tensor, mask: Tensor) -> Memory:
        return Memory(values=h, keys=self.keys(h), mask=mask)

    def keys(self, h: Tensor) -> Tensor:
        return h

    def forward(self, s: Tensor, memory: Memory, state: AttentionState) -> Tensor:
        return memory.match(s)

    def head_scores(self, q: Tensor, k: Tensor) -> Tensor:
        """e (B, heads, T, S) of a Transformer block from q (B, heads, T, d_k) and k (B, heads, S, d_k)."""
        raise NotImplementedError(f"attention.score {self.name} has no form for a Transformer's heads")

    def slot_scores(self, q: Tensor, k: Tensor) -> Tensor:
        """(B, heads, T, 1): each query position against a key of its own (a block's sentinel slot)."""
        return self.head_scores(q.unsqueeze(-2), k.unsqueeze(-2)).squeeze(-1)

    def takes_position_inside(self) -> bool:
        """Whether Cohn et al.'s position features go inside this score's tanh (C eq. 3) or are added to it."""
        return False

    def encoder_projection(self) -> nn.Linear | None:
        """U_a of an additive score (A eq. 6), which the sentinel's slot shares (A eq. 10); None elsewhere."""
        return None


@implements(SCORES, "dot")
class DotScore(Score):
    """e = s^T h (L eq. 8); in a Transformer block q^T k, unscaled."""

    def head_scores(self, q: Tensor, k: Tensor) -> Tensor:
        return torch.matmul(q, k.transpose(-1, -2))

    def slot_scores(self, q: Tensor, k: Tensor) -> Tensor:
        return (q * k).sum(-1, keepdim=True)


@implements(SCORES, "general")
class GeneralScore(Score):
    """e = s^T W h (L eq. 8, "multiplicative"); W h is computed once per batch."""

    def __init__(self, site: Site, cfg: AttentionConfig):
        super().__init__(site, cfg)
        if not site.projects_keys:  # a Transformer block's W is its own W_Q^T W_K (scaled_dot)
            self.W = nn.Linear(self.hidden, self.hidden, bias=False)

    def keys(self, h: Tensor) -> Tensor:
        return self.W(h)


@implements(SCORES, "concat")
class ConcatScore(Score):
    """e = v^T tanh(W s + U h) (L eq. 8 "concat", Bahdanau "additive"; no bias), with coverage inside the tanh:
    e = v^T tanh(W s + U h + V C_{t-1}) (T eq. 6), and so are the log position features: + W_p psi (C eq. 3)."""

    def __init__(self, site: Site, cfg: AttentionConfig):
        super().__init__(site, cfg)
        hidden = self.hidden
        self.W = nn.Linear(hidden, hidden, bias=False)  # W s
        self.U = nn.Linear(hidden, hidden, bias=False)  # U h
        self.v = nn.Linear(hidden, 1, bias=False)
        if cfg.coverage:
            self.coverage_V = nn.Parameter(torch.empty(hidden).uniform_(-(hidden**-0.5), hidden**-0.5))

    def keys(self, h: Tensor) -> Tensor:
        return self.U(h)

    def encoder_projection(self) -> nn.Linear | None:
        return self.U

    def takes_position_inside(self) -> bool:
        return True

    def forward(self, s: Tensor, memory: Memory, state: AttentionState, inside: Tensor | None = None) -> Tensor:
        hidden = memory.plus_keys(self.W(s))
        if state["coverage"] is not None:
            hidden = hidden + state["coverage"].unsqueeze(-1) * self.coverage_V
        if inside is not None:
            hidden = hidden + inside
        return self.v(torch.tanh(hidden)).squeeze(-1)


@implements(SCORES, "scaled_dot")
class ScaledDotScore(GeneralScore):
    """e = s^T W h / sqrt(d) (V eq. 1; the course report's scaled dot product). A Transformer's own score: in its
    blocks W is W_Q^T W_K, so e = q^T k / sqrt(d_k), what torch's fused kernel computes."""

    fused = True

    def forward(self, s: Tensor, memory: Memory, state: AttentionState) -> Tensor:
        return super().forward(s, memory, state) / math.sqrt(self.hidden)

    def head_scores(self, q: Tensor, k: Tensor) -> Tensor:
        return torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.hidden)

    def slot_scores(self, q: Tensor, k: Tensor) -> Tensor:
        return (q * k).sum(-1, keepdim=True) / math.sqrt(self.hidden)


@implements(SCORES, "key_value")
class KeyValueScore(Score):
    """Daniluk et al. 2017 (the course report's key-value attention): each hidden state is split into a key
    half and a value half, e = w^T tanh(W_Y k_j + W_h k_t) with k_t the key half of s_t, c = sum alpha v_j.

    Each encoder direction's output is split (k_j = [->h_j[:H/4]; <-h_j[:H/4]], v_j the other quarters), so
    both directions feed key and value; the context has H/2 units. W_Y k_j is computed once per batch.
    """

    def __init__(self, site: Site, cfg: AttentionConfig):
        super().__init__(site, cfg)
        hidden = self.hidden
        self.W_Y = nn.Linear(hidden // 2, hidden // 2, bias=False)  # W^Y k_j
        self.W_h = nn.Linear(hidden // 2, hidden // 2, bias=False)  # W^h k_t
        self.w = nn.Linear(hidden // 2, 1, bias=False)

    @staticmethod
    def context_size_of(hidden: int) -> int:
        return hidden // 2

    def memory(self, h: Tensor, mask: Tensor) -> Memory:
        forward, backward = h.chunk(2, dim=-1)  # the encoder's two directions, H/2 each
        (fk, fv), (bk, bv) = forward.chunk(2, dim=-1), backward.chunk(2, dim=-1)
        return Memory(values=torch.cat([fv, bv], dim=-1), keys=self.W_Y(torch.cat([fk, bk], dim=-1)), mask=mask)

    def forward(self, s: Tensor, memory: Memory, state: AttentionState) -> Tensor:
        key = s[:, : self.hidden // 2]  # k_t: the key half of the decoder output
        return self.w(torch.tanh(memory.plus_keys(self.W_h(key)))).squeeze(-1)


# ---- temperature: the softmax's divisor tau_t, and what it keeps from the last step -------------------


class Temperature(nn.Module, Implementation):
    """tau (None: a plain softmax) from the step's input and, where the part `reads_context`, the context attention
    gave at the step before; tau comes back in the site's layout, (B,) or (B, heads, T).

    The RNN hands `forward` s_t (B, H) and what the part keeps in the attention state under its name (its
    `initial_state` and `next_state`: SACT's c~_{t-1}, the tempered context of the step before). A Transformer block
    hands it x (B, T, D) and c0_{i-1} (B, heads, T, d_k), each head's context at the position before from a first
    pass at tau = 1: a block that carried its own tempered context would make its positions sequential."""

    reads_context = False
    reads_keys: ClassVar[bool] = False  # `forward` also takes n, the number of keys each query reads (tau's layout)

    def __init__(self, site: Site, cfg: AttentionConfig):
        super().__init__()
        self.site, self.cfg = site, cfg

    def initial_state(self, decoder_init: Tensor) -> dict[str, Tensor]:
        return {}

    def forward(self, query: Tensor, previous: Tensor | None) -> Tensor | None:
        return None

    def next_state(self, context: Tensor) -> dict[str, Tensor]:
        return {}

    def per_query(self, values: Tensor, query: Tensor) -> Tensor:
        """One value per head (heads,) -> tau's layout for the step's queries: (B,) or (B, heads, T)."""
        return self.site.per_head(values.expand(*query.shape[:-1], self.site.heads))

    def observe(self, tau: Tensor, query: Tensor) -> dict[str, Tensor]:
        """What it reports per token beside tau (its declaration's `observes`)."""
        return {}


class BaseScaled(Temperature):
    """tau = tau_0 x tau', tau_0 = exp(log tau_0) one learned scale per head, log tau_0 = 0 at the start
    (`attention.sact_base`): SACT (or its learned control) modulates around a scale of its own, so that in a block
    whose logits' only scale is the temperature (qk_norm) lambda^beta need not supply all of it."""

    def __init__(self, site: Site, cfg: AttentionConfig):
        super().__init__(site, cfg)
        self.log_tau0 = nn.Parameter(torch.zeros(site.heads)) if cfg.sact_base else None  # 1-D: kept at 0

    def based(self, modulation: Tensor, query: Tensor) -> Tensor:
        """tau = tau_0 lambda^beta (no base: lambda^beta itself)."""
        return modulation if self.log_tau0 is None else torch.exp(self.per_query(self.log_tau0, query)) * modulation

    def observe(self, tau: Tensor, query: Tensor) -> dict[str, Tensor]:
        if self.log_tau0 is None:
            return {}
        return {"tau_modulation": tau / torch.exp(self.per_query(self.log_tau0, query))}  # lambda^beta


@implements(TEMPERATURES, "none")
class NoTemperature(Temperature):
    """A plain softmax (tau = 1, reported as None)."""


@implements(TEMPERATURES, "fixed")
class FixedTemperature(Temperature):
    """softmax(e / tau) with a constant tau, for every head and position."""

    def forward(self, query: Tensor, previous: Tensor | None) -> Tensor | None:
        return self.site.per_head(query.new_full((*query.shape[:-1], self.site.heads), self.cfg.tau))


@implements(TEMPERATURES, "sact")
class SelfAdaptiveTemperature(BaseScaled):
    """SACT: tau_t = lambda^beta_t (S eq. 1), beta_t = tanh(W_c c~_{t-1} + U_s s_t) (S eq. 2, no bias unless
    `attention.sact_bias`); tau_t lies in (1/lambda, lambda), or in (tau_0/lambda, tau_0 lambda) with a base scale.

    The RNN carries the paper's c~_{t-1}, c~_0 = the decoder's initial state. A Transformer block has one U_s row per
    head, reading x_i for s_t, and reads c~_{t-1} as `attention.sact_reading` says (nmt_core.models.multihead: the query
    alone, or the head's first-pass context at i - 1)."""

    def __init__(self, site: Site, cfg: AttentionConfig):
        super().__init__(site, cfg)
        self.W_c = site.past_context_weight()  # W_c c~_{t-1} where the site carries c~_{t-1} (the RNN)
        self.U_s = nn.Linear(site.input_size, site.heads, bias=cfg.sact_bias)  # U_s s_t, one row per head
        self.reading = site.sact_reading(cfg)  # what stands for c~_{t-1} elsewhere (a Transformer block)
        self.reads_context = self.reading is None or self.reading.needs_first_pass

    def initial_state(self, decoder_init: Tensor) -> dict[str, Tensor]:
        # c~_0: the decoder's initial state (its last context_size units when the context is smaller: key_value)
        return {"sact": decoder_init[:, decoder_init.size(-1) - self.site.context_size :]}

    def forward(self, query: Tensor, previous: Tensor | None) -> Tensor | None:
        beta_input = self.site.per_head(self.U_s(query)) + self.read(previous)
        return self.based(lambda_power(beta_input, self.cfg.lambda_), query)  # S eqs. 1-2

    def read(self, previous: Tensor | None) -> Tensor | int:
        """W_c c~_{t-1}: the site's own c~_{t-1}, or the reading that stands for it."""
        return self.site.per_head(self.W_c(previous)) if self.reading is None else self.reading(previous)

    def next_state(self, context: Tensor) -> dict[str, Tensor]:
        # with the sentinel the context is c+: neither paper defines the combination; c~ is what attention gave
        return {"sact": context}


@implements(TEMPERATURES, "learned")
class LearnedTemperature(BaseScaled):
    """tau = lambda^tanh(b) (S eqs. 1-2 without their input): one learned scalar b per model, or per head of each
    tempered Transformer block, b = 0 at the start (tau = 1); tau lies in (1/lambda, lambda) like SACT's.

    SACT without its input: it can learn the scale SACT settles on, but not vary it by token, so it is the control
    that tells adaptivity from a learned rescaling."""

    def __init__(self, site: Site, cfg: AttentionConfig):
        super().__init__(site, cfg)
        self.b = nn.Parameter(torch.zeros(site.heads))  # 1-D: the Transformer's 2-D re-initialisation leaves it 0

    def forward(self, query: Tensor, previous: Tensor | None) -> Tensor | None:
        tau = lambda_power(self.b, self.cfg.lambda_)  # (heads,)
        return self.based(self.site.per_head(tau.expand(*query.shape[:-1], self.site.heads)), query)


@implements(TEMPERATURES, "sact_released")
class ReleasedSactTemperature(Temperature):
    """SACT as its released code computes it (DESIGN): tau_t = e^beta_t, lambda fixed at e, and beta_t =
    tanh(MLP([c~_{t-1}; s_t])), a two-layer MLP in place of S eq. 2's two linear maps. Its width (H) and its hidden
    tanh are our reading: what is known of the code says "a two-layer MLP" and no more. The RNN only: the code's
    model has no input feeding and sums the encoder's directions, which the declaration's rules ask of the config."""

    reads_context = True

    def __init__(self, site: Site, cfg: AttentionConfig):
        super().__init__(site, cfg)
        size = site.input_size
        self.mlp = nn.Sequential(nn.Linear(site.context_size + size, size), nn.Tanh(), nn.Linear(size, site.heads))

    def initial_state(self, decoder_init: Tensor) -> dict[str, Tensor]:
        return {self.name: decoder_init[:, decoder_init.size(-1) - self.site.context_size :]}  # c~_0, as SACT's

    def forward(self, query: Tensor, previous: Tensor | None) -> Tensor | None:
        return lambda_power(self.site.per_head(self.mlp(torch.cat([previous, query], dim=-1))), math.e)

    def next_state(self, context: Tensor) -> dict[str, Tensor]:
        return {self.name: context}


class LengthScaledTemperature(Temperature):
    """1 / tau = s log n, n the number of keys a query reads (`real_keys`: the source length in cross-attention, i + 1
    in a causal self-attention): Scalable-Softmax's p = softmax(s log(n) z) (Nakanishi 2025), the logits' scale
    growing with the keys that dilute them. s starts at 1 / log(n_train) (`attention.train_keys`): the plain softmax
    at n = n_train."""

    reads_keys = True

    def s(self, like: Tensor) -> Tensor:
        """s per head (heads,), in `like`'s dtype and device."""
        raise NotImplementedError

    def forward(self, query: Tensor, previous: Tensor | None, keys: Tensor | None = None) -> Tensor | None:
        return 1 / (self.per_query(self.s(query), query) * log_keys(keys))  # tau = 1 / (s log n)

    def observe(self, tau: Tensor, query: Tensor) -> dict[str, Tensor]:
        return {"log_n_scale": 1 / tau}  # s log n


@implements(TEMPERATURES, "ssmax")
class ScalableSoftmax(LengthScaledTemperature):
    """SSMax with s learned per head (one per model in the RNN), as Nakanishi learns one per layer and head."""

    def __init__(self, site: Site, cfg: AttentionConfig):
        super().__init__(site, cfg)
        self.scale = nn.Parameter(torch.full((site.heads,), 1 / math.log(cfg.train_keys)))  # 1-D: kept as set

    def s(self, like: Tensor) -> Tensor:
        return self.scale


@implements(TEMPERATURES, "ssmax_fixed")
class FixedLogScale(LengthScaledTemperature):
    """SSMax's fixed control: s = 1 / log(n_train), logits times log(n) / log(n_train), nothing learned."""

    def s(self, like: Tensor) -> Tensor:
        return like.new_full((self.site.heads,), 1 / math.log(self.cfg.train_keys))


@implements(TEMPERATURES, "selective")
class SelectiveTemperature(Temperature):
    """Zhang et al. 2024's query temperature (Selective Self-Attention), the query's logits times 1 / tau_i =
    tau_pos(n_i) + tau_tok(x_i), tau_pos = 1 + sigmoid(a) log n_i, tau_tok = tanh(w^T x_i), per head: a learned
    scalar, w a learned vector. n_i is the number of keys query i reads (the paper's causal language model reads i of
    them; in cross-attention the source length). The paper's value temperature and weight sharing are left out:
    this is the query-side temperature, SACT's closest modern relative (tau from the token; SACT adds the context)."""

    reads_keys = True

    def __init__(self, site: Site, cfg: AttentionConfig):
        super().__init__(site, cfg)
        self.a = nn.Parameter(torch.zeros(site.heads))  # sigmoid(a) = 1/2 at the start; 1-D: kept at 0
        self.w = nn.Linear(site.input_size, site.heads, bias=False)  # w^T x_i, one row per head

    def forward(self, query: Tensor, previous: Tensor | None, keys: Tensor | None = None) -> Tensor | None:
        position = 1 + self.per_query(torch.sigmoid(self.a), query) * log_keys(keys)  # tau_pos
        token = torch.tanh(self.site.per_head(self.w(query)))  # tau_tok
        return 1 / (position + token)


# ---- on/off mechanisms: each an attention.* flag, hooked into the pipeline's stages ----------------------


@dataclass
class Step:
    """What one attention step offers the parts, and what a mechanism keeps between its own stages within the step
    (`own`, under its name). The RNN's: s_t, the decoder's input x_t, the LSTM's memory cell m_t; a Transformer
    block's: its input x for both s and x, and `keyed`, the block's own keys, values and score for a slot."""

    s: Tensor  # what the temperature and the sentinel read: s_t (B, H), or the block's input (B, T, D)
    x: Tensor | None  # what the sentinel's gate reads beside it
    cell: Tensor | None
    state: AttentionState  # what the parts had at the step (or position) before
    average: Callable[[Tensor], Tensor]  # weights over the source -> the context
    dtype: torch.dtype  # the values' (weights are cast to it after the fp32 softmax)
    keyed: Callable[[Tensor], tuple[Tensor, Tensor]] | None = None  # a slot's vector -> its value and its score
    tau: Tensor | None = None
    own: dict[str, Tensor] = field(default_factory=dict)
    observed: dict[str, Tensor] = field(default_factory=dict)  # per token (tau's layout): what the parts report


class Mechanism(nn.Module, Implementation):
    """An on/off part of the pipeline. Each stage is a hook of the pipeline (`Pipeline`, which both architectures
    run) that passes its input through unchanged unless the mechanism acts there; the stages run in the pipeline's
    order whatever the order of declaration."""

    needs_memory_cell = False  # reads the LSTM's memory cell m_t, so the decoder must step its RNN one token at a time

    def __init__(self, site: Site, cfg: AttentionConfig, score: Score):
        """One signature for every mechanism: the site, the config, and the score (whose projection one may share)."""
        super().__init__()

    def initial_state(self, memory: Memory, decoder_init: Tensor) -> dict[str, Tensor]:
        return {}

    def adjust(self, e: Tensor, step: Step) -> Tensor:
        """The source scores after temperature (B, S)."""
        return e

    def extend(self, e: Tensor, mask: Tensor, step: Step) -> tuple[Tensor, Tensor]:
        """Extra softmax slots after the source's: scores (B, S + n) and mask."""
        return e, mask

    def split(self, alpha: Tensor, gate: Tensor | None) -> tuple[Tensor, Tensor | None]:
        """The softmax's output -> the weights on source positions and a gate."""
        return alpha, gate

    def mix(self, context: Tensor, gate: Tensor | None, step: Step) -> Tensor:
        """The context the decoder reads."""
        return context

    def final(self, e: Tensor, mask: Tensor | None, step: Step) -> Tensor:
        """The logits' last change before the normaliser, every slot's (soft-capping, the decoding's sharpening)."""
        return e

    def next_state(self, step: Step, weights: Tensor) -> dict[str, Tensor]:
        return {}

    def trace(self, memory: Memory) -> dict[str, Tensor]:
        """What it adds to the decoder's trace (DecoderTrace fields) once per batch."""
        return {}


# ---- the sentinel: an extra softmax slot the decoder can attend to instead of the source ----------------


@implements(MECHANISMS, "sentinel")
class Sentinel(Mechanism):
    """Li & Zhu's attention sentinel: a vector of what the decoder already knows, scored as one more softmax slot.

    g = sigmoid(W_x x_i + W_t t_{i-1}) (A eq. 7); s_i = g * tanh(W_s t_i) for a GRU decoder (A eq. 8), and
    s_i = g * tanh(m_i) from the LSTM's memory cell m_i (Lu et al. 2017, as A's footnote 2 directs); the slot's
    score W_h^T tanh(W_s s_i + U_a t_i) (A eq. 10) shares W_s with eq. 8 (GRU) and U_a with the additive score
    of eq. 6 (concat; other scores have no U_a, and the slot gets its own).

    In a Transformer block x_i is the block's input and stands for t_i too (x_{i-1} for t_{i-1}): s_i = g *
    tanh(W_s x_i), offered to every head as one more key and value, which the block's own W^K and W^V project and
    its score scores (nmt_core.models.multihead).
    """

    def __init__(self, site: Site, cfg: AttentionConfig, score: Score):
        super().__init__(site, cfg, score)
        size = site.input_size
        self.from_memory_cell = self.needs_memory_cell = site.cell == "lstm"
        self.W_x = nn.Linear(site.step_input_size, size, bias=False)  # W_x x_i (x_i: the decoder's input)
        self.W_t = nn.Linear(size, size, bias=False)  # W_t t_{i-1}
        self.W_s = nn.Linear(size, size, bias=False)  # W_s of eq. 8 and eq. 10 (LSTM: eq. 10's only)
        if not site.projects_keys:  # the slot's own score (A eq. 10); a block keys and scores it as its heads' own
            shared_U_a = score.encoder_projection()
            self.U_a = shared_U_a if shared_U_a is not None else nn.Linear(size, size, bias=False)
            self.W_h = nn.Linear(size, 1, bias=False)

    def vector(self, x: Tensor, previous: Tensor, content: Tensor) -> Tensor:
        """s_i = g * tanh(content), g = sigmoid(W_x x_i + W_t t_{i-1}) (A eqs. 7-8)."""
        return torch.sigmoid(self.W_x(x) + self.W_t(previous)) * torch.tanh(content)

    def initial_state(self, memory: Memory, decoder_init: Tensor) -> dict[str, Tensor]:
        return {"sentinel": decoder_init}  # t_0

    def forward(self, step: Step) -> tuple[Tensor, Tensor]:
        """The slot's value and score: the sentinel vector s_i and W_h^T tanh(W_s s_i + U_a t_i) (A eq. 10), or what
        a block's own keys, values and score make of s_i; the content is the LSTM's memory cell m_i (Lu et al.)."""
        previous = step.state.before(self.name, step.s)  # t_{i-1}
        sentinel = self.vector(step.x, previous, step.cell if self.from_memory_cell else self.W_s(step.s))
        if step.keyed is not None:
            return step.keyed(sentinel)
        return sentinel, self.W_h(torch.tanh(self.W_s(sentinel) + self.U_a(step.s)))  # A eq. 10

    def extend(self, e: Tensor, mask: Tensor, step: Step) -> tuple[Tensor, Tensor]:
        step.own["sentinel"], slot = self(step)
        if step.tau is not None:
            slot = slot / step.tau.unsqueeze(-1)  # the slot is a logit like the others: tau divides it too
        return with_slot(e, mask, slot)

    def split(self, alpha: Tensor, gate: Tensor | None) -> tuple[Tensor, Tensor | None]:
        return split_slot(alpha)  # beta_i = alpha^[J+1]; alpha^[:J] = (1 - beta) alpha

    def mix(self, context: Tensor, gate: Tensor | None, step: Step) -> Tensor:
        return mix_slot(context, gate, step.own["sentinel"])  # c+ = beta s + (1 - beta) c, A eq. 9

    def next_state(self, step: Step, weights: Tensor) -> dict[str, Tensor]:
        return {"sentinel": step.s}  # t_{i-1} of the next step


# ---- the logits' last stage: soft-capping, and the decoding's entropy sharpening ------------------------


@implements(MECHANISMS, "softcap")
class Softcap(Mechanism):
    """Gemma 2's logit soft-capping (Gemma Team 2024): z <- c tanh(z / c) on every logit the normaliser reads,
    after the temperature, so that no logit leaves (-c, c): a fixed bound on how sharp attention can be, where SACT's
    is a bound on tau. Reports the share of each token's real logits beyond the cap (|z| > c)."""

    def __init__(self, site: Site, cfg: AttentionConfig, score: Score):
        super().__init__(site, cfg, score)
        self.cap = cfg.cap

    def final(self, e: Tensor, mask: Tensor | None, step: Step) -> Tensor:
        step.observed["capped"] = share(e.detach().abs() > self.cap, mask)
        return self.cap * torch.tanh(e / self.cap)


@implements(MECHANISMS, "entropy_sharpening")
class EntropySharpening(Mechanism):
    """Velickovic et al. 2024's adaptive temperature, at decoding only (`entropy_sharpening`): inside `decoding(model)`
    (greedy and beam search) each head's row whose entropy exceeds `attention.entropy_threshold` is sharpened;
    training, the dev loss and the teacher-forced traces run the model as trained. `plain_decoding(model)` turns it
    off for the control, the same checkpoint decoded plainly."""

    def __init__(self, site: Site, cfg: AttentionConfig, score: Score):
        super().__init__(site, cfg, score)
        self.threshold, self.decoding, self.plain = cfg.entropy_threshold, False, False

    def final(self, e: Tensor, mask: Tensor | None, step: Step) -> Tensor:
        if not self.decoding or self.plain:
            return e
        e, beta = entropy_sharpening(e, mask, self.threshold)
        step.observed["sharpening"] = beta
        return e


def decoding_parts(model: nn.Module) -> list[EntropySharpening]:
    return [m for m in model.modules() if isinstance(m, Mechanism) and MECHANISMS[m.name].decodes_only]


@contextmanager
def decoding(model: nn.Module) -> Iterator[None]:
    """Decoding-only parts act inside this block (greedy and beam search open it)."""
    parts = decoding_parts(model)
    for part in parts:
        part.decoding = True
    try:
        yield
    finally:
        for part in parts:
            part.decoding = False


@contextmanager
def plain_decoding(model: nn.Module) -> Iterator[None]:
    """Decoding-only parts stay off inside this block, even while decoding: their control, the same checkpoint."""
    parts = decoding_parts(model)
    for part in parts:
        part.plain = True
    try:
        yield
    finally:
        for part in parts:
            part.plain = False


# ---- normalisers: the logits -> the weights --------------------------------------------------------------


class Normaliser(nn.Module, Implementation):
    """The weights from the logits over the last axis, masked keys at exactly 0 (`attention.normaliser`)."""

    def __init__(self, site: Site, cfg: AttentionConfig):
        super().__init__()
        self.site, self.cfg = site, cfg

    def forward(self, e: Tensor, keep: Tensor | None) -> Tensor:
        raise NotImplementedError

    def observe(self, weights: Tensor, keep: Tensor | None) -> dict[str, Tensor]:
        """What it reports per token beside the weights (its declaration's `observes`)."""
        return {}


@implements(NORMALISERS, "softmax")
class Softmax(Normaliser):
    def forward(self, e: Tensor, keep: Tensor | None) -> Tensor:
        return masked_softmax(e, keep)


@implements(NORMALISERS, "entmax")
class Entmax(Normaliser):
    """alpha-entmax with a fixed alpha (`masked_entmax`); reports the share of each token's real keys at exactly 0."""

    def alpha(self, like: Tensor) -> Tensor:
        """alpha per head (heads,), in `like`'s dtype and device."""
        return like.new_full((self.site.heads,), self.cfg.alpha)

    def rows(self, e: Tensor) -> Tensor:
        """alpha per head, shaped to broadcast over e's rows (B, S) or (B, heads, T, S)."""
        return self.site.per_head_constant(self.alpha(e)).unsqueeze(-1)

    def forward(self, e: Tensor, keep: Tensor | None) -> Tensor:
        return masked_entmax(e, keep, self.rows(e))

    def observe(self, weights: Tensor, keep: Tensor | None) -> dict[str, Tensor]:
        return {"zeros": share(weights == 0, keep)}


@implements(NORMALISERS, "entmax_learned")
class LearnedEntmax(Entmax):
    """Correia, Niculae and Martins 2019: alpha = 1 + sigmoid(a) in (1, 2), a learned per head (one per model in the
    RNN), from attention.alpha at the start: 1.5, the fixed control's, by default. Reports alpha per token and head
    beside the share of exact zeros."""

    def __init__(self, site: Site, cfg: AttentionConfig):
        super().__init__(site, cfg)
        start = cfg.alpha - 1
        self.a = nn.Parameter(torch.full((site.heads,), math.log(start / (1 - start))))  # 1-D: kept as set

    def alpha(self, like: Tensor) -> Tensor:
        return 1 + torch.sigmoid(self.a)

    def observe(self, weights: Tensor, keep: Tensor | None) -> dict[str, Tensor]:
        alpha = self.rows(weights).squeeze(-1).expand(weights.shape[:-1])
        return {"alpha": alpha, **super().observe(weights, keep)}


# ---- position bias: what the scores get from where j lies in the source and i in the target ------------


class PositionBias(nn.Module, Implementation):
    """A term from positions: added to the scores, or (`inside`: the score has a tanh to put it in) returned for
    the additive score's tanh (B, S, H). It reads the head's query: s_t (B, H), or a Transformer block's heads'
    q (B, heads, T, d_k); `mask` (B, S) marks the real source positions (keys)."""

    def __init__(self, site: Site, cfg: AttentionConfig, score: Score):
        super().__init__()
        self.inside = score.takes_position_inside()

    def initial_state(self, memory: Memory) -> dict[str, Tensor]:
        return {}

    def forward(self, query: Tensor, mask: Tensor, state: AttentionState) -> tuple[Tensor | None, Tensor | None]:
        """(bias added to the scores, term for inside the score's tanh); None where there is none."""
        return None, None

    def next_state(self, state: AttentionState) -> dict[str, Tensor]:
        return {}


@implements(POSITION_BIASES, "none")
class NoPositionBias(PositionBias):
    """Attention sees no positions."""


@implements(POSITION_BIASES, "log")
class LogPositionBias(PositionBias):
    """Cohn et al. 2016: psi(j, i, I) = [log(1 + j), log(1 + i), log(1 + I)] (source position j, target position i,
    source length I, counted from 1) enters the additive score inside its tanh, + W_p psi (C eq. 3). A score
    without a tanh (dot, general, scaled dot, key-value) gets the same features through one of its own:
    e + v_p^T tanh(W_p psi). W_p psi is linear, so its source part W_p [log(1 + j); 0; log(1 + I)] is computed once
    per batch ("position_source"); each step adds the target column times log(1 + i), i counted in "position"."""

    def __init__(self, site: Site, cfg: AttentionConfig, score: Score):
        super().__init__(site, cfg, score)
        hidden = site.head_size
        self.W_p = nn.Linear(3, hidden, bias=False)
        if not self.inside:
            self.v_p = nn.Linear(hidden, 1, bias=False)

    def initial_state(self, memory: Memory) -> dict[str, Tensor]:
        mask = memory.mask
        dtype = memory.keys.dtype
        j = torch.arange(1, mask.size(1) + 1, device=mask.device, dtype=dtype).expand(mask.shape)
        length = mask.sum(-1, keepdim=True).to(dtype).expand(mask.shape)
        psi = torch.log1p(torch.stack([j, torch.zeros_like(j), length], dim=-1))  # psi(j, 0, I): no target part
        return {
            "position": mask.new_ones(mask.size(0), dtype=torch.long),  # i = 1
            "position_source": self.W_p(psi),
        }

    def forward(self, query: Tensor, mask: Tensor, state: AttentionState) -> tuple[Tensor | None, Tensor | None]:
        i = torch.log1p(state["position"].to(query.dtype))  # log(1 + i)
        target = i[:, None, None] * self.W_p.weight[:, 1]  # the target column of W_p times log(1 + i)
        hidden = state["position_source"] + target  # W_p psi(j, i, I)
        return (None, hidden) if self.inside else (self.v_p(torch.tanh(hidden)).squeeze(-1), None)

    def next_state(self, state: AttentionState) -> dict[str, Tensor]:
        return {"position": state["position"] + 1, "position_source": state["position_source"]}


@implements(POSITION_BIASES, "gaussian")
class GaussianPositionBias(PositionBias):
    """The slides' locality bias (001; Yang et al. 2018): logits + G, G_ij = -(j - P_i)^2 / (2 sigma_i^2), with the
    centre P_i = I sigmoid(v_p^T tanh(W_p q_i)) and the window D_i = I sigmoid(v_d^T tanh(W_p q_i)), sigma_i = D_i / 2
    (Y eqs. 8-10), I the source length (the real keys), j = 0 .. I - 1, q_i the query: s_t in the RNN, each head's
    in a Transformer block, where W_p is shared by the heads and v_p and v_d are each head's own."""

    def __init__(self, site: Site, cfg: AttentionConfig, score: Score):
        super().__init__(site, cfg, score)
        size = site.head_size
        self.W_p = nn.Linear(size, size, bias=False)
        self.v_p, self.v_d = site.head_vector(size), site.head_vector(size)  # each head's own

    def forward(self, query: Tensor, mask: Tensor, state: AttentionState) -> tuple[Tensor | None, Tensor | None]:
        hidden = torch.tanh(self.W_p(query))
        centre, width = head_scalars(hidden, self.v_p), head_scalars(hidden, self.v_d)  # v^T tanh(W_p q_i)
        length = mask.sum(-1).to(query.dtype).view(-1, *[1] * (centre.dim() - 1))  # I
        j = torch.arange(mask.size(-1), device=query.device, dtype=query.dtype)
        return gaussian_bias(length, centre, width, j), None  # G_i


def intra_temporal(z: Tensor, past: Tensor) -> tuple[Tensor, Tensor]:
    """Paulus et al. 2017 eq. 3 in log space: e'_ti = exp(e_ti) / sum_{j<t} exp(e_ji), e'_1i = exp(e_1i).

    z (B, S) this step's logits, past (B, S) log sum_{j<t} exp(z_ji) (-inf before the first step); returns
    log e'_t (normalised by the softmax, P eq. 4) and the running sum including this step.
    """
    return torch.where(torch.isneginf(past), z, z - past), torch.logaddexp(past, z)


@implements(MECHANISMS, "intra_temporal")
class IntraTemporal(Mechanism):
    """Paulus et al.'s intra-temporal attention: each step's scores divided by the past steps' (`intra_temporal`)."""

    def initial_state(self, memory: Memory, decoder_init: Tensor) -> dict[str, Tensor]:
        return {"intra_temporal": memory.keys.new_full(memory.mask.shape, float("-inf"))}  # no past step

    def adjust(self, e: Tensor, step: Step) -> Tensor:
        e, step.own["intra_temporal"] = intra_temporal(e, step.state["intra_temporal"])  # P eq. 3
        return e

    def next_state(self, step: Step, weights: Tensor) -> dict[str, Tensor]:
        return {"intra_temporal": step.own["intra_temporal"]}


@implements(MECHANISMS, "coverage")
class Coverage(Mechanism):
    """Tu et al.'s coverage vector C_t = C_{t-1} + alpha_t (T eq. 7), C_0 = 0, which the additive score reads
    inside its tanh (ConcatScore, T eq. 6)."""

    def initial_state(self, memory: Memory, decoder_init: Tensor) -> dict[str, Tensor]:
        return {"coverage": memory.keys.new_zeros(memory.mask.shape)}  # C_0 = 0

    def next_state(self, step: Step, weights: Tensor) -> dict[str, Tensor]:
        return {"coverage": step.state["coverage"] + weights}  # C_t = C_{t-1} + alpha_t (T eq. 7)


@implements(MECHANISMS, "fertility")
class Fertility(Mechanism):
    """f_j = N sigmoid(W_j h_j) (lecture 003; Tu et al. 2016 eq. 11 with N = 2): how many target words h_j covers."""

    def __init__(self, site: Site, cfg: AttentionConfig, score: Score):
        super().__init__(site, cfg, score)
        self.W_j = nn.Linear(site.head_size, 1, bias=False)

    def forward(self, h: Tensor) -> Tensor:
        return FERTILITY_MAX * torch.sigmoid(self.W_j(h)).squeeze(-1)

    def trace(self, memory: Memory) -> dict[str, Tensor]:
        return {"fertility": self(memory.values)}  # f_j from h_j


# ---- self-attention over a side's own states (report 004) ---------------------------------------------


class SelfAttention(nn.Module):
    """One head of scaled dot-product attention over a set of states (report 004, V eq. 1):
    softmax((W^Q q)(W^K k)^T / sqrt(H)) applied to the states themselves (the report projects no values)."""

    def __init__(self, hidden: int):
        super().__init__()
        self.W_Q = nn.Linear(hidden, hidden, bias=False)
        self.W_K = nn.Linear(hidden, hidden, bias=False)

    def forward(self, queries: Tensor, states: Tensor, keys: Tensor, mask: Tensor | None = None) -> Tensor:
        """queries (B, Q, H) over states and their keys W^K states (B, K, H), mask (B, K) -> contexts (B, Q, H)."""
        e = torch.bmm(self.W_Q(queries), keys.transpose(1, 2)) / math.sqrt(queries.size(-1))
        alpha = masked_softmax(e, None if mask is None else mask.unsqueeze(1))
        return torch.bmm(alpha.to(states.dtype), states)


class Pipeline(nn.Module):
    """The attention family's pipeline, one for both architectures: scores (+ position bias) -> temperature -> the
    mechanisms' stages (intra-temporal, the sentinel's slot) -> softmax -> context. The RNN's `Attention` runs it at
    each decoder step, a Transformer block (nmt_core.models.multihead) for all its heads and positions at once; each
    builds the parts for its `Site`, computes the scores its way and says what stands for SACT's c~_{t-1}
    (`context_before`). Each on/off mechanism is a submodule under its flag's name."""

    def build_parts(self, site: Site, cfg: AttentionConfig, parts: dict[str, str], flags: set[str]) -> None:
        """The score, temperature and position bias `parts` names (by attention.* key), and the mechanisms in
        `flags`, in the pipeline's order."""
        self.score = SCORES.implementation(parts["score"])(site, cfg)
        self.temperature = TEMPERATURES.implementation(parts["temperature"])(site, cfg)
        self.position = POSITION_BIASES.implementation(parts["position_bias"])(site, cfg, self.score)
        self.normaliser = NORMALISERS.implementation(parts.get("normaliser", "softmax"))(site, cfg)
        self.mechanisms: list[Mechanism] = []
        for name in MECHANISMS:  # in the pipeline's order, which the declarations keep
            if name in flags:
                self.add_module(name, MECHANISMS.implementation(name)(site, cfg, self.score))
                self.mechanisms.append(getattr(self, name))

    def context_before(self, e: Tensor, mask: Tensor | None, step: Step) -> Tensor | None:
        """What the temperature reads as the context of the step before: what it kept under its name (the RNN's
        c~_{t-1})."""
        return step.state[self.temperature.name]

    def tau_of(self, e: Tensor, mask: Tensor | None, step: Step) -> Tensor | None:
        """tau from the step's query, the context before where the temperature reads one, and the number of keys
        where it reads that (SSMax); what it observes goes to the step's `observed`."""
        keys = (real_keys(mask, e),) if self.temperature.reads_keys else ()
        tau = self.temperature(step.s, self.context_before(e, mask, step), *keys)
        if tau is not None:
            with torch.no_grad():
                step.observed.update(self.temperature.observe(tau, step.s))
        return tau

    def weigh(self, e: Tensor, mask: Tensor | None, step: Step) -> tuple[Tensor, Tensor | None]:
        """Scores with their position bias -> the weights over the source and the mechanisms' slots (in the values'
        dtype) and tau."""
        tau = step.tau = self.tau_of(e, mask, step)
        if tau is not None:
            e = e / tau.unsqueeze(-1)  # softmax(e / tau_t), S eq. 4
        for part in self.mechanisms:
            e = part.adjust(e, step)  # intra-temporal, P eq. 3
        for part in self.mechanisms:
            e, mask = part.extend(e, mask, step)  # the sentinel's slot, A eq. 10
        for part in self.mechanisms:
            e = part.final(e, mask, step)  # soft-capping; the decoding's entropy sharpening
        alpha = self.normaliser(e, mask)  # A eq. 11 with the sentinel slot; or alpha-entmax
        with torch.no_grad():
            step.observed.update(self.normaliser.observe(alpha, mask))
        return alpha.to(step.dtype), tau

    def split(self, alpha: Tensor) -> tuple[Tensor, Tensor | None]:
        """The weights -> those on source positions and the gate (the sentinel's beta_t)."""
        gate = None
        for part in self.mechanisms:
            alpha, gate = part.split(alpha, gate)
        return alpha, gate

    def read(self, alpha: Tensor, step: Step) -> tuple[Tensor, Tensor, Tensor | None]:
        """The context from the weights, and the weights on source positions and the gate it was read with."""
        alpha, gate = self.split(alpha)
        context = step.average(alpha)  # c~_t = sum_i alpha~_ti h_i, S eq. 3
        for part in self.mechanisms:
            context = part.mix(context, gate, step)  # c+ = beta s + (1 - beta) c, A eq. 9
        return context, alpha, gate


class Attention(Pipeline):
    """The RNN decoder's attention, one step at a time."""

    def __init__(self, cfg: AttentionConfig, hidden: int, step_input_size: int, decoder_cell: str = "lstm"):
        super().__init__()
        self.cfg = cfg
        context = SCORES.implementation(cfg.score).context_size_of(hidden)
        site = StepSite(hidden, hidden, context, step_input_size=step_input_size, cell=decoder_cell)
        parts = {key: getattr(cfg, key) for key in ("score", "temperature", "position_bias", "normaliser")}
        self.build_parts(site, cfg, parts, {name for name in MECHANISMS if getattr(cfg, name)})
        self.context_size = self.score.context_size
        self.needs_memory_cell = any(m.needs_memory_cell for m in self.mechanisms)

    def memory(self, h: Tensor, mask: Tensor) -> Memory:
        return self.score.memory(h, mask)

    def initial_state(self, memory: Memory, decoder_init: Tensor) -> AttentionState:
        parts = self.temperature.initial_state(decoder_init)
        for part in self.mechanisms:
            parts.update(part.initial_state(memory, decoder_init))
        parts.update(self.position.initial_state(memory))
        return AttentionState(parts)

    def forward(
        self,
        s: Tensor,
        memory: Memory,
        state: AttentionState,
        step_input: Tensor | None = None,
        cell: Tensor | None = None,
    ) -> tuple[AttentionOutput, AttentionState]:
        """One decoder step: s (B, H) the query (the decoder's state where the placement attends from); the
        sentinel also reads step_input (B, *), the decoder's input, and (LSTM) cell (B, H), its memory cell."""
        bias, inside = self.position(s, memory.mask, state)  # W_p psi inside an additive score's tanh (C eq. 3)
        e = raw_scores = self.score(s, memory, state, inside) if inside is not None else self.score(s, memory, state)
        # e_t: L eq. 8 (with coverage inside the tanh: T eq. 6)
        if bias is not None:
            e = e + bias  # v_p^T tanh(W_p psi) (C) or G (Y)
        step = Step(s, step_input, cell, state, memory.average, memory.values.dtype)
        alpha, tau = self.weigh(e, memory.mask, step)
        context, alpha, gate = self.read(alpha, step)
        parts = self.temperature.next_state(context)
        for part in self.mechanisms:
            parts.update(part.next_state(step, alpha))
        parts.update(self.position.next_state(state))
        return AttentionOutput(context, alpha, tau, gate, raw_scores, step.observed), AttentionState(parts)


def coverage_penalty(weights: Tensor, src_mask: Tensor, tgt_mask: Tensor, fertility: Tensor | None = None) -> Tensor:
    """sum_j (f_j - sum_i alpha_ij)^2 over real source positions j (f_j = 1 without fertility), summed over the
    batch (lecture 003).

    weights (B, T, S), fertility (B, S); the sum over target steps i counts real target tokens only.
    """
    attended = (weights * tgt_mask.unsqueeze(-1).to(weights.dtype)).sum(dim=1)  # (B, S)
    target = 1.0 if fertility is None else fertility
    return ((target - attended) ** 2 * src_mask.to(weights.dtype)).sum()
