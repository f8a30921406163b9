"""Tracking under a lab's load: several researchers' sweeps submitted at once to one cluster and one MLflow server,
and how long an epoch takes to reach MLflow, and how often the server fails, while they run.

    python benchmarks/lab_load.py [--users 2] [--sweeps 2] [--epochs 3] [--seeds 1] [--json OUT.json]

The lab of tests/e2e/test_lab_afternoon.py, on 127.0.0.1 (tests/lab.py): a Ray head with 0 CPUs and two one-CPU
workers, `deploy/mlflow/run-mlflow-server.sh` (basic auth, PostgreSQL from Debian's packages, artifacts in moto's
S3), the sweeps' storage in the same bucket. Every user submits `--sweeps` sweeps of two variants x `--seeds` tiny
synthetic trials at once. Each sweep's driver measures, for every epoch, the time from the trial ending it to the
MLflow server acknowledging its metrics (the trial's clock and the driver's: one machine here), and counts the
tracking requests that failed (each retry counts); it records both in the sweep's status.json (`tracking`). This
script reads them, and counts the 5xx responses in the MLflow server's access log.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

from sweeper import api  # noqa: E402
from sweeper.running.sweeps import STATUS_FILE  # noqa: E402
from sweeper.storage.store import open_storage  # noqa: E402
from tests.lab import USERS, Lab, lab_space  # noqa: E402
from tests.servers import environment  # noqa: E402

RESEARCHERS = [user for user in USERS if user != "lab"]


def run(folder: Path, users: int, sweeps: int, epochs: int, seeds: int, timeout_s: float) -> dict:
    lab = Lab(folder / "lab")
    try:
        with environment(lab.cluster.client_env):
            names = {f"{user}-{i}": user for user in RESEARCHERS[:users] for i in range(sweeps)}
            start = time.monotonic()
            jobs = [lab.submit(user, lab_space(folder, name, epochs, seeds), folder) for name, user in names.items()]
            for job in jobs:
                output, _ = job.communicate(timeout=600)
                if job.returncode:
                    raise RuntimeError(f"sweeper submit failed:\n{output[-3000:]}")
            ended = wait_until_ended(lab, set(names), timeout_s)
            wall = time.monotonic() - start
        storage = open_storage(lab.storage, "lab_load")
        tracking = {name: json.loads(storage.below(name).read_text(STATUS_FILE))["tracking"] for name in names}
        return {
            "users": users,
            "sweeps": len(names),
            "trials": len(names) * 2 * seeds,
            "epochs_per_trial": epochs,
            "wall_s": round(wall, 1),
            "states": ended,
            "tracking": tracking,
            "server_5xx": lab.server_errors(),
        }
    finally:
        lab.stop()


def wait_until_ended(lab: Lab, names: set[str], timeout_s: float) -> dict[str, str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        frame = api.list_sweeps(lab.storage, lab.cluster.dashboard)
        states = {row["name"]: row["state"] for row in frame.to_dict("records") if row["name"] in names}
        if len(states) == len(names) and all(s in ("finished", "failed", "stopped") for s in states.values()):
            return states
        time.sleep(2)
    raise TimeoutError(f"the sweeps did not end in {timeout_s:.0f} s")


def report(result: dict) -> str:
    lines = [
        f"{result['sweeps']} sweeps by {result['users']} users at once, {result['trials']} trials of "
        f"{result['epochs_per_trial']} epochs on 2 worker CPUs, in {result['wall_s']:.0f} s; MLflow server 5xx "
        f"responses: {result['server_5xx']}",
        "",
        "| sweep | state | epochs logged | epoch -> MLflow median | p99 | longest | failed requests |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, t in result["tracking"].items():
        lines.append(
            f"| {name} | {result['states'][name]} | {t['epochs']} | {t['median_s']:.2f} s | {t['p99_s']:.2f} s | "
            f"{t['max_s']:.2f} s | {t['failed_requests']} |"
        )
    medians = [t["median_s"] for t in result["tracking"].values() if t["epochs"]]
    lines.append(
        f"\nacross sweeps: median of the medians {statistics.median(medians):.2f} s, largest p99 "
        f"{max(t['p99_s'] for t in result['tracking'].values() if t['epochs']):.2f} s, failed requests "
        f"{sum(t['failed_requests'] for t in result['tracking'].values())}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=2, choices=[1, 2], help="researchers submitting (default 2)")
    parser.add_argument("--sweeps", type=int, default=2, help="sweeps each submits at once (default 2)")
    parser.add_argument("--epochs", type=int, default=3, help="epochs per trial (default 3)")
    parser.add_argument("--seeds", type=int, default=1, help="seeds per variant: 2 x this trials a sweep (default 1)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds the sweeps may take (default 1800)")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="lab-load-") as folder:
        result = run(Path(folder), args.users, args.sweeps, args.epochs, args.seeds, args.timeout)
    print(report(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
