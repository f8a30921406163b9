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
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the driver reads the tags' names here; only a trial's process describes its device
    import torch

PACKAGES = ("torch", "ray", "mlflow", "sacrebleu")
PREFIX = "provenance."  # report keys that become `sweeper.<name>` tags
DATASET = "dataset"  # report key: the trial's corpus as MLflow dataset inputs (JSON), with a process's first report
SPLIT_ORDER = {"dev": 0, "test": 1, "train": 2}  # a corpus's inputs in this order (corpus_datasets), by context
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
    import torch

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


def dataset_context(split: str) -> str:
    """A corpus split's `mlflow.data.context`, the word MLflow 3.17 shows beside each dataset (capitalised, as
    typed: Train, Dev, Test; no context is special to it): "dev" as the run's dev metrics (`bleu/dev`) and tables
    (`translations/dev.json`) call it, and "test" for every test set (`test`, IWSLT's `tst2013`)."""
    return split if split in SPLIT_ORDER else "test"


def corpus_datasets(name: str, splits: dict[str, list[tuple[str, str]]]) -> str:
    """A corpus as its run's dataset inputs (JSON), a split each: `{"context": ..., "dataset": <MLflow's Dataset
    fields>}`. A trial hands them to the driver, which logs them: MLflow's Dataset column. Dev first, then the test
    sets, train last (the store gives them back as logged: SQLite's): MLflow's evaluation view heads a run's column
    with its first input alone (the others behind a `+N`) and opens on the dev translations, as the runs table ranks
    the trials by dev BLEU."""
    order = sorted(splits, key=lambda split: SPLIT_ORDER[dataset_context(split)])  # test sets as the corpus has them
    return json.dumps([{"context": dataset_context(s), "dataset": split_dataset(name, s, splits[s])} for s in order])


def split_dataset(name: str, split: str, pairs: list[tuple[str, str]]) -> dict[str, str]:
    """One split as MLflow's Dataset fields: named `<corpus>/<split>`, with a digest of its pairs (two corpora of
    one name but other text differ), where it came from and its size. The split in the name: the store keeps one
    input of a name and digest, and two test sets, or a dev set and a test set, of the same text stay two inputs."""
    return {
        "name": f"{name}/{split}",
        "digest": hashlib.sha256(json.dumps(pairs, ensure_ascii=False).encode()).hexdigest()[:16],
        "source_type": "nmt_core.data.corpora",
        "source": json.dumps({"corpus": name, "split": split}),
        "profile": json.dumps({"pairs": len(pairs)}),
    }
