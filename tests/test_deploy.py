"""Every deployment file parses, has the keys Ray / Kubernetes / Compose need, and runs our entry points."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from sweeper.cli import build_parser

DEPLOY = Path(__file__).parent.parent / "deploy"
IMAGE = "ghcr.io/your-org/nmt-sweeper:latest"


def load(name: str):
    return yaml.safe_load((DEPLOY / name).read_text())


def sweeper_commands(text: str) -> list[list[str]]:
    """Every `sweeper ...` command line in a text, as argv (shell line continuations joined)."""
    text = text.replace("\\\n", " ")
    return [shlex.split(m.group(0))[1:] for m in re.finditer(r"sweeper (?:run|validate|submit)[^\n\"&;]*", text)]


def test_every_yaml_file_parses():
    files = sorted(DEPLOY.rglob("*.yaml"))
    assert len(files) == 4
    for path in files:
        assert yaml.safe_load(path.read_text()), path


def test_ray_cluster_launcher_config():
    config = load("ray-cluster.yaml")
    for key in ("cluster_name", "provider", "available_node_types", "head_node_type", "head_start_ray_commands",
                "worker_start_ray_commands"):
        assert key in config, key
    assert config["head_node_type"] in config["available_node_types"]
    assert config["docker"]["image"] == IMAGE
    assert "-e RAY_AUTH_MODE=token" in config["docker"]["run_options"]
    gpu = config["available_node_types"]["gpu_worker"]
    assert gpu["max_workers"] >= gpu["min_workers"] >= 0
    assert any(cmd.startswith("sweeper validate") for cmd in config["setup_commands"])
    assert any(cmd.startswith("nmt data prepare") for cmd in config["setup_commands"])


@pytest.mark.parametrize("name", ["kuberay/raycluster.yaml", "kuberay/rayjob.yaml"])
def test_kuberay_manifests(name):
    manifest = load(name)
    assert manifest["apiVersion"] == "ray.io/v1" and manifest["metadata"]["name"]
    spec = manifest["spec"] if manifest["kind"] == "RayCluster" else manifest["spec"]["rayClusterSpec"]
    assert manifest["kind"] in ("RayCluster", "RayJob")
    assert spec["authOptions"]["mode"] == "token"
    containers = [spec["headGroupSpec"]["template"]["spec"]["containers"][0]]
    containers += [g["template"]["spec"]["containers"][0] for g in spec["workerGroupSpecs"]]
    assert all(c["image"] == IMAGE for c in containers)
    assert all(c["resources"]["limits"]["nvidia.com/gpu"] == "1" for c in containers[1:])
    for group in spec["workerGroupSpecs"]:
        assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
    if manifest["kind"] == "RayJob":
        [argv] = sweeper_commands(manifest["spec"]["entrypoint"])
        args = build_parser().parse_args(argv)  # the entry point is a real sweeper command line
        assert args.command == "run" and (Path(__file__).parent.parent / args.space).exists()


def test_mlflow_compose_binds_loopback_with_auth_and_postgres():
    compose = load("mlflow/docker-compose.yaml")
    services = compose["services"]
    assert set(services) == {"postgres", "mlflow"}
    for service in services.values():
        assert all(port.startswith("127.0.0.1:") for port in service.get("ports", []))
    command = services["mlflow"]["command"]
    assert "--app-name basic-auth" in command and "postgresql://" in command and "--serve-artifacts" in command
    assert "MLFLOW_AUTH_CONFIG_PATH" in services["mlflow"]["environment"]
    script = (DEPLOY / "mlflow" / "run-mlflow-server.sh").read_text()
    assert "--host 127.0.0.1" in script and "--app-name basic-auth" in script and "0.0.0.0" not in script


def test_dockerfile_installs_the_project_and_its_entry_points_work():
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert dockerfile.startswith("#") and "FROM rayproject/ray:2.60.0" in dockerfile
    assert "pip install --no-cache-dir -e ." in dockerfile
    for argv in sweeper_commands(dockerfile + (DEPLOY / "README.md").read_text()):
        build_parser().parse_args(argv)


def test_readme_walks_through_every_file():
    readme = (DEPLOY / "README.md").read_text()
    for name in ("deploy/Dockerfile", "deploy/ray-cluster.yaml", "deploy/kuberay/raycluster.yaml",
                 "deploy/kuberay/rayjob.yaml", "deploy/mlflow/docker-compose.yaml", "run-mlflow-server.sh",
                 "sweeper submit", "--wait"):
        assert name in readme, name
