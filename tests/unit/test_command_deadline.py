"""One deadline for a whole light command (issue #61's named gap; nmt_core/gates/deadline.py): a server that answers
every call late, but within the call's own deadline, held `sweeper list` and `status` for as many deadlines as they made
calls; now each call's deadline is cut to what is left of the command's, and the command ends within it in one line
naming the server. `sweeper run` keeps per-call deadlines."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from nmt_core.config import ConfigError
from nmt_core.gates import network
from nmt_core.gates.deadline import COMMAND_TIMEOUT_VARIABLE, call_limit, carried, command_deadline
from sweeper import cli as sweeper_cli
from tests.hostile import hostile_server, slow_proxy
from tests.servers import MotoS3, environment
from tests.unit.test_sweeps import running, sweep

CALL_S = "3"  # NMT_SWEEPER_TIMEOUT: a delayed call (a request or two) ends well within it
DELAY_S = 0.6  # each request's delay at the proxy
COMMAND_S = 2.0  # NMT_SWEEPER_COMMAND_TIMEOUT in the tests that end by it
GRACE_S = 1.5  # a call cut at the deadline stops within network.GRACE_S; the rest is a loaded machine's slack
SWEEPS = ("a", "b")


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    s3 = MotoS3(tmp_path_factory.mktemp("moto"))
    for name in SWEEPS:
        sweep(s3.uri("deadline"), name, running())  # sweeper.json and status.json, as a driver writes them
    yield s3
    s3.stop()


def through(proxy, moto: MotoS3) -> str:
    """The storage URI of the planted sweeps, reached through the proxy."""
    return moto.uri("deadline").replace(f"127.0.0.1:{moto.port}", f"127.0.0.1:{proxy.port}")


def timed(argv: list[str], capsys) -> tuple[int, str, float]:
    start = time.monotonic()
    code = sweeper_cli.main(argv)
    took = time.monotonic() - start
    captured = capsys.readouterr()
    return code, captured.err, took


@pytest.mark.parametrize("command", [["list"], ["status", "b"]])
def test_a_command_of_many_slow_calls_ends_within_its_own_deadline(command, moto, capsys):
    with slow_proxy(moto.port, DELAY_S) as proxy:
        storage = ["--storage", through(proxy, moto)]
        with environment({"NMT_SWEEPER_TIMEOUT": CALL_S, COMMAND_TIMEOUT_VARIABLE: "60"}):
            code, err, took_whole = timed([*command, *storage], capsys)
        assert code == 0, err
        calls = proxy.requests
        # every request well within its call's deadline, yet the command took more than its deadline now allows
        assert took_whole > COMMAND_S + GRACE_S and calls * DELAY_S > COMMAND_S + GRACE_S, (took_whole, calls)
        with environment({"NMT_SWEEPER_TIMEOUT": CALL_S, COMMAND_TIMEOUT_VARIABLE: str(COMMAND_S)}):
            code, err, took = timed([*command, *storage], capsys)
    assert took < COMMAND_S + GRACE_S, (took, took_whole, calls)
    assert code == 2 and err.count("\n") == 1, err
    assert f"endpoint_override=127.0.0.1:{proxy.port}" in err  # the server, named
    assert f"sweeper {command[0]}'s 2 s in all" in err and COMMAND_TIMEOUT_VARIABLE in err, err
    assert "testing" not in err  # moto's credentials, never shown


def test_http_calls_share_the_commands_deadline_and_none_is_made_after_it():
    network.install()
    with hostile_server("stall") as server, environment({"NMT_SWEEPER_TIMEOUT": "1"}):
        start = time.monotonic()
        with command_deadline("sweeper status", 1.5, ConfigError):
            ends = []
            for _ in range(4):  # four calls of 1 s each would take 4 s
                with pytest.raises(requests.RequestException) as caught:
                    requests.get(server.url + "/api/jobs/", timeout=1)
                ends.append(time.monotonic() - start)
        assert ends[-1] < 1.5 + network.GRACE_S + 0.5, ends
        assert ends[-1] - ends[-2] < 0.2, ends  # past the deadline, a call fails at once
        assert server.url in str(caught.value) and "sweeper status's 1.5 s in all" in str(caught.value)
        assert COMMAND_TIMEOUT_VARIABLE in str(caught.value)


def test_the_threads_a_command_starts_keep_its_deadline():
    with command_deadline("sweeper summarize", 0.01, ConfigError):
        time.sleep(0.05)
        with ThreadPoolExecutor(2) as pool:
            carried_limits = list(pool.map(carried(lambda _: call_limit(10.0).passed), range(2)))
            bare_limits = list(pool.map(lambda _: call_limit(10.0).passed, range(2)))
    assert carried_limits == [True, True] and bare_limits == [False, False]


def test_outside_a_command_each_call_keeps_its_own_deadline_as_sweeper_run_does():
    limit = call_limit(10.0)
    assert (limit.seconds, limit.command) == (10.0, None)
    with command_deadline("sweeper list", 30, ConfigError):
        assert call_limit(10.0).seconds == 10.0  # the shorter one binds
        assert call_limit(600.0).seconds <= 30
    assert call_limit(600.0).seconds == 600.0


@pytest.mark.parametrize("value", ["0", "-1", "nan", "1e9", "soon"])
def test_a_bad_command_timeout_is_one_line_exit_2(value, tmp_path, capsys):
    with environment({COMMAND_TIMEOUT_VARIABLE: value}):
        assert sweeper_cli.main(["list", "--storage", str(tmp_path)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert f"{COMMAND_TIMEOUT_VARIABLE}: must be a number of seconds in (0, 3600]" in line, line
