"""Where a number came from: the code, the package versions, the device and the node that trained a trial.

Collected in the process that trains (on a cluster, the worker node, not the driver), handed to Tune as
strings, and set as MLflow tags by the driver: a reviewer can see what produced every run.
"""

from __future__ import annotations

import platform
import socket
import subprocess
from importlib import metadata
from pathlib import Path

import torch

PACKAGES = ("torch", "ray", "mlflow", "sacrebleu")
PREFIX = "provenance."  # report keys that become `sweeper.<name>` tags


PACKAGE_DIR = Path(__file__).resolve().parent


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
