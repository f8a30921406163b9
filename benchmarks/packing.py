"""GPU packing: total training tokens/s of one GPU as 1, 2, 4, 8 small trials share it (fractional GPUs).

    python benchmarks/packing.py [--trials 1 2 4 8] [--seconds 30] [--size small|paper]

Each trial is a Ray task asking for 1/k of the GPU (what `resources.gpu: 1/k` does in a sweep) that trains
the SACT model on synthetic batches for a fixed time; the table shows the GPU's total tokens/s and each
trial's share. Needs a CUDA GPU; on a machine without one it says so and exits 1.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import ray
import torch

sys.path.insert(0, str(Path(__file__).parent))
from throughput import SIZES, synthetic_batches, train_step_fn  # noqa: E402

from nmt_core.config import build_config  # noqa: E402
from nmt_core.model import Seq2Seq  # noqa: E402

SIZES = {**SIZES, "small": (256, 256, 8000, 8000, 64)}


def train_for(seconds: float, size_name: str, amp: bool) -> float:
    """One trial: train for `seconds` after a warm-up, return its tokens/s."""
    emb, hidden, src_vocab, tgt_vocab, batch = SIZES[size_name]
    device = torch.device("cuda")
    cfg = build_config({"model": {"emb_size": emb, "hidden_size": hidden}, "attention": {"temperature": "sact"},
                        "train": {"amp": amp}})
    model = Seq2Seq(cfg.model, cfg.attention, src_vocab, tgt_vocab).to(device).train()
    step = train_step_fn(model, cfg, device)
    batches = synthetic_batches(16, batch, src_vocab, tgt_vocab)
    for b in batches[:2]:
        step(b)
    torch.cuda.synchronize()
    start, tokens, i = time.perf_counter(), 0, 0
    while time.perf_counter() - start < seconds:
        tokens += step(batches[i % len(batches)])
        i += 1
    torch.cuda.synchronize()
    return tokens / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", nargs="+", type=int, default=[1, 2, 4, 8])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--size", choices=list(SIZES), default="small")
    parser.add_argument("--amp", action="store_true")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("packing.py measures GPU sharing and needs a CUDA GPU; none is visible here")
        return 1
    ray.init(num_gpus=1, include_dashboard=False, configure_logging=False)
    print(f"{torch.cuda.get_device_name()}, size {args.size}, SACT, {args.seconds:g}s per measurement")
    print("| trials per GPU | total tok/s | per trial tok/s | vs 1 trial |\n|---|---|---|---|")
    alone = None
    for k in args.trials:
        task = ray.remote(num_gpus=1 / k, num_cpus=0)(train_for)
        rates = ray.get([task.remote(args.seconds, args.size, args.amp) for _ in range(k)])
        total = sum(rates)
        alone = alone or total
        print(f"| {k} | {total:.0f} | {total / k:.0f} | {total / alone:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
