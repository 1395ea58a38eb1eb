"""The audit log: one record per call on every surface, appended to the store and never changed.

`Dispatcher` builds an `AuditRecord` for every tool call, tool listing, resource read or list, subscription,
completion and rejected request, and hands it to `AuditLog.append`. Appending only queues it: a writer
thread commits the queue in batches on a connection of its own (so an audited read never waits for the
disk or for another process's write lock). `flush()` writes everything queued so far before it returns;
`close()` flushes and stops. The store refuses to update or delete audit rows.

Records hold a digest of the arguments, never their values, and never a token.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["AuditLog", "AuditQuery", "AuditRecord"]

log = logging.getLogger("canon.audit")


@dataclass(frozen=True)
class AuditRecord:
    at: str
    principal: str
    surface: str  # "mcp-stdio", "mcp-http", ...
    action: str  # "tools/call", "tools/list", "resources/read", "resources/list", "completion/complete", ...
    target: str  # the tool name or resource URI
    arguments_digest: str
    outcome: str  # one of core.dispatch.dispatcher.OUTCOMES
    revision: int
    duration_ms: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def tool(self) -> str:
        """The tool called, when this records a call of a tool the registry knows; "" otherwise. What metrics and
        traces name a call by: a resource's URI (it may name a node), a misspelt tool name (anything a client
        sends) and a refused request's path are never names to count or trace by."""
        return self.target if self.action == "tools/call" and self.outcome != "unknown" else ""


@dataclass(frozen=True)
class AuditQuery:
    """Which audit records to read: all of these that are given must hold."""

    principal: str | None = None
    target: str | None = None
    outcome: str | None = None
    surface: str | None = None
    since: str | None = None  # ISO 8601 UTC; records at or after it


class AuditLog:
    """Queue audit records and commit them in batches from a writer thread."""

    def __init__(self, write: Callable[[Sequence[AuditRecord]], None], *, interval_s: float = 0.05,
                 max_pending: int = 100_000) -> None:  # fmt: skip
        self._write = write
        self._interval_s = interval_s
        self._max_pending = max_pending
        self._pending: deque[AuditRecord] = deque()
        self._wake = threading.Condition()
        self._writing = threading.Lock()  # one batch at a time, in order
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="canon-audit-writer", daemon=True)
        self._thread.start()

    def append(self, record: AuditRecord) -> None:
        with self._wake:
            if self._closed:
                raise RuntimeError("the audit log is closed")
            while len(self._pending) >= self._max_pending:  # never drop a record: wait for the writer instead
                self._wake.notify_all()
                self._wake.wait(self._interval_s)
            self._pending.append(record)
            self._wake.notify_all()

    __call__ = append  # an AuditLog is itself a dispatcher audit hook

    def flush(self) -> None:
        """Write every record appended before this call."""
        with self._writing:
            with self._wake:
                batch = list(self._pending)
                self._pending.clear()
                self._wake.notify_all()
            if batch:
                try:
                    self._write(batch)
                except BaseException:
                    with self._wake:  # keep them, in order, for the next attempt
                        self._pending.extendleft(reversed(batch))
                    raise

    def pending(self) -> int:
        with self._wake:
            return len(self._pending)

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify_all()
        self._thread.join()
        self.flush()

    def _run(self) -> None:
        while True:
            with self._wake:
                if not self._pending and not self._closed:
                    self._wake.wait()
                if self._closed:
                    return
            try:
                self.flush()
            except Exception:  # the store is busy or failing: keep the records and try again shortly
                log.warning("writing the audit log failed; will retry", exc_info=True)
                time.sleep(1.0)
            time.sleep(self._interval_s)  # let a burst of calls gather into one batch
