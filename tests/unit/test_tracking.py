"""The tracking callback survives a tracking server that is gone: trials go on, writes wait in storage, in order."""

import http.server
import json
import os
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from mlflow.entities import LoggedModelStatus
from mlflow.tracking import MlflowClient

from sweeper.space.spec import describe_trial
from sweeper.storage.store import open_storage
from sweeper.summary.records import settings_of
from sweeper.tracking import runs as tracking
from sweeper.tracking.backlog import BACKLOG_FILE
from sweeper.tracking.metrics import SEED_TAG
from sweeper.tracking.mlflow_view import recorded_port
from sweeper.tracking.names import TrialNames, shared_words
from sweeper.tracking.runs import (
    MlflowTrackingCallback,
    SweepTracker,
    resolve_uri,
    runs_link,
)
from sweeper.tracking.store import TrackingError, check_reachable

BASE = {"data": {"corpus": "synthetic"}, "model": {"emb_size": 8, "hidden_size": 8}}
TRIAL = SimpleNamespace(
    trial_id="abc_00000",
    config={"trial": {"params": {"attention.temperature": "sact"}, "seed": 3, "variant": "general+sact4"}},
    checkpoint=None,
    last_result={},
)


def test_an_unreachable_server_never_raises_into_tune(monkeypatch, caplog, tmp_path):
    monkeypatch.setattr(tracking, "RETRY_ATTEMPTS", 2)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    callback = MlflowTrackingCallback("http://127.0.0.1:9", "gone", "parent", BASE, str(tmp_path))
    callback.on_trial_start(0, [], TRIAL)
    callback.on_trial_result(0, [], TRIAL, {"epoch": 1, "bleu_dev": 1.0})
    callback.on_trial_complete(0, [], TRIAL)
    callback.drain()
    assert callback.outcomes == {"abc_00000": "complete"}
    assert "does not answer" in caplog.text
    kept = [json.loads(line) for line in (tmp_path / BACKLOG_FILE).read_text().splitlines()]
    assert [(w["kind"], w.get("step")) for w in kept] == [("open", None), ("metrics", 1), ("end", None)]


def test_writes_kept_during_an_outage_reach_the_server_in_order_exactly_once(tmp_path, monkeypatch):
    """The server goes away after epoch 1 and comes back before the trial ends; a second driver (resume) replays
    what the first one left in storage. The store sees every epoch once, and the end of the run last."""
    monkeypatch.setattr(tracking, "RETRY_ATTEMPTS", 1)
    monkeypatch.setattr(tracking, "RECONNECT_S", 0.0)
    uri = resolve_uri(f"sqlite:///{tmp_path / 'm.db'}")
    parent = SweepTracker(uri, "outage").start_sweep("name: outage\n", {"trials": 1})
    down = {"now": False}
    sent: list[str] = []

    class Flaky(MlflowTrackingCallback):
        def _send(self, write):
            if down["now"]:
                raise ConnectionError("server down")
            super()._send(write)
            sent.append(f"{write['kind']}{write.get('step', '')}")

    first = Flaky(uri, "outage", parent, BASE, str(tmp_path / "sweep"))
    first.on_trial_result(0, [], TRIAL, {"epoch": 1, "bleu_dev": 1.0})
    first.drain()
    down["now"] = True
    first.on_trial_result(0, [], TRIAL, {"epoch": 2, "bleu_dev": 2.0})
    first.on_trial_result(0, [], TRIAL, {"epoch": 3, "bleu_dev": 3.0})
    first.drain()
    assert len(first.backlog) == 2 and not first.flush(0)
    # this driver dies with two epochs unsent; the next one finds them in storage
    down["now"] = False
    second = Flaky(uri, "outage", parent, BASE, str(tmp_path / "sweep"))
    second.on_trial_result(0, [], TRIAL, {"epoch": 3, "bleu_dev": 3.0})  # re-reported from the checkpoint
    second.on_trial_result(0, [], TRIAL, {"epoch": 4, "bleu_dev": 4.0})
    second.on_trial_complete(0, [], TRIAL)
    assert second.flush(0) and not (tmp_path / "sweep" / BACKLOG_FILE).exists()
    assert sent == ["open", "metrics1", "metrics2", "metrics3", "open", "metrics3", "metrics4", "end"]
    client = MlflowClient(uri)
    [run] = client.search_runs(
        [client.get_experiment_by_name("outage").experiment_id], filter_string="tags.`sweeper.role` = 'trial'"
    )
    assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "bleu/dev")) == [1, 2, 3, 4]
    assert run.info.status == "KILLED"  # ended without a final (test) result: stopped early


def test_a_retried_trial_reuses_its_run_and_skips_logged_epochs(tmp_path):
    uri = resolve_uri(f"sqlite:///{tmp_path / 'm.db'}")
    tracker = SweepTracker(uri, "retry")
    parent = tracker.start_sweep("name: retry\n", {"trials": 1})
    first = MlflowTrackingCallback(uri, "retry", parent, BASE)
    for epoch in (1, 2):
        first.on_trial_result(0, [], TRIAL, {"epoch": epoch, "bleu_dev": float(epoch)})
    first.drain()
    # the driver dies; a new one (resume) replays epoch 2 from the checkpoint, then goes on
    second = MlflowTrackingCallback(uri, "retry", parent, BASE)
    for epoch in (2, 3):
        second.on_trial_result(0, [], TRIAL, {"epoch": epoch, "bleu_dev": float(epoch)})
    second.drain()
    client = MlflowClient(uri)
    runs = client.search_runs([tracker.experiment_id], filter_string="tags.`sweeper.role` = 'trial'")
    assert len(runs) == 1
    run = runs[0]
    assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "bleu/dev")) == [1, 2, 3]
    assert run.data.params["train.seed"] == "3" and run.data.params["attention.temperature"] == "sact"
    assert run.data.tags["sweeper.variant"] == "general+sact4"


AXES = ("attention.temperature", "attention.lambda", "attention.tau")


def trial_of(trial_id: str, temperature: str, seed: int) -> SimpleNamespace:
    config = {"trial": {"params": {"attention.temperature": temperature}, "seed": seed}}
    return SimpleNamespace(trial_id=trial_id, config=config, checkpoint=None, last_result={})


def test_trial_runs_are_named_coloured_and_grouped_for_mlflows_ui(tmp_path):
    """Issue 59: a run named by its variant and seed, one colour per variant in the order the sweep met them, every
    swept axis a param (`n/a` where unused); per-epoch metrics by group; the end's at step 0 under result/, with
    the best epoch's dev BLEU and median tau; the parent's under sweep/. Provenance in MLflow's own columns (Source,
    User, Dataset); the translations as an MLflow table. Issue 71: the seed a tag (a group's row averages params),
    and for the charts only the variant's name and each axis that mixes `n/a` with numbers as text (view/)."""
    from sweeper.running.artifacts import write_side_by_side
    from sweeper.running.runner import record_best
    from sweeper.tracking.metrics import PALETTE
    from sweeper.tracking.provenance import corpus_datasets

    uri = resolve_uri(f"sqlite:///{tmp_path / 'm.db'}")
    tracker = SweepTracker(uri, "ui")
    parent = tracker.start_sweep("name: ui\n", {"trials": 3})
    trials = [trial_of("t_0", "sact", 1), trial_of("t_1", "none", 1), trial_of("t_2", "sact", 2)]
    shared = shared_words(describe_trial(trial.config, BASE)[0] for trial in trials)  # as the runner's plan gives
    callback = MlflowTrackingCallback(
        uri, "ui", parent, BASE, new_sweep=True, axes=AXES, shared=shared, categorical=("attention.lambda",)
    )
    for trial in trials:
        callback.on_trial_start(0, [], trial)
    sact = trials[0]
    (tmp_path / "checkpoint" / "artifacts" / "translations").mkdir(parents=True)
    write_side_by_side(["a b"], ["x y"], ["x z"], tmp_path / "checkpoint" / "artifacts" / "translations", "test")
    sact.checkpoint = SimpleNamespace(path=str(tmp_path / "checkpoint"))
    dataset = corpus_datasets("toy", {"train": [("a", "x")], "dev": [("a b", "x y")], "test": [("a b", "x y")]})
    first = {"epoch": 1, "bleu_dev": 1.0, "train_loss": 5.0, "tau_p50": 1.5, "dataset": dataset}
    callback.on_trial_result(0, [], sact, first)
    callback.on_trial_result(0, [], sact, {"epoch": 2, "bleu_dev": 0.5, "train_loss": 4.0, "tau_p50": 2.5})
    final = {"epoch": 2, "final": 1, "bleu_dev": 1.0, "tau_p50": 1.5, "bleu_test_avg": 2.0, "best_epoch": 1}
    callback.on_trial_result(0, [], sact, final)
    callback.on_trial_complete(0, [], sact)
    callback.drain()
    runs = {
        run.info.run_name: run
        for run in tracker.client.search_runs([tracker.experiment_id], "tags.`sweeper.role` = 'trial'")
    }
    # the summary's words, without the score every trial shares; the label stays the key machines join on
    assert sorted(runs) == ["SACT λ4 · seed 1", "SACT λ4 · seed 2", "no temperature · seed 1"]
    assert sorted(map(TrialNames(BASE, shared), trials)) == sorted(runs)  # what the console calls them
    assert runs["SACT λ4 · seed 2"].data.tags["sweeper.variant_name"] == "SACT λ4"
    assert runs["SACT λ4 · seed 2"].data.tags["sweeper.variant"] == "general+sact4"
    colours = {name: run.data.tags["mlflow.runColor"] for name, run in runs.items()}
    assert colours["SACT λ4 · seed 1"] == colours["SACT λ4 · seed 2"] == PALETTE[0]
    assert colours["no temperature · seed 1"] == PALETTE[1]
    none = runs["no temperature · seed 1"].data.params
    assert (none["attention.lambda"], none["attention.tau"], none["attention.temperature"]) == ("n/a", "n/a", "none")
    assert "seed" not in none and none["train.seed"] == "1" and none["variant"] == "general+none"
    assert (
        runs["no temperature · seed 1"].data.tags[SEED_TAG] == "1"
        and runs["SACT λ4 · seed 2"].data.tags[SEED_TAG] == "2"
    )
    assert (none["view/variant"], none["view/attention.lambda"]) == ("no temperature", "n/a")
    sact_params = runs["SACT λ4 · seed 2"].data.params
    assert sact_params["attention.lambda"] != "n/a" and sact_params["view/attention.lambda"] == "lambda=4"
    assert not [key for key in settings_of(sact_params) if key.startswith("view/")]  # the summary reads none
    run_id = runs["SACT λ4 · seed 1"].info.run_id
    run = tracker.client.get_run(run_id)
    assert run.data.tags["mlflow.source.name"] == "nmt-sweeper" and run.data.tags["mlflow.user"]
    assert tracker.client.get_run(parent).data.tags["mlflow.user"] == run.data.tags["mlflow.user"]
    assert [(name, context) for name, context, _ in inputs_of(run)] == [
        ("toy/dev", "dev"),
        ("toy/test", "test"),
        ("toy/train", "train"),
    ]
    assert json.loads(run.data.tags["mlflow.loggedArtifacts"]) == [{"path": "translations/test.json", "type": "table"}]
    local = tracker.client.download_artifacts(run_id, "translations/test.json", str(tmp_path))
    assert json.loads(Path(local).read_text()) == {  # the hypothesis second: what MLflow's evaluation view compares
        "columns": ["source", "hypothesis", "reference"],
        "data": [["a b", "x z", "x y"]],
    }
    history = tracker.client.get_metric_history(run_id, "bleu/dev")
    assert [(m.step, m.value) for m in history] == [(1, 1.0), (2, 0.5)]
    assert [m.value for m in tracker.client.get_metric_history(run_id, "loss/train")] == [5.0, 4.0]
    ended = {
        k: (m.step, m.value)
        for k in ("result/bleu_dev_best", "result/tau_p50_best", "result/bleu_test_avg", "result/best_epoch")
        for m in tracker.client.get_metric_history(run_id, k)
    }
    assert ended == {
        "result/bleu_dev_best": (0, 1.0),
        "result/tau_p50_best": (0, 1.5),
        "result/bleu_test_avg": (0, 2.0),
        "result/best_epoch": (0, 1.0),
    }
    assert set(tracker.client.get_run(run_id).data.metrics) == {
        "bleu/dev", "loss/train", "temperature/tau_p50", *ended
    }  # fmt: skip
    row = {"status": "TERMINATED", "bleu_dev": 1.0, "bleu_test_avg": 2.0, "n_params": 9, "mlflow_run_id": run_id,
           "variant": "general+sact4"}  # fmt: skip
    record_best(tracker, parent, [row], "bleu_dev", "max", callback.names)
    assert tracker.client.get_run(parent).data.metrics == {"sweep/bleu_dev_best": 1.0, "sweep/bleu_test_avg": 2.0}
    assert callback.get_state()["colours"] == {"general+sact4": PALETTE[0], "general+none": PALETTE[1]}


def inputs_of(run) -> list[tuple[str, str, str]]:
    """A run's dataset inputs as MLflow's UI lists them, in order: name, context (the word beside it), digest."""
    return [
        (used.dataset.name, {tag.key: tag.value for tag in used.tags}["mlflow.data.context"], used.dataset.digest)
        for used in run.inputs.dataset_inputs
    ]


def test_a_corpus_is_an_input_a_split_each_in_the_context_mlflow_shows_beside_it(tmp_path):
    """Issue 71: MLflow 3.17 labels a run's data by its inputs' contexts (Train, Dev, Test as logged). Each split is
    an input of its own, with a digest of its own text: dev in the context dev, every test set in the context test,
    train in train; dev first, as the evaluation view's column header shows the first alone. A dev and a test set of
    the same text stay two inputs; a replayed write adds none; a write kept in a backlog from before splits (the
    whole corpus) is logged as it was then."""
    from sweeper.tracking.provenance import corpus_datasets

    uri = resolve_uri(f"sqlite:///{tmp_path / 'm.db'}")
    tracker = SweepTracker(uri, "splits")
    parent = tracker.start_sweep("name: splits\n", {"trials": 1})
    same = [("a b", "x y")]
    splits = {"train": [("a", "x")], "dev": same, "tst2013": same, "tst2014": [("b", "y")]}
    datasets = corpus_datasets("iwslt", splits)
    first = MlflowTrackingCallback(uri, "splits", parent, BASE, str(tmp_path / "sweep"))
    first.on_trial_result(0, [], TRIAL, {"epoch": 1, "bleu_dev": 1.0, "dataset": datasets})
    first.drain()
    run_id = first._runs[TRIAL.trial_id]
    first.tracker.log_datasets(run_id, json.loads(datasets))  # replayed
    inputs = inputs_of(tracker.client.get_run(run_id))
    assert [(name, context) for name, context, _ in inputs] == [
        ("iwslt/dev", "dev"),
        ("iwslt/tst2013", "test"),
        ("iwslt/tst2014", "test"),
        ("iwslt/train", "train"),
    ]
    digests = [digest for _, _, digest in inputs]
    assert digests[0] == digests[1] and len(set(digests)) == 3 and all(len(d) == 16 for d in digests)
    old = {"name": "iwslt", "digest": "0" * 16, "source_type": "nmt_core.data.corpora", "source": "{}", "profile": "{}"}
    write = {"kind": "input", "trial": TRIAL.trial_id, "dataset": old}
    (tmp_path / "sweep").mkdir(exist_ok=True)  # the folder the first driver's backlog would have left it in
    (tmp_path / "sweep" / BACKLOG_FILE).write_text(json.dumps(write) + "\n")
    assert MlflowTrackingCallback(uri, "splits", parent, BASE, str(tmp_path / "sweep")).flush(0)  # a resume
    assert inputs_of(tracker.client.get_run(run_id))[4:] == [("iwslt", "train", "0" * 16)]


def test_planned_colours_colour_the_runs_and_a_variant_not_planned_takes_the_next_of_the_palette(tmp_path):
    """The runner plans the colour MLflow gives each variant's group (mlflow_charts.group_colours)."""
    from sweeper.tracking.metrics import PALETTE

    uri = resolve_uri(f"sqlite:///{tmp_path / 'm.db'}")
    tracker = SweepTracker(uri, "planned")
    parent = tracker.start_sweep("name: planned\n", {"trials": 2})
    planned = {"general+sact4": "#445461"}
    callback = MlflowTrackingCallback(uri, "planned", parent, BASE, new_sweep=True, colours=planned, shared={})
    for trial in (trial_of("t_0", "sact", 1), trial_of("t_1", "none", 1)):
        callback.on_trial_start(0, [], trial)
    callback.drain()
    runs = tracker.client.search_runs([tracker.experiment_id], "tags.`sweeper.role` = 'trial'")
    colours = {run.data.tags["sweeper.variant"]: run.data.tags["mlflow.runColor"] for run in runs}
    assert colours == {"general+sact4": "#445461", "general+none": PALETTE[1]}


def test_a_sweep_begun_before_names_goes_on_naming_its_runs_by_label(tmp_path):
    """Its callback, unpickled by `sweeper resume`, has no planned words: its new runs are named as its others,
    `<label> · seed <n>`, with no name tag, so the summary keeps the labels MLflow shows for all of them."""
    uri = resolve_uri(f"sqlite:///{tmp_path / 'm.db'}")
    tracker = SweepTracker(uri, "old")
    parent = tracker.start_sweep("name: old\n", {"trials": 1})
    callback = MlflowTrackingCallback(uri, "old", parent, BASE, new_sweep=True)
    del callback.shared  # as a callback pickled before names: the class's None
    callback.on_trial_start(0, [], trial_of("t_0", "sact", 1))
    callback.drain()
    [run] = tracker.client.search_runs([tracker.experiment_id], "tags.`sweeper.role` = 'trial'")
    assert run.info.run_name == "general+sact4 · seed 1" and "sweeper.variant_name" not in run.data.tags


@pytest.mark.parametrize("begun", ["with names", "before names"])
def test_the_console_mlflow_results_and_the_summary_name_a_trial_by_one_rule(tmp_path, capsys, begun):
    """Issue 75 item 4: from one trial config, the console's line, its MLflow run (its name and VARIANT_NAME tag),
    results.parquet's `run_name` and the summary's row say one name, all from the tracking callback's rule (one
    `TrialNames`), and so does the callback `sweeper resume` unpickles. A sweep begun before names (its pickled
    callback has no `shared`) is named by label in all of them."""
    import pickle

    import pandas as pd

    from sweeper.running.progress import SweepProgress
    from sweeper.running.runner import result_rows
    from sweeper.summary.records import load_records
    from sweeper.tracking.names import names_of, run_name

    uri = resolve_uri(f"sqlite:///{tmp_path / 'm.db'}")
    tracker = SweepTracker(uri, "one-rule")
    parent = tracker.start_sweep("name: one-rule\n", {"trials": 2})
    trials = [trial_of("t_0", "sact", 1), trial_of("t_1", "none", 2)]
    shared = shared_words(describe_trial(trial.config, BASE)[0] for trial in trials)
    callback = MlflowTrackingCallback(uri, "one-rule", parent, BASE, new_sweep=True, shared=shared)
    if begun == "before names":
        del callback.shared  # as a callback pickled before names: the class's None
    callback = pickle.loads(pickle.dumps(callback))  # as `sweeper resume` finds it in Tune's state
    progress = SweepProgress("one-rule", planned=2, name_of=callback.naming)
    for trial in trials:
        trial.last_result = {"epoch": 1, "final": 1, "bleu_dev": 1.0, "bleu_test_avg": 2.0, "bleu_test_x": 2.0}
        callback.on_trial_start(0, [], trial)
        progress.on_trial_start(0, [], trial)
        callback.on_trial_result(0, [], trial, trial.last_result)
        callback.on_trial_complete(0, [], trial)
        progress.on_trial_complete(0, [], trial)
    callback.drain()
    expected = {"t_0": "SACT λ4 · seed 1", "t_1": "no temperature · seed 2"}
    if begun == "before names":
        expected = {"t_0": "general+sact4 · seed 1", "t_1": "general+none · seed 2"}
    console = capsys.readouterr().out
    assert all(f"trial {name} finished in " in console for name in expected.values()), console
    runs = tracker.client.search_runs([tracker.experiment_id], "tags.`sweeper.role` = 'trial'")
    assert {run.data.tags["sweeper.trial_id"]: run.info.run_name for run in runs} == expected
    grid = [
        SimpleNamespace(config=trial.config, metrics={"trial_id": trial.trial_id}, path=f"/s/{trial.trial_id}",
                        error=None, metrics_dataframe=pd.DataFrame({"epoch": [1], "bleu_dev": [1.0]}), checkpoint=None)
        for trial in trials
    ]  # fmt: skip
    rows = result_rows(grid, callback.outcomes, None, parent, BASE, names=callback.naming)
    assert {row["trial_id"]: row["run_name"] for row in rows} == expected
    records, _, _ = load_records(tracker.client, tracker.experiment_id, parent)
    rows_named = names_of(records)  # the summary's row names, from what the runs were given
    summary = {r.trial_id: run_name(rows_named[r.variant], r.variant, r.config.train.seed) for r in records}
    assert summary == expected


def test_a_submitted_sweeps_runs_name_their_submitter_and_the_drivers_commit(tmp_path, monkeypatch):
    """MLflow's User column: the submitter of a sweep the cluster's account tracks, on the parent and every trial;
    Source: the driver's code, with its git commit in a checkout."""
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "cluster")
    uri = resolve_uri(f"sqlite:///{tmp_path / 'm.db'}")
    tracker = SweepTracker(uri, "submitted", user="alice")
    parent = tracker.start_sweep("name: submitted\n", {"trials": 1})
    callback = MlflowTrackingCallback(uri, "submitted", parent, BASE, new_sweep=True, user="alice")
    callback.on_trial_start(0, [], TRIAL)
    callback.drain()
    for run_id in (parent, callback._runs[TRIAL.trial_id]):
        tags = tracker.client.get_run(run_id).data.tags
        assert tags["mlflow.user"] == "alice" and tags["mlflow.source.name"] == "nmt-sweeper"
        commit = tags.get("mlflow.source.git.commit")
        assert (commit is not None) == tracker.code.startswith("git ") and (commit is None or commit in tracker.code)
    assert SweepTracker(uri, "submitted").source["mlflow.user"] == "cluster"  # not submitted: whoever runs it


def test_a_sweep_begun_before_grouped_names_keeps_its_flat_names_when_resumed(tmp_path):
    """A callback pickled with a sweep started before issue 59 has no `names`: its runs go on with Tune's keys, so a
    run never mixes two names for one metric; a resumed driver still finds the epochs already logged."""
    import pickle

    uri = resolve_uri(f"sqlite:///{tmp_path / 'm.db'}")
    tracker = SweepTracker(uri, "old")
    parent = tracker.start_sweep("name: old\n", {"trials": 1})
    before = MlflowTrackingCallback(uri, "old", parent, BASE)
    for key in ("names", "axes", "_colours", "categorical"):  # what an older version's callback did not have
        del before.__dict__[key]
    before.on_trial_result(0, [], TRIAL, {"epoch": 1, "bleu_dev": 1.0})
    before.drain()
    resumed = pickle.loads(pickle.dumps(before))
    resumed.on_trial_result(0, [], TRIAL, {"epoch": 1, "bleu_dev": 1.0})  # re-reported: not logged twice
    resumed.on_trial_result(0, [], TRIAL, {"epoch": 2, "bleu_dev": 2.0})
    resumed.on_trial_result(0, [], TRIAL, {"epoch": 2, "final": 1, "bleu_dev": 2.0, "bleu_test_avg": 3.0})
    resumed.drain()
    run = tracker.client.get_run(resumed._runs[TRIAL.trial_id])
    assert run.data.metrics == {"bleu_dev": 2.0, "bleu_test_avg": 3.0}
    assert run.data.params["seed"] == "3" and not [k for k in run.data.params if k.startswith("view/")]  # as before
    assert [m.step for m in tracker.client.get_metric_history(run.info.run_id, "bleu_dev")] == [1, 2]
    assert [m.step for m in tracker.client.get_metric_history(run.info.run_id, "bleu_test_avg")] == [2]


def test_a_trials_model_is_one_logged_model_of_its_run_that_the_registry_serves(tmp_path):
    """On a SQLite store, the driver alone: the trial's saved pyfunc becomes a READY LoggedModel of the trial's run
    with its final metrics; a replayed write (a resumed driver) makes no second one; `models:/<sweep>@best` and
    `models:/<model id>` and `runs:/<id>/<its name>` load it; `nmt translate`'s `runs:/<id>/model` finds it under
    its variant's name."""
    import mlflow.pyfunc

    from nmt_core.mlflow_model import downloaded_model, save_model
    from nmt_core.training.train import train
    from sweeper.tracking.metrics import MODEL
    from tests.conftest import FEW_PAIRS, tiny_config

    states = []
    result = train(
        tiny_config(data=FEW_PAIRS), lambda report, state, is_best: states.append(state), log=lambda line: None
    )
    save_model(states[-1], tmp_path / "checkpoint" / MODEL, result.data.sources["dev"][:1])
    uri = resolve_uri(f"sqlite:///{tmp_path / 'm.db'}")
    tracker = SweepTracker(uri, "models")
    parent = tracker.start_sweep("name: models\n", {"trials": 1})
    trial = SimpleNamespace(
        **{
            **vars(TRIAL),
            "checkpoint": SimpleNamespace(path=str(tmp_path / "checkpoint")),
            "last_result": {"final": 1, "epoch": 1},
        }
    )
    callback = MlflowTrackingCallback(uri, "models", parent, BASE)
    callback.on_trial_result(0, [], trial, {"epoch": 1, "bleu_dev": 1.0})
    callback.on_trial_result(0, [], trial, {"epoch": 1, "final": 1, "bleu_test_avg": 12.5})
    callback.on_trial_complete(0, [], trial)
    callback._write_model(trial)  # replayed
    callback.drain()
    run_id = callback._runs[trial.trial_id]
    [model] = tracker.client.search_logged_models([tracker.experiment_id])
    # named after its variant (a safe slug: MLflow refuses '.' in `tau0.8`), found by its run
    assert (model.name, model.source_run_id, model.status) == ("general-SACT-lambda4", run_id, LoggedModelStatus.READY)
    assert tracker.trial_model(run_id).model_id == model.model_id
    assert [(m.key, m.value, m.step) for m in model.metrics] == [("result/bleu_test_avg", 12.5, 0)]
    assert model.params["variant"] == "general+sact4" and model.tags["sweeper.trial_id"] == trial.trial_id
    assert str(tracker.register_best(run_id, "best")) == "1"
    assert "MLFLOW_TRACKING_URI" not in os.environ  # registering exported it once; a later sweep would go there
    linked = tracker.client.get_logged_model(model.model_id).tags["mlflow.modelVersions"]  # the Models tab's column
    assert json.loads(linked) == [{"name": "models", "version": 1}]
    with downloaded_model("models:/models@best", uri) as path:
        assert path.name == "best.pt" and path.is_file()
    assert not path.exists()  # the copy is gone once the block ends
    with downloaded_model(f"runs:/{run_id}/model", uri) as path:  # the URI docs and older sweeps give
        assert path.name == "best.pt" and path.is_file()
    mlflow.set_tracking_uri(uri)
    sentence = result.data.sources["dev"][0]
    for model_uri in ("models:/models@best", f"runs:/{run_id}/{model.name}", f"models:/{model.model_id}"):
        pyfunc = mlflow.pyfunc.load_model(model_uri)
        assert pyfunc.metadata.model_id == model.model_id
        beam = {"beam_size": 2}
        assert pyfunc.predict([sentence], params=beam) == pyfunc.predict(pyfunc.input_example[:1], params=beam)


def test_an_exploit_of_a_donor_that_trained_every_epoch_is_recorded(tmp_path):
    """PBT can hand a trial the checkpoint of a donor at its last epoch: the trial's next report is its final one,
    and it carries the exploit."""
    uri = resolve_uri(f"sqlite:///{tmp_path / 'm.db'}")
    tracker = SweepTracker(uri, "pbt")
    parent = tracker.start_sweep("name: pbt\n", {"trials": 2})
    callback = MlflowTrackingCallback(uri, "pbt", parent, BASE)
    events = [
        {"epoch": 2, "copied_from": "abc_00001", "settings": {"train.lr": 0.0064}},
        {"epoch": 4, "copied_from": "abc_00001", "settings": {"train.lr": 0.0051}},
    ]
    callback.on_trial_result(0, [], TRIAL, {"epoch": 1, "bleu_dev": 1.0})
    callback.on_trial_result(0, [], TRIAL, {"epoch": 3, "bleu_dev": 3.0, "pbt_event": json.dumps(events[0])})
    callback.on_trial_result(
        0, [], TRIAL, {"epoch": 4, "final": 1, "bleu_test_avg": 4.0, "pbt_event": json.dumps(events[1])}
    )
    callback.drain()
    client = MlflowClient(uri)
    [run] = client.search_runs([tracker.experiment_id], filter_string="tags.`sweeper.role` = 'trial'")
    assert run.data.tags["sweeper.pbt_exploits"] == "2" and run.data.metrics["result/bleu_test_avg"] == 4.0
    local = client.download_artifacts(run.info.run_id, "pbt_events.json", str(tmp_path))
    assert json.loads(Path(local).read_text()) == events


def test_a_slow_server_never_holds_up_tunes_scheduling_loop(tmp_path):
    """Writes go out on the sender thread: the callback returns while the server still works, in order."""
    uri = resolve_uri(f"sqlite:///{tmp_path / 'm.db'}")
    parent = SweepTracker(uri, "slow").start_sweep("name: slow\n", {"trials": 1})
    release, sent = threading.Event(), []

    class Slow(MlflowTrackingCallback):
        def _send(self, write):
            release.wait(30)
            super()._send(write)
            sent.append(write["kind"])

    callback = Slow(uri, "slow", parent, BASE)
    callback.on_trial_start(0, [], TRIAL)
    callback.on_trial_result(0, [], TRIAL, {"epoch": 1, "bleu_dev": 1.0})
    callback.on_trial_complete(0, [], TRIAL)
    assert sent == [] and callback.outcomes == {"abc_00000": "complete"}  # returned before the server answered
    release.set()
    assert callback.flush(0) and sent == ["open", "metrics", "end"]


class CountingClient(MlflowClient):
    """A real client that also counts the requests the driver makes."""

    def __init__(self, uri: str):
        super().__init__(uri)
        self.calls: list[str] = []

    def __getattribute__(self, name):
        attr = super().__getattribute__(name)
        if callable(attr) and not name.startswith("_"):
            super().__getattribute__("calls").append(name)
        return attr


def test_a_new_sweeps_trial_costs_one_request_per_report_and_no_lookups(tmp_path, monkeypatch):
    """In a sweep this driver started, a trial's run is created without a search or a history read first, and
    each report (metrics and the provenance tags that came with it) is one log_batch."""
    uri = resolve_uri(f"sqlite:///{tmp_path / 'm.db'}")
    parent = SweepTracker(uri, "new").start_sweep("name: new\n", {"trials": 1})
    callback = MlflowTrackingCallback(uri, "new", parent, BASE, new_sweep=True)
    client = CountingClient(uri)
    callback._tracker = SweepTracker(uri, "new", client)
    client.calls.clear()
    callback.on_trial_start(0, [], TRIAL)
    callback.on_trial_result(0, [], TRIAL, {"epoch": 1, "bleu_dev": 1.0, "provenance.device": "cpu"})
    callback.on_trial_result(0, [], TRIAL, {"epoch": 1, "final": 1, "bleu_test_avg": 2.0})
    callback.on_trial_complete(0, [], TRIAL)
    callback.drain()
    assert client.calls == ["create_run", "log_batch", "log_batch", "log_batch", "set_terminated"]
    run = client.get_run(callback._runs[TRIAL.trial_id])
    assert run.data.params["train.seed"] == "3" and run.data.tags["sweeper.device"] == "cpu"
    assert (
        run.data.metrics == {"bleu/dev": 1.0, "result/bleu_test_avg": 2.0} and run.data.tags["sweeper.restores"] == "0"
    )


def test_a_retried_open_whose_run_reached_the_store_makes_no_second_run(tmp_path, monkeypatch):
    """The store created the run but its answer was lost: the retry looks for the run before creating one."""
    monkeypatch.setattr(tracking, "RETRY_ATTEMPTS", 2)
    monkeypatch.setattr(tracking.time, "sleep", lambda s: None)
    uri = resolve_uri(f"sqlite:///{tmp_path / 'm.db'}")
    parent = SweepTracker(uri, "lost").start_sweep("name: lost\n", {"trials": 1})

    class LostAnswer(MlflowClient):
        def create_run(self, *args, **kwargs):
            run = super().create_run(*args, **kwargs)
            if not getattr(self, "answered", False):
                self.answered = True
                raise ConnectionError("answer lost")
            return run

    callback = MlflowTrackingCallback(uri, "lost", parent, BASE, new_sweep=True)
    callback._tracker = SweepTracker(uri, "lost", LostAnswer(uri))
    callback.on_trial_result(0, [], TRIAL, {"epoch": 1, "bleu_dev": 1.0})
    callback.drain()
    client = MlflowClient(uri)
    [run] = client.search_runs([callback.tracker.experiment_id], filter_string="tags.`sweeper.role` = 'trial'")
    assert [m.step for m in client.get_metric_history(run.info.run_id, "bleu/dev")] == [1]
    assert run.data.params["train.seed"] == "3"  # the params the lost attempt never sent


@pytest.mark.parametrize(
    "uri, expected",
    [
        ("http://mlflow:5000", "http://mlflow:5000/#/experiments/7/runs?workflowType=machine_learning"),
        ("sqlite:////data/m.db", "mlflow ui --backend-store-uri sqlite:////data/m.db --port "),
    ],
)
def test_runs_link_opens_the_runs_table_sorted_by_the_objective(uri, expected):
    link = runs_link(uri, "7", "bleu_dev", "max")
    port = recorded_port(link)  # a database: the command serves the UI on a free port, which the link opens
    assert (
        port is None or f"then open http://127.0.0.1:{port}/#/experiments/7/runs?workflowType=machine_learning" in link
    )
    assert link.startswith(expected) and link.endswith("&orderByKey=metrics.%60bleu_dev%60&orderByAsc=false")
    assert runs_link(uri, "7", "dev_loss", "min").endswith("&orderByKey=metrics.%60dev_loss%60&orderByAsc=true")


class _BasicAuthOnly(http.server.BaseHTTPRequestHandler):
    """Answers like MLflow's basic-auth app: /health to anyone, 401 on the API without credentials."""

    def do_GET(self):
        if self.path == "/health":
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"OK")
            return
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="mlflow"')
        self.end_headers()
        self.wfile.write(b"You are not authenticated.")

    do_POST = do_GET

    def log_message(self, *args):
        pass


def test_refused_credentials_are_one_line_exit_2_before_anything_starts(tmp_path, monkeypatch):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _BasicAuthOnly)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    uri = f"http://127.0.0.1:{server.server_port}"
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    try:
        with pytest.raises(TrackingError) as err:
            check_reachable(uri)
        monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "ada")
        with pytest.raises(TrackingError) as as_ada:
            check_reachable(uri)
    finally:
        server.shutdown()
    assert str(err.value) == (
        f"--tracking-uri: tracking.uri: tracking server {uri} refused a request without "
        "credentials (HTTP 401); set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD"
    )
    assert "refused user 'ada' (HTTP 401)" in str(as_ada.value)


@pytest.mark.parametrize("storage", ["hdfs://nn/sweeps", "ftp://host/sweeps", "s3://bucket/sweeps?bogus=1"])
def test_storage_ray_cannot_use_is_refused_in_one_line_not_made_a_local_folder(tmp_path, monkeypatch, storage):
    from sweeper.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "space.yaml").write_text("name: s\ndata: {corpus: synthetic}\n")
    for command in (
        ["run", "space.yaml", "--storage", storage],
        ["summarize", "s", "--storage", storage],
        ["resume", "s", "--storage", storage],
    ):
        assert main(command) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["space.yaml"]
    assert open_storage("file:///tmp/sweeps", "x").root == "/tmp/sweeps"


def test_unusable_storage_message(capsys):
    from sweeper.cli import main

    assert main(["summarize", "s", "--storage", "hdfs://nn/sweeps"]) == 2
    assert capsys.readouterr().err == (
        "sweeper: error: sweeper summarize: --storage: hdfs://nn/sweeps: hdfs:// is "
        "not a storage Ray Tune can use; use a folder every node sees (a ReadWriteMany "
        "volume or NFS on a cluster), s3://bucket/prefix or gs://bucket/prefix\n"
    )


def test_results_take_the_run_ids_the_callback_tracked_and_search_only_for_the_others(tmp_path):
    """results.parquet's run ids: the tracking callback's own for the trials it opened (no search: one per trial was
    O(trials) each at a sweep's end), a search for a trial an earlier driver tracked (a resumed sweep)."""
    import pandas as pd

    from sweeper.running.runner import result_rows

    uri = resolve_uri(f"sqlite:///{tmp_path / 'm.db'}")
    parent = SweepTracker(uri, "rows").start_sweep("name: rows\n", {"trials": 2})
    earlier = MlflowTrackingCallback(uri, "rows", parent, BASE, new_sweep=True)  # the driver before a resume
    earlier.on_trial_start(0, [], TRIAL)
    earlier.drain()
    later_trial = SimpleNamespace(**{**vars(TRIAL), "trial_id": "abc_00001"})
    callback = MlflowTrackingCallback(uri, "rows", parent, BASE, new_sweep=True)
    callback.on_trial_start(0, [], later_trial)
    callback.drain()
    history = pd.DataFrame({"epoch": [1, 1], "bleu_dev": [1.0, 1.0], "final": [0, 1]})
    grid = [
        SimpleNamespace(
            config=TRIAL.config,
            metrics={"trial_id": t, "final": 1},
            path=f"/s/{t}_x",
            error=None,
            metrics_dataframe=history,
            checkpoint=None,  # Ray's Result has one (None without a checkpoint): results.parquet names its folder
        )
        for t in (TRIAL.trial_id, later_trial.trial_id)
    ]
    client = CountingClient(uri)
    rows = result_rows(grid, {}, SweepTracker(uri, "rows", client), parent, BASE, callback.run_ids())
    assert [r["mlflow_run_id"] for r in rows] == [earlier.run_ids()[TRIAL.trial_id], callback.run_ids()["abc_00001"]]
    assert client.calls.count("search_runs") == 1  # the earlier driver's trial only
    assert [r["run_name"] for r in rows] == ["general+sact4 · seed 3"] * 2  # no names given: by label, as MLflow's


def test_the_ranking_names_each_trial_as_its_mlflow_run(capsys):
    """The lines after a sweep: each trial by its run's name (`SACT λ4 · seed 3`), as the board and MLflow say it,
    in results.parquet too (`run_name`); not Ray's `<label>-<trial id>`."""
    import pandas as pd

    from sweeper.running.runner import print_best, result_rows

    trials = [trial_of("t_0", "sact", 3), trial_of("t_1", "none", 1)]
    names = TrialNames(BASE, shared_words(describe_trial(trial.config, BASE)[0] for trial in trials))
    history = pd.DataFrame({"epoch": [1, 1], "bleu_dev": [1.0, 1.0], "final": [0, 1]})
    grid = [
        SimpleNamespace(
            config=trial.config,
            metrics={"trial_id": trial.trial_id, "final": 1, "bleu_test_avg": 2.5, "n_params": 9},
            path=f"/s/{trial.trial_id}_x",
            error=None,
            metrics_dataframe=history.assign(bleu_dev=[bleu, bleu]),
            checkpoint=None,
        )
        for trial, bleu in zip(trials, (7.0, 9.0), strict=True)
    ]
    rows = result_rows(grid, {"t_0": "complete", "t_1": "complete"}, None, "parent", BASE, names=names)
    assert [r["run_name"] for r in rows] == ["SACT λ4 · seed 3", "no temperature · seed 1"]
    print_best(rows, "bleu_dev", "max")
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split() == ["trial", "status", "bleu_dev", "test", "avg", "params"]
    assert lines[1].startswith("no temperature · seed 1 TERMINATED ") and lines[2].startswith("SACT λ4 · seed 3  ")
    assert "t_0" not in "".join(lines) and "general+" not in "".join(lines)


def test_an_experiment_whose_creation_answer_was_lost_is_found_by_the_retry(tmp_path, monkeypatch):
    """A server slower than the client's timeout may create the experiment and lose the answer; creating it again
    is refused (RESOURCE_ALREADY_EXISTS), so each attempt asks by name first (a lab's afternoon lost two sweeps)."""
    monkeypatch.setattr(tracking.time, "sleep", lambda seconds: None)  # the retry's waits
    uri = resolve_uri(f"sqlite:///{tmp_path / 'm.db'}")

    class LostAnswer(MlflowClient):
        def create_experiment(self, name, *args, **kwargs):
            super().create_experiment(name, *args, **kwargs)
            raise TimeoutError("read timed out")

    tracker = SweepTracker(uri, "lost", LostAnswer(uri))
    assert tracker.experiment_id == MlflowClient(uri).get_experiment_by_name("lost").experiment_id
