"""The last-resort handler's rules, shared by every entry point (`nmt`, `sweeper`, the API, the Ray job's driver):
an exception no check foresaw still becomes one line through the output gate, never a traceback carrying a
server's own text (its escape sequences, its echo of a credential).

A store, server or file system that fails (OSError, and the errors of the libraries that talk to one: MLflow, Ray,
requests, SQLAlchemy, pyarrow) is something the user can fix or retry, like bad input: exit 2. Anything else is a
fault of this program: exit 1, named as one, its traceback only behind `--debug` (or in a Ray job's log, whose
driver runs with it).
"""

from __future__ import annotations

import argparse
import traceback

from nmt_core.gates.gate import hide_secrets, one_line, printable
from nmt_core.gates.streams import say

BAD_INPUT, FAULT = 2, 1
# the libraries whose exceptions say that a store, a server or a cluster failed, by the module they are defined in
STORE_LIBRARIES = ("mlflow", "ray", "requests", "urllib3", "sqlalchemy", "pyarrow", "botocore", "psycopg2", "pymysql")


def exit_code(err: BaseException) -> int:
    """BAD_INPUT for a store, server or file system that failed: an OSError, an error of a library that talks to
    one, or any error raised inside such a library (Ray's client reading a dashboard's answer that lacks a key
    raises KeyError); FAULT for anything else."""
    if isinstance(err, OSError):
        return BAD_INPUT
    modules = [cls.__module__ or "" for cls in type(err).__mro__]
    frame = err.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    if frame is not None:
        modules.append(frame.tb_frame.f_globals.get("__name__") or "")
    return BAD_INPUT if any(module.split(".")[0] in STORE_LIBRARIES for module in modules) else FAULT


def fault_line(err: BaseException, hint: str = "") -> str:
    """The one line an unforeseen exception shows: its type and its message through the gate (credentials hidden,
    escaped, bounded), and for a fault of this program, that it is one (with `hint`: where its traceback is)."""
    name, text = type(err).__name__, message(err)
    if exit_code(err) == BAD_INPUT:
        return one_line(f"{name}: {text}")
    return one_line(f"internal error, please report it{hint} ({name}: {text})")  # the hint before what is cut


def message(err: BaseException) -> str:
    """str(err), or what it is when its __str__ fails (an exception a library built from a hostile answer)."""
    try:
        return str(err)
    except Exception:  # noqa: BLE001 - never trusted to behave
        return "(its message cannot be shown)"


def add_debug(parser: argparse.ArgumentParser) -> None:
    """`PROG --debug COMMAND ...`: an unforeseen error's traceback on stderr too (escaped, credentials hidden)."""
    parser.add_argument(
        "--debug", action="store_true", help="on an error, also print its traceback (escaped, credentials hidden)"
    )


def report(prog: str, err: BaseException, debug: bool) -> int:
    """The last-resort handler of a command line: the traceback with --debug, then one line; its exit code."""
    if debug:
        say(traceback_text(err).rstrip("\n"))
    hint = "" if debug else f"; {prog} --debug shows its traceback"
    say(f"{prog}: error: {fault_line(err, hint)}")
    return exit_code(err)


def traceback_text(err: BaseException) -> str:
    """The traceback of `err` as it may be shown (--debug): every line escaped, credentials hidden."""
    return printable(hide_secrets("".join(traceback.format_exception(err))))
