"""`sweeper restore` before it writes (#69): a space that is not the data's sweep's, or whose design is not the one
the sweep froze, or storage that holds the sweep already, is one line and exit 2 with nothing written; the pieces
it rebuilds with read back as the data holds them (MLflow names, the looks). The whole path, restored and extended,
is tests/e2e/test_designed_study.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from sweeper import cli
from sweeper.running.restore import restored_looks
from sweeper.space.spec import load_spec
from sweeper.summary.data import read_data, write_data
from sweeper.tracking.metrics import METRICS, mlflow_name, report_key

ROOT = Path(__file__).resolve().parents[2]
SPACE = ROOT / "search_spaces" / "sact_study_tatoeba_cpu_designed.yaml"
DATA = ROOT / "docs" / "results" / "sact_study_tatoeba_cpu_designed" / "data"


@pytest.fixture(scope="module")
def snapshot():
    return read_data(DATA)


def test_every_metric_of_a_committed_trial_reads_back_under_the_name_it_is_logged_as(snapshot):
    keys = {key for record in snapshot.records for key in (*record.metrics, *record.curves)}
    keys |= {metric.name for metric in METRICS if not metric.prefix} | {f"{m.name}_best" for m in METRICS if m.best}
    assert len(keys) > 40
    assert {key: report_key(mlflow_name(key)) for key in keys} == {key: key for key in keys}
    assert mlflow_name("bleu_dev") != "bleu_dev"  # grouped, as a sweep logs it (bleu/dev), not flat


def test_the_looks_a_restored_sweep_records_are_those_its_seeds_reached(snapshot):
    looks = restored_looks(load_spec(SPACE), snapshot.records)  # the committed data grows by a look at a time
    rows = ["scaled_dot+none", "scaled_dot+sact4", "scaled_dot+tau0.89"]
    assert [(look["look"], look["seeds"], look["trials"], look["rows"], look["done"]) for look in looks[:2]] == [
        (2, [4, 5, 6], 9, rows, True),
        (3, [7, 8, 9], 9, rows, True),
    ]
    assert [look["seeds"] for look in looks] == [[3 * k - 2, 3 * k - 1, 3 * k] for k in range(2, len(looks) + 2)]
    assert all(look["trials"] == 3 * len(look["rows"]) for look in looks)


def changed_space(tmp_path: Path, change) -> Path:
    space = yaml.safe_load(SPACE.read_text())
    change(space)
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(space))
    return path


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda s: s.update(name="other"), "name: the data is of sweep 'sact-designed', the space names 'other'"),
        (lambda s: s.pop("design"), "design: only a designed sweep is restored"),
        (lambda s: s["design"].update(effect=0.4), "is not the one the sweep froze (cbd05c10dc902937)"),
    ],
)
def test_a_space_that_is_not_the_datas_sweeps_is_one_line_and_nothing_is_written(tmp_path, capsys, change, says):
    space = changed_space(tmp_path, change)
    storage, store = tmp_path / "sweeps", tmp_path / "mlflow.db"
    argv = ["restore", str(space), "--from-data", str(DATA), "--storage", str(storage)]
    code = cli.main([*argv, "--tracking-uri", f"sqlite:///{store}"])
    err = capsys.readouterr().err
    assert code == 2 and says in err and err.count("\n") == 1, err
    assert not storage.exists() and not store.exists()


def test_storage_that_holds_the_sweep_is_refused_before_the_tracking_store_is_made(tmp_path, capsys):
    (tmp_path / "sweeps" / "sact-designed").mkdir(parents=True)
    (tmp_path / "sweeps" / "sact-designed" / "sweeper.json").write_text("{}")
    store = tmp_path / "mlflow.db"
    argv = ["restore", str(SPACE), "--from-data", str(DATA), "--storage", str(tmp_path / "sweeps")]
    code = cli.main([*argv, "--tracking-uri", f"sqlite:///{store}"])
    err = capsys.readouterr().err
    assert code == 2 and "is already stored under" in err and err.count("\n") == 1, err
    assert not store.exists() and (tmp_path / "sweeps" / "sact-designed" / "sweeper.json").read_text() == "{}"


def test_data_that_is_not_there_is_one_line(tmp_path, capsys):
    code = cli.main(["restore", str(SPACE), "--from-data", str(tmp_path), "--storage", str(tmp_path / "sweeps")])
    err = capsys.readouterr().err
    assert code == 2 and "no summary data here" in err and not (tmp_path / "sweeps").exists(), err


def one_trial_data(folder: Path, snapshot, **changes) -> list[str]:
    """The data of the oldest committed trial alone, its record changed by `changes` (the snapshot's references and
    translations with `sets`); the arguments that restore it into `folder`."""
    first = snapshot.records[-1]  # the oldest trial: seed 1
    sets = changes.pop("sets", None)
    record = replace(first, **changes)
    data = replace(snapshot, records=[record])
    if sets:
        data = replace(data, references=sets, translations={first.run_id: sets})
    write_data(data, folder)
    store = f"sqlite:///{folder / 'mlflow.db'}"
    return ["restore", str(SPACE), "--from-data", str(folder / "data"), "--storage", str(folder / "sweeps")] + [
        "--tracking-uri",
        store,
    ]


def test_a_restored_run_keeps_its_provenance_but_never_the_datas_claim_to_another_role(tmp_path, snapshot):
    """Data is read, never trusted: a trial's tags that claim to be the sweep's parent run, of another parent or
    another trial are not restored as such; the code it ran with is its own, not the restoring machine's."""
    from mlflow.tracking import MlflowClient

    first = snapshot.records[-1]
    claims = {"sweeper.role": "sweep", "mlflow.parentRunId": "0" * 32, "sweeper.trial_id": "forged"}
    argv = one_trial_data(tmp_path, snapshot, tags={**first.tags, **claims})
    store = argv[-1]
    assert cli.main(argv) == 0
    [run] = MlflowClient(store).search_runs(["1"], filter_string="tags.`sweeper.role` = 'trial'")
    tags = run.data.tags
    assert tags["sweeper.trial_id"] == first.trial_id and tags["mlflow.parentRunId"] != "0" * 32
    assert tags["sweeper.restored_from"] == first.run_id
    assert tags["mlflow.source.git.commit"] == first.tags["mlflow.source.git.commit"]


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"sets": {"../../escape": ["x"]}}, "set: must match"),  # a file name in the trial's artifacts
        ({"params": "train.seed=100000"}, "is not a trial of this space's design"),
        ({"params": "train.epochs=8"}, "ran with other settings: train.epochs"),
        ({"params": "attention.temperature=learned"}, "is not a trial of this space's design"),
        ({"metrics": {"result/bleu_test_avg": 99.0}}, "read back as another name"),  # would shadow bleu_test_avg
    ],
)
def test_data_that_is_not_this_spaces_sweep_is_one_line_and_nothing_is_written(
    tmp_path, snapshot, capsys, changes, says
):
    first = snapshot.records[-1]
    if "params" in changes:
        key, value = changes.pop("params").split("=")
        changes["params"] = {**first.params, key: value}
        changes["variant"] = first.variant if key != "attention.temperature" else "scaled_dot+learned"
    if "metrics" in changes:
        changes["metrics"] = {**first.metrics, **changes["metrics"]}
    argv = one_trial_data(tmp_path, snapshot, **changes)
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code == 2 and says in err and err.count("\n") == 1, err
    assert not (tmp_path / "sweeps").exists() and not (tmp_path / "mlflow.db").exists()
    assert not (tmp_path.parent / "escape.txt").exists()


def test_each_summary_of_a_long_lived_driver_reads_within_its_own_download_deadline(tmp_path, snapshot, monkeypatch):
    """`sweeper extend --until-decided` reads its sweep after every look in one process: a later read must not find
    the artifact repository an earlier read made, whose deadline (the gate's DOWNLOAD_S) has passed."""
    import time

    import nmt_core.gates.artifact_locations as artifact_locations
    from sweeper.summary.report import summarize

    argv = one_trial_data(tmp_path, snapshot)
    assert cli.main(argv) == 0
    monkeypatch.setattr(artifact_locations, "DOWNLOAD_S", 3.0)
    summarize("sact-designed", argv[-1], tmp_path / "first", ["md"])
    time.sleep(3.5)  # the first read's repository is past its deadline now
    summary = summarize("sact-designed", argv[-1], tmp_path / "second", ["md"])
    assert len(summary.rows) == 1
