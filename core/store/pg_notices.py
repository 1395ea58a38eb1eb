"""Commit notices between the processes sharing one PostgreSQL store: LISTEN/NOTIFY on one canon channel.

Every write transaction that adds to the change log sends `NOTIFY canon_changes` (`announce`), which PostgreSQL
delivers to every listening session when, and only if, the transaction commits. Each process listens on one
connection of its own, outside the pool (`Listener`, a thread), and calls its `wake` at every notice, so a
replica's change feed syncs at once instead of on its next tick.

A notice is only a wake-up: the change log is the truth. A notice lost (the listening connection dropped, the
server restarted) loses no change, since the follower still checks the log's revision on a slow fallback tick,
and the listener, reconnecting, wakes its follower once for whatever was committed while it was not listening.
See docs/decisions/0034-replicas-follow-the-change-log.md.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import psycopg

__all__ = ["APPLICATION_NAME", "CHANNEL", "Listener", "announce"]

CHANNEL = "canon_changes"
APPLICATION_NAME = "canon-listen"  # the listening session's name in pg_stat_activity
POLL_S = 0.25  # how often the listening thread looks up from the socket to see whether it must stop
RETRY_S = (0.05, 2.0)  # the first and the longest wait before connecting again

log = logging.getLogger("canon.store")


def announce(db: psycopg.Connection[Any], revision: int) -> None:
    """Inside a write transaction: tell every listener, once the transaction commits, that the log reached
    `revision` (the payload is for people reading the server's traffic; listeners read the log itself)."""
    db.execute("SELECT pg_notify(%s, %s)", (CHANNEL, str(revision)))


class Listener:
    """A thread listening on `CHANNEL` on a connection of its own, calling `wake` at each notice and after each
    (re)connection; `stop()` ends it within `POLL_S` and closes its connection."""

    def __init__(self, url: str, wake: Callable[[], None], location: str) -> None:
        self._url = url
        self._wake = wake
        self._location = location
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="canon-pg-listener", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to end (it closes its connection as it goes); returns at once."""
        self._stop.set()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        retry = RETRY_S[0]
        while not self._stop.is_set():
            try:
                self._listen()
                retry = RETRY_S[0]
            except psycopg.Error as exc:
                if self._stop.is_set():
                    return
                log.warning("listening for commits on %s failed (%s); again in %.2f s", self._location, exc, retry)
                self._stop.wait(retry)
                retry = min(retry * 2, RETRY_S[1])

    def _listen(self) -> None:
        """Listen until stopped (returns) or the connection fails (raises)."""
        with psycopg.connect(self._url, autocommit=True, application_name=APPLICATION_NAME) as db:
            db.execute(f"LISTEN {CHANNEL}")
            self._wake()  # whatever was committed while this process was not listening
            while not self._stop.is_set():
                for _ in db.notifies(timeout=POLL_S):
                    self._wake()  # cheap: the follower coalesces wake-ups and reads the whole log anyway
