"""What the sweep layer costs per trial, and whether that stays flat as a sweep grows: `sweeper run` on tiny
trials against bare Ray Tune on trivial ones, at each sweep size in one run.

    python benchmarks/sweep_overhead.py [--trials 24 96 384] [--concurrent 2] [--no-system-metrics] [--memory N ...]

Ours: a grid of `--trials` one-epoch trials on the synthetic corpus (a tiny model), `--concurrent` at a time,
tracked in a fresh SQLite MLflow store, with everything a trial does (evaluation, artifacts, the MLflow model,
the summary). Bare Tune: the same number of function trials that report once with a small checkpoint, on the
same resources, reusing worker processes (as ours does). Our overhead per trial = (wall time - training time) /
trials, where training time is the trials' own epoch time (results.parquet) divided by the concurrency.

The driver at scale, measured inside `sweeper run`'s own process: its peak resident memory, and the longest delay
between the driver receiving a trial's epoch and that epoch's metrics being written to MLflow (the tracking
sender's queue wait plus the write). `--memory 24 96` instead traces the driver's allocations (tracemalloc, which
slows it: no timings then) and prints what grew most between the snapshots taken when that many trials had ended.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

# `sweeper run` in this process, timing each epoch's MLflow write and reading the driver's peak memory when the
# trials are done (before the summary, which reads every run back) and at exit
DRIVER = """
import json, os, resource, statistics, sys, time, tracemalloc
from sweeper import runner, tracking

delays, send, summarize, peak = [], tracking.MlflowTrackingCallback._send, runner.write_summary, {}
at = [int(n) for n in os.environ.get("SNAPSHOT_AT", "").split()]  # trials ended: snapshot the driver's memory
snapshots, complete = [], tracking.MlflowTrackingCallback.on_trial_complete

def snapshot_complete(self, *args, **info):
    complete(self, *args, **info)
    if len(self.outcomes) in at:
        snapshots.append((len(self.outcomes), tracemalloc.take_snapshot()))

def growth():  # what grew most between the first and the last snapshot, with where it was allocated
    (first, old), (last, new) = snapshots[0], snapshots[-1]
    lines = [f"driver memory grown from {first} to {last} trials ended, by allocation site (tracemalloc):"]
    for stat in new.compare_to(old, "traceback")[:12]:
        lines.append(f"{stat.size_diff / 1024:+.0f} KiB in {stat.count_diff:+d} blocks")
        lines += [f"    {frame.filename}:{frame.lineno}" for frame in stat.traceback[-8:]]
    return chr(10).join(lines)

if at:
    tracemalloc.start(8)
    tracking.MlflowTrackingCallback.on_trial_complete = snapshot_complete

def timed_send(self, write):
    send(self, write)
    if write["kind"] == "metrics" and write["epoch"]:  # timestamp: when the driver received the epoch
        delays.append(time.time() - write["timestamp"] / 1000)

def peak_then_summary(*args):
    peak["sweep"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    summarize(*args)

tracking.MlflowTrackingCallback._send, runner.write_summary = timed_send, peak_then_summary
from sweeper.cli import main

code = main(sys.argv[2:])
with open(sys.argv[1], "w") as out:
    json.dump({"max_delay_s": max(delays, default=0.0), "median_delay_s": statistics.median(delays or [0.0]),
               "sweep_rss_mb": peak["sweep"], "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
               "growth": growth() if len(snapshots) > 1 else ""}, out)
sys.exit(code)
"""


@dataclass
class Ours:
    wall: float  # seconds of `sweeper run`, Ray's start and the summary included
    training: float  # seconds of training inside it, summed over trials
    max_delay_s: float  # the longest wait from an epoch's arrival at the driver to its MLflow write
    median_delay_s: float
    sweep_rss_mb: float  # the driver process's peak resident memory until the trials are done
    peak_rss_mb: float  # ... and with the summary


def ours(
    trials: int, concurrent: int, folder: Path, system_metrics: bool = True, snapshot_at: tuple[int, ...] = ()
) -> Ours:
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    space = {
        "name": "overhead",
        "data": {"corpus": "synthetic", "train_subset": 600, "eval_subset": 40},
        "base": {
            "model": {"emb_size": 16, "hidden_size": 32, "dropout": 0.0},
            "train": {"lr": 5e-3, "batch_size": 32, "epochs": 1},
            "decode": {"beam_size": 2},
        },
        "parameters": {"train.seed": {"grid": list(range(1, trials + 1))}},
        "search": {"max_concurrent": concurrent},
        "tracking": {"system_metrics": system_metrics},
    }
    (folder / "space.yaml").write_text(yaml.safe_dump(space))
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, "driver.json", "run", "space.yaml"],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "SNAPSHOT_AT": " ".join(map(str, snapshot_at))},
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(done.stdout[-2000:] + done.stderr[-2000:])
    rows = pq.read_table(folder / "sweeps" / "overhead" / "results.parquet").to_pylist()
    driver = json.loads((folder / "driver.json").read_text())
    if driver["growth"]:
        print(driver["growth"], flush=True)
    return Ours(
        wall,
        sum(r["epoch_time_s"] for r in rows),
        driver["max_delay_s"],
        driver["median_delay_s"],
        driver["sweep_rss_mb"],
        driver["peak_rss_mb"],
    )


BARE = """
import os, sys, tempfile, time
import ray
from ray import tune

def trainable(config):
    with tempfile.TemporaryDirectory() as folder:
        open(os.path.join(folder, "state.txt"), "w").write("x" * 1000)
        tune.report({"score": config["i"]}, checkpoint=tune.Checkpoint.from_directory(folder))

trials, concurrent, storage = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
ray.init(num_cpus=os.cpu_count(), include_dashboard=False, configure_logging=False)
tune.Tuner(tune.with_resources(trainable, {"cpu": 1}), param_space={"i": tune.grid_search(list(range(trials)))},
           tune_config=tune.TuneConfig(max_concurrent_trials=concurrent, reuse_actors=True),
           run_config=tune.RunConfig(storage_path=storage, verbose=0)).fit()
"""


def bare(trials: int, concurrent: int, folder: Path) -> float:
    """Wall seconds of bare Ray Tune reusing worker processes (as `sweeper run` does), Ray's start included."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", BARE, str(trials), str(concurrent), str(folder / "bare")],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr[-2000:])
    return time.perf_counter() - start


def measure(trials: int, concurrent: int, folder: Path, system_metrics: bool) -> str:
    """One size: bare Tune, then ours; one line of the table."""
    bare_per_trial = bare(trials, concurrent, folder) / trials
    run = ours(trials, concurrent, folder / "ours", system_metrics)
    per_trial = (run.wall - run.training / concurrent) / trials
    return (
        f"| {trials} | {run.wall:.0f} | {run.training:.0f} | {per_trial:.2f} | {bare_per_trial:.2f} | "
        f"{per_trial / bare_per_trial:.2f}x | {run.sweep_rss_mb:.0f} / {run.peak_rss_mb:.0f} | "
        f"{run.median_delay_s:.2f} / {run.max_delay_s:.2f} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, nargs="+", default=[24], help="sweep sizes, each measured in turn")
    parser.add_argument("--concurrent", type=int, default=2)
    parser.add_argument("--no-system-metrics", action="store_true", help="tracking.system_metrics: false (its cost)")
    parser.add_argument(
        "--memory",
        type=int,
        nargs="+",
        metavar="N",
        help="trace the driver's memory in one sweep of the largest N trials instead of timing",
    )
    args = parser.parse_args(argv)
    if args.memory:
        with tempfile.TemporaryDirectory() as tmp:
            ours(max(args.memory), args.concurrent, Path(tmp), not args.no_system_metrics, tuple(args.memory))
        return 0
    print(f"{args.concurrent} trials at a time; per trial = seconds per trial besides training\n")
    print(
        "| trials | ours: wall s | training s | ours per trial s | bare Tune per trial s | ratio | "
        "driver peak MB: trials / with summary | epoch-to-MLflow s: median / longest |"
    )
    print("|---|---|---|---|---|---|---|---|", flush=True)
    for trials in args.trials:
        with tempfile.TemporaryDirectory() as tmp:
            print(measure(trials, args.concurrent, Path(tmp), not args.no_system_metrics), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
