"""Where a training step's time goes, by kind of work, at the SACT paper's size (torch.profiler, CPU).

    python benchmarks/profile_step.py [--variant none|plain|fixed|sact|...] [--steps N] [--threads T]
                                      [--size paper|tiny]

`--variant plain` is the baseline with `model.fast_path: false`.

Each profiled op's *self* time is put in one bucket: matrix products, LSTM kernels (oneDNN's sequence kernel
and its backward), elementwise ops, softmax and cross-entropy, the optimiser (Adam and gradient clipping), the
autograd engine's own records (its nodes, not the backward kernels they call), embedding and indexing, copies
and concatenation, other ops. What the ops do not account for of the wall time is Python and dispatch
overhead (the decoder's Python loop over target steps, allocation).
"""
from __future__ import annotations

import argparse
import re
import time

import torch
from torch.profiler import ProfilerActivity, profile

from throughput import SIZES, VARIANTS, build_variant, synthetic_batches, train_step_fn  # run from benchmarks/ or with it on sys.path

BUCKETS = (  # first match wins: (bucket, pattern on the op name); case matters only for autograd's node names
    ("optimiser", r"(?i)adam|_foreach|clip_grad|norm\b|linalg_vector_norm|optimizer|zero_"),
    ("softmax and cross-entropy", r"(?i)softmax|nll_loss|cross_entropy|logsumexp|SummedCrossEntropy"),
    ("LSTM kernels", r"(?i)lstm|rnn|_thnn_fused|gru"),  # oneDNN's sequence kernel (forward and backward), lstm_cell
    ("autograd engine (per-node bookkeeping)", r"^autograd::|^[A-Z]\w*Backward\d*$"),  # AddmmBackward0, not kernels
    ("matrix products", r"^aten::(mm|addmm|bmm|matmul|linear|baddbmm|addbmm|_mkldnn\w*|mkldnn_matmul)$"),
    ("embedding and indexing", r"(?i)embedding|index|gather|scatter|masked|where|nonzero"),
    ("copies and concatenation", r"(?i)copy_|cat|stack|clone|contiguous|to$|_to_copy|empty|zeros|fill_|resize|"
                                 r"unsqueeze|view|reshape|permute|transpose|expand|split|narrow|slice|select|t$"),
    ("elementwise", r"(?i)add|mul|sub|div|tanh|sigmoid|exp|pow|dropout|bernoulli|relu|neg|sum|mean|max|min|clamp|"
                    r"rsub|sqrt|log|abs|sign|threshold|ones_like|lt|gt|eq|ne|ge|le"),
)


def bucket_of(name: str) -> str:
    for bucket, pattern in BUCKETS:
        if re.search(pattern, name):
            return bucket
    return "other ops"


def profile_steps(variant: str, steps: int, size_name: str = "paper") -> tuple[dict[str, float], float, int]:
    """Self CPU seconds per bucket, wall seconds and target tokens over `steps` training steps."""
    size = SIZES[size_name]
    device = torch.device("cpu")
    model, cfg = build_variant(variant, size, device, input_feeding=True, amp=False)
    model.train()
    step = train_step_fn(model, cfg, device)
    batches = synthetic_batches(steps + 2, size[4], size[2], size[3])
    for batch in batches[:2]:  # warm-up: allocator, oneDNN primitives
        step(batch)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start, tokens = time.perf_counter(), 0
        for batch in batches[2:]:
            tokens += step(batch)
        wall = time.perf_counter() - start
    buckets: dict[str, float] = {}
    for event in prof.key_averages():
        buckets[bucket_of(event.key)] = buckets.get(bucket_of(event.key), 0.0) + event.self_cpu_time_total / 1e6
    return buckets, wall, tokens


def render(variant: str, buckets: dict[str, float], wall: float, tokens: int, steps: int) -> str:
    ops = sum(buckets.values())
    rows = sorted(buckets.items(), key=lambda kv: -kv[1]) + [("Python and dispatch overhead", max(wall - ops, 0.0))]
    lines = [f"variant {variant}, {steps} steps, {tokens / wall:,.0f} target tokens/s under the profiler "
             f"({wall / steps * 1000:.0f} ms per step, {torch.get_num_threads()} threads)", "",
             "| kind of work | ms per step | share |", "|---|---|---|"]
    lines += [f"| {name} | {seconds / steps * 1000:.1f} | {100 * seconds / wall:.0f}% |" for name, seconds in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variant", choices=list(VARIANTS), default="none")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--size", choices=list(SIZES), default="paper")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    buckets, wall, tokens = profile_steps(args.variant, args.steps, args.size)
    print(render(args.variant, buckets, wall, tokens, args.steps))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
