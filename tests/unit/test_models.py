"""Models by policy (issue #43 item 3): `tracking.models`, a model made later from a trial's final checkpoint, and
the storage a sweep takes."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from mlflow.entities import LoggedModelStatus

from nmt_core.training import checkpoint
from sweeper.running.models import final_checkpoint, human, model_from_checkpoint, storage_usage, variant_bests
from sweeper.running.runner import TRIAL_DIR
from sweeper.space.schema import sweep_schema
from sweeper.space.spec import SpecError, load_spec
from sweeper.storage.store import open_storage
from sweeper.tracking.metrics import MODEL, MODEL_EXAMPLE
from sweeper.tracking.runs import MlflowTrackingCallback, SweepTracker, resolve_uri
from tests.conftest import FEW_PAIRS, tiny_config
from tests.unit.test_tracking import BASE, TRIAL


def write_space(folder: Path, **tracking) -> str:
    space = {"name": "m", "parameters": {"attention.temperature": {"grid": ["none"]}}, "tracking": tracking}
    (folder / "space.yaml").write_text(yaml.safe_dump(space))
    return str(folder / "space.yaml")


def test_tracking_models_is_best_all_or_none_and_best_by_default(tmp_path):
    assert load_spec(write_space(tmp_path)).models == "best"
    assert load_spec(write_space(tmp_path, models="all")).models == "all"
    with pytest.raises(SpecError, match=r"space.yaml: tracking.models: must be one of best, all, none \(got 'some'\)"):
        load_spec(write_space(tmp_path, models="some"))
    assert sweep_schema()["properties"]["tracking"]["properties"]["models"]["enum"] == ["best", "all", "none"]


def test_the_best_trial_of_each_variant_by_the_objective(tmp_path):
    rows = [
        {"trial_id": t, "variant": v, "status": s, "bleu_dev": b, "mlflow_run_id": "r", "checkpoint": c}
        for t, v, s, b, c in (
            ("a", "v1", "TERMINATED", 3.0, "c"),
            ("b", "v1", "TERMINATED", 5.0, "c"),
            ("c", "v1", "STOPPED", 9.0, "c"),  # stopped early by the scheduler: not tested, not a model
            ("d", "v2", "TERMINATED", 1.0, "c"),
            ("e", "v3", "ERROR", None, None),
        )
    ]
    assert [r["trial_id"] for r in variant_bests(rows, "bleu_dev", "max")] == ["b", "d"]
    assert [r["trial_id"] for r in variant_bests(rows, "bleu_dev", "min")] == ["a", "d"]


def test_a_trial_of_a_best_policy_sweep_saves_no_model_and_its_driver_logs_none(tmp_path):
    """Under `best` the driver sends no model write as a trial completes (the sweep's end logs the chosen ones)."""
    uri = resolve_uri(f"sqlite:///{tmp_path / 'm.db'}")
    parent = SweepTracker(uri, "policy").start_sweep("name: policy\n", {"trials": 1})
    folder = tmp_path / "checkpoint"
    (folder / MODEL).mkdir(parents=True)  # as if a model were there: it must not be looked at
    trial = SimpleNamespace(**{**vars(TRIAL), "checkpoint": SimpleNamespace(path=str(folder))})
    callback = MlflowTrackingCallback(uri, "policy", parent, BASE, new_sweep=True, models="best")
    sent = []
    callback._write = sent.append
    callback.on_trial_complete(0, [], trial)
    assert [w["kind"] for w in sent] == ["open", "artifacts", "end"]


def test_a_model_made_from_a_final_checkpoint_is_the_trials_logged_model(tmp_path):
    """`sweeper promote` and the end of a `best` sweep: the trial's final checkpoint (last.pt, the input example)
    becomes a READY LoggedModel of its run, named after its variant as its run is, with its params, variant, trial id
    and final metrics; again: the same."""
    import mlflow.pyfunc

    from nmt_core.training.train import train

    states = []
    result = train(
        tiny_config(data=FEW_PAIRS), lambda report, state, is_best: states.append(state), log=lambda line: None
    )
    folder = tmp_path / "sweep" / "abc_00000_general+none_seed1" / "checkpoint_000001"
    checkpoint.save(states[-1], folder / checkpoint.LAST)
    (folder / MODEL_EXAMPLE).write_text(json.dumps(result.data.sources["dev"][:2]))
    uri = resolve_uri(f"sqlite:///{tmp_path / 'm.db'}")
    tracker = SweepTracker(uri, "later")
    parent = tracker.start_sweep("name: later\n", {"trials": 1})
    run_id, _ = tracker.trial_run(parent, "abc_00000", "general+none", {"train.seed": 1}, name="no temperature")
    tracker.log_metrics(run_id, {"bleu_dev": 1.0}, step=1)
    tracker.log_metrics(run_id, {"bleu_test_avg": 7.5, "n_params": 99}, step=1)
    experiment = open_storage(str(tmp_path / "sweep"), "test")
    final = final_checkpoint(experiment, "abc_00000")
    assert final.root.endswith("abc_00000_general+none_seed1/checkpoint_000001")
    model_id, size = model_from_checkpoint(tracker, run_id, final)
    assert size > 1000 and model_from_checkpoint(tracker, run_id, final)[0] == model_id
    [model] = tracker.client.search_logged_models([tracker.experiment_id])
    assert (model.model_id, model.source_run_id, model.status) == (model_id, run_id, LoggedModelStatus.READY)
    assert model.params["variant"] == "general+none" and model.tags["sweeper.trial_id"] == "abc_00000"
    assert model.name == "no-temperature"
    assert {m.key: (m.value, m.step) for m in model.metrics} == {"bleu_test_avg": (7.5, 1), "n_params": (99, 1)}
    mlflow.set_tracking_uri(uri)
    pyfunc = mlflow.pyfunc.load_model(f"runs:/{run_id}/{model.name}")
    assert pyfunc.input_example == result.data.sources["dev"][:2]
    assert len(pyfunc.predict(pyfunc.input_example, params={"beam_size": 2})) == 2
    assert final_checkpoint(experiment, "abc_00001") is None


def test_the_storage_a_sweep_takes_in_all_and_per_trial(tmp_path):
    for trial, size in (("8f3a1_00000_general+none_seed1", 300), ("8f3a1_00001_general+none_seed2", 100)):
        (tmp_path / trial / "checkpoint_000001").mkdir(parents=True)
        (tmp_path / trial / "checkpoint_000001" / "last.pt").write_bytes(b"x" * size)
        (tmp_path / trial / "result.json").write_bytes(b"y" * 10)
    (tmp_path / "sweeper.json").write_bytes(b"z" * 5)
    usage = storage_usage(open_storage(str(tmp_path), "test"), TRIAL_DIR)
    assert usage == {"bytes": 425, "trials": 2, "trial_bytes_median": 210, "trial_bytes_max": 310}
    look = tmp_path / "look-2" / "9c4d2_00000_general+none_seed3"  # a designed sweep's look: its own experiment
    look.mkdir(parents=True)
    (look / "result.json").write_bytes(b"y" * 1000)
    (tmp_path / "look-2" / "experiment_state.json").write_bytes(b"s" * 20)
    usage = storage_usage(open_storage(str(tmp_path), "test"), TRIAL_DIR)
    assert usage == {"bytes": 1445, "trials": 3, "trial_bytes_median": 310, "trial_bytes_max": 1000}
    assert [human(n) for n in (5, 1234, 98_765_432, 1.5e12)] == ["5 B", "1.2 kB", "98.8 MB", "1.5 TB"]


def test_a_promoted_checkpoint_is_read_under_the_one_checkpoint_bound(tmp_path, monkeypatch):
    """Issue #61's named gaps, item 4: `promote` read last.pt under storage's 256 MB default, not the checkpoint
    reader's bound (a base Transformer's last.pt over 256 MB could not be promoted); now both are
    MAX_CHECKPOINT_BYTES, refused before it is read."""
    final = open_storage(str(tmp_path), "test")
    (tmp_path / checkpoint.LAST).write_bytes(b"\0" * 2000)
    monkeypatch.setattr(checkpoint, "MAX_CHECKPOINT_BYTES", 1000)
    with pytest.raises(SpecError, match="larger than 1,000 bytes"):
        model_from_checkpoint(None, "0" * 32, final)
