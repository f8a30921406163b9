"""Greedy and batched beam search that keep the attention trace of every output token.

Both run the whole batch at once on the device: no Python loop over sentences or beams, and the only
host-device sync inside the step loop is an early-exit check every few steps. Attention parts that act only when a
trained model decodes (the entropy sharpening) act in both (`decodes`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial, wraps
from typing import TypeVar

import torch
from torch import Tensor

from nmt_core.config import DecodeConfig
from nmt_core.data.batches import Batch, Example, make_batches
from nmt_core.models.attention import AttentionOutput, decoding
from nmt_core.models.rnn import BOS, EOS, PAD, Seq2Seq

EXIT_CHECK_EVERY = 4  # steps between the (syncing) "is every sentence finished?" checks
# attention-trace cells (hypotheses x steps x source positions) one decoding batch may hold: 64 MB in float32, a
# few copies of it at once; batch_size sentences of ordinary length stay far below it
DECODE_CELLS = 2**24
Search = TypeVar("Search", bound=Callable[..., list])


def decodes(search: Search) -> Search:
    """A search over `model` (its first argument) with the model's decoding-only attention parts acting."""

    @wraps(search)
    def run(model: Seq2Seq, *args: object, **kwargs: object) -> list:
        with decoding(model):
            return search(model, *args, **kwargs)

    return run  # type: ignore[return-value]


@dataclass
class Translation:
    tokens: list[int]  # without </s>
    score: float  # sum of log-probabilities (beam: divided by length ** length_penalty)
    weights: Tensor  # (len(tokens), source length) attention weights on the CPU
    tau: list[float] | None  # tau_t per output token; None when temperature is `none`
    gate: list[float] | None  # sentinel gate beta_t per output token; None without the sentinel
    tau_heads: list[list[float]] | None = None  # the Transformer's tau per tempered head (Transformer.head_labels)


def max_length(batch: Batch, cfg: DecodeConfig) -> int:
    return steps_for(int(batch.src_lengths.max().item()), cfg)


def steps_for(src_len: int, cfg: DecodeConfig) -> int:
    """Decoding steps for a source of src_len tokens."""
    return int(src_len * cfg.max_len_ratio) + cfg.max_len_offset


@dataclass
class TraceBuffer:
    """Per-row output tokens and attention traces, preallocated for max_len steps."""

    tokens: Tensor  # (rows, max_len)
    weights: Tensor  # (rows, max_len, S)
    tau: Tensor  # (rows, max_len), NaN where absent
    gate: Tensor  # (rows, max_len), NaN where absent
    tau_heads: Tensor | None = None  # (rows, max_len, heads): a Transformer's tau per head, from its first step

    @classmethod
    def empty(cls, rows: int, max_len: int, src_len: int, like: Tensor) -> TraceBuffer:
        return cls(
            torch.full((rows, max_len), PAD, dtype=torch.long, device=like.device),
            like.new_zeros(rows, max_len, src_len),
            like.new_full((rows, max_len), float("nan")),
            like.new_full((rows, max_len), float("nan")),
        )

    def write(self, t: int, tokens: Tensor, out: AttentionOutput | StepTrace, rows: Tensor | None = None) -> None:
        """Column t gets tokens and the step's attention output (taken at `rows` when given)."""
        pick = (lambda x: x) if rows is None else (lambda x: x.index_select(0, rows))
        self.tokens[:, t] = tokens
        self.weights[:, t] = pick(out.weights).float()
        if out.tau is not None:
            self.tau[:, t] = pick(out.tau).float()
        if out.gate is not None:
            self.gate[:, t] = pick(out.gate).float()
        heads = getattr(out, "tau_heads", None)
        if heads is not None:
            if self.tau_heads is None:
                self.tau_heads = self.tau.new_full((*self.tau.shape, heads.size(-1)), float("nan"))
            self.tau_heads[:, t] = pick(heads).float()

    def translations(self, scores: Tensor, src_lengths: Tensor, has_tau: bool, has_gate: bool) -> list[Translation]:
        tokens, weights, tau, gate = (x.cpu() for x in (self.tokens, self.weights, self.tau, self.gate))
        heads = None if self.tau_heads is None else self.tau_heads.cpu()
        result = []
        for row, (seq, score) in enumerate(zip(tokens.tolist(), scores.cpu().tolist())):
            n = seq.index(EOS) if EOS in seq else len(seq)
            result.append(
                Translation(
                    seq[:n],
                    score,
                    weights[row, :n, : int(src_lengths[row])],
                    tau[row, :n].tolist() if has_tau else None,
                    gate[row, :n].tolist() if has_gate else None,
                    None if heads is None else heads[row, :n].tolist(),
                )
            )
        return result


@decodes
@torch.no_grad()
def greedy(model: Seq2Seq, batch: Batch, cfg: DecodeConfig) -> list[Translation]:
    memory, state = model.encode(batch.src, batch.src_lengths)
    rows, steps = batch.src.size(0), max_length(batch, cfg)
    y = torch.full((rows,), BOS, dtype=torch.long, device=batch.src.device)
    finished = torch.zeros(rows, dtype=torch.bool, device=y.device)
    scores = torch.zeros(rows, device=y.device)
    buffer = TraceBuffer.empty(rows, steps, batch.src.size(1), memory.values.float())
    has_tau = has_gate = False
    for t in range(steps):
        logits, state, out = model.decoder.step(y, state, memory)
        best, y = logits.float().log_softmax(dim=-1).max(dim=-1)  # log p(y), y = argmax, as beam search scores
        y = y.masked_fill(finished, PAD)
        scores = scores + best.masked_fill(finished, 0.0)
        buffer.write(t, y, out)
        has_tau, has_gate = out.tau is not None, out.gate is not None
        finished = finished | (y == EOS)
        if t % EXIT_CHECK_EVERY == EXIT_CHECK_EVERY - 1 and bool(finished.all()):
            break
    return buffer.translations(scores, batch.src_lengths, has_tau, has_gate)


@dataclass
class StepTrace:
    """What a trace keeps of a step's attention output: the weights, tau_t and the gate (not context or scores)."""

    weights: Tensor
    tau: Tensor | None
    gate: Tensor | None
    tau_heads: Tensor | None = None


@dataclass
class BeamHistory:
    """What every beam step produced, kept as back-pointers instead of copied traces.

    Step t's attention output `outs[t]` covers the rows alive before the step; the rows alive after it hold the
    tokens `tokens[t]` and came from rows `parents[t]` of the step before. A hypothesis is read back once, at the
    end, by following its parents, so a step costs no copy of the (rows, max_len, S) trace of every hypothesis.
    """

    outs: list[StepTrace] = field(default_factory=list)
    tokens: list[Tensor] = field(default_factory=list)
    parents: list[Tensor] = field(default_factory=list)

    def add(self, out: StepTrace, tokens: Tensor, parents: Tensor) -> None:
        self.outs.append(out)
        self.tokens.append(tokens)
        self.parents.append(parents)

    def read_back(
        self, last_step: Tensor, last_row: Tensor, last_token: Tensor, max_len: int, src_len: int
    ) -> TraceBuffer:
        """The trace of one hypothesis per sentence that ends at step last_step[n] (B,) with token last_token[n],
        its step read from row last_row[n] of the rows alive before that step."""
        buffer = TraceBuffer.empty(last_step.size(0), max_len, src_len, self.outs[0].weights.float())
        row, token = last_row, last_token
        for t in range(len(self.outs) - 1, -1, -1):
            ends_here, active = last_step == t, last_step >= t
            if t < len(self.outs) - 1:  # hypotheses that go on past t: their row after step t is `row`
                token = torch.where(ends_here, last_token, self.tokens[t].index_select(0, row))
                row = torch.where(ends_here, last_row, self.parents[t].index_select(0, row))
            buffer.write(t, token.masked_fill(~active, PAD), self.outs[t], rows=row)
        return buffer


@dataclass
class Beams:
    """What beam search carries from one step to the next, B sentences x K beams: every tensor of it, so that a whole
    step (the decoder, scores, top-k, the finished hypotheses, the reordering of the state) is one function of
    tensors that a CUDA graph can record once per batch shape and replay (`model.compile: graphs`)."""

    y: Tensor  # (B*K,) the tokens the next step reads
    scores: Tensor  # (B, K) each live hypothesis's summed log-probability
    best_score: Tensor  # (B,) the best finished hypothesis's normalised score so far (-inf: none yet)
    best_step: Tensor  # (B,) the step it ended at
    best_row: Tensor  # (B,) and the row it ended from
    n_finished: Tensor  # (B,) hypotheses finished


def beam_step(
    model: Seq2Seq, t: Tensor, divisor: Tensor, beams: Beams, state, memory, first_row: Tensor
) -> tuple[Beams, object, StepTrace, Tensor]:
    """One step of beam_search at position t (a 0-dim tensor; `divisor`: (t + 1) ** length_penalty): the new beams,
    the state reordered to them, the step's trace and the rows the new beams came from. As in fairseq: the top 2K
    candidates; an </s> among the top K finishes a hypothesis, the best K others stay alive."""
    n_sent, k = beams.scores.shape
    logits, state, out = model.decoder.step(beams.y, state, memory)
    logits = logits.float()
    vocab = logits.size(-1)
    candidates = logits.log_softmax(dim=-1).add_(beams.scores.view(-1, 1)).view(n_sent, -1)  # score + log p
    top_scores, top_index = candidates.topk(2 * k, dim=-1)
    top_beam, top_token = top_index // vocab, top_index % vocab
    # hypotheses that end here: </s> among the top K, for sentences not yet done
    ends = (top_token[:, :k] == EOS) & (beams.n_finished < k).unsqueeze(-1)
    normalised = (top_scores[:, :k] / divisor).masked_fill(~ends, float("-inf"))
    new_best, which = normalised.max(dim=-1)
    improve = new_best > beams.best_score
    source_rows = first_row + top_beam[:, :k].gather(1, which.unsqueeze(-1)).squeeze(-1)
    # the best K candidates that do not end stay alive
    keep_scores, keep = top_scores.masked_fill(top_token == EOS, float("-inf")).topk(k, dim=-1)
    rows = (first_row.unsqueeze(-1) + top_beam.gather(1, keep)).view(-1)
    after = Beams(
        y=top_token.gather(1, keep).view(-1),
        scores=keep_scores,
        best_score=torch.where(improve, new_best, beams.best_score),
        best_step=torch.where(improve, t, beams.best_step),
        best_row=torch.where(improve, source_rows, beams.best_row),
        n_finished=beams.n_finished + ends.sum(dim=-1),
    )
    return after, state.select(rows), StepTrace(out.weights, out.tau, out.gate, getattr(out, "tau_heads", None)), rows


@decodes
@torch.no_grad()
def beam_search(model: Seq2Seq, batch: Batch, cfg: DecodeConfig, beam_size: int) -> list[Translation]:
    """Batched beam search (B sentences x K beams as B*K rows), length-normalised finished hypotheses; each step is
    beam_step, replayed from a CUDA graph per batch shape when compile_model put one on the model (`beam_step`).
    A sentence is done once K hypotheses have finished. With K = 1 this is exactly greedy search."""
    k = beam_size
    n_sent, device = batch.src.size(0), batch.src.device
    memory, state = model.encode(batch.src, batch.src_lengths)
    memory, state = memory.for_hypotheses(k), state.select(torch.arange(n_sent, device=device).repeat_interleave(k))
    steps = max_length(batch, cfg)
    step = getattr(model, "beam_step", None) or partial(beam_step, model)
    history = BeamHistory()
    scores = torch.zeros(n_sent, k, device=device)
    scores[:, 1:] = float("-inf")  # at the start only the first beam is real
    beams = Beams(
        y=torch.full((n_sent * k,), BOS, dtype=torch.long, device=device),
        scores=scores,
        best_score=torch.full((n_sent,), float("-inf"), device=device),
        best_step=torch.zeros(n_sent, dtype=torch.long, device=device),
        best_row=torch.zeros(n_sent, dtype=torch.long, device=device),
        n_finished=torch.zeros(n_sent, dtype=torch.long, device=device),
    )
    first_row = torch.arange(n_sent, device=device) * k
    positions = torch.arange(steps, device=device)
    # the length penalty's divisors in double on the host, as Python computed them before, one upload per batch
    divisors = torch.tensor([(t + 1) ** cfg.length_penalty for t in range(steps)], dtype=torch.float32).to(device)
    for t in range(steps):
        beams, state, out, rows = step(positions[t], divisors[t], beams, state, memory, first_row)
        history.add(out, beams.y, rows)
        if t % EXIT_CHECK_EVERY == EXIT_CHECK_EVERY - 1 and bool((beams.n_finished >= k).all()):
            break
    # a sentence with no finished hypothesis by max length keeps its best live beam
    unfinished = torch.isinf(beams.best_score)
    last = len(history.outs) - 1
    best_step = torch.where(unfinished, last, beams.best_step)
    best_row = torch.where(unfinished, history.parents[last].index_select(0, first_row), beams.best_row)
    best_token = torch.where(unfinished, history.tokens[last].index_select(0, first_row), EOS)
    best_score = torch.where(unfinished, beams.scores[:, 0] / steps**cfg.length_penalty, beams.best_score)
    best = history.read_back(best_step, best_row, best_token, steps, batch.src.size(1))
    return best.translations(best_score, batch.src_lengths, out.tau is not None, out.gate is not None)


def translate(
    model: Seq2Seq,
    examples: list[Example],
    cfg: DecodeConfig,
    beam_size: int,
    batch_size: int,
    device: torch.device,
    bucket: int = 0,
) -> list[Translation]:
    """Translate examples (in their order) with greedy search for beam 1, else beam search.

    Batches hold at most batch_size sentences and DECODE_CELLS attention-trace cells: a long sentence decodes in a
    smaller batch (alone, at worst), so memory is bounded by decode.max_src_len, not by the input. `bucket` > 0:
    sources in length buckets that wide, each batch padded to its bucket (a captured step's shapes repeat)."""

    def cells(example: Example) -> int:
        return beam_size * len(example.src) * steps_for(len(example.src), cfg)

    model.eval()
    results: list[Translation | None] = [None] * len(examples)
    # in buckets by source length alone (the reference is not read); without buckets, batches as they always were
    sources = [Example(e.src, []) for e in examples] if bucket else examples
    for batch in make_batches(sources, batch_size, DECODE_CELLS, width=cells, bucket=bucket):
        batch = batch.to(device)
        decoded = greedy(model, batch, cfg) if beam_size == 1 else beam_search(model, batch, cfg, beam_size)
        for i, translation in zip(batch.index, decoded):
            results[i] = translation
    return results
