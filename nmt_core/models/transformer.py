"""The Transformer encoder-decoder (Vaswani et al. 2017, V), `model.arch: transformer`, beside the RNN.

It offers what decoding and training ask of the RNN's Seq2Seq: `encode(src, lengths) -> (memory, state)`,
`decoder.step(y, state, memory) -> (logits, state, attention output)` with `state.select` and
`memory.for_hypotheses` for beam search, and `forward(src, lengths, tgt_in, positions) -> (logits, trace)`.
A decoding step feeds one position through every layer against the keys and values the earlier steps left in
the state (a KV cache), so step t costs O(t), not O(t^2).

Layer norm is pre-norm by default: x + f(LN(x)), with a last LN on each stack (Xiong et al. 2020; Nguyen & Salazar
2019). Its gradients stay well scaled at every depth, so a small model trains at a constant rate or a short
warm-up without tuning; post-norm LN(x + f(x)), the paper's, needs the warm-up to settle. joeynmt 2.3's code
defaults to pre-norm in its encoder layers (encoders.py), post-norm in its decoder (decoders.py) and adds the
final LN only where `layer_norm: pre` is set, so its configs name it; here both stacks follow `model.norm`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from nmt_core.models.attention import AttentionOutput
from nmt_core.models.multihead import BlockParts, HeadTrace, MultiHeadAttention
from nmt_core.models.rnn import PAD, DecoderTrace

if TYPE_CHECKING:
    from nmt_core.config import AttentionConfig, ModelConfig


def sinusoids(start: int, length: int, size: int, like: Tensor) -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i + 1) = cos(...) (V sec. 3.5) for positions start..."""
    position = torch.arange(start, start + length, device=like.device, dtype=torch.float32).unsqueeze(1)
    rate = torch.exp(torch.arange(0, size, 2, device=like.device, dtype=torch.float32) * (-math.log(10000.0) / size))
    table = torch.zeros(length, size, device=like.device)
    table[:, 0::2] = torch.sin(position * rate)
    table[:, 1::2] = torch.cos(position * rate)[:, : size // 2]
    return table.to(like.dtype)


class Residual(nn.Module):
    """x + dropout(f(LN(x))) (pre-norm) or LN(x + dropout(f(x))) (post-norm, V sec. 5.4)."""

    def __init__(self, size: int, dropout: float, pre: bool):
        super().__init__()
        self.norm, self.dropout, self.pre = nn.LayerNorm(size), nn.Dropout(dropout), pre

    def forward(self, x: Tensor, f: Callable[[Tensor], Tensor]) -> Tensor:
        if self.pre:
            return x + self.dropout(f(self.norm(x)))
        return self.norm(x + self.dropout(f(x)))


def feed_forward(cfg: ModelConfig) -> nn.Sequential:
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2 (V eq. 2)."""
    return nn.Sequential(
        nn.Linear(cfg.hidden_size, cfg.ff_size),
        nn.ReLU(),
        nn.Dropout(cfg.dropout),
        nn.Linear(cfg.ff_size, cfg.hidden_size),
    )


def localness_in(attention: AttentionConfig, layer: int) -> str:
    """The position bias of layer `layer` (0 = lowest): `attention.position_layers` > 0 keeps it to the lowest ones
    (Yang et al. found localness most useful in the lower layers)."""
    inside = attention.position_layers == 0 or layer < attention.position_layers
    return attention.position_bias if inside else "none"


def tempered(attention: AttentionConfig, blocks: tuple[str, ...], score: str) -> dict[str, str | bool]:
    """The parts of a decoder block that `score` scores, where `attention.temperature_at` is one of `blocks` (the
    block's temperature_at values): the temperature, the normaliser, soft-capping and the decoding's sharpening, and
    with attention.qk_norm unit queries and keys scored by their plain dot product, the cosine, whose only scale is
    then the temperature (multihead's module docstring)."""
    if attention.temperature_at not in blocks:
        return {"score": score}
    qk_norm = attention.qk_norm
    return {
        "score": "dot" if qk_norm else score,
        "temperature": attention.temperature,
        "qk_norm": qk_norm,
        "normaliser": attention.normaliser,
        "softcap": attention.softcap,
        "entropy_sharpening": attention.entropy_sharpening,
    }


class EncoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, attention: AttentionConfig, layer: int):
        super().__init__()
        parts = BlockParts(position_bias=localness_in(attention, layer), fused=cfg.fast_path)
        self.self_attention = MultiHeadAttention(cfg.hidden_size, cfg.heads, cfg.dropout, attention, parts)
        self.feed_forward = feed_forward(cfg)
        pre = cfg.norm == "pre"
        self.attend, self.transform = (
            Residual(cfg.hidden_size, cfg.dropout, pre),
            Residual(cfg.hidden_size, cfg.dropout, pre),
        )

    def forward(self, x: Tensor, mask: Tensor, key_mask: Tensor) -> Tensor:
        def attend(h: Tensor) -> Tensor:
            return self.self_attention(h, *self.self_attention.keys_values(h), mask, key_mask)[0]

        return self.transform(self.attend(x, attend), self.feed_forward)


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder, feed-forward (V sec. 3.1)."""

    def __init__(self, cfg: ModelConfig, attention: AttentionConfig, layer: int):
        super().__init__()
        self_parts = BlockParts(**tempered(attention, ("self", "both"), "scaled_dot"), fused=cfg.fast_path)
        cross_parts = BlockParts(
            # the decoder over the encoder: what attention.score means in the RNN too
            **tempered(attention, ("cross", "both"), attention.score),
            position_bias=localness_in(attention, layer),
            sentinel=attention.sentinel,
            keep_weights=layer == cfg.layers - 1,
            fused=cfg.fast_path,
        )
        self.self_attention = MultiHeadAttention(cfg.hidden_size, cfg.heads, cfg.dropout, attention, self_parts)
        self.cross_attention = MultiHeadAttention(cfg.hidden_size, cfg.heads, cfg.dropout, attention, cross_parts)
        self.feed_forward = feed_forward(cfg)
        pre = cfg.norm == "pre"
        self.attend_self, self.attend_source, self.transform = (
            Residual(cfg.hidden_size, cfg.dropout, pre) for _ in range(3)
        )

    def forward(
        self, x: Tensor, source: tuple[Tensor, Tensor], mask: Tensor, key_mask: Tensor, cache: dict[str, Tensor] | None
    ) -> tuple[Tensor, tuple[HeadTrace, HeadTrace], dict[str, Tensor]]:
        """x (B, T, D) over all target positions (cache None), or one step (T = 1) after the cached ones."""
        traces: list[HeadTrace] = []
        new: dict[str, Tensor] = {}

        def carried(block: str) -> dict[str, Tensor] | None:
            return None if cache is None else {k.split(".")[1]: v for k, v in cache.items() if k.startswith(block)}

        def attend_self(h: Tensor) -> Tensor:
            k, v = self.self_attention.keys_values(h)
            if cache is not None:  # this step's key and value join the earlier steps'
                k, v = torch.cat([cache["k"], k], 2), torch.cat([cache["v"], v], 2)
                new.update(k=k, v=v)
            out, trace, carry = self.self_attention(h, k, v, None, causal=cache is None, carried=carried("self."))
            traces.append(trace)
            new.update({f"self.{name}": value for name, value in carry.items()})
            return out

        def attend_source(h: Tensor) -> Tensor:
            out, trace, carry = self.cross_attention(h, *source, mask, key_mask, carried=carried("cross."))
            traces.append(trace)
            new.update({f"cross.{name}": value for name, value in carry.items()})
            return out

        x = self.transform(self.attend_source(self.attend_self(x, attend_self), attend_source), self.feed_forward)
        return x, (traces[0], traces[1]), ({**cache, **new} if cache is not None else {})


class Embed(nn.Module):
    """Token embeddings times sqrt(d) plus sinusoidal positions (V sec. 3.4-3.5), then dropout."""

    def __init__(self, vocab_size: int, cfg: ModelConfig):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, cfg.hidden_size, padding_idx=PAD)
        nn.init.normal_(self.embed.weight, std=cfg.hidden_size**-0.5)
        nn.init.zeros_(self.embed.weight[PAD])
        self.scale, self.dropout = math.sqrt(cfg.hidden_size), nn.Dropout(cfg.dropout)

    def forward(self, ids: Tensor, start: int = 0) -> Tensor:
        x = self.embed(ids) * self.scale
        return self.dropout(x + sinusoids(start, ids.size(1), x.size(-1), x))


class Encoder(nn.Module):
    def __init__(self, vocab_size: int, cfg: ModelConfig, attention: AttentionConfig):
        super().__init__()
        self.embed = Embed(vocab_size, cfg)
        self.layers = nn.ModuleList(EncoderLayer(cfg, attention, i) for i in range(cfg.layers))
        self.norm = nn.LayerNorm(cfg.hidden_size) if cfg.norm == "pre" else nn.Identity()

    def forward(self, src: Tensor) -> Tensor:
        key_mask = src != PAD
        mask = key_mask[:, None, None, :]
        x = self.embed(src)
        for layer in self.layers:
            x = layer(x, mask, key_mask)
        return self.norm(x)


@dataclass
class TransformerMemory:
    """The encoder side, computed once per batch: its output, which positions are real, and every layer's
    cross-attention keys and values."""

    values: Tensor  # (B, S, D) the encoder's output (decoding takes its device and dtype)
    mask: Tensor  # (B, S) True on real source tokens
    source: list[tuple[Tensor, Tensor]]  # per layer: keys, values (B, heads, S, d_k)

    def for_hypotheses(self, k: int) -> TransformerMemory:
        """k consecutive rows per sentence (beam search's hypotheses)."""

        def rows(t: Tensor) -> Tensor:
            return t.repeat_interleave(k, dim=0)

        return TransformerMemory(rows(self.values), rows(self.mask), [(rows(a), rows(b)) for a, b in self.source])


@dataclass
class TransformerState:
    """Decoding state: the next position t and, per layer, the cached self-attention keys and values of positions
    0..t-1 and what each block's parts carry from position t - 1 under their names (`cross.sact`: SACT's first
    pass, `cross.sentinel`: x_{t-1}), none before the first step."""

    t: int
    caches: list[dict[str, Tensor]]

    def select(self, index: Tensor) -> TransformerState:
        """Reorder along the batch (beam search)."""
        return TransformerState(self.t, [{k: v.index_select(0, index) for k, v in c.items()} for c in self.caches])


@dataclass
class HeadsOutput(AttentionOutput):
    """One decoding step's attention output; tau and gate are the mean over the heads (and layers) that have them,
    tau_heads and gate_heads (B, K) each head's, in `Transformer.head_labels` order."""

    tau_heads: Tensor | None = None
    gate_heads: Tensor | None = None


@dataclass
class HeadsTrace(DecoderTrace):
    """A DecoderTrace with the last cross-attention's weights and raw scores per head (B, T, heads, S), which the
    diagnostics read (entropy and saturation per head); tau and gate are (B, T, K), one column per head."""

    head_weights: Tensor | None = None
    head_scores: Tensor | None = None


def heads_along(traces: list[HeadTrace], name: str) -> Tensor | None:
    """One trace field of several blocks as (B, T, blocks x heads); None where no block has it."""
    return along([getattr(trace, name) for trace in traces])


def along(values: list[Tensor | None]) -> Tensor | None:
    """(B, heads, T) values of several blocks as (B, T, blocks x heads); None where no block has one."""
    values = [value for value in values if value is not None]
    return torch.cat([value.transpose(1, 2) for value in values], -1) if values else None


def observed_along(traces: list[HeadTrace]) -> dict[str, Tensor]:
    """What the blocks' parts observed, each name as (B, T, blocks x heads) over the blocks that report it."""
    names = dict.fromkeys(name for trace in traces for name in trace.observed)
    return {name: along([trace.observed.get(name) for trace in traces]) for name in names}


class Decoder(nn.Module):
    def __init__(self, vocab_size: int, cfg: ModelConfig, attention: AttentionConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = Embed(vocab_size, cfg)
        self.layers = nn.ModuleList(DecoderLayer(cfg, attention, i) for i in range(cfg.layers))
        self.norm = nn.LayerNorm(cfg.hidden_size) if cfg.norm == "pre" else nn.Identity()
        self.output = nn.Linear(cfg.hidden_size, vocab_size)
        if cfg.tie_embeddings:
            self.output.weight = self.embed.embed.weight

    def initial_state(self, memory: TransformerMemory) -> TransformerState:
        rows, size, heads = memory.values.size(0), self.cfg.hidden_size, self.cfg.heads
        empty = memory.values.new_zeros(rows, heads, 0, size // heads)
        return TransformerState(0, [{"k": empty, "v": empty} for _ in self.layers])

    def run(
        self, x: Tensor, memory: TransformerMemory, caches: list[dict[str, Tensor]] | None
    ) -> tuple[Tensor, list[HeadTrace], list[HeadTrace], list[dict[str, Tensor]]]:
        """All layers; the output after the last norm, the self- and cross-attention traces, the new caches."""
        mask = memory.mask[:, None, None, :]
        selfs, crosses, new = [], [], []
        for i, layer in enumerate(self.layers):
            x, (self_trace, cross_trace), cache = layer(
                x, memory.source[i], mask, memory.mask, None if caches is None else caches[i]
            )
            selfs.append(self_trace)
            crosses.append(cross_trace)
            new.append(cache)
        return self.norm(x), selfs, crosses, new

    @staticmethod
    def trace(selfs: list[HeadTrace], crosses: list[HeadTrace]) -> HeadsTrace:
        """Weights and scores (B, T, S): the last cross-attention's, averaged over its heads (what alignment,
        guided alignment and the plots read); tau and gate (B, T, K): every head that has one."""
        blocks = [block for pair in zip(selfs, crosses) for block in pair]
        last = crosses[-1]
        return HeadsTrace(
            last.weights.mean(1),
            heads_along(blocks, "tau"),
            heads_along(crosses, "gate"),
            last.scores.mean(1),
            observed=observed_along(blocks),
            head_weights=last.weights.transpose(1, 2),
            head_scores=last.scores.transpose(1, 2),
        )

    def step(
        self, y_prev: Tensor, state: TransformerState, memory: TransformerMemory
    ) -> tuple[Tensor, TransformerState, HeadsOutput]:
        """One decoding step: y_prev (B,) ids -> logits (B, V)."""
        x = self.embed(y_prev.unsqueeze(1), state.t)
        h, selfs, crosses, caches = self.run(x, memory, state.caches)
        trace = self.trace(selfs, crosses)

        def now(t: Tensor | None) -> Tensor | None:
            return None if t is None else t[:, 0]

        tau, gate = now(trace.tau), now(trace.gate)
        out = HeadsOutput(
            h[:, 0],
            now(trace.weights),
            None if tau is None else tau.mean(-1),
            None if gate is None else gate.mean(-1),
            now(trace.scores),
            {name: value[:, 0].mean(-1) for name, value in trace.observed.items()},
            tau,
            gate,
        )
        return self.output(h[:, 0]), TransformerState(state.t + 1, caches), out

    def forward(
        self, tgt_in: Tensor, memory: TransformerMemory, positions: Tensor | None = None
    ) -> tuple[Tensor, DecoderTrace]:
        """Teacher forcing over tgt_in (B, T) -> logits (B, T, V), or (N, V) at N flat positions, and the trace."""
        h, selfs, crosses, _ = self.run(self.embed(tgt_in), memory, None)
        if positions is not None:
            h = h.flatten(0, 1).index_select(0, positions)
        return self.output(h), self.trace(selfs, crosses)


class Transformer(nn.Module):
    """Encoder and decoder stacks of `model.layers` layers each (V sec. 3); what it is to the config is declared in
    nmt_core.family.architectures."""

    def __init__(self, model: ModelConfig, attention: AttentionConfig, src_vocab: int, tgt_vocab: int):
        super().__init__()
        self.encoder = Encoder(src_vocab, model, attention)
        self.decoder = Decoder(tgt_vocab, model, attention)
        for name, parameter in self.named_parameters():
            if parameter.dim() == 2 and "embed" not in name:
                nn.init.xavier_uniform_(parameter)  # as fairseq and joeynmt initialise their Transformers

    def encode(self, src: Tensor, src_lengths: Tensor) -> tuple[TransformerMemory, TransformerState]:
        h = self.encoder(src)
        source = [layer.cross_attention.keys_values(h) for layer in self.decoder.layers]
        memory = TransformerMemory(h, src != PAD, source)
        return memory, self.decoder.initial_state(memory)

    def forward(
        self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor, positions: Tensor | None = None
    ) -> tuple[Tensor, DecoderTrace]:
        memory, _ = self.encode(src, src_lengths)
        return self.decoder(tgt_in, memory, positions)

    def head_labels(self) -> list[str]:
        """Names of the columns of tau_heads: `l<layer>.<self|cross>.h<head>` for every tempered block."""
        labels = []
        for i, layer in enumerate(self.decoder.layers, 1):
            for block, attention in (("self", layer.self_attention), ("cross", layer.cross_attention)):
                if attention.parts.temperature != "none":
                    labels += [f"l{i}.{block}.h{h}" for h in range(1, attention.heads + 1)]
        return labels

    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


def head_labels(model: nn.Module) -> list[str]:
    """The names of a model's per-head tau columns in traces; none for the RNN (its tau is one per step)."""
    return model.head_labels() if isinstance(model, Transformer) else []
