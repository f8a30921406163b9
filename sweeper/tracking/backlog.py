"""Tracking writes the MLflow server did not take, kept in the sweep's storage, in order, until it answers.

Ray's storage already holds every result, so an outage of the tracking server must cost nothing: the
driver queues each write it could not send, and replays the queue on reconnect, at the end of the sweep,
and on `sweeper resume` (by then possibly another driver on another machine).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from nmt_core.gates.decoders import json_value
from sweeper.space.spec import SpecError
from sweeper.storage.store import Storage

BACKLOG_FILE = "tracking_backlog.jsonl"

Write = dict[str, Any]  # {"kind": "open" | "metrics" | "tags" | "exploits" | "artifacts" | "model" | "end", ...}


class Backlog:
    """A FIFO of JSON writes, mirrored to storage after every change (it is small: one line per write)."""

    def __init__(self, storage: Storage | None):
        self.storage = storage
        self.writes: list[Write] = []
        if storage is not None and storage.exists(BACKLOG_FILE):
            text = storage.read_text(BACKLOG_FILE)
            where = storage.display(BACKLOG_FILE)
            self.writes = [json_value(line.encode(), where, SpecError) for line in text.splitlines() if line.strip()]

    def __len__(self) -> int:
        return len(self.writes)

    def append(self, write: Write) -> None:
        self.writes.append(write)
        self._save()

    def replay(self, send: Callable[[Write], None]) -> bool:
        """Send the writes in order; the first failure stops the replay and keeps it and the rest. True when empty."""
        sent = 0
        try:
            for write in self.writes:
                send(write)
                sent += 1
        finally:
            if sent:
                del self.writes[:sent]
                self._save()
        return not self.writes

    def _save(self) -> None:
        if self.storage is None:
            return
        if self.writes:
            self.storage.write_text("".join(json.dumps(w) + "\n" for w in self.writes), BACKLOG_FILE)
        else:
            self.storage.delete(BACKLOG_FILE)
