"""How long the significance calibration test takes, in two checkouts compared in one run on one loaded machine.

    python benchmarks/calibration_time.py --tree OLD --tree NEW [--repeats 1]

Each tree is a checkout of this project (its folder goes first on PYTHONPATH, as in cli_latency.py). Each round
runs `pytest -m slow tests/unit/test_significance_calibration.py` once per tree, interleaved, as a fresh
subprocess; reported per tree: the median wall time, the child's CPU time (user + system, from its rusage), and
both as ratios to the first tree. The ratio is the claim: the machine's load moves the absolute times.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

TEST = "tests/unit/test_significance_calibration.py"


def timed(tree: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of the calibration test in `tree`; exits where it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    command = [sys.executable, "-m", "pytest", "-q", "-m", "slow", "-p", "no:cacheprovider", TEST]
    done = subprocess.run(command, cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{tree}: the calibration test failed:\n{done.stdout.decode()[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, action="append", required=True, help="a checkout (repeatable)")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    found: dict[Path, list[tuple[float, float]]] = {tree: [] for tree in args.tree}
    for _ in range(args.repeats):
        for tree in args.tree:
            found[tree].append(timed(tree.resolve()))
    first = [statistics.median(values) for values in zip(*found[args.tree[0]])]
    for tree, runs in found.items():
        wall, cpu = (statistics.median(values) for values in zip(*runs))
        print(f"{tree}: wall {wall:.1f} s ({wall / first[0]:.2f}x), CPU {cpu:.1f} s ({cpu / first[1]:.2f}x)")


if __name__ == "__main__":
    main()
