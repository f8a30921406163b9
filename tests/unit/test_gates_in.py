"""Issue #61's gates in (items 1, 4, 5): decoders bounded on what they expand to, a checkpoint's model checked
before it is built, `file:` URIs per RFC 8089, YAML merge keys, text written back into a generated YAML file, grid
expansion stopped at the trial bound, and one driver per sweep. The hostile cases of each class, generated, are
tests/fuzz/stored_cases.py's (tests/fuzz/test_fuzz_stored.py)."""

from __future__ import annotations

import io
import json
import os
import random
import socket
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from nmt_core.config import ConfigError, build_config
from nmt_core.gates.decoders import json_value, parquet_table
from nmt_core.gates.yaml_input import parse_yaml
from nmt_core.models.rnn import Seq2Seq
from nmt_core.training import checkpoint
from sweeper.running import driver_lock
from sweeper.running.driver_lock import LOCK_FILE, read_holder, sweep_lock
from sweeper.running.sweeps import driver
from sweeper.space.spec import MAX_TRIALS, Parameter, SpecError, _expand, parse_spec, spec_from_mapping
from sweeper.storage.store import open_storage

SPACE = {
    "name": "gates",
    "description": "a space",
    "base": {"model": {"emb_size": 8, "hidden_size": 8}, "train": {"epochs": 1}},
    "parameters": {"attention.temperature": {"grid": ["none", "fixed"]}},
}


def refused(body: bytes) -> str:
    with pytest.raises(ConfigError) as caught:
        json_value(body, "state.json", ConfigError)
    return str(caught.value)


# ---- JSON: numbers, surrogates, depth ----


@pytest.mark.parametrize(
    "body, reason",
    [
        (b'{"at": NaN}', "NaN is not a number JSON allows"),
        (b'{"at": -Infinity}', "-Infinity is not a number JSON allows"),
        (b'{"at": 1e400}', "1e400 is not a finite number"),
        (b'{"at": ' + b"1" * 401 + b"}", "a number of 401 digits"),
        (b'{"by": "\\udcff"}', "a lone surrogate"),
        (b"[" * 40 + b"]" * 40, "nested deeper than 32 levels"),
        (b"\xff{}", "not JSON this version reads"),
    ],
)
def test_stored_json_is_refused_where_it_expands_or_cannot_be_shown(body, reason):
    assert reason in refused(body)


def test_stored_json_within_the_bounds_is_read():
    body = b'{"at": 1700000000.5, "pid": 12345678901234567890, "by": "\\u00e9\\ud83d\\ude00", "a": [[1]]}'
    assert json_value(body, "s", ConfigError) == {
        "at": 1700000000.5,
        "pid": 12345678901234567890,
        "by": "é😀",
        "a": [[1]],
    }


# ---- Parquet: refused by its footer ----


def parquet(table: pa.Table) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()


def test_a_few_kb_of_parquet_that_expand_to_millions_of_rows_are_refused_by_the_footer():
    body = parquet(pa.table({"status": pa.nulls(5_000_000, pa.string())}))
    assert len(body) < 100_000
    with pytest.raises(ConfigError, match=r"5,000,000 rows of 1 columns: more than the 10,000 rows it holds"):
        parquet_table(body, "results.parquet", ConfigError, max_rows=MAX_TRIALS)
    small = parquet(pa.table({"status": ["TERMINATED"]}))
    assert parquet_table(small, "results.parquet", ConfigError, max_rows=MAX_TRIALS).num_rows == 1


@pytest.mark.parametrize(
    "body", [b"", b"PAR1", random.Random(92).randbytes(300), parquet(pa.table({"a": [1, 2]}))[:40]]
)
def test_a_damaged_parquet_file_is_one_line(body):
    with pytest.raises(ConfigError, match="not a Parquet file this version reads"):
        parquet_table(body, "results.parquet", ConfigError)


# ---- a checkpoint's model, before it is built ----


def test_a_small_checkpoint_naming_a_huge_model_is_refused_before_it_is_built(tmp_path):
    words = ["<pad>", "<unk>", "<s>", "</s>", "a"]
    small = build_config({"model": {"emb_size": 8, "hidden_size": 8}})
    config = small.to_dict()
    config["model"].update(hidden_size=8192, emb_size=8192, encoder_layers=16, decoder_layers=16)
    weights = Seq2Seq(small.model, small.attention, len(words), len(words)).state_dict()
    path = tmp_path / "model.pt"
    state = {"format": checkpoint.FORMAT, "model": weights, "config": config, "vocab": {"src": words, "tgt": words}}
    torch.save(state, path)
    started = time.monotonic()
    with pytest.raises(checkpoint.CheckpointError) as caught:
        checkpoint.load_for_inference(path)
    message = str(caught.value)
    assert "model: the weights do not fit the config (size mismatch for " in message
    assert "the config describes 15,571,484,677 weights, the file holds 1,669)" in message
    assert time.monotonic() - started < 60  # laid out on the meta device: no 60 GB allocated


# ---- file: URIs (RFC 8089) ----


@pytest.mark.parametrize("form", ["file://localhost{}", "FILE://{}", "File://LOCALHOST{}", "file:{}", "file://{}"])
def test_file_uris_name_the_folder_on_this_machine(tmp_path, monkeypatch, form):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "st ore").mkdir()
    storage = open_storage(form.format(str(tmp_path / "st%20ore")), "test")
    assert storage.root == str(tmp_path / "st ore")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["st ore"]  # no folder named file:, FILE: or localhost


@pytest.mark.parametrize(
    "uri, why",
    [
        ("file://elsewhere/x", r"names a folder on this machine \(file:///path or file://localhost/path\), not one on"),
        ("file://localhost:99/x", "not one on localhost:99"),
        ("file:relative", "a file URI's path is absolute"),
    ],
)
def test_file_uris_of_another_host_or_a_relative_path_are_refused(uri, why):
    with pytest.raises(SpecError, match=why):
        open_storage(uri, "test")


def test_a_file_as_storage_is_refused(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(SpecError, match="is a file, not a folder; name a folder"):
        open_storage(str(tmp_path / "file"), "test")


# ---- forms: YAML merge keys, text written back ----


@pytest.mark.parametrize(
    "text", ["a: {<<: {b: 1}, b: 2}", "<<: {a: 1}\nb: 2", "a:\n  <<: [{b: 1}, {c: 2}]\n", "a: {<<: {b: 1}}"]
)
def test_yaml_merge_keys_are_refused(text):
    with pytest.raises(ConfigError, match=r"YAML merge keys \(<<\) are not allowed \(line \d\): write the keys out"):
        parse_yaml(text, "space.yaml", ConfigError)


def test_a_quoted_merge_key_is_a_plain_key():
    assert parse_yaml("'<<': 1", "space.yaml", ConfigError) == {"<<": 1}


@pytest.mark.parametrize("sep", ["\n", "\r", "\u2028", "\x85"])
def test_an_override_with_a_line_break_stays_in_its_comment_line(sep):
    description = f"x{sep}objective: {{metric: train_loss, mode: min}}"
    spec = spec_from_mapping(SPACE, [("description", description)], "space.yaml", "# space.yaml with --set ")
    assert spec.metric == "bleu_dev" and parse_yaml(spec.text, "s", ConfigError)["description"] == description
    assert spec.text.splitlines()[0].startswith("# space.yaml with --set description=x\\")
    assert parse_spec(spec.text, "again").metric == "bleu_dev"  # what runs, and what a job gets, reads the same


# ---- grid expansion ----


def test_grid_expansion_stops_at_the_bound_within_a_parameter():
    """Two 3,000-value grids are 9,000,000 assignments: counting the plan stops just past MAX_TRIALS."""
    grids = [Parameter(key, "grid", list(range(3000))) for key in ("train.lr", "train.clip_norm")]
    assignments = _expand(grids, random.Random(0), limit=MAX_TRIALS)
    assert MAX_TRIALS < len(assignments) <= MAX_TRIALS + 3000


def test_a_plan_of_two_large_grids_is_refused_in_bounded_time():
    grid = ", ".join(str(1 + i / 10_000) for i in range(10_000))
    text = f"name: g\nparameters:\n  train.lr: {{grid: [{grid}]}}\n  train.clip_norm: {{grid: [{grid}]}}\n"
    started = time.monotonic()
    with pytest.raises(SpecError, match="grids without `if` of 10,000 x 10,000 values make more than 10,000 trials"):
        parse_spec(text, "space.yaml")
    assert time.monotonic() - started < 60


# ---- one driver per sweep ----


def test_a_second_driver_of_a_sweep_is_refused_naming_the_first(tmp_path, capsys):
    experiment = open_storage(str(tmp_path), "test").below("s")
    with sweep_lock(experiment, "s", "sweeper run"):
        assert read_holder(experiment) == driver()
        with pytest.raises(SpecError) as caught, sweep_lock(experiment, "s", "sweeper resume"):
            pass
        message = str(caught.value)
        assert f"sweep s is driven by a driver on {socket.gethostname()[:100]} (pid {os.getpid()}, since " in message
        assert "UTC): one driver per sweep; `sweeper status s` shows it, `sweeper stop s` stops it" in message
        assert read_holder(experiment) == driver()  # the refused one left the lock alone
    assert not (tmp_path / "s" / LOCK_FILE).exists()  # released


def test_the_lock_of_a_driver_that_is_gone_is_taken_over_and_said_so(tmp_path, capsys):
    experiment = open_storage(str(tmp_path), "test").below("s")
    gone = {**driver(), "since": 1.0}  # this pid, another start time: a process that ended, its pid reused
    experiment.write_text(json.dumps(gone), LOCK_FILE)
    with sweep_lock(experiment, "s", "sweeper run"):
        assert read_holder(experiment) == driver()
    assert (
        f"(pid {os.getpid()}, since 1970-01-01T00:00:01+00:00 UTC), which is gone: taken over"
        in capsys.readouterr().out
    )


def test_a_lock_on_another_machine_is_gone_once_its_sweep_is_silent(tmp_path, monkeypatch):
    experiment = open_storage(str(tmp_path), "test").below("s")
    elsewhere = {"host": "elsewhere", "pid": 1, "since": time.time()}
    experiment.write_text(json.dumps(elsewhere), LOCK_FILE)
    with pytest.raises(SpecError, match="driven by a driver on elsewhere"), sweep_lock(experiment, "s", "x"):
        pass
    monkeypatch.setattr(driver_lock, "STALE_S", -1.0)
    with sweep_lock(experiment, "s", "x"):
        assert read_holder(experiment) == driver()


def test_the_lock_is_an_atomic_conditional_write_on_s3(tmp_path):
    from tests.servers import MotoS3

    s3 = MotoS3(tmp_path)
    try:
        experiment = open_storage(s3.uri("sweeps"), "test").below("s")
        first, second = ({"host": host, "pid": 1, "since": 1.0} for host in "ab")
        assert driver_lock.create_only(experiment, json.dumps(first).encode())
        assert not driver_lock.create_only(experiment, json.dumps(second).encode())  # If-None-Match: * refused it
        assert read_holder(experiment) == first
    finally:
        s3.stop()


def test_conditional_grids_are_counted_as_the_plan_they_make():
    """Grids with `if` are not refused by their product: 101 rates, and 60 or 100 clip norms only with fixed tau."""
    rates = [round(0.001 + i / 100_000, 5) for i in range(101)]

    def space(clips: int) -> dict:
        parameters = {
            **SPACE["parameters"],
            "train.lr": {"grid": rates},
            "train.clip_norm": {"grid": list(range(1, clips + 1)), "if": {"attention.temperature": ["fixed"]}},
        }
        return {**SPACE, "parameters": parameters}

    assert spec_from_mapping(space(60)).parameters  # 101 + 101 x 60 = 6,161 trials
    with pytest.raises(SpecError, match=r"the plan \(grid configurations x 1 samples x 1 seeds\) has more than 10,000"):
        spec_from_mapping(space(100))  # 101 + 101 x 100 = 10,201
