"""The encoder-decoder every trial trains (Luong et al. 2015 with input feeding, plus the attention family).

Equation numbers: Luong et al. 2015 (L), SACT (Lin et al. 2018, S), Li & Zhu 2017 (A, adaptive attention).
Sizes: the encoder's two directions have H/2 units each and are concatenated, so h_i, s_t, c_t and the
sentinel all have size H: dot attention, SACT's c~_0 (the decoder's initial state) and the sentinel's
c+ = beta s + (1 - beta) c need no extra projections.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nmt_core.attention import Attention, AttentionOutput, AttentionState, Memory
from nmt_core.config import AttentionConfig, ModelConfig

PAD, UNK, BOS, EOS = 0, 1, 2, 3
RnnState = Tensor | tuple[Tensor, Tensor]


class Encoder(nn.Module):
    """Embeddings -> bidirectional LSTM over packed sequences (cuDNN on GPU); h_i = [h->_i; h<-_i]."""

    def __init__(self, vocab_size: int, cfg: ModelConfig):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, cfg.emb_size, padding_idx=PAD)
        self.rnn = nn.LSTM(cfg.emb_size, cfg.hidden_size // 2, cfg.encoder_layers, batch_first=True,
                           bidirectional=True, dropout=cfg.dropout if cfg.encoder_layers > 1 else 0.0)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, src: Tensor, src_lengths: Tensor) -> tuple[Tensor, Tensor]:
        """src (B, S) ids, src_lengths (B,) on the CPU -> h (B, S, H), final [h->_n; h<-_1] (B, H)."""
        x = self.dropout(self.embed(src))
        packed = pack_padded_sequence(x, src_lengths, batch_first=True, enforce_sorted=False)
        out, (h_n, _) = self.rnn(packed)
        h, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))
        return self.dropout(h), torch.cat([h_n[-2], h_n[-1]], dim=-1)


@dataclass
class DecoderState:
    rnn: RnnState  # (layers, B, H), a pair for the LSTM
    feed: Tensor  # h~_{t-1}, fed back as input (input feeding); zeros at t = 0
    attention: AttentionState

    def select(self, index: Tensor) -> "DecoderState":
        """Reorder along the batch (beam search)."""
        rnn = (tuple(part.index_select(1, index) for part in self.rnn) if isinstance(self.rnn, tuple)
               else self.rnn.index_select(1, index))
        return DecoderState(rnn, self.feed.index_select(0, index), self.attention.select(index))


@dataclass
class DecoderTrace:
    """What attention did at every target step: weights and raw scores (B, T, S), tau_t and sentinel gate (B, T)."""

    weights: Tensor
    tau: Tensor | None
    gate: Tensor | None
    scores: Tensor

    @staticmethod
    def stack(steps: list[AttentionOutput]) -> "DecoderTrace":
        def along_time(name: str) -> Tensor | None:
            values = [getattr(step, name) for step in steps]
            return None if values[0] is None else torch.stack(values, dim=1)

        return DecoderTrace(along_time("weights"), along_time("tau"), along_time("gate"), along_time("scores"))


class Decoder(nn.Module):
    """LSTM or GRU decoder with attention, input feeding and the attentional readout h~_t."""

    def __init__(self, vocab_size: int, cfg: ModelConfig, attention: AttentionConfig):
        super().__init__()
        hidden = cfg.hidden_size
        self.cfg = cfg
        self.input_size = cfg.emb_size + (hidden if cfg.input_feeding else 0)
        self.embed = nn.Embedding(vocab_size, cfg.emb_size, padding_idx=PAD)
        self.bridge = nn.Linear(hidden, hidden)
        rnn = nn.LSTM if cfg.cell == "lstm" else nn.GRU
        self.rnn = rnn(self.input_size, hidden, cfg.decoder_layers, batch_first=True,
                       dropout=cfg.dropout if cfg.decoder_layers > 1 else 0.0)
        self.attention = Attention(attention, hidden, self.input_size, cfg.cell)
        self.readout = cfg.readout if cfg.readout != "auto" else "sum" if attention.sentinel else "luong"
        if self.readout == "luong":
            self.combine = nn.Linear(self.attention.context_size + hidden, hidden, bias=False)
        self.output = nn.Linear(hidden, vocab_size)
        if cfg.tie_embeddings:
            self.output.weight = self.embed.weight
        self.dropout = nn.Dropout(cfg.dropout)

    def initial_state(self, encoder_final: Tensor, memory: Memory) -> DecoderState:
        s_0 = torch.tanh(self.bridge(encoder_final))  # s_0 = tanh(W_b [h->_n; h<-_1])
        hidden = s_0.unsqueeze(0).repeat(self.cfg.decoder_layers, 1, 1)
        rnn: RnnState = (hidden, torch.zeros_like(hidden)) if self.cfg.cell == "lstm" else hidden
        return DecoderState(rnn, torch.zeros_like(s_0), self.attention.initial_state(memory, s_0))

    def attend(self, s: Tensor, x: Tensor, memory: Memory, state: AttentionState,
               rnn: RnnState) -> tuple[Tensor, AttentionOutput, AttentionState]:
        cell = rnn[1][-1] if isinstance(rnn, tuple) else None  # m_t of the top LSTM layer (the sentinel's)
        out, state = self.attention(s, memory, state, x, cell)  # c_t (S eq. 3-4, A eq. 7-11)
        return self.dropout(self.read_out(out.context, s)), out, state

    def read_out(self, context: Tensor, s: Tensor) -> Tensor:
        """What the output layer reads: h~_t = tanh(W_c [c_t; s_t]) (L eq. 5), or c+_i + t_i (A eq. 12)."""
        if self.readout == "sum":
            return context + s
        return torch.tanh(self.combine(torch.cat([context, s], dim=-1)))

    def step(self, y_prev: Tensor, state: DecoderState,
             memory: Memory) -> tuple[Tensor, DecoderState, AttentionOutput]:
        """One step of decoding: y_prev (B,) ids -> logits (B, V)."""
        x = self.dropout(self.embed(y_prev))
        if self.cfg.input_feeding:
            x = torch.cat([x, state.feed], dim=-1)  # [y_{t-1}; h~_{t-1}]
        s, rnn = self.rnn(x.unsqueeze(1), state.rnn)  # s_t
        h_tilde, out, attention = self.attend(s.squeeze(1), x, memory, state.attention, rnn)
        return self.output(h_tilde), DecoderState(rnn, h_tilde, attention), out  # p = softmax(W_s h~_t), L eq. 6

    def forward(self, tgt_in: Tensor, state: DecoderState, memory: Memory) -> tuple[Tensor, DecoderTrace]:
        """Teacher forcing over tgt_in (B, T) -> logits (B, T, V) and the attention trace."""
        emb = self.dropout(self.embed(tgt_in))
        readouts, steps = [], []
        if self.cfg.input_feeding or self.attention.needs_memory_cell:  # h~_{t-1} or m_t per step: step by step
            rnn, feed, attention = state.rnn, state.feed, state.attention
            for emb_t in emb.unbind(1):  # unbind: one gradient copy for all steps, not one zero-filled (B, T, E) per step
                x = torch.cat([emb_t, feed], dim=-1) if self.cfg.input_feeding else emb_t
                s, rnn = self.rnn(x.unsqueeze(1), rnn)
                feed, out, attention = self.attend(s.squeeze(1), x, memory, attention, rnn)
                readouts.append(feed)
                steps.append(out)
        else:  # the whole target through the RNN in one (cuDNN) call; only attention steps in Python
            s_all, _ = self.rnn(emb, state.rnn)
            attention = state.attention
            for s_t, emb_t in zip(s_all.unbind(1), emb.unbind(1)):
                h_tilde, out, attention = self.attend(s_t, emb_t, memory, attention, None)
                readouts.append(h_tilde)
                steps.append(out)
        return self.output(torch.stack(readouts, dim=1)), DecoderTrace.stack(steps)


class Seq2Seq(nn.Module):
    def __init__(self, model: ModelConfig, attention: AttentionConfig, src_vocab: int, tgt_vocab: int):
        super().__init__()
        self.encoder = Encoder(src_vocab, model)
        self.decoder = Decoder(tgt_vocab, model, attention)

    def encode(self, src: Tensor, src_lengths: Tensor) -> tuple[Memory, DecoderState]:
        h, final = self.encoder(src, src_lengths)
        memory = self.decoder.attention.memory(h, src != PAD)  # keys projected once per batch
        return memory, self.decoder.initial_state(final, memory)

    def forward(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor) -> tuple[Tensor, DecoderTrace]:
        memory, state = self.encode(src, src_lengths)
        return self.decoder(tgt_in, state, memory)

    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())
