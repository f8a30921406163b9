"""Where a training step's time goes, by kind of work, at the SACT paper's size (torch.profiler, CPU).

    python benchmarks/profile_step.py [--variant none|plain|fixed|sact|...] [--steps N] [--threads T]
                                      [--size paper|tiny] [--compile]

`--variant plain` is the baseline with `model.fast_path: false`. `--compile` profiles the step with
`model.compile: default` too and shows its breakdown beside the eager one: Inductor's fused kernels get their own
bucket, and so do the compiled graphs' wrappers (guards, the runtime that calls the kernels).

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
import torch._inductor.config
from throughput import (
    SIZES,
    VARIANTS,
    build_variant,
    synthetic_batches,
    train_step_fn,
)  # run from benchmarks/ or with it on sys.path
from torch.profiler import ProfilerActivity, profile

BUCKETS = (  # first match wins: (bucket, pattern on the op name); case matters only for autograd's node names
    ("fused kernels (Inductor)", r"^(graph_\d+_)?cpp_fused|^triton_"),
    ("compiled-graph wrappers", r"Torch-Compiled Region|CompiledFunction|^## Call CompiledFxGraph|TorchDynamo"),
    ("optimiser", r"(?i)adam|_foreach|clip_grad|norm\b|linalg_vector_norm|optimizer|zero_"),
    ("softmax and cross-entropy", r"(?i)softmax|nll_loss|cross_entropy|logsumexp|SummedCrossEntropy"),
    ("LSTM kernels", r"(?i)lstm|rnn|_thnn_fused|gru"),  # oneDNN's sequence kernel (forward and backward), lstm_cell
    ("autograd engine (per-node bookkeeping)", r"^autograd::|^[A-Z]\w*Backward\d*$"),  # AddmmBackward0, not kernels
    ("matrix products", r"^aten::(mm|addmm|bmm|matmul|linear|baddbmm|addbmm|_mkldnn\w*|mkldnn_matmul)$"),
    ("embedding and indexing", r"(?i)embedding|index|gather|scatter|masked|where|nonzero"),
    (
        "copies and concatenation",
        r"(?i)copy_|cat|stack|clone|contiguous|to$|_to_copy|empty|zeros|fill_|resize|"
        r"unsqueeze|view|reshape|permute|transpose|expand|split|narrow|slice|select|t$",
    ),
    (
        "elementwise",
        r"(?i)add|mul|sub|div|tanh|sigmoid|exp|pow|dropout|bernoulli|relu|neg|sum|mean|max|min|clamp|"
        r"rsub|sqrt|log|abs|sign|threshold|ones_like|lt|gt|eq|ne|ge|le",
    ),
)


def bucket_of(name: str) -> str:
    for bucket, pattern in BUCKETS:
        if re.search(pattern, name):
            return bucket
    return "other ops"


def profile_steps(
    variant: str, steps: int, size_name: str = "paper", compile_mode: str = "none"
) -> tuple[dict[str, float], float, int]:
    """Self CPU seconds per bucket, wall seconds and target tokens over `steps` training steps (after two warm-up
    steps, which also compile)."""
    size = SIZES[size_name]
    device = torch.device("cpu")
    model, cfg = build_variant(variant, size, device, input_feeding=True, amp=False, compile_mode=compile_mode)
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


OVERHEAD = "Python and dispatch overhead"


def with_overhead(buckets: dict[str, float], wall: float) -> dict[str, float]:
    """The buckets and what the ops leave unaccounted of the wall time."""
    return {**buckets, OVERHEAD: max(wall - sum(buckets.values()), 0.0)}


def render(variant: str, profiles: dict[str, tuple[dict[str, float], float, int]], steps: int) -> str:
    """One column pair (ms per step, share) per profile (eager, compiled), rows by the first profile's time."""
    lines = [
        f"variant {variant}, {steps} steps, {torch.get_num_threads()} threads; target tokens/s under the "
        "profiler: "
        + ", ".join(
            f"{label} {tokens / wall:,.0f} ({wall / steps * 1000:.0f} ms per step)"
            for label, (_, wall, tokens) in profiles.items()
        ),
        "",
    ]
    columns = {label: with_overhead(buckets, wall) for label, (buckets, wall, _) in profiles.items()}
    walls = {label: wall for label, (_, wall, _) in profiles.items()}
    names = list(
        dict.fromkeys(
            name for column in columns.values() for name in sorted(column, key=lambda n: -column[n]) if name != OVERHEAD
        )
    )
    lines += [
        "| kind of work | " + " | ".join(f"{label} ms per step | {label} share" for label in columns) + " |",
        "|---|" + "---|---|" * len(columns),
    ]
    for name in names + [OVERHEAD]:
        cells = [
            f"{column.get(name, 0.0) / steps * 1000:.1f} | {100 * column.get(name, 0.0) / walls[label]:.0f}%"
            for label, column in columns.items()
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variant", choices=list(VARIANTS), default="none")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--size", choices=list(SIZES), default="paper")
    parser.add_argument("--compile", action="store_true", help="the compiled step's breakdown beside the eager one")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch._inductor.config.cpp.enable_kernel_profile = True  # Inductor's kernels named in the profile
    modes = {"eager": "none", **({"compiled": "default"} if args.compile else {})}
    profiles = {label: profile_steps(args.variant, args.steps, args.size, mode) for label, mode in modes.items()}
    print(render(args.variant, profiles, args.steps))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
