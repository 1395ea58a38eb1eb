"""The change feed: committed changes as events, for every surface that pushes them (MCP notifications, GraphQL
subscriptions, and anything later). Surfaces subscribe here; none syncs the index or decides visibility itself.

The index calls `ChangeFeed.collect` (from whatever thread synced it) with every batch of committed changes,
whoever committed them. `ChangeFeed.pump` runs in the server's event loop: it wakes at once when this process
commits, and commits by *other processes* (replicas on one PostgreSQL database, servers on one SQLite file) are
noticed by syncing the index: at once on the store's notice of a commit (`Store.notices`: PostgreSQL's
LISTEN/NOTIFY) with a slow fallback tick in case a notice is lost, or on a short tick where the store sends none
(SQLite). Each batch it delivers is a `Batch`: the changes in commit order and the resource URIs they touch
(`uris_of`), and the URIs of the proposals that changed since the last batch (`core.dispatch.proposals.Watermark`: a
proposal's state is not in the change log, so each sync also looks at the proposals' own stamps).

Two ways to hear it:

* `subscribe(deliver)`: `deliver` is awaited with every batch, in order (the MCP fan-out, `core.mcp.events`,
  is one such subscriber, and tells its clients by URI).
* `watch(sight, uri)`: every change from now on that touches `uri` (any, when None) and of which `sight` may
  see something (`core.dispatch.access.sees_change`, the one rule for change events), in order; a watcher that falls
  `max_buffer` changes behind is ended rather than let grow without bound. GraphQL subscriptions watch.

A batch holding a model change is handed on only after `on_model_change` has run (the process serves the new
model), so whoever hears that the model changed finds it served.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from core.dispatch.access import sees_change
from core.dispatch.proposals import Watermark
from core.index.graph import GraphIndex
from core.values.errors import StoreUnavailableError
from core.values.records import Change, Sight
from core.values.uris import CHANGES_URI, node_uri, proposal_uri

__all__ = ["Batch", "ChangeFeed", "Subscriber", "Watch", "uris_of"]

log = logging.getLogger("canon.changes")
Subscriber = Callable[["Batch"], Awaitable[None]]  # awaited on the event loop with every batch, in order


class Watch(Protocol):
    """`ChangeFeed.watch`, as a surface is handed it."""

    def __call__(
        self, sight: Sight | None, uri: str | None = None, *, max_buffer: int = ...
    ) -> AbstractAsyncContextManager[AsyncIterator[Change]]: ...


def _node_uris(change: Change) -> Iterable[str]:
    if change.kind == "node" and change.type is not None:
        yield node_uri(change.type, change.key)


def uris_of(change: Change) -> tuple[str, ...]:
    """The resource URIs a change updates: its node's (for a node change) and the change log's."""
    return (*_node_uris(change), CHANGES_URI)


@dataclass(frozen=True)
class Batch:
    """Changes delivered together, in commit order, with what they touch."""

    changes: tuple[Change, ...]
    uris: tuple[str, ...]  # the proposals' changed, then every node URI changed (first-seen order), the change log's
    model_changed: bool
    nodes_came_or_went: bool  # a node was created or deleted

    @classmethod
    def of(cls, changes: Sequence[Change], proposals: Sequence[str] = ()) -> Batch:
        nodes = dict.fromkeys(uri for change in changes for uri in _node_uris(change))
        logged = (*nodes, CHANGES_URI) if changes else ()
        return cls(
            tuple(changes), (*(proposal_uri(p) for p in proposals), *logged), any(c.kind == "model" for c in changes),
            any(c.kind == "node" and (c.before is None or c.after is None) for c in changes),
        )  # fmt: skip


@dataclass(frozen=True, eq=False)
class _Watcher:
    send: MemoryObjectSendStream[Change]
    sight: Sight | None
    uri: str | None

    def wants(self, change: Change, index: GraphIndex) -> bool:
        return (self.uri is None or self.uri in uris_of(change)) and sees_change(self.sight, change, index.graph)


class ChangeFeed:
    """The committed changes of one store, as batches to subscribers and streams to watchers (see the module doc)."""

    def __init__(
        self, index: GraphIndex, *, tick_s: float = 0.05, fallback_s: float = 1.0,
        on_model_change: Callable[[], object] | None = None,
    ) -> None:  # fmt: skip
        """`tick_s`: how often the pump syncs where the store sends no notices; `fallback_s`: where it does (the
        bound on how late a commit whose notice was lost is delivered)."""
        self.index = index
        self.tick_s = tick_s
        self.fallback_s = fallback_s
        self.on_model_change = on_model_change
        self._pending: deque[Change] = deque()
        self._proposals = Watermark()
        self._proposals.changed(index.store)  # the first look: what is there already is no news
        self._proposals_changed: list[str] = []  # ids the last sync found changed, for the next flush
        self._loop: asyncio.AbstractEventLoop | None = None  # the pump's, while it runs
        self._wake: asyncio.Event | None = None
        self._subscribers: list[Subscriber] = []
        self._watchers: set[_Watcher] = set()
        self._hearers: list[tuple[str, MemoryObjectSendStream[str]]] = []  # `hear`: a URI and where to send it
        index.add_listener(self.collect)

    def subscribe(self, deliver: Subscriber) -> None:
        """Await `deliver` with every batch delivered from now on, in order, after the subscribers before it."""
        self._subscribers.append(deliver)

    @contextlib.asynccontextmanager
    async def watch(
        self, sight: Sight | None, uri: str | None = None, *, max_buffer: int = 10_000
    ) -> AsyncGenerator[AsyncIterator[Change]]:
        """Every change from now on that touches `uri` (None: any) and that `sight` may see something of, in
        order, until the block exits (or the watcher falls `max_buffer` changes behind)."""
        send, receive = anyio.create_memory_object_stream[Change](max_buffer)
        watcher = _Watcher(send, sight, uri)
        self._watchers.add(watcher)
        try:
            async with receive:
                yield receive
        finally:
            self._watchers.discard(watcher)
            send.close()

    @contextlib.asynccontextmanager
    async def hear(self, uri: str, *, max_buffer: int = 1_000) -> AsyncGenerator[AsyncIterator[str]]:
        """`uri` each time a batch from now on updates it (`Batch.uris`: a proposal's state change, which no change
        entry carries, as well as a node's), until the block exits. Who may read it is the reader's to check."""
        send, receive = anyio.create_memory_object_stream[str](max_buffer)
        self._hearers.append((uri, send))
        try:
            async with receive:
                yield receive
        finally:
            self._hearers.remove((uri, send))
            send.close()

    def watchers(self) -> int:
        return len(self._watchers)

    # -- delivery ----------------------------------------------------------------------------------------------
    def collect(self, changes: list[Change]) -> None:
        """Index listener: queue changes for the event loop (deque appends are thread-safe) and wake the pump, so a
        change committed in this process is delivered at once rather than at the next tick."""
        self._pending.extend(changes)
        self._poke()

    def _poke(self) -> None:
        """Wake the pump, from any thread (the loop's own included)."""
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None and not loop.is_closed():
            loop.call_soon_threadsafe(wake.set)

    async def pump(self) -> None:
        """Forever: sync the index, then deliver what was collected. Run it in the server's task group.

        It wakes when this process commits (`collect`), when the store notices a commit by another process
        (`Store.notices`), and otherwise every `fallback_s` (with notices) or `tick_s` (without): changes
        committed by *other* processes are seen only by syncing the index, and the tick bounds how late one whose
        notice was lost is delivered. While the store's server cannot be reached, it logs one warning, tries
        again every `fallback_s`, and says when the store is back.
        """
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        stop_notices = self.index.store.notices(self._poke)
        tick = self.tick_s if stop_notices is None else self.fallback_s
        down: StoreUnavailableError | None = None  # the store's server cannot be reached (since this error)
        try:
            while True:
                try:
                    await anyio.to_thread.run_sync(self._sync)
                    if down is not None:
                        log.warning("the store %s is back; change events are delivered again", down.path)
                        down = None
                    await self.flush()
                except StoreUnavailableError as exc:  # one warning for an outage, not one per attempt
                    if down is None:
                        log.warning("change events wait: %s", exc)
                    down = exc
                except Exception:  # the pump must outlive any one bad delivery; log and go on
                    log.exception("delivering change events failed")
                if down is not None:  # while down, try again each fallback tick (wake-ups would only fail too)
                    await anyio.sleep(self.fallback_s)
                    continue
                with anyio.move_on_after(tick):
                    await self._wake.wait()
                self._wake.clear()
        finally:
            if stop_notices is not None:
                stop_notices()
            self._loop = self._wake = None

    def _sync(self) -> None:
        """Follow the change log (the index) and the proposals' stamps (on a worker thread)."""
        self.index.sync()
        self._proposals_changed += self._proposals.changed(self.index.store)

    async def flush(self) -> None:
        """Deliver what was collected: serve a new model first, then tell the watchers, then each subscriber."""
        changes: list[Change] = []
        while self._pending:
            changes.append(self._pending.popleft())
        proposals, self._proposals_changed = self._proposals_changed, []
        if not changes and not proposals:
            return
        batch = Batch.of(changes, proposals)
        if batch.model_changed and self.on_model_change is not None:
            try:
                await anyio.to_thread.run_sync(self.on_model_change)
            except Exception:  # the changes are still news: deliver them, on the model still served
                log.exception("serving the new model failed")
        self._tell_watchers(batch)
        for deliver in list(self._subscribers):
            try:
                await deliver(batch)
            except Exception:  # one failing subscriber must not cost the others their events
                log.exception("a change subscriber failed")

    def _tell_watchers(self, batch: Batch) -> None:
        for uri, send in list(self._hearers):
            if uri in batch.uris:
                with contextlib.suppress(anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    send.send_nowait(uri)  # a hearer that fell behind misses a repeat of what it re-reads anyway
        for watcher in list(self._watchers):
            try:
                for change in batch.changes:
                    if watcher.wants(change, self.index):
                        watcher.send.send_nowait(change)
            except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                behind = watcher.send.statistics().max_buffer_size
                log.warning("ending a change watcher that fell %d changes behind", behind)
                self._watchers.discard(watcher)
                watcher.send.close()
