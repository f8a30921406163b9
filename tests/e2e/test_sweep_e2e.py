"""`sweeper run | resume` end to end: a local Ray, a real MLflow server over HTTP, real Parquet.

The tests of the tracked sweep read one sweep that the session fixture `tracked_sweep` (tests/e2e/conftest.py) runs
once; the others run the sweep their case needs.
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import mlflow
import pyarrow.parquet as pq
import pytest
import sacrebleu
from mlflow.entities import LoggedModelStatus
from mlflow.tracking import MlflowClient

from nmt_core.data.corpora import load_corpus
from nmt_core.data.tokens import word_tokens
from sweeper.tracking.names import model_name
from tests.e2e.sweeps import LEAN_TRACKING, SPACE, FinishedSweep, child_runs, epoch_steps, sweeper, write_space
from tests.servers import descendants, wait_until

pytestmark = pytest.mark.slow


def tracked_runs(sweep: FinishedSweep):
    """The tracked sweep's results.parquet rows, its MLflow client, parent run, trial runs and rows by run id."""
    results, client = sweep.results, sweep.client
    parents, children = child_runs(client, sweep.name)
    assert len(parents) == 1 and len(children) == 3
    return results, client, parents[0], children, {r["mlflow_run_id"]: r for r in results}


def test_a_tracked_sweep_writes_a_row_and_a_folder_per_trial(tracked_sweep):
    assert f"{tracked_sweep.tracking_uri}/#/experiments/" in tracked_sweep.stdout
    results = tracked_sweep.results
    assert len(results) == 3 and {r["status"] for r in results} == {"TERMINATED"}
    assert sorted(r["variant"] for r in results) == ["general+none", "general+sact4", "general+sact4+sentinel"]
    assert all(r["bleu_dev"] > 0 and r["bleu_test_test"] > 0 and r["n_params"] > 0 for r in results)
    for row in results:  # the dev diagnostics of the best epoch, per trial
        assert 0 <= row["attn_saturated"] <= 1 and row["attn_score_range"] > 0 and row["attn_entropy"] >= 0
        sact = row["attention.temperature"] == "sact"
        assert (row.get("tau_at_bound") is not None) == sact and (row.get("tau_p50") is not None) == sact
        if sact:
            assert 1 / 4 <= row["tau_p5"] <= row["tau_p50"] <= row["tau_p95"] <= 4 and 0 <= row["tau_at_bound"] <= 1
        assert (row.get("sentinel_collapsed") is not None) == row["attention.sentinel"]
        assert len(row["bleu_dev_by_epoch"]) == 2 and max(row["bleu_dev_by_epoch"]) == row["bleu_dev"]
    folders = sorted(p.name for p in (tracked_sweep.storage / tracked_sweep.name).glob("*_seed*"))
    assert folders == sorted(f"{r['trial_id']}_{r['variant']}_seed1" for r in results)  # browsable trial folders
    for folder in folders:  # Tune's JSON result log (the histories above), not its CSV or TensorBoard ones
        logged = {p.name for p in (tracked_sweep.storage / tracked_sweep.name / folder).iterdir()}
        assert "result.json" in logged and "progress.csv" not in logged
        assert not any(name.startswith("events.out.tfevents") for name in logged)
    # Tune's table: MLflow's run names
    assert all(f"{r['run_name']} " in tracked_sweep.stdout for r in results)


def test_each_trial_run_holds_its_settings_metrics_and_artifacts(tracked_sweep, tmp_path):
    results, client, parent, children, by_run = tracked_runs(tracked_sweep)
    assert {a.path for a in client.list_artifacts(parent.info.run_id)} >= {"space.yaml", "results.parquet"}
    assert "mlflow " in parent.data.tags["sweeper.versions"] and parent.data.tags["sweeper.code"]
    for child in children:
        assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert child.info.status == "FINISHED"
        row = by_run[child.info.run_id]
        assert child.data.tags["sweeper.variant"] == row["variant"]
        assert child.data.tags["sweeper.trial_id"] == row["trial_id"]
        tags = child.data.tags  # provenance, from the process that trained the trial
        assert tags["sweeper.code"].startswith(("git ", "nmt-sweeper ")) and "torch 2." in tags["sweeper.versions"]
        assert tags["sweeper.device"].startswith("cpu: ") and "(ray node " in tags["sweeper.node"]
        params = child.data.params  # the settings active for the variant, and the variant
        assert params["attention.temperature"] == row["attention.temperature"] and params["variant"] == row["variant"]
        assert (params.get("attention.lambda", "n/a") != "n/a") == (row["attention.temperature"] == "sact")
        assert params.get("attention.tau", "n/a") == "n/a" and "model.hidden_size" in params and len(params) > 35
        assert child.data.tags["mlflow.note.content"].startswith(f"Trial {row['trial_id']} of sweep `e2e-tracking`")
        assert epoch_steps(client, child.info.run_id) == [1, 2]
        assert child.data.metrics["result/bleu_test_test"] == pytest.approx(row["bleu_test_test"])
        local = Path(client.download_artifacts(child.info.run_id, "", str(tmp_path / child.info.run_id)))
        traces = pq.read_table(local / "traces" / "test.parquet")
        assert traces.num_rows > 0 and "weights" in traces.column_names
        forced = local / "traces" / "forced" / "test.parquet"  # teacher-forced on the references: the word classes
        assert forced.exists() == (row["attention.temperature"] == "sact")
        if forced.exists():
            forced = pq.read_table(forced)
            tests = load_corpus("synthetic", "src", "tgt", "").splits["test"][:40]
            assert forced.column("token").to_pylist() == [w for _, tgt in tests for w in word_tokens(tgt.lower())]
            assert forced.column("tau").null_count == 0 and "weights" not in forced.column_names
            assert (forced.column("gate").null_count == 0) == row["attention.sentinel"]
        plots = sorted(p.name for p in (local / "plots").glob("*.png"))
        assert "attention_dev0.png" in plots
        assert ("temperature_heatmap.png" in plots) == (row["attention.temperature"] == "sact")
        assert all((local / "plots" / p).stat().st_size > 1000 for p in plots)
        # BLEU recomputed by sacrebleu itself from the logged output and the corpus' raw reference text
        hypotheses = (local / "translations" / "test.txt").read_text(encoding="utf-8").splitlines()
        references = [tgt for _, tgt in load_corpus("synthetic", "src", "tgt", "").splits["test"][:40]]
        assert (local / "references" / "test.txt").read_text(encoding="utf-8").splitlines() == references
        lowercased = sacrebleu.BLEU(lowercase=True)  # data.lowercase: the signature must say so
        assert lowercased.corpus_score(hypotheses, [references]).score == pytest.approx(
            child.data.metrics["result/bleu_test_test"], abs=1e-9
        )
        assert child.data.tags["sweeper.bleu_signature"] == str(lowercased.get_signature())
        assert (
            "case:lc" in child.data.tags["sweeper.bleu_signature"]
            and "tok:13a" in child.data.tags["sweeper.bleu_signature"]
        )
        words = sacrebleu.BLEU(tokenize="none", lowercase=True)  # multi-bleu: lowercased word tokens
        assert words.corpus_score(
            [" ".join(word_tokens(h)) for h in hypotheses], [[" ".join(word_tokens(r)) for r in references]]
        ).score == pytest.approx(child.data.metrics["result/multibleu_test_test"], abs=1e-9)
        assert child.data.tags["sweeper.multibleu_signature"] == str(words.get_signature())
        assert [
            m.step
            for m in sorted(
                client.get_metric_history(child.info.run_id, "attention/attn_saturated"), key=lambda m: m.step
            )
        ] == [1, 2]
        side_by_side = (local / "translations" / "test.tsv").read_text(encoding="utf-8").splitlines()
        assert side_by_side[0] == "source\treference\thypothesis" and len(side_by_side) == 41
        assert [line.split("\t")[1:] for line in side_by_side[1:]] == [[r, h] for r, h in zip(references, hypotheses)]
        system = client.get_metric_history(child.info.run_id, "system/cpu_utilization_percentage")
        assert sorted(m.step for m in system) == [1, 2] and all(0 <= m.value <= 100 for m in system)
        assert child.data.metrics["system/system_memory_usage_megabytes"] > 0


def test_each_trial_logs_a_model_that_translates(tracked_sweep):
    _, client, _, children, by_run = tracked_runs(tracked_sweep)
    for child in children:
        assert_trial_model(client, tracked_sweep.tracking_uri, child, by_run[child.info.run_id])


def test_the_best_trial_is_registered_and_translates_from_the_registry(tracked_sweep, tmp_path, capsys, monkeypatch):
    results, client, parent, _, _ = tracked_runs(tracked_sweep)
    assert_registered_best_model_translates(
        client, tracked_sweep.tracking_uri, parent, results, tmp_path, capsys, monkeypatch
    )


def test_the_summary_and_the_descriptions_sum_the_sweep_up(tracked_sweep, tmp_path):
    _, client, parent, _, _ = tracked_runs(tracked_sweep)
    assert (
        client.get_experiment(parent.info.experiment_id).tags["mlflow.note.content"].startswith("Sweep `e2e-tracking`")
    )
    summary_folder = tracked_sweep.storage / tracked_sweep.name / "summary"
    summary = (summary_folder / "summary.md").read_text()
    assert "## Parameter importance" in summary and "too few trials to tell" in summary
    assert "## Temperature and sentinel gate by word class (test)\n\nNot computed: no closed-class source" in summary
    assert (summary_folder / "parallel_coordinates.png").stat().st_size > 5000
    note = client.get_run(parent.info.run_id).data.tags["mlflow.note.content"]  # the run page's description
    assert "| variant | seeds |" in note and "| SACT λ4 + sentinel |" in note  # the runs' names, not the key
    # its data beside it: the BLEU table and everything after it recomputed from data/ alone, no tracking store
    assert {"trials.parquet", "sentences.parquet", "references.parquet"} <= {
        p.name for p in summary_folder.glob("data/*")
    }
    again = tmp_path / "again"
    done = sweeper(
        "summarize", tracked_sweep.name, "--from-data", str(summary_folder), "--out", str(again), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    recomputed = (again / "summary.md").read_text().split("## BLEU")[1]
    assert summary.split("## BLEU")[1].startswith(recomputed)  # the stored one may end with the heatmaps' lines


def assert_trial_model(client, uri, child, row):
    """The trial's model is an MLflow 3 LoggedModel of its run: in the experiment's Models tab, with the trial's
    params, tags and test metrics, and a pyfunc that takes the beam size at predict time."""
    mlflow.set_tracking_uri(uri)
    [model] = mlflow.search_logged_models(
        experiment_ids=[child.info.experiment_id],
        output_format="list",
        filter_string=f"source_run_id = '{child.info.run_id}'",
    )
    # named after its variant, as its run is (`SACT λ4 · seed 1`: `SACT-lambda4`)
    assert model.name == model_name(child.data.tags["sweeper.variant_name"]) and model.status == LoggedModelStatus.READY
    assert model.tags["sweeper.trial_id"] == row["trial_id"] and model.params["variant"] == row["variant"]
    assert {m.key: m.value for m in model.metrics}["result/bleu_test_test"] == pytest.approx(row["bleu_test_test"])
    assert [o.model_id for o in client.get_run(child.info.run_id).outputs.model_outputs] == [model.model_id]
    pyfunc = mlflow.pyfunc.load_model(f"runs:/{child.info.run_id}/{model.name}")
    assert pyfunc.metadata.model_id == model.model_id and pyfunc.metadata.run_id == child.info.run_id
    translations = pyfunc.predict(["noun3 verb2 noun5", "adj1 noun4"], params={"beam_size": 2})
    assert len(translations) == 2 and all(isinstance(t, str) for t in translations)
    assert pyfunc.predict(pyfunc.input_example) and len(pyfunc.input_example) == 2  # the trial's first dev sentences


def assert_registered_best_model_translates(client, uri, parent, results, tmp_path, capsys, monkeypatch):
    """The best trial (by dev BLEU) is registered under the sweep's name and translates from the registry."""
    from nmt_core import cli as nmt_cli

    best = max(results, key=lambda r: r["bleu_dev"])
    version = client.get_model_version_by_alias("e2e-tracking", "best")
    assert version.run_id == best["mlflow_run_id"] and "bleu_dev" in version.description
    [model] = client.search_logged_models(
        [parent.info.experiment_id], filter_string=f"source_run_id = '{best['mlflow_run_id']}'"
    )
    assert version.source == f"models:/{model.model_id}"  # the registry's version is the trial's LoggedModel
    parent_metrics = client.get_run(parent.info.run_id).data.metrics  # the best trial's numbers on the parent
    assert parent_metrics["sweep/bleu_test_avg"] == pytest.approx(best["bleu_test_avg"])
    translate = ["translate", "--tracking-uri", uri, "--beam", "2", "--model"]
    sentences = "noun3 verb2 noun5\nadj1 noun4\n"
    done = subprocess.run(
        [sys.executable, "-m", "nmt_core.cli", *translate, "models:/e2e-tracking@best"],
        input=sentences,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 2 and done.stdout.split()[-1] == "ga"
    # the same model by its other names, in this process (nmt_cli.main, what `nmt` calls): a process for each would
    # cost seconds of imports, and the command's own process is the one above
    monkeypatch.chdir(tmp_path)
    for model_uri in (f"models:/e2e-tracking/{version.version}", f"runs:/{best['mlflow_run_id']}/model"):
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(sentences.encode())))
        assert nmt_cli.main([*translate, model_uri]) == 0
        assert capsys.readouterr().out == done.stdout  # one model, whichever way it is named


def test_interrupted_sweep_resumes_without_rerunning_finished_trials(tmp_path, mlflow_server, worker_ray):
    space = write_space(
        tmp_path,
        name="e2e-resume",
        **{
            "base": {**SPACE["base"], "train": {**SPACE["base"]["train"], "epochs": 3}},
            "tracking.system_metrics": False,
            "tracking.plots": "none",  # no heatmap is read here; the models are (one per trial across the resume)
        },
    )
    storage = tmp_path / "sweeps"
    driver = sweeper(
        "run",
        str(space),
        "--storage",
        str(storage),
        "--tracking-uri",
        mlflow_server.uri,
        cwd=tmp_path,
        background=True,
        ray=worker_ray,
    )
    client = MlflowClient(mlflow_server.uri)

    def one_trial_finished():
        experiment = client.get_experiment_by_name("e2e-resume")
        return experiment and any(
            r.info.status == "FINISHED" and r.data.tags.get("sweeper.role") == "trial"
            for r in client.search_runs([experiment.experiment_id])
        )

    wait_until(one_trial_finished, "a first finished trial", driver)
    os.killpg(driver.pid, signal.SIGINT)  # Ctrl+C on the driver
    output, _ = driver.communicate()
    assert driver.returncode == 130, output[-3000:]
    assert "sweeper resume e2e-resume --storage" in output
    finished_dirs = {
        p: len((p / "result.json").read_text().splitlines())
        for p in (storage / "e2e-resume").glob("*_seed*")
        if (p / "result.json").exists() and '"final": 1' in (p / "result.json").read_text()
    }
    assert 1 <= len(finished_dirs) < 3, "interrupted after the first trial, before the last"
    interrupted = pq.read_table(storage / "e2e-resume" / "results.parquet").to_pylist()
    assert "UNFINISHED" in {r["status"] for r in interrupted}, output[-3000:]

    done = sweeper("resume", "e2e-resume", "--storage", str(storage), cwd=tmp_path, ray=worker_ray)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    log = (storage / "e2e-resume" / "sweep.log").read_text()  # the run's Ray output, then the resume's
    assert log.index("Checkpoint successfully created") < log.index("resuming sweep e2e-resume")
    assert "Checkpoint successfully created" in log[log.index("resuming sweep e2e-resume") :]
    for folder, lines in finished_dirs.items():  # finished trials were not run again
        assert len((folder / "result.json").read_text().splitlines()) == lines
    results = pq.read_table(storage / "e2e-resume" / "results.parquet").to_pylist()
    assert len(results) == 3 and {r["status"] for r in results} == {"TERMINATED"}
    parents, children = child_runs(client, "e2e-resume")
    assert len(parents) == 1 and len(children) == 3  # still one child run per trial
    for child in children:
        assert epoch_steps(client, child.info.run_id) == [1, 2, 3]
        assert not [key for key in child.data.metrics if key.startswith("system/")]  # tracking.system_metrics: false
        models = client.search_logged_models(
            [child.info.experiment_id], filter_string=f"source_run_id = '{child.info.run_id}'"
        )
        assert [m.status for m in models] == [LoggedModelStatus.READY]  # one model per trial across the resume


def test_a_killed_trial_restarts_from_its_checkpoint_and_finishes(tmp_path, mlflow_server, worker_ray):
    space = write_space(
        tmp_path,
        name="e2e-kill",
        parameters={"attention.temperature": {"grid": ["sact"]}},
        data={"corpus": "synthetic", "train_subset": 3000, "eval_subset": 40},
        base={**SPACE["base"], "train": {**SPACE["base"]["train"], "epochs": 5}},
        tracking=LEAN_TRACKING,
    )
    storage = tmp_path / "sweeps"
    where = ["--storage", str(storage), "--tracking-uri", mlflow_server.uri]
    driver = sweeper("run", str(space), *where, cwd=tmp_path, background=True, ray=worker_ray)
    client = MlflowClient(mlflow_server.uri)

    def second_epoch_logged() -> bool:
        # the driver logs an epoch before it registers that epoch's checkpoint, so a checkpoint folder on disk
        # or a logged first epoch can still be unknown to Tune; once epoch 2 is logged, epoch 1's is not
        experiment = client.get_experiment_by_name("e2e-kill")
        children = child_runs(client, "e2e-kill")[1] if experiment else []
        return bool(children) and len(epoch_steps(client, children[0].info.run_id)) >= 2

    wait_until(second_epoch_logged, "a second epoch in MLflow", driver)
    # the worker's cluster's processes (its raylet starts the trials' workers): its xdist worker runs one test at a
    # time, so its trials are this sweep's, never another test's (or anyone's)
    ours = set(descendants(worker_ray.head.process.pid))
    trial_processes = [
        line.split()[0]
        for line in subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout.splitlines()
        if "ray::" in line and ("run_trial" in line or "ImplicitFunc" in line) and int(line.split()[0]) in ours
    ]
    assert trial_processes, "the trial's worker process is running"
    for pid in trial_processes:
        os.kill(int(pid), signal.SIGKILL)
    output, _ = driver.communicate()
    assert driver.returncode == 0, output[-4000:]
    [row] = pq.read_table(storage / "e2e-kill" / "results.parquet").to_pylist()
    assert row["status"] == "TERMINATED" and row["restores"] >= 1 and row["epochs"] == 5
    _, [child] = child_runs(client, "e2e-kill")
    assert epoch_steps(client, child.info.run_id) == [1, 2, 3, 4, 5]  # no epoch logged twice


# how a driver is ended: SIGTERM to its pid (`kill PID`), or to its process group, which reaches its local Ray's GCS,
# raylet and workers too (a terminal's or a job runner's kill of the group). SIGKILL is left out (each case costs a
# local Ray started, 1-2 min on a loaded 2-core machine): test_distributed.py kills a driver so and resumes it
DRIVER_ENDINGS = {"sigterm-pid": os.kill, "sigterm-group": os.killpg}
SIGNAL_EPOCHS = 4  # 2 trials, one at a time: the signal comes in the first, with 7 of 8 epochs to go


@pytest.mark.parametrize("ending", list(DRIVER_ENDINGS))
def test_a_driver_ended_by_a_signal_leaves_a_sweep_that_resume_finishes(tmp_path, mlflow_server, worker_ray, ending):
    """SIGTERM a `sweeper run` on its local Ray after the first trial's first epoch; `sweeper resume` (on the worker's
    cluster: the local Ray the signal reaches is the run's) then finishes the sweep: every trial once in MLflow with
    each epoch once, status.json `finished`, no lock left. SIGTERM to the driver alone is Ctrl+C's graceful stop
    (exit 130, lock released, status `stopped`); to its group, Ray's processes end with it, and Ray's handler ends
    the driver (sweeper/running/stop_signals.py)."""
    name = f"e2e-{ending}"
    space = write_space(
        tmp_path,
        name=name,
        parameters={"attention.temperature": {"grid": ["none", "sact"]}},
        base={**SPACE["base"], "train": {**SPACE["base"]["train"], "epochs": SIGNAL_EPOCHS}},
        tracking=LEAN_TRACKING,
    )
    storage = tmp_path / "sweeps"
    where = ["--storage", str(storage)]
    driver = sweeper("run", str(space), *where, "--tracking-uri", mlflow_server.uri, cwd=tmp_path, background=True)
    client = MlflowClient(mlflow_server.uri)

    def first_epoch_logged() -> bool:
        experiment = client.get_experiment_by_name(name)
        children = child_runs(client, name)[1] if experiment else []
        return any(epoch_steps(client, child.info.run_id) for child in children)

    wait_until(first_epoch_logged, "a first epoch in MLflow", driver)
    DRIVER_ENDINGS[ending](driver.pid, signal.SIGTERM)  # the driver leads its process group (background=True)
    output, _ = driver.communicate()
    experiment = storage / name
    if ending == "sigterm-pid":  # Ctrl+C's stop, not Ray's handler (sweeper/running/stop_signals.py)
        assert driver.returncode == 130 and f"sweeper resume {name} --storage" in output, output[-3000:]
        assert json.loads((experiment / "status.json").read_text())["state"] == "stopped"
        assert not (experiment / "driver.lock").exists()

    done = sweeper("resume", name, *where, cwd=tmp_path, ray=worker_ray)
    assert done.returncode == 0, output[-3000:] + done.stdout[-3000:] + done.stderr[-3000:]
    results = pq.read_table(experiment / "results.parquet").to_pylist()
    assert [r["status"] for r in results] == ["TERMINATED"] * 2
    parents, children = child_runs(client, name)
    assert len(parents) == 1 and len(children) == 2  # one run per trial across the signal
    for child in children:
        assert child.info.status == "FINISHED"
        assert epoch_steps(client, child.info.run_id) == list(range(1, SIGNAL_EPOCHS + 1))  # each epoch once
    assert json.loads((experiment / "status.json").read_text())["state"] == "finished"
    assert not (experiment / "driver.lock").exists()


def test_unreachable_tracking_server_is_a_clear_error_before_anything_starts(tmp_path):
    space = write_space(tmp_path)
    done = sweeper(
        "run", str(space), "--storage", str(tmp_path / "sweeps"), "--tracking-uri", "http://127.0.0.1:9", cwd=tmp_path
    )
    assert done.returncode == 2
    assert done.stderr.strip().startswith(
        "sweeper: error: --tracking-uri: tracking.uri: tracking server http://127.0.0.1:9 is not reachable"
    )
    assert not (tmp_path / "sweeps").exists()


def test_a_gpu_request_on_a_cluster_without_gpus_is_an_error(tmp_path, worker_ray):
    space = write_space(tmp_path, resources={"cpu": 1, "gpu": 0.5})
    done = sweeper("run", str(space), "--storage", str(tmp_path / "sweeps"), cwd=tmp_path, ray=worker_ray)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "resources.gpu: 0.5 GPU per trial asked for, but the Ray cluster has 0 GPUs" in done.stderr


def test_a_diverging_trial_fails_alone_and_the_sweep_goes_on(tmp_path, mlflow_server, worker_ray):
    space = write_space(
        tmp_path,
        name="e2e-diverge",
        failure={"max_retries": 2},
        parameters={"train.lr": {"grid": [5e-3, 1e38]}},  # an infinite lr is refused
        tracking=LEAN_TRACKING,
    )
    where = ["--storage", str(tmp_path / "sweeps"), "--tracking-uri", mlflow_server.uri]
    done = sweeper("run", str(space), *where, cwd=tmp_path, ray=worker_ray)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "1/2 trials finished, 0 stopped early, 1 failed" in done.stdout
    # the console: one line for the failure, with its cause and where its traceback is; Ray's lines in the log
    [failed] = [line for line in done.stdout.splitlines() if " FAILED after " in line]
    assert "TrainingDiverged: epoch 1: training loss is nan (not retried" in failed, failed
    error_txt = Path(re.search(r"; traceback: (\S+/error\.txt)$", failed).group(1))
    assert error_txt.parent.parent == tmp_path / "sweeps" / "e2e-diverge"
    errors = error_txt.read_text()
    assert "TrainingDiverged" in errors and "retried from" not in done.stdout  # max_retries 2, yet not retried
    assert "Failure # 2" in errors and "Failure # 3" not in errors  # its one queued start stopped on the marker
    assert "Checkpoint successfully created" not in done.stdout + done.stderr and "\x1b[" not in done.stdout
    assert "Checkpoint successfully created" in (tmp_path / "sweeps" / "e2e-diverge" / "sweep.log").read_text()
    rows = {
        r["train.lr"]: r for r in pq.read_table(tmp_path / "sweeps" / "e2e-diverge" / "results.parquet").to_pylist()
    }
    assert rows[5e-3]["status"] == "TERMINATED" and rows[1e38]["status"] == "ERROR"
    assert "TrainingDiverged: epoch 1: training loss is nan (not retried" in rows[1e38]["error"]
    client = MlflowClient(mlflow_server.uri)
    _, children = child_runs(client, "e2e-diverge")
    assert sorted(c.info.status for c in children) == ["FAILED", "FINISHED"]


def test_optuna_with_asha_runs_conditionals_and_stops_weak_trials(tmp_path, mlflow_server, worker_ray):
    space = write_space(
        tmp_path,
        name="e2e-optuna",
        base={**SPACE["base"], "train": {**SPACE["base"]["train"], "epochs": 4}},
        parameters={
            "train.lr": {"loguniform": [1e-5, 1e-2]},
            "attention.temperature": {"choice": ["none", "sact"]},
            "attention.lambda": {"uniform": [2, 8], "if": {"attention.temperature": "sact"}},
        },
        search={"algorithm": "optuna", "num_samples": 6, "max_concurrent": 2, "seed": 0},
        scheduler={"type": "asha", "grace_period": 1, "reduction_factor": 2},
        tracking=LEAN_TRACKING,
    )
    where = ["--storage", str(tmp_path / "sweeps"), "--tracking-uri", mlflow_server.uri]
    done = sweeper("run", str(space), *where, cwd=tmp_path, ray=worker_ray)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = pq.read_table(tmp_path / "sweeps" / "e2e-optuna" / "results.parquet").to_pylist()
    assert len(rows) == 6 and {r["status"] for r in rows} <= {"TERMINATED", "STOPPED"}
    assert any(r["status"] == "STOPPED" and r["epochs"] < 4 for r in rows)  # ASHA stopped someone at a rung
    assert len({r["train.lr"] for r in rows}) == 6  # TPE suggested the values
    for r in rows:  # lambda is suggested only where SACT is on; otherwise the base value stays
        assert r["variant"] == (
            "general+none" if r["attention.temperature"] == "none" else f"general+sact{r['attention.lambda']:g}"
        )
        assert (tmp_path / "sweeps" / "e2e-optuna" / f"{r['trial_id']}_{r['variant']}_seed1").is_dir()
    client = MlflowClient(mlflow_server.uri)
    _, children = child_runs(client, "e2e-optuna")
    status = {c.info.run_id: c.info.status for c in children}
    assert len(children) == 6
    for r in rows:  # a trial ASHA stopped is a KILLED run with the epochs it trained
        assert status[r["mlflow_run_id"]] == {"TERMINATED": "FINISHED", "STOPPED": "KILLED"}[r["status"]]
        assert epoch_steps(client, r["mlflow_run_id"]) == list(range(1, r["epochs"] + 1))


def test_pbt_records_exploits_without_breaking_mlflow_and_the_console_shows_progress(
    tmp_path, mlflow_server, worker_ray
):
    epochs = 4  # synch: every trial waits at epoch 2, then the bottom one copies the top one (see SweepPBT)
    space = write_space(
        tmp_path,
        name="e2e-pbt",
        resources={"cpu": 0.5},
        base={**SPACE["base"], "train": {**SPACE["base"]["train"], "epochs": epochs}},
        parameters={"train.lr": {"grid": [1e-5, 2e-5, 5e-3, 8e-3]}},  # two trials cannot learn
        scheduler={
            "type": "pbt",
            "perturbation_interval": 2,
            "synch": True,
            "mutations": {"train.lr": {"loguniform": [1e-5, 1e-2]}},
        },
        search={"max_concurrent": 4},
        tracking=LEAN_TRACKING,
    )
    done = sweeper(
        "run",
        str(space),
        "--storage",
        str(tmp_path / "sweeps"),
        "--tracking-uri",
        mlflow_server.uri,
        cwd=tmp_path,
        env={"SWEEPER_PROGRESS_EVERY_S": "2"},
        ray=worker_ray,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "4/4 trials finished" in done.stdout
    assert re.search(r"sweep e2e-pbt: \d+ done, 0 failed, \d+ running, \d+ pending; elapsed", done.stdout)
    assert re.search(r"\n    [^\n]+ · seed \d+: (epoch \d/4, \d+% of it|starting)", done.stdout)  # MLflow's run names

    client = MlflowClient(mlflow_server.uri)
    _, children = child_runs(client, "e2e-pbt")
    assert len(children) == 4 and all(c.info.status == "FINISHED" for c in children)
    exploited = [c for c in children if int(c.data.tags.get("sweeper.pbt_exploits", 0)) >= 1]
    assert exploited, "at least one exploit recorded"
    trial_ids = {c.data.tags["sweeper.trial_id"] for c in children}
    for child in exploited:
        local = client.download_artifacts(child.info.run_id, "pbt_events.json", str(tmp_path / child.info.run_id))
        events = json.loads(Path(local).read_text())
        assert len(events) == int(child.data.tags["sweeper.pbt_exploits"])
        for event in events:
            assert event["copied_from"] in trial_ids and event["copied_from"] != child.data.tags["sweeper.trial_id"]
            assert 1e-5 <= event["settings"]["train.lr"] <= 1e-2
        history = client.get_metric_history(child.info.run_id, "setting/train.lr")  # the values in force
        latest = {m.step: m.value for m in sorted(history, key=lambda m: (m.step, m.timestamp))}
        assert min(latest) == 1 and max(latest) <= epochs
        for epoch in set(range(1, epochs + 1)) - set(latest):  # skipped by an exploit: the donor had trained it
            assert any(event["epoch"] >= epoch for event in events), (epoch, latest, events)
        last = events[-1]
        if last["epoch"] < epochs:  # its settings trained the next epoch (a donor at the last epoch leaves none)
            assert latest[last["epoch"] + 1] == pytest.approx(last["settings"]["train.lr"])
        assert child.data.params["train.lr"] in {"1e-05", "2e-05", "0.005", "0.008"}  # initial values, unchanged
    summary = (tmp_path / "sweeps" / "e2e-pbt" / "summary" / "summary.md").read_text()
    assert "## PBT schedules" in summary and "(weights of trial " in summary
