"""Issue #61 item 6, measured: run every case of tests/fuzz/stored_cases.py against a tree's code and count those
that fail the contract, by class.

    python tests/fuzz/measure_gates.py                    # the code on PYTHONPATH
    python tests/fuzz/measure_gates.py --trees BASE AFTER # each tree's code, the same cases
    python tests/fuzz/measure_gates.py --cases trust --trees BASE AFTER   # issue #70's classes (trust_cases.py)

A worker process imports the commands' code, then runs the cases one after another, each in a fresh folder
(storage/, outside/, work/), within a bounded address space; one that does not answer within CASE_SECONDS (a FIFO
read blocked in C, a decoder that expands) is killed and counted as failed, and a new worker goes on from the next
case.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the cases, whichever tree's code they run against
sys.path.append(str(HERE.parents[1]))  # `tests` where PYTHONPATH names no tree (after it: a tree's code wins)

from stored_cases import CASE_SECONDS, bound_address_space  # noqa: E402

SUITES = ("stored", "trust")  # stored_cases.py (issue #61), trust_cases.py (issue #70)


def suite(name: str) -> Any:
    """The cases module `name` names: its all_cases() and check(case, root)."""
    return importlib.import_module(f"{name}_cases")


def work(start: int, cases: str = "stored") -> None:
    """The worker: "ready" once the code the cases call is imported, then cases from `start` on, one JSON line each
    ({"index", "why"})."""
    import nmt_core.cli  # noqa: F401 - imported before the clock of the first case starts
    import sweeper.api  # noqa: F401
    import sweeper.cli  # noqa: F401

    module = suite(cases)
    all_cases, check = module.all_cases, module.check
    bound_address_space()
    print("ready", flush=True)
    for index, case in enumerate(all_cases()):
        if index < start:
            continue
        with tempfile.TemporaryDirectory() as folder:
            why = check(case, Path(folder))
        print(json.dumps({"index": index, "why": why}), flush=True)


def results(env: dict[str, str], cases: str = "stored") -> dict[int, str | None]:
    """Every case's outcome (None: kept the contract), running workers until all have answered or timed out."""
    count, outcomes = len(suite(cases).all_cases()), {}
    while len(outcomes) < count:
        start = len(outcomes)
        worker = subprocess.Popen(
            [sys.executable, __file__, "--worker", str(start), "--cases", cases], env=env, stdout=subprocess.PIPE,
            text=True,
            stderr=subprocess.DEVNULL, cwd=tempfile.gettempdir(),
        )  # fmt: skip
        if worker.stdout.readline() != "ready\n":  # imports take a while on a loaded machine: not a case's time
            raise RuntimeError("the worker did not start")
        while len(outcomes) < count:
            ready, _, _ = select.select([worker.stdout], [], [], CASE_SECONDS)
            line = worker.stdout.readline() if ready else ""
            if not line:
                worker.kill()
                worker.wait()
                outcomes[len(outcomes)] = f"ran past {CASE_SECONDS} s" if not ready else "its process died"
                break
            answer = json.loads(line)
            outcomes[answer["index"]] = answer["why"]
    return outcomes


def report(tree: str | None, suite_name: str = "stored") -> int:
    env = {**os.environ, **({"PYTHONPATH": str(Path(tree).resolve())} if tree else {})}
    started = time.monotonic()
    outcomes = results(env, suite_name)
    cases = suite(suite_name).all_cases()
    total = Counter(case.kind for case in cases)
    failed = Counter(cases[i].kind for i, why in outcomes.items() if why is not None)
    print(f"== {tree or env.get('PYTHONPATH', 'this code')}: {sum(failed.values())} of {len(cases)} cases fail the "
          f"contract ({time.monotonic() - started:.0f} s)")  # fmt: skip
    for kind in total:
        print(f"  {kind:12} {failed[kind]:4} of {total[kind]:4} fail")
    for index, why in sorted(outcomes.items()):
        if why is not None:
            print(f"  FAIL [{cases[index].kind}] {cases[index].name}: {why}")
    return sum(failed.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", nargs="*", default=[None], help="worktrees, each measured with PYTHONPATH=it")
    parser.add_argument("--cases", choices=SUITES, default="stored", help="which cases (default %(default)s)")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        work(args.worker, args.cases)
        return
    for tree in args.trees:
        report(tree, args.cases)


if __name__ == "__main__":
    main()
