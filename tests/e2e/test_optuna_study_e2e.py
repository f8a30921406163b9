"""An Optuna sweep's study end to end: `sweeper run` then `optuna.load_study`, on an interrupted sweep resumed and on
object storage."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

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
NAME = "e2e-study-resume"


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


@dataclass
class ResumedStudy:
    """An Optuna sweep interrupted (Ctrl+C) after its first finished trial, then resumed to its end."""

    storage: Path
    url: str  # the study's storage
    stopped: subprocess.CompletedProcess  # the interrupted `sweeper run`
    before: dict[str, optuna.trial.FrozenTrial]  # the study's finished trials when it stopped
    resumed: subprocess.CompletedProcess  # `sweeper resume`


@pytest.fixture(scope="module")
def resumed_study(tmp_path_factory, mlflow_server, worker_ray) -> ResumedStudy:
    """One sweep for the two tests below: a resumed study must hold every finished trial as one that never stopped
    must (the object-storage test's study runs uninterrupted), and a sweep of its own would cost a minute."""
    folder = tmp_path_factory.mktemp("study")
    space = optuna_space(folder, NAME, epochs=3)
    where = ["--storage", str(folder / "sweeps")]
    url = f"sqlite:///{folder / 'sweeps' / NAME / 'optuna.db'}"
    driver = sweeper(
        "run", str(space), *where, "--tracking-uri", mlflow_server.uri, cwd=folder, background=True, ray=worker_ray
    )
    # sweeper.json is written once the study is made: reading earlier could race the driver creating its tables
    wait_until(
        lambda: (folder / "sweeps" / NAME / "sweeper.json").exists() and finished(url, NAME),
        "a first finished trial in the study",
        driver,
    )
    os.killpg(driver.pid, signal.SIGINT)  # Ctrl+C on the driver
    output, _ = driver.communicate()
    stopped = subprocess.CompletedProcess(driver.args, driver.returncode, output)
    before = finished(url, NAME)
    resumed = sweeper("resume", NAME, *where, cwd=folder, ray=worker_ray)
    return ResumedStudy(folder / "sweeps", url, stopped, before, resumed)


def test_the_study_holds_every_finished_trial_with_its_objective(resumed_study):
    storage, url = resumed_study.storage, resumed_study.url
    assert (
        f"Optuna study '{NAME}', sampler tpe (seed 0), 1 starting point first, in {url}; watch it with "
        f"`optuna-dashboard {url}`" in resumed_study.stopped.stdout
    )
    assert json.loads((storage / NAME / "sweeper.json").read_text())["study"] == {"name": NAME, "storage": url}
    assert resumed_study.resumed.returncode == 0, resumed_study.resumed.stdout[-3000:]
    results = pq.read_table(storage / NAME / "results.parquet").to_pylist()
    assert {r["status"] for r in results} == {"TERMINATED"}
    assert_study_matches_results(url, NAME, results)


def test_a_resumed_sweep_continues_its_study(resumed_study):
    storage, url, done = resumed_study.storage, resumed_study.url, resumed_study.resumed
    assert resumed_study.stopped.returncode == 130, resumed_study.stopped.stdout[-3000:]
    assert 1 <= len(resumed_study.before) < 3, "interrupted after the first trial, before the last"
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"Optuna study '{NAME}' in {url} continues" in done.stdout
    results = pq.read_table(storage / NAME / "results.parquet").to_pylist()
    assert len(results) == 3 and {r["status"] for r in results} == {"TERMINATED"}
    assert_study_matches_results(url, NAME, results)
    after = finished(url, NAME)
    for trial_id, trial in resumed_study.before.items():  # what finished before the interruption is kept as it was
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
