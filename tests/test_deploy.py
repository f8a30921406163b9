"""Every deployment file parses, has the keys Ray / Kubernetes / Compose need, and runs our entry points; the
MLflow server starts as deploy/ configures it."""
from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

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
        assert args.storage.startswith("s3://")  # every node reaches object storage; a node's own folder fails
    assert "persistentVolumeClaim" not in (DEPLOY / name).read_text()
    for group in [spec["headGroupSpec"], *spec["workerGroupSpecs"]]:
        [container] = group["template"]["spec"]["containers"]
        assert container["envFrom"] == [{"secretRef": {"name": "nmt-sweeper-storage"}}]


def test_mlflow_compose_binds_loopback_with_auth_and_postgres():
    compose = load("mlflow/docker-compose.yaml")
    services = compose["services"]
    assert set(services) == {"postgres", "minio", "buckets", "mlflow"}
    for service in services.values():
        assert all(port.startswith("127.0.0.1:") for port in service.get("ports", []))
    command = services["mlflow"]["command"]
    assert "--app-name basic-auth" in command and "postgresql://" in command and "--serve-artifacts" in command
    assert "mlflow[auth]" in command and "--artifacts-destination s3://" in command
    assert {"MLFLOW_AUTH_CONFIG_PATH", "MLFLOW_FLASK_SERVER_SECRET_KEY", "MLFLOW_S3_ENDPOINT_URL"} <= set(
        services["mlflow"]["environment"])
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


@pytest.mark.slow
def test_the_deployed_mlflow_server_starts_and_a_sweep_logs_with_credentials_only(tmp_path):
    """deploy/mlflow/run-mlflow-server.sh for real: basic auth, a secret key, PostgreSQL from Debian's packages.
    A shortened sweep logs with the right credentials and is refused in one line (exit 2) without them."""
    from tests.servers import Postgres, free_port, wait_for
    from tests.test_sweep_e2e import sweeper, write_space

    if not any(Path("/usr/lib/postgresql").glob("*/bin/initdb")) and not os.environ.get("CI"):
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql); .ci/run installs it")
    postgres = Postgres(tmp_path)
    ini = (DEPLOY / "mlflow" / "basic_auth.ini.example").read_text()
    ini = ini.replace("sqlite:////authdb/basic_auth.db", f"sqlite:///{tmp_path / 'auth.db'}").replace(
        "change-me-before-first-start", "s3cret-admin")
    (tmp_path / "basic_auth.ini").write_text(ini)
    port = free_port()
    env = {**os.environ, "BACKEND_STORE_URI": postgres.uri, "ARTIFACTS": str(tmp_path / "artifacts"), "PORT": str(port),
           "MLFLOW_AUTH_CONFIG_PATH": str(tmp_path / "basic_auth.ini"), "MLFLOW_FLASK_SERVER_SECRET_KEY": "k" * 32,
           "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    log = open(tmp_path / "mlflow.log", "w")
    server = subprocess.Popen(["bash", str(DEPLOY / "mlflow" / "run-mlflow-server.sh")], env=env, stdout=log,
                              stderr=subprocess.STDOUT, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    try:
        wait_for(uri + "/health", server, timeout=120)
        space = write_space(tmp_path, name="deployed", parameters={"attention.temperature": {"grid": ["none"]}},
                            base={"model": {"emb_size": 16, "hidden_size": 16}, "train": {"epochs": 1}})
        for who in ({}, {"MLFLOW_TRACKING_USERNAME": "admin", "MLFLOW_TRACKING_PASSWORD": "wrong"}):
            refused = sweeper("run", str(space), "--tracking-uri", uri, "--storage", str(tmp_path / "sweeps"),
                              cwd=tmp_path, env=who)
            assert refused.returncode == 2, refused.stderr[-2000:]
            [line] = refused.stderr.strip().splitlines()
            assert f"tracking server {uri} refused" in line and "MLFLOW_TRACKING_PASSWORD" in line, line
        admin = {"MLFLOW_TRACKING_USERNAME": "admin", "MLFLOW_TRACKING_PASSWORD": "s3cret-admin"}
        done = sweeper("run", str(space), "--tracking-uri", uri, "--storage", str(tmp_path / "sweeps"), cwd=tmp_path,
                       env=admin)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        os.environ.update(admin)
        try:
            client = MlflowClient(uri)
            experiment = client.get_experiment_by_name("deployed")
            runs = client.search_runs([experiment.experiment_id], filter_string="tags.`sweeper.role` = 'trial'")
            assert [r.info.status for r in runs] == ["FINISHED"]
            assert {a.path for a in client.list_artifacts(runs[0].info.run_id)} >= {"translations", "plots"}
            [model] = client.search_logged_models([experiment.experiment_id])  # the trial's model, in the Models tab
            assert (model.source_run_id, model.status.name) == (runs[0].info.run_id, "READY")
        finally:
            for key in admin:
                os.environ.pop(key)
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)
        log.close()
        postgres.stop()
