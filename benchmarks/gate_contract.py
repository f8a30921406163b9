"""Issue #61 item 6: how many generated cases of the gates' classes fail the contract, on one source tree.

    python benchmarks/gate_contract.py --tree /path/to/a/checkout [--only server] [--json out.json]

Classes: every command that talks to a server against each hostile server of tests/hostile.py (drip, stall after
the probe, huge or endless body, escape- and secret-laden errors, redirects), the API's public functions given
objects whose __fspath__, __repr__, __eq__, __str__ or iteration raise, stored logs and fields holding terminal
escapes and bidi overrides (normal output), and arguments of 4-byte characters (limits in bytes).

Contract (a refusal): exit 2 (the API: a SweeperError with exit code 2; a hostile object may also be used as it is
if the method that raises is never called: exit 0), at most 3 lines and 600 bytes on stderr,
no piece of a secret, no control or format character in what reaches the terminal, nothing written outside the
case's folder, within CASE_S seconds and MEMORY_BYTES of memory. Normal output: exit 0, and no control or format
character. Each case runs in a worker process with PYTHONPATH=TREE, its stdout and stderr captured at the file
descriptors (a library's log line counts); a case that outlives CASE_S is killed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.hostile import BEHAVIOURS, ESCAPES, SECRET, hostile_server  # noqa: E402

CASE_S = 25.0  # with NMT_SWEEPER_TIMEOUT=2 a bounded case ends long before; under SERVE_S (30 s), when a drip ends
MEMORY_BYTES = 3 * 2**30  # the worker's address space: a flood that is not capped ends in MemoryError
PIECES = ("Qz7kR", "Wx8mT", "Vp9nY")  # pieces of SECRET: none may be shown
SPACE = """name: fuzz
data: {corpus: synthetic}
base: {model: {emb_size: 8, hidden_size: 8}, train: {epochs: 1}}
parameters:
  attention.temperature: {grid: [none, fixed]}
"""
SERVER_COMMANDS = {  # name -> argv (URL: the hostile server); "api:" runs a function of sweeper.api
    "summarize": ["sweeper", "summarize", "fuzz", "--storage", "st", "--tracking-uri", "URL"],
    "status": ["sweeper", "status", "fuzz", "--storage", "st", "--address", "URL"],
    "list": ["sweeper", "list", "--storage", "st", "--address", "URL"],
    "logs": ["sweeper", "logs", "fuzz", "--storage", "st", "--address", "URL"],
    "stop": ["sweeper", "stop", "fuzz", "--storage", "st", "--address", "URL"],
    "submit": ["sweeper", "submit", "space.yaml", "--address", "URL", "--tracking-uri", "sqlite:////tmp/x.db"],
    "translate": ["nmt", "translate", "--model", "models:/fuzz/1", "--tracking-uri", "URL"],
    "api summarize": ["api:summarize", "fuzz", "storage=st", "tracking_uri=URL"],
    "api translate": ["api:translate", "LIST:hi", "models:/fuzz/1", "tracking_uri=URL"],
    "api list_sweeps": ["api:list_sweeps", "st", "URL"],
}
HOSTILE_OBJECTS = ("fspath", "repr", "eq", "str", "iter", "len")
API_ARGUMENTS = {  # function -> (positional arguments with OBJ for the hostile object, keyword ones)
    "validate space": ["api:validate", "OBJ"],
    "summarize name": ["api:summarize", "OBJ", "storage=st"],
    "summarize format": ["api:summarize", "fuzz", "storage=st", "format=OBJ"],
    "summarize added": ["api:summarize", "fuzz", "storage=st", "added=OBJ"],
    "sweep_status name": ["api:sweep_status", "OBJ", "storage=st"],
    "list_sweeps storage": ["api:list_sweeps", "OBJ"],
    "stop_sweep wait_s": ["api:stop_sweep", "fuzz", "storage=st", "wait_s=OBJ"],
}
WIDE = "\U0001f600" * 400  # 4-byte characters: 1,600 bytes
WIDE_COMMANDS = {
    "validate": ["sweeper", "validate", "WIDE"],
    "status": ["sweeper", "status", "WIDE", "--storage", "st"],
    "run --name": ["sweeper", "run", "space.yaml", "--name", "WIDE", "--storage", "st"],
    "summarize --with": ["sweeper", "summarize", "fuzz", "--storage", "st", "--with", "WIDE"],
    "--set": ["sweeper", "validate", "space.yaml", "--set", "WIDE=1"],
    "translate --checkpoint": ["nmt", "translate", "--checkpoint", "WIDE"],
    "train config": ["nmt", "train", "WIDE"],
    "data": ["nmt", "data", "info", "WIDE"],
}
LOG_LINES = {  # what a stored log may hold that a terminal would act on
    "all": ESCAPES,
    "OSC title": "\x1b]0;pwned\x07",
    "CSI clear": "\x1b[2J\x1b[H",
    "C1 CSI": "\x9b31m",
    "bidi override": "\u202egnp.exe",
    "BEL": "\x07",
}
STORED = {  # normal output of stored fields: (argv, file under st/fuzz/, its text)
    f"logs sweep.log {what}{tail}": (
        ["sweeper", "logs", "fuzz", "--storage", "st", *tail.split()],
        "sweep.log",
        f"epoch 1 {line} done\n",
    )
    for what, line in LOG_LINES.items()
    for tail in ("", " --tail 1")
}


def cases() -> list[dict]:
    found = []
    for behaviour in BEHAVIOURS:
        for name, argv in SERVER_COMMANDS.items():
            found.append({"id": f"server {behaviour}: {name}", "argv": argv, "server": behaviour, "kind": "refusal"})
    for name, argv in API_ARGUMENTS.items():
        for hostile in HOSTILE_OBJECTS:
            found.append({"id": f"object {hostile}: {name}", "argv": argv, "object": hostile, "kind": "refusal"})
    for name, argv in WIDE_COMMANDS.items():
        found.append({"id": f"bytes: {name}", "argv": [WIDE if a == "WIDE" else a for a in argv], "kind": "refusal"})
    for name, (argv, path, text) in STORED.items():
        found.append({"id": f"output: {name}", "argv": argv, "stored": [path, text], "kind": "output"})
    return found


# ---- the worker (gate_contract_worker.py) runs cases in the tree under test ----


class Worker:
    """A process of the tree under test, its imports done, that forks a child for each case and kills one that
    outlives CASE_S."""

    def __init__(self, tree: Path):
        self.tree = tree
        self.start()

    def start(self) -> None:
        read, write = os.pipe()
        env = {**os.environ, "PYTHONPATH": str(self.tree), "GATE_MEMORY": str(MEMORY_BYTES), "GATE_SECRET": SECRET}
        env.update(GATE_REPORT_FD=str(write), GATE_CASE_S=str(CASE_S))
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("gate_contract_worker.py"))],
            stdin=subprocess.PIPE, text=True, pass_fds=(write,), env=env,
            cwd=tempfile.gettempdir(),
        )  # fmt: skip
        os.close(write)
        self.results = os.fdopen(read)
        assert self.results.readline() == "ready\n", "the worker did not start"  # its imports take their time

    def run(self, case: dict) -> dict | None:
        """The case's result, or None when it ran past CASE_S (the worker killed its child)."""
        self.process.stdin.write(json.dumps(case) + "\n")
        self.process.stdin.flush()
        return json.loads(self.results.readline())

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)


def prepare(case: dict, work: Path) -> None:
    (work / "space.yaml").write_text(SPACE)
    (work / "st").mkdir()
    if "stored" in case:  # a sweep as its driver left it (tests/unit/test_sweeps.py), one file holding escapes
        from tests.unit.test_sweeps import state

        path, text = case["stored"]
        (work / "st" / "fuzz").mkdir(parents=True)
        (work / "st" / "fuzz" / "sweeper.json").write_text(json.dumps(state("fuzz")))
        (work / "st" / "fuzz" / path).write_text(text)


def clean(text: str) -> bool:
    return all(c.isprintable() or c in "\n\t" for c in text)


def verdict(case: dict, result: dict | None, work: Path, before: set[str]) -> list[str]:
    """What of the contract the case broke ([] when none)."""
    if result is None:
        return [f"ran past {CASE_S:g} s"]
    err = (work / "err.txt").read_text(errors="replace") + result["message"]
    out = (work / "out.txt").read_text(errors="replace")
    broken = []
    # an object whose failing method the function never calls may be used as it is (exit 0)
    wanted = (0,) if case["kind"] == "output" else (0, 2) if "object" in case else (2,)
    if result["code"] not in wanted:
        broken.append(f"exit {result['code']}")
    if case["kind"] == "refusal":
        if err.count("\n") > 3 or len(err.encode()) > 600:
            broken.append(f"{err.count(chr(10))} lines, {len(err.encode())} bytes")
    if any(piece in err + out for piece in PIECES):
        broken.append("a secret shown")
    if not clean(err + out):
        broken.append("a control character shown")
    if result["grown_kb"] > 1_000_000:
        broken.append(f"memory grew {result['grown_kb']:,} kB")
    written = {str(p.relative_to(work)) for p in work.rglob("*")} - before - {"out.txt", "err.txt"}
    if any(not path.startswith("st") for path in written):
        broken.append("wrote outside storage")
    return broken


def measure(tree: Path, only: str | None) -> list[dict]:
    worker, rows = Worker(tree), []
    for case in cases():
        if only and not case["id"].startswith(only):
            continue
        with tempfile.TemporaryDirectory() as folder:
            work = Path(folder)
            prepare(case, work)
            before = {str(p.relative_to(work)) for p in work.rglob("*")}
            start = time.monotonic()
            if "server" in case:
                with hostile_server(case["server"]) as server:
                    result = worker.run({**case, "work": folder, "url": server.url})
            else:
                result = worker.run({**case, "work": folder})
            broken = verdict(case, result, work, before)
            rows.append({"id": case["id"], "broken": broken, "seconds": round(time.monotonic() - start, 1)})
            print(f"{'FAIL' if broken else 'ok  '} {rows[-1]['seconds']:5.1f}s {case['id']}: {'; '.join(broken)}")
    worker.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", required=True, help="the checkout whose code is measured (its PYTHONPATH)")
    parser.add_argument("--only", help="only the cases whose id starts with this (server, object, bytes, output)")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    rows = measure(Path(args.tree).resolve(), args.only)
    failing = sum(bool(row["broken"]) for row in rows)
    print(f"{args.tree}: {failing} of {len(rows)} cases fail the contract")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
