"""A word when a sweep ends (issue 73 item 4): one JSON message to a receiver on 127.0.0.1 on finish, failure and
each degeneracy warning; a receiver that fails or stalls never fails the sweep (bounded tries, one line); a URL
with a credential is never stored."""

from __future__ import annotations

import json
import time

import pytest

from nmt_core.config import ConfigError
from sweeper.running import webhook
from sweeper.running.runner import Ending, failure_told, tell, verdict_line
from sweeper.running.webhook import WEBHOOK_ENV, Webhook, host_of, message, webhook_url
from sweeper.space.spec import SpecError, parse_spec
from sweeper.storage.store import open_storage
from sweeper.storage.stored import STATE_FILE, read_state, state_from
from sweeper.summary.headline import verdict_lines
from tests.servers import WebhookReceiver, free_port
from tests.unit.test_names_and_state import valid_state
from tests.unit.test_schema import QUICKSTART

ROWS = [
    {"status": "TERMINATED", "bleu_dev": 20.5, "bleu_test_avg": 19.25, "run_name": "SACT λ4 · seed 1",
     "mlflow_run_id": "r1"},
    {"status": "ERROR", "run_name": "baseline · seed 1"},
]  # fmt: skip


def state(url: str | None = None) -> object:
    return state_from({**valid_state("sqlite:////tmp/mlflow.db"), "name": "lab", "trials": 2, "webhook": url}, "t")


def test_a_finished_sweep_sends_its_verdict_and_then_each_degeneracy_warning():
    """A summary whose baseline's attention saturated and whose SACT row's tau sat at its bound: two degeneracy
    warnings, each its own message after the verdict's; the few-seeds warning is no degeneracy and is not sent."""
    from sweeper.summary.report import compute, significance_of
    from tests.unit.test_summary import AT_BOUND, _review_snapshot

    saturated = {"attn_saturated": [0.99, 0.99], "attn_score_range": [80.0, 90.0]}
    rows = [("general+none", {}, 0.001, 2, saturated), ("general+sact4", {"temperature": "sact"}, 0.001, 3, AT_BOUND)]
    summary = compute(
        _review_snapshot(rows, 2, {"resamples": 100}), significance_of(_review_snapshot(rows, 2, {}), 100)
    )
    with WebhookReceiver() as receiver:
        tell(state(receiver.url), Ending(0, ROWS, summary=summary), "http://mlflow.lab/#/runs")
    warned = [w for w in summary.warnings if "saturated" in w or "bound" in w]
    first, *warnings = receiver.received
    verdict = "finished: 1/2 trials finished, 0 stopped early, 1 failed; best bleu_dev 20.50 (SACT λ4 · seed 1), "
    assert first["verdict"] == verdict + "test BLEU avg 19.25"
    assert (first["sweep"], first["event"], first["mlflow"], first["warnings"]) == (
        "lab", "finished", "http://mlflow.lab/#/runs", 2
    )  # fmt: skip
    assert first["answer"] == [line.removeprefix("- ").replace("**", "") for line in verdict_lines(summary)] and first[
        "answer"
    ][0].startswith("general+sact4 vs general+none: no significant difference")
    assert len(warned) == 2 and any("fewer than 3 seeds" in w for w in summary.warnings)
    assert [w["event"] for w in warnings] == ["warning", "warning"] and [w["warning"] for w in warnings] == warned
    assert all(w["verdict"] == first["verdict"] and w["sweep"] == "lab" for w in warnings)


def test_a_stopped_and_a_failed_sweep_say_so():
    assert verdict_line(state(), Ending(130, ROWS[:1])).startswith("stopped: 1/2 trials finished")
    assert verdict_line(state(), Ending(1, ROWS[1:])) == "failed: 0/2 trials finished, 0 stopped early, 1 failed"
    with WebhookReceiver() as receiver:
        with pytest.raises(RuntimeError, match="ray died"), failure_told(receiver.url, "lab", "http://link"):
            raise RuntimeError("ray died\nmore")
    [sent] = receiver.received
    assert (sent["event"], sent["verdict"], sent["mlflow"]) == (
        "failed",
        "failed: RuntimeError: ray died",
        "http://link",
    )


def test_a_receiver_that_fails_is_tried_a_bounded_number_of_times_and_said_once(monkeypatch, capsys):
    monkeypatch.setattr(webhook, "BACKOFF_S", 0.05)
    hook = Webhook(None)
    with WebhookReceiver(answers=(503, 503, 503)) as receiver:
        hook.url = receiver.url
        assert not hook.notify(message("lab", "finished", "v", "l"), log=print)
        assert not hook.notify(message("lab", "warning", "v", "l"), log=print)  # given up: not tried again
    assert len(receiver.received) == webhook.ATTEMPTS
    line = capsys.readouterr().out
    assert line.count("\n") == 1 and line.startswith(f"webhook: {host_of(receiver.url)} did not take the finished")
    assert "HTTP 503 after 3 attempts" in line and "/hook" not in line
    with WebhookReceiver(answers=(500, 200)) as receiver:
        assert Webhook(receiver.url).notify(message("lab", "finished", "v", "l"), log=print)  # the second try took it
    assert len(receiver.received) == 2
    with WebhookReceiver(answers=(404,)) as receiver:
        assert not Webhook(receiver.url).notify(message("lab", "finished", "v", "l"), log=print)
    assert len(receiver.received) == 1  # refused: asking again changes nothing


def test_no_receiver_and_a_stalling_one_end_within_the_deadline(monkeypatch, capsys):
    monkeypatch.setattr(webhook, "BACKOFF_S", 0.05)
    started = time.monotonic()
    assert not Webhook(f"http://127.0.0.1:{free_port()}/hook").notify(message("lab", "failed", "v", "l"))
    assert "ConnectionError after 3 attempts" in capsys.readouterr().out
    monkeypatch.setattr(webhook, "DEADLINE_S", 1.5)
    with WebhookReceiver(delay=5.0) as receiver:
        assert not Webhook(receiver.url).notify(message("lab", "finished", "v", "l"))
    assert time.monotonic() - started < 10  # the network gate's deadline and the messages' ended it
    assert "did not take the finished message" in capsys.readouterr().out


def test_a_url_with_a_credential_is_refused_in_the_space_and_taken_from_the_environment_unstored(tmp_path, monkeypatch):
    def space(url) -> str:
        return json.dumps({**QUICKSTART, "tracking": {"webhook": url}})

    assert (
        parse_spec(space("https://hooks.lab.org/sweeps"), "q.yaml").tracking.webhook == "https://hooks.lab.org/sweeps"
    )
    for url, said in (
        ("https://bot:hunter2@hooks.lab.org/x", "a credential in a URI"),
        ("https://hooks.lab.org/x?token=abc", "a credential in a URI"),
        ("ftp://hooks.lab.org/x", "must be an http:// or https:// URL"),
        ("https:///x", "with a host"),
    ):
        with pytest.raises(ConfigError, match=f"q.yaml: tracking.webhook: .*{said}") as caught:
            parse_spec(space(url), "q.yaml")
        assert "hunter2" not in str(caught.value) and "abc" not in str(caught.value)
    assert "SWEEPER_WEBHOOK_URL" in str(pytest.raises(ConfigError, parse_spec, space("https://a:b@h/x"), "q").value)
    secret = "https://hooks.slack.com/services/T0/B0/XXXXSECRET"
    monkeypatch.setenv(WEBHOOK_ENV, secret)
    assert webhook_url("https://hooks.lab.org/sweeps") == secret  # the environment comes first, its secret kept
    monkeypatch.setenv(WEBHOOK_ENV, "not a url")
    with pytest.raises(SpecError, match="environment: SWEEPER_WEBHOOK_URL: must be an http:// or https:// URL"):
        webhook_url(None)
    experiment = open_storage(str(tmp_path), "t").below("lab")
    stored = {**valid_state("sqlite:////tmp/mlflow.db"), "name": "lab", "webhook": "https://h/x?api_key=k"}
    experiment.write_text(json.dumps(stored), STATE_FILE)
    with pytest.raises(SpecError, match="storage is damaged: webhook: .*a credential in a URI") as caught:
        read_state(experiment)
    assert "=k" not in str(caught.value)
    experiment.write_text(json.dumps({**stored, "webhook": "https://hooks.lab.org/sweeps"}), STATE_FILE)
    assert read_state(experiment).webhook == "https://hooks.lab.org/sweeps"


def test_no_url_no_message():
    tell(state(None), Ending(0, ROWS), "link")  # nothing to send to, nothing raised
    assert not Webhook(None).notify(message("lab", "finished", "v", "l"))
