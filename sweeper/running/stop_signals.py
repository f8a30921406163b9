"""SIGTERM to a sweep's driver is Ctrl+C (issue #70 item 5): `kill PID`, a job runner's or a container's stop, ends
`sweeper run`, `resume` and `extend` with Ray Tune's graceful stop, as SIGINT and `sweeper stop` do: the experiment
saved, running trials kept at their last epoch's checkpoint, exit 130, the driver's lock released and status.json
`stopped`.

Ray's own SIGTERM handlers, which ray.init installs, end the driver instead: `sys.exit` from wherever the main thread
is, and, for the local Ray a sweep starts, its node's handler first kills that Ray's GCS, raylet and workers, after
which the driver's core worker aborts (exit -6) and status.json stays `running`. So while Tune runs, SIGTERM is given
to whatever handles SIGINT at that moment: Tune's handler (the graceful stop), or once Tune has had its stop request,
Python's KeyboardInterrupt, a second Ctrl+C. Ray's handlers come back when Tune returns.

SIGTERM to the driver's process group (a terminal's or a job runner's kill of the group, systemd's stop of a unit)
also reaches its local Ray's GCS, raylet and workers, which end at once (Ray blocks SIGINT in them, not SIGTERM):
nothing is left to stop gracefully, and Tune's stop would wait 60 s for a GCS that is gone, then Ray's C++ would
end the driver with the lock held. A SIGTERM after which one of the local Ray's processes ends within a second goes
to Ray's handler, as before (exit -6 at once, lock released, status.json `running`, which `sweeper status` reads as
stopped since its driver is gone); either way the next `sweeper resume` finishes the sweep.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from types import FrameType

RAY_GONE_WAIT_S = 1.0  # how long a SIGTERM looks for the local Ray's processes ending too (one ends within 0.05 s)


@contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """While the block runs, SIGTERM is handled as SIGINT would be, unless it reached the local Ray too. Only the
    main thread may set handlers (an embedding program's sweep run from another thread keeps Ray's)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    ray_handler = signal.getsignal(signal.SIGTERM)  # None: one set outside Python, which cannot be put back
    signal.signal(signal.SIGTERM, partial(stop_or_end, ray_handler, local_ray_processes()))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if ray_handler is None else ray_handler)


def stop_or_end(
    ray_handler: Callable | int | None, ray_processes: list[subprocess.Popen], signum: int, frame: FrameType | None
) -> None:
    """Ctrl+C's graceful stop, or Ray's handler where the signal ended the local Ray's processes too."""
    if callable(ray_handler) and any_ended(ray_processes, RAY_GONE_WAIT_S):
        ray_handler(signum, frame)
    else:
        as_ctrl_c(signum, frame)


def local_ray_processes() -> list[subprocess.Popen]:
    """The processes of the local Ray this driver started (GCS, raylet, monitors), those alive now; none where it
    joined a cluster (Ray's node in this process then started none)."""
    from ray._private import worker

    started = getattr(getattr(worker, "_global_node", None), "all_processes", None) or {}
    return [info.process for infos in started.values() for info in infos if info.process.poll() is None]


def any_ended(processes: list[subprocess.Popen], wait_s: float) -> bool:
    """Whether one of `processes` has ended or ends within `wait_s` seconds."""
    deadline = time.monotonic() + wait_s
    while processes:
        if any(process.poll() is not None for process in processes):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return False


def as_ctrl_c(signum: int, frame: FrameType | None) -> None:
    """SIGTERM given to SIGINT's handler of the moment; where SIGINT is ignored (a shell's background job) or left to
    the system, to Python's own (KeyboardInterrupt): a SIGTERM must end the sweep even where Ctrl+C cannot."""
    handler = signal.getsignal(signal.SIGINT)
    if not callable(handler):
        handler = signal.default_int_handler
    handler(signal.SIGINT, frame)
