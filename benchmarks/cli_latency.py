"""How fast `sweeper` answers the commands that neither train nor decode, against `python -c pass` in the same run.

    python benchmarks/cli_latency.py [--tree DIR ...] [--repeats 5] [--sweeps 20] [--json out.json]

Each command runs as a fresh subprocess (`python -m sweeper.cli ...`, as the console script does), `--repeats`
times, interleaved over the trees named by `--tree` (each a checkout of this project: its folder goes first on
PYTHONPATH, so two checkouts compare in one run on one loaded machine; default: this checkout). Reported per
command and tree: the median wall time, its ratio to `python -c pass` measured in the same rounds, the median CPU
time (user + system, from wait4: on a loaded machine it grows far less than the wall time, which waits for a core),
and the child's peak memory (max RSS). The commands: `--help`, `--version`, `validate` of every shipped space, and
`list` and `status` of a storage folder holding `--sweeps` finished sweeps. That folder is made once, from one
real sweep (`sweeper run` of a one-trial synthetic space, 1 epoch, local Ray), copied under new names with its
`sweeper.json` renamed: `list` and `status` read the records a finished sweep leaves, whatever trained them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SPACES = sorted((ROOT / "search_spaces").glob("*.yaml"))
TINY = {
    "name": "latency-0",
    "data": {"corpus": "synthetic", "train_subset": 200, "eval_subset": 20},
    "base": {
        "model": {"emb_size": 8, "hidden_size": 8, "dropout": 0.0},
        "train": {"lr": 5e-3, "batch_size": 32, "epochs": 1},
        "decode": {"beam_size": 1},
    },
    "search": {"max_concurrent": 1},
    "tracking": {"plots": "none", "models": "none", "system_metrics": False},
}


def timed(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS in MiB) of one child process; its output is discarded, its exit code
    checked."""
    start = time.perf_counter()
    child = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    stderr = child.stderr.read().decode(errors="replace") if child.stderr else ""
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {child.returncode}: {stderr.strip()[-400:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def environment(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree), "RAY_ADDRESS": "", "PYTHONDONTWRITEBYTECODE": ""}


def finished_sweeps(folder: Path, count: int, tree: Path) -> Path:
    """A storage folder of `count` finished sweeps: one real one-trial sweep, then copies under new names."""
    storage, space = folder / "sweeps", folder / "space.yaml"
    space.write_text(yaml.safe_dump(TINY))
    run = [sys.executable, "-m", "sweeper.cli", "run", str(space), "--storage", str(storage)]
    subprocess.run(run, env=environment(tree), cwd=folder, check=True, stdout=subprocess.DEVNULL)
    for n in range(1, count):
        name = f"latency-{n}"
        shutil.copytree(storage / TINY["name"], storage / name, symlinks=True)
        state_file = storage / name / "sweeper.json"
        state = json.loads(state_file.read_text())
        state_file.write_text(json.dumps({**state, "name": name}, indent=2))
    return storage


def commands(storage: Path) -> dict[str, list[str]]:
    cli = [sys.executable, "-m", "sweeper.cli"]
    last = sorted(path.name for path in storage.iterdir())[-1]
    named = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "--help": [*cli, "--help"],
        "--version": [*cli, "--version"],
        "list": [*cli, "list", "--storage", str(storage)],
        "status": [*cli, "status", last, "--storage", str(storage)],
    }
    named.update({f"validate {space.name}": [*cli, "validate", str(space)] for space in SPACES})
    return named


def measure(trees: list[Path], repeats: int, storage: Path, cwd: Path) -> dict[str, dict[str, dict[str, float]]]:
    """Every command on every tree, `repeats` rounds, interleaved so that load drifts hit all of them alike."""
    walls: dict[tuple[str, str], list[float]] = {}
    cpus: dict[tuple[str, str], list[float]] = {}
    peaks: dict[tuple[str, str], float] = {}
    for _ in range(repeats):
        for name, command in commands(storage).items():
            for tree in trees:
                wall, cpu, peak = timed(command, environment(tree), cwd)
                walls.setdefault((str(tree), name), []).append(wall)
                cpus.setdefault((str(tree), name), []).append(cpu)
                peaks[(str(tree), name)] = max(peak, peaks.get((str(tree), name), 0.0))
    results: dict[str, dict[str, dict[str, float]]] = {}
    for tree in trees:
        base = statistics.median(walls[(str(tree), "python -c pass")])
        results[str(tree)] = {
            name: {
                "median_s": round(statistics.median(walls[(str(tree), name)]), 3),
                "over_python_s": round(statistics.median(walls[(str(tree), name)]) - base, 3),
                "ratio_to_python": round(statistics.median(walls[(str(tree), name)]) / base, 2),
                "cpu_s": round(statistics.median(cpus[(str(tree), name)]), 3),
                "peak_mib": round(peaks[(str(tree), name)], 1),
            }
            for name in commands(storage)
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, action="append", help="a checkout to measure (repeatable)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sweeps", type=int, default=20, help="finished sweeps in the folder list/status read")
    parser.add_argument("--json", type=Path, help="write the results here too")
    args = parser.parse_args()
    trees = [tree.resolve() for tree in (args.tree or [ROOT])]
    with tempfile.TemporaryDirectory() as folder:
        storage = finished_sweeps(Path(folder), args.sweeps, trees[0])
        results = measure(trees, args.repeats, storage, Path(folder))
    for tree, rows in results.items():
        print(f"\n{tree}")
        print(f"{'command':66} {'median s':>9} {'- python':>9} {'x python':>9} {'cpu s':>9} {'peak MiB':>9}")
        for name, row in rows.items():
            print(
                f"{name:66} {row['median_s']:9.3f} {row['over_python_s']:9.3f} {row['ratio_to_python']:9.2f}"
                f" {row['cpu_s']:9.3f} {row['peak_mib']:9.1f}"
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
