"""Every `sweeper` and `nmt` subcommand, in-process, with a hostile value in each of its arguments and in the
environment it reads: exit 2, one escaped line, no credential, nothing written (issue #40 item 4)."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nmt_core.cli import main as nmt_main
from sweeper.cli import main as sweeper_main
from tests.fuzz.conftest import (
    FUZZ,
    assert_refused,
    captured,
    credential_uris,
    environment,
    hostile_text,
    in_folder,
    snapshot,
)

pytestmark = pytest.mark.timeout(600)

SPACE = """name: fuzz
data: {corpus: synthetic}
base: {model: {emb_size: 8, hidden_size: 8}, train: {epochs: 1}}
parameters:
  attention.temperature: {grid: [none, fixed]}
"""
NOWHERE = "sqlite:////nonexistent-fuzz-folder/mlflow.db"  # refused before Ray or MLflow start, whatever passes
# (subcommand, argument) -> argv with VALUE where the hostile value goes; the rest is valid
SWEEPER_POSITIONS = {
    "validate SPACE": ["validate", "VALUE"],
    "validate --set key": ["validate", "space.yaml", "--set", "VALUE=1"],
    "validate --set value": ["validate", "space.yaml", "--set", "base.train.epochs=VALUE"],
    "validate --set name": ["validate", "space.yaml", "--set", "name=VALUE"],
    "run --name": ["run", "space.yaml", "--name", "VALUE", "--storage", "st"],
    "run --storage": ["run", "space.yaml", "--storage", "VALUE"],
    "run --tracking-uri": ["run", "space.yaml", "--storage", "st", "--tracking-uri", "VALUE"],
    "run --address": ["run", "space.yaml", "--storage", "st", "--address", "VALUE"],
    "run --set": ["run", "space.yaml", "--storage", "st", "--set", "VALUE"],
    "resume NAME": ["resume", "VALUE", "--storage", "st"],
    "resume --storage": ["resume", "fuzz", "--storage", "VALUE"],
    "resume --address": ["resume", "fuzz", "--storage", "st", "--address", "VALUE"],
    "submit --address": ["submit", "space.yaml", "--address", "VALUE"],
    "submit --storage": ["submit", "space.yaml", "--address", "http://127.0.0.1:1", "--storage", "VALUE"],
    "submit --name": ["submit", "space.yaml", "--address", "http://127.0.0.1:1", "--name", "VALUE"],
    "summarize NAME": ["summarize", "VALUE", "--storage", "st"],
    "summarize --run-id": ["summarize", "fuzz", "--storage", "st", "--run-id", "VALUE"],
    "summarize --out": ["summarize", "fuzz", "--storage", "st", "--out", "VALUE"],
    "summarize --with": ["summarize", "fuzz", "--storage", "st", "--with", "VALUE"],
    "summarize --choose": ["summarize", "fuzz", "--storage", "st", "--choose", "VALUE"],
    "summarize --tracking-uri": ["summarize", "fuzz", "--storage", "st", "--tracking-uri", "VALUE"],
    "status NAME": ["status", "VALUE", "--storage", "st"],
    "status --storage": ["status", "fuzz", "--storage", "VALUE"],
    "stop NAME": ["stop", "VALUE", "--storage", "st"],
    "logs NAME": ["logs", "VALUE", "--storage", "st"],
    "promote NAME": ["promote", "VALUE", "00000_00000", "--storage", "st"],
    "promote TRIAL": ["promote", "fuzz", "VALUE", "--storage", "st"],
}


def run_main(main, argv: list[str], work: Path) -> tuple[int, str, str]:
    """A command's exit code, stderr and stdout, run in-process in `work`."""
    with in_folder(work), captured() as (err, out):
        try:
            code = main(argv)
        except SystemExit as exit:  # argparse's own refusals
            code = exit.code
    return code, err.getvalue(), out.getvalue()


def run_sweeper(argv: list[str], work: Path) -> tuple[int, str, str]:
    return run_main(sweeper_main, argv, work)


@FUZZ
@given(position=st.sampled_from(sorted(SWEEPER_POSITIONS)), value=hostile_text)
def test_sweeper_refuses_a_hostile_argument_in_one_line(position, value):
    with environment(MLFLOW_TRACKING_URI=NOWHERE), tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        (work / "space.yaml").write_text(SPACE)
        before = snapshot(work)
        argv = [part.replace("VALUE", value) for part in SWEEPER_POSITIONS[position]]
        code, err, out = run_sweeper(argv, work)
        if position.startswith("validate") and code == 0:  # a value that happens to be valid: a plan, nothing else
            assert err == "" and snapshot(work) == before
            return
        assert_refused(code, err, out)
        assert snapshot(work) == before


@FUZZ
@given(credential=credential_uris(), where=st.integers(0, 7))
def test_sweeper_never_shows_a_credential_from_any_door(credential, where):
    uri, secret = credential
    variables = {6: {"MLFLOW_TRACKING_URI": uri}, 7: {"RAY_ADDRESS": uri}}.get(where, {})
    with environment(**variables), tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        (work / "space.yaml").write_text(SPACE)
        optuna = SPACE + f"search: {{algorithm: optuna, num_samples: 2, study_storage: {uri!r}}}\n"
        (work / "optuna.yaml").write_text(optuna.replace("[none, fixed]", "[none, fixed]"))
        (work / "tracked.yaml").write_text(SPACE + f"tracking: {{uri: {uri!r}}}\n")
        argv = [
            ["run", "space.yaml", "--storage", uri],
            ["run", "space.yaml", "--storage", "st", "--tracking-uri", uri],
            ["run", "space.yaml", "--storage", "st", "--address", uri],
            ["submit", "space.yaml", "--address", uri, "--tracking-uri", "http://127.0.0.1:1"],
            ["validate", "tracked.yaml"],
            ["validate", "optuna.yaml"],
            ["summarize", "fuzz", "--storage", "st"],  # with the URI in $MLFLOW_TRACKING_URI
            ["resume", "fuzz", "--storage", "st"],  # with the URI in $RAY_ADDRESS
        ][where]
        before = snapshot(work)
        code, err, out = run_sweeper(argv, work)
        assert_refused(code, err, out, secret=secret)
        assert snapshot(work) == before


@FUZZ
@given(value=hostile_text, kind=st.sampled_from(["name", "file", "link", "link to a file"]))
def test_sweeper_schema_writes_only_into_a_folder_it_was_given(value, kind):
    with environment(), tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        (work / "elsewhere").mkdir()
        (work / "elsewhere" / "sweep.schema.json").write_text("keep")
        (work / "a-file").write_text("keep")
        target = {
            "name": f"named/{value.lstrip('/')}".replace("..", "__"),  # a folder the user names, here inside `work`
            "file": "a-file",
            "link": "link",
            "link to a file": "out/sweep.schema.json",
        }[kind]
        (work / "link").symlink_to(work / "elsewhere")
        (work / "out").mkdir()
        (work / "out" / "sweep.schema.json").symlink_to(work / "elsewhere" / "sweep.schema.json")
        code, err, out = run_sweeper(["schema", "--out", target if kind != "link to a file" else "out"], work)
        assert (work / "elsewhere" / "sweep.schema.json").read_text() == "keep"
        assert (work / "a-file").read_text() == "keep"
        if code == 0:  # a name that is a usable folder: the schemas are there, and only there
            made = (work / target).resolve()
            assert made.is_relative_to(work.resolve()) and (made / "sweep.schema.json").is_file(), value
            return
        assert_refused(code, err, out)


NMT_POSITIONS = {
    "train CONFIG": ["train", "VALUE", "--out", "run"],
    "train --set": ["train", "trial.yaml", "--set", "VALUE", "--out", "run"],
    "train --out": ["train", "bad.yaml", "--out", "VALUE"],
    "translate --checkpoint": ["translate", "--checkpoint", "VALUE"],
    "translate --model": ["translate", "--model", "VALUE", "--tracking-uri", NOWHERE],
    "translate --tracking-uri": ["translate", "--model", "models:/m/1", "--tracking-uri", "VALUE"],
    "evaluate --src": ["evaluate", "--checkpoint", "nothing", "--src", "VALUE", "--ref", "trial.yaml"],
    "evaluate --traces": ["evaluate", "--checkpoint", "nothing", "--src", "x", "--ref", "x", "--traces", "VALUE"],
}


def run_nmt(argv: list[str], work: Path) -> tuple[int, str, str]:
    return run_main(nmt_main, argv, work)


@FUZZ
@given(position=st.sampled_from(sorted(NMT_POSITIONS)), value=hostile_text)
def test_nmt_refuses_a_hostile_argument_in_one_line(position, value):
    with environment(), mock.patch("sys.stdin", io.StringIO("")), tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        (work / "trial.yaml").write_text("data: {corpus: wmt99}\n")  # refused before anything trains
        (work / "bad.yaml").write_text("attention: {temperature: sact, lambda: 1}\n")
        before = snapshot(work)
        code, err, out = run_nmt([part.replace("VALUE", value) for part in NMT_POSITIONS[position]], work)
        assert_refused(code, err, out)
        assert snapshot(work) == before


@FUZZ
@given(credential=credential_uris(), flag=st.booleans())
def test_nmt_never_shows_a_credential(credential, flag):
    uri, secret = credential
    with environment(**({} if flag else {"MLFLOW_TRACKING_URI": uri})), tempfile.TemporaryDirectory() as folder:
        argv = ["translate", "--model", "models:/m/1"] + (["--tracking-uri", uri] if flag else [])
        code, err, out = run_nmt(argv, Path(folder))
        assert_refused(code, err, out, secret=secret)
