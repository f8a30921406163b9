"""One name rule for every sweep name (issue #26 item 2) and a damaged sweep state in storage (item 5): one line,
exit 2, nothing written."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nmt_core.config import ConfigError
from sweeper import cli as sweeper_cli
from sweeper.space.spec import check_name

REFUSED = [
    "",
    ".",
    "..",
    "../../x",
    "/tmp/elsewhere",
    "a\nb",
    "a/b",
    "a\\b",
    "-x",
    ".hidden",
    "x" * 101,
    "a b",
    "sweep\r",
    7,
    None,
]


@pytest.mark.parametrize("name", ["a", "A.b-c_9", "x" * 100, "tiny..v2"])
def test_a_name_of_the_rule_passes(name):
    assert check_name(name, "--name", "sweeper run") == name


@pytest.mark.parametrize("name", REFUSED)
def test_anything_else_is_one_line(name):
    with pytest.raises(ConfigError) as refused:
        check_name(name, "--name", "sweeper run")
    message = str(refused.value)
    assert message.startswith("sweeper run: --name: must be 1-100 letters") and "\n" not in message
    assert "\r" not in message and len(message) < 260, message  # at most 100 characters of the name


def snapshot(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture
def work(tmp_path, monkeypatch):
    """A working folder two levels down: `../../x` would land in tmp_path, which is watched too."""
    folder = tmp_path / "a" / "b"
    folder.mkdir(parents=True)
    (tmp_path / "space.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "tiny",
                "base": {"train": {"epochs": 1}},
                "parameters": {"attention.temperature": {"grid": ["none"]}},
            }
        )
    )
    monkeypatch.chdir(folder)
    return folder


def refused_in_one_line(args: list[str], capsys) -> str:
    assert sweeper_cli.main(args) == 2
    captured = capsys.readouterr()
    lines = (captured.out + captured.err).strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("command", ["run", "submit"])
@pytest.mark.parametrize("name", ["../../x", "/tmp/sweeper-absolute", "a\nb", "..", "."])
def test_a_bad_name_writes_nothing_anywhere(command, name, work, capsys):
    before = snapshot(work.parent.parent)
    extra = ["--address", "http://127.0.0.1:1"] if command == "submit" else []
    line = refused_in_one_line([command, "../../space.yaml", "--name", name, "--storage", "./storage", *extra], capsys)
    assert line.startswith(f"sweeper: error: sweeper {command}: --name: must be"), line
    assert snapshot(work.parent.parent) == before and not Path("/tmp/sweeper-absolute").exists()


@pytest.mark.parametrize("name", ["..", "../up", "a\nb"])
def test_a_bad_yaml_name_is_refused_by_validate_and_run(name, work, capsys):
    space = work.parent.parent / "space.yaml"
    space.write_text(yaml.safe_dump({"name": name, "parameters": {"attention.temperature": {"grid": ["none"]}}}))
    before = snapshot(work.parent.parent)
    for args in (["validate", str(space)], ["run", str(space), "--storage", "./storage"]):
        assert f"{space}: name: must be" in refused_in_one_line(args, capsys)
    space.write_text(yaml.safe_dump({"name": "fine", "parameters": {"attention.temperature": {"grid": ["none"]}}}))
    set_line = refused_in_one_line(["run", str(space), "--set", f"name={name}", "--storage", "./storage"], capsys)
    assert f"{space}: name: must be" in set_line, set_line
    assert snapshot(work.parent.parent) == before


@pytest.mark.parametrize("command", ["resume", "summarize"])
@pytest.mark.parametrize("name", ["../..", "/etc", "a\nb"])
def test_resume_and_summarize_refuse_a_bad_name(command, name, work, capsys):
    before = snapshot(work.parent.parent)
    line = refused_in_one_line([command, name, "--storage", "./storage"], capsys)
    assert line.startswith(f"sweeper: error: sweeper {command}: NAME: must be"), line
    assert snapshot(work.parent.parent) == before


def valid_state(tracking_uri: str) -> dict:
    return {
        "name": "tiny",
        "source": "space.yaml",
        "tracking_uri": tracking_uri,
        "parent_run_id": "0" * 32,
        "experiment_id": "1",
        "base": {},
        "cpu": 1.0,
        "gpu": 0.0,
        "metric": "bleu_dev",
        "mode": "max",
        "trials": 1,
        "mutable": [],
    }


def damage(work: Path, state: str, tuner: bytes = b"\x80\x05\x95") -> Path:
    sweep = work / "storage" / "tiny"
    sweep.mkdir(parents=True)
    (sweep / "sweeper.json").write_text(state)
    (sweep / "tuner.pkl").write_bytes(tuner)
    return sweep


DAMAGED_STATES = [
    '{"name": "tiny", "tracking',
    "[1, 2]",
    '{"name": "tiny"}',
    b"\xff\xfe not UTF-8",
    pytest.param("[" * 100_000, id="nested-100k-deep"),  # deeper than Python's JSON parser recurses
    pytest.param(json.dumps({**valid_state("sqlite:///mlflow.db"), "pad": "x" * 1_100_000}), id="valid-but-over-1MB"),
]  # runner.STATE_LIMIT: not read into memory


@pytest.mark.parametrize("command", ["resume tiny", "summarize tiny"])
def test_a_name_in_sweeper_json_follows_the_rule_too(command, work, capsys):
    damage(work, json.dumps({**valid_state(f"sqlite:///{work / 'mlflow.db'}"), "name": "../../x"}))
    before = snapshot(work.parent.parent)
    line = refused_in_one_line([*command.split(), "--storage", "./storage"], capsys)
    assert "sweeper.json: name: must be 1-100 letters" in line, line
    assert snapshot(work.parent.parent) == before


@pytest.mark.parametrize("state", DAMAGED_STATES)
@pytest.mark.parametrize("command", ["resume tiny", "summarize tiny", "run ../../space.yaml"])
def test_a_damaged_sweeper_json_is_one_line_naming_it(command, state, work, capsys):
    sweep = damage(work, "")
    (sweep / "sweeper.json").write_bytes(state if isinstance(state, bytes) else state.encode())
    before = snapshot(work.parent.parent)
    line = refused_in_one_line([*command.split(), "--storage", "./storage"], capsys)
    assert line.startswith(f"sweeper: error: {sweep / 'sweeper.json'}: ") and "storage is damaged" in line, line
    assert snapshot(work.parent.parent) == before  # no mlflow.db, no summary, no new state


@pytest.mark.slow
@pytest.mark.parametrize("tuner", [pickle.dumps({"a": 1})[:9], b"not a pickle", pickle.dumps("a string")])
def test_a_damaged_tuner_pkl_is_one_line_naming_it(tuner, work, worker_ray):
    from mlflow.tracking import MlflowClient

    MlflowClient(f"sqlite:///{work / 'mlflow.db'}").search_experiments()  # resume opens only an existing store
    sweep = damage(work, json.dumps(valid_state(f"sqlite:///{work / 'mlflow.db'}")), tuner)
    # in its own process (Ray is up before Tune reads the file), on the xdist worker's Ray (a local one costs seconds)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sweeper.cli",
            "resume",
            "tiny",
            "--storage",
            "./storage",
            "--address",
            worker_ray.address,
        ],
        cwd=work,
        capture_output=True,
        text=True,
        env=worker_ray.env,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    # Ray, started before Tune reads the file, may print its own banner first
    [line] = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("sweeper")]
    assert line.startswith(f"sweeper: error: {sweep / 'tuner.pkl'}: ") and "storage is damaged" in line, line


def test_a_finished_sweep_without_models_names_no_model_and_asks_no_server(tmp_path):
    """`tracking.models: none`: the API's result has no model URI (none was logged) and looks for none; the tracking
    server here answers nobody, so asking it would fail."""
    from sweeper.api import sweep_result
    from sweeper.storage.store import open_storage

    sweep = tmp_path / "storage" / "tiny"
    sweep.mkdir(parents=True)
    (sweep / "sweeper.json").write_text(json.dumps({**valid_state("http://127.0.0.1:9"), "models": "none"}))
    result = sweep_result(open_storage(str(tmp_path / "storage"), "test").below("tiny"), "tiny", 0)
    assert (result.exit_code, result.best_model_uri) == (0, None)
