"""2025-11-25 standalone GET streams over HTTP, served by canon rather than the SDK (ADR 0015).

A 2025-11-25 session hears of changes on its standalone stream: `GET /mcp` with its `Mcp-Session-Id`, an SSE
response on which every notification is an `event: message` frame with an `id:` of that session's own, which the
client may later send back as `Last-Event-ID` to be replayed what it missed. Through the SDK each notification costs
about 0.5 ms of CPU per session (a model built, serialised, stored, handed through streams and tasks); here it is
encoded once, and each session's frame is its id line before those bytes (`LegacyStreams.notify`, called by
`EventFanout`).

`LegacyRoute` sits in front of the SDK's `/mcp` app, inside `BearerGate`. It takes a GET only when the SDK would
have served it as the session's standalone stream or a resumption of it: no 2026-07-28 `MCP-Protocol-Version`,
the `Mcp-Session-Id` of a live session opened with the same credential, the body within bounds, Host and Origin
accepted (the SDK's own check), `text/event-stream` accepted, and either `Last-Event-ID` or no GET stream open for
the session. Anything else goes to the SDK untouched, so the SDK answers it exactly as before (a second GET stream
of a session gets its 409).

Each session that opened a GET stream has a `Channel`: its ids, its last `replay` events (for `Last-Event-ID`: a
session is replayed only its own events) and its open stream. While a stream is open canon holds the SDK's place
of it (the session's standalone stream key in the SDK transport), so the SDK refuses a second one, counts the
stream as a request in flight (the session does not expire under it), and puts anything it sends on the
standalone stream itself (canon sends nothing that way; the SDK itself sends nothing there for canon's handlers)
into canon's stream. When the session ends (DELETE, expiry, shutdown) the SDK closes that place: the stream ends
and the channel goes (a channel with no stream open goes at the next keep-alive tick). Bounds: `max_streams` open
streams (one more is answered 503), `max_backlog` events waiting behind a write the client does not take end its
stream (the client resumes with `Last-Event-ID`), a ping comment after `keepalive_s` of silence. `close` ends every
stream, as the SDK's stream ends when its session does.

Upstream limitation: the SDK sends a notification through every session's own server task, event store and
stream (no one-encode fan-out to 2025-11-25 sessions). Delete this module and `LegacyRoute` in the app when the SDK
fans a notification out to many sessions with one encoding (`benchmarks/fanout_bench`: legacy fan-out within this
path's). Private SDK state (the transport's stream table and in-flight count, the manager's sessions and their
owners): only through `core.mcp.fastpath.sdk_compat`.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context
from mcp.server.streamable_http import (
    LAST_EVENT_ID_HEADER,
    MCP_SESSION_ID_HEADER,
    REQUEST_STREAM_BUFFER_SIZE,
    EventMessage,
    StreamableHTTPServerTransport,
    check_accept_headers,
)
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types import (
    DEFAULT_NEGOTIATED_VERSION,
    INTERNAL_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    ServerNotification,
)
from mcp_types.version import is_version_at_least
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from core.mcp.event_store import event_id_of
from core.mcp.fastpath.listen_streams import Outlet
from core.mcp.fastpath.sdk_compat import (
    has_get_stream,
    hold_get_stream,
    in_flight,
    release_get_stream,
    session_owner,
    session_transport,
)
from core.mcp.fastpath.takeover import read_body
from core.mcp.revisions import HANDSHAKE

__all__ = ["DEFAULT_LEGACY_LIMITS", "Channel", "LegacyLimits", "LegacyRoute", "LegacyStreams", "message_frame"]

log = logging.getLogger("canon.legacy")
_VERSION_HEADER = MCP_PROTOCOL_VERSION_HEADER.lower().encode()
_PRIMING_SINCE = "2025-11-25"  # the SDK primes a resumed stream only for clients of this revision or later


@dataclass(frozen=True)
class LegacyLimits:
    """Bounds of the 2025-11-25 GET streams of one process."""

    max_streams: int = 10_000  # open GET streams; one more is answered 503
    max_backlog: int = 1_024  # events waiting behind a blocked write; one more ends the stream
    replay: int = 1_000  # events kept per session for `Last-Event-ID`
    keepalive_s: float = 15.0  # a stream silent this long gets a ping comment


DEFAULT_LEGACY_LIMITS = LegacyLimits()


# -- frames ----------------------------------------------------------------------------------------------------------
def message_frame(message: JSONRPCMessage) -> bytes:
    """A message's SSE frame without its `id:` line, byte for byte as the SDK's 2025-11-25 transport frames it."""
    data = message.model_dump_json(by_alias=True, exclude_unset=True)
    return b"event: message\r\ndata: " + data.encode() + b"\r\n\r\n"


def notification_message(notification: ServerNotification) -> JSONRPCNotification:
    """The JSON-RPC message the SDK sends for `notification` (`ServerSession.send_notification`, its dispatcher)."""
    data = notification.model_dump(by_alias=True, mode="json", exclude_none=True)
    params = data.get("params")
    if params is None:  # left unset, so that it is not sent as null
        return JSONRPCNotification(jsonrpc="2.0", method=data["method"])
    return JSONRPCNotification(jsonrpc="2.0", method=data["method"], params=dict(params))


def _ping() -> bytes:
    return f": ping - {datetime.now(UTC)}\r\n\r\n".encode()  # the SDK's (sse-starlette's) keep-alive comment


# -- sessions and their streams ----------------------------------------------------------------------------------------
class LegacyStream(Outlet[bytes]):
    """One open GET stream: frames already carry their id line. `detach` gives the SDK its place back."""

    __slots__ = ("place", "transport")

    def __init__(self, transport: StreamableHTTPServerTransport, pending: list[bytes]) -> None:
        super().__init__(pending)
        self.transport = transport
        self.place: tuple[MemoryObjectSendStream[EventMessage], MemoryObjectReceiveStream[EventMessage]] | None = None

    def render(self, frames: list[bytes]) -> bytes:
        return b"".join(frames)

    @property
    def headers(self) -> list[tuple[bytes, bytes]]:
        """The response's headers, as the SDK's standalone stream sends them."""
        session_id = (self.transport.mcp_session_id or "").encode()
        return [(b"cache-control", b"no-cache, no-transform"), (b"connection", b"keep-alive"),
                (b"content-type", b"text/event-stream"), (MCP_SESSION_ID_HEADER.encode(), session_id),
                (b"x-accel-buffering", b"no")]  # fmt: skip

    def hold(self) -> MemoryObjectReceiveStream[EventMessage]:
        """Take the session's standalone stream in the SDK transport; what the SDK sends there arrives here."""
        self.place = anyio.create_memory_object_stream[EventMessage](REQUEST_STREAM_BUFFER_SIZE)
        hold_get_stream(self.transport, self.place)
        return self.place[1]

    def detach(self) -> None:
        """Give the SDK its place back (idempotent): from now on it would serve, or refuse, a GET stream itself."""
        place, self.place = self.place, None
        if place is None:
            return
        release_get_stream(self.transport, place)
        place[0].close()
        place[1].close()


class Channel:
    """One session's events since it first opened a GET stream (the last `replay` of them) and its open stream."""

    __slots__ = ("events", "last_id", "session_id", "stream", "transport")

    def __init__(self, session_id: str, transport: StreamableHTTPServerTransport, replay: int) -> None:
        self.session_id = session_id
        self.transport = transport
        self.events: deque[bytes | None] = deque(maxlen=replay)  # frames without their id; None: a priming event
        self.last_id = 0  # events[i] has id last_id - len(events) + 1 + i
        self.stream: LegacyStream | None = None

    def record(self, frame: bytes | None) -> int:
        self.last_id += 1
        self.events.append(frame)
        return self.last_id

    def after(self, last_event_id: str) -> list[bytes] | None:
        """The frames after `last_event_id`, ids included; None if that id is not one of this session's kept events
        (unknown, or evicted: the client must start over)."""
        seen, first = event_id_of(last_event_id), self.last_id - len(self.events) + 1
        if seen is None or not first <= seen <= self.last_id:
            return None
        later = list(self.events)[seen - first + 1 :]
        return [b"id: %d\r\n" % (seen + 1 + i) + frame for i, frame in enumerate(later) if frame is not None]

    def prime(self) -> bytes:
        """A priming event (a fresh id, empty data), as the SDK sends when a resumed stream goes live."""
        return b"id: %d\r\ndata: \r\n\r\n" % self.record(None)


class LegacyStreams:
    """The channels and open GET streams of this process; `notify` is how `EventFanout` tells 2025-11-25 sessions."""

    def __init__(self, limits: LegacyLimits = DEFAULT_LEGACY_LIMITS) -> None:
        self.limits = limits
        self._channels: dict[str, Channel] = {}
        self._open: set[LegacyStream] = set()
        self._closing = False

    @property
    def count(self) -> int:
        """Open GET streams."""
        return len(self._open)

    @property
    def sessions(self) -> int:
        """Sessions with a channel (which opened a GET stream and have not ended)."""
        return len(self._channels)

    def full(self) -> bool:
        return len(self._open) >= self.limits.max_streams

    def channel(self, session_id: str, transport: StreamableHTTPServerTransport) -> Channel:
        channel = self._channels.get(session_id)
        if channel is None or channel.transport is not transport:
            channel = self._channels[session_id] = Channel(session_id, transport, self.limits.replay)
        return channel

    def notify(self, session_ids: Collection[str], notification: ServerNotification) -> None:
        """Send `notification`, encoded once, to these sessions: recorded for resumption, written to the open streams.
        A session that never opened a GET stream is skipped (the SDK files it where no client can ask for it). Never
        blocks."""
        frame = message_frame(notification_message(notification))
        channels = self._channels
        for session_id in session_ids:
            channel = channels.get(session_id)
            if channel is not None:
                self.send(channel, frame)

    def send(self, channel: Channel, frame: bytes) -> None:
        """Record `frame` in `channel` and queue it on its open stream, if any."""
        event_id = channel.record(frame)
        stream = channel.stream
        if stream is None:
            return
        if stream.blocked(self.limits.max_backlog):
            log.warning("GET stream of session %s: %d events wait behind a blocked write; ending it",
                        channel.session_id[:64], len(stream.pending))  # fmt: skip
            stream.pending.clear()  # the client resumes after the last id it got: they are replayed then
            self.discard(channel, stream)
            stream.end(b"")
            return
        stream.push(b"id: %d\r\n" % event_id + frame)

    def open(self, channel: Channel, pending: list[bytes]) -> LegacyStream:
        """The session's live stream, first writing `pending` (a replay); after `close` it ends once that is written."""
        stream = LegacyStream(channel.transport, pending)
        if self._closing:
            stream.end(b"")
            return stream
        self._open.add(stream)
        channel.stream = stream
        return stream

    def discard(self, channel: Channel, stream: LegacyStream) -> None:
        """Stop writing to `stream` and give its place back (idempotent); drop the channel once its session ended."""
        stream.detach()
        self._open.discard(stream)
        if channel.stream is stream:
            channel.stream = None
        if channel.transport.is_terminated and self._channels.get(channel.session_id) is channel:
            del self._channels[channel.session_id]

    def close(self) -> None:
        """End every stream (what is queued, then the end of the response). Streams opened from now on end at once."""
        self._closing = True
        for channel in self._channels.values():
            stream, channel.stream = channel.stream, None
            if stream is not None:
                self._open.discard(stream)
                stream.end(b"")

    async def keepalive(self) -> None:
        """Forever: a ping comment on every stream that wrote nothing for a tick, and forget the channels of sessions
        that ended while no stream was open (run it in the app's tasks)."""
        while True:
            await anyio.sleep(self.limits.keepalive_s)
            ping = _ping()
            for stream in list(self._open):
                stream.tick(ping)
            for session_id, channel in list(self._channels.items()):
                if channel.stream is None and channel.transport.is_terminated:
                    del self._channels[session_id]


# -- the route -------------------------------------------------------------------------------------------------------
class LegacyRoute:
    """Serve the 2025-11-25 GET streams from `streams`; pass every other request, untouched, to `app` (the SDK's)."""

    def __init__(self, app: ASGIApp, streams: LegacyStreams, manager: StreamableHTTPSessionManager) -> None:
        self.app = app
        self.streams = streams
        self.manager = manager
        self.security = TransportSecurityMiddleware(manager.security_settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        transport = self.session_of(scope)
        if transport is None:
            await self.app(scope, receive, send)
            return
        body, replay = await read_body(scope, receive, self.manager.max_request_body_size)
        request = Request(scope)
        if body is None or not await self.acceptable(request, transport):  # the SDK answers it
            await self.app(scope, replay, send)
            return
        with in_flight(transport):
            await self.serve(request, transport, receive, send)

    def session_of(self, scope: Scope) -> StreamableHTTPServerTransport | None:
        """The live session whose standalone stream this request may be, as the SDK's manager routes it: a GET of
        the 2025-11-25 era with the id of a session opened with the same credential. Cheap: headers only."""
        if scope["type"] != "http" or scope["method"] != "GET":
            return None
        version = next((v.decode("latin-1") for k, v in scope["headers"] if k == _VERSION_HEADER), None)
        if version is not None and version != HANDSHAKE:  # another revision: refused (`core.mcp.revision_gate`)
            return None
        session_id = Headers(scope=scope).get(MCP_SESSION_ID_HEADER)
        transport = None if session_id is None else session_transport(self.manager, session_id)
        if session_id is None or transport is None:
            return None
        user = scope.get("user")
        requestor = authorization_context(user) if isinstance(user, AuthenticatedUser) else None
        return transport if requestor == session_owner(self.manager, session_id) else None

    async def acceptable(self, request: Request, transport: StreamableHTTPServerTransport) -> bool:
        """Whether the SDK's transport would serve it as the standalone stream or its resumption: every check it
        makes first passes (`StreamableHTTPServerTransport._handle_get_request`), and it is not the second stream."""
        if await self.security.validate_request(request, is_post=False) is not None:
            return False
        idle = transport.idle_scope
        if transport.is_terminated or (idle is not None and idle.cancel_called):
            return False
        if not check_accept_headers(request)[1]:
            return False
        return bool(request.headers.get(LAST_EVENT_ID_HEADER)) or not has_get_stream(transport)

    async def serve(self, request: Request, transport: StreamableHTTPServerTransport, receive: Receive,
                    send: Send) -> None:  # fmt: skip
        """The live stream (first the replay, when resuming), or just the replay when the session's stream is open
        elsewhere, or an empty stream for an id canon does not know: as the SDK answers each."""
        assert transport.mcp_session_id is not None  # a stateful session's transport
        channel = self.streams.channel(transport.mcp_session_id, transport)
        last_event_id = request.headers.get(LAST_EVENT_ID_HEADER)
        pending = channel.after(last_event_id) if last_event_id else []
        if pending is None or has_get_stream(transport):  # only the replay: the stream does not go live
            replayed = LegacyStream(transport, pending or [])
            replayed.end(b"")
            await replayed.pour(send, replayed.headers)
            return
        if self.streams.full():
            await _refuse(transport, request.scope, receive, send)
            return
        version = request.headers.get(MCP_PROTOCOL_VERSION_HEADER, DEFAULT_NEGOTIATED_VERSION)
        if last_event_id and is_version_at_least(version, _PRIMING_SINCE):
            pending.append(channel.prime())
        stream = self.streams.open(channel, pending)
        sdk_messages = stream.hold()
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(_pour, stream, send, tasks.cancel_scope)
                tasks.start_soon(self.relay, channel, stream, sdk_messages)
                while (await receive())["type"] != "http.disconnect":
                    pass
                tasks.cancel_scope.cancel()
        finally:
            self.streams.discard(channel, stream)

    async def relay(self, channel: Channel, stream: LegacyStream,
                    sdk_messages: MemoryObjectReceiveStream[EventMessage]) -> None:  # fmt: skip
        """What the SDK sends on the session's standalone stream, into canon's; when the SDK closes that stream (the
        session ended), the stream ends."""
        with contextlib.suppress(anyio.ClosedResourceError):
            async for sent in sdk_messages:
                self.streams.send(channel, message_frame(sent.message))
        stream.end(b"")


async def _pour(stream: LegacyStream, send: Send, scope: anyio.CancelScope) -> None:
    await stream.pour(send, stream.headers)
    scope.cancel()  # the response is complete: stop waiting for the client to disconnect


async def _refuse(transport: StreamableHTTPServerTransport, scope: Scope, receive: Receive, send: Send) -> None:
    """503 at the stream cap, in the form of the SDK's answer at its session cap."""
    error = JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=INTERNAL_ERROR, message="Too many open streams"))
    headers = {MCP_SESSION_ID_HEADER: transport.mcp_session_id or ""}
    body = error.model_dump_json(by_alias=True, exclude_unset=True)
    await Response(body, status_code=503, headers=headers, media_type="application/json")(scope, receive, send)
