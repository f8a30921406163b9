"""torch.compile and CUDA graphs for what a trial repeats most: the decoder's step and the loss (`model.compile`).

A training batch runs the decoder's step once per target position, and decoding once per output token; between
its matrix products a step is a string of small elementwise ops, each a pass over memory and a dispatch on a CPU
and a kernel launch on a GPU. Inductor fuses them; on CUDA `reduce-overhead` replays the step as a CUDA graph.
What stays eager, and why: the encoder is one oneDNN/cuDNN LSTM call over packed sequences (nothing to fuse,
and packing is data-dependent); the Python loop over target positions stays, because a loop traced whole would
compile one graph per target length.

Shapes are dynamic from the first call (batch rows, source length, the output positions of the loss), so a trial
compiles a handful of graphs: training, teacher-forced dev (no grad, no dropout), greedy search and beam search
(k rows per sentence); not one per batch. The step holds no host-device sync and no data-dependent shape.

`graphs` compiles nothing: it captures the eager step as CUDA graphs (nmt_core.training.graphs), the decoder's whole
forward and backward in training. `reduce-overhead` and `graphs` give the step static shapes (`static_shapes`):
the loss reads every target position of a batch's length bucket with padding masked, not the real tokens, whose
number changes with every batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

import torch

from nmt_core.models.rnn import INDUCTOR_MODES, Seq2Seq
from nmt_core.training.decode import beam_step
from nmt_core.training.graphs import StepGraphs, map_tensors
from nmt_core.training.loss import masked_cross_entropy, summed_cross_entropy

if TYPE_CHECKING:  # Dynamo is imported where a model compiles: its import is a second of every process's start
    from torch._dynamo.callback import CallbackArgs

# Graphs a model's step may compile: the first training step (its state needs no gradient yet) and the others,
# their no-grad twins for dev and greedy search, beam search's (k rows per sentence). Dynamo's recompile limit
# counts graphs per function, whatever the model, so every compiled model (two with symmetry, one per variant in
# a benchmark) widens it by this much; past it Dynamo falls back to eager and warns.
GRAPHS_PER_MODEL = 8


class _CompileClock:
    """Wall seconds this process has spent compiling: Dynamo's tracing, Inductor's code generation, backward graphs
    compiled at their first backward and CUDA graph recording (Dynamo calls start and end once around each)."""

    def __init__(self):
        self.seconds, self._start = 0.0, 0.0

    def start(self, _: CallbackArgs) -> None:
        self._start = time.perf_counter()

    def end(self, _: CallbackArgs) -> None:
        self.seconds += time.perf_counter() - self._start


_CLOCK = _CompileClock()
STATIC_SHAPE_MODES = ("reduce-overhead", "graphs")  # model.compile values that replay CUDA graphs


def static_shapes(mode: str) -> bool:
    """Whether a step under `model.compile: mode` must have one shape per length bucket (CUDA graphs replay it)."""
    return mode in STATIC_SHAPE_MODES


_COMPILED_MODELS: list[int] = []  # id of every model compiled in this process


def _start_clock() -> None:
    """Register the clock with Dynamo, again after torch._dynamo.reset(), which drops every callback."""
    from torch._dynamo.callback import callback_handler, on_compile_end, on_compile_start

    if _CLOCK.start not in callback_handler.start_callbacks:
        on_compile_start(_CLOCK.start)
        on_compile_end(_CLOCK.end)


def compile_seconds() -> float:
    """Seconds spent compiling in this process so far: a trial reports the difference over its run."""
    return _CLOCK.seconds


def _compile(fn: Callable, mode: str) -> Callable:
    return torch.compile(fn, dynamic=True, mode=None if mode == "default" else mode)


def compile_model(model: Seq2Seq, mode: str) -> Seq2Seq:
    """The model with its decoder step compiled (in place; `none` leaves it eager; `graphs` replays it from CUDA
    graphs without gradients). Training and decoding both call `Decoder.transition` per target position; its
    parameters stay the module's, so checkpoints, the optimiser and `state_dict` see no difference."""
    if mode == "none":
        return model
    if mode == "graphs":  # each decoder step, and each whole beam-search step (nmt_core.training.decode.beam_step)
        model.decoder.transition = StepGraphs(model.decoder.transition)
        model.beam_step = StepGraphs(partial(beam_step, model))
        return model
    import torch._dynamo
    import torch.fx.experimental._config

    torch._dynamo.config.allow_rnn = True  # the step reads the decoder LSTM's own weights (rnn_step), not nn.LSTM
    # Duck shaping gives sizes that happen to be equal when a graph is traced one symbol: a batch of 64 rows beside
    # emb_size 64 fixed every graph's batch at 64, and a source as long as some other size tied the two. Each
    # later batch without that coincidence compiled the step again, until Dynamo's recompile limit sent the rest of
    # the trial (and every later trial in that process) back to eager, silently. Sizes stay independent instead.
    torch.fx.experimental._config.use_duck_shape = False
    _start_clock()
    _COMPILED_MODELS.append(id(model))
    config = torch._dynamo.config
    config.recompile_limit = max(config.recompile_limit, GRAPHS_PER_MODEL * len(_COMPILED_MODELS))
    decoder = model.decoder
    step = _compile(decoder.transition, mode)
    decoder.transition = step if mode != "reduce-overhead" else _keeping_traces(step)
    return model


def _keeping_traces(step: Callable) -> Callable:
    """A CUDA-graph step whose outputs outlive the next step. Without autograd (dev loss, decoding) every call replays
    into the same static buffers, while the teacher-forced loop keeps every step's readout and trace until it stacks
    them, beam search keeps every step's weights until it reads its hypotheses back, and the next step reads this
    one's state while its replay overwrites it ("accessing tensor output of CUDAGraphs that has been overwritten"
    at the second position): readout, state and attention output are copied out. Training keeps every step's
    buffers until backward anyway."""

    def call(*args):
        outputs = step(*args)
        return outputs if torch.is_grad_enabled() else map_tensors(outputs, torch.clone)

    return call


_COMPILED_LOSS: dict[str, Callable] = {}


def loss_function(mode: str) -> Callable:
    """The fused cross-entropy (nmt_core.training.loss), compiled under Inductor's modes: its softmax, gather and the
    backward's exp, subtraction and scatter become one or two passes over the (N, V) logits. With static shapes
    (`static_shapes`) the masked one, over every position of the batch."""
    loss = masked_cross_entropy if static_shapes(mode) else summed_cross_entropy
    if mode not in INDUCTOR_MODES:
        return loss
    _start_clock()
    if mode not in _COMPILED_LOSS:
        _COMPILED_LOSS[mode] = _compile(loss, mode)
    return _COMPILED_LOSS[mode]
