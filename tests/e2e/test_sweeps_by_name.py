"""A sweep started with `sweeper run` found, watched, stopped and finished by its name, its models by
`tracking.models: best` (issue #43 items 1 and 3) and its heatmaps by `tracking.plots: best` (the defaults): run on
the local Ray it starts, resumed on the worker's cluster, a real MLflow server over HTTP. `status`, `list`, `logs` and
`promote` run in this process (sweeper.cli.main): what they do and print is tested here, and the processes of the
first three in tests/unit/test_light_commands.py."""

from __future__ import annotations

import json
import re

import pyarrow.parquet as pq
import pytest
from mlflow.entities import LoggedModelStatus
from mlflow.tracking import MlflowClient

from sweeper import api
from sweeper import cli as sweeper_cli
from tests.e2e.sweeps import SPACE, check_best_plots, child_runs, epoch_steps, sweeper, write_space
from tests.servers import wait_until

pytestmark = pytest.mark.slow
NAME = "by-name"
# epochs a trial (4 trials, one at a time): the stop comes early in the first, with 30 of 32 epochs to go. At 4 (14
# of 16 to go) a quiet machine finished the sweep (0.2 s an epoch) before its driver read the request a second later
EPOCHS = 8
STOP_WAIT_S = 3600.0  # `sweeper stop --wait`: longer than pytest-timeout, which bounds the test instead


def test_a_local_sweep_is_stopped_by_name_resumed_and_its_models_and_plots_follow_the_policy(
    tmp_path, mlflow_server, worker_ray, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # the working folder of the commands run in this process, as of their processes
    space = write_space(
        tmp_path,
        name=NAME,
        parameters={"attention.temperature": {"grid": ["none", "sact"]}},
        base={**SPACE["base"], "train": {**SPACE["base"]["train"], "epochs": EPOCHS}},
        search={"max_concurrent": 1, "repeats": 2},  # 4 trials, one at a time
        tracking={"system_metrics": False},
    )
    storage = str(tmp_path / "sweeps")
    where = ["--storage", storage]
    driver = sweeper(
        "run", str(space), *where, "--tracking-uri", mlflow_server.uri, cwd=tmp_path, background=True,
        env={"SWEEPER_STATUS_EVERY_S": "1"},
    )  # fmt: skip
    wait_until(lambda: midway(storage), "its board showed a trial past its first epoch", driver)
    # stopped from this process: a `sweeper stop` command's start (seconds on a loaded machine) can outlast the rest of
    # this tiny sweep; the command's lines are tested in tests/unit/test_sweeps.py
    stop = api.stop_sweep(NAME, storage=storage, wait_s=STOP_WAIT_S)
    output, _ = driver.communicate()
    assert stop.message.startswith(f"stopping sweep {NAME}: its driver reads the request in {storage}/{NAME}/stop.json")
    assert stop.sweep.state == "stopped", f"{stop}\n{output[-3000:]}"
    assert driver.returncode == 130 and "stopping: asked by " in output, output[-3000:]
    assert json.loads(cli(capsys, "status", NAME, *where, "--json"))["state"] == "stopped"
    stopped = pq.read_table(tmp_path / "sweeps" / NAME / "results.parquet").to_pylist()
    assert "UNFINISHED" in {r["status"] for r in stopped} or len(stopped) < 4
    client = MlflowClient(mlflow_server.uri)
    assert client.search_logged_models([client.get_experiment_by_name(NAME).experiment_id]) == []  # not before the end

    done = sweeper("resume", NAME, *where, cwd=tmp_path, ray=worker_ray)  # the local Ray under test is the run's
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "models: 2 logged (" in done.stdout and f"sweeper promote {NAME} TRIAL" in done.stdout
    assert "storage: " in done.stdout and "trial folders" in done.stdout
    [listed] = json.loads(cli(capsys, "list", *where, "--json"))
    assert (listed["name"], listed["state"], listed["done"], listed["trials"]) == (NAME, "finished", 4, 4)

    results = pq.read_table(tmp_path / "sweeps" / NAME / "results.parquet").to_pylist()
    parents, children = child_runs(client, NAME)
    assert len(parents) == 1 and len(children) == 4  # one run per trial across the stop
    assert all(epoch_steps(client, c.info.run_id) == list(range(1, EPOCHS + 1)) for c in children)
    experiment = parents[0].info.experiment_id
    best = {}
    for row in results:
        if row["variant"] not in best or row["bleu_dev"] > best[row["variant"]]["bleu_dev"]:
            best[row["variant"]] = row
    models = client.search_logged_models([experiment])
    assert {m.source_run_id for m in models} == {r["mlflow_run_id"] for r in best.values()}
    assert all(m.status == LoggedModelStatus.READY for m in models)
    assert client.get_model_version_by_alias(NAME, "best").run_id in {r["mlflow_run_id"] for r in best.values()}
    check_best_plots(client, children, (tmp_path / "sweeps" / NAME / "summary" / "summary.md").read_text(), tmp_path)

    other = next(r for r in results if r["trial_id"] not in {b["trial_id"] for b in best.values()})
    answer = json.loads(cli(capsys, "promote", NAME, other["trial_id"], *where, "--json"))
    [model] = client.search_logged_models([experiment], filter_string=f"source_run_id = '{other['mlflow_run_id']}'")
    assert (answer["run_id"], answer["model_id"]) == (model.source_run_id, model.model_id)
    assert model.status == LoggedModelStatus.READY

    state = json.loads((tmp_path / "sweeps" / NAME / "sweeper.json").read_text())
    assert state["storage"]["trials"] == 4 and state["storage"]["bytes"] > 4 * state["storage"]["trial_bytes_median"]
    assert client.get_run(parents[0].info.run_id).data.metrics["storage_mb"] == pytest.approx(
        state["storage"]["bytes"] / 1e6
    )
    logs = cli(capsys, "logs", NAME, *where, "--tail", "20")  # its source line on stderr, the log's tail on stdout
    assert "resuming sweep by-name" in (tmp_path / "sweeps" / NAME / "sweep.log").read_text()
    assert len(logs.splitlines()) == 20


def cli(capsys, *args: str) -> str:
    """`sweeper ARGS` run in this process to exit 0: what it printed on stdout."""
    code = sweeper_cli.main(list(args))
    out, err = capsys.readouterr()
    assert code == 0, out[-3000:] + err[-3000:]
    return out


def midway(storage: str) -> bool:
    """The sweep's board, as `sweeper status` reads it, shows a trial past its first epoch, or one done (nothing
    before its driver writes sweeper.json). The board is rewritten every second and an epoch can take a fifth of
    one: a wait for one exact epoch could see none of them and outlast the sweep."""
    try:
        status = api.sweep_status(NAME, storage=storage)
    except api.SweeperError:
        return False
    epochs = [int(found[1]) for line in status.board if (found := re.search(rf": epoch (\d+)/{EPOCHS},", line))]
    return bool(status.done) or any(epoch >= 2 for epoch in epochs)
