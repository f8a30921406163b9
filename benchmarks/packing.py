"""GPU packing: total training tokens/s of one GPU as 1, 2, 4, 8 small trials share it.

    python benchmarks/packing.py [--trials 1 2 4 8] [--seconds 30] [--size small|paper] [--amp] [--json OUT]

A sweep's `resources.gpu: 1/k` makes Ray start k trial processes on one GPU; Ray only co-schedules them
(it neither splits the GPU's memory nor its compute), so k plain processes on that GPU measure the same
sharing, and this benchmark runs without a Ray cluster. Each process builds the SACT model, warms up,
waits for the others at a barrier, then trains on synthetic batches for `--seconds`; the table shows the
GPU's total tokens/s and each trial's share. `--device cpu` runs the same on CPU cores (the smoke test).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from throughput import SIZES, build_variant, synchronize, synthetic_batches, train_step_fn  # noqa: E402

from nmt_core.train import use_tensor_cores  # noqa: E402

SIZES = {**SIZES, "small": (256, 256, 8000, 8000, 64)}


def trial(device_name: str, size_name: str, amp: bool, seconds: float, threads: int, start, rates) -> None:
    """One trial process: warm up, wait for the others, train for `seconds`, put its tokens/s in `rates`."""
    torch.set_num_threads(threads)
    device = torch.device(device_name)
    use_tensor_cores(device)
    _, _, src_vocab, tgt_vocab, batch = SIZES[size_name]
    model, cfg = build_variant("sact", SIZES[size_name], device, input_feeding=True, amp=amp)
    step = train_step_fn(model.train(), cfg, device)
    batches = synthetic_batches(16, batch, src_vocab, tgt_vocab)
    for b in batches[:2]:
        step(b)
    synchronize(device)
    start.wait()
    began, tokens, i = time.perf_counter(), 0, 0
    while time.perf_counter() - began < seconds:
        tokens += step(batches[i % len(batches)])
        i += 1
    synchronize(device)
    rates.put(tokens / (time.perf_counter() - began))


def packed(k: int, device: str, size: str, amp: bool, seconds: float) -> list[float]:
    """Tokens/s of each of k trial processes training at the same time."""
    context = mp.get_context("spawn")  # CUDA cannot be used in forked children
    start, rates = context.Barrier(k), context.Queue()
    threads = max(1, (torch.get_num_threads() if device == "cpu" else 1) // k)
    processes = [
        context.Process(target=trial, args=(device, size, amp, seconds, threads, start, rates)) for _ in range(k)
    ]
    for p in processes:
        p.start()
    results = [rates.get() for _ in processes]
    for p in processes:
        p.join()
    if any(p.exitcode != 0 for p in processes):
        raise RuntimeError(f"a trial process failed (exit codes {[p.exitcode for p in processes]})")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", nargs="+", type=int, default=[1, 2, 4, 8])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--size", choices=list(SIZES), default="small")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--amp", action="store_true", help="bf16 autocast")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print(
            "packing.py measures GPU sharing and needs a CUDA GPU; none is visible here (--device cpu runs it on "
            "CPU cores)"
        )
        return 1
    where = torch.cuda.get_device_name() if args.device == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(f"{where}, size {args.size}, SACT, amp {args.amp}, {args.seconds:g}s per measurement")
    print("| trials per device | total tok/s | per trial tok/s | vs 1 trial |\n|---|---|---|---|")
    rows, alone = [], None
    for k in args.trials:
        rates = packed(k, args.device, args.size, args.amp, args.seconds)
        total = sum(rates)
        alone = alone or total
        rows.append({"trials": k, "total_tokens_per_s": total, "per_trial": rates})
        print(f"| {k} | {total:.0f} | {total / k:.0f} | {total / alone:.2f}x |", flush=True)
    if args.json:
        Path(args.json).write_text(
            json.dumps({"device": where, "size": args.size, "amp": args.amp, "rows": rows}, indent=2)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
