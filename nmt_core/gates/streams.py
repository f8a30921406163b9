"""The standard streams as the environment hands them over (issue #70 item 7): whatever they are, a command ends in
one line or, where no stream is left to hold one, in its exit code alone; never in a program fault.

- `PYTHONIOENCODING=ascii` (or latin-1): stdout wrote 'λ' as a UnicodeEncodeError (exit 1, "internal error"); every
  standard text stream now writes what its encoding cannot as a backslash escape (`\\u03bb`), as Python's own stderr
  does;
- a closed descriptor 0, 1 or 2 (`<&-`, `2>&-`): the next file the program opened took its number, so a library
  writing to "stderr" wrote into it; each is opened on /dev/null first, and a closed stdin is remembered, so that
  `nmt translate` says it has no input instead of failing on None;
- stderr or stdout on /dev/full or a closed pipe: a write that fails is dropped (`say`), and `settle` replaces a
  stream whose flush fails with /dev/null, so that Python's own flush at exit neither prints "Exception ignored"
  nor turns the exit code into 120;
- a library's chatter (MLflow's WARNING lines, Python warnings) stays off stderr unless --debug (`library_output`):
  `MLFLOW_TRACKING_URI=databricks` printed MLflow's warning ahead of our line.
"""

from __future__ import annotations

import io
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

STREAMS = ("stdin", "stdout", "stderr")
_closed: set[str] = set()  # the standard streams that were closed when the command started


def guard_streams() -> set[str]:
    """At an entry point, before anything is opened: descriptors 0-2 open (on /dev/null where they were closed), the
    standard text streams present and escaping what their encoding cannot write. Returns the streams that were
    closed."""
    _closed.clear()
    for fd, name in enumerate(STREAMS):
        if _fd_closed(fd):
            _open_null(fd)
            _closed.add(name)
        if getattr(sys, name) is None:
            setattr(sys, name, open(fd, "r" if fd == 0 else "w", closefd=False, errors="backslashreplace"))  # noqa: SIM115
            _closed.add(name)
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
            try:
                stream.reconfigure(errors="backslashreplace")  # flushes first: a full disk may fail here already
            except (OSError, ValueError):
                pass  # left as it is: the command's first write fails as one line (stdout) or is dropped (say)
    return set(_closed)


def closed(name: str) -> bool:
    """Whether the standard stream `name` was closed when the command started (guard_streams)."""
    return name in _closed


def _fd_closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


def _open_null(fd: int) -> None:
    null = os.open(os.devnull, os.O_RDWR)
    if null != fd:
        os.dup2(null, fd)
        os.close(null)


def say(line: str, stream_name: str = "stderr") -> None:
    """One line on a standard stream; where it cannot be written (/dev/full, a closed pipe), the exit code says it
    alone."""
    try:
        print(line, file=getattr(sys, stream_name), flush=True)
    except (OSError, ValueError, AttributeError):
        _silence(stream_name)


def settle() -> None:
    """Flush stdout and stderr before the command returns; a stream whose flush fails is replaced with /dev/null (its
    text is lost either way), so that the interpreter's flush at exit does not fail too."""
    for name in ("stdout", "stderr"):
        try:
            getattr(sys, name).flush()
        except (OSError, ValueError, AttributeError):
            _silence(name)


def _silence(name: str) -> None:
    try:
        setattr(sys, name, open(os.devnull, "w", errors="backslashreplace"))  # noqa: SIM115 - the process's stream
    except OSError:
        pass


@contextmanager
def library_output(debug: bool) -> Iterator[None]:
    """MLflow's log lines below ERROR and Python's warnings kept off stderr while a command runs (its one line is all
    a refusal prints); with `debug`, everything as the libraries say it. MLflow sets its loggers' level from
    MLFLOW_LOGGING_LEVEL when it is imported, so the variable is set for the block, and the level of a logger
    imported already too; both are put back after."""
    if debug:
        yield
        return
    variable = os.environ.get("MLFLOW_LOGGING_LEVEL")
    logger = logging.getLogger("mlflow")
    level = logger.level
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "ERROR")
    if variable is None:
        logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)
        if variable is None:
            os.environ.pop("MLFLOW_LOGGING_LEVEL", None)
