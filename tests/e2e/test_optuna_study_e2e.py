"""An Optuna sweep's study end to end: `sweeper run` then `optuna.load_study`, and an interrupted sweep resumed."""

from __future__ import annotations

import json
import os
import re
import signal

import optuna
import pyarrow.parquet as pq
import pytest
from optuna.trial import TrialState

from sweeper.running.optuna_search import TRIAL_ID_ATTR
from tests.e2e.sweeps import LEAN_TRACKING, SPACE, sweeper, write_space
from tests.servers import wait_until

pytestmark = pytest.mark.slow

PARAMETERS = {
    "train.lr": {"loguniform": [1e-4, 1e-2]},
    "attention.temperature": {"choice": ["none", "sact"]},
    "attention.lambda": {"uniform": [2, 8], "if": {"attention.temperature": "sact"}},
}
POINT = {"train.lr": 2e-3, "attention.temperature": "sact", "attention.lambda": 4.0}


def optuna_space(tmp_path, name: str, epochs: int):
    return write_space(
        tmp_path,
        name=name,
        parameters=PARAMETERS,
        base={**SPACE["base"], "train": {**SPACE["base"]["train"], "epochs": epochs}},
        search={"algorithm": "optuna", "num_samples": 3, "max_concurrent": 1, "seed": 0, "points_to_evaluate": [POINT]},
        tracking=LEAN_TRACKING,
    )


def finished(url: str, name: str) -> dict[str, optuna.trial.FrozenTrial]:
    """The study's finished trials by Tune trial id."""
    trials = optuna.load_study(study_name=name, storage=url).get_trials(states=(TrialState.COMPLETE,))
    return {t.user_attrs[TRIAL_ID_ATTR]: t for t in trials}


def assert_study_matches_results(url: str, name: str, results: list[dict]) -> None:
    """One study of the sweep's name, one finished trial per finished Tune trial, with its objective."""
    assert optuna.get_all_study_names(url) == [name]
    study = optuna.load_study(study_name=name, storage=url)
    assert len(study.trials) == len(results) == 3  # none asked twice, none left behind
    trials = finished(url, name)
    assert set(trials) == {r["trial_id"] for r in results}
    for row in results:
        assert trials[row["trial_id"]].value == pytest.approx(row["bleu_dev"])
    first = min(study.trials, key=lambda t: t.number)
    assert first.params == POINT and first.state == TrialState.COMPLETE  # the starting point came first


def test_the_study_holds_every_finished_trial_with_its_objective(tmp_path, worker_ray):
    space = optuna_space(tmp_path, "e2e-study", epochs=1)
    storage = tmp_path / "sweeps"
    done = sweeper("run", str(space), "--storage", str(storage), cwd=tmp_path, ray=worker_ray)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    url = f"sqlite:///{storage / 'e2e-study' / 'optuna.db'}"
    assert (
        f"Optuna study 'e2e-study', sampler tpe (seed 0), 1 starting point first, in {url}; watch it with "
        f"`optuna-dashboard {url}`" in done.stdout
    )
    assert json.loads((storage / "e2e-study" / "sweeper.json").read_text())["study"] == {
        "name": "e2e-study",
        "storage": url,
    }
    results = pq.read_table(storage / "e2e-study" / "results.parquet").to_pylist()
    assert {r["status"] for r in results} == {"TERMINATED"}
    assert_study_matches_results(url, "e2e-study", results)


def test_a_resumed_sweep_continues_its_study(tmp_path, worker_ray):
    space = optuna_space(tmp_path, "e2e-study-resume", epochs=3)
    storage = tmp_path / "sweeps"
    url = f"sqlite:///{storage / 'e2e-study-resume' / 'optuna.db'}"
    driver = sweeper("run", str(space), "--storage", str(storage), cwd=tmp_path, background=True, ray=worker_ray)
    # sweeper.json is written once the study is made: reading earlier could race the driver creating its tables
    wait_until(
        lambda: (storage / "e2e-study-resume" / "sweeper.json").exists() and finished(url, "e2e-study-resume"),
        "a first finished trial in the study",
        driver,
    )
    os.killpg(driver.pid, signal.SIGINT)  # Ctrl+C on the driver
    output, _ = driver.communicate()
    assert driver.returncode == 130, output[-3000:]
    before = finished(url, "e2e-study-resume")
    assert 1 <= len(before) < 3, "interrupted after the first trial, before the last"

    done = sweeper("resume", "e2e-study-resume", "--storage", str(storage), cwd=tmp_path, ray=worker_ray)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"Optuna study 'e2e-study-resume' in {url} continues" in done.stdout
    results = pq.read_table(storage / "e2e-study-resume" / "results.parquet").to_pylist()
    assert len(results) == 3 and {r["status"] for r in results} == {"TERMINATED"}
    assert_study_matches_results(url, "e2e-study-resume", results)
    after = finished(url, "e2e-study-resume")
    for trial_id, trial in before.items():  # what finished before the interruption is kept as it was
        assert (after[trial_id].number, after[trial_id].value) == (trial.number, trial.value)


def test_on_object_storage_the_study_lives_beside_a_sqlite_tracking_store(tmp_path, worker_ray):
    from tests.servers import MotoS3

    s3 = MotoS3(tmp_path)
    try:
        space = optuna_space(tmp_path, "e2e-study-s3", epochs=1)
        done = sweeper("run", str(space), "--storage", s3.uri("sweeps"), cwd=tmp_path, ray=worker_ray)
    finally:
        s3.stop()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    url = f"sqlite:///{tmp_path / 'optuna.db'}"  # beside ./mlflow.db: SQLite cannot live in a bucket
    assert f"in {url}; watch it with `optuna-dashboard {url}`" in done.stdout
    rows = [line for line in done.stdout.splitlines() if re.search(r" · seed \d+ +TERMINATED ", line)]  # the ranking
    assert len(finished(url, "e2e-study-s3")) == len(rows) == 3
