"""Every HTTP call under a total deadline and a size cap (nmt_core/gates/network.py, issue #61 item 3), against the
hostile servers of tests/hostile.py on 127.0.0.1: a drip, a stall after the probe, a flood, an endless body each end in
one NetworkLimitError within the deadline (plus the watchdog's grace), with bounded memory."""

from __future__ import annotations

import http.server
import threading
import time

import pytest
import requests

from nmt_core.gates import network
from tests.hostile import hostile_server

pytestmark = pytest.mark.timeout(120)
DEADLINE_S = 1.0


@pytest.fixture(autouse=True)
def bounded(monkeypatch):
    monkeypatch.setenv("NMT_SWEEPER_TIMEOUT", str(DEADLINE_S))
    network.install()


@pytest.mark.parametrize("behaviour", ["drip", "drip_headers", "stall"])
def test_a_server_that_drips_or_stalls_ends_within_the_deadline(behaviour):
    with hostile_server(behaviour) as server:
        start = time.monotonic()
        with pytest.raises(requests.RequestException) as raised:
            requests.get(server.url + "/api/2.0/mlflow/runs/get", timeout=30)  # the caller's 30 s: one read's
        took = time.monotonic() - start
    assert took < DEADLINE_S + network.GRACE_S + 1.0, took  # the drip would hold it SERVE_S = 30 s
    assert "127.0.0.1" in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.parametrize("behaviour", ["huge", "endless"])
def test_a_flood_is_cut_at_the_cap(behaviour, monkeypatch):
    monkeypatch.setattr(network, "ANSWER_BYTES", 2**20)
    with hostile_server(behaviour) as server:
        with pytest.raises(network.NetworkLimitError, match="answered more than 1,048,576 bytes"):
            requests.get(server.url + "/api/x", timeout=30)


def test_a_streamed_download_is_capped_as_it_is_read(monkeypatch):
    monkeypatch.setattr(network, "DOWNLOAD_BYTES", 2**20)
    with hostile_server("endless") as server:
        response = requests.get(server.url + "/artifact", stream=True, timeout=30)
        read = 0
        with pytest.raises(network.NetworkLimitError):
            for chunk in response.iter_content(65536):
                read += len(chunk)
    assert read <= 2**20


def test_a_retry_after_of_an_hour_ends_the_call_within_its_deadline():
    """MLflow's client retries a 503 and honours the server's `Retry-After` (urllib3 sleeps, and no watchdog ends a
    sleep): `Retry-After: 3600` held the call an hour on main; a wait past the deadline now ends it at once."""
    from mlflow.utils.request_utils import _get_request_session

    session = _get_request_session(2, 1, 0.5, (503,), raise_on_status=False, respect_retry_after_header=True)
    with hostile_server("retry_after") as server:
        start = time.monotonic()
        with pytest.raises(requests.ConnectionError, match="no whole answer within 1 s"):
            session.get(server.url + "/api/2.0/mlflow/runs/get", timeout=30)
    assert time.monotonic() - start < DEADLINE_S + network.GRACE_S + 1.0


def test_endless_redirects_end_inside_the_deadline():
    with hostile_server("redirect") as server:
        start = time.monotonic()
        with pytest.raises(requests.RequestException):
            requests.get(server.url + "/x", timeout=30)
    assert time.monotonic() - start < DEADLINE_S + network.GRACE_S + 1.0


class _Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_well_behaved_server_is_answered_and_its_pooled_connection_outlives_the_deadline():
    """The watchdog of a finished call never shuts a connection back in the pool (one session, calls spread past
    the first call's deadline)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/x"
        with requests.Session() as session:
            assert session.get(url, timeout=5).json() == {"ok": True}
            time.sleep(DEADLINE_S + network.GRACE_S + 0.3)
            assert session.get(url, timeout=5).json() == {"ok": True}
    finally:
        server.shutdown()
        server.server_close()


def test_an_upload_has_a_downloads_deadline_and_an_api_call_does_not():
    """An artifact's upload (a file body) may take minutes; a JSON call is held to NMT_SWEEPER_TIMEOUT."""
    import io

    assert network._uploads(requests.Request("PUT", "http://x/a", data=io.BytesIO(b"model")).prepare())
    assert network._uploads(requests.Request("PUT", "http://x/a", data=b"0" * (network.UPLOAD_BYTES + 1)).prepare())
    assert not network._uploads(requests.Request("POST", "http://x/a", json={"run_id": "1"}).prepare())
    assert not network._uploads(requests.Request("GET", "http://x/a").prepare())
