"""A bounded in-memory `EventStore`, so 2025-11-25 clients can resume an SSE stream with `Last-Event-ID`."""

from __future__ import annotations

import itertools
from collections import deque

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCError, JSONRPCMessage, JSONRPCResponse

__all__ = ["MAX_EVENT_ID_DIGITS", "MemoryEventStore", "event_id_of"]

MAX_EVENT_ID_DIGITS = 19  # every id canon mints fits in 64 bits; a longer one was never issued


def event_id_of(text: str) -> int | None:
    """The event id a `Last-Event-ID` header names, or None if it is not one canon could have issued (not ASCII
    digits, or longer than any id it mints): the client must start over, as for an id it forgot."""
    if not (0 < len(text) <= MAX_EVENT_ID_DIGITS and text.isascii() and text.isdigit()):
        return None
    return int(text)


class MemoryEventStore(EventStore):
    """Keeps the last `capacity` events of every stream; replays a stream's events after a known id.

    canon answers POSTs with plain JSON, never on an SSE stream, so a response can never be replayed; the SDK
    still files every response here. Only the event's id is kept for them: otherwise a session holding the
    last 1,000 answers (a `tools/list` is about 120 KB) grew by hundreds of MiB (measured: 395 against 115 MiB
    peak after 2,600 calls on one 2025-11-25 session).
    """

    def __init__(self, capacity: int = 10_000) -> None:
        self._events: deque[tuple[int, StreamId, JSONRPCMessage | None]] = deque(maxlen=capacity)
        self._ids = itertools.count(1)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        event_id = next(self._ids)
        kept = None if isinstance(message, JSONRPCResponse | JSONRPCError) else message
        self._events.append((event_id, stream_id, kept))
        return str(event_id)

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        last = event_id_of(last_event_id)
        if last is None:
            return None
        stream = next((s for i, s, _ in self._events if i == last), None)
        if stream is None:  # unknown or already evicted: the client must start over
            return None
        for event_id, stream_id, message in list(self._events):
            if event_id > last and stream_id == stream and message is not None:
                await send_callback(EventMessage(message, str(event_id)))
        return stream
