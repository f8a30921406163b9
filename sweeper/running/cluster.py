"""The Ray cluster's dashboard, reached and authenticated: the Jobs client that `sweeper submit` sends a sweep
with, and that `sweeper list | status | stop | logs` ask about sweeps' jobs. Its own module so that neither of
those (sweeper/running/submit.py, sweeper/running/sweeps.py) imports the other. Ray's token authentication works as
Ray's own CLI does: RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token.
"""

from __future__ import annotations

import os
from pathlib import Path

from nmt_core.config import ConfigError
from nmt_core.gates.credentials import redact
from nmt_core.gates.deadline import longer_with
from nmt_core.gates.gate import network_timeout, read_regular

TOKEN_LIMIT = 4096  # bytes: Ray's tokens are 64 hex characters


class SubmitError(ConfigError):
    """The cluster cannot take the job: one line, exit code 2."""

    def __init__(self, message: str, key: str = "--address", source: str = "sweeper submit"):
        super().__init__(key, message, source)


def probe_dashboard(address: str, source: str = "sweeper submit") -> None:
    """A dashboard that does not answer within network_timeout() seconds is one line now: Ray's job client has no
    timeout of its own."""
    import requests

    if not address.startswith(("http://", "https://")):
        return
    try:
        requests.get(address.rstrip("/") + "/api/version", timeout=network_timeout(ConfigError))
    except requests.RequestException as err:
        raise SubmitError(
            f"{redact(address, bare_address=True)}: no Ray dashboard answers there within {network_timeout():g} s "
            f"({type(err).__name__}); pass the head's dashboard address, e.g. http://HEAD:8265, or give it longer "
            f"with {longer_with()}",
            source=source,
        ) from None


def token_header() -> dict[str, str]:
    """Ray's token for its Jobs API, read from the environment at this call, from where Ray's own CLI reads it.
    Ray caches its auth mode and token once per process, so a notebook (or a test) that sets RAY_AUTH_MODE and
    RAY_AUTH_TOKEN after its first Ray call would otherwise send none. Only in token mode, as Ray does: a token is
    never sent to a cluster that did not ask for one."""
    if os.environ.get("RAY_AUTH_MODE") != "token":
        return {}
    token = os.environ.get("RAY_AUTH_TOKEN", "")
    path = Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")
    if not token and path.is_file():
        token = read_regular(path, TOKEN_LIMIT, ConfigError, key="RAY_AUTH_TOKEN_PATH", what="a Ray token is 64 bytes")
        token = token.decode("ascii", errors="replace")
    token = token.strip()
    if token and not (token.isascii() and token.isprintable()):  # never shown: it is a secret
        raise SubmitError("the Ray token (RAY_AUTH_TOKEN or its file) holds characters no token has", key="token")
    return {"Authorization": f"Bearer {token}"} if token else {}


def connect(address: str, source: str = "sweeper submit"):
    from ray.exceptions import AuthenticationError
    from ray.job_submission import JobSubmissionClient

    probe_dashboard(address, source)
    try:
        client = JobSubmissionClient(address, headers=token_header())
        client.list_jobs()  # the first authenticated call: a wrong token fails here, not after the upload
        return client
    except AuthenticationError as err:
        reason = "no token was found" if "Missing" in str(err) else "the token was refused"
        raise SubmitError(
            f"{redact(address, bare_address=True)}: the Ray cluster wants token authentication and {reason}; set "
            "RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH, or ~/.ray/auth_token) to the cluster's token",
            source=source,
        ) from None
    except (ConnectionError, OSError, ValueError) as err:  # ValueError: Ray's "Invalid address format"
        raise SubmitError(
            f"{redact(address, bare_address=True)}: no Ray dashboard answers there ({type(err).__name__}); pass the "
            "head's dashboard address, e.g. http://HEAD:8265",
            source=source,
        ) from None
