"""What a GPU trial relies on, checked where it can be on a CPU and on CUDA where there is one: packing without
a wait for the GPU gives pack_padded_sequence's exact outputs; beam search's back-pointers read back exactly the
trace, tokens and score of each hypothesis it returns; the reversed batch of bilingual symmetry is the batch the
other way round; the sequence RNNs never run in fp16 under bf16 autocast; a CUDA training step never waits
for the GPU; and CUDA graphs (`model.compile: graphs`, `reduce-overhead`) replay the eager model's loss, gradients,
dev loss and translations, draw new dropout masks at each replay and never wait for the GPU either."""

import dataclasses
import gc
import math
import weakref

import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nmt_core.data.batches import real_positions
from nmt_core.models.rnn import BOS, EOS, PAD, rnn_by_length
from nmt_core.models.unrolled import gru_cell_from_gates, lstm_cell_from_gates
from nmt_core.training.decode import beam_search, greedy
from nmt_core.training.graphs import CapturedLoss, StepGraphs, collector_paused
from nmt_core.training.symmetry import reverse_batch
from nmt_core.training.train import (
    autocast,
    batch_loss,
    build_optimizer,
    dev_pass,
    optimizer_step,
    step_loss,
    symmetric_loss,
    trial_loss,
)
from tests.conftest import COMPILES, tiny_config
from tests.oracles.test_compiled import BATCHES, _family_models, _named_grads
from tests.oracles.test_compiled import _batch as compiled_batch
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


# ---- model.compile: graphs and reduce-overhead on CUDA (the runbook runs these; skipped without CUDA) ----------


@pytest.fixture
def tf32_off():
    """fp32 matrix products in fp32, not TF32 (the tests run in float64, where TF32 never acts, and fp32)."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def _on_cuda(models: list, dtype=torch.float64) -> list:
    return [model.to(device=torch.device("cuda"), dtype=dtype) for model in models]


def _shapes() -> list:
    """Batches of three bucket shapes and different sentences, in the order A, B, A, C, B: every replay comes after
    another graph's, in the memory pool they share."""
    a, b, c = (compiled_batch(lengths, i, bucket) for i, (lengths, bucket) in enumerate(zip(BATCHES, (4, 5, 3))))
    return [a, b, a, c, b]


@CUDA
@pytest.mark.parametrize("name", VARIANTS)
def test_the_captured_training_step_gives_the_eager_loss_and_gradients_on_cuda(name, tf32_off):
    """CapturedLoss (the decoders' forward and backward replayed from CUDA graphs, the encoders eager) against the
    eager step on the same batch, float64: loss within rtol 1e-10, every gradient within rtol 1e-8 (atol 1e-12)."""
    cfg, eager_models = _family_models(VARIANTS[name], "none")
    graphed_cfg, models = _family_models(VARIANTS[name], "graphs")
    eager_models, models = _on_cuda(eager_models), _on_cuda(models)
    captured = CapturedLoss(trial_loss(graphed_cfg), models)
    for batch in _shapes():
        batch = batch.to(torch.device("cuda"))
        expected_loss = trial_loss(cfg)(batch, *eager_models)
        expected = _named_grads(expected_loss, eager_models)
        for model in models:
            model.zero_grad(set_to_none=True)
        loss = captured(batch)
        loss.backward()
        assert torch.allclose(loss, expected_loss, rtol=1e-10, atol=1e-12), (loss.item(), expected_loss.item())
        got = {f"{i}.{n}": p.grad for i, m in enumerate(models) for n, p in m.named_parameters()}
        for key, grad in expected.items():
            assert (grad is None) == (got[key] is None), key
            if grad is not None:
                assert torch.allclose(got[key], grad, rtol=1e-8, atol=1e-12), (key, (got[key] - grad).abs().max())
    assert len(captured.graphs) == 3


def test_the_collector_is_paused_while_a_graph_is_recorded_and_left_as_it_was_after():
    """No automatic collection inside, and older garbage out of reach of an explicit gc.collect() (another thread's):
    it is freed after."""

    class Node:
        pass

    cycle = Node()
    cycle.itself = cycle
    freed = weakref.ref(cycle)
    del cycle
    assert gc.isenabled() and gc.get_freeze_count() == 0
    with collector_paused():
        assert not gc.isenabled()
        gc.collect()
        assert freed() is not None, "garbage from before the capture was collected during it"
    assert gc.isenabled() and gc.get_freeze_count() == 0
    gc.collect()
    assert freed() is None
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # a caller that had it off keeps it off
    finally:
        gc.enable()


def _captured_graph() -> tuple:
    """A small captured graph and the tensor it writes."""
    graph, x = torch.cuda.CUDAGraph(), torch.zeros(4, device="cuda")
    with torch.cuda.graph(graph):
        x.add_(1)
    return graph, x


@CUDA
def test_a_capture_survives_the_collector_freeing_an_old_graph_during_it(tf32_off):
    """An old graph in a reference cycle that the cycle collector frees while a new step is being captured: its
    destructor calls CUDA, which invalidates the capture (3 of 56 captured-step tests failed so on an H100) unless
    CapturedLoss records with the collector paused. Each capture here leaves such a graph young, and the collector
    runs at every allocation."""
    old_graphs = [_captured_graph() for _ in range(2)]  # made in a function: no local name keeps one alive
    freed = [weakref.ref(x) for _, x in old_graphs]
    cfg, models = _family_models(VARIANTS["general-sact"], "graphs")
    loss = trial_loss(cfg)

    def loss_leaving_an_old_graph(batch, *decoders):
        if torch.cuda.is_current_stream_capturing() and old_graphs:
            cycle: list = [old_graphs.pop()]
            cycle.append(cycle)
            del cycle
        return loss(batch, *decoders)

    captured = CapturedLoss(loss_leaving_an_old_graph, _on_cuda(models))
    threshold = gc.get_threshold()
    gc.set_threshold(1)
    try:
        for batch in _shapes()[:2]:  # two shapes: two captures
            captured(batch.to(torch.device("cuda"))).backward()
        torch.cuda.synchronize()
    finally:
        gc.set_threshold(*threshold)
    gc.collect()
    assert not old_graphs and len(captured.graphs) == 2
    assert all(ref() is None for ref in freed), "the old graphs were not freed: the test provoked nothing"


def _beam(model, batch, cfg):
    return beam_search(model, batch, cfg, 3)


# one decoding variant per part of the step (its state: SACT's c~, coverage, intra-temporal sums, the growing
# self-attention history, the position counter; each placement and cell): the CPU test runs all 53 on padded batches
REPLAYED = [
    "general-sact-sentinel",
    "scaled_dot-learned",
    "concat-fixed",
    "key_value-sact",
    "bahdanau",
    "cgru",
    "log_position",
    "gaussian",
    "intra_temporal",
    "both_self",
    "fertility",
    "gru-sentinel-sact",
    "bahdanau-gru-two-layers",
    "no-input-feeding-sentinel",
    "coverage",
]


@CUDA
@pytest.mark.parametrize("name", REPLAYED)
def test_replayed_decoding_steps_give_the_eager_dev_loss_and_translations_on_cuda(name, tf32_off):
    """Dev loss, greedy and beam search through StepGraphs (every Decoder.transition without gradients replayed),
    float64, against the eager model: the same tokens, scores within 1e-9, dev loss within rtol 1e-10."""
    results = []
    for mode in ("none", "graphs"):
        cfg, models = _family_models(VARIANTS[name], mode)
        (model,) = _on_cuda(models)
        model.eval()
        batches = [batch.to(torch.device("cuda")) for batch in _shapes()[:4]]
        dev = dev_pass(model, batches, cfg, torch.device("cuda"))
        decoded = [search(model, b, cfg.decode) for b in batches for search in (greedy, _beam)]
        results.append((dev, decoded))
    (eager_dev, eager), (dev, replayed) = results
    assert model.decoder.transition.graphs, "no step was replayed"
    assert dev["dev_loss"] == pytest.approx(eager_dev["dev_loss"], rel=1e-10)
    for expected, got in zip(eager, replayed):
        for e, g in zip(expected, got):
            assert g.tokens == e.tokens and abs(g.score - e.score) < 1e-9
            assert torch.allclose(g.weights, e.weights, atol=1e-9)


@CUDA
@pytest.mark.parametrize("name", ["general-sact", "concat-fixed-sentinel", "symmetry", "coverage", "decoder_self"])
def test_a_captured_training_step_never_waits_for_the_gpu(name):
    """Once its shape is captured, a whole `model.compile: graphs` training step (the batch to the device, the
    encoders, the replayed decoder forward and backward, clipping, fused Adam) runs under sync debug mode "error"."""
    cfg, models = _family_models(VARIANTS[name], "graphs")
    models = _on_cuda(models, torch.float32)
    optimizer = build_optimizer(torch.nn.ModuleList(models), cfg)
    captured = CapturedLoss(trial_loss(cfg), models)
    batch = _shapes()[0]
    optimizer_step(optimizer, captured(batch.to(torch.device("cuda"))), optimizer.param_groups[0]["params"], 10.0)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(2):
            loss = captured(batch.to(torch.device("cuda")))
            optimizer_step(optimizer, loss, optimizer.param_groups[0]["params"], 10.0)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert torch.isfinite(loss)


@CUDA
def test_dropout_draws_new_masks_at_every_replay_and_the_seed_repeats_them():
    """Dropout inside a captured step: each replay draws its own masks (the losses of one batch differ), and
    torch.cuda.manual_seed puts the generator back, so that a seeded trial repeats itself."""
    cfg, models = _family_models({"model": {"dropout": 0.3}}, "graphs")
    models = _on_cuda(models, torch.float32)
    captured = CapturedLoss(trial_loss(cfg), models)
    batch = _shapes()[0].to(torch.device("cuda"))
    captured(batch)  # captures
    runs = []
    for _ in range(2):
        torch.cuda.manual_seed(7)
        runs.append([captured(batch).item() for _ in range(2)])
    assert runs[0] == runs[1] and runs[0][0] != runs[0][1]


@CUDA
def test_a_graphed_trial_trains_like_the_eager_one_on_cuda(tf32_off):
    """The trial's loop with `model.compile: graphs` and length buckets on CUDA (captured training steps, replayed dev
    loss, greedy dev BLEU and beam test BLEU): the eager trial's epoch losses in float32 (dropout 0; within 1e-4)."""
    from nmt_core.training.train import train

    results = {
        mode: train(
            tiny_config(model={"compile": mode}, train={"epochs": 2, "device": "cuda", "buckets": 4}),
            log=lambda _: None,
        )
        for mode in ("none", "graphs")
    }
    for eager, graphed in zip(results["none"].history, results["graphs"].history):
        assert abs(eager["train_loss"] - graphed["train_loss"]) < 1e-4
        assert abs(eager["dev_loss"] - graphed["dev_loss"]) < 1e-4


# ---- what only runs on CUDA, against the maths and against mutations a CPU cannot see (the runbook runs these) ----
DEVICES = ["cpu", pytest.param("cuda", marks=CUDA)]  # on a CPU the oracle itself is checked against the formulas


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def _lstm_by_hand(gates_x, gates_h, c) -> tuple[list, list]:
    """torch.lstm_cell's maths, element by element (gates in PyTorch's order i, f, g, o)."""
    hidden = c.size(1)
    h_out, c_out = [], []
    for row in range(c.size(0)):
        g = [float(gates_x[row, k] + gates_h[row, k]) for k in range(4 * hidden)]
        cells = [
            _sigmoid(g[hidden + j]) * float(c[row, j]) + _sigmoid(g[j]) * math.tanh(g[2 * hidden + j])
            for j in range(hidden)
        ]
        h_out.append([_sigmoid(g[3 * hidden + j]) * math.tanh(cells[j]) for j in range(hidden)])
        c_out.append(cells)
    return h_out, c_out


def _gru_by_hand(gates_x, gates_h, h) -> list:
    """torch.gru_cell's maths, element by element (gates in PyTorch's order r, z, n): (1 - z) n + z h."""
    hidden = h.size(1)
    out = []
    for row in range(h.size(0)):
        x, p = [float(v) for v in gates_x[row]], [float(v) for v in gates_h[row]]
        values = []
        for j in range(hidden):
            r, z = _sigmoid(x[j] + p[j]), _sigmoid(x[hidden + j] + p[hidden + j])
            n = math.tanh(x[2 * hidden + j] + r * p[2 * hidden + j])
            values.append((1 - z) * n + z * float(h[row, j]))
        out.append(values)
    return out


@pytest.mark.parametrize("device", DEVICES)
def test_the_fused_cells_compute_the_lstm_and_gru_maths_in_float64(device):
    """nmt_core.models.unrolled's cells from their gate products: on CUDA the fused kernels (_thnn_fused_lstm_cell and
    _thnn_fused_gru_cell), which no CPU runs. Values against the cells' formulas element by element, gradients
    against numerical derivatives (gradcheck), float64."""
    torch.manual_seed(0)
    rows, hidden = 3, 4

    def draw(width: int) -> torch.Tensor:
        return (torch.randn(rows, width, dtype=torch.float64) * 1.5).to(device).requires_grad_()

    gates_x, gates_h, c = draw(4 * hidden), draw(4 * hidden), draw(hidden)
    h_new, c_new = lstm_cell_from_gates(gates_x, gates_h, c)
    h_expected, c_expected = _lstm_by_hand(*(t.detach().cpu() for t in (gates_x, gates_h, c)))
    assert torch.allclose(h_new.detach().cpu(), torch.tensor(h_expected, dtype=torch.float64), rtol=1e-12, atol=1e-14)
    assert torch.allclose(c_new.detach().cpu(), torch.tensor(c_expected, dtype=torch.float64), rtol=1e-12, atol=1e-14)
    assert torch.autograd.gradcheck(lambda *a: lstm_cell_from_gates(*a), (gates_x, gates_h, c))

    gates_x, gates_h, h = draw(3 * hidden), draw(3 * hidden), draw(hidden)
    expected = torch.tensor(_gru_by_hand(*(t.detach().cpu() for t in (gates_x, gates_h, h))), dtype=torch.float64)
    assert torch.allclose(gru_cell_from_gates(gates_x, gates_h, h).detach().cpu(), expected, rtol=1e-12, atol=1e-14)
    assert torch.autograd.gradcheck(lambda *a: gru_cell_from_gates(*a), (gates_x, gates_h, h))


@CUDA
def test_a_step_graph_per_input_shape_copies_every_new_input_in_on_cuda(tf32_off):
    """StepGraphs against the step run eagerly: a graph per input shape (a key that ignored shapes would replay one
    shape's graph on another's inputs), each replay reading the inputs of its call: a new tensor, and the same
    tensor changed in place since the last call (a replay that kept the first call's inputs reads stale ones)."""
    weight = torch.randn(3, 3, dtype=torch.float64, device="cuda")

    def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x @ weight) + y

    graphs = StepGraphs(step)
    y = torch.randn(2, 3, dtype=torch.float64, device="cuda")
    with torch.no_grad():
        for rows in (2, 4, 2, 5):
            x, bias = torch.randn(rows, 3, dtype=torch.float64, device="cuda"), y[:1].expand(rows, 3).contiguous()
            assert torch.allclose(graphs(x, bias), step(x, bias), rtol=1e-12, atol=0)
        x = torch.randn(2, 3, dtype=torch.float64, device="cuda")
        first = graphs(x, y)
        assert torch.allclose(first, step(x, y), rtol=1e-12, atol=0)
        y.mul_(-2)  # the same tensor, changed in place: it must be copied in again
        assert torch.allclose(graphs(x, y), step(x, y), rtol=1e-12, atol=0) and not torch.allclose(graphs(x, y), first)
    assert sorted(key[1][0][1][0] for key in graphs.graphs) == [2, 4, 5]  # (tuple, (x's, y's)): x's rows


@CUDA
@pytest.mark.parametrize("name", ["general-sact", "bahdanau-gru-two-layers"])
def test_every_captured_step_replays_its_graph_and_none_runs_eagerly(name, monkeypatch):
    """A trial's `model.compile: graphs` step (nmt_core.training.train.step_loss) replays its forward and backward
    graphs at every training step, greedy search a graph at every decoder step, and beam search one graph at every step
    (the decoder's transition recorded inside it): a path that silently ran eagerly would give the same numbers, so the
    replays are counted."""
    replays = []
    replay = torch.cuda.CUDAGraph.replay
    monkeypatch.setattr(torch.cuda.CUDAGraph, "replay", lambda graph: replays.append(1) or replay(graph))
    cfg, models = _family_models(VARIANTS[name], "graphs")
    (model,) = _on_cuda(models, torch.float32)
    loss_of = step_loss(model, None, cfg, torch.device("cuda"))
    batches = [batch.to(torch.device("cuda")) for batch in _shapes()]
    for batch in batches:
        loss_of(batch).backward()
    assert len(replays) == 2 * len(batches), "a training step ran without replaying its forward and backward graphs"
    model.eval()
    calls, beam_steps = [], []
    transition, beam_step = model.decoder.transition, model.beam_step
    monkeypatch.setattr(model.decoder, "transition", lambda *args: calls.append(1) or transition(*args))
    replays.clear()
    greedy(model, batches[0], cfg.decode)
    assert calls and len(replays) == len(calls), "a greedy decoder step ran eagerly"
    monkeypatch.setattr(model, "beam_step", lambda *args: beam_steps.append(1) or beam_step(*args))
    _beam(model, batches[0], cfg.decode)  # records the beam step's graph for this shape
    calls.clear(), replays.clear(), beam_steps.clear()
    _beam(model, batches[0], cfg.decode)
    assert beam_steps and len(replays) == len(beam_steps), "a beam step ran eagerly"
    assert not calls, "the decoder's transition ran outside the beam step's graph"


@COMPILES
@CUDA
def test_reduce_overhead_replays_the_no_grad_loops_without_reading_overwritten_outputs(tf32_off):
    """torch.compile's CUDA graph trees (`reduce-overhead`): the dev loss and both searches read each step's outputs
    after the next replay (the state above all); copied out, they match the eager model (float64). Last in the file:
    Inductor compiles for a minute, and the runbook's time limit should cut this test rather than the others."""
    results = []
    for mode in ("none", "reduce-overhead"):
        cfg, models = _family_models(VARIANTS["general-sact"], mode)
        (model,) = _on_cuda(models)
        model.eval()
        batch = _shapes()[0].to(torch.device("cuda"))
        dev = dev_pass(model, [batch], cfg, torch.device("cuda"))
        results.append((dev, greedy(model, batch, cfg.decode), _beam(model, batch, cfg.decode)))
    (eager_dev, *eager), (dev, *replayed) = results
    assert dev["dev_loss"] == pytest.approx(eager_dev["dev_loss"], rel=1e-9)
    for expected, got in zip(eager, replayed):
        assert [g.tokens for g in got] == [e.tokens for e in expected]
