"""A word when a sweep ends (issue 73 item 4): one JSON message to a webhook when the sweep finishes, fails or stops,
and one for each degeneracy warning of its summary, with the sweep's name, the verdict line and the MLflow link.

The URL comes from $SWEEPER_WEBHOOK_URL, else the space's `tracking.webhook`. The space is stored (sweeper.json,
space.yaml in MLflow), so a URL there is refused with a credential in it (userinfo, a secret query key: the gate's
check_uri); a URL that is its own secret (a Slack or Teams hook's path) belongs in the environment, which is read
afresh by every run and resume and never written anywhere.

A receiver that fails never fails the sweep: each message gets ATTEMPTS tries (a connection error, a 5xx or a 429
is tried again after BACKOFF_S), every request under the network gate's deadline and size cap
(nmt_core/gates/network.py), and all of a sweep's messages within DEADLINE_S; once one is given up, the rest are not
tried, and the log gets one line naming the receiver's host only.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from sweeper.space.spec import check_webhook

WEBHOOK_ENV = "SWEEPER_WEBHOOK_URL"
ATTEMPTS, BACKOFF_S, DEADLINE_S = 3, 1.0, 30.0  # tries a message, wait before the next (doubling), for all messages
FINISHED, FAILED, STOPPED, WARNING = "finished", "failed", "stopped", "warning"  # a message's `event`
EVENTS = {0: FINISHED, 1: FAILED, 3: FINISHED, 130: STOPPED}  # the driver's exit code -> the event it sends


def webhook_url(stored: str | None) -> str | None:
    """Where messages go: $SWEEPER_WEBHOOK_URL (it may carry its secret: never stored), else the space's (checked
    when the space was read); None: nowhere. A variable that is no http(s) URL is one line, exit 2."""
    found = os.environ.get(WEBHOOK_ENV)
    return check_webhook(found, WEBHOOK_ENV, "environment", stored=False) if found else stored


def host_of(url: str) -> str:
    """The receiver as the log names it: scheme and host, never a path, query or userinfo that may be its secret."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or '?'}" + (f":{parts.port}" if parts.port else "")


def message(sweep: str, event: str, verdict: str, link: str, **more: Any) -> dict[str, Any]:
    """One message's JSON: what happened to which sweep, its verdict line, and where to look."""
    return {"sweep": sweep, "event": event, "verdict": verdict, "mlflow": link, "sent_at": time.time(), **more}


@dataclass
class Webhook:
    """The sweep's messages to one receiver, each tried ATTEMPTS times, all within DEADLINE_S of the first."""

    url: str | None
    deadline: float = 0.0
    given_up: bool = False
    sent: list[str] = field(default_factory=list)  # the events delivered, in order

    def notify(self, payload: dict[str, Any], log=print) -> bool:
        """Post one message; whether it was delivered. Never raises: a receiver's failure is one line in `log`."""
        if not self.url or self.given_up:
            return False
        self.deadline = self.deadline or time.monotonic() + DEADLINE_S
        why = self.deliver(payload)
        if why is None:
            self.sent.append(payload["event"])
            return True
        self.given_up = True
        log(f"webhook: {host_of(self.url)} did not take the {payload['event']} message ({why}); the sweep goes on")
        return False

    def deliver(self, payload: dict[str, Any]) -> str | None:
        """POST the JSON up to ATTEMPTS times; None once delivered (a 2xx), else why not (the last failure)."""
        import requests

        from nmt_core.gates.network import configure_network

        configure_network()  # every request under the gate's deadline and size cap (idempotent)
        why, wait = "no attempt before the deadline", BACKOFF_S
        for attempt in range(ATTEMPTS):
            if time.monotonic() >= self.deadline:
                return why
            try:
                answer = requests.post(self.url, json=payload, timeout=max(0.1, self.deadline - time.monotonic()))
            except requests.RequestException as err:
                why = f"{type(err).__name__} after {attempt + 1} attempt{'s' if attempt else ''}"
            else:
                if 200 <= answer.status_code < 300:
                    return None
                why = f"HTTP {answer.status_code} after {attempt + 1} attempt{'s' if attempt else ''}"
                if answer.status_code < 500 and answer.status_code != 429:  # refused: asking again changes nothing
                    return why
            if attempt + 1 < ATTEMPTS and time.monotonic() + wait < self.deadline:
                time.sleep(wait)
                wait *= 2
        return why
