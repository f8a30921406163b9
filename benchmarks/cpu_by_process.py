"""Where a command's CPU goes, by kind of process, over its whole process tree: the tests' Ray trials, sweep drivers,
servers, Ray's daemons, the C++ compiler under Inductor. For CI's time on 2 cores: a suite that keeps both cores busy
cannot finish sooner than its CPU seconds / 2, whatever the scheduling; this says which processes those seconds are.

    python benchmarks/cpu_by_process.py -- python -m pytest -q -n 2
    python benchmarks/cpu_by_process.py --top 10 -- sweeper run search_spaces/quickstart.yaml

It samples /proc every `--every` seconds (no root, unlike process accounting) and keeps each process's last CPU time
(user + system, its own, not its waited-for children's). A process stays in the tree once seen in it, after its
parent ends (Ray's workers outlive the raylet that forked them); one that starts and ends between two samples is
missed, so the totals are a floor.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

TICKS = os.sysconf("SC_CLK_TCK")
XDIST_WORKER = "import sys;exec(eval(sys.stdin.readline()))"  # how execnet starts an xdist worker
PYTHON_FLAGS_WITH_VALUE = {"-W", "-X", "-Q"}


@dataclass
class Tree:
    """The processes under one root, each with the most CPU seen for it."""

    root: int
    members: set[int] = field(default_factory=set)
    cpu_s: dict[int, float] = field(default_factory=dict)
    commands: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.members.add(self.root)

    def sample(self) -> None:
        """Every process's parent and CPU from its stat file; the command line of this tree's only, read again each
        time: Ray's workers retitle themselves (ray::IDLE, then ray::ImplicitFunc.train), and the last title counts."""
        seen = {pid: stat for pid in all_pids() if (stat := read_stat(pid)) is not None}
        grew = True
        while grew:  # a child's parent may itself be new in this sample
            new = {pid for pid, (parent, _) in seen.items() if pid not in self.members and parent in self.members}
            self.members |= new
            grew = bool(new)
        for pid in self.members & seen.keys():
            self.cpu_s[pid] = max(self.cpu_s.get(pid, 0.0), seen[pid][1])
            self.commands[pid] = read_command(pid) or self.commands.get(pid, "")  # empty once it is a zombie

    def by_kind(self) -> tuple[Counter, Counter]:
        seconds, counts = Counter(), Counter()
        for pid, cpu in self.cpu_s.items():
            name = kind(self.commands.get(pid) or "?")
            seconds[name] += cpu
            counts[name] += 1
        return seconds, counts


def all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def read_stat(pid: int) -> tuple[int, float] | None:
    """Its parent and CPU seconds (utime + stime: fields 14 and 15 of /proc/PID/stat); None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields_after_name = stat.read().rpartition(")")[2].split()
    except OSError:
        return None
    return int(fields_after_name[1]), (int(fields_after_name[11]) + int(fields_after_name[12])) / TICKS


def read_command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def kind(command: str) -> str:
    """A process's kind from its command line: Ray's actors by their name (ray::ImplicitFunc.train ->
    ray::ImplicitFunc), a Python process by its module or script and subcommand (`python -m sweeper.cli run x` ->
    sweeper.cli run, `.../bin/mlflow server ...` -> mlflow server), anything else by its program's name (raylet)."""
    if command.startswith("ray::"):
        return command.split()[0].split(".")[0]
    if XDIST_WORKER in command:
        return "pytest-xdist worker"
    words = command.split()
    if not words:
        return "?"
    program = os.path.basename(words[0])
    if not program.startswith("python"):
        return program
    rest = iter(words[1:])
    for word in rest:
        if word == "-c":
            return "python -c"
        if word == "-m":
            name = next(rest, "?")
            break
        if word in PYTHON_FLAGS_WITH_VALUE:
            next(rest, None)
        elif not word.startswith("-"):
            name = os.path.basename(word)
            break
    else:
        return program
    subcommand = next(rest, "")
    return f"{name} {subcommand}" if subcommand.isalpha() else name


def measure(command: list[str], every: float) -> tuple[int, float, Tree]:
    start = time.perf_counter()
    process = subprocess.Popen(command)
    tree = Tree(process.pid)
    while process.poll() is None:
        tree.sample()
        time.sleep(every)
    return process.returncode, time.perf_counter() - start, tree


def report(wall_s: float, tree: Tree, top: int) -> str:
    seconds, counts = tree.by_kind()
    total = sum(seconds.values())
    cores = os.cpu_count() or 1
    lines = [
        f"wall {wall_s:.1f} s; CPU {total:.1f} s over {len(tree.cpu_s)} processes: {total / wall_s:.2f} cores busy "
        f"of {cores} ({100 * total / (wall_s * cores):.0f}%); at every core busy it would take {total / cores:.0f} s",
        f"{'CPU s':>9}  {'share':>5}  {'procs':>5}  kind",
    ]
    for name, cpu in seconds.most_common(top):
        lines.append(f"{cpu:9.1f}  {100 * cpu / max(total, 1e-9):4.0f}%  {counts[name]:5d}  {name}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", type=float, default=0.2, help="seconds between samples of /proc")
    parser.add_argument("--top", type=int, default=25, help="kinds listed")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to measure after --")
    code, wall_s, tree = measure(command, args.every)
    print(report(wall_s, tree, args.top), file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
