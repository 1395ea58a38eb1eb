"""Cheap calls before walks: graph walks take turns, one at a time per process (ADR 0018).

Walks (`get_neighbors`, `find_paths`, `query_graph`: handlers marked `@walk` in `core.dispatch.dispatcher`) are pure
Python,
so they hold the GIL while they run, and the thread serving a cheap read (the event loop answering `get_node`)
waits for its turn at every hand-off; they also read the store, and while they hold its connection a cheap read
cannot run on the event loop. With one walk at a time, the event loop contends with one thread instead of many:
the other walks wait for their turn on a lock, off the interpreter, and that wait counts against their wall-time
bound (past it they answer `limit_exceeded`, `limit: "time_s"`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Generator
from contextlib import contextmanager

__all__ = ["Priority"]


class Priority:
    """The turns walks take: `walks` at a time (default one)."""

    def __init__(self, walks: int = 1) -> None:
        self._turns = threading.Semaphore(walks)

    @contextmanager
    def walk(self, deadline: float) -> Generator[bool]:
        """A turn to walk for the block, taken by `deadline` (`time.monotonic()`): True; False (and no turn) if the
        deadline came first."""
        if not self._turns.acquire(timeout=max(0.0, deadline - time.monotonic())):
            yield False
            return
        try:
            yield True
        finally:
            self._turns.release()
