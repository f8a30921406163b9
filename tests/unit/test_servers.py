"""The test servers take their ports without a race, and one that exits early says why (issue 75 item 5).

A port picked free, closed and handed to a server that binds it later could be bound meanwhile by another xdist
worker's Ray node; the server then exited, `mlflow server` with 0, and the failure showed none of its output.
"""

from __future__ import annotations

import socket

import pytest
import requests

from tests import servers
from tests.servers import EPHEMERAL, QUIET_FLOOR, FakeGcs, MlflowServer, ServerExited, quiet_port


@pytest.fixture
def held_port():
    """A port another process's server has bound (listening on 127.0.0.1), as the other worker's Ray node had."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", quiet_port()))
        holder.listen()
        yield holder.getsockname()[1]


def test_a_server_whose_port_was_taken_meanwhile_starts_on_another(tmp_path, monkeypatch, held_port):
    """fake-gcs-server cannot bind port 0 and say which it got: it is handed the held port first, as if another
    process had bound it between the pick and the server's bind; it exits, saying so, and starts on the next."""
    picks = iter([held_port])
    monkeypatch.setattr(servers, "quiet_port", lambda: next(picks, None) or quiet_port())
    gcs = FakeGcs(tmp_path)
    try:
        assert gcs.port != held_port
        assert requests.get(f"{gcs.endpoint}/storage/v1/b/sweeps", timeout=10).ok  # its bucket, made after the start
        assert "address already in use" in gcs.log_path.read_text()  # the first start's, on the held port
    finally:
        gcs.stop()


def test_a_port_taken_on_every_try_fails_with_the_servers_output(tmp_path, monkeypatch, held_port):
    monkeypatch.setattr(servers, "quiet_port", lambda: held_port)
    with pytest.raises(ServerExited) as failed:
        FakeGcs(tmp_path)
    assert failed.value.port_taken and f"127.0.0.1:{held_port}" in str(failed.value)
    assert str(failed.value).count("address already in use") == 1  # the last start's output, not every start's


def test_a_server_that_exits_early_leaves_its_output_in_the_failure(tmp_path):
    """The server's output goes to a log file; the failure's message quotes it (it said nothing of why before)."""
    with pytest.raises(ServerExited) as failed:
        MlflowServer(tmp_path, args=("--no-such-option",))
    message = str(failed.value)
    assert "exited with 2 before it said which port it bound" in message and "No such option" in message, message
    assert not failed.value.port_taken


def test_quiet_ports_lie_below_the_kernels_ephemeral_range():
    """Ports from the ephemeral range go to port-0 binds and outgoing connections: a quiet port is never one."""
    low = int(EPHEMERAL.read_text().split()[0])
    ports = {quiet_port() for _ in range(20)}
    assert all(QUIET_FLOOR <= port < low for port in ports) and len(ports) > 1
