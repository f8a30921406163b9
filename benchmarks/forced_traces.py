"""What the teacher-forced word-class traces (traces/forced/<set>.parquet) add to a quickstart SACT trial: the
trial trained and evaluated as a sweep runs it, then the forced pass and its Parquet timed alone, in one run.

    python benchmarks/forced_traces.py [--epochs 14] [--repeats 5]

Prints the trial's wall time (training with its dev evaluations, the final test decoding, the dev decoding and every
artifact, forced traces included) and the forced traces' own time (the median of `--repeats` writes), as a ratio.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
import yaml

from nmt_core.config import build_config
from nmt_core.training.train import evaluate_split, train
from sweeper.running.artifacts import write_forced_traces, write_trial_artifacts
from sweeper.tracking.metrics import FORCED

SPACE = Path(__file__).parents[1] / "search_spaces" / "quickstart.yaml"


def quickstart_sact(epochs: int):
    """The quickstart's SACT lambda 4 trial (seed 1), `epochs` at most."""
    space = yaml.safe_load(SPACE.read_text())
    raw = {**space["base"], "data": space["data"]}
    raw["attention"] = {**raw["attention"], "temperature": "sact", "lambda": 4.0}
    raw["train"] = {**raw["train"], "epochs": epochs}
    return build_config(raw)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=14)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # as a quickstart trial runs (resources.cpu: 1)
    cfg = quickstart_sact(args.epochs)
    start = time.perf_counter()
    result = train(cfg, log=lambda _: None)
    dev = evaluate_split(result.model, result.data, "dev", cfg, torch.device("cpu"), cfg.decode.beam_size)
    with tempfile.TemporaryDirectory() as folder:
        write_trial_artifacts(result, {"dev": dev, **result.tests}, Path(folder), draw=False)
        trial = time.perf_counter() - start
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            write_forced_traces(result, Path(folder) / FORCED)
            times.append(time.perf_counter() - start)
        rows = sum(len(result.data.splits[name]) for name in result.data.test_sets)
    forced = statistics.median(times)
    print(f"trial ({len(result.history)} epochs, {rows} test sentences): {trial:.1f} s")
    epoch = statistics.fmean(report["epoch_time_s"] for report in result.history)
    print(f"forced traces: {forced:.3f} s (median of {args.repeats}), {forced / trial:.2%} of the trial, ", end="")
    print(f"{forced / epoch:.2%} of one epoch ({epoch:.1f} s, its dev evaluation included)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
