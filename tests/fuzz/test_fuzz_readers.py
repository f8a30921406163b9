"""Every function of sweeper.api, every stored-state reader (sweeper.json, a parent run's space.yaml) and every
checkpoint reader, with generated hostile values, wrong types and hostile files (links, FIFOs, devices): a
SweeperError or the reader's one-line error, never a traceback, an ESC byte or a credential (issue #40 item 4)."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable, Hashable
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from nmt_core.config import ConfigError
from nmt_core.training import checkpoint
from sweeper import api
from sweeper.space.spec import RecordedSpace, SpecError, recorded_space
from sweeper.storage.store import open_storage
from sweeper.storage.stored import read_state
from tests.fuzz.conftest import (
    FUZZ,
    assert_clean_error,
    credential_uris,
    environment,
    hostile_text,
    in_folder,
    snapshot,
)
from tests.unit.test_bounded_input import good_state
from tests.unit.test_names_and_state import valid_state

pytestmark = pytest.mark.timeout(600)

NOWHERE = "sqlite:////nonexistent-fuzz-folder/mlflow.db"
SPACE = {
    "name": "fuzz",
    "base": {"model": {"emb_size": 8, "hidden_size": 8}, "train": {"epochs": 1}},
    "parameters": {"attention.temperature": {"grid": ["none"]}},
}


def deep(levels: int) -> dict:
    value: dict = {}
    for _ in range(levels):
        value = {"a": value}
    return value


def shared() -> dict:
    part = ["x"] * 10
    return {"a": part, "b": part}


def circular() -> dict:
    value: dict = {"a": 1}
    value["self"] = value
    return value


def made_when_drawn(*makers: Callable[[], object]) -> st.SearchStrategy:
    """Values too large to print (an integer of 5,001 digits, a 2 MB string), each made when drawn. Hypothesis prints
    a strategy's arguments in some of its messages (one on a change of the global `random` state that another test's
    thread can cause), and Python refuses to print an integer of over 4,300 digits: a literal one in `sampled_from`
    made such a message a ValueError, and a test failed that its inputs had not failed."""
    return st.sampled_from(makers).map(lambda make: make())


def as_key(value) -> dict:
    """`{value: 1}`, or the value itself where Python cannot make it a key (a list, a dict)."""
    return {value: 1} if isinstance(value, Hashable) else value


# values Python can hand the API that no YAML file could: wrong types, huge, deep, shared, circular, non-finite
wrong_values = st.one_of(
    hostile_text,
    st.integers(-(10**30), 10**30),
    st.sampled_from([float("nan"), float("inf"), True, None, b"bytes", 1.5, 2**63]),
    made_when_drawn(lambda: 10**5000, lambda: -(10**5000), lambda: {"x": "y" * 2_000_000}),
    st.builds(object),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    st.sampled_from([deep(100), shared(), circular(), {1: 2}, {(1, 2): 3}, set()]),
)
API_CALLS = {
    "load_space space": lambda v: api.load_space(v),
    "load_space overrides": lambda v: api.load_space(SPACE, overrides=v),
    "load_space overrides value": lambda v: api.load_space(SPACE, overrides={"base.train.epochs": v}),
    "load_space dict value": lambda v: api.load_space({**SPACE, "description": v}),
    "load_space dict key": lambda v: api.load_space({**SPACE, "base": {**SPACE["base"], "train": as_key(v)}}),
    "validate": lambda v: api.validate(SPACE, overrides={"search.num_samples": v}),
    "run name": lambda v: api.run(SPACE, name=v, storage="st"),
    "run storage": lambda v: api.run(SPACE, storage=v),
    "run tracking_uri": lambda v: api.run(SPACE, storage="st", tracking_uri=v),
    "run address": lambda v: api.run(SPACE, storage="st", address=v),
    "run verbose": lambda v: api.run(SPACE, storage="st", verbose=v),
    "resume name": lambda v: api.resume(v, storage="st"),
    "resume storage": lambda v: api.resume("fuzz", storage=v),
    "restore space": lambda v: api.restore(v, from_data="data", storage="st"),
    "restore from_data": lambda v: api.restore(SPACE, from_data=v, storage="st"),
    "restore storage": lambda v: api.restore(SPACE, from_data="data", storage=v),
    "submit address": lambda v: api.submit(SPACE, address=v),
    "submit wait": lambda v: api.submit(SPACE, address="http://127.0.0.1:1", wait=v),
    "summarize name": lambda v: api.summarize(v, storage="st"),
    "summarize resamples": lambda v: api.summarize("fuzz", storage="st", resamples=v),
    "summarize run_id": lambda v: api.summarize("fuzz", storage="st", run_id=v),
    "summarize format": lambda v: api.summarize("fuzz", storage="st", format=v),
    "summarize out": lambda v: api.summarize("fuzz", storage="st", out=v),
    "summarize added": lambda v: api.summarize("fuzz", storage="st", added=v),
    "schema out": lambda v: api.schema(v if not isinstance(v, str) else f"named/{v}".replace("..", "__")),
    "translate sentences": lambda v: api.translate(v, "models:/m/1", tracking_uri=NOWHERE),
    "translate model_uri": lambda v: api.translate(["a"], v, tracking_uri=NOWHERE),
    "translate beam_size": lambda v: api.translate(["a"], "models:/m/1", beam_size=v, tracking_uri=NOWHERE),
    "translate tracking_uri": lambda v: api.translate(["a"], "models:/m/1", tracking_uri=v),
}


@FUZZ
@given(call=st.sampled_from(sorted(API_CALLS)), value=wrong_values)
def test_every_api_function_refuses_a_wrong_value_with_a_sweeper_error(call, value):
    with environment(MLFLOW_TRACKING_URI=NOWHERE), tempfile.TemporaryDirectory() as folder:
        before = snapshot(Path(folder))
        try:
            with in_folder(Path(folder)):
                API_CALLS[call](value)
        except api.SweeperError as err:
            assert_clean_error(str(err))
        else:  # a value that happens to be valid: only a validation or a schema gets that far
            assert call.startswith(("load_space", "validate", "schema")), (call, value)
            return
        assert snapshot(Path(folder)) == before


@FUZZ
@given(credential=credential_uris(), where=st.sampled_from(["storage", "tracking_uri", "address", "space"]))
def test_the_api_never_shows_a_credential(credential, where):
    uri, secret = credential
    space = {**SPACE, "tracking": {"uri": uri}} if where == "space" else SPACE
    arguments = {"storage": "st", where: uri} if where != "space" else {"storage": "st"}
    with environment(MLFLOW_TRACKING_URI=NOWHERE), tempfile.TemporaryDirectory() as folder, in_folder(Path(folder)):
        with pytest.raises(api.SweeperError) as refused:
            api.run(space, **arguments)
        assert_clean_error(str(refused.value), secret=secret)


# ---- stored state: sweeper.json ----

STATE = valid_state(NOWHERE) | {"name": "fuzz"}
json_values = (
    st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), hostile_text),
        lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
        max_leaves=12,
    )
    | st.sampled_from([10_000_000, -1])
    | made_when_drawn(lambda: 10**5000, lambda: "x" * 2_000_000, lambda: [1] * 100_000)
)


def dumps(value) -> str:
    """JSON of a value, a huge integer written out whole, as a damaged file could hold one."""
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        return json.dumps(value)
    finally:
        sys.set_int_max_str_digits(limit)


def write_state_file(sweep: Path, kind: str, text: str) -> None:
    sweep.mkdir(parents=True)
    target = sweep / "sweeper.json"
    if kind == "file":
        target.write_text(text)
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "link to /dev/zero":
        target.symlink_to("/dev/zero")
    elif kind == "link out of storage":
        (sweep.parent.parent / "outside.json").write_text(json.dumps(STATE))
        target.symlink_to(sweep.parent.parent / "outside.json")
    elif kind == "folder":
        target.mkdir()


@FUZZ
@given(
    key=st.sampled_from(sorted(STATE) + ["study", "plots", "system_metrics", "base.model.hidden_size"]),
    value=json_values,
    kind=st.sampled_from(["file", "file", "file", "fifo", "link to /dev/zero", "link out of storage", "folder"]),
)
def test_a_damaged_sweeper_json_is_one_line_from_every_reader(key, value, kind):
    state = {**STATE, "base": {"model": {"hidden_size": value}}} if key.startswith("base.") else {**STATE, key: value}
    text = dumps(state)
    with environment(), tempfile.TemporaryDirectory() as folder, in_folder(Path(folder)):
        write_state_file(Path(folder) / "st" / "fuzz", kind, text)
        try:
            read_state(open_storage("st", "fuzz").below("fuzz"))
        except ConfigError as err:  # SpecError, or the name's and the URI's own checks
            assert_clean_error(str(err))
            assert "sweeper.json" in str(err)
        else:
            assert kind == "file", kind  # a link, FIFO or folder is never read
        for call in (lambda: api.summarize("fuzz", storage="st"), lambda: api.resume("fuzz", storage="st")):
            with pytest.raises(api.SweeperError) as refused:
                call()
            assert_clean_error(str(refused.value))


# ---- stored state: a parent run's space.yaml ----

yaml_documents = st.one_of(
    hostile_text,
    st.builds(
        lambda key, value: dumps({"name": "x", key: value}),
        st.sampled_from(["significance", "objective", "baseline", "tracking", "parameters"]),
        json_values,
    ),
    st.builds(lambda value: dumps({"significance": {"resamples": value}}), json_values),
    st.sampled_from(
        ["[1, 2]", "significance: {resamples: 10000000}", "significance: {alpha: 1}", "&a [*a]", "- " * 50]
    ),
)


@FUZZ
@given(text=yaml_documents)
def test_a_recorded_space_is_checked_as_on_input(text):
    try:
        space = recorded_space(text, "run 0123: space.yaml")
    except SpecError as err:
        assert_clean_error(str(err))
    else:
        assert isinstance(space, RecordedSpace)  # typed: every section read as on input
        assert 100 <= space.significance.resamples <= 1_000_000


def test_every_strategy_here_can_be_printed():
    """Hypothesis prints a strategy in some messages (made_when_drawn): none of these may fail to print."""
    for strategy in (wrong_values, json_values, yaml_documents):
        assert len(repr(strategy)) < 100_000


# ---- checkpoints ----

GOOD = good_state()
tensor_safe_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(), hostile_text),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=10,
)


@FUZZ
@given(
    key=st.sampled_from(["format", "epoch", "best_epoch", "config", "vocab", "subword", "model", "best_model"]),
    value=tensor_safe_values,
    kind=st.sampled_from(["file", "file", "file", "fifo", "link to /dev/zero", "folder", "truncated"]),
)
def test_a_crafted_checkpoint_is_one_line(key, value, kind):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "best.pt"
        if kind in ("file", "truncated"):
            checkpoint.save(
                {**GOOD, key: value, **({"best_model": GOOD["model"]} if key == "best_epoch" else {})}, path
            )
            if kind == "truncated":
                path.write_bytes(path.read_bytes()[:500])
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "link to /dev/zero":
            path.symlink_to("/dev/zero")
        else:
            path.mkdir()
        try:
            checkpoint.load_for_inference(path)
        except (checkpoint.CheckpointError, ConfigError) as err:
            assert_clean_error(str(err))
        else:
            assert kind == "file", kind


def test_a_saved_checkpoint_never_writes_through_a_link(tmp_path):
    (tmp_path / "outside.pt").write_text("keep")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "best.pt").symlink_to(tmp_path / "outside.pt")
    # refused in one line by the one atomic writer (gate.write_with), the link and its target untouched
    with pytest.raises(checkpoint.CheckpointError, match="is a link, a folder or a device"):
        checkpoint.save(GOOD, tmp_path / "run" / "best.pt")
    assert (tmp_path / "outside.pt").read_text() == "keep" and (tmp_path / "run" / "best.pt").is_symlink()
    checkpoint.save(GOOD, tmp_path / "run" / "last.pt")  # where nothing is in the way, it writes
    assert torch.load(tmp_path / "run" / "last.pt", weights_only=True)["epoch"] == 1
