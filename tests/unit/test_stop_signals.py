"""SIGTERM to a sweep's driver is Ctrl+C while Tune runs (issue #70 item 5; sweeper/running/stop_signals.py): it goes
to SIGINT's handler of the moment (Ray Tune's graceful stop), never to Ray's, which ends the driver without saving;
the handler before comes back after; a SIGTERM that ended the local Ray's processes too (sent to the process group)
goes to Ray's. A `sleep` stands for the local Ray's processes. The end-to-end cases (exit 130, lock released, status
`stopped`; then `resume`): test_a_driver_ended_by_a_signal_leaves_a_sweep_that_resume_finishes in
tests/e2e/test_sweep_e2e.py."""

from __future__ import annotations

import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from sweeper.running import stop_signals
from sweeper.running.stop_signals import sigterm_as_ctrl_c


@pytest.fixture
def local_ray(monkeypatch) -> Iterator[subprocess.Popen]:
    """A process standing for the local Ray's (GCS, raylet), which the block finds alive when it starts."""
    process = subprocess.Popen(["sleep", "600"])
    monkeypatch.setattr(stop_signals, "local_ray_processes", lambda: [process])
    monkeypatch.setattr(stop_signals, "RAY_GONE_WAIT_S", 0.2)
    yield process
    process.kill()
    process.wait()


@contextmanager
def handlers(sigint: Callable | int, sigterm: Callable | int) -> Iterator[None]:
    """SIGINT's and SIGTERM's handlers set for the block (Tune's and Ray's stand-ins), then this process's again."""
    before = signal.signal(signal.SIGINT, sigint), signal.signal(signal.SIGTERM, sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before[0])
        signal.signal(signal.SIGTERM, before[1])


def test_sigterm_is_given_to_sigints_handler_and_the_handler_before_comes_back(local_ray):
    seen: list[str] = []
    ray = lambda signum, frame: seen.append(f"ray {signum}")  # noqa: E731
    with handlers(lambda signum, frame: seen.append(f"tune {signum}"), ray):
        with sigterm_as_ctrl_c():
            signal.raise_signal(signal.SIGTERM)
        assert signal.getsignal(signal.SIGTERM) is ray
        signal.raise_signal(signal.SIGTERM)
    assert seen == [f"tune {signal.SIGINT}", f"ray {signal.SIGTERM}"]


@pytest.mark.parametrize("sigint", [signal.SIG_IGN, signal.default_int_handler], ids=["ignored", "python"])
def test_sigterm_without_a_handler_of_sigint_is_keyboard_interrupt(sigint, local_ray):
    """A shell's background job ignores SIGINT; Python's own handler is Ctrl+C before Tune's and after its first
    stop request: KeyboardInterrupt, which `sweeper` ends with exit 130 and the lock released."""
    with handlers(sigint, signal.SIG_DFL), pytest.raises(KeyboardInterrupt), sigterm_as_ctrl_c():
        signal.raise_signal(signal.SIGTERM)


def test_a_sigterm_that_ended_the_local_rays_processes_goes_to_rays_handler(local_ray):
    """SIGTERM to the driver's process group: Ray's processes end too, and nothing is left to stop gracefully."""
    seen: list[str] = []
    with handlers(lambda signum, frame: seen.append("tune"), lambda signum, frame: seen.append("ray")):
        with sigterm_as_ctrl_c():
            local_ray.terminate()  # the group's signal, as it reaches the GCS
            signal.raise_signal(signal.SIGTERM)
    assert seen == ["ray"]


def test_outside_the_main_thread_sigterm_is_left_alone():
    """Only the main thread may set a handler: a sweep an embedding program runs in a thread keeps Ray's."""
    with handlers(signal.default_int_handler, signal.SIG_DFL):
        found: list = []

        def in_a_thread() -> None:
            with sigterm_as_ctrl_c():
                found.append(signal.getsignal(signal.SIGTERM))

        thread = threading.Thread(target=in_a_thread)
        thread.start()
        thread.join()
        assert found == [signal.SIG_DFL]
