"""Cross-entropy over the output vocabulary with fewer passes over the logits (the fast path).

cross_entropy = log_softmax + nll_loss: backward fills a zero matrix (N, V) for nll_loss, scatters the targets'
gradients into it and runs log_softmax's backward over it and the saved log-probabilities. At 7K words these
are the largest tensors of a step. Here backward writes softmax(z) - (1 - eps) onehot(y) - eps / V directly
from the saved log-probabilities: the same loss and gradient.
"""

from __future__ import annotations

import torch
from torch import Tensor

from nmt_core.models.rnn import PAD


class _SummedCrossEntropy(torch.autograd.Function):
    """sum_i m_i [-(1 - eps) log p_iy_i - eps mean_j log p_ij], p = softmax(z): cross-entropy with label smoothing
    eps (PyTorch's definition: the smoothed target puts eps / V on every word), summed over rows; m_i = 1, or 0 on
    the padding rows of a batch whose shape must not depend on its token count (`mask`)."""

    @staticmethod
    def forward(ctx, logits: Tensor, targets: Tensor, smoothing: float, mask: Tensor | None) -> Tensor:
        log_probs = torch.log_softmax(logits, dim=-1)  # one fused pass; kept for backward instead of the logits
        target = log_probs.gather(1, targets.unsqueeze(1)).squeeze(1)
        loss = -(1 - smoothing) * (target if mask is None else target * mask).sum()
        if smoothing:
            spread = log_probs.mean(dim=-1)
            loss = loss - smoothing * (spread if mask is None else spread * mask).sum()
        ctx.save_for_backward(log_probs, targets, mask)
        ctx.smoothing = smoothing
        return loss

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None, None, None]:
        log_probs, targets, mask = ctx.saved_tensors
        smoothing = ctx.smoothing
        d_logits = log_probs.exp()  # softmax(z)
        if smoothing:
            d_logits.sub_(smoothing / log_probs.size(-1))
        d_logits.scatter_add_(1, targets.unsqueeze(1), d_logits.new_full((targets.size(0), 1), smoothing - 1))
        if mask is not None:
            d_logits.mul_(mask.unsqueeze(1))
        return d_logits.mul_(grad), None, None, None


def summed_cross_entropy(logits: Tensor, targets: Tensor, label_smoothing: float = 0.0) -> Tensor:
    """Cross-entropy of logits (N, V) against targets (N,), summed over the N rows (no padding rows)."""
    return _SummedCrossEntropy.apply(logits, targets, label_smoothing, None)


def masked_cross_entropy(logits: Tensor, targets: Tensor, label_smoothing: float = 0.0) -> Tensor:
    """summed_cross_entropy over the rows whose target is not padding, with every row computed: the shapes are the
    batch's, not its token count's, so that a CUDA graph captured for one batch replays for the next."""
    mask = (targets != PAD).to(logits.dtype)
    return _SummedCrossEntropy.apply(logits, targets, label_smoothing, mask)
