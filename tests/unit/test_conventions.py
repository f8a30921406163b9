"""MLflow's and Ray's conventions on both command lines: where the tracking URI and the Ray address come from,
`--version`, and help text on every argument."""

from __future__ import annotations

import argparse
import json
from importlib import metadata
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from nmt_core import cli as nmt_cli
from nmt_core.gates.tracking_store import choose_tracking_uri
from sweeper import cli as sweeper_cli
from sweeper.tracking.store import TrackingError, check_holds_run

QUICKSTART = Path(__file__).parents[2] / "search_spaces" / "quickstart.yaml"


def test_the_tracking_uri_comes_from_the_flag_then_the_environment_then_the_space_then_the_default(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert choose_tracking_uri(None) == "sqlite:///mlflow.db"
    assert choose_tracking_uri(None, "http://space:5000") == "http://space:5000"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://env:5000")
    assert choose_tracking_uri(None, "http://space:5000") == "http://env:5000"
    assert choose_tracking_uri("http://flag:5000", "http://space:5000") == "http://flag:5000"


def missing_store(folder: Path, name: str) -> str:
    """A SQLite URI in a folder that does not exist: every command refuses it before it writes anything."""
    return f"sqlite:///{folder / name / 'mlflow.db'}"


def test_sweeper_run_reads_mlflow_tracking_uri_before_the_spaces_tracking_uri(tmp_path, monkeypatch, capsys):
    space = tmp_path / "space.yaml"
    space.write_text(QUICKSTART.read_text() + f"tracking: {{uri: {missing_store(tmp_path, 'space')}}}\n")
    run = ["run", str(space), "--storage", str(tmp_path / "sweeps")]
    cases = [
        ({}, "space"),
        ({"MLFLOW_TRACKING_URI": missing_store(tmp_path, "env")}, "env"),
        ({"MLFLOW_TRACKING_URI": missing_store(tmp_path, "env")}, "flag"),
    ]
    for env, level in cases:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        flag = ["--tracking-uri", missing_store(tmp_path, "flag")] if level == "flag" else []
        assert sweeper_cli.main(run + flag) == 2
        err = capsys.readouterr().err
        assert f"tracking store {missing_store(tmp_path, level)}: folder" in err, (level, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["space.yaml"]  # nothing written at any level


def test_sweeper_summarize_reads_the_flag_the_environment_the_recorded_uri_then_the_default(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sweeps" / "nope").mkdir(parents=True)

    def store_named(*flag: str) -> str:
        """The store summarize looked in (an absent database it does not create)."""
        assert sweeper_cli.main(["summarize", "nope", "--storage", str(tmp_path / "sweeps"), *flag]) == 2
        return capsys.readouterr().err.split("no tracking store ")[1].split(" (pass")[0]

    assert store_named() == str(tmp_path / "mlflow.db")  # the default, in the working folder
    recorded = {
        "name": "nope",
        "tracking_uri": f"sqlite:///{tmp_path}/ran.db",
        "parent_run_id": "0" * 32,
        "base": {},
        "cpu": 1,
        "gpu": 0,
        "metric": "bleu_dev",
        "mode": "max",
        "trials": 1,
    }  # as run_sweep writes it
    (tmp_path / "sweeps" / "nope" / "sweeper.json").write_text(json.dumps(recorded))
    assert store_named() == str(tmp_path / "ran.db")  # what the sweep recorded
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/env.db")
    assert store_named() == str(tmp_path / "env.db")
    assert store_named("--tracking-uri", f"sqlite:///{tmp_path}/flag.db") == str(tmp_path / "flag.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sweeps"]


def test_nmt_translate_reads_mlflow_tracking_uri(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", missing_store(tmp_path, "env"))
    assert nmt_cli.main(["translate", "--model", "models:/x/1"]) == 2
    assert f"(tracking store {missing_store(tmp_path, 'env')})" in capsys.readouterr().err
    assert nmt_cli.main(["translate", "--model", "models:/x/1", "--tracking-uri", missing_store(tmp_path, "flag")]) == 2
    assert f"(tracking store {missing_store(tmp_path, 'flag')})" in capsys.readouterr().err


def test_resume_refuses_a_store_that_does_not_hold_the_sweeps_parent_run(tmp_path):
    ran = f"sqlite:///{tmp_path / 'ran.db'}"
    client = MlflowClient(ran)
    parent = client.create_run(client.create_experiment("s")).info.run_id
    check_holds_run(ran, parent, ran)  # the same store (here at the same address) holds it
    other = f"sqlite:///{tmp_path / 'other.db'}"
    MlflowClient(other).search_experiments()  # a real, empty store
    for uri in (other, missing_store(tmp_path, "none")):
        with pytest.raises(TrackingError, match=f"{uri} does not hold this sweep's parent run {parent}; it ran with"):
            check_holds_run(uri, parent, ran)
    assert not (tmp_path / "none").exists()


def test_submit_reads_ray_address(tmp_path, monkeypatch, capsys):
    submit = ["submit", str(QUICKSTART), "--tracking-uri", f"sqlite:////{tmp_path}/mlflow.db"]
    assert sweeper_cli.main(submit) == 2
    assert "--address: name the Ray cluster's dashboard" in capsys.readouterr().err
    monkeypatch.setenv("RAY_ADDRESS", "http://127.0.0.1:9")
    assert sweeper_cli.main(submit) == 2
    assert "--address: http://127.0.0.1:9: no Ray dashboard answers there" in capsys.readouterr().err


@pytest.mark.parametrize("cli, prog", [(sweeper_cli, "sweeper"), (nmt_cli, "nmt")])
def test_version_prints_the_package_version(cli, prog, capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"{prog} {metadata.version('nmt-sweeper')}\n"


def actions(parser: argparse.ArgumentParser):
    """(prog, action) for every argument of the parser and of its subcommands, the subcommands themselves included."""
    for action in parser._actions:
        yield parser.prog, action
        if isinstance(action, argparse._SubParsersAction):
            yield from ((parser.prog, choice) for choice in action._choices_actions)
            for sub in action.choices.values():
                yield from actions(sub)


@pytest.mark.parametrize("cli", [sweeper_cli, nmt_cli])
def test_every_argument_of_every_subcommand_has_help(cli):
    found = list(actions(cli.build_parser()))
    assert len(found) > 20
    assert [f"{prog}: {action.dest}" for prog, action in found if not action.help] == []


def test_run_help_shows_an_example(capsys):
    with pytest.raises(SystemExit):
        sweeper_cli.main(["run", "--help"])
    out = capsys.readouterr().out
    assert "example:\n  sweeper run search_spaces/quickstart.yaml" in out
    assert "$MLFLOW_TRACKING_URI" in out and "$RAY_ADDRESS" in out
