"""The sweep's console: our lines for a person; Ray's lines in the sweep's log file (and on the console with --verbose).

Where Ray's lines come from (Ray 2.x, read in its source):
- the trial workers' stdout and stderr: our per-epoch lines, ray.train's INFO "Checkpoint successfully created at:
  ...", tracebacks. `ray.init(log_to_driver=True)` forwards them; a thread of Ray's on the driver prints them to
  whatever `sys.stdout` / `sys.stderr` are at that moment, behind an ANSI-coloured `(run_trial pid=...)` prefix;
- Tune's reporter (`RAY_AIR_NEW_OUTPUT`, on by default, prints at `verbose=0` too): the configuration box, "View
  detailed results here" and the TensorBoard hint, from the thread that calls `Tuner.fit`;
- the driver's `ray` loggers (the token-auth warning of `ray.init`, Tune's "Trial task failed" tracebacks), whose
  PlainRayHandler writes to the `sys.stderr` of the moment; MLflow's handler does the same.

So while a sweep runs, `sys.stdout` and `sys.stderr` route by who writes: the sweep's own thread outside Ray's calls
(the start line, the ranking, the links) reaches the console; other threads, and anything written inside
`ray_calls()` (around `ray.init` and `Tuner.fit`), go to the log, and to the console too with verbose. Our lines
written inside Ray's calls (the progress board, one line per trial) go to `console()`. Every line also lands in the
log, without ANSI codes; the console gets none either unless it is a terminal.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

from nmt_core.gates.gate import open_append
from sweeper.space.spec import SpecError
from sweeper.storage.store import Storage

LOG_FILE = "sweep.log"  # beside results.parquet
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class SweepLog:
    """The log file, opened once Ray starts (a refused sweep leaves nothing behind); lines before that wait."""

    def __init__(self, path: Path, folder: Callable[[], Path] | None = None):
        self.path = path
        self.folder = folder or (lambda: path.parent)  # makes and checks the folder when the log opens
        self.file: TextIO | None = None
        self.waiting: list[tuple[str, bool]] = []  # (text, shown on the console)
        self.lock = threading.Lock()

    def open(self) -> None:
        with self.lock:
            if self.file is None:  # appended to, never through a link, in a folder inside the storage
                self.folder().mkdir(parents=True, exist_ok=True)  # a storage's: made once proven inside it
                self.file = os.fdopen(open_append(self.path, SpecError), "a", encoding="utf-8")
                self.file.write("".join(text for text, _ in self.waiting))
                self.waiting.clear()

    def write(self, text: str, shown: bool) -> None:
        text = ANSI.sub("", text)
        with self.lock:
            if self.file is None:
                self.waiting.append((text, shown))
            else:
                self.file.write(text)
                self.file.flush()

    def close(self) -> tuple[bool, str]:
        """Whether the log was written, and what no one saw if it was not."""
        with self.lock:
            if self.file is not None:
                self.file.close()
                return True, ""
            return False, "".join(text for text, shown in self.waiting if not shown)


class ConsoleStream(io.TextIOBase):
    """A person's console, and the log beside it; ANSI codes only to a terminal."""

    def __init__(self, console: TextIO, log: SweepLog):
        self.console, self.log = console, log
        self.tty = bool(getattr(console, "isatty", lambda: False)())

    def write(self, text: str) -> int:
        self.log.write(text, shown=True)
        self.console.write(text if self.tty else ANSI.sub("", text))
        return len(text)

    def flush(self) -> None:
        self.console.flush()

    def isatty(self) -> bool:
        return self.tty

    @property
    def encoding(self) -> str:
        return getattr(self.console, "encoding", None) or "utf-8"


class RouterStream(ConsoleStream):
    """`sys.stdout` / `sys.stderr` while a sweep runs: see the module docstring."""

    def __init__(self, console: TextIO, log: SweepLog, verbose: bool):
        super().__init__(console, log)
        self.verbose = verbose
        self.owner = threading.current_thread()
        self.in_ray = 0  # > 0 inside ray_calls()

    def write(self, text: str) -> int:
        ours = threading.current_thread() is self.owner and not self.in_ray
        if ours or self.verbose:
            return super().write(text)
        self.log.write(text, shown=False)
        return len(text)

    def isatty(self) -> bool:  # Ray and tqdm colour and redraw for a terminal; the log is none
        return self.tty and self.verbose

    def fileno(self) -> int:
        return self.console.fileno()


_active: list[tuple[RouterStream, RouterStream, ConsoleStream]] = []  # the sweep running in this process


def console() -> TextIO:
    """Where our lines go: the person's console (and the log) while a sweep runs, else stdout."""
    return _active[-1][2] if _active else sys.stdout


@contextlib.contextmanager
def ray_calls() -> Iterator[None]:
    """Around ray.init and Tuner.fit: what is printed inside goes to the log (opened here), not the console."""
    if not _active:
        yield
        return
    out, err, ours = _active[-1]
    ours.log.open()
    out.in_ray += 1
    err.in_ray += 1
    try:
        yield
    finally:
        out.in_ray -= 1
        err.in_ray -= 1


@contextlib.contextmanager
def sweep_console(experiment: Storage, verbose: bool = False) -> Iterator[None]:
    """Route the console for one sweep whose folder in storage is `experiment`; the log goes to
    `<experiment>/sweep.log` (written locally and uploaded at the end for object storage)."""
    with contextlib.ExitStack() as stack:
        if experiment.is_local:
            log = SweepLog(Path(experiment.path(LOG_FILE)), lambda: experiment.local_folder(LOG_FILE))
        else:
            log = SweepLog(Path(stack.enter_context(tempfile.TemporaryDirectory())) / LOG_FILE)
        out, err = RouterStream(sys.stdout, log, verbose), RouterStream(sys.stderr, log, verbose)
        ours = ConsoleStream(sys.stdout, log)
        warnings = logging.StreamHandler(ConsoleStream(sys.stderr, log))  # sweeper.tracking.runs's, also inside fit
        warnings.setLevel(logging.WARNING)
        logging.getLogger("sweeper").addHandler(warnings)
        _active.append((out, err, ours))
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                yield
        finally:
            _active.pop()
            logging.getLogger("sweeper").removeHandler(warnings)
            written, unseen = log.close()
            sys.stderr.write(unseen)  # Ray never started: what was held back for the log belongs on the console
            if written:
                if not experiment.is_local:
                    earlier = experiment.read_bytes(LOG_FILE) if experiment.exists(LOG_FILE) else b""
                    experiment.write_bytes(earlier + log.path.read_bytes(), LOG_FILE)  # a resumed sweep appends
                print(f"Ray's output: {experiment.display(LOG_FILE)}" + ("" if verbose else " (--verbose shows it)"))
