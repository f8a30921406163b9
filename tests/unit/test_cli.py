"""`nmt train | translate | evaluate` as a user runs them, in subprocesses."""

import json
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

CONFIG = {
    "data": {"corpus": "synthetic", "train_subset": 1200, "eval_subset": 60},
    "model": {"emb_size": 32, "hidden_size": 64, "dropout": 0.1},
    "attention": {"temperature": "sact", "lambda": 4},
    "train": {"lr": 5e-3, "batch_size": 32, "epochs": 2},
    "decode": {"beam_size": 3},
}


def nmt(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "nmt_core.cli", *args], input=stdin, capture_output=True, text=True)


def test_train_translate_evaluate(tmp_path):
    config = tmp_path / "trial.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    out = tmp_path / "run"
    done = nmt("train", str(config), "--out", str(out), "--set", "train.epochs=1")
    assert done.returncode == 0, done.stderr
    assert "epoch=1" in done.stderr
    # a second call with more epochs resumes after epoch 1 instead of starting over
    done = nmt("train", str(config), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "resuming" in done.stderr and "epoch=2" in done.stderr and "epoch=1 " not in done.stderr
    final = json.loads(done.stdout.strip().splitlines()[-1])
    assert final["bleu_test_test"] > 20  # copying the source scores 0 here: other words
    assert [json.loads(line)["epoch"] for line in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    assert (out / "translations" / "test.txt").exists()

    done = nmt(
        "translate", "--checkpoint", str(out), "--beam", "2", stdin="noun3 verb2 noun5\n\nadj1 noun4 verb1 noun2\n"
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3 and lines[1] == "" and lines[0].endswith("ga")

    (tmp_path / "src.txt").write_text("noun3 verb2 noun5\nadj1 noun4 verb1 noun2\n")
    (tmp_path / "ref.txt").write_text("la NOUN3 la NOUN5 VERB2 ga\nle NOUN4 ADJ1 le NOUN2 VERB1 ga\n")
    traces = tmp_path / "traces.parquet"
    done = nmt(
        "evaluate",
        "--checkpoint",
        str(out),
        "--src",
        str(tmp_path / "src.txt"),
        "--ref",
        str(tmp_path / "ref.txt"),
        "--traces",
        str(traces),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("BLEU ") and "tok:13a" in done.stdout
    table = pq.read_table(traces)
    assert table.num_rows > 0 and all(0.25 < t < 4 for t in table.column("tau").to_pylist())


def test_bad_config_exits_2_with_one_line(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text("attention: {temperature: sact, lambda: 1}\n")
    done = nmt("train", str(config), "--out", str(tmp_path / "run"))
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        == f"nmt: error: {config}: attention.lambda: must be > 1 (tau_t lies in (1/lambda, lambda)) (got 1.0)"
    )
    assert not (tmp_path / "run").exists()


def test_missing_checkpoint_exits_2(tmp_path):
    done = nmt("translate", "--checkpoint", str(tmp_path), stdin="x\n")
    assert done.returncode == 2 and "no checkpoint" in done.stderr


def test_a_checkpoint_of_an_earlier_format_is_refused_in_one_line(tmp_path):
    import torch

    old = tmp_path / "best.pt"
    torch.save({"model": {}, "config": {}, "vocab": {"src": [], "tgt": []}, "epoch": 1}, old)  # format 1: no key
    for command in (
        ["translate", "--checkpoint", str(old)],
        ["evaluate", "--checkpoint", str(old), "--src", str(old), "--ref", str(old)],
    ):
        done = nmt(*command, stdin="hello\n")
        assert done.returncode == 2
        assert done.stderr.startswith(f"nmt: error: {old}: checkpoint format 1 was written by an earlier version")
        assert done.stderr.count("\n") == 1 and done.stdout == ""


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, Path]:
    """The config and --out folder of `nmt train` of CONFIG (its 2 epochs), trained once for the module's tests (an
    `nmt train` is seconds of a process start): a test that changes the folder copies it. One run serves them all:
    a resume may change the epochs (nmt_core/cli.py RESUMABLE_CHANGES), so a 1-epoch run would refuse nothing more."""
    folder = tmp_path_factory.mktemp("trained")
    config = folder / "trial.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    done = nmt("train", str(config), "--out", str(folder / "run"))
    assert done.returncode == 0, done.stderr
    return config, folder / "run"


def test_a_changed_config_is_refused_on_resume_and_restart_starts_over(tmp_path, trained):
    config, trained_out = trained
    out = Path(shutil.copytree(trained_out, tmp_path / "run"))
    final = (out / "final.json").read_text()
    for change, named in (
        (["--set", "train.lr=0.001"], "train.lr (0.005 -> 0.001)"),
        (["--set", "model.hidden_size=32"], "model.hidden_size (64 -> 32)"),
    ):
        done = nmt("train", str(config), "--out", str(out), "--set", "train.epochs=1", *change)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith(
            f"nmt: error: nmt train: --out: {out} holds a run trained with other settings: {named}"
        ), done.stderr
        assert "--restart" in done.stderr and done.stderr.count("\n") == 1
        assert (out / "final.json").read_text() == final  # nothing rewritten
    done = nmt(
        "train", str(config), "--out", str(out), "--set", "train.epochs=1", "--set", "train.lr=0.001", "--restart"
    )
    assert done.returncode == 0, done.stderr
    assert "--restart: removed" in done.stderr and "resuming" not in done.stderr
    assert [json.loads(line)["epoch"] for line in (out / "metrics.jsonl").read_text().splitlines()] == [1]


def test_a_corrupt_or_truncated_checkpoint_is_one_line_naming_the_file(tmp_path, trained):
    _, out = trained
    broken = tmp_path / "broken.pt"
    broken.write_bytes((out / "best.pt").read_bytes()[:2000])
    junk = tmp_path / "junk.pt"
    junk.write_text("not a checkpoint")
    for path in (broken, junk):
        for command in (
            ["translate", "--checkpoint", str(path)],
            ["evaluate", "--checkpoint", str(path), "--src", str(path), "--ref", str(path)],
        ):
            done = nmt(*command, stdin="hello\n")
            assert done.returncode == 2
            assert done.stderr.startswith(f"nmt: error: {path}: not a readable checkpoint"), done.stderr
            assert done.stderr.count("\n") == 1 and done.stdout == ""


def test_a_ray_trial_checkpoint_translates_with_its_best_dev_weights_and_says_so(tmp_path, trained):
    import torch

    _, out = trained
    ray_checkpoint = tmp_path / "checkpoint_000001"
    ray_checkpoint.mkdir()
    (ray_checkpoint / "last.pt").write_bytes((out / "last.pt").read_bytes())  # what a Tune trial keeps
    state = torch.load(out / "last.pt", weights_only=True)
    done = nmt("translate", "--checkpoint", str(ray_checkpoint), "--beam", "1", stdin="noun3 verb2 noun5\n")
    assert done.returncode == 0, done.stderr
    assert (
        f"{ray_checkpoint / 'last.pt'}: using the best-dev weights (epoch {state['best_epoch']}), not the last "
        f"epoch's ({state['epoch']})"
    ) in done.stderr
    best = nmt("translate", "--checkpoint", str(out / "best.pt"), "--beam", "1", stdin="noun3 verb2 noun5\n")
    assert done.stdout == best.stdout


def test_a_model_uri_that_does_not_exist_is_one_line(tmp_path, capsys):
    """In this process (`nmt_cli.main`, the function the `nmt` command calls): each refusal comes before a sentence
    is read, and a subprocess per URI would cost seconds of imports each."""
    from mlflow.tracking import MlflowClient

    from nmt_core import cli as nmt_cli

    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    MlflowClient(store).search_experiments()  # an empty store with a registry
    capsys.readouterr()  # MLflow's own line as it creates the store's tables
    for uri, why in (
        ("models:/nothing/1", "Registered Model with name=nothing not found"),
        ("runs:/0123456789abcdef/model", "Run with id=0123456789abcdef not found"),
        ("file:///tmp/model", "expected models:/<name>/<version>"),
    ):
        assert nmt_cli.main(["translate", "--model", uri, "--tracking-uri", store]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"nmt: error: --model {uri}: {why}") and err.count("\n") == 1, err
    missing = tmp_path / "elsewhere" / "mlflow.db"
    assert nmt_cli.main(["translate", "--model", "models:/x/1", "--tracking-uri", f"sqlite:///{missing}"]) == 2
    assert "no tracking store there" in capsys.readouterr().err and not missing.parent.exists()
    assert nmt_cli.main(["translate", "--model", "models:/x/1", "--tracking-uri", f"file://{tmp_path / 'mlruns'}"]) == 2
    err = capsys.readouterr().err
    assert "a file store has no model registry in MLflow 3" in err and err.count("\n") == 1, err
    assert not (tmp_path / "mlruns").exists()


def test_the_mlflow_model_loads_with_mlflow_pyfunc_and_translates_like_nmt_translate(tmp_path, trained):
    import mlflow.pyfunc
    import torch

    from nmt_core.mlflow_model import save_model

    _, out = trained
    save_model(torch.load(out / "last.pt", weights_only=True), tmp_path / "model", ["noun3 verb2 noun5"])
    model = mlflow.pyfunc.load_model(str(tmp_path / "model"))
    predicted = model.predict(["noun3 verb2 noun5", "adj1 noun4 verb1 noun2"])  # the config's beam, as below
    done = nmt("translate", "--checkpoint", str(out), stdin="noun3 verb2 noun5\nadj1 noun4 verb1 noun2\n")
    assert predicted == done.stdout.splitlines() and predicted[0].endswith("ga")
    # MLflow's own metadata: beam size as a predict-time parameter, the input example, this package pinned
    greedy = nmt("translate", "--checkpoint", str(out), "--beam", "1", stdin="adj1 noun4 verb1 noun2\n")
    assert model.predict(["adj1 noun4 verb1 noun2"], params={"beam_size": 1}) == greedy.stdout.splitlines()
    for beam in (0, 10**9):  # the parameter reaches the decoder, within decode.beam_size's bound (a pyfunc door)
        with pytest.raises(Exception, match=r"beam_size: must be an integer in \[1, 100\]"):
            model.predict(["adj1 noun4 verb1 noun2"], params={"beam_size": beam})
    assert [p.name for p in model.metadata.get_params_schema().params] == ["beam_size"]
    assert model.metadata.load_input_example(str(tmp_path / "model")) == ["noun3 verb2 noun5"]
    requirements = (tmp_path / "model" / "requirements.txt").read_text().splitlines()
    assert f"nmt-sweeper=={metadata.version('nmt-sweeper')}" in requirements
