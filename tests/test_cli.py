"""`nmt train | translate | evaluate` as a user runs them, in subprocesses."""
import json
import subprocess
import sys

import pyarrow.parquet as pq
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

    done = nmt("translate", "--checkpoint", str(out), "--beam", "2", stdin="noun3 verb2 noun5\n\nadj1 noun4 verb1 noun2\n")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3 and lines[1] == "" and lines[0].endswith("ga")

    (tmp_path / "src.txt").write_text("noun3 verb2 noun5\nadj1 noun4 verb1 noun2\n")
    (tmp_path / "ref.txt").write_text("la NOUN3 la NOUN5 VERB2 ga\nle NOUN4 ADJ1 le NOUN2 VERB1 ga\n")
    traces = tmp_path / "traces.parquet"
    done = nmt("evaluate", "--checkpoint", str(out), "--src", str(tmp_path / "src.txt"),
               "--ref", str(tmp_path / "ref.txt"), "--traces", str(traces))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("BLEU ") and "tok:13a" in done.stdout
    table = pq.read_table(traces)
    assert table.num_rows > 0 and all(0.25 < t < 4 for t in table.column("tau").to_pylist())


def test_bad_config_exits_2_with_one_line(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text("attention: {temperature: sact, lambda: 1}\n")
    done = nmt("train", str(config), "--out", str(tmp_path / "run"))
    assert done.returncode == 2
    assert done.stderr.strip() == f"nmt: error: {config}: attention.lambda: must be > 1 (tau_t lies in (1/lambda, lambda)) (got 1.0)"
    assert not (tmp_path / "run").exists()


def test_missing_checkpoint_exits_2(tmp_path):
    done = nmt("translate", "--checkpoint", str(tmp_path), stdin="x\n")
    assert done.returncode == 2 and "no checkpoint" in done.stderr


def test_a_checkpoint_of_an_earlier_format_is_refused_in_one_line(tmp_path):
    import torch

    old = tmp_path / "best.pt"
    torch.save({"model": {}, "config": {}, "vocab": {"src": [], "tgt": []}, "epoch": 1}, old)  # format 1: no key
    for command in (["translate", "--checkpoint", str(old)],
                    ["evaluate", "--checkpoint", str(old), "--src", str(old), "--ref", str(old)]):
        done = nmt(*command, stdin="hello\n")
        assert done.returncode == 2
        assert done.stderr.startswith(f"nmt: error: {old}: checkpoint format 1 was written by an earlier version")
        assert done.stderr.count("\n") == 1 and done.stdout == ""
