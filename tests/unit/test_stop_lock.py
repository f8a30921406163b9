"""`sweeper stop` honours a held driver lock (issue #70 item 5): a `resume` that holds driver.lock but has not yet
written its first status (status.json still says the last run stopped) is a live driver; on main `stop` answered
"nothing to stop" from status.json alone and the resume ran to its end. The request is addressed to the lock's
holder, and the driver's start (clear_stop) keeps a request addressed to itself."""

from __future__ import annotations

import json
import socket

from sweeper import cli as sweeper_cli
from sweeper.running import sweeps
from tests.unit.test_sweeps import running, sweep


def held(experiment, record: dict) -> None:
    experiment.write_text(json.dumps(record), sweeps.LOCK_FILE)


def test_stop_asks_the_driver_that_holds_the_lock_before_its_first_status(tmp_path, capsys):
    experiment = sweep(tmp_path, "s", {**running(), "state": "stopped"})  # what the last run left
    me = sweeps.driver()  # this process, as a resume that took the lock a second ago
    held(experiment, me)
    assert sweeper_cli.main(["stop", "s", "--storage", str(tmp_path)]) == 0
    assert "stopping sweep s" in capsys.readouterr().out
    request = json.loads(experiment.read_text(sweeps.STOP_FILE))
    assert request["driver"] == me
    sweeps.clear_stop(experiment)  # the driver's start, after the request: it keeps its own
    assert sweeps.stop_request(experiment) is not None


def test_a_lock_whose_driver_is_gone_is_nothing_to_stop(tmp_path, capsys):
    experiment = sweep(tmp_path, "s", {**running(), "state": "stopped"})
    held(experiment, {"host": socket.gethostname()[:100], "pid": 1, "since": 1.0})  # pid 1 began long before
    assert sweeper_cli.main(["stop", "s", "--storage", str(tmp_path)]) == 0
    assert "nothing to stop" in capsys.readouterr().out
    assert not experiment.exists(sweeps.STOP_FILE)


def test_a_new_driver_clears_a_request_addressed_to_an_earlier_one(tmp_path):
    experiment = sweep(tmp_path, "s", running())
    sweeps.request_stop(experiment, "erin", {"host": "elsewhere", "pid": 7, "since": 1.0})
    sweeps.clear_stop(experiment)
    assert not experiment.exists(sweeps.STOP_FILE)
