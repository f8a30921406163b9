"""What a GPU trial relies on, checked where it can be on a CPU and on CUDA where there is one: packing without
a wait for the GPU gives pack_padded_sequence's exact outputs; beam search's back-pointers read back exactly the
trace, tokens and score of each hypothesis it returns; the reversed batch of bilingual symmetry is the batch the
other way round; the sequence RNNs never run in fp16 under bf16 autocast; and a CUDA training step never waits
for the GPU."""

import dataclasses

import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nmt_core.data import real_positions
from nmt_core.decode import beam_search
from nmt_core.model import BOS, EOS, PAD, rnn_by_length
from nmt_core.symmetry import reverse_batch
from nmt_core.train import autocast, batch_loss, symmetric_loss
from tests.oracles.test_fast_path import VARIANTS, _batch, _models

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
DECODED = [
    "general-sact",
    "concat-fixed-sentinel",
    "coverage",
    "decoder_self",
    "intra_temporal",
    "gru-sentinel-sact",
    "bahdanau-gru-two-layers",
]


def test_the_rnn_by_length_gives_pack_padded_sequences_outputs_and_gradients():
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(5, 4, num_layers=2, batch_first=True, bidirectional=True).double()
    x = torch.randn(4, 6, 5, dtype=torch.float64, requires_grad=True)
    lengths = torch.tensor([3, 6, 1, 6])  # unsorted, with a tie

    def reference():
        out, (h_n, _) = lstm(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))
        return pad_packed_sequence(out, batch_first=True, total_length=6)[0], h_n

    results = []
    for run in (reference, lambda: rnn_by_length(lstm, x, lengths)):
        padded, h_n = run()
        (grad,) = torch.autograd.grad((padded**2).sum() + (h_n**3).sum(), x)
        results.append((padded, h_n, grad))
    for expected, got in zip(*results):
        assert torch.equal(expected, got)


@pytest.mark.parametrize("name", DECODED)
@pytest.mark.parametrize(
    "max_len_offset, sharpness, eos_bias", [(1, 1.0, 0.0), (10, 6.0, 0.4), (10, 8.0, 0.6), (10, 12.0, 0.6)]
)
def test_beam_search_returns_each_hypothesis_with_its_own_trace_and_score(name, max_len_offset, sharpness, eos_bias):
    """Teacher-force every returned hypothesis through the model: its attention rows, tau and gate are the
    trace beam search read back, and its log-probability over its length ** penalty is its score. Max length 1
    past the source leaves some sentences unfinished."""
    cfg, model, _ = _models(VARIANTS[name], fast=True)
    model.eval()
    with torch.no_grad():  # peaked, with </s> often a candidate: hypotheses end at many steps and from every beam
        model.decoder.output.weight *= sharpness
        model.decoder.output.bias[EOS] += eos_bias
    decode = dataclasses.replace(cfg.decode, max_len_ratio=1.0, max_len_offset=max_len_offset)
    batch = _batch()
    steps = int(batch.src_lengths.max()) + max_len_offset
    for row, hyp in zip(batch.index, beam_search(model, batch, decode, 3)):
        finished = len(hyp.tokens) < steps
        targets = hyp.tokens + ([EOS] if finished else [])
        n = int(batch.src_lengths[row])
        with torch.no_grad():
            logits, trace = model(
                batch.src[row : row + 1, :n], batch.src_lengths[row : row + 1], torch.tensor([[BOS] + targets[:-1]])
            )
        log_p = logits[0].log_softmax(-1).gather(1, torch.tensor(targets).unsqueeze(1)).sum().item()
        length = len(targets) if finished else steps
        assert hyp.score == pytest.approx(log_p / length**decode.length_penalty, rel=1e-6)  # beam scores in fp32
        words = len(hyp.tokens)
        assert torch.allclose(hyp.weights, trace.weights[0, :words].float(), atol=1e-6)
        for got, expected in ((hyp.tau, trace.tau), (hyp.gate, trace.gate)):
            assert (got is None) == (expected is None)
            if got is not None:
                assert got == pytest.approx(expected[0, :words].tolist(), abs=1e-6)


def test_the_reversed_batch_is_the_batch_the_other_way_round():
    batch = _batch()
    back = reverse_batch(batch)
    for row in range(batch.src.size(0)):
        n, m = int(batch.src_lengths[row]), int(batch.tgt_lengths[row]) - 1  # source words, target words
        words = batch.tgt_out[row, :m]
        assert back.src[row, :m].tolist() == words.tolist() and (back.src[row, m:] == PAD).all()
        assert int(back.src_lengths[row]) == m
        assert back.tgt_in[row, : n + 1].tolist() == [BOS] + batch.src[row, :n].tolist()
        assert back.tgt_out[row, : n + 1].tolist() == batch.src[row, :n].tolist() + [EOS]
        assert (back.tgt_out[row, n + 1 :] == PAD).all()
    assert torch.equal(back.real, real_positions(back.tgt_out))
    assert back.n_tokens == int((back.tgt_out != PAD).sum())
    assert torch.equal(back.tgt_lengths, (back.tgt_out != PAD).sum(-1))


@CUDA
@pytest.mark.parametrize(
    "model_section, fast", [({}, True), ({"input_feeding": False}, True), ({}, False), ({"cell": "gru"}, True)]
)
def test_under_bf16_autocast_no_rnn_runs_in_fp16_on_cuda(model_section, fast):
    """torch.autocast(bfloat16) sends cuDNN's RNN to fp16; the encoder and the whole-sequence decoder must not."""
    cfg, model, _ = _models({"model": model_section, "train": {"amp": True}}, fast=fast)
    device = torch.device("cuda")
    model = model.float().to(device)
    dtypes = []

    def record(_module, _inputs, outputs):
        out = outputs[0]
        dtypes.append((out.data if hasattr(out, "batch_sizes") else out).dtype)

    hooks = [m.register_forward_hook(record) for m in model.modules() if isinstance(m, (torch.nn.LSTM, torch.nn.GRU))]
    with autocast(cfg, device):
        loss, _ = batch_loss(model, _batch().to(device), cfg)
    loss.backward()
    for hook in hooks:
        hook.remove()
    assert dtypes and torch.float16 not in dtypes, dtypes
    assert torch.isfinite(loss)


@CUDA
@pytest.mark.parametrize(
    "name",
    ["general-sact", "concat-fixed-sentinel", "symmetry", "coverage", "decoder_self", "gaussian", "no-input-feeding"],
)
def test_a_cuda_training_step_never_waits_for_the_gpu(name):
    cfg, model, reverse = _models(VARIANTS[name], fast=True)
    device = torch.device("cuda")
    model = model.float().to(device)
    reverse = None if reverse is None else reverse.float().to(device)
    batch = _batch()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        moved = batch.to(device)
        loss = batch_loss(model, moved, cfg)[0] if reverse is None else symmetric_loss(model, reverse, moved, cfg)
        loss.backward()
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert torch.isfinite(loss)
