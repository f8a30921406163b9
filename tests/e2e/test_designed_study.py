"""A designed study end to end (#69): `sweeper run` freezes the design and runs its first look, `sweeper extend`
adds the next look's seeds to the undecided rows as trials of the same sweep (storage, MLflow experiment and parent
run), the summary reads the sweep at its looks, and an extension past the design's maximum runs nothing (that one in
this process: it only reads the verdicts and prints). The same sweep restored from its summary's data alone
(`sweeper restore`, into other storage and another tracking store) summarizes as the original and is extended as it."""

from __future__ import annotations

import json
import re

import pyarrow.parquet as pq
import pytest
from mlflow.tracking import MlflowClient

from sweeper import cli as sweeper_cli
from tests.e2e.sweeps import LEAN_TRACKING, SPACE, child_runs, sweeper, write_space

pytestmark = pytest.mark.slow
NAME = "designed"
# a fixed tau of 1.02 against no temperature: nearly the same model, so the first look (2 seeds a row) cannot decide
# and the second one reads 4; two looks at most
DESIGN = {
    "comparisons": [
        {
            "test": "superiority",
            "treatment": {"attention.temperature": "fixed"},
            "control": {"attention.temperature": "none"},
        }
    ],
    "effect": 1.0,
    "sd": 0.5,
    "seeds_per_look": 2,
    "max_seeds": 4,
    "futility": False,
}


def test_a_designed_sweep_is_extended_look_by_look_and_read_at_its_looks(
    tmp_path, mlflow_server, worker_ray, capsys, monkeypatch
):
    space = write_space(
        tmp_path,
        name=NAME,
        parameters={
            "attention.temperature": {"grid": ["none", "fixed"]},
            "attention.tau": {"grid": [1.02], "if": {"attention.temperature": "fixed"}},
        },
        base={**SPACE["base"], "train": {**SPACE["base"]["train"], "epochs": 1}},
        search={"max_concurrent": 2, "repeats": 2},
        tracking=LEAN_TRACKING,
        design=DESIGN,
    )
    where = ["--storage", str(tmp_path / "sweeps"), "--tracking-uri", mlflow_server.uri]
    first = sweeper("run", str(space), *where, cwd=tmp_path, ray=worker_ray)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "## Primary comparisons" in first.stdout or "superiority: " in first.stdout, first.stdout[-3000:]
    folder = tmp_path / "sweeps" / NAME
    state = json.loads((folder / "sweeper.json").read_text())
    assert state["looks"] == [] and len(state["design_digest"]) == 16

    second = sweeper("extend", NAME, *where, cwd=tmp_path, ray=worker_ray)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "look 2: 4 trials, seeds 3-4" in second.stdout, second.stdout[-3000:]
    state = json.loads((folder / "sweeper.json").read_text())
    assert [(look["look"], look["done"], look["seeds"]) for look in state["looks"]] == [(2, True, [3, 4])]
    assert state["trials"] == 8
    results = pq.read_table(folder / "results.parquet").to_pylist()
    seeds = {
        variant: sorted(r["seed"] for r in results if r["variant"] == variant)
        for variant in {r["variant"] for r in results}
    }
    assert sorted(seeds.values()) == [[1, 2, 3, 4], [1, 2, 3, 4]] and all(r["status"] == "TERMINATED" for r in results)
    assert all((folder / r["checkpoint"] / "last.pt").is_file() for r in results)  # look 2's below look-2/
    client = MlflowClient(mlflow_server.uri)
    parents, children = child_runs(client, NAME)
    assert len(parents) == 1 and len(children) == 8  # one parent run: every look's trials are its children
    summary = (folder / "summary" / "summary.md").read_text()
    assert "## Primary comparisons" in summary and "look 2" in summary, summary[:2000]

    monkeypatch.chdir(tmp_path)
    code = sweeper_cli.main(["extend", NAME, *where])
    third = capsys.readouterr()
    assert code == 0, third.out[-3000:] + third.err[-3000:]
    assert "nothing to extend" in third.out and len(pq.read_table(folder / "results.parquet")) == 8

    restored, store = tmp_path / "restored", f"sqlite:///{tmp_path / 'restored.db'}"
    code = sweeper_cli.main(
        ["restore", str(space), "--from-data", str(folder / "summary" / "data"), "--storage", str(restored)]
        + ["--tracking-uri", store]
    )
    fourth = capsys.readouterr()
    assert code == 0 and "8 trials of 2 look(s)" in fourth.out, fourth.out[-3000:] + fourth.err[-3000:]
    state = json.loads((restored / NAME / "sweeper.json").read_text())
    assert [(look["look"], look["seeds"]) for look in state["looks"]] == [(2, [3, 4])] and state["trials"] == 8
    rows = pq.read_table(restored / NAME / "results.parquet").to_pylist()
    assert sorted((r["trial_id"], r["seed"]) for r in rows) == sorted((r["trial_id"], r["seed"]) for r in results)

    code = sweeper_cli.main(["summarize", NAME, "--storage", str(restored), "--tracking-uri", store, "--out", "again"])
    assert code == 0, capsys.readouterr().err[-3000:]
    run_ids = re.compile("[0-9a-f]{32}")
    again = (tmp_path / "again" / "summary.md").read_text()
    assert run_ids.sub("RUN", again) == run_ids.sub("RUN", summary)  # every table, test and reading of the design

    code = sweeper_cli.main(["extend", NAME, "--storage", str(restored), "--tracking-uri", store])
    fifth = capsys.readouterr()
    assert code == 0 and "nothing to extend" in fifth.out, fifth.out[-3000:] + fifth.err[-3000:]
    code = sweeper_cli.main(["resume", NAME, "--storage", str(restored), "--tracking-uri", store])
    assert code == 2 and "restored from data and has no look to finish" in capsys.readouterr().err
