"""What the sweep layer costs per trial: `sweeper run` on tiny trials against bare Ray Tune on trivial ones.

    python benchmarks/sweep_overhead.py [--trials 24] [--concurrent 2] [--no-system-metrics]

Ours: a grid of `--trials` one-epoch trials on the synthetic corpus (a tiny model), `--concurrent` at a time,
tracked in a fresh SQLite MLflow store, with everything a trial does (evaluation, artifacts, the MLflow model,
the summary). Bare Tune: the same number of function trials that report once with a small checkpoint, on the
same resources, with Tune's default of a new worker process per trial and with reused ones (as ours). Our
overhead per trial = (wall time - training time) / trials, where training time is the trials' own epoch time
(results.parquet) divided by the concurrency.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml


def ours(trials: int, concurrent: int, folder: Path, system_metrics: bool = True) -> tuple[float, float]:
    """Wall seconds of `sweeper run`, and seconds of training inside it (summed over trials)."""
    import pyarrow.parquet as pq

    space = {"name": "overhead", "data": {"corpus": "synthetic", "train_subset": 600, "eval_subset": 40},
             "base": {"model": {"emb_size": 16, "hidden_size": 32, "dropout": 0.0},
                      "train": {"lr": 5e-3, "batch_size": 32, "epochs": 1}, "decode": {"beam_size": 2}},
             "parameters": {"train.seed": {"grid": list(range(1, trials + 1))}},
             "search": {"max_concurrent": concurrent}, "tracking": {"system_metrics": system_metrics}}
    (folder / "space.yaml").write_text(yaml.safe_dump(space))
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "sweeper.cli", "run", "space.yaml"], cwd=folder,
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(done.stdout[-2000:] + done.stderr[-2000:])
    rows = pq.read_table(folder / "sweeps" / "overhead" / "results.parquet").to_pylist()
    return wall, sum(r["epoch_time_s"] for r in rows)


BARE = """
import os, sys, tempfile, time
import ray
from ray import tune

def trainable(config):
    with tempfile.TemporaryDirectory() as folder:
        open(os.path.join(folder, "state.txt"), "w").write("x" * 1000)
        tune.report({"score": config["i"]}, checkpoint=tune.Checkpoint.from_directory(folder))

trials, concurrent, storage, reuse = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4] == "reuse"
ray.init(num_cpus=os.cpu_count(), include_dashboard=False, configure_logging=False)
start = time.perf_counter()
tune.Tuner(tune.with_resources(trainable, {"cpu": 1}), param_space={"i": tune.grid_search(list(range(trials)))},
           tune_config=tune.TuneConfig(max_concurrent_trials=concurrent, reuse_actors=reuse),
           run_config=tune.RunConfig(storage_path=storage, verbose=0)).fit()
print(time.perf_counter() - start)
"""


def bare(trials: int, concurrent: int, folder: Path, reuse: bool) -> float:
    """Wall seconds of bare Ray Tune (Ray's start included, as in `sweeper run`), a new worker process per trial
    (Tune's default) or reusing them (as `sweeper run` does)."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", BARE, str(trials), str(concurrent), str(folder / f"bare-{reuse}"),
                           "reuse" if reuse else "new"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-2000:])
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=24)
    parser.add_argument("--concurrent", type=int, default=2)
    parser.add_argument("--no-system-metrics", action="store_true", help="tracking.system_metrics: false (its cost)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        walls = {reuse: bare(args.trials, args.concurrent, Path(tmp), reuse) for reuse in (False, True)}
        our_wall, training = ours(args.trials, args.concurrent, Path(tmp), not args.no_system_metrics)
    ours_per_trial = (our_wall - training / args.concurrent) / args.trials
    print(f"{args.trials} trials, {args.concurrent} at a time")
    for reuse, wall in walls.items():
        print(f"bare Ray Tune, {'reused worker processes' if reuse else 'a new worker process per trial'}: "
              f"{wall:.1f} s wall, {wall / args.trials:.2f} s per trial")
    print(f"sweeper run (reused worker processes): {our_wall:.1f} s wall, {training:.1f} s of training, "
          f"{ours_per_trial:.2f} s per trial besides training ({ours_per_trial / (walls[False] / args.trials):.2f}x "
          f"and {ours_per_trial / (walls[True] / args.trials):.2f}x bare Tune's)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
