"""Change events to MCP subscribers of both protocol revisions: one subscriber of the change feed.

`EventFanout` subscribes to the change feed (`core.seam.changes.ChangeFeed`, which syncs the index, serves a new model
and says which resource URIs each batch touches) and sends:

* `notifications/resources/updated` for every URI a batch touches (each changed node's, and the change log's),
  to 2026-07-28 listen streams and to 2025-11-25 connections that subscribed to that URI;
* `notifications/tools/list_changed` when the model changed (the feed has made the server serve the new model
  by then), and `notifications/resources/list_changed` when the model changed or nodes were created or deleted
  (resources/list lists types and nodes).

Listen streams hear events two ways: through the SDK's subscription bus (`bus`, fed one event at a time; it
serves listen on stdio), and through the sinks added with `add_sink`, each handed every batch of events at once,
in order (canon's own HTTP listen streams, `core.mcp.fastpath.listen_streams`, which encode each event once for all
streams).

The SDK publishes to one era at a time, so both are fanned out here. Legacy subscriptions are keyed by the
SDK connection (its `ServerSession` is made per request) and dropped when the connection closes. A legacy
connection is told through its SDK session, unless it is an HTTP session and a `LegacyOutlet` was set
(`tell_legacy_through`): then canon's own GET streams (`core.mcp.fastpath.legacy_streams`) tell it, each notification
encoded once for every session.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from typing import Any, Protocol

import anyio
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)
from mcp_types import (
    ResourceListChangedNotification,
    ResourceUpdatedNotification,
    ResourceUpdatedNotificationParams,
    ServerNotification,
    ToolListChangedNotification,
)

from core.mcp.fastpath.sdk_compat import connection_of
from core.seam.changes import Batch, ChangeFeed
from core.values.records import Change

__all__ = ["EventFanout", "EventSink", "LegacyOutlet"]

log = logging.getLogger("canon.events")
EventSink = Callable[[Sequence[ServerEvent]], None]  # called on the event loop; must neither block nor raise


class LegacyOutlet(Protocol):
    def notify(self, session_ids: Collection[str], notification: ServerNotification) -> None:
        """Send `notification` to these 2025-11-25 HTTP sessions (by `Mcp-Session-Id`); must neither block nor raise."""
        ...


class EventFanout:
    def __init__(self, feed: ChangeFeed) -> None:
        self.bus = InMemorySubscriptionBus()
        self._legacy: dict[str, dict[int, ServerSession]] = {}  # uri -> connection id -> session
        self._legacy_all: dict[int, ServerSession] = {}  # every legacy connection seen, for list_changed
        self._outlet: LegacyOutlet | None = None
        self._session_ids: dict[int, str] = {}  # connection id -> HTTP session id, of connections `_outlet` tells
        self._sinks: list[EventSink] = []
        self._on_forget: dict[int, list[Callable[[], object]]] = {}
        self._model_listeners: list[Callable[[Sequence[Change]], Awaitable[None]]] = []
        feed.subscribe(self.deliver)

    def add_sink(self, sink: EventSink) -> None:
        """Hand `sink` every batch of events the listen streams hear from now on, in order (see the module doc)."""
        self._sinks.append(sink)

    def add_model_listener(self, listener: Callable[[Sequence[Change]], Awaitable[None]]) -> None:
        """Await `listener` with each batch holding a model change, once tools/list_changed has gone out."""
        self._model_listeners.append(listener)

    def tell_legacy_through(self, outlet: LegacyOutlet) -> None:
        """Tell 2025-11-25 HTTP sessions (connections with a session id) first seen from now on through `outlet`
        rather than through their SDK session."""
        self._outlet = outlet

    # -- legacy (2025-11-25) subscriptions ---------------------------------------------------------------------
    def _connection(self, ctx: ServerRequestContext[Any]) -> Any:
        return connection_of(ctx)

    def connection_key(self, ctx: ServerRequestContext[Any]) -> int:
        """What names a legacy connection here (its SDK session is made per request)."""
        return id(self._connection(ctx))

    def remember(self, ctx: ServerRequestContext[Any]) -> int:
        """Track a legacy connection so it hears list_changed; forgotten when it closes. Returns its key."""
        connection = self._connection(ctx)
        key = id(connection)
        if key not in self._legacy_all:
            self._legacy_all[key] = ctx.session
            if self._outlet is not None and connection.session_id is not None:
                self._session_ids[key] = connection.session_id
            connection.exit_stack.callback(lambda: self._forget(key))
        return key

    def on_forget(self, key: int, callback: Callable[[], object]) -> None:
        """Run `callback` when the remembered connection `key` closes."""
        self._on_forget.setdefault(key, []).append(callback)

    def subscribe(self, ctx: ServerRequestContext[Any], uri: str) -> None:
        self.remember(ctx)
        self._legacy.setdefault(uri, {})[id(self._connection(ctx))] = ctx.session

    def unsubscribe(self, ctx: ServerRequestContext[Any], uri: str) -> None:
        subscribers = self._legacy.get(uri, {})
        subscribers.pop(id(self._connection(ctx)), None)
        if not subscribers:
            self._legacy.pop(uri, None)

    def _forget(self, key: int) -> None:
        for callback in self._on_forget.pop(key, []):
            callback()
        self._legacy_all.pop(key, None)
        self._session_ids.pop(key, None)
        for uri in list(self._legacy):
            self._legacy[uri].pop(key, None)
            if not self._legacy[uri]:
                del self._legacy[uri]

    def legacy_subscriptions(self) -> int:
        return sum(len(s) for s in self._legacy.values())

    # -- delivery ----------------------------------------------------------------------------------------------
    async def deliver(self, batch: Batch) -> None:
        """The feed's subscriber: tell every MCP listener and subscriber of what `batch` touches."""
        await self._publish([ResourceUpdated(uri=uri) for uri in batch.uris])
        through_sdk: dict[int, tuple[ServerSession, list[ServerNotification]]] = {}
        for uri in batch.uris:
            update = ResourceUpdatedNotification(params=ResourceUpdatedNotificationParams(uri=uri))
            self._tell_legacy(self._legacy.get(uri, {}), update, through_sdk)
        await self._send_through_sdk(through_sdk)
        if batch.model_changed:
            await self._publish([ToolsListChanged()])
            await self._broadcast(ToolListChangedNotification())
            for listener in self._model_listeners:
                await listener(batch.changes)
        if batch.model_changed or batch.nodes_came_or_went:  # resources/list lists the types and the nodes
            await self._publish([ResourcesListChanged()])
            await self._broadcast(ResourceListChangedNotification())

    async def _publish(self, events: list[ServerEvent]) -> None:
        """To 2026-07-28 listen streams: every sink gets the batch, the SDK's bus each event."""
        for sink in self._sinks:
            sink(events)
        for event in events:
            await self.bus.publish(event)

    def _tell_legacy(self, connections: dict[int, ServerSession], notification: ServerNotification,
                     through_sdk: dict[int, tuple[ServerSession, list[ServerNotification]]]) -> None:  # fmt: skip
        """Tell the connections canon's GET streams serve at once; queue the others' in `through_sdk`."""
        told: list[str] = []
        for key, session in list(connections.items()):
            session_id = self._session_ids.get(key)
            if session_id is not None:
                told.append(session_id)
            else:
                through_sdk.setdefault(key, (session, []))[1].append(notification)
        if told and self._outlet is not None:
            self._outlet.notify(told, notification)

    async def _broadcast(self, notification: ServerNotification) -> None:
        """Send one notification to every legacy connection."""
        await self.tell_keys(list(self._legacy_all), notification)

    async def tell_keys(self, keys: Iterable[int], notification: ServerNotification) -> None:
        """Send one notification to these remembered legacy connections, each the way it is told."""
        connections = {key: self._legacy_all[key] for key in keys if key in self._legacy_all}
        through_sdk: dict[int, tuple[ServerSession, list[ServerNotification]]] = {}
        self._tell_legacy(connections, notification, through_sdk)
        await self._send_through_sdk(through_sdk)

    async def tell_connection(self, ctx: ServerRequestContext[Any], notification: ServerNotification) -> None:
        """Send one notification to the legacy connection `ctx` came on."""
        await self.tell_keys([self.remember(ctx)], notification)

    async def _send_through_sdk(self, sending: dict[int, tuple[ServerSession, list[ServerNotification]]]) -> None:
        async with anyio.create_task_group() as tasks:  # connections in parallel, each in order: none waits on another
            for key, (session, notifications) in sending.items():
                tasks.start_soon(self._send, key, session, notifications)

    async def _send(self, key: int, session: ServerSession, notifications: list[ServerNotification]) -> None:
        for notification in notifications:
            try:
                await session.send_notification(notification)
            except Exception:  # a closed or broken connection: stop sending to it
                log.debug("dropping a legacy connection that could not be notified", exc_info=True)
                self._forget(key)
                return
