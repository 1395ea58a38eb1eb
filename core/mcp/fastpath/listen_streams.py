"""The open 2026-07-28 listen streams of one process: each event encoded once, queued on every stream that asked.

The only per-stream part of a listen stream's frame is the subscription id (the listen request's JSON-RPC id), so
`Frame` encodes an event once, with the SDK's own models and framing, into the bytes before and after the id.
`ListenStreams.deliver` (`EventFanout`'s sink, `core.mcp.events`) queues the frame on every stream whose
acknowledged filter matches (resource URIs exactly, as the SDK matches them) and wakes that stream's writer,
which writes whatever is waiting in one write. It never blocks: a stream whose client stopped reading (its
write is blocked) and has `max_backlog` events waiting is ended there, without the final result, so the client
sees an abrupt end and listens again (nothing is replayed, as in the SDK). `close` ends every stream gracefully,
with the listen request's result as the last frame.

It works around the SDK's one encoding per stream (see `core.mcp.fastpath.listen`) and goes with that module; the
2025-11-25 GET streams (`legacy_streams`) share its `Outlet`. Private SDK state: none.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import anyio
from mcp.server.subscriptions import (
    SUBSCRIPTION_ID_META_KEY,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)
from mcp.shared.subscriptions import event_to_notification
from mcp_types import (
    JSONRPCNotification,
    JSONRPCResponse,
    RequestId,
    ServerNotification,
    SubscriptionFilter,
    SubscriptionsAcknowledgedNotification,
    SubscriptionsAcknowledgedNotificationParams,
    SubscriptionsListenResult,
)
from mcp_types import methods as wire_methods
from pydantic import BaseModel
from starlette.types import Send

__all__ = [
    "DEFAULT_LIMITS", "SSE_HEADERS", "Frame", "ListenLimits", "ListenStreams", "Outlet", "Stream",
    "notification_frame", "sse_frame",
]  # fmt: skip

log = logging.getLogger("canon.listen")
LISTEN = "subscriptions/listen"
SERVER_INFO_META_KEY = "io.modelcontextprotocol/serverInfo"
SSE_HEADERS = [  # as the SDK's 2026-07-28 transport sends them
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
]
PING = b": ping\r\n\r\n"
_MARK = "\x00subscription-id\x00"  # stands in for the id while an event is encoded; JSON escapes it
_MARK_JSON = json.dumps(_MARK).encode()


@dataclass(frozen=True)
class ListenLimits:
    """Bounds of the listen streams of one process."""

    max_streams: int = 10_000  # open streams; one more is refused with -32603
    max_backlog: int = 1_024  # events waiting behind a blocked write; one more ends the stream
    keepalive_s: float = 15.0  # a stream silent this long gets a `: ping` comment


DEFAULT_LIMITS = ListenLimits()


# -- frames ----------------------------------------------------------------------------------------------------------
def sse_frame(message: BaseModel) -> bytes:
    """One JSON-RPC message as an SSE `event: message` frame, byte for byte as the SDK frames it."""
    data = json.dumps(message.model_dump(mode="json", by_alias=True, exclude_none=True), separators=(",", ":"))
    return f"event: message\r\ndata: {data}\r\n\r\n".encode()


def notification_frame(notification: ServerNotification) -> bytes:
    data = notification.model_dump(by_alias=True, mode="json", exclude_none=True)
    return sse_frame(JSONRPCNotification(jsonrpc="2.0", method=data["method"], params=data.get("params")))


class Frame:
    """One event, encoded once: every stream's frame is `prefix + its id in JSON + suffix`."""

    __slots__ = ("event", "prefix", "suffix")

    def __init__(self, event: ServerEvent) -> None:
        self.event = event
        parts = notification_frame(event_to_notification(event, {SUBSCRIPTION_ID_META_KEY: _MARK})).split(_MARK_JSON)
        # None: the event's own text holds the mark (a URI with NUL characters), so it is encoded per stream
        self.prefix: bytes | None = parts[0] if len(parts) == 2 else None
        self.suffix = parts[-1]

    def render(self, request_id: RequestId, id_json: bytes) -> bytes:
        if self.prefix is None:
            return notification_frame(event_to_notification(self.event, {SUBSCRIPTION_ID_META_KEY: request_id}))
        return self.prefix + id_json + self.suffix


# -- streams ---------------------------------------------------------------------------------------------------------
F = TypeVar("F")


class Outlet(Generic[F]):
    """One open SSE response: the frames waiting for its writer, and how it ends (shared with the 2025-11-25 GET
    streams, `core.mcp.fastpath.legacy_streams`).

    `push` never blocks: it queues a frame and wakes the writer (`pour`), which writes whatever is waiting in one
    write. A write blocks only when the client stops reading; `blocked` tells when a bound of frames waits behind one.
    """

    __slots__ = ("ended", "final", "pending", "quiet", "waiter", "writing")

    def __init__(self, pending: list[F]) -> None:
        self.pending = pending
        self.waiter: asyncio.Future[None] | None = None  # the writer's, while it waits for frames
        self.writing = False  # inside a write to the client (which blocks only when the client stops reading)
        self.quiet = False  # nothing written since the last keep-alive tick
        self.ended = False
        self.final = b""  # the last bytes of the response

    def render(self, frames: list[F]) -> bytes:
        """The bytes of `frames`, in order."""
        raise NotImplementedError

    def push(self, frame: F) -> None:
        self.pending.append(frame)
        self._wake()

    def end(self, final: bytes) -> None:
        self.ended, self.final = True, final
        self._wake()

    def blocked(self, backlog: int) -> bool:
        """Whether `backlog` frames wait behind a write the client does not take."""
        return self.writing and len(self.pending) >= backlog

    def tick(self, ping: F) -> None:
        """A keep-alive tick: `ping` if nothing was written since the last one."""
        if self.quiet and not self.writing:
            self.push(ping)
        self.quiet = True

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def pour(self, send: Send, headers: list[tuple[bytes, bytes]] = SSE_HEADERS) -> None:
        """Write the frames as they come, each batch in one write, until the stream ends; then end the response."""
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        while True:
            while not self.pending and not self.ended:
                self.waiter = asyncio.get_running_loop().create_future()
                try:
                    await self.waiter
                finally:
                    self.waiter = None
            if not self.pending:
                break
            frames, self.pending = self.pending, []
            body = self.render(frames)
            self.writing = True
            await send({"type": "http.response.body", "body": body, "more_body": True})
            self.writing, self.quiet = False, False
        await send({"type": "http.response.body", "body": self.final, "more_body": False})


class Stream(Outlet[bytes | Frame]):
    """One open listen stream: its request, what it listens to, and its acknowledgement as the first frame."""

    __slots__ = ("honored", "id_json", "request_id", "version")

    def __init__(self, request_id: RequestId, version: str, honored: SubscriptionFilter,
                 pending: list[bytes | Frame]) -> None:  # fmt: skip
        super().__init__(pending)
        self.request_id = request_id
        self.version = version
        self.honored = honored
        self.id_json = json.dumps(request_id).encode()

    def render(self, frames: list[bytes | Frame]) -> bytes:
        rid, id_json = self.request_id, self.id_json
        return b"".join([f if isinstance(f, bytes) else f.render(rid, id_json) for f in frames])


class ListenStreams:
    """Every open listen stream of this process, indexed by what it listens to; `deliver` is `EventFanout`'s sink."""

    def __init__(self, server_info: dict[str, Any], limits: ListenLimits = DEFAULT_LIMITS) -> None:
        self.server_info = server_info  # the SDK server's `server_info_stamp`, for the result frame
        self.limits = limits
        self._all: set[Stream] = set()
        self._by_uri: dict[str, set[Stream]] = {}
        self._tools: set[Stream] = set()
        self._resources: set[Stream] = set()
        self._closing = False

    @property
    def count(self) -> int:
        return len(self._all)

    def full(self) -> bool:
        return len(self._all) >= self.limits.max_streams

    def open(self, request_id: RequestId, version: str, honored: SubscriptionFilter) -> Stream:
        """A new stream whose first frame is its acknowledgement; after `close`, it ends at once."""
        meta = {SUBSCRIPTION_ID_META_KEY: request_id}
        params = SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)
        ack = notification_frame(SubscriptionsAcknowledgedNotification(params=params))
        stream = Stream(request_id, version, honored, [ack])
        if self._closing:
            stream.end(self.result_frame(stream))
            return stream
        self._all.add(stream)
        for uri in set(honored.resource_subscriptions or ()):
            self._by_uri.setdefault(uri, set()).add(stream)
        if honored.tools_list_changed:
            self._tools.add(stream)
        if honored.resources_list_changed:
            self._resources.add(stream)
        return stream

    def discard(self, stream: Stream) -> None:
        """Stop delivering to `stream` (idempotent)."""
        self._all.discard(stream)
        for uri in set(stream.honored.resource_subscriptions or ()):
            streams = self._by_uri.get(uri)
            if streams is not None:
                streams.discard(stream)
                if not streams:
                    del self._by_uri[uri]
        self._tools.discard(stream)
        self._resources.discard(stream)

    def deliver(self, events: Sequence[ServerEvent]) -> None:
        """Queue each event, encoded once, on every stream that asked for it, in order. Never blocks."""
        for event in events:
            matching = self._matching(event)
            if not matching:
                continue
            frame, backlog = Frame(event), self.limits.max_backlog
            for stream in list(matching):  # a stream may be ended (and leave the set) on the way
                if stream.blocked(backlog):
                    log.warning("listen stream %r: %d events wait behind a blocked write; ending it",
                                stream.request_id, len(stream.pending))  # fmt: skip
                    self.discard(stream)
                    stream.pending.clear()
                    stream.end(b"")
                else:
                    stream.push(frame)

    def _matching(self, event: ServerEvent) -> set[Stream] | None:
        if isinstance(event, ResourceUpdated):
            return self._by_uri.get(event.uri)
        if isinstance(event, ToolsListChanged):
            return self._tools
        if isinstance(event, ResourcesListChanged):
            return self._resources
        return None  # prompts: their list never changes (core.dispatch.prompts), so canon never acknowledges them

    def close(self) -> None:
        """End every stream gracefully: what is queued, then the `SubscriptionsListenResult` frame. Streams opened
        from now on end right after their acknowledgement."""
        self._closing = True
        for stream in list(self._all):
            self.discard(stream)
            stream.end(self.result_frame(stream))

    def result_frame(self, stream: Stream) -> bytes:
        """The listen request's response, shaped as the SDK's runner shapes a 2026-07-28 result."""
        meta = {SUBSCRIPTION_ID_META_KEY: stream.request_id}
        dumped = SubscriptionsListenResult(_meta=meta).model_dump(by_alias=True, mode="json", exclude_none=True)
        result = wire_methods.serialize_server_result(LISTEN, stream.version, dumped)
        result.setdefault("resultType", "complete")
        result["_meta"] = {**result.get("_meta", {}), SERVER_INFO_META_KEY: self.server_info}
        return sse_frame(JSONRPCResponse(jsonrpc="2.0", id=stream.request_id, result=result))

    async def keepalive(self) -> None:
        """Forever: a `: ping` comment on every stream that wrote nothing for a tick (run it in the app's tasks)."""
        while True:
            await anyio.sleep(self.limits.keepalive_s)
            for stream in list(self._all):
                stream.tick(PING)
