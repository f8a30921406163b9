"""CUDA graphs of the RNN's training and decoding steps (`model.compile: graphs`).

On a GPU this model is launch-bound: a target position costs about 47 kernel launches in training (about 70 with
SACT), some 40 us of host time each, against 0.1-0.2 ms of GPU work. A CUDA graph records a step's kernels once
and replays them with one launch. It asks three things of the step: shapes that repeat (`train.buckets`: one shape
per length bucket), no host sync inside it, and memory that stays put: a replay reads the tensors it was recorded
with (new inputs are copied into them) and overwrites the outputs of the replay before.

- Training: the decoder and the loss, forward and backward, one pair of graphs per batch shape
  (torch.cuda.make_graphed_callables; dropout's random numbers advance with every replay). The encoder runs
  eagerly in front of it (cuDNN over packed sequences, whose layout changes with every batch's lengths) and its
  backward after it, as does the optimiser (fused Adam: one kernel for all parameters).
- Without gradients (the dev loss, greedy and beam search): Decoder.transition, one graph per shape of its inputs,
  its outputs copied out of the graph's memory before anyone can hold them across the next replay; and beam
  search's whole step (nmt_core.training.decode.beam_step: the transition, the scores, the top-k, the finished
  hypotheses and the reordering of the state) in one graph per batch shape, the transition recorded inside it.

Without CUDA nothing is captured: the same static-shape step runs eagerly, which is what the float64 tests hold to
the eager path's loss, gradients and translations on a CPU (tests/oracles/test_compiled.py); on a GPU the same test
runs the captured step (TF32 off).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor, nn

from nmt_core.data.batches import Batch
from nmt_core.models.rnn import PAD, host_to_device
from nmt_core.training.symmetry import reverse_batch

MAX_LOSS_GRAPHS = 64  # training shapes captured per trial (length buckets x their last, smaller batch); then eager
MAX_STEP_GRAPHS = 256  # no-grad step shapes (buckets x beam sizes, or one per position where the state grows)
WARMUP_CALLS = 2  # eager calls before a capture: cuBLAS handles and the allocator's first blocks stay out of it


def map_tensors(tree: Any, fn: Callable[[Tensor], Any]) -> Any:
    """tree with every tensor replaced by fn(tensor): through dataclasses (the decoder's state, attention's outputs),
    tuples, lists and dicts; anything else is kept as it is."""
    if isinstance(tree, Tensor):
        return fn(tree)
    if dataclasses.is_dataclass(tree) and not isinstance(tree, type):
        return type(tree)(**{f.name: map_tensors(getattr(tree, f.name), fn) for f in dataclasses.fields(tree)})
    if isinstance(tree, (tuple, list)):
        return type(tree)(map_tensors(item, fn) for item in tree)
    if isinstance(tree, dict):
        return {key: map_tensors(value, fn) for key, value in tree.items()}
    return tree


def tensors_of(tree: Any) -> list[Tensor]:
    """The tensors of tree, in map_tensors' order."""
    found: list[Tensor] = []
    map_tensors(tree, found.append)
    return found


def signature(tree: Any) -> Any:
    """What a graph recorded for `tree` must match: its structure, every tensor's shape, dtype and device, and its
    plain values (a beam's rows per sentence); other objects by type."""
    if isinstance(tree, Tensor):
        return ("tensor", tuple(tree.shape), tree.dtype, tree.device, tree.requires_grad)
    if dataclasses.is_dataclass(tree) and not isinstance(tree, type):
        return (type(tree), tuple(signature(getattr(tree, f.name)) for f in dataclasses.fields(tree)))
    if isinstance(tree, (tuple, list)):
        return (type(tree), tuple(signature(item) for item in tree))
    if isinstance(tree, dict):
        return (dict, tuple((key, signature(value)) for key, value in tree.items()))
    if tree is None or isinstance(tree, (bool, int, float, str)):
        return tree
    return type(tree)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector held off while a graph is recorded. Left on, it may free an old graph that sits in a
    reference cycle (a CapturedLoss's graphed callables are classes made on the fly, always in cycles) in the middle
    of a capture; the graph's destructor then calls CUDA, which a capturing stream forbids, and the capture is
    invalidated ("operation not permitted when stream is capturing", then cudaErrorStreamCaptureInvalidated: seen on
    an H100 in 3 of 56 captured-step tests). Disabled, the collector runs no automatic collection; frozen, what
    existed before the capture is out of reach of an explicit gc.collect() too (Ray's workers run one from a thread
    of their own when the raylet asks). The garbage waits until the capture is over. Objects someone else froze
    (a fork server, say) stay frozen: then only the automatic collections are held off."""
    enabled, freezing = gc.isenabled(), gc.get_freeze_count() == 0
    gc.disable()
    if freezing:
        gc.freeze()
    try:
        yield
    finally:
        if freezing:
            gc.unfreeze()
        if enabled:
            gc.enable()


class _StepGraph:
    """One no-grad step recorded as a CUDA graph: static inputs (copies of the first call's), the recorded outputs."""

    def __init__(self, step: Callable, args: tuple):
        self.inputs = map_tensors(args, torch.clone)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(WARMUP_CALLS):
                step(*self.inputs)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with collector_paused(), torch.cuda.graph(self.graph):
            self.outputs = step(*self.inputs)
        self.copied: list[tuple[weakref.ref, int] | None] = [None] * len(tensors_of(self.inputs))

    def replay(self, args: tuple) -> Any:
        """The step on `args`: each input copied into the graph's own unless it is the tensor copied there last time,
        unchanged (a batch's memory, the same at every step); the outputs copied out, so that whoever keeps them (a
        loop's readouts, beam search's history, the next step's state) keeps them past the next replay."""
        for n, (static, value) in enumerate(zip(tensors_of(self.inputs), tensors_of(args))):
            last = self.copied[n]
            if last is not None and last[0]() is value and last[1] == value._version:
                continue
            static.copy_(value)
            self.copied[n] = (weakref.ref(value), value._version)
        self.graph.replay()
        return map_tensors(self.outputs, torch.clone)


class StepGraphs:
    """Decoder.transition, replayed from CUDA graphs when it runs on CUDA without gradients; eager otherwise (training
    captures its whole step instead: CapturedLoss). One graph per input signature: per length bucket and beam, and
    per position where the state grows (decoder self-attention's history); past MAX_STEP_GRAPHS, eager."""

    def __init__(self, step: Callable):
        self.step = step
        self.graphs: dict[Any, _StepGraph] = {}

    def __call__(self, *args: Any) -> Any:
        # inside another step's capture (a beam step records the decoder's transition with it), eager: recorded there
        if torch.is_grad_enabled() or not args[0].is_cuda or torch.cuda.is_current_stream_capturing():
            return self.step(*args)
        key = signature(args)
        if key not in self.graphs:
            if len(self.graphs) >= MAX_STEP_GRAPHS:
                return self.step(*args)
            self.graphs[key] = _StepGraph(self.step, args)
        return self.graphs[key].replay(args)


class Encoded:
    """A Seq2Seq whose encoder has already run on the batch: called as the model is, it decodes from h and final."""

    def __init__(self, model: nn.Module, h: Tensor, final: Tensor):
        self.model, self.h, self.final = model, h, final

    def __call__(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor, positions: Tensor | None = None):
        return self.model.decode(self.h, self.final, src, tgt_in, positions)


def graph_batch(src: Tensor, src_lengths: Tensor, tgt_in: Tensor, tgt_out: Tensor, alignment: Tensor | None) -> Batch:
    """A Batch of device tensors only, as a captured step sees it: token counts are tensors, real positions absent
    (a static-shape loss masks padding instead)."""
    real = tgt_out != PAD
    return Batch(src, src_lengths, tgt_in, tgt_out, [], real.sum(), real.sum(-1), alignment, None)


class DecoderLoss(nn.Module):
    """The captured half of a training step: forward(src, src_lengths, tgt_in, tgt_out[, alignment], h, final[,
    h', final']) -> the loss, from the encoder outputs of the model (and of the reverse model, bilingual symmetry);
    `loss(batch, model[, reverse])` is the eager loss (nmt_core.training.train)."""

    def __init__(self, loss: Callable, models: list[nn.Module], aligned: bool):
        super().__init__()
        self.loss, self.models, self.aligned = loss, nn.ModuleList(models), aligned

    def forward(self, *inputs: Tensor) -> Tensor:
        src, src_lengths, tgt_in, tgt_out = inputs[:4]
        alignment = inputs[4] if self.aligned else None
        encoded = inputs[4 + self.aligned :]
        decoders = [Encoded(model, *encoded[2 * i : 2 * i + 2]) for i, model in enumerate(self.models)]
        return self.loss(graph_batch(src, src_lengths, tgt_in, tgt_out, alignment), *decoders)


def decoder_loss_inputs(models: list[nn.Module], batch: Batch) -> tuple[list[Tensor], bool]:
    """DecoderLoss's inputs for a batch on the device (the encoders run here, eagerly), and whether it is aligned."""
    device = batch.src.device
    batches = [batch, reverse_batch(batch)][: len(models)]
    encoded = [t for model, b in zip(models, batches) for t in model.encoder(b.src, b.src_lengths)]
    aligned = batch.alignment is not None
    lengths = host_to_device(batch.src_lengths, device)
    return [batch.src, lengths, batch.tgt_in, batch.tgt_out] + [batch.alignment] * aligned + encoded, aligned


class CapturedLoss:
    """The training loss of a batch with the decoder's forward and backward replayed from CUDA graphs, one pair per
    batch shape (captured when a shape first comes; past MAX_LOSS_GRAPHS, eager). `loss(batch, model[, reverse])`
    is the eager loss (nmt_core.training.train). The graphs share one memory pool: a step replays its forward and at
    once its backward, never two graphs' at the same time, and reads its outputs before the next step replays."""

    def __init__(self, loss: Callable, models: list[nn.Module]):
        self.loss, self.models = loss, models
        self.graphs: dict[Any, Callable] = {}
        self.pool = torch.cuda.graph_pool_handle()

    def __call__(self, batch: Batch) -> Tensor:
        inputs, aligned = decoder_loss_inputs(self.models, batch)
        key = signature(inputs)
        if key not in self.graphs:
            module = DecoderLoss(self.loss, self.models, aligned)
            if len(self.graphs) >= MAX_LOSS_GRAPHS:
                return module(*inputs)
            sample = tuple(t.detach().clone().requires_grad_(t.requires_grad) for t in inputs)
            with collector_paused():
                self.graphs[key] = torch.cuda.make_graphed_callables(
                    module, sample, num_warmup_iters=WARMUP_CALLS, allow_unused_input=True, pool=self.pool
                )
        return self.graphs[key](*inputs)
