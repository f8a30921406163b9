"""The encoder-decoder every trial trains (Luong et al. 2015 with input feeding, plus the attention family).

Equation numbers: Luong et al. 2015 (L), SACT (Lin et al. 2018, S), Li & Zhu 2017 (A, adaptive attention),
Bahdanau et al. 2015 (B), the lecture on attention variants (lecture 003: dl4mt's conditional GRU) and the
course report (report 004: self-attention over encoder and decoder states).
Sizes: the encoder's two directions have H/2 units each and are concatenated, so h_i, s_t, c_t and the
sentinel all have size H: dot attention, SACT's c~_0 (the decoder's initial state) and the sentinel's
c+ = beta s + (1 - beta) c need no extra projections.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.nn.utils.rnn import PackedSequence, invert_permutation, pack_padded_sequence, pad_packed_sequence

from nmt_core.family.parts import Implementation, implements
from nmt_core.family.variants import PLACEMENTS, SCORES, SELF_ATTENTIONS
from nmt_core.models.attention import Attention, AttentionOutput, AttentionState, Memory, SelfAttention
from nmt_core.models.unrolled import Hoisted, hoist, unrolled_step

if TYPE_CHECKING:
    from nmt_core.config import AttentionConfig, ModelConfig

PAD, UNK, BOS, EOS = 0, 1, 2, 3
RnnState = Tensor | tuple[Tensor, Tensor]
INDUCTOR_MODES = ("default", "reduce-overhead")  # model.compile values whose decoder step Inductor compiles


class Encoder(nn.Module):
    """Embeddings -> bidirectional LSTM over packed sequences (cuDNN on GPU); h_i = [h->_i; h<-_i] (H/2 units each),
    or h->_i + h<-_i (H each: `model.encoder_merge: sum`, as SACT's released code merges them), and with
    self-attention h_i + sum_k a_ik h_k (report 004; the residual keeps h_i's own word for attention to align)."""

    def __init__(self, vocab_size: int, cfg: ModelConfig, self_attention: bool = False):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, cfg.emb_size, padding_idx=PAD)
        self.summed = cfg.encoder_merge == "sum"
        self.rnn = nn.LSTM(
            cfg.emb_size,
            cfg.hidden_size if self.summed else cfg.hidden_size // 2,
            cfg.encoder_layers,
            batch_first=True,
            bidirectional=True,
            dropout=cfg.dropout if cfg.encoder_layers > 1 else 0.0,
        )
        self.self_attention = SelfAttention(cfg.hidden_size) if self_attention else None
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, src: Tensor, src_lengths: Tensor) -> tuple[Tensor, Tensor]:
        """src (B, S) ids, src_lengths (B,) on the CPU -> h (B, S, H), final [h->_n; h<-_1] (B, H)."""
        h, h_n = rnn_by_length(self.rnn, self.dropout(self.embed(src)), src_lengths)
        if self.summed:  # h->_i + h<-_i; the bridge reads h->_n + h<-_1
            h, final = sum(h.chunk(2, dim=-1)), h_n[-2] + h_n[-1]
        else:
            final = torch.cat([h_n[-2], h_n[-1]], dim=-1)
        h = self.dropout(h)
        if self.self_attention is not None:
            h = h + self.self_attention(h, h, self.self_attention.W_K(h), src != PAD)
        return h, final


def host_to_device(t: Tensor, device: torch.device) -> Tensor:
    """t on `device`. A CPU tensor reaches a GPU from pinned memory without blocking: a copy from pageable memory
    waits for the GPU to catch up, and the host could not queue the next kernels meanwhile."""
    if device.type != "cuda" or t.is_cuda:
        return t.to(device)
    return t.pin_memory().to(device, non_blocking=True)


def rnn_by_length(rnn: nn.LSTM, x: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
    """The RNN over padded x (B, S, E) packed by length (CPU lengths (B,)): its outputs (B, S, H), zero on padding,
    and its final hidden state h_n (layers * directions, B, H'), rows in x's order.

    What pack_padded_sequence(enforce_sorted=False), the RNN and pad_packed_sequence compute, op for op, without
    their waits for the GPU: packing copies its sort order to the device from pageable memory, and unpacking
    copies the unsort order back to the host, each a wait until the GPU has caught up. Here the order travels from
    pinned memory once and the rows are unsorted on the device.
    """
    lengths, order = torch.sort(lengths, descending=True)  # as pack_padded_sequence sorts
    order = host_to_device(order, x.device)
    unsort = invert_permutation(order)
    packed = pack_padded_sequence(x.index_select(0, order), lengths, batch_first=True)
    out, (h_n, _) = run_rnn(rnn, packed)
    padded, _ = pad_packed_sequence(out, batch_first=True, total_length=x.size(1))
    return padded.index_select(0, unsort), h_n.index_select(1, unsort)


@dataclass
class DecoderState:
    rnn: RnnState  # (layers, B, H), a pair for the LSTM
    feed: Tensor  # h~_{t-1}, fed back as input (input feeding); zeros at t = 0
    attention: AttentionState
    past: tuple[Tensor, Tensor] | None = None  # s_0..s_{t-1} and their keys (B, t, H): decoder self-attention

    def select(self, index: Tensor) -> DecoderState:
        """Reorder along the batch (beam search)."""
        rnn = (
            tuple(part.index_select(1, index) for part in self.rnn)
            if isinstance(self.rnn, tuple)
            else self.rnn.index_select(1, index)
        )
        past = None if self.past is None else tuple(part.index_select(0, index) for part in self.past)
        return DecoderState(rnn, self.feed.index_select(0, index), self.attention.select(index), past)


@dataclass
class DecoderTrace:
    """What attention did at every target step: weights and raw scores (B, T, S), tau_t and sentinel gate (B, T);
    and the fertility f_j of every source word (B, S) where attention has one."""

    weights: Tensor
    tau: Tensor | None
    gate: Tensor | None
    scores: Tensor
    fertility: Tensor | None = None
    # what the attention parts observed per step (Part.observes): (B, T) each, (B, T, K) per head in a Transformer
    observed: dict[str, Tensor] = field(default_factory=dict)

    @staticmethod
    def stack(steps: list[AttentionOutput]) -> DecoderTrace:
        def along_time(name: str) -> Tensor | None:
            values = [getattr(step, name) for step in steps]
            return None if values[0] is None else torch.stack(values, dim=1)

        observed = {name: torch.stack([step.observed[name] for step in steps], dim=1) for name in steps[0].observed}
        weights, tau, gate, scores = (along_time(name) for name in ("weights", "tau", "gate", "scores"))
        return DecoderTrace(weights, tau, gate, scores, observed=observed)


def run_rnn(
    rnn: nn.LSTM | nn.GRU, inputs: Tensor | PackedSequence, state: RnnState | None = None
) -> tuple[Tensor | PackedSequence, RnnState]:
    """rnn(inputs, state), in fp32 on CUDA whatever autocast asks for.

    Under torch.autocast(dtype=torch.bfloat16) PyTorch runs cuDNN's RNN (`_cudnn_rnn`) in fp16, not bf16: seen on
    an H100 with torch 2.11 and cuDNN 9.19 (kernel RNN_blockPersist_fp_LSTM_HMMA<__half>, float16 outputs). Nothing
    here scales the loss, and fp16 gradients without loss scaling underflow. So on CUDA the sequence RNNs run
    outside autocast, in fp32 on TF32 tensor cores (`use_tensor_cores`); everything around them stays bf16. On a
    CPU, autocast hands oneDNN's LSTM bf16, which is what `train.amp` asks for, and nothing changes.
    """
    data = inputs.data if isinstance(inputs, PackedSequence) else inputs
    if data.device.type != "cuda" or not torch.is_autocast_enabled("cuda"):
        return rnn(inputs, state)
    if state is not None:
        state = tuple(part.float() for part in state) if isinstance(state, tuple) else state.float()
    with torch.autocast("cuda", enabled=False):
        return rnn(inputs.float(), state)


def top_layer(rnn: RnnState) -> Tensor:
    """The top layer's output state s (B, H) of an RNN state."""
    return (rnn[0] if isinstance(rnn, tuple) else rnn)[-1]


def rnn_step(rnn: nn.LSTM | nn.GRU, x: Tensor, state: RnnState) -> tuple[Tensor, RnnState]:
    """rnn(x.unsqueeze(1), state) for one time step, through torch.lstm_cell / gru_cell on the module's own weights.

    The same maths (the fast path): on a CPU, nn.LSTM called on a single step goes through oneDNN's sequence
    kernel, whose forward and backward cost twice the step's matrix products at our sizes.
    """
    lstm = isinstance(rnn, nn.LSTM)
    hidden, cells = [], []
    for layer, weights in enumerate(rnn.all_weights):  # [W_ih, W_hh, b_ih, b_hh] of each layer
        if lstm:
            h, c = torch.lstm_cell(x, (state[0][layer], state[1][layer]), *weights)
            cells.append(c)
        else:
            h = torch.gru_cell(x, state[layer], *weights)
        hidden.append(h)
        x = F.dropout(h, rnn.dropout, rnn.training) if layer < rnn.num_layers - 1 else h  # between layers, as nn.LSTM
    return h, ((torch.stack(hidden), torch.stack(cells)) if lstm else torch.stack(hidden))


class Placement(Implementation):
    """Where attention sits in a decoder step: what the decoder's RNN reads, and one step (`transition`); whether it
    attends after the RNN's step and feeds its input is declared (nmt_core.family.variants)."""

    @staticmethod
    def rnn_input(emb_size: int, context: int, luong_input: int) -> int:
        """The size of the (first) RNN's input."""
        raise NotImplementedError

    @staticmethod
    def build(decoder: Decoder, rnn: type[nn.Module], context: int) -> None:
        """Add the placement's own modules to the decoder."""

    @staticmethod
    def transition(
        decoder: Decoder, emb: Tensor, state: DecoderState, memory: Memory, hoisted: Hoisted | None
    ) -> tuple[Tensor, RnnState, AttentionOutput, AttentionState]:
        """One step from the embedded y_{t-1}: s_t, the RNN state, what attention did and its next state (`hoisted`:
        what the teacher-forced loop computed for all positions, passed on to Decoder.recur)."""
        raise NotImplementedError


@implements(PLACEMENTS, "luong")
class LuongPlacement(Placement):
    """L sec. 3: s_t = RNN([y_{t-1}; h~_{t-1}], s_{t-1}) with input feeding, then c_t = ATT(C, s_t)."""

    @staticmethod
    def rnn_input(emb_size: int, context: int, luong_input: int) -> int:
        return luong_input

    @staticmethod
    def transition(
        decoder: Decoder, emb: Tensor, state: DecoderState, memory: Memory, hoisted: Hoisted | None
    ) -> tuple[Tensor, RnnState, AttentionOutput, AttentionState]:
        x = torch.cat([emb, state.feed], dim=-1) if decoder.input_feeding else emb  # [y_{t-1}; h~_{t-1}]
        s, rnn = decoder.recur(decoder.rnn, x, state.rnn, hoisted)  # s_t
        cell = rnn[1][-1] if isinstance(rnn, tuple) else None  # m_t of the top LSTM layer (the sentinel's)
        out, attention = decoder.attention(s, memory, state.attention, x, cell)  # c_t = ATT(C, s_t)
        return s, rnn, out, attention


@implements(PLACEMENTS, "bahdanau")
class BahdanauPlacement(Placement):
    """B sec. 3.1: c_t = ATT(C, s_{t-1}), then s_t = RNN([y_{t-1}; c_t], s_{t-1})."""

    @staticmethod
    def rnn_input(emb_size: int, context: int, luong_input: int) -> int:
        return emb_size + context

    @staticmethod
    def transition(
        decoder: Decoder, emb: Tensor, state: DecoderState, memory: Memory, hoisted: Hoisted | None
    ) -> tuple[Tensor, RnnState, AttentionOutput, AttentionState]:
        out, attention = decoder.attention(top_layer(state.rnn), memory, state.attention)  # c_t = ATT(C, s_{t-1})
        x = torch.cat([emb, out.context], dim=-1)
        s, rnn = decoder.recur(decoder.rnn, x, state.rnn, hoisted)  # RNN([y; c_t], s_{t-1})
        return s, rnn, out, attention


@implements(PLACEMENTS, "cgru")
class ConditionalGRUPlacement(Placement):
    """lecture 003, dl4mt: s'_t = RNN_1(y_{t-1}, s_{t-1}); c_t = ATT(C, s'_t); s_t = RNN_2(c_t, s'_t)."""

    @staticmethod
    def rnn_input(emb_size: int, context: int, luong_input: int) -> int:
        return emb_size

    @staticmethod
    def build(decoder: Decoder, rnn: type[nn.Module], context: int) -> None:
        decoder.rnn2 = rnn(context, decoder.cfg.hidden_size, batch_first=True)  # RNN_2(c_t, s'_t)

    @staticmethod
    def transition(
        decoder: Decoder, emb: Tensor, state: DecoderState, memory: Memory, hoisted: Hoisted | None
    ) -> tuple[Tensor, RnnState, AttentionOutput, AttentionState]:
        s_prime, rnn_prime = decoder.recur(decoder.rnn, emb, state.rnn, hoisted)  # s'_t = RNN_1(y_{t-1}, s_{t-1})
        out, attention = decoder.attention(s_prime, memory, state.attention)  # c_t = ATT(C, s'_t)
        s, rnn = decoder.recur(decoder.rnn2, out.context, rnn_prime, hoisted)  # s_t = RNN_2(c_t, s'_t)
        return s, rnn, out, attention


class Decoder(nn.Module):
    """LSTM or GRU decoder with attention where `attention.placement` (a Placement above) puts it, and the
    attentional readout h~_t = tanh(W_c [c_t; s_t]) (L eq. 5): the placements differ only where attention sits."""

    def __init__(self, vocab_size: int, cfg: ModelConfig, attention: AttentionConfig):
        super().__init__()
        hidden = cfg.hidden_size
        self.cfg, self.placement = cfg, PLACEMENTS.implementation(attention.placement)
        placed = PLACEMENTS[attention.placement]  # what the placement declares
        self.input_feeding = cfg.input_feeding and placed.feeds_input
        self.embed = nn.Embedding(vocab_size, cfg.emb_size, padding_idx=PAD)
        self.bridge = nn.Linear(hidden, hidden)
        rnn = nn.LSTM if cfg.cell == "lstm" else nn.GRU
        luong_input = cfg.emb_size + (hidden if self.input_feeding else 0)
        context = SCORES.implementation(attention.score).context_size_of(hidden)
        self.rnn = rnn(
            self.placement.rnn_input(cfg.emb_size, context, luong_input),
            hidden,
            cfg.decoder_layers,
            batch_first=True,
            dropout=cfg.dropout if cfg.decoder_layers > 1 else 0.0,
        )
        self.attention = Attention(attention, hidden, luong_input, cfg.cell)
        self.placement.build(self, rnn, context)
        self.self_attention = SelfAttention(hidden) if SELF_ATTENTIONS[attention.self_attention].decoder else None
        self.readout = cfg.readout if cfg.readout != "auto" else "sum" if attention.sentinel else "luong"
        if self.readout == "luong":
            self.combine = nn.Linear(context + hidden * (2 if self.self_attention else 1), hidden, bias=False)
        self.output = nn.Linear(hidden, vocab_size)
        if cfg.tie_embeddings:
            self.output.weight = self.embed.weight
        self.dropout = nn.Dropout(cfg.dropout)
        # all s_t in one (cuDNN) call when no step's RNN input depends on the step before (attention after the RNN)
        self.whole_sequence_rnn = (
            placed.attends_after_step and not self.input_feeding and not self.attention.needs_memory_cell
        )

    def initial_state(self, encoder_final: Tensor, memory: Memory) -> DecoderState:
        s_0 = torch.tanh(self.bridge(encoder_final))  # s_0 = tanh(W_b [h->_n; h<-_1])
        hidden = s_0.unsqueeze(0).repeat(self.cfg.decoder_layers, 1, 1)
        rnn: RnnState = (hidden, torch.zeros_like(hidden)) if self.cfg.cell == "lstm" else hidden
        past = None
        if self.self_attention is not None:
            past = (s_0.unsqueeze(1), self.self_attention.W_K(s_0).unsqueeze(1))  # s_0 and its key
        return DecoderState(rnn, torch.zeros_like(s_0), self.attention.initial_state(memory, s_0), past)

    def read_out(
        self, context: Tensor, s: Tensor, past: tuple[Tensor, Tensor] | None, hoisted: Hoisted | None = None
    ) -> tuple[Tensor, tuple[Tensor, Tensor] | None]:
        """What the output layer reads: h~_t = tanh(W_c [c_t; s_t]) (L eq. 5), or c+_i + t_i (A eq. 12); with
        decoder self-attention d_t = sum_{k<t} a_tk s_k joins them (report 004: [c_t; d_t; s_t], or c + d + s)."""
        parts = [context, s]
        if past is not None:
            states, keys = past
            d = self.self_attention(s.unsqueeze(1), states, keys).squeeze(1)  # d_t over s_0..s_{t-1}
            parts.insert(1, d)
            past = (
                torch.cat([states, s.unsqueeze(1)], 1),
                torch.cat([keys, self.self_attention.W_K(s).unsqueeze(1)], 1),
            )
        if self.readout == "sum":
            h_tilde = sum(parts)
        else:
            parts = torch.cat(parts, dim=-1)
            combined = self.combine(parts) if hoisted is None else hoisted.products.linear(parts, self.combine.weight)
            h_tilde = torch.tanh(combined)
        return self.dropout(h_tilde), past

    def recur(
        self, rnn: nn.LSTM | nn.GRU, x: Tensor, state: RnnState, hoisted: Hoisted | None = None
    ) -> tuple[Tensor, RnnState]:
        """One step of one of the decoder's RNNs: s (B, H) and the next state."""
        if hoisted is not None:
            gates = hoisted.gates if rnn is self.rnn else None  # the embedding enters the first RNN only
            return unrolled_step(rnn, x, state, hoisted.products, gates, hoisted.emb_size)
        if self.cfg.fast_path:
            return rnn_step(rnn, x, state)
        s, state = run_rnn(rnn, x.unsqueeze(1), state)
        return s.squeeze(1), state

    def transition(
        self, emb: Tensor, state: DecoderState, memory: Memory, hoisted: Hoisted | None = None
    ) -> tuple[Tensor, DecoderState, AttentionOutput]:
        """One target step from the embedded y_{t-1} (B, E): the readout h~_t, the next state, what attention did."""
        s, rnn, out, attention = self.placement.transition(self, emb, state, memory, hoisted)
        h_tilde, past = self.read_out(out.context, s, state.past, hoisted)
        return h_tilde, DecoderState(rnn, h_tilde, attention, past), out

    def step(self, y_prev: Tensor, state: DecoderState, memory: Memory) -> tuple[Tensor, DecoderState, AttentionOutput]:
        """One step of decoding: y_prev (B,) ids -> logits (B, V)."""
        h_tilde, state, out = self.transition(self.dropout(self.embed(y_prev)), state, memory)
        return self.output(h_tilde), state, out  # p = softmax(W_s h~_t), L eq. 6

    def hoisted(self, emb: Tensor) -> list[Hoisted] | list[None]:
        """What the teacher-forced loop over emb (B, T, E) computes for all positions at once
        (nmt_core.models.unrolled), one Hoisted per position: on the fast path's eager step (`model.compile` none or
        graphs) outside autocast. The plain path, a step Inductor compiles and bf16 autocast keep torch.lstm_cell's step
        (None)."""
        if not self.cfg.fast_path or self.cfg.compile in INDUCTOR_MODES or torch.is_autocast_enabled(emb.device.type):
            return [None] * emb.size(1)
        return hoist(self.rnn, emb, deferred=torch.is_grad_enabled())

    def forward(
        self, tgt_in: Tensor, state: DecoderState, memory: Memory, positions: Tensor | None = None
    ) -> tuple[Tensor, DecoderTrace]:
        """Teacher forcing over tgt_in (B, T) -> logits (B, T, V), or (N, V) at N flat positions of (B, T) (the
        loss needs no logits on padding), and the attention trace."""
        emb = self.dropout(self.embed(tgt_in))
        readouts, steps = [], []
        if self.whole_sequence_rnn:  # the whole target through the RNN in one call; only attention steps in Python
            s_all, _ = run_rnn(self.rnn, emb, state.rnn)
            attention, past = state.attention, state.past
            for s_t, emb_t in zip(s_all.unbind(1), emb.unbind(1)):
                out, attention = self.attention(s_t, memory, attention, emb_t)
                h_tilde, past = self.read_out(out.context, s_t, past)
                readouts.append(h_tilde)
                steps.append(out)
        else:  # unbind: one gradient copy for all steps, not one zero-filled (B, T, E) per step
            for emb_t, hoisted in zip(emb.unbind(1), self.hoisted(emb)):
                h_tilde, state, out = self.transition(emb_t, state, memory, hoisted)
                readouts.append(h_tilde)
                steps.append(out)
        h_tilde = torch.stack(readouts, dim=1)
        if positions is not None:
            h_tilde = h_tilde.flatten(0, 1).index_select(0, positions)
        return self.output(h_tilde), DecoderTrace.stack(steps)


class Seq2Seq(nn.Module):
    """`model.arch: rnn`; what it is to the config is declared in nmt_core.family.architectures."""

    def __init__(self, model: ModelConfig, attention: AttentionConfig, src_vocab: int, tgt_vocab: int):
        super().__init__()
        self.encoder = Encoder(src_vocab, model, SELF_ATTENTIONS[attention.self_attention].encoder)
        self.decoder = Decoder(tgt_vocab, model, attention)

    def encode(self, src: Tensor, src_lengths: Tensor) -> tuple[Memory, DecoderState]:
        return self.memory_and_state(*self.encoder(src, src_lengths), src)

    def memory_and_state(self, h: Tensor, final: Tensor, src: Tensor) -> tuple[Memory, DecoderState]:
        """What the decoder starts from, given the encoder's outputs h (B, S, H) and final state (B, H)."""
        memory = self.decoder.attention.memory(h, src != PAD)  # keys projected once per batch
        return memory, self.decoder.initial_state(final, memory)

    def forward(
        self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor, positions: Tensor | None = None
    ) -> tuple[Tensor, DecoderTrace]:
        """Logits (B, T, V), or (N, V) at N flat positions of tgt_in, and the attention trace."""
        return self.decode(*self.encoder(src, src_lengths), src, tgt_in, positions)

    def decode(
        self, h: Tensor, final: Tensor, src: Tensor, tgt_in: Tensor, positions: Tensor | None = None
    ) -> tuple[Tensor, DecoderTrace]:
        """forward from the encoder's outputs h (B, S, H) and final state (B, H): a CUDA graph captures this half of
        a training step (nmt_core.training.graphs), while the encoder runs over packed sequences, whose layout
        varies."""
        memory, state = self.memory_and_state(h, final, src)
        logits, trace = self.decoder(tgt_in, state, memory, positions)
        for part in self.decoder.attention.mechanisms:
            for name, value in part.trace(memory).items():  # fertility's f_j from h_j
                setattr(trace, name, value)
        return logits, trace

    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())
