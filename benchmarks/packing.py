"""GPU packing: total training tokens/s of one GPU as 1, 2, 4, 8 trials share it, with and without CUDA MPS.

    python benchmarks/packing.py [--trials 1 2 4 8] [--seconds 30] [--size small|paper] [--variant sact]
                                 [--compile-mode none|default|reduce-overhead|graphs] [--mps off|on|both]
                                 [--amp] [--json OUT]

A sweep's `resources.gpu: 1/k` makes Ray start k trial processes on one GPU; Ray only co-schedules them
(it neither splits the GPU's memory nor its compute), so k plain processes on that GPU measure the same
sharing, and this benchmark runs without a Ray cluster. Each process builds the variant's model (compiled or
captured as `model.compile` says, on batches in length buckets when the mode needs static shapes), warms up, waits
for the others at a barrier, then trains on synthetic batches for `--seconds`; the table shows the GPU's total
tokens/s, each trial's share and each trial's peak GPU memory. `--mps on` starts the CUDA MPS control daemon
(`nvidia-cuda-mps-control -d`, its pipes in a folder of its own) before the trials and stops it after them
(`echo quit | nvidia-cuda-mps-control`), so that the trials' kernels can run side by side instead of time-slicing.
A trial that crashes (or a barrier nobody reaches) ends that measurement with its exit codes; the others go on.
`--device cpu` runs the same on CPU cores (the smoke test). The JSON is written after every measurement.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from throughput import (  # noqa: E402
    GRAPH_BUCKETS,
    SIZES,
    VARIANTS,
    bucketed_batches,
    build_variant,
    synchronize,
    synthetic_batches,
    train_step_fn,
)

from nmt_core.training.compiled import static_shapes  # noqa: E402
from nmt_core.training.train import use_tensor_cores  # noqa: E402

SIZES = {**SIZES, "small": (256, 256, 8000, 8000, 64)}
STARTUP_S = 300.0  # what a trial may take to build, compile or capture, and warm up before the barrier gives up


def trial(setting: dict, seconds: float, threads: int, start, rates) -> None:
    """One trial process: build, warm up on every batch shape, wait for the others, train for `seconds`, put its
    tokens/s and peak GPU memory (MiB) in `rates`."""
    torch.set_num_threads(threads)
    device = torch.device(setting["device"])
    use_tensor_cores(device)
    size = SIZES[setting["size"]]
    _, _, src_vocab, tgt_vocab, batch = size
    model, cfg = build_variant(
        setting["variant"], size, device, True, setting["amp"], compile_mode=setting["mode"], buckets=setting["buckets"]
    )
    step = train_step_fn(model.train(), cfg, device)
    if setting["buckets"] is None:
        batches = synthetic_batches(16, batch, src_vocab, tgt_vocab)
    else:
        batches = bucketed_batches(16, batch, src_vocab, tgt_vocab, setting["buckets"])
    for b in batches if setting["buckets"] is not None else batches[:2]:
        step(b)
    synchronize(device)
    start.wait(timeout=STARTUP_S)
    began, tokens, i = time.perf_counter(), 0, 0
    while time.perf_counter() - began < seconds:
        tokens += step(batches[i % len(batches)])
        i += 1
    synchronize(device)
    peak = torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda" else None
    rates.put({"tokens_per_s": tokens / (time.perf_counter() - began), "peak_mib": peak})


class TrialFailed(RuntimeError):
    """A trial process of a measurement died or never reported."""


def packed(k: int, setting: dict, seconds: float) -> list[dict]:
    """Each of k trial processes' tokens/s and peak memory, all training at the same time. A process that dies
    ends the measurement (TrialFailed, naming the exit codes) instead of leaving the others waiting."""
    context = mp.get_context("spawn")  # CUDA cannot be used in forked children
    start, rates = context.Barrier(k), context.Queue()
    threads = max(1, (torch.get_num_threads() if setting["device"] == "cpu" else 1) // k)
    processes = [context.Process(target=trial, args=(setting, seconds, threads, start, rates)) for _ in range(k)]
    for p in processes:
        p.start()
    results: list[dict] = []
    deadline = time.monotonic() + STARTUP_S + seconds + 60
    try:
        while len(results) < k:
            try:
                results.append(rates.get(timeout=1.0))
            except queue.Empty:
                if any(p.exitcode not in (None, 0) for p in processes) or time.monotonic() > deadline:
                    break
    finally:
        for p in processes:
            if p.exitcode is None and len(results) < k:
                p.terminate()
            p.join(timeout=30)
    if len(results) < k:
        codes = [p.exitcode for p in processes]
        raise TrialFailed(f"{k} trials: {len(results)} reported; exit codes {codes}")
    return results


@contextlib.contextmanager
def mps(on: bool):
    """CUDA MPS for the trials started inside: the control daemon with its pipe and log folders in a temporary
    folder (children find it through CUDA_MPS_PIPE_DIRECTORY), quit afterwards whatever happened."""
    if not on:
        yield
        return
    control = shutil.which("nvidia-cuda-mps-control")
    if control is None:
        raise FileNotFoundError("nvidia-cuda-mps-control is not on PATH: MPS cannot be started here")
    folder = Path(tempfile.mkdtemp(prefix="mps-"))
    env = {"CUDA_MPS_PIPE_DIRECTORY": str(folder / "pipe"), "CUDA_MPS_LOG_DIRECTORY": str(folder / "log")}
    for path in env.values():
        Path(path).mkdir()
    saved = {name: os.environ.get(name) for name in env}
    subprocess.run([control, "-d"], env={**os.environ, **env}, check=True, timeout=30)
    os.environ.update(env)
    try:
        yield
    finally:
        subprocess.run([control], input="quit\n", text=True, env={**os.environ, **env}, timeout=30, check=False)
        for name, value in saved.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value
        shutil.rmtree(folder, ignore_errors=True)


def passes(mps_choice: str, trials: list[int]) -> list[tuple[bool, list[int]]]:
    """(MPS on, trial counts) in the order they are measured. With `both`, the lone trial first (without MPS: it has
    nobody to share the GPU with), then the packed counts under MPS, which decide how much one GPU does, then
    without it: a run cut short loses the least telling rows."""
    if mps_choice != "both":
        return [(mps_choice == "on", trials)]
    packed_counts = [k for k in trials if k != 1]
    return [(False, [1])] * (1 in trials) + [(True, packed_counts), (False, packed_counts)]


def measure(args: argparse.Namespace, setting: dict, on_row) -> list[dict]:
    """Every (MPS, trials) measurement in `passes` order: a row each, an error row (naming what failed) for one that
    failed; `vs 1 trial` compares with the first measurement's total."""
    rows: list[dict] = []
    alone = None
    for use_mps, trials in passes(args.mps, args.trials):
        try:
            with mps(use_mps):
                for k in trials:
                    row = {"trials": k, "mps": use_mps}
                    try:
                        results = packed(k, setting, args.seconds)
                    except Exception as error:  # noqa: BLE001 - a failed measurement is its row; the next ones go on
                        row["error"] = f"{type(error).__name__}: {error}"
                    else:
                        total = sum(r["tokens_per_s"] for r in results)
                        alone = alone or total
                        row.update(total_tokens_per_s=total, per_trial=[r["tokens_per_s"] for r in results])
                        row.update(peak_mib=[r["peak_mib"] for r in results], vs_one=total / alone)
                    rows.append(row)
                    on_row(rows, row)
        except (OSError, subprocess.SubprocessError) as error:
            rows.append({"mps": use_mps, "error": f"MPS: {error}"})
            on_row(rows, rows[-1])
    return rows


def row_line(row: dict) -> str:
    mps_on = "on" if row["mps"] else "off"
    if "error" in row:
        return f"| {row.get('trials', '-')} | {mps_on} | failed: {row['error']} | | | |"
    total, k = row["total_tokens_per_s"], row["trials"]
    peak = max(row["peak_mib"]) if row["peak_mib"][0] is not None else None
    return f"| {k} | {mps_on} | {total:.0f} | {total / k:.0f} | {row['vs_one']:.2f}x | " + (
        f"{peak:.0f} |" if peak is not None else "- |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", nargs="+", type=int, default=[1, 2, 4, 8])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--size", choices=list(SIZES), default="small")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--variant", choices=list(VARIANTS), default="sact", help="a throughput.py RNN variant")
    parser.add_argument("--compile-mode", choices=["none", "default", "reduce-overhead", "graphs"], default="none")
    parser.add_argument("--buckets", type=int, help="train.buckets (default: 5 with a static-shape mode, else none)")
    parser.add_argument("--mps", choices=["off", "on", "both"], default="off", help="CUDA MPS for the trials")
    parser.add_argument("--amp", action="store_true", help="bf16 autocast")
    parser.add_argument("--json", help="write the results here (after every measurement)")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print(
            "packing.py measures GPU sharing and needs a CUDA GPU; none is visible here (--device cpu runs it on "
            "CPU cores)"
        )
        return 1
    buckets = args.buckets
    if buckets is None and static_shapes(args.compile_mode):
        buckets = GRAPH_BUCKETS
    setting = dict(
        device=args.device, size=args.size, variant=args.variant, mode=args.compile_mode, amp=args.amp, buckets=buckets
    )
    where = torch.cuda.get_device_name() if args.device == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(
        f"{where}, size {args.size}, {args.variant}, compile {args.compile_mode}, buckets {buckets}, amp {args.amp}, "
        f"{args.seconds:g}s per measurement"
    )
    print("| trials per device | MPS | total tok/s | per trial tok/s | vs 1 trial | peak MiB per trial |")
    print("|---|---|---|---|---|---|", flush=True)

    def on_row(rows: list[dict], row: dict) -> None:
        print(row_line(row), flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps({**setting, "where": where, "rows": rows}, indent=2))

    rows = measure(args, setting, on_row)
    return 1 if any("error" in row for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
