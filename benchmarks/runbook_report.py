"""What benchmarks/gpu_runbook.sh keeps: the environment, and after every step its results as one JSON file and one
markdown table, so that a step that fails or runs out of time leaves the earlier steps' figures in place.

    python benchmarks/runbook_report.py env > WORK/env.json
    python benchmarks/runbook_report.py report WORK OUT        # OUT/results.json and OUT/summary.md

WORK holds steps.jsonl (one line per finished step: name, exit code, seconds, limit) and each step's JSON
(env; rnn, transformer: benchmarks/throughput.py's; packing: packing.py's); OUT holds cuda_tests.log, the CUDA
tests' `pytest -v` output as it is written.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

THROUGHPUT_STEPS = ("rnn", "transformer")
STATUS = {0: "ok", 124: "timed out", 137: "timed out", -1: "not run: the budget was spent"}
OUTCOMES = "PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS"
# `pytest -v` prints "NODEID OUTCOME [ 5%]"; under xdist (-n) "[gw0] [  5%] OUTCOME NODEID"
TEST_OUTCOME = re.compile(
    rf"^(?P<test>\S+::\S+) (?P<outcome>{OUTCOMES})|^\[gw\d+\] \[\s*\d+%\] (?P<outcome_>{OUTCOMES}) (?P<test_>\S+::\S+)"
)


def environment() -> dict:
    """Python, PyTorch, CUDA, cuDNN, the GPU and nvidia-smi's view of it (when there is one), the CPU count."""
    import torch

    env = {
        "python": platform.python_version(),
        "executable": sys.executable,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "cpus": os.cpu_count(),
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        env.update(capability=f"{props.major}.{props.minor}", gpu_memory_gib=props.total_memory / 2**30)
    try:
        query = "name,driver_version,memory.total,clocks.max.sm,power.limit,compute_mode"
        smi = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv"], capture_output=True, text=True, timeout=30
        )
        env["nvidia_smi"] = smi.stdout.strip() or smi.stderr.strip()
    except (OSError, subprocess.SubprocessError) as error:
        env["nvidia_smi"] = f"not available: {error}"
    return env


def test_outcomes(log: str) -> dict:
    """Counts and failing names from a `pytest -v` log, read line by line: a run cut short keeps what it printed."""
    outcomes: dict[str, list[str]] = {}
    for line in log.splitlines():
        match = TEST_OUTCOME.match(line.strip())
        if match:
            outcome, test = match["outcome"] or match["outcome_"], match["test"] or match["test_"]
            outcomes.setdefault(outcome.lower(), []).append(test)
    counts = {outcome: len(names) for outcome, names in outcomes.items()}
    return {**counts, "not_passed": outcomes.get("failed", []) + outcomes.get("error", [])}


def load(work: Path, out: Path) -> dict:
    """Every step's record and results that exist so far; the CUDA tests counted from their log in OUT, which pytest
    writes as each test ends, so that a test step stopped by its time limit still counts the tests it ran."""
    steps = (
        [json.loads(line) for line in (work / "steps.jsonl").read_text().splitlines()]
        if (work / "steps.jsonl").exists()
        else []
    )
    results: dict = {"steps": steps}
    tests_log = out / "cuda_tests.log"
    if tests_log.exists():
        results["cuda_tests"] = test_outcomes(tests_log.read_text(errors="replace"))
    for name in ("env", "packing", *THROUGHPUT_STEPS):
        path = work / f"{name}.json"
        if path.exists():
            try:
                results[name] = json.loads(path.read_text())
            except json.JSONDecodeError as error:  # a step killed while writing
                results[name] = {"error": f"unreadable: {error}"}
    return results


def table(results: dict) -> str:
    """One markdown table of everything measured: a line per step, per throughput row and per packing row."""
    lines = [
        "| step | row | train tok/s | vs none | vs joeynmt | greedy sent/s | beam-10 sent/s | peak MiB | notes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    env = results.get("env", {})
    lines.append(f"| env | {env.get('gpu')} | | | | | | | torch {env.get('torch')}, CUDA {env.get('cuda')} |")
    for step in results["steps"]:
        status = STATUS.get(step["code"], f"exit {step['code']}")
        lines.append(f"| {step['name']} | | | | | | | | {status}, {step['seconds']}s of {step['limit']}s |")
    tests = results.get("cuda_tests", {})
    if tests:
        counts = ", ".join(f"{k} {v}" for k, v in tests.items() if k != "not_passed")
        failing = "; ".join(tests["not_passed"][:5])
        lines.append(f"| cuda_tests | | | | | | | | {counts}{'; failing: ' + failing if failing else ''} |")
    for name in THROUGHPUT_STEPS:
        for run in results.get(name, []) if isinstance(results.get(name), list) else []:
            lines += throughput_lines(name, run)
    packing = results.get("packing", {})
    for row in packing.get("rows", []):
        lines.append(packing_line(row))
    return "\n".join(lines)


def throughput_lines(step: str, run: dict) -> list[str]:
    """A line per row of one benchmarks/throughput.py run (joeynmt's first): a row that failed with its error, and
    a contender whose run was cut short before its row with the training rounds it finished (`rounds_done`)."""
    rows = ({"joeynmt 2.3": run["joeynmt"]} if "joeynmt" in run else {}) | run.get("variants", {})
    cut_short = {
        name: {"train_tokens_per_s": max(rates, default=0), "cut_short": True}
        for name, rates in run.get("rounds_done", {}).items()
        if name not in rows and not (name == "joeynmt" and "joeynmt 2.3" in rows)
    }
    lines = []
    where = f"{run.get('arch')} {run.get('size')}"
    for name, row in (rows | cut_short).items():
        error = row.get("error") or run.get("failed", {}).get(name)
        trained = f"{row.get('train_tokens_per_s') or 0:.0f}"
        if error or row.get("cut_short"):
            note = f"failed: {error}" if error else "cut short: training rounds only"
            lines.append(f"| {step} | {name} | {trained} | | | | | | {where}, {note} |")
            continue
        vs_none = f"{row['vs_none']:.2f}x" if row.get("vs_none") else ""
        vs_joey = f"{row['ratio_to_joeynmt']:.2f}x" if "ratio_to_joeynmt" in row else ""
        peak = f"{row['peak_step_mib']:.0f}" if row.get("peak_step_mib") is not None else ""
        lines.append(
            f"| {step} | {name} | {trained} | {vs_none} | {vs_joey} | "
            f"{row.get('greedy_sentences_per_s', 0):.1f} | {row.get('beam10_sentences_per_s', 0):.1f} | {peak} | "
            f"{where}, compile s {row.get('compile_time_s', 0):.0f} |"
        )
    return lines


def packing_line(row: dict) -> str:
    where = f"{row.get('trials', '-')} trials, MPS {'on' if row.get('mps') else 'off'}"
    if "error" in row:
        return f"| packing | {where} | | | | | | | failed: {row['error']} |"
    peaks = [p for p in row.get("peak_mib", []) if p is not None]
    peak = f"{max(peaks):.0f}" if peaks else ""
    return f"| packing | {where} | {row['total_tokens_per_s']:.0f} | | | | | {peak} | {row['vs_one']:.2f}x one trial |"


def main(argv: list[str]) -> int:
    command, *rest = argv
    if command == "env":
        print(json.dumps(environment(), indent=2))
    elif command == "report":
        work, out = Path(rest[0]), Path(rest[1])
        results = load(work, out)
        (out / "results.json").write_text(json.dumps(results, indent=2))
        (out / "summary.md").write_text(table(results) + "\n")
    else:
        print(f"runbook_report.py: unknown command {command!r} (env, report)", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
