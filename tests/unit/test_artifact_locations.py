"""Credentials go only where the user sent them (issue #70 item 1): a tracking server on 127.0.0.1 that names another
listener's port as a run's artifact root, a registry version's source or a local folder gets no request with the
user's MLflow credentials there, and the command says so in one line (nmt_core/gates/artifact_locations.py). A
local location is copied as regular files within a byte cap and a deadline."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nmt_core.gates import artifact_locations
from tests.fuzz.conftest import assert_refused, captured
from tests.hostile import RUN_ID, SECRET, naming_server

pytestmark = pytest.mark.timeout(120)
LOCATIONS = {
    "mlflow-artifacts on another port": "mlflow-artifacts://{other}/1/x/artifacts",
    "http on another port": "http://{other}/api/2.0/mlflow-artifacts/artifacts/1/x/artifacts",
    "a local folder": "file:///dev",
    "a bare local path": "/dev",
    "ftp": "ftp://{other}/x",
}
MODELS = {
    "a run's artifacts": f"runs:/{RUN_ID}/zero",
    "a registry version": "models:/m/1",
    "an alias": "models:/m@best",
}


@pytest.fixture
def credentials(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "alice")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", SECRET)
    monkeypatch.setenv("NMT_SWEEPER_TIMEOUT", "5")
    for name in (artifact_locations.HOSTS_VARIABLE, artifact_locations.ROOTS_VARIABLE):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(artifact_locations, "_stores", [])


def translate(server, model: str, tmp_path, monkeypatch) -> tuple[int, str, str]:
    """`nmt translate --model MODEL --tracking-uri SERVER` in-process, one line on stdin."""
    import io

    from nmt_core.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"hi\n")))
    with captured() as (err, out):
        code = main(["translate", "--model", model, "--tracking-uri", server.url])
    return code, err.getvalue(), out.getvalue()


@pytest.mark.parametrize("model", MODELS.values(), ids=MODELS)
@pytest.mark.parametrize("location", LOCATIONS.values(), ids=LOCATIONS)
def test_a_location_on_another_host_or_a_local_folder_gets_no_request_and_one_line(
    location, model, credentials, tmp_path, monkeypatch
):
    """On main, mlflow-artifacts://OTHER got 3 requests with `Authorization: Basic` (alice's password), and file:///dev
    was copied until the disk filled."""
    with naming_server(location) as server:
        code, err, out = translate(server, model, tmp_path, monkeypatch)
    assert server.other.seen == []  # not even a request without credentials
    assert_refused(code, err, out, secret=SECRET)
    assert "artifact location" in err and ("NMT_SWEEPER_ARTIFACT_HOSTS" in err or "ARTIFACT_ROOTS" in err), err


def test_a_listed_host_is_read_without_credentials(credentials, tmp_path, monkeypatch):
    with naming_server(LOCATIONS["mlflow-artifacts on another port"]) as server:
        monkeypatch.setenv(artifact_locations.HOSTS_VARIABLE, server.other.url.removeprefix("http://"))
        code, err, _ = translate(server, MODELS["a run's artifacts"], tmp_path, monkeypatch)
    assert server.other.seen, "the listed host was asked"
    assert server.other.authorized() == []
    assert any("authorization" in headers for headers in server.seen)  # the tracking server itself still gets them
    assert code == 2 and "no best.pt" in err  # the listener answers an empty listing: no model there


def test_a_folder_under_a_listed_root_is_read(credentials, tmp_path, monkeypatch):
    root = tmp_path / "artifacts"
    (root / "zero").mkdir(parents=True)
    (root / "zero" / "notes.txt").write_text("no model here")
    monkeypatch.setenv(artifact_locations.ROOTS_VARIABLE, str(root))
    with naming_server(root.as_uri()) as server:
        code, err, _ = translate(server, MODELS["a run's artifacts"], tmp_path, monkeypatch)
    assert code == 2 and "no best.pt" in err, err  # read, and found to hold no model


def test_the_request_hook_strips_mlflow_credentials_to_a_host_that_is_no_tracking_store(credentials):
    """The second line of defence: whatever builds the request, MLflow's Authorization goes to a store's host only."""
    import base64

    artifact_locations.trust_store("http://127.0.0.1:5000")
    basic = "Basic " + base64.b64encode(f"alice:{SECRET}".encode()).decode()
    assert artifact_locations.foreign_credentials("http://127.0.0.1:5001/x", basic)
    assert artifact_locations.foreign_credentials("http://evil.example/x", basic)
    assert not artifact_locations.foreign_credentials("http://127.0.0.1:5000/api/2.0/x", basic)
    assert not artifact_locations.foreign_credentials("http://evil.example/x", "Bearer ray-token")  # not MLflow's


def bounded_repository(folder, monkeypatch):
    artifact_locations.install()
    artifact_locations.trust_store(f"sqlite:///{folder}/mlflow.db")  # a local store: its folders are the user's
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

    return get_artifact_repository(folder.as_uri())


@pytest.mark.parametrize("planted", ["/dev/zero", "a FIFO", "a file over the cap"])
def test_a_local_copy_takes_regular_files_within_its_cap(planted, credentials, tmp_path, monkeypatch):
    """MLflow's own copy (shutil.copy2) of `zero` in a location of file:///dev copied /dev/zero until the disk was
    full, and blocked on a FIFO for ever; the bounded copy refuses both and stops at its byte cap."""
    store = tmp_path / "store"
    store.mkdir()
    if planted == "a FIFO":
        os.mkfifo(store / "zero")
    elif planted == "a file over the cap":
        monkeypatch.setattr(artifact_locations, "DOWNLOAD_BYTES", 1000)
        (store / "zero").write_bytes(b"0" * 5000)
    repository = bounded_repository(Path("/dev") if planted == "/dev/zero" else store, monkeypatch)
    target = tmp_path / "copy"
    target.mkdir()
    with artifact_locations.refusals() as refused:
        with pytest.raises(Exception):  # noqa: B017 - MLflow wraps what its download threads raise
            repository.download_artifacts("zero", str(target))
    assert refused and "artifact location" in str(refused[0]), refused
    assert sum(f.stat().st_size for f in target.rglob("*") if f.is_file()) <= 1000


def test_a_local_listing_stops_at_the_deadline(credentials, tmp_path, monkeypatch):
    monkeypatch.setattr(artifact_locations, "DOWNLOAD_S", -1.0)
    repository = bounded_repository(tmp_path, monkeypatch)
    with pytest.raises(artifact_locations.ArtifactLocationError, match="took longer"):
        repository.list_artifacts("")


@pytest.mark.parametrize(
    "value, variable",
    [("host:port", artifact_locations.HOSTS_VARIABLE), ("relative/folder", artifact_locations.ROOTS_VARIABLE)],
)
def test_a_bad_allow_list_is_one_line(value, variable, credentials, monkeypatch):
    monkeypatch.setenv(variable, value)
    artifact_locations.trust_store("http://127.0.0.1:5000")
    with pytest.raises(artifact_locations.ConfigError, match=variable):
        artifact_locations.check_location("ftp://x/y" if "HOSTS" in variable else "file:///x")


def test_a_sweep_refuses_an_experiment_whose_root_is_on_another_host(credentials):
    """Whoever creates the sweep's experiment first sets its artifact root: the sweep's driver would have uploaded
    every trial's artifacts there with the user's password. Refused before any run is created."""
    from sweeper.tracking.runs import SweepTracker

    with naming_server(LOCATIONS["mlflow-artifacts on another port"]) as server:
        artifact_locations.trust_store(server.url)
        with pytest.raises(artifact_locations.ArtifactLocationError, match="another host") as raised:
            SweepTracker(server.url, "x")
    assert server.other.seen == []
    assert not any("runs/create" in headers[":path"] for headers in server.seen)
    assert_refused(2, str(raised.value) + "\n", secret=SECRET)
