"""The per-session event store keeps what resumption can replay, and not the answers it never can."""

from __future__ import annotations

import anyio
import mcp_types as types
from mcp.server.streamable_http import EventMessage

from core.mcp.event_store import MemoryEventStore


def test_responses_keep_only_their_id_and_notifications_replay_in_order() -> None:
    async def scenario() -> list[EventMessage]:
        store = MemoryEventStore(capacity=10)
        first = await store.store_event("stream", types.JSONRPCNotification(jsonrpc="2.0", method="a"))
        big = types.JSONRPCResponse(jsonrpc="2.0", id=1, result={"tools": ["x" * 100_000]})
        await store.store_event("stream", big)
        await store.store_event("other", types.JSONRPCNotification(jsonrpc="2.0", method="elsewhere"))
        await store.store_event("stream", types.JSONRPCNotification(jsonrpc="2.0", method="b"))
        assert all(message is None or not isinstance(message, types.JSONRPCResponse)
                   for _, _, message in store._events)  # pyright: ignore[reportPrivateUsage]  # fmt: skip
        replayed: list[EventMessage] = []

        async def send(event: EventMessage) -> None:
            replayed.append(event)

        assert await store.replay_events_after(first, send) == "stream"
        return replayed

    replayed = anyio.run(scenario)
    assert [e.message.method for e in replayed if isinstance(e.message, types.JSONRPCNotification)] == ["b"]
    assert len(replayed) == 1


def test_a_last_event_id_canon_could_not_have_issued_is_unknown_never_an_error() -> None:
    async def scenario() -> list[str | None]:
        store = MemoryEventStore(capacity=10)
        await store.store_event("stream", types.JSONRPCNotification(jsonrpc="2.0", method="a"))

        async def send(event: EventMessage) -> None:
            raise AssertionError(f"replayed {event}")

        return [await store.replay_events_after(text, send) for text in ("9" * 8_000, "\u00b2", "1" + "0" * 19, "")]

    assert anyio.run(scenario) == [None, None, None, None]
