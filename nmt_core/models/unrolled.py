"""The decoder's teacher-forced loop with what need not be in it taken out (`model.fast_path`, eager).

Training and the dev loss run the decoder once per target position. Two kinds of work in that loop need not be
there: the embedding's share of the first RNN layer's input product (W_ih [y_{t-1}; h~_{t-1}] = W_e y_{t-1} +
W_f h~_{t-1}: the first term needs no earlier step, so it is one product over all positions; input feeding keeps
the second in the loop), and the gradient of every weight used at every position (sum_t g_t^T x_t, one product
after the loop instead of a small product and a weight-sized accumulation per position). The same maths: the
fast-path oracle (tests/oracles/test_fast_path.py) compares both with the plain path in float64.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional as F

RnnState = Tensor | tuple[Tensor, Tensor]


class _Tape:
    """One weight's per-position products x_t W^T: their inputs x_t and, filled in by backward, their output
    gradients g_t. W's gradient is then sum_t g_t^T x_t, one product over every position, instead of one small
    product and one weight-sized accumulation per position."""

    def __init__(self, rows: int):
        self.rows = rows
        self.inputs: list[Tensor] = []
        self.grads: list[Tensor | None] = []

    def record(self, x: Tensor) -> int:
        self.inputs.append(x)
        self.grads.append(None)
        return len(self.inputs) - 1

    def weight_gradient(self) -> Tensor:
        grads = [x.new_zeros(x.size(0), self.rows) if g is None else g for g, x in zip(self.grads, self.inputs)]
        gradient = torch.cat(grads).t() @ torch.cat(self.inputs)
        self.inputs, self.grads = [], []  # the graph is spent: free what the tape held
        return gradient


class _DeferredWeight(torch.autograd.Function):
    """W itself, whose gradient is its tape's one product: autograd runs this backward after the backward of every
    product that used it (they all depend on it), when the tape is full."""

    @staticmethod
    def forward(ctx, weight: Tensor, tape: _Tape) -> Tensor:
        ctx.tape = tape
        ctx.set_materialize_grads(False)
        return weight.view_as(weight)

    @staticmethod
    def backward(ctx, grad: Tensor | None) -> tuple[Tensor, None]:
        total = ctx.tape.weight_gradient()
        return total if grad is None else grad + total, None


class _TapedProduct(torch.autograd.Function):
    """x W^T for one position: backward returns x's gradient and leaves W's on the tape."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, tape: _Tape) -> Tensor:
        ctx.save_for_backward(weight)
        ctx.tape, ctx.index = tape, tape.record(x)
        return x @ weight.t()

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, None, None]:
        (weight,) = ctx.saved_tensors
        ctx.tape.grads[ctx.index] = grad
        return (grad @ weight if ctx.needs_input_grad[0] else None), None, None


class Products:
    """x W^T for the weights a teacher-forced loop uses at every position. `deferred` (with gradients): each weight's
    gradient is one product over all positions (_Tape), taken after the loop's backward. A column slice W[:, k:] is
    taken once per loop, so that its backward is one scatter into W's gradient, not one per position."""

    def __init__(self, deferred: bool):
        self.deferred = deferred
        self._weights: dict[tuple[int, int], tuple[Tensor, Tensor, _Tape | None]] = {}

    def linear(self, x: Tensor, weight: Tensor, first_column: int = 0) -> Tensor:
        """x W[:, first_column:]^T."""
        key = (id(weight), first_column)
        if key not in self._weights:  # the weight itself is kept, so that its id stays its own during the loop
            used = weight[:, first_column:] if first_column else weight
            tape = _Tape(weight.size(0)) if self.deferred else None
            self._weights[key] = (weight, used if tape is None else _DeferredWeight.apply(used, tape), tape)
        _, used, tape = self._weights[key]
        return F.linear(x, used) if tape is None else _TapedProduct.apply(x, used, tape)


@dataclass
class Hoisted:
    """One position of the teacher-forced loop, with what was computed for every position at once. `gates`: the
    embedding's share of the first RNN layer's input product, W_ih[:, :E] y_{t-1} + b_ih (input feeding keeps the
    share of h~_{t-1} in the loop); `products`: the loop's per-position products (Products)."""

    gates: Tensor  # (B, G): G = 4H (LSTM) or 3H (GRU)
    products: Products
    emb_size: int  # E: the columns of the first layer's input that `gates` has taken care of


def lstm_cell_from_gates(gates_x: Tensor, gates_h: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
    """torch.lstm_cell from its two gate products (biases included; PyTorch's order i, f, g, o): (h', c')."""
    if gates_x.is_cuda:  # the fused kernel torch.lstm_cell itself runs on CUDA
        h, c, _ = torch.ops.aten._thnn_fused_lstm_cell(gates_x, gates_h, c)
        return h, c
    i, f, g, o = (gates_x + gates_h).chunk(4, 1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def gru_cell_from_gates(gates_x: Tensor, gates_h: Tensor, h: Tensor) -> Tensor:
    """torch.gru_cell from its two gate products (biases included; PyTorch's order r, z, n): h'."""
    if gates_x.is_cuda:
        return torch.ops.aten._thnn_fused_gru_cell(gates_x, gates_h, h)[0]
    x_r, x_z, x_n = gates_x.chunk(3, 1)
    h_r, h_z, h_n = gates_h.chunk(3, 1)
    r, z = torch.sigmoid(x_r + h_r), torch.sigmoid(x_z + h_z)
    n = torch.tanh(x_n + r * h_n)
    return n + z * (h - n)  # (1 - z) n + z h


def unrolled_step(
    rnn: nn.LSTM | nn.GRU, x: Tensor, state: RnnState, products: Products, emb_gates: Tensor | None = None, emb: int = 0
) -> tuple[Tensor, RnnState]:
    """model.rnn_step's maths inside the teacher-forced loop: every product through `products`, and with
    `emb_gates` (the decoder's first RNN) the first layer's product of x's first `emb` columns already done."""
    lstm = isinstance(rnn, nn.LSTM)
    hidden, cells = [], []
    for layer, (w_ih, w_hh, b_ih, b_hh) in enumerate(rnn.all_weights):
        h = state[0][layer] if lstm else state[layer]
        if layer == 0 and emb_gates is not None:
            rest = x[:, emb:]  # h~_{t-1} (input feeding), c_t (Bahdanau), or nothing
            gates_x = emb_gates + products.linear(rest, w_ih, emb) if rest.size(1) else emb_gates
        else:
            gates_x = products.linear(x, w_ih) + b_ih
        gates_h = products.linear(h, w_hh) + b_hh
        if lstm:
            h, c = lstm_cell_from_gates(gates_x, gates_h, state[1][layer])
            cells.append(c)
        else:
            h = gru_cell_from_gates(gates_x, gates_h, h)
        hidden.append(h)
        x = F.dropout(h, rnn.dropout, rnn.training) if layer < rnn.num_layers - 1 else h  # between layers, as nn.LSTM
    return h, ((torch.stack(hidden), torch.stack(cells)) if lstm else torch.stack(hidden))


def hoist(rnn: nn.LSTM | nn.GRU, emb: Tensor, deferred: bool) -> list[Hoisted]:
    """For every position of emb (B, T, E): the embedding's share of rnn's first-layer input gates, all positions in
    one product, and one Products for the loop (`deferred`: weight gradients over all positions at once)."""
    w_ih, _, b_ih, _ = rnn.all_weights[0]
    gates = F.linear(emb, w_ih[:, : emb.size(-1)], b_ih)  # W_e y_{t-1} + b_ih for every t: (B, T, G)
    products = Products(deferred)
    return [Hoisted(g, products, emb.size(-1)) for g in gates.unbind(1)]
