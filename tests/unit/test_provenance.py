"""Provenance: which code, packages, device and node produced a run."""

import subprocess

import torch

from sweeper.tracking.provenance import as_tags, code_version, device_description, package_versions, trial_provenance


def test_code_version_names_the_commit_and_says_when_the_checkout_is_dirty(tmp_path):
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "model.py").write_text("x = 1\n")
    git("add", "model.py")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    assert code_version(tmp_path) == f"git {commit}"
    (tmp_path / "model.py").write_text("x = 2\n")
    assert code_version(tmp_path) == f"git {commit} +dirty"


def test_outside_a_checkout_the_package_version_stands_in(tmp_path):
    assert code_version(tmp_path).startswith("nmt-sweeper ")


def test_versions_device_node_and_tags():
    assert package_versions().startswith("python 3.") and f"torch {torch.__version__}" in package_versions()
    assert device_description(torch.device("cpu")).startswith("cpu: ")
    report = trial_provenance(torch.device("cpu"), "abcdef0123456789")
    assert report["provenance.node"].endswith("(ray node abcdef012345)")
    tags = as_tags({**report, "bleu_dev": 3.0})
    assert set(tags) == {"sweeper.code", "sweeper.versions", "sweeper.device", "sweeper.node"}
