"""Every deployment file parses, has the keys Ray / Kubernetes / Compose need, and runs our entry points; the
MLflow server starts as deploy/ configures it."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from mlflow.exceptions import MlflowException
from mlflow.server import get_app_client
from mlflow.tracking import MlflowClient

from sweeper.cli import build_parser

DEPLOY = Path(__file__).parents[2] / "deploy"
IMAGE = "ghcr.io/your-org/nmt-sweeper:latest"
SECRET_NAME = re.compile(r"PASSWORD|SECRET|TOKEN")  # an environment variable that holds a secret
EXAMPLE_ADMIN_PASSWORD = "change-me-before-first-start"


def load(name: str):
    return yaml.safe_load((DEPLOY / name).read_text())


def env_entries(tree) -> list[dict]:
    """Every Kubernetes environment entry ({name, value | valueFrom}) anywhere in a manifest."""
    if isinstance(tree, list):
        return [entry for item in tree for entry in env_entries(item)]
    if not isinstance(tree, dict):
        return []
    here = [tree] if "name" in tree and ("value" in tree or "valueFrom" in tree) else []
    return here + [entry for value in tree.values() for entry in env_entries(value)]


def command_lines() -> list[str]:
    """Every process's argv on this machine, as /proc shows it to any user (what `ps` prints)."""
    lines = []
    for path in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            lines.append(path.read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:  # the process ended
            pass
    return lines


def run_server_script(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(DEPLOY / "mlflow" / "run-mlflow-server.sh"), *args],
        env=env,
        capture_output=True,
        text=True,
    )


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
    for key in (
        "cluster_name",
        "provider",
        "available_node_types",
        "head_node_type",
        "head_start_ray_commands",
        "worker_start_ray_commands",
    ):
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
        assert args.command == "run" and (Path(__file__).parents[2] / args.space).exists()
        assert args.storage.startswith("s3://")  # every node reaches object storage; a node's own folder fails
    assert "persistentVolumeClaim" not in (DEPLOY / name).read_text()
    for group in [spec["headGroupSpec"], *spec["workerGroupSpecs"]]:
        [container] = group["template"]["spec"]["containers"]
        assert container["envFrom"] == [{"secretRef": {"name": "nmt-sweeper-storage"}}]
        env = {entry["name"]: entry for entry in container["env"]}
        for variable, key in (("MLFLOW_TRACKING_USERNAME", "username"), ("MLFLOW_TRACKING_PASSWORD", "password")):
            assert env[variable]["valueFrom"] == {"secretKeyRef": {"name": "nmt-sweeper-mlflow", "key": key}}
    assert "https://" in (DEPLOY / name).read_text()  # says to use https beyond a trusted network


def test_no_secret_is_written_in_a_deploy_file_or_put_on_a_command_line():
    """Kubernetes takes secrets from a Secret, Compose from the shell's environment; no command line carries one."""
    for path in sorted(DEPLOY.rglob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            for entry in env_entries(document):
                if SECRET_NAME.search(entry["name"]):
                    assert "value" not in entry and "secretKeyRef" in entry["valueFrom"], (path, entry["name"])
    for name, service in load("mlflow/docker-compose.yaml")["services"].items():
        for key, value in service.get("environment", {}).items():
            if SECRET_NAME.search(key):
                assert re.fullmatch(r"\$\{[A-Z_]+(:\?[^}]*)?\}", value), (name, key)  # from the shell, never a literal
        for part in ("command", "entrypoint"):
            assert "${" not in str(service.get(part, "")), (name, part)  # Compose would put the value in argv
    assert EXAMPLE_ADMIN_PASSWORD in (DEPLOY / "mlflow" / "basic_auth.ini.example").read_text()


def test_mlflow_compose_binds_loopback_with_auth_and_postgres():
    compose = load("mlflow/docker-compose.yaml")
    services = compose["services"]
    assert set(services) == {"postgres", "minio", "buckets", "mlflow"}
    for service in services.values():
        assert all(port.startswith("127.0.0.1:") for port in service.get("ports", []))
    mlflow, minio = services["mlflow"], services["minio"]
    assert "mlflow[auth]" in mlflow["command"] and "/deploy/run-mlflow-server.sh" in mlflow["command"]
    env = mlflow["environment"]
    assert env["BACKEND_STORE_URI"].startswith("postgresql://mlflow@")  # no password in the URI
    assert env["ARTIFACTS"].startswith("s3://") and env["HOST"] == "0.0.0.0"  # inside the container only
    assert {"MLFLOW_AUTH_CONFIG_PATH", "MLFLOW_FLASK_SERVER_SECRET_KEY", "MLFLOW_S3_ENDPOINT_URL"} <= set(env)
    assert env["AWS_ACCESS_KEY_ID"] != minio["environment"]["MINIO_ROOT_USER"]  # MLflow's own MinIO user
    assert "MINIO_ROOT_PASSWORD" not in str(env)
    assert mlflow["depends_on"]["buckets"] == {"condition": "service_completed_successfully"}
    script = (DEPLOY / "mlflow" / "run-mlflow-server.sh").read_text()
    assert '--host "${HOST:-127.0.0.1}"' in script and "--app-name basic-auth" in script and "0.0.0.0" not in script
    assert "--serve-artifacts" in script and "--backend-store-uri" not in script  # MLFLOW_BACKEND_STORE_URI instead


def test_mlflow_minio_user_may_touch_its_bucket_only():
    policy = json.loads((DEPLOY / "mlflow" / "mlflow-artifacts-policy.json").read_text())
    assert {s["Effect"] for s in policy["Statement"]} == {"Allow"}
    resources = {r for statement in policy["Statement"] for r in statement["Resource"]}
    assert resources == {"arn:aws:s3:::mlflow-artifacts", "arn:aws:s3:::mlflow-artifacts/*"}
    actions = {a for statement in policy["Statement"] for a in statement["Action"]}
    assert {"s3:GetObject", "s3:PutObject", "s3:ListBucket"} <= actions and not any("*" in a for a in actions)
    compose = load("mlflow/docker-compose.yaml")["services"]
    assert compose["buckets"]["entrypoint"] == ["sh", "/deploy/setup-minio.sh"]
    assert compose["mlflow"]["environment"]["AWS_ACCESS_KEY_ID"] == "mlflow"


def test_minio_setup_hands_mc_its_secrets_on_stdin_never_as_arguments(tmp_path):
    """setup-minio.sh with a stand-in `mc` that records each call's arguments and stdin (no MinIO server runs here):
    the root and MLflow passwords reach mc on stdin, and MLflow's user gets the bucket's policy."""
    bin_folder = tmp_path / "bin"
    bin_folder.mkdir()
    (bin_folder / "mc").write_text('#!/bin/sh\nprintf "%s\\n" "$*" >> "$CALLS"\ncat >> "$STDIN"\n')
    (bin_folder / "mc").chmod(0o755)
    secrets = {"MINIO_ROOT_PASSWORD": "root-'pw $1", "MINIO_MLFLOW_PASSWORD": 'mlflow-"pw\\2'}
    env = {
        "PATH": f"{bin_folder}{os.pathsep}{os.environ['PATH']}",
        "MINIO_ROOT_USER": "admin",
        **secrets,
        "CALLS": str(tmp_path / "calls"),
        "STDIN": str(tmp_path / "stdin"),
    }
    done = subprocess.run(
        ["sh", str(DEPLOY / "mlflow" / "setup-minio.sh")],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[0] == "alias set local http://minio:9000"
    assert f"admin policy create local mlflow-artifacts {DEPLOY / 'mlflow' / 'mlflow-artifacts-policy.json'}" in calls
    assert calls[-2:] == ["admin user add local mlflow", "admin policy attach local mlflow-artifacts --user mlflow"]
    assert not any(secret in call for secret in secrets.values() for call in calls)
    stdin = (tmp_path / "stdin").read_text()
    assert stdin == "admin\n{MINIO_ROOT_PASSWORD}\n{MINIO_MLFLOW_PASSWORD}\n".format(**secrets)


@pytest.mark.parametrize(
    "case", ["example ini", "example in the environment", "ini others read", "uri password", "workers"]
)
def test_the_server_script_refuses_unsafe_secrets_and_bad_settings_in_one_line_before_starting(tmp_path, case):
    ini = (DEPLOY / "mlflow" / "basic_auth.ini.example").read_text()
    if case != "example ini":
        ini = ini.replace(EXAMPLE_ADMIN_PASSWORD, "own-admin-password")
    (tmp_path / "basic_auth.ini").write_text(ini)
    (tmp_path / "basic_auth.ini").chmod(0o644 if case == "ini others read" else 0o600)
    env = {
        "PATH": os.environ["PATH"],
        "MLFLOW_AUTH_CONFIG_PATH": str(tmp_path / "basic_auth.ini"),
        "MLFLOW_FLASK_SERVER_SECRET_KEY": "k" * 32,
        "POSTGRES_PASSWORD": "pg-password",
        "ARTIFACTS": "s3://a",
    }
    if case == "example in the environment":
        env["MLFLOW_AUTH_ADMIN_PASSWORD"] = EXAMPLE_ADMIN_PASSWORD  # MLflow prefers it to the file
    if case == "uri password":
        env["BACKEND_STORE_URI"] = "postgresql://mlflow:pg-password@127.0.0.1:5432/mlflow"
    if case == "workers":
        env["WORKERS"] = "0\x1b[2J\u202e" + "9" * 60  # a terminal escape and a right-to-left override: shown escaped
    refused = run_server_script(env=env)
    assert refused.returncode == 2 and not refused.stdout
    [line] = refused.stderr.splitlines()  # before `mlflow server` starts: it would print more
    expected = {
        "example ini": "mlflow.admin_password: the example password",
        "example in the environment": "mlflow.admin_password: the example password",
        "ini others read": "mode 644",
        "uri password": "BACKEND_STORE_URI: holds a password",
        "workers": "WORKERS: $'0\\E[2J\\342\\200\\25699",  # cut at 40 characters (bytes in the C locale)
    }[case]
    assert line.startswith("run-mlflow-server.sh: ") and expected in line, line
    assert "pg-password" not in line and "own-admin-password" not in line
    assert case != "workers" or line.endswith("9'...; allowed: a whole number from 1 to 999"), line
    assert line.isprintable() and line.isascii(), line


def test_dockerfile_installs_the_project_and_its_entry_points_work():
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert dockerfile.startswith("#") and "FROM rayproject/ray:2.60.0" in dockerfile
    assert 'pip install --no-cache-dir -e ".[s3,gcs]"' in dockerfile  # the project, with the S3 and GCS locks' clients
    for argv in sweeper_commands(dockerfile + (DEPLOY / "README.md").read_text()):
        build_parser().parse_args(argv)


def test_readme_walks_through_every_file():
    readme = (DEPLOY / "README.md").read_text()
    for name in (
        "deploy/Dockerfile",
        "deploy/ray-cluster.yaml",
        "deploy/kuberay/raycluster.yaml",
        "deploy/kuberay/rayjob.yaml",
        "deploy/mlflow/docker-compose.yaml",
        "run-mlflow-server.sh",
        "sweeper submit",
        "--wait",
    ):
        assert name in readme, name


@contextmanager
def as_mlflow_user(username: str, password: str):
    """MlflowClient and the auth client read credentials from these two variables only."""
    os.environ.update(MLFLOW_TRACKING_USERNAME=username, MLFLOW_TRACKING_PASSWORD=password)
    try:
        yield
    finally:
        for key in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
            os.environ.pop(key)


@pytest.mark.slow
def test_the_deployed_mlflow_server_starts_and_a_sweep_logs_with_credentials_only(tmp_path, request):
    """deploy/mlflow/run-mlflow-server.sh for real: basic auth, a secret key, PostgreSQL from Debian's packages, its
    user and database made by --setup-db with a password that has quotes in it. While the server runs, no process's
    command line holds the database or the admin password. A user's sweep logs with the right credentials, is refused
    in one line (exit 2) without them, and another user cannot read it (default_permission NO_PERMISSIONS)."""
    from tests.e2e.sweeps import sweeper, write_space
    from tests.servers import UVICORN_PORT, Postgres, launch, reported_port, wait_for

    if not any(Path("/usr/lib/postgresql").glob("*/bin/initdb")) and not os.environ.get("CI"):
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql); .ci/run installs it")
    worker_ray = request.getfixturevalue("worker_ray")  # after the skip: a Ray head is seconds of CPU
    postgres = Postgres(tmp_path, user="owner", database="owner")  # the script makes the mlflow user and database
    pg_password, admin_password = "pg 'quoted' \"pass\" $HOME \\ @:/", "admin-s3cret'word"
    ini = (DEPLOY / "mlflow" / "basic_auth.ini.example").read_text()
    ini = ini.replace("sqlite:////authdb/basic_auth.db", f"sqlite:///{tmp_path / 'auth.db'}").replace(
        EXAMPLE_ADMIN_PASSWORD, admin_password
    )
    (tmp_path / "basic_auth.ini").write_text(ini)
    (tmp_path / "basic_auth.ini").chmod(0o600)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")},
        "POSTGRES_PASSWORD": pg_password,
        "BACKEND_STORE_URI": f"postgresql://mlflow@127.0.0.1:{postgres.port}/mlflow",
        "PORT": "0",  # uvicorn binds a port no other process can take first, and says which (tests/servers.py)
        "ARTIFACTS": str(tmp_path / "artifacts"),
        "MLFLOW_AUTH_CONFIG_PATH": str(tmp_path / "basic_auth.ini"),
        "MLFLOW_FLASK_SERVER_SECRET_KEY": "k" * 32,
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
        "WORKERS": "2",  # more than one, as deployed; not MLflow's default 4: 10 s more CPU on a 2-core CI machine
        "PSQL": " ".join(postgres.psql),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    for _ in range(2):  # creates the user and database, then only sets the password again
        setup = run_server_script("--setup-db", env=env)
        assert setup.returncode == 0, setup.stderr
    launched = launch(["bash", str(DEPLOY / "mlflow" / "run-mlflow-server.sh")], tmp_path / "mlflow.log", env, True)
    server = launched.process
    try:
        uri = f"http://127.0.0.1:{reported_port(launched, UVICORN_PORT, 'it said which port it bound')}"
        wait_for(uri + "/health", launched)
        lines = command_lines()
        assert any("--app-name basic-auth" in line for line in lines)  # the server's processes are in the list
        assert not [line for line in lines if pg_password in line or admin_password in line]
        users = {"alice": "alice-password-1", "bob": "bob-password-22"}
        with as_mlflow_user("admin", admin_password):
            auth = get_app_client("basic-auth", tracking_uri=uri)
            for username, password in users.items():
                auth.create_user(username, password)
        space = write_space(
            tmp_path,
            name="deployed",
            parameters={"attention.temperature": {"grid": ["none"]}},
            base={"model": {"emb_size": 16, "hidden_size": 16}, "train": {"epochs": 1}},
        )
        for who in ({}, {"MLFLOW_TRACKING_USERNAME": "alice", "MLFLOW_TRACKING_PASSWORD": "wrong"}):
            refused = sweeper(
                "run", str(space), "--tracking-uri", uri, "--storage", str(tmp_path / "sweeps"), cwd=tmp_path, env=who
            )
            assert refused.returncode == 2, refused.stderr[-2000:]
            [line] = refused.stderr.strip().splitlines()
            assert f"tracking server {uri} refused" in line and "MLFLOW_TRACKING_PASSWORD" in line, line
        alice = {"MLFLOW_TRACKING_USERNAME": "alice", "MLFLOW_TRACKING_PASSWORD": users["alice"]}
        done = sweeper(
            "run",
            str(space),
            "--tracking-uri",
            uri,
            "--storage",
            str(tmp_path / "sweeps"),
            cwd=tmp_path,
            env=alice,
            ray=worker_ray,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        with as_mlflow_user("alice", users["alice"]):
            client = MlflowClient(uri)
            experiment = client.get_experiment_by_name("deployed")
            runs = client.search_runs([experiment.experiment_id], filter_string="tags.`sweeper.role` = 'trial'")
            assert [r.info.status for r in runs] == ["FINISHED"]
            assert {a.path for a in client.list_artifacts(runs[0].info.run_id)} >= {"translations", "plots"}
            [model] = client.search_logged_models([experiment.experiment_id])  # the trial's model, in the Models tab
            assert (model.source_run_id, model.status.name) == (runs[0].info.run_id, "READY")
        with as_mlflow_user("bob", users["bob"]), pytest.raises(MlflowException, match="403"):
            MlflowClient(uri).get_experiment(experiment.experiment_id)
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:  # a slow machine: not a failure of the test
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
        postgres.stop()
