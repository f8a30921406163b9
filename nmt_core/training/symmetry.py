"""Bilingual symmetry (Cohn et al. 2016, lecture 003): s->t and t->s trained jointly, rewarded for attention
matrices that are each other's transpose.

The reverse model reads the same batch the other way round, so both attention matrices cover the same
sentence pairs and the trace bonus B = sum_i sum_j alpha^{s->t}_ij alpha^{s<-t}_ji needs no extra data.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

from nmt_core.data.batches import Batch, Example, TrialData
from nmt_core.models.rnn import BOS, EOS, PAD, host_to_device


def reverse_batch(batch: Batch) -> Batch:
    """The batch with source and target swapped (on its device): the target words become the source, and the
    source words the target, between <s> and </s>. Lengths and real-token positions come from the lengths the
    batch keeps on the CPU, so that building it never waits for a GPU."""
    device = batch.src.device
    tgt_words = batch.tgt_out.masked_fill(batch.tgt_out == EOS, PAD)  # (B, T): y_1 .. y_n, padded
    bos = batch.src.new_full((batch.src.size(0), 1), BOS)
    pad = batch.src.new_full((batch.src.size(0), 1), PAD)
    tgt_out = torch.cat([batch.src, pad], dim=1)
    tgt_out = tgt_out.scatter(1, host_to_device(batch.src_lengths, device).unsqueeze(1), EOS)  # x_1 .. x_m </s>
    tgt_lengths = batch.src_lengths + 1
    tgt_in = torch.cat([bos, batch.src], dim=1)
    if (
        batch.real is None
    ):  # a batch inside a CUDA graph (nmt_core.training.graphs): lengths on the device, nothing on the host
        return Batch(tgt_words, batch.tgt_lengths - 1, tgt_in, tgt_out, batch.index, tgt_lengths.sum(), tgt_lengths)
    width = tgt_out.size(1)
    real = (torch.arange(width) < tgt_lengths.unsqueeze(1)).flatten().nonzero().squeeze(1)  # on the CPU
    return Batch(
        tgt_words,
        batch.tgt_lengths - 1,
        tgt_in,
        tgt_out,
        batch.index,
        int(tgt_lengths.sum()),
        tgt_lengths,
        real=host_to_device(real, device),
    )


def trace_bonus(forward: Tensor, backward: Tensor, batch: Batch) -> Tensor:
    """B = sum_i sum_j alpha^{s->t}_ij alpha^{s<-t}_ji over real target words i and source words j, summed over
    the batch (lecture 003). forward (B, T, S) weights of s->t over `batch`; backward those of t->s over
    `reverse_batch(batch)` (B, S + 1, T)."""
    words = batch.tgt_out.size(1) - 1  # target word positions (the last column of tgt_out is </s> or padding)
    src_len = batch.src.size(1)
    both = forward[:, :words, :] * backward[:, :src_len, :words].transpose(1, 2)  # alpha_ij alpha'_ji
    tgt_mask = (batch.tgt_out[:, :words] != PAD) & (batch.tgt_out[:, :words] != EOS)
    src_mask = batch.src != PAD
    return (both * (tgt_mask.unsqueeze(-1) & src_mask.unsqueeze(1)).to(both.dtype)).sum()


def reversed_data(data: TrialData) -> TrialData:
    """The trial's data the other way round (t->s), to decode and score the reverse model: its references are
    the source texts."""
    splits = {name: [Example(e.tgt, e.src) for e in examples] for name, examples in data.splits.items()}
    return dataclasses.replace(
        data,
        src_vocab=data.tgt_vocab,
        tgt_vocab=data.src_vocab,
        src_segmenter=data.tgt_segmenter,
        tgt_segmenter=data.src_segmenter,
        splits=splits,
        references=data.sources,
        sources=data.references,
        alignments={},
    )
