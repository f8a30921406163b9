"""Where an epoch is: steps done, tokens/s, loss so far and ETA, for a terminal bar or plain log lines.

`train()` calls `start(epoch, epochs, steps)`, then `step(step, tokens, mean_loss)` after every update; the
loss is a callable so that it is read (a host-device sync on a GPU) only when something is shown.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Protocol, TextIO


class EpochProgress(Protocol):
    def start(self, epoch: int, epochs: int, steps: int) -> None: ...
    def step(self, step: int, tokens: int, mean_loss: Callable[[], float]) -> None: ...
    def end(self) -> None: ...


def eta(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    return (
        f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        if seconds >= 3600
        else f"{seconds // 60}:{seconds % 60:02d}"
    )


class ConsoleProgress:
    """A bar redrawn in place on a terminal; elsewhere (a log file, Ray's worker logs) a plain line every
    `every_s` seconds, so that long epochs are not silent and short ones add no noise."""

    def __init__(self, stream: TextIO = sys.stderr, every_s: float | None = None):
        self.stream = stream
        self.tty = stream.isatty()
        self.every_s = every_s if every_s is not None else (0.2 if self.tty else 30.0)

    def start(self, epoch: int, epochs: int, steps: int) -> None:
        self.epoch, self.epochs, self.steps = epoch, epochs, steps
        self.begin = self.last = time.perf_counter()
        self.shown = False

    def step(self, step: int, tokens: int, mean_loss: Callable[[], float]) -> None:
        now = time.perf_counter()
        if now - self.last < self.every_s and step < self.steps:
            return
        self.last = now
        elapsed = now - self.begin
        line = (
            f"epoch {self.epoch}/{self.epochs} {step}/{self.steps} steps, {tokens / elapsed:,.0f} tok/s, "
            f"loss {mean_loss():.3f}, ETA {eta(elapsed / step * (self.steps - step))}"
        )
        if self.tty:
            done = int(20 * step / self.steps)
            self.stream.write(f"\r[{'#' * done}{'.' * (20 - done)}] {line}\x1b[K")
            self.shown = True
        elif step < self.steps:  # the epoch's own summary line follows at its end
            self.stream.write(line + "\n")
        self.stream.flush()

    def end(self) -> None:
        if self.tty and self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
