"""One deadline for a whole command (issue #61): what every network call inside it may take at most.

$NMT_SWEEPER_TIMEOUT bounds one call. A command that reads and prints (`sweeper list`, `status`, `stop`, `logs`,
`summarize`) makes several, so a server that answers each call just before its deadline, or fails each only at it,
held such a command for as many deadlines as it made calls. Inside `command_deadline`, each call's deadline is the
smaller of its own and what is left of the command's (`call_limit`); once the command's has passed, a call fails
at once, so the command ends within its deadline (plus the grace a call needs to stop) with one line naming the
server. The command's deadline is its own variable, NMT_SWEEPER_COMMAND_TIMEOUT, not a multiple of the call's: a
summary of a thousand trials makes hundreds of healthy calls in half a minute, where one call that waits ten
seconds is already a server gone; one number cannot say both.

The deadline lives in a context variable: the API's functions run in the caller's threads, and a command in one
thread must not cut the calls of a sweep that another thread drives (`sweeper run` keeps per-call deadlines). The
threads a command starts for its calls take it along (`carried`).
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from nmt_core.gates.gate import TIMEOUT_VARIABLE, ErrorType, network_timeout, seconds_from

T = TypeVar("T")
COMMAND_TIMEOUT_VARIABLE = "NMT_SWEEPER_COMMAND_TIMEOUT"
LIGHT_COMMAND_S = 30.0  # list, status, stop, logs: a handful of calls, each short on a healthy server
SUMMARY_COMMAND_S = 600.0  # summarize: a 1,000-trial summary takes 30-40 s on 2 cores, 10,000 trials about 5 min


@dataclass(frozen=True)
class CommandDeadline:
    command: str  # as the user typed it: `sweeper status`
    seconds: float  # the whole command's bound, as set
    at: float  # time.monotonic() when it passes

    def left(self) -> float:
        return self.at - time.monotonic()


@dataclass(frozen=True)
class CallLimit:
    """What one call may take: its own deadline, or what is left of its command's, whichever is shorter."""

    seconds: float  # at most 0 when the command's deadline has passed: the call is not made
    own: float  # the call's own deadline (its variable's seconds, or a download's)
    command: CommandDeadline | None  # the command's deadline, where it is the one that binds

    @property
    def passed(self) -> bool:
        return self.seconds <= 0

    def late(self, what: str) -> str:
        """The end of the line a call past this limit ends with: which bound, and the variable that lengthens it."""
        if self.command is None:
            return f"no whole answer within {self.own:g} s ({what}); give it longer with {TIMEOUT_VARIABLE}"
        return (
            f"no whole answer within {self.command.command}'s {self.command.seconds:g} s in all ({what}); give it "
            f"longer with {COMMAND_TIMEOUT_VARIABLE}"
        )


_current: contextvars.ContextVar[CommandDeadline | None] = contextvars.ContextVar("command_deadline", default=None)


@contextmanager
def command_deadline(command: str, default_s: float, error: ErrorType, extra_s: float = 0.0) -> Iterator[None]:
    """Every network call inside the block ends by $NMT_SWEEPER_COMMAND_TIMEOUT seconds from now (`default_s` if
    unset; a bad value is refused with `error`), plus `extra_s` the command waits on purpose (`stop --wait`)."""
    seconds = seconds_from(COMMAND_TIMEOUT_VARIABLE, default_s, error) + extra_s
    token = _current.set(CommandDeadline(command, seconds, time.monotonic() + seconds))
    try:
        yield
    finally:
        _current.reset(token)


def call_limit(own_s: float) -> CallLimit:
    """A call's own deadline `own_s`, cut to what is left of the command's, if one is running."""
    deadline = _current.get()
    if deadline is None or deadline.left() >= own_s:
        return CallLimit(own_s, own_s, None)
    return CallLimit(deadline.left(), own_s, deadline)


def command_passed() -> bool:
    """Whether the running command's deadline has passed (a retry now would only fail at once)."""
    deadline = _current.get()
    return deadline is not None and deadline.left() <= 0


def longer_with(now: bool = False) -> str:
    """The variable that gives a call that ran out of time longer: the command's, once the command's has passed;
    with `now`, and its seconds."""
    deadline = _current.get()
    if deadline is not None and command_passed():
        return f"{COMMAND_TIMEOUT_VARIABLE} (seconds, now {deadline.seconds:g})" if now else COMMAND_TIMEOUT_VARIABLE
    return f"{TIMEOUT_VARIABLE} (seconds, now {network_timeout():g})" if now else TIMEOUT_VARIABLE


def carried(call: Callable[..., T]) -> Callable[..., T]:
    """`call` to run in another thread under this thread's command deadline (a new thread starts without it)."""
    context = contextvars.copy_context()

    def run(*args: Any, **kwargs: Any) -> T:
        return context.copy().run(call, *args, **kwargs)

    return run
