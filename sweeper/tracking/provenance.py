"""Where a number came from: the code, the package versions, the device and the node that trained a trial.

Collected in the process that trains (on a cluster, the worker node, not the driver), handed to Tune as
strings, and set as MLflow tags by the driver: a reviewer can see what produced every run.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import platform
import socket
import subprocess
from importlib import metadata
from pathlib import Path

import torch

PACKAGES = ("torch", "ray", "mlflow", "sacrebleu")
PREFIX = "provenance."  # report keys that become `sweeper.<name>` tags
DATASET = "dataset"  # report key: the trial's corpus as MLflow's Dataset fields (JSON), with a process's first report
SOURCE_NAME = "nmt-sweeper"  # what MLflow's Source column names, beside the commit


PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the sweeper package


def code_version(package_dir: Path = PACKAGE_DIR) -> str:
    """`git <commit>` (`+dirty` with uncommitted changes) for a checkout, else the installed package version."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=package_dir, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=package_dir,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        return f"git {commit}" + (" +dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        try:
            return f"nmt-sweeper {metadata.version('nmt-sweeper')}"
        except metadata.PackageNotFoundError:
            return "unknown"


def package_versions() -> str:
    versions = [f"python {platform.python_version()}"]
    for name in PACKAGES:
        try:
            versions.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{name} absent")
    return ", ".join(versions)


def device_description(device: torch.device) -> str:
    """GPU name and memory, or the CPU model and the threads torch uses."""
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return f"cuda: {props.name}, {props.total_memory / 2**30:.0f} GiB"
    model = platform.processor() or "cpu"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        model = next(
            (
                line.split(":", 1)[1].strip()
                for line in cpuinfo.read_text().splitlines()
                if line.startswith("model name")
            ),
            model,
        )
    return f"cpu: {model}, {torch.get_num_threads()} threads"


def trial_provenance(device: torch.device, node_id: str | None = None) -> dict[str, str]:
    """The report fields (`provenance.<name>`) a trial hands to Tune once."""
    node = socket.gethostname() + (f" (ray node {node_id[:12]})" if node_id else "")
    return {
        f"{PREFIX}code": code_version(),
        f"{PREFIX}versions": package_versions(),
        f"{PREFIX}device": device_description(device),
        f"{PREFIX}node": node,
    }


def as_tags(report: dict) -> dict[str, str]:
    """`provenance.<name>` report fields as `sweeper.<name>` MLflow tags."""
    return {
        f"sweeper.{key.removeprefix(PREFIX)}": str(value) for key, value in report.items() if key.startswith(PREFIX)
    }


def source_tags(code: str, user: str | None = None) -> dict[str, str]:
    """MLflow's own provenance tags, which its runs table shows as the Source and User columns: MlflowClient's
    create_run sets none of them (mlflow.start_run does, from the script it runs in). `code`: code_version();
    `user`: who submitted a sweep the cluster's account runs, else whoever runs it."""
    tags = {"mlflow.source.name": SOURCE_NAME, "mlflow.source.type": "LOCAL", "mlflow.user": user or run_user()}
    if code.startswith("git "):
        tags["mlflow.source.git.commit"] = code.split()[1]
    return tags


def run_user() -> str:
    """Who ran the sweep: the tracking server's user where credentials are set, else the login name."""
    try:
        return os.environ.get("MLFLOW_TRACKING_USERNAME") or getpass.getuser()
    except (KeyError, OSError):  # a container's uid with no passwd entry and no $USER
        return "unknown"


def corpus_dataset(name: str, splits: dict[str, list[tuple[str, str]]]) -> str:
    """A corpus as MLflow's Dataset fields (JSON): its name, a digest of every pair of every split (two corpora of
    one name but other text differ), where it came from and its split sizes. A trial hands it to the driver, which
    logs it as the run's input: MLflow's Dataset column."""
    body = json.dumps(splits, sort_keys=True, ensure_ascii=False).encode()
    return json.dumps(
        {
            "name": name,
            "digest": hashlib.sha256(body).hexdigest()[:16],
            "source_type": "nmt_core.data.corpora",
            "source": json.dumps({"corpus": name}),
            "profile": json.dumps({split: len(pairs) for split, pairs in splits.items()}),
        }
    )
