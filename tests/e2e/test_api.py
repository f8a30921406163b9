"""The Python API (sweeper.api): a tiny sweep from a dict through a local Ray in this process and a real MLflow
server, its results, model and console; errors as one SweeperError carrying the CLI's line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

import sweeper
from sweeper import api

SPACE = {
    "name": "api-tiny",
    "data": {"corpus": "synthetic", "train_subset": 400, "eval_subset": 30},
    "base": {
        "model": {"emb_size": 16, "hidden_size": 32, "dropout": 0.0},
        "train": {"lr": 5e-3, "batch_size": 32, "epochs": 1},
        "decode": {"beam_size": 2},
    },
    "parameters": {"attention.temperature": {"grid": ["none", "sact"]}},
    "search": {"max_concurrent": 1},
    # the best model stays (it translates below); no test here reads heatmaps or system metrics
    "tracking": {"plots": "none", "system_metrics": False},
}
TRIAL_LINE = re.compile(r"^\[\d\d:\d\d:\d\d\] trial \S+ ")


@pytest.fixture
def local_ray(monkeypatch, tmp_path):
    import ray

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.chdir(tmp_path)
    yield
    ray.shutdown()


@pytest.mark.slow
def test_a_sweep_from_a_dict_gives_its_results_and_a_model_that_translates(tmp_path, mlflow_server, local_ray, capfd):
    import ray

    sweep = api.run(
        SPACE, overrides={"base.train.seed": 3}, storage=str(tmp_path / "sweeps"), tracking_uri=mlflow_server.uri
    )
    out = capfd.readouterr().out
    assert sweep.exit_code == 0 and sweep.status == "finished", out[-3000:]
    assert not ray.is_initialized()  # the Ray this sweep started is gone, its last lines in the log (console.py)

    results = sweep.results  # results.parquet as a DataFrame
    assert len(results) == 2 and set(results["status"]) == {"TERMINATED"} and set(results["train.seed"]) == {3}
    assert sorted(results["variant"]) == ["general+none", "general+sact4"] and (results["bleu_dev"] >= 0).all()
    client = MlflowClient(mlflow_server.uri)
    parent = client.get_run(sweep.parent_run_id)
    space = Path(client.download_artifacts(sweep.parent_run_id, "space.yaml", str(tmp_path))).read_text()
    assert parent.data.tags["sweeper.role"] == "sweep" and space.startswith("# with overrides base.train.seed=3\n")
    assert sweep.summary_path == str(tmp_path / "sweeps" / "api-tiny" / "summary" / "summary.md")
    assert Path(sweep.summary_path).read_text().startswith("#")
    best = results.loc[results["bleu_dev"].idxmax()]
    version = client.get_model_version_by_alias("api-tiny", "best")
    assert sweep.best_model_uri == f"models:/api-tiny/{version.version}" and version.run_id == best["mlflow_run_id"]

    sentences = ["noun3 verb2 noun5", "adj1 noun4"]
    translations = api.translate(sentences, sweep.best_model_uri, beam_size=2, tracking_uri=sweep.tracking_uri)
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "nmt_core.cli",
            "translate",
            "--model",
            sweep.best_model_uri,
            "--tracking-uri",
            sweep.tracking_uri,
            "--beam",
            "2",
        ],
        input="\n".join(sentences) + "\n",
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert cli.returncode == 0, cli.stderr
    assert translations == cli.stdout.splitlines() and all(translations)  # the API translates as the CLI does

    # the console a person reads: our lines; Ray's in the sweep's log
    assert "Checkpoint successfully created" not in out and "\x1b[" not in out and "epoch=1 " not in out
    assert "Configuration for experiment" not in out and "TensorBoard" not in out
    trial_lines = [line for line in out.splitlines() if TRIAL_LINE.match(line)]
    assert len(trial_lines) == 2 and all(
        re.search(r" finished in \d+:\d\d: bleu_dev \d+\.\d\d$", line) for line in trial_lines
    ), trial_lines
    assert out.splitlines()[0].startswith("sweep api-tiny: 2 trials (grid, fifo)")
    log_file = tmp_path / "sweeps" / "api-tiny" / "sweep.log"
    assert f"Ray's output: {log_file} (--verbose shows it)" in out
    log = log_file.read_text()
    assert "Checkpoint successfully created" in log and "epoch=1 " in log and "Configuration for experiment" in log
    assert "\x1b[" not in log and all(line in log for line in trial_lines)  # the log holds our lines too


def test_a_bad_dict_space_raises_one_sweeper_error_with_the_line_the_cli_prints(tmp_path):
    bad = {**SPACE, "search": {"algorithm": "bayes"}}
    with pytest.raises(sweeper.SweeperError) as raised:
        api.run(bad, storage=str(tmp_path / "sweeps"))
    assert str(raised.value) == "<dict>: search.algorithm: must be one of grid, random, optuna (got 'bayes')"
    assert raised.value.exit_code == 2 and not (tmp_path / "sweeps").exists()

    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    done = subprocess.run(
        [sys.executable, "-m", "sweeper.cli", "run", str(path), "--storage", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert done.stderr == f"sweeper: error: {str(raised.value).replace('<dict>', str(path))}\n"  # the same line


def test_overrides_of_a_dict_are_checked_as_the_yaml_keys_they_name():
    with pytest.raises(api.SweeperError) as raised:
        api.load_space(SPACE, {"bogus.key": 1})
    assert str(raised.value) == (
        "overrides: bogus.key: unknown key; overrides takes dotted YAML keys such as base.train.epochs"
    )
    spec = api.load_space(SPACE, {"base.train.epochs": 3, "parameters.train.lr": {"grid": [1e-3, 5e-3]}})
    assert spec.base["train"]["epochs"] == 3 and [p.key for p in spec.parameters] == [
        "attention.temperature",
        "train.lr",
    ]
    assert spec.source == "<dict>" and spec.text.startswith("# with overrides base.train.epochs=3")
    with pytest.raises(api.SweeperError, match=r"^<dict>: base.train.epochs: "):
        api.load_space(SPACE, {"base.train.epochs": 0})


def test_summarize_and_translate_raise_sweeper_errors(tmp_path):
    store = f"sqlite:///{tmp_path / 'none.db'}"
    with pytest.raises(api.SweeperError, match=r"^sweeper summarize: NAME: no sweep named 'nope': ") as raised:
        api.summarize("nope", storage=str(tmp_path / "sweeps"), tracking_uri=store)
    assert raised.value.exit_code == 2 and not (tmp_path / "none.db").exists()
    for beam in (0, 10**9):  # bounded on both sides, as decode.beam_size is
        with pytest.raises(
            api.SweeperError, match=rf"^translate: beam_size: must be an integer in \[1, 100\] \(got {beam}\)$"
        ):
            api.translate(["a b"], "models:/x@best", beam_size=beam)
    with pytest.raises(api.SweeperError, match=r"^--model file.pt: expected models:/"):
        api.translate(["a b"], "file.pt", tracking_uri=store)
