"""Issue #61's gates where they still leaked: the driver's lock taken after the sweep's checks (one probe of object
storage, nothing written by a refused run), the readers left outside the one reader (the corpus and eflomal caches,
a training resume's checkpoint), deadlines on the SQL store, object storage and Ray's trials, and boto3 as the `s3`
extra."""

from __future__ import annotations

import json
import os
import time

import pytest
import yaml

from sweeper import cli as sweeper_cli
from sweeper.running.driver_lock import LOCK_FILE
from sweeper.running.sweeps import driver
from sweeper.storage.store import check_writable, open_storage
from tests.hostile import free_closed_port, hostile_server


def tiny_space(folder) -> str:
    path = folder / "space.yaml"
    body = {"name": "tiny", "base": {"train": {"epochs": 1}}, "parameters": {"attention.score": {"grid": ["dot"]}}}
    path.write_text(yaml.safe_dump(body))
    return str(path)


def only_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = (captured.out + captured.err).strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


# ---- the lock at the right depth ----


def test_the_storage_check_leaves_no_folder_it_made(tmp_path):
    """check_writable's probe makes the storage folder to write in; the check removes it again, so that a sweep
    refused after it (its lock held, its cluster silent) leaves no empty sweeps/ folder."""
    check_writable(open_storage(str(tmp_path / "sweeps" / "deeper"), "test"), "sweeper run")
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def versioned_s3(tmp_path):
    """moto's S3 with versioning on: every object ever put (a probe, a lock) leaves a version behind."""
    import boto3

    from tests.servers import MotoS3

    s3 = MotoS3(tmp_path)
    client = boto3.client("s3", endpoint_url=s3.endpoint)
    client.put_bucket_versioning(Bucket=s3.bucket, VersioningConfiguration={"Status": "Enabled"})
    try:
        yield s3, client
    finally:
        s3.stop()


def versions(client, bucket: str) -> list[str]:
    """The objects ever put in `bucket` by name (a probe's name without its random end); not pyarrow's empty
    markers of folders (keys ending in '/')."""
    listed = client.list_object_versions(Bucket=bucket).get("Versions", [])
    return sorted(v["Key"].rsplit("/", 1)[-1][:15] for v in listed if not v["Key"].endswith("/"))


def test_a_run_refused_by_a_check_or_a_live_driver_writes_no_lock_and_probes_once(
    versioned_s3, tmp_path, capsys, monkeypatch
):
    """Before: the lock was taken (and the storage probed for it) before the tracking store was checked, and the
    sweep probed storage a second time. Now the checks come first: a refused check writes nothing to the bucket,
    and a run refused by a live driver probed once and left only that driver's lock."""
    s3, client = versioned_s3
    monkeypatch.chdir(tmp_path)
    space = tiny_space(tmp_path)
    unreachable = f"http://127.0.0.1:{free_closed_port()}"
    assert sweeper_cli.main(["run", space, "--storage", s3.uri("sweeps"), "--tracking-uri", unreachable]) == 2
    assert "is not reachable" in only_line(capsys)
    assert versions(client, s3.bucket) == []  # no probe, no lock

    experiment = open_storage(s3.uri("sweeps"), "test").below("tiny")
    experiment.write_bytes(json.dumps(driver()).encode(), LOCK_FILE)  # this process: a live driver
    tracking = f"sqlite:///{tmp_path}/mlflow.db"
    assert sweeper_cli.main(["run", space, "--storage", s3.uri("sweeps"), "--tracking-uri", tracking]) == 2
    assert f"sweep tiny is driven by a driver on {driver()['host'][:20]}" in only_line(capsys)
    assert versions(client, s3.bucket) == [".sweeper-probe-", LOCK_FILE]  # one probe; the lock left alone
    assert json.loads(experiment.read_bytes(LOCK_FILE)) == driver()
    assert sorted(os.listdir(tmp_path)) == ["moto.log", "space.yaml"]  # no mlflow.db, no sweeps/


# ---- boto3: the `s3` extra ----


STORES_EXTRAS = {  # scheme -> the module of its lock's client, the line without it, its extra, what constraints pin
    "s3": ("boto3", "a sweep on S3 takes its lock with S3's conditional write, which needs boto3", "s3", ["boto3"]),
    "gs": (
        "google.cloud.storage",
        "a sweep on GCS takes its lock with GCS's conditional write (generation preconditions), which needs "
        "google-cloud-storage",
        "gcs",
        ["google-cloud-storage"],
    ),
}
PINNED = {"s3": ["botocore"], "gs": ["google-cloud-core", "google-resumable-media", "google-crc32c"]}  # and these


@pytest.mark.parametrize("scheme", ["s3", "gs"])
def test_a_sweep_on_object_storage_without_its_client_is_one_line_before_anything_is_written(
    tmp_path, capsys, monkeypatch, scheme
):
    """boto3 (the `s3` extra) or google-cloud-storage (the `gcs` extra) takes the lock's conditional write; without
    it `sweeper run` there is one line naming the extra, before the storage or the tracking store is touched (an
    endpoint nothing listens on)."""
    module, needs, extra, _ = STORES_EXTRAS[scheme]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(__import__("sys").modules, module, None)  # what `import` meets where it is missing
    anonymous = "anonymous@" if scheme == "gs" else ""
    storage = f"{scheme}://{anonymous}bucket/x?endpoint_override=127.0.0.1:{free_closed_port()}&scheme=http"
    for command in (["run", tiny_space(tmp_path)], ["resume", "tiny"]):
        assert sweeper_cli.main([*command, "--storage", storage]) == 2
        line = only_line(capsys)
        assert line.endswith(f"--storage: {needs}: pip install 'nmt-sweeper[{extra}]'"), line
    assert sorted(os.listdir(tmp_path)) == ["space.yaml"]


@pytest.mark.parametrize("scheme", ["s3", "gs"])
def test_the_object_stores_extras_declare_their_clients_and_constraints_pin_them(scheme):
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    _, _, extra, clients = STORES_EXTRAS[scheme]
    assert [spec.split(">")[0] for spec in extras[extra]] == clients
    pins = {line.split("==")[0] for line in (root / "constraints.txt").read_text().splitlines() if "==" in line}
    assert {*clients, *PINNED[scheme]} <= pins, pins


# ---- deadlines ----


def test_a_stalling_postgresql_port_is_one_line_within_the_deadline(tmp_path, capsys, monkeypatch):
    """A port that accepts (the probe passes) and never answers PostgreSQL's startup: MLflow's engine maker tried
    10 times with 101 s of backoff (about 2 minutes at a 2 s deadline, measured before); now one attempt, whose
    connect waits PGCONNECT_TIMEOUT, then one line (exit 2)."""
    import mlflow.store.tracking.sqlalchemy_store  # noqa: F401 - imported before the clock starts
    import psycopg  # noqa: F401

    import sweeper.summary  # noqa: F401 - scipy and the rest: 20 s on a loaded machine
    from nmt_core.gates.gate import network_environment

    monkeypatch.setenv("NMT_SWEEPER_TIMEOUT", "2")
    for variable in network_environment():  # configure_network sets them: put back as they were afterwards
        monkeypatch.delenv(variable, raising=False)
    with hostile_server("stall") as server:
        uri = f"postgresql+psycopg://nobody@127.0.0.1:{server.server_address[1]}/mlflow"
        start = time.monotonic()
        code = sweeper_cli.main(["summarize", "tiny", "--storage", str(tmp_path / "st"), "--tracking-uri", uri])
        took = time.monotonic() - start
    line = only_line(capsys)
    assert code == 2 and "timeout" in line.lower(), line
    assert took < 2 + 2 + 8, took  # the deadline, one connect's wait, and a loaded machine's slack


def test_a_trials_process_puts_its_http_calls_under_the_drivers_deadline(tmp_path):
    """A Ray worker is a fresh process: before, nothing there wrapped requests (a trial's HTTP call had only its
    client's read timeout); prepare_worker, the first call of every trial, installs the wrapper and MLflow's bounds."""
    import subprocess
    import sys

    code = (
        "import os, requests\n"
        "from nmt_core.gates import network\n"
        "from sweeper.running.trainable import prepare_worker\n"
        "from sweeper.running.trial_context import SweepContext\n"
        "assert not network.installed()\n"
        "prepare_worker(SweepContext({}, 1, 0, 's', (), False, 'best', 'best'))\n"
        "assert requests.Session.send is network._send\n"
        "print(os.environ['MLFLOW_HTTP_REQUEST_TIMEOUT'])\n"
    )
    environment = {**os.environ, "NMT_SWEEPER_TIMEOUT": "7"}
    environment.pop("MLFLOW_HTTP_REQUEST_TIMEOUT", None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "7", done.stderr[-2000:]


# ---- readers left outside the one reader ----


def test_a_prepared_corpus_is_read_through_the_one_reader(tmp_path, monkeypatch):
    """The corpus cache: a link planted in its place is not followed, a damaged file or one of other columns is one
    line, and a few kB of Parquet that expand past the row bound are refused by the footer (before: the link was
    read, the others were pyarrow's or a KeyError's tracebacks)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from nmt_core.data import corpora

    cache = tmp_path / "cache"
    cache.mkdir()
    target = cache / "tatoeba-en-es.parquet"
    elsewhere = tmp_path / "elsewhere.parquet"
    corpora.write_cache(corpora.Corpus("x", "en", "es", {"train": [("a", "b")]}), elsewhere)

    def refused() -> str:
        with pytest.raises(corpora.CorpusError) as caught:
            corpora.load_corpus("tatoeba-en-es", cache_dir=cache)
        return str(caught.value)

    target.symlink_to(elsewhere)
    assert "cannot read: a link, which is not followed here" in refused()
    target.unlink()
    target.write_bytes(b"PAR1 not really")
    assert "not a Parquet file this version reads" in refused()
    pq.write_table(pa.table({"text": ["a"]}), target)
    assert "not a corpus this version prepared (columns split, src, tgt)" in refused()
    monkeypatch.setattr(corpora, "MAX_CACHE_ROWS", 1000)
    rows = 1001
    pq.write_table(pa.table({"split": ["train"] * rows, "src": ["a"] * rows, "tgt": ["b"] * rows}), target)
    assert "1,001 rows of 3 columns: more than the 1,000 rows it holds" in refused()


def test_eflomals_cached_links_are_bounded_on_what_they_expand_to(tmp_path, monkeypatch):
    """eflomal's cache (json.gz): a gzip bomb stops at the bound, links outside their sentences or of another corpus
    are one line, a link is not followed (before: json.loads(gzip.decompress(path.read_bytes())), unbounded)."""
    import gzip
    import hashlib

    from nmt_core.data import alignment
    from nmt_core.data.corpora import CorpusError

    pairs = [(["a", "b"], ["c"]), (["d"], ["e", "f"])]
    body = "\n".join(" ".join(s) + "\t" + " ".join(t) for s, t in pairs).encode()
    path = tmp_path / "alignments" / f"eflomal-{hashlib.sha256(body).hexdigest()[:24]}.json.gz"
    path.parent.mkdir()

    def read_through(path) -> list | str:
        try:
            return alignment.eflomal_links(pairs, str(tmp_path))
        except CorpusError as err:
            return str(err)

    def read(content: bytes) -> list | str:
        path.unlink(missing_ok=True)
        path.write_bytes(content)
        return read_through(path)

    assert read(gzip.compress(b"[[[1, 0]], [[0, 1]]]")) == [[(1, 0)], [(0, 1)]]
    assert "not eflomal's links of these 2 pairs" in read(gzip.compress(b"[[[2, 0]], [[0, 1]]]"))
    assert "not eflomal's links of these 2 pairs" in read(gzip.compress(b"[[[0, 0]]]"))
    assert "not a gzip file this version reads" in read(b"[[[0, 0]], [[0, 0]]]")
    assert "expands to more than 200 bytes" in read(gzip.compress(b" " * 50 * 2**20))  # 50 kB: bound of 2 pairs
    monkeypatch.setattr(alignment, "LINKS_BYTES", 100)  # the overall cap, on the file and what it expands to
    assert "larger than 100 bytes" in read(gzip.compress(b" " * 50 * 2**20))
    path.unlink()
    (tmp_path / "links.json.gz").write_bytes(gzip.compress(b"[[[1, 0]], [[0, 1]]]"))
    path.symlink_to(tmp_path / "links.json.gz")
    assert "cannot read: a link, which is not followed here" in read_through(path)


def resume_folder(tmp_path, hidden_size: int):
    """`nmt train`'s --out holding a last.pt of the same config as the run's, with a model of `hidden_size`."""
    import torch

    from nmt_core.config import build_config
    from nmt_core.data.batches import SPECIALS
    from nmt_core.models.rnn import Seq2Seq
    from nmt_core.training import checkpoint

    settings = {"data": {"corpus": "synthetic"}, "model": {"emb_size": 8, "hidden_size": 8}, "train": {"epochs": 1}}
    (tmp_path / "trial.yaml").write_text(yaml.safe_dump(settings))
    cfg, words = build_config(settings), [*SPECIALS, "a"]
    model = build_config({**settings, "model": {"emb_size": 8, "hidden_size": hidden_size}}).model
    weights = Seq2Seq(model, cfg.attention, len(words), len(words)).state_dict()
    state = {
        "format": checkpoint.FORMAT,
        "model": weights,
        "config": cfg.to_dict(),
        "vocab": {"src": words, "tgt": words},
    }
    state.update(epoch=1, best_epoch=1, best_model=weights)
    (tmp_path / "run").mkdir()
    torch.save(state, tmp_path / "elsewhere.pt")
    return tmp_path / "run"


def test_a_training_resume_reads_its_checkpoint_through_the_gate_and_checks_its_weights_first(tmp_path, capsys):
    """`nmt train --out` continuing from last.pt: weights that do not fit the config the file names are one line
    before a model is built or a corpus read (before: PyTorch's load_state_dict failed after both, exit 1), and
    a last.pt that is a link is not followed."""
    import shutil

    from nmt_core.cli import main as nmt_main

    out = resume_folder(tmp_path, hidden_size=16)
    shutil.copy(tmp_path / "elsewhere.pt", out / "last.pt")
    assert nmt_main(["train", str(tmp_path / "trial.yaml"), "--out", str(out)]) == 2
    line = only_line(capsys)
    assert "last.pt: model: the weights do not fit the config (size mismatch for " in line, line
    (out / "last.pt").unlink()
    (out / "last.pt").symlink_to(tmp_path / "elsewhere.pt")
    assert nmt_main(["train", str(tmp_path / "trial.yaml"), "--out", str(out)]) == 2
    assert "last.pt: cannot read: a link, which is not followed here" in only_line(capsys)
