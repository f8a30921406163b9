"""Compute accounting (issue 73 item 3): device-seconds per trial, summed per sweep and per row, a budget that asks
the sweep to stop as `sweeper stop` does, and `sweeper status` showing spent and left. Expected numbers are
computed here from the definition (wall seconds x the device share), not read from the code under test."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import pyarrow.parquet as pq
import pytest

from sweeper import cli as sweeper_cli
from sweeper.api import plan_lines
from sweeper.running import sweeps
from sweeper.running.compute import ComputeWatch, Spending, TrialClock, device_share, trial_spent
from sweeper.running.progress import SweepProgress
from sweeper.running.runner import COMPUTE_KEY, compute_line, results_table
from sweeper.space.spec import SpecError, parse_spec
from sweeper.summary import TrialRecord
from tests.unit.test_sweeps import running, sweep

NOW = 1_800_000_000.0


def trial(status: str, **result) -> SimpleNamespace:
    return SimpleNamespace(trial_id=status.lower(), status=status, last_result=result)


def test_a_trial_costs_its_wall_time_times_the_gpus_else_the_cpu_cores_it_holds():
    assert device_share(cpu=4, gpu=0.25) == 0.25 and device_share(cpu=4, gpu=0) == 4
    clock = TrialClock(before=100.0)
    time.sleep(0.05)
    assert 100.05 <= clock.wall_s() < 101.0  # what a restored trial had spent, and this process's time
    assert trial_spent({"final": 1, "device_s": 42.0, "device_s_so_far": 7.0}, 2.0, False, NOW, 0.0) == 42.0
    at_epoch = {"device_s_so_far": 10.0, "epoch_ended_at": f"{NOW - 30:.3f}"}
    assert trial_spent(at_epoch, 2.0, True, NOW, 0.0) == pytest.approx(10.0 + 30 * 2.0)  # and its epoch in progress
    assert trial_spent(at_epoch, 2.0, False, NOW, 0.0) == 10.0  # paused or stopped: nothing since
    assert trial_spent(at_epoch, 2.0, True, NOW, NOW - 5) == pytest.approx(10.0 + 5 * 2.0)  # not before this driver
    assert trial_spent(None, 2.0, True, NOW, NOW - 5) == pytest.approx(10.0)  # started, no epoch yet


def test_a_spent_budget_asks_the_sweep_to_stop_as_sweeper_stop_does_once(tmp_path, capsys, monkeypatch):
    experiment = sweep(tmp_path, "lab", running())
    watch = ComputeWatch("lab", experiment.uri, cpu=2.0, gpu=0.0, budget=0.02, unit="device_hours")  # 72 s of 2 cores
    monkeypatch.setattr(time, "time", lambda: NOW)
    watch.started = NOW - 600
    watch.began["running"] = NOW - 25  # when the driver saw the running trial start (on_trial_start)
    done = trial("TERMINATED", final=1, device_s=30.0)
    on = trial("RUNNING", device_s_so_far=20.0, epoch_ended_at=f"{NOW - 10:.3f}")
    watch.on_step_begin(1, [done, on])
    assert watch.latest.device_s == pytest.approx(30 + 20 + 10 * 2) and not watch.latest.over
    assert sweeps.stop_request(experiment) is None
    on.last_result["epoch_ended_at"] = f"{NOW - 20:.3f}"  # 30 + 20 + 40 = 90 s > 72 s
    watch.last_check = 0.0
    watch.on_step_begin(2, [done, on])
    assert watch.latest.over and watch.latest.left_hours == 0.0
    assert sweeps.stop_request(experiment)["by"] == "resources.budget (0.02 device-hours)"
    said = capsys.readouterr().out  # the console's (stdout outside a sweep)
    assert "resources.budget spent: 0.025 of 0.02 device-hours" in said and "sweeper resume lab --budget H" in said
    (tmp_path / "lab" / sweeps.STOP_FILE).unlink()  # carried out (clear_stop keeps a request to this driver)
    watch.last_check = 0.0
    watch.on_step_begin(3, [done, on])
    assert sweeps.stop_request(experiment) is None  # asked once in this run
    # stopped: its epoch in progress is lost from its reports, not from what it spent; a report's total counts more
    assert watch.total({"terminated": 30.0, "running": 20.0}) == pytest.approx(30 + 20 + 20 * 2)
    assert watch.total({"terminated": 95.0}) == pytest.approx(95 + 60)
    assert watch.get_state()["spent"] == {"terminated": 30.0, "running": pytest.approx(60.0)}


def test_wall_hours_count_the_sweeps_earlier_runs(monkeypatch):
    watch = ComputeWatch("lab", "", cpu=1.0, gpu=1.0, budget=1.0, unit="wall_hours")
    monkeypatch.setattr(time, "time", lambda: NOW)
    watch.set_state({"wall_s": 3000.0})  # Tune's experiment state from the run before
    watch.started = NOW - 700
    assert watch.get_state() == {"wall_s": 3700.0, "spent": {}}
    spent = watch.spending([])
    assert spent.device == "GPU" and spent.over and spent.spent_hours == pytest.approx(3700 / 3600)
    pickled = watch.__getstate__()  # with the Tuner: this run's figures and its one request are not the next run's
    assert pickled["latest"] is None and pickled["asked"] is False and pickled["budget"] == 1.0


def test_status_json_carries_the_spending_and_sweeper_status_shows_spent_and_left(tmp_path, capsys):
    progress = SweepProgress("lab", planned=2, name_of=lambda t: t.trial_id)
    watch = ComputeWatch("lab", "", cpu=1.0, gpu=0.0, budget=2.0, unit="device_hours")
    watch.latest = Spending(1800.0, 3600.0, 2.0, "device_hours", "CPU core")
    progress.watch("max", 1.0, 0.0, watch)
    status = progress.status([trial("RUNNING")], ["line"])
    assert status["compute"] == {
        "device_hours": 0.5,
        "wall_hours": 1.0,
        "device": "CPU core",
        "budget": 2.0,
        "unit": "device_hours",
        "left": 1.5,
    }
    assert progress.__getstate__()["compute"] is None  # the accountant is linked again at resume
    sweep(tmp_path, "lab", status)
    assert sweeper_cli.main(["status", "lab", "--storage", str(tmp_path)]) == 0
    assert (
        "  compute: 0.5 CPU core-hours spent (1 h wall); budget 2 device-hours: 1.5 left\n" in capsys.readouterr().out
    )
    assert sweeper_cli.main(["status", "lab", "--storage", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["compute"]["left"] == 1.5
    for damage in ({"device_hours": -1}, {"device": "TPU"}, {"unit": "days"}, {"left": 1e12}, "x"):
        bad = {**status["compute"], **damage} if isinstance(damage, dict) else damage
        sweep(tmp_path, "bad", {**running(), "compute": bad})
        assert sweeps.read_status(sweeps.open_storage(str(tmp_path), "t").below("bad"))["compute"] is None


def test_results_parquet_holds_each_trials_cost_and_the_sweeps(tmp_path):
    spent = Spending(7200.0, 1800.0, None, "device_hours", "GPU")
    rows = [{"trial_id": "a", "device_s": 3600.0}, {"trial_id": "b", "device_s": 3600.0}]
    pq.write_table(results_table(rows, None, spent), tmp_path / "results.parquet")
    stored = pq.read_table(tmp_path / "results.parquet")
    assert stored.column("device_s").to_pylist() == [3600.0, 3600.0]
    assert json.loads(stored.schema.metadata[COMPUTE_KEY]) == {
        "device_hours": 2.0,
        "wall_hours": 0.5,
        "device": "GPU",
        "budget": None,
        "unit": "device_hours",
        "left": None,
    }
    assert compute_line(spent, 2) == "compute: 2 GPU-hours over 2 trials (1 a trial), 0.5 h wall"
    budgeted = Spending(7200.0, 1800.0, 3.0, "device_hours", "GPU")
    assert compute_line(budgeted, 2).endswith("; budget 3 device-hours, 1 left")


def test_the_budget_is_a_bounded_number_of_hours_in_one_line(tmp_path, capsys):
    from tests.unit.test_schema import QUICKSTART

    def space(**resources) -> str:
        return json.dumps({**QUICKSTART, "resources": {**QUICKSTART["resources"], **resources}})

    spec = parse_spec(space(budget=1.5, budget_unit="wall_hours"), "q.yaml")
    assert (spec.resources.budget, spec.resources.budget_unit) == (1.5, "wall_hours")
    assert plan_lines(spec)[2].endswith("; budget 1.5 wall-hours")  # what `sweeper validate` prints
    assert parse_spec(space(), "q.yaml").resources.budget is None
    for bad in (0, -1, "lots", 1e6):
        with pytest.raises(SpecError, match=r"resources\.budget: (must be in \(0, 8784\]|expected a number)"):
            parse_spec(space(budget=bad), "q.yaml")
    with pytest.raises(SpecError, match="resources.budget_unit: must be one of device_hours, wall_hours"):
        parse_spec(space(budget_unit="gpu_days"), "q.yaml")
    assert sweeper_cli.main(["resume", "lab", "--storage", str(tmp_path), "--budget", "-2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--budget: resources.budget: must be in (0, 8784]" in err


def test_the_summary_gives_each_rows_device_hours_and_bleu_per_device_hour():
    from sweeper.summary.costs import cost_table
    from sweeper.summary.statistics import Summary, VariantRow
    from sweeper.summary.tables import render_costs

    def record(run: str, bleu: float, device_s: float) -> TrialRecord:
        metrics = {"bleu_test_avg": bleu, "device_s": device_s}
        return TrialRecord(run, run, "v", {}, metrics, {}, {"sweeper.device_unit": "CPU core"})

    a = VariantRow("a", [record("a1", 20.0, 1800.0), record("a2", 22.0, 5400.0)], {}, (21.0, 1.41), None, 0, None)
    b = VariantRow("b", [record("b1", 30.0, 3600.0)], {}, (30.0, 0.0), None, 0, None)
    summary = Summary([a, b], ["test"])
    table = cost_table(summary)
    assert table.rows[id(a)].device_hours == pytest.approx(2.0) and table.rows[id(a)].per_trial == pytest.approx(1.0)
    assert table.rows[id(a)].bleu_per_hour(a) == pytest.approx(21.0 / 1.0)
    assert table.rows[id(b)].bleu_per_hour(b) == pytest.approx(30.0) and table.total_hours == pytest.approx(3.0)
    text = render_costs(summary, table)
    assert "| variant | seeds | CPU core-hours | a trial | BLEU avg | BLEU per CPU core-hour |" in text
    assert "| a | 2 | 2 | 1 | 21.00 ± 1.41 | 21 |" in text and "All 3 trials of the tables: 3 CPU core-hours" in text
    a.records[0].metrics.pop("device_s")  # a trial from before accounting: no section
    assert cost_table(summary) is None
