"""A hostile review of issue #61's gates-depth changes (the driver's lock, the caches' lock, the one reader's new
readers, the deadlines): a hostile user, server or stored file against each, held to the contract (exit 2 or one
line of the caller's error, no control character, no secret, nothing outside storage, bounded time)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from nmt_core.data.corpora import CorpusError
from sweeper import cli as sweeper_cli
from sweeper.running import driver_lock
from sweeper.running.driver_lock import LOCK_FILE, take
from sweeper.running.sweeps import driver
from sweeper.space.spec import SpecError
from sweeper.storage.store import open_storage
from tests.hostile import SECRET, hostile_server

pytestmark = pytest.mark.timeout(300)


def one_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = (captured.out + captured.err).strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].isprintable() and len(lines[0].encode()) <= 600, lines[0]
    return lines[0]


# ---- the caches' lock (gate.exclusive): a planted FIFO, link or folder ----


def plant(lock: Path, kind: str, tmp_path: Path) -> None:
    if kind == "fifo":
        os.mkfifo(lock)
    elif kind == "link":
        lock.symlink_to(tmp_path / "target")
    else:
        lock.mkdir()


@pytest.mark.parametrize("kind", ["fifo", "link", "folder"])
def test_a_corpus_caches_lock_that_is_not_a_file_is_one_line(tmp_path, kind):
    """Before: a FIFO as `.NAME.lock` hung the command for ever (a write-only open waits for a reader); a link or a
    folder escaped as a raw OSError (a traceback's exit 1, not the corpus's one line)."""
    from nmt_core.data import corpora

    cache = tmp_path / "cache"
    cache.mkdir()
    plant(cache / ".tatoeba-en-es.lock", kind, tmp_path)
    with pytest.raises(CorpusError) as caught:
        corpora.load_corpus("tatoeba-en-es", cache_dir=cache)
    assert "cannot take the lock: " in str(caught.value) and str(caught.value).isprintable()
    assert not (tmp_path / "target").exists()  # nothing made through the link


@pytest.mark.parametrize("kind", ["fifo", "link", "folder"])
def test_eflomals_caches_lock_that_is_not_a_file_is_one_line(tmp_path, kind):
    from nmt_core.data import alignment

    (tmp_path / "alignments").mkdir()
    pairs = [(["a"], ["b"])]
    body = b"a\tb"
    name = f"eflomal-{hashlib.sha256(body).hexdigest()[:24]}.json.gz"
    plant(tmp_path / "alignments" / f".{name}.lock", kind, tmp_path)
    with pytest.raises(CorpusError) as caught:
        alignment.eflomal_links(pairs, str(tmp_path))
    assert "cannot take the lock: " in str(caught.value)
    assert not (tmp_path / "target").exists()


# ---- the driver's lock: damaged, planted, stale, raced ----


def lock_folder(tmp_path: Path):
    return open_storage(str(tmp_path / "sweeps"), "test").below("tiny")


def dead_driver() -> dict:
    """A record of a driver on this machine whose process has ended (a pid that is not running)."""
    pid = max(psutil.pids()) + 1000
    return {"host": driver()["host"], "pid": pid, "since": 1.0}


@pytest.mark.parametrize(
    "content",
    [b"", b"garbage \x1b]0;x\x07", b"[1, 2]", b'{"host": 5, "pid": "x", "since": 1e300}', b"{" * 100_000],
    ids=["empty", "garbage", "list", "wrong-types", "deep"],
)
def test_a_damaged_driver_lock_is_taken_over(tmp_path, capsys, content):
    experiment = lock_folder(tmp_path)
    experiment.write_bytes(content, LOCK_FILE)
    take(experiment, driver(), "tiny", "sweeper run")
    assert "which is gone: taken over" in one_line(capsys)
    assert json.loads(experiment.read_bytes(LOCK_FILE)) == driver()


def test_a_huge_driver_lock_is_taken_over_unread(tmp_path, capsys):
    experiment = lock_folder(tmp_path)
    experiment.write_bytes(b"", LOCK_FILE)
    os.truncate(experiment.path(LOCK_FILE), 2**40)  # a sparse terabyte
    take(experiment, driver(), "tiny", "sweeper run")
    assert "taken over" in one_line(capsys)


@pytest.mark.parametrize("kind", ["fifo", "link-out", "link-in"])
def test_a_driver_lock_that_is_a_fifo_or_a_link_is_taken_over_without_following_it(tmp_path, capsys, kind):
    """The lock is replaced, never read through or written through: the link's target is left as it was."""
    experiment = lock_folder(tmp_path)
    lock = Path(experiment.local_folder(LOCK_FILE)) / LOCK_FILE
    target = tmp_path / "target.json"
    target.write_text(json.dumps(driver()))  # a live driver's record, elsewhere
    if kind == "fifo":
        os.mkfifo(lock)
    else:
        lock.symlink_to(target if kind == "link-out" else lock.parent / "other.json")
        (lock.parent / "other.json").write_text(json.dumps(driver()))
    take(experiment, driver(), "tiny", "sweeper run")
    assert "taken over" in one_line(capsys)
    assert not lock.is_symlink() and json.loads(lock.read_text()) == driver()
    assert json.loads(target.read_text()) == driver()


@pytest.mark.parametrize("pid", [10**30, -1, "1; rm -rf /", None, [1], 2**63, 1.5])
def test_a_stale_lock_with_a_hostile_pid_is_taken_over_in_one_line(tmp_path, capsys, pid):
    experiment = lock_folder(tmp_path)
    experiment.write_bytes(json.dumps({**driver(), "pid": pid, "host": driver()["host"]}).encode(), LOCK_FILE)
    take(experiment, driver(), "tiny", "sweeper run")
    assert "taken over" in one_line(capsys)


def test_a_live_holders_hostile_host_name_is_shown_escaped(tmp_path, capsys):
    """A lock from another machine, recent: refused, its host escaped and cut (no escape sequence, no 10 kB)."""
    experiment = lock_folder(tmp_path)
    holder = {"host": "\x1b]0;pwned\x07\u202e" + "h" * 10_000, "pid": 1, "since": time.time()}
    experiment.write_bytes(json.dumps(holder).encode(), LOCK_FILE)
    with pytest.raises(SpecError) as caught:
        take(experiment, driver(), "tiny", "sweeper run")
    message = str(caught.value)
    assert message.isprintable() and "\x1b" not in message and len(message.encode()) < 600, message


def test_two_drivers_taking_over_one_stale_lock_at_once_leave_one_driver(tmp_path, monkeypatch):
    """Before: each read the stale holder, judged it gone, deleted the lock and made its own: the second deleted the
    first's fresh lock, and both drove the sweep. Here the second reaches its takeover while the first is judging
    the stale holder; now takeovers in a folder are one at a time, and the second finds a live driver."""
    experiment = lock_folder(tmp_path)
    experiment.write_bytes(json.dumps(dead_driver()).encode(), LOCK_FILE)
    parent = psutil.Process(os.getppid())
    first = {"host": driver()["host"], "pid": parent.pid, "since": round(parent.create_time(), 2)}  # alive
    second = driver()
    outcomes: dict[str, str] = {}

    def attempt(me: dict, label: str) -> None:
        try:
            take(experiment, me, "tiny", "sweeper run")
            outcomes[label] = "holds"
        except SpecError as err:
            outcomes[label] = str(err)

    judge = driver_lock.gone
    racer = threading.Thread(target=attempt, args=(second, "second"))

    def gone_while_the_other_takes_over(experiment_, holder):
        if not racer.is_alive() and "second" not in outcomes:
            racer.start()
            racer.join(2.0)  # the second's whole takeover, unless it waits for this one
        return judge(experiment_, holder)

    monkeypatch.setattr(driver_lock, "gone", gone_while_the_other_takes_over)
    attempt(first, "first")
    racer.join(30)
    holders = [label for label, outcome in outcomes.items() if outcome == "holds"]
    assert len(holders) == 1, outcomes
    assert json.loads(experiment.read_bytes(LOCK_FILE)) == (first if holders == ["first"] else second)


def test_run_and_resume_of_one_live_sweep_are_refused_naming_its_driver(tmp_path, capsys, monkeypatch):
    """Another process (this test's parent: alive, on this machine) holds the lock: `run` and `resume` are one line
    each, exit 2, and the lock is left as it was."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "space.yaml").write_text(
        "name: tiny\nbase: {train: {epochs: 1}}\nparameters: {attention.score: {grid: [dot]}}\n"
    )
    parent = psutil.Process(os.getppid())
    holder = {"host": driver()["host"], "pid": parent.pid, "since": round(parent.create_time(), 2)}
    experiment = lock_folder(tmp_path)
    experiment.write_bytes(json.dumps(holder).encode(), LOCK_FILE)
    tracking = f"sqlite:///{tmp_path}/mlflow.db"
    for command in (["run", "space.yaml"], ["resume", "tiny"]):
        code = sweeper_cli.main([*command, "--storage", str(tmp_path / "sweeps"), "--tracking-uri", tracking])
        line = one_line(capsys)
        assert code == 2, line
    assert json.loads(experiment.read_bytes(LOCK_FILE)) == holder


# ---- deadlines: NMT_SWEEPER_TIMEOUT's values, a thread past its deadline, a SQL store's password ----


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "1e400", "3601", "", "ten", "\x1b[2J", "1" * 5000])
def test_a_bad_deadline_is_one_line_naming_the_variable(tmp_path, capsys, monkeypatch, value):
    monkeypatch.setenv("NMT_SWEEPER_TIMEOUT", value)
    assert sweeper_cli.main(["status", "tiny", "--storage", str(tmp_path / "st")]) == 2
    assert "NMT_SWEEPER_TIMEOUT" in one_line(capsys)
    assert not (tmp_path / "st").exists()


def test_a_command_on_a_stalling_object_store_exits_at_its_deadline(tmp_path):
    """The whole process, not only main(): a storage call left running in its daemon thread at the deadline must
    not hold the interpreter's exit (pyarrow's S3 finalisation at exit) nor print after the one line."""
    with hostile_server("stall") as server:
        storage = f"s3://b/x?endpoint_override=127.0.0.1:{server.server_address[1]}&scheme=http"
        environment = {**os.environ, "NMT_SWEEPER_TIMEOUT": "1", "AWS_ACCESS_KEY_ID": "k"}
        environment.update(AWS_SECRET_ACCESS_KEY=SECRET, AWS_EC2_METADATA_DISABLED="true")
        start = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "sweeper.cli", "status", "tiny", "--storage", storage],
            capture_output=True,
            text=True,
            env=environment,
            timeout=120,
            cwd=tmp_path,
        )
        took = time.monotonic() - start
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, (done.returncode, lines[-5:])
    assert SECRET not in lines[0] and lines[0].isprintable()
    assert took < 60, took  # imports on a loaded machine, one deadline; not pyarrow's retries (minutes)
    assert os.listdir(tmp_path) == []


def test_a_sql_store_password_is_never_echoed(tmp_path, capsys, monkeypatch):
    """A PostgreSQL store that refuses (a closed port) or stalls: the line names the store without its password."""
    from tests.hostile import free_closed_port

    monkeypatch.setenv("NMT_SWEEPER_TIMEOUT", "1")
    with hostile_server("stall") as server:
        for port in (free_closed_port(), server.server_address[1]):
            uri = f"postgresql+psycopg://user:{SECRET}@127.0.0.1:{port}/mlflow?password={SECRET}"
            code = sweeper_cli.main(["summarize", "tiny", "--storage", str(tmp_path / "st"), "--tracking-uri", uri])
            line = one_line(capsys)
            assert code == 2 and SECRET not in line and SECRET[:8] not in line, line


# ---- a checkpoint whose config claims a huge model ----


def expanded_checkpoint(folder: Path, model: dict, vocab_words: int) -> Path:
    """A last.pt whose every weight has the shape its config asks for, stored as an expanded view of one number
    (stride 0): the file stays small whatever the model."""
    import torch

    from nmt_core.config import build_config
    from nmt_core.data.batches import SPECIALS
    from nmt_core.models.build import build_model
    from nmt_core.training import checkpoint

    settings = {"data": {"corpus": "synthetic", "src_vocab": vocab_words, "tgt_vocab": vocab_words}, "model": model}
    cfg, words = build_config({**settings, "train": {"epochs": 1}}), [*SPECIALS, *(f"w{i}" for i in range(vocab_words))]
    with torch.device("meta"):
        wanted = build_model(cfg.model, cfg.attention, len(words), len(words)).state_dict()
    weights = {
        k: torch.zeros(1, dtype=v.dtype).expand(v.shape) if v.dim() else torch.zeros(()) for k, v in wanted.items()
    }
    state = {
        "format": checkpoint.FORMAT,
        "model": weights,
        "config": cfg.to_dict(),
        "vocab": {"src": words, "tgt": words},
    }
    folder.mkdir()
    checkpoint.save(state, folder / checkpoint.LAST)
    return folder


def test_a_small_checkpoint_of_expanded_weights_is_refused_before_a_model_is_built(tmp_path, monkeypatch):
    """Before: shapes were all check_weights compared, so a 3 MB last.pt of stride-0 weights whose config named
    6.4 billion weights (emb/hidden 8192, 200k words) passed, and a 25 GB model would have been built. A model
    larger than MAX_WEIGHTS, each weight stored whole, is refused too (the bound lowered to a small model's)."""
    from nmt_core.training import checkpoint

    huge = expanded_checkpoint(tmp_path / "huge", {"emb_size": 8192, "hidden_size": 8192}, 200_000)
    assert (huge / checkpoint.LAST).stat().st_size < 10 * 2**20
    with pytest.raises(checkpoint.CheckpointError) as caught:
        checkpoint.load_resume(huge)
    assert "is not stored whole (an expanded view of fewer numbers)" in str(caught.value)
    small = expanded_checkpoint(tmp_path / "small", {"emb_size": 8, "hidden_size": 8}, 10)
    state = checkpoint.load(small / checkpoint.LAST)
    state["model"] = {key: value.contiguous() for key, value in state["model"].items()}
    checkpoint.save(state, small / checkpoint.LAST)
    checkpoint.load_resume(small)  # stored whole, within the bound
    monkeypatch.setattr(checkpoint, "MAX_WEIGHTS", 100)
    with pytest.raises(checkpoint.CheckpointError) as caught:
        checkpoint.load_resume(small)
    assert "weights, more than the 100 a checkpoint of at most" in str(caught.value)


@pytest.mark.parametrize("store", ["s3://", "gs://anonymous@"])
@pytest.mark.parametrize("behaviour", ["stall", "drip"])
def test_the_locks_conditional_put_on_a_stalling_store_ends_at_the_deadline(monkeypatch, behaviour, store):
    """boto3's put (If-None-Match) was outside the object store's deadline: its read timeout bounds one read, and
    with its retries a stalling or dripping endpoint held `sweeper run` 90 s at a 1 s deadline (measured before).
    google-cloud-storage's put (ifGenerationMatch=0) runs under the same deadline."""
    for name, value in {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": SECRET, "NMT_SWEEPER_TIMEOUT": "1"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with hostile_server(behaviour) as server:
        storage = f"{store}b/x?endpoint_override=127.0.0.1:{server.server_address[1]}&scheme=http"
        experiment = open_storage(storage, "test").below("tiny")
        start = time.monotonic()
        with pytest.raises(SpecError) as caught:
            driver_lock.create_only(experiment, b"{}")
        took = time.monotonic() - start
    message = str(caught.value)
    assert took < 10, took
    assert "storage failed: " in message and SECRET not in message and message.isprintable(), message
