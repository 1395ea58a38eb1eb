"""Cheap calls before walks: who gets the interpreter while graph walks run (ADR 0018).

Walks (`get_neighbors`, `find_paths`, `query_graph`: handlers marked `@walk` in `core.dispatch`) are pure Python,
so they hold the GIL while they run, and a thread serving a cheap read (the event loop answering `get_node`) waits
for its turn at every hand-off. Two rules keep cheap calls ahead of walks, per dispatcher (one per process):

* **One walk at a time** (`Priority.walk`): the others wait for their turn on a lock, off the interpreter, and that
  wait counts against their wall-time bound (past it they answer `limit_exceeded`, `limit: "time_s"`). Walks all
  need the one interpreter anyway, so their total throughput stays; fewer threads contend with the event loop.
* **A walk gives way to cheap work** (`Turn.give_way`, called wherever a walk checks its deadline): the HTTP host
  counts every request in flight (`Priority.enter` at the ASGI app's door, `Priority.leave` when its response is
  complete or turns into a stream), and a request stops counting while the dispatcher runs a walk for it. While the
  count is above zero a walk waits, off the interpreter, for it to drop to zero, at most `give_way_s` at a time;
  after a wait that ran out it walks on at least as long before it gives way again, so under a flood of cheap
  requests walks still get about half the interpreter and their deadline still bounds them.

Reading the count is one attribute load, so a walk pays nothing measurable when nobody waits. Calls that reach the
dispatcher without going through a counted request (stdio, in-process callers) still take turns to walk, and give
way to whatever the HTTP host counts.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Generator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["GIVE_WAY_S", "Priority", "Request", "Turn", "current_request"]

GIVE_WAY_S = 0.005  # the longest a walk waits for cheap work at a time, and the least it then walks on


class Request:
    """A request the host counts as cheap work: while it is in flight, not finished, and not running a walk."""

    __slots__ = ("finished", "walks")

    def __init__(self) -> None:
        self.walks = 0  # walks the dispatcher is running for it (a GraphQL query may run several)
        self.finished = False

    @property
    def counted(self) -> bool:
        return not self.finished and self.walks == 0


current_request: ContextVar[Request | None] = ContextVar("canon_request", default=None)
"""The counted request this code runs for: set by the host, seen by worker threads the call is handed to (anyio
and Starlette copy the context into them)."""


class Priority:
    """The count of cheap work in flight, and the turns walks take."""

    def __init__(self, walks: int = 1, give_way_s: float = GIVE_WAY_S) -> None:
        self.cheap = 0  # counted requests in flight: written under `_changed`, read by walks without it
        self.give_way_s = give_way_s
        self._changed = threading.Condition(threading.Lock())
        self._waiting = 0  # walks waiting for `cheap` to drop to zero
        self._turns = threading.Semaphore(walks)

    @property
    def waiting(self) -> int:
        """Walks waiting for cheap work to finish right now."""
        return self._waiting

    # -- the host's side -----------------------------------------------------------------------------------------
    def enter(self) -> Request:
        """Count a request that has just arrived; the caller makes it `current_request` for the code serving it."""
        request = Request()
        with self._changed:
            self.cheap += 1
        return request

    def leave(self, request: Request) -> None:
        """`request` is done (its response sent, or streaming from now on): it counts no more. Idempotent."""
        self._change(request, finish=True)

    def _change(self, request: Request, *, walks: int = 0, finish: bool = False) -> None:
        with self._changed:
            was = request.counted
            request.walks += walks
            request.finished = request.finished or finish
            if was != request.counted:
                self.cheap += 1 if request.counted else -1
                if self.cheap == 0 and self._waiting:
                    self._changed.notify_all()

    # -- the walks' side -----------------------------------------------------------------------------------------
    @contextmanager
    def walk(self, deadline: float) -> Generator[Turn | None]:
        """A turn to walk, taken by `deadline` (`time.monotonic()`); None if the deadline passed first. The current
        request, if any, counts as cheap work no more until the block ends."""
        request = current_request.get()
        if request is not None:
            self._change(request, walks=1)
        try:
            if not self._turns.acquire(timeout=max(0.0, deadline - time.monotonic())):
                yield None
                return
            try:
                yield Turn(self, deadline)
            finally:
                self._turns.release()
        finally:
            if request is not None:
                self._change(request, walks=-1)

    def wait_for_quiet(self, until: float) -> bool:
        """Wait (off the interpreter) until no cheap work is in flight, or until `until`; True if it is quiet."""
        with self._changed:
            self._waiting += 1
            try:
                while self.cheap and (left := until - time.monotonic()) > 0:
                    self._changed.wait(left)
            finally:
                self._waiting -= 1
            return not self.cheap


class Turn:
    """One walk's turn: where it gives way to cheap work."""

    __slots__ = ("deadline", "not_before", "priority")

    def __init__(self, priority: Priority, deadline: float) -> None:
        self.priority = priority
        self.deadline = deadline
        self.not_before = 0.0  # after a wait that ran out: no giving way again before this

    def give_way(self) -> None:
        """Wait while cheap work is in flight: at most `give_way_s` (and never past the deadline), then walk on at
        least as long before waiting again. Costs one attribute load when nothing is in flight."""
        priority = self.priority
        if not priority.cheap:
            return
        now = time.monotonic()
        if now < self.not_before:
            return
        if not priority.wait_for_quiet(min(now + priority.give_way_s, self.deadline)):
            self.not_before = time.monotonic() + priority.give_way_s
