"""2025-11-25 resumability: a client that lost its GET stream resumes it with `Last-Event-ID`.

Against a real `canon serve`, spoken to with raw HTTP and SSE parsed here from the bytes. canon serves the GET
stream itself (`core.mcp.fastpath.legacy_streams`, ADR 0015), answering as the SDK
(`mcp/server/streamable_http.py`, 2.3) did; what these tests rely on:

* every message the server sends a session without a request to answer (`notifications/resources/updated`
  among them) is kept for that session once it has opened a GET stream, *whether or not one is connected now*,
  and goes out on the GET stream, when there is one, with the session's own id as its SSE `id:`;
* the plain GET stream has no priming event; a GET with `Last-Event-ID` gets the session's kept events that
  come after it, then (when no GET stream is registered) one priming event (a fresh id, empty
  data), and then carries on as the live GET stream;
* an id the session does not know replays nothing: 200, `text/event-stream`, and the stream ends at once.

Canon's own change notifications are the only events in these tests. The test process commits to the store
file as another process would; canon notices within a pump tick. That canon has *sent* the notifications of
the commits made while the client was away is proven without timing: a 2026-07-28 listener (stateless, never
in the event store) waits for a change to a sentinel node committed after them, and canon sends a batch's
changes in commit order, each legacy subscriber before the next URI is published.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import re
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp
import pytest
from mcp.client.subscriptions import ResourceUpdated

from core.lang.model import load_model
from core.store.sqlite import SQLiteStore
from core.values.operations import PutNode
from core.values.uris import node_uri
from tests.mcp.conftest import DEADLINE_S, LEGACY, LEGACY_HEADERS, Process, copy_store, initialize_body, serving

pytestmark = pytest.mark.anyio

PAYMENTS, BILLING, SEARCH = "team-payments", "team-billing", "team-search"
A, B, SENTINEL = node_uri("Team", PAYMENTS), node_uri("Team", BILLING), node_uri("Team", SEARCH)
UPDATED = "notifications/resources/updated"
TIMEOUT = httpx2.Timeout(DEADLINE_S)


@dataclass(frozen=True)
class Canon:
    process: Process
    store: Path


@pytest.fixture(scope="module")
def canon(seed_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Canon]:
    folder = tmp_path_factory.mktemp("resume")
    path = copy_store(seed_template, folder / "canon.db")
    with serving(path, cwd=folder) as process:
        yield Canon(process, path)


# -- committing from another process's point of view -----------------------------------------------------------------
_commits = itertools.count(1)


def _set_mission(path: Path, node_id: str, mission: str) -> int:
    """Open the store file, commit a new mission for one node, close it; return the store revision.

    The mission is made unique (the tests share one process, and an unchanged node commits no change).
    """
    store = SQLiteStore.open(path, load_model())
    try:
        node = store.node(node_id)
        assert node is not None
        properties = dict(node.properties) | {"mission": f"{mission} ({next(_commits)})"}
        result = store.commit([PutNode(dataclasses.replace(node, properties=properties))], principal="test")
        assert len(result.changes) == 1
        revision: int = result.revision
        return revision
    finally:
        store.close()


async def set_mission(canon: Canon, node_id: str, mission: str) -> int:
    return await anyio.to_thread.run_sync(_set_mission, canon.store, node_id, mission)


# -- SSE, parsed from the bytes --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Frame:
    """One SSE event: its `id:` (None when it had none), `event:` and `data:` (lines joined by newlines)."""

    id: str | None
    event: str
    data: str

    @property
    def message(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.data)
        return value

    def is_update_of(self, uri: str) -> bool:
        if not self.data:
            return False
        message = self.message
        return message.get("method") == UPDATED and message.get("params", {}).get("uri") == uri


_LINE = re.compile(rb"\r\n|\r|\n")


async def _lines(response: httpx2.Response) -> AsyncGenerator[str]:
    """The lines of the body; CRLF, CR and LF all end a line (a CR at the end of a chunk waits for the next)."""
    buffer = b""
    async for chunk in response.aiter_bytes():
        buffer += chunk
        while (end := _LINE.search(buffer)) is not None:
            if end.group() == b"\r" and end.end() == len(buffer):
                break  # perhaps the first half of a CRLF split across chunks
            yield buffer[: end.start()].decode()
            buffer = buffer[end.end() :]
    if buffer:  # an unterminated last line: it cannot end an event, but pass it on
        yield buffer.rstrip(b"\r").decode()


async def frames(response: httpx2.Response) -> AsyncGenerator[Frame]:
    """The events of an SSE response, as the EventSource algorithm splits them (comments are skipped)."""
    event_id: str | None = None
    event, data, seen = "message", list[str](), False
    async for line in _lines(response):
        if line == "":
            if seen:
                yield Frame(event_id, event, "\n".join(data))
            event_id, event, data, seen = None, "message", [], False
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        seen = True
        if name == "id":
            event_id = value
        elif name == "event":
            event = value
        elif name == "data":
            data.append(value)


def _sse_id(frame: Frame) -> int:
    assert frame.id is not None, f"an event without an id: {frame}"
    assert frame.id.isdigit(), f"an event id canon's store did not mint: {frame}"
    return int(frame.id)


# -- a legacy (2025-11-25) session over raw HTTP ---------------------------------------------------------------------
class Session:
    def __init__(self, http: httpx2.AsyncClient, session_id: str) -> None:
        self.http = http
        self.id = session_id
        self._ids = iter(range(2, 1_000_000))

    @property
    def headers(self) -> dict[str, str]:
        return LEGACY_HEADERS | {"mcp-session-id": self.id, "mcp-protocol-version": LEGACY}

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        response = await self.http.post("/mcp", json=body, headers=self.headers)
        assert response.status_code == 200, response.text
        answer: dict[str, Any] = response.json()
        assert "result" in answer, answer
        result: dict[str, Any] = answer["result"]
        return result

    async def subscribe(self, uri: str) -> None:
        assert await self.request("resources/subscribe", {"uri": uri}) == {}

    @contextlib.asynccontextmanager
    async def get_stream(self, last_event_id: str | None = None) -> AsyncGenerator[httpx2.Response]:
        """The session's GET stream (resumed after `last_event_id` when given); closed when the block ends."""
        headers = {"Accept": "text/event-stream", "mcp-session-id": self.id, "mcp-protocol-version": LEGACY}
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        async with self.http.stream("GET", "/mcp", headers=headers) as response:  # bounded by TIMEOUT
            yield response


@contextlib.asynccontextmanager
async def legacy_session(canon: Canon, *uris: str) -> AsyncGenerator[Session]:
    """Initialize a 2025-11-25 session, subscribe it to `uris`, and delete the session afterwards."""
    async with httpx2.AsyncClient(base_url=canon.process.base, timeout=TIMEOUT) as http:
        response = await http.post("/mcp", json=initialize_body(), headers=LEGACY_HEADERS)
        assert response.status_code == 200, response.text
        assert response.json()["result"]["protocolVersion"] == LEGACY
        session = Session(http, response.headers["mcp-session-id"])
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await http.post("/mcp", json=initialized, headers=session.headers)).status_code == 202
        for uri in uris:
            await session.subscribe(uri)
        try:
            yield session
        finally:
            await http.delete("/mcp", headers=session.headers)


async def next_update(response: httpx2.Response, uri: str) -> Frame:
    """The next `notifications/resources/updated` of `uri` on a live stream (priming events skipped)."""
    with anyio.fail_after(DEADLINE_S):
        async with contextlib.aclosing(frames(response)) as events:
            async for frame in events:
                if frame.data and frame.is_update_of(uri):
                    return frame
    raise AssertionError(f"the stream ended before an update of {uri}")


async def replayed(response: httpx2.Response) -> tuple[list[Frame], Frame | None]:
    """The replayed events of a resumed stream, and the priming event that ends the replay (None: it just ended).

    The SDK sends the stored events first, then, when it makes the resumed stream the live GET stream, a fresh
    priming event with empty data: what comes after that is live, not replay.
    """
    events: list[Frame] = []
    with anyio.fail_after(DEADLINE_S):
        async with contextlib.aclosing(frames(response)) as stream:
            async for frame in stream:
                if not frame.data:
                    return events, frame
                events.append(frame)
    return events, None


@contextlib.asynccontextmanager
async def witness(canon: Canon, uri: str) -> AsyncGenerator[AsyncIterator[Any]]:
    """A 2026-07-28 listener for `uri`: stateless, so it leaves nothing in the legacy sessions' event store."""
    async with (
        mcp.Client(canon.process.url, mode="auto") as client,
        client.listen(resource_subscriptions=[uri]) as subscription,
    ):
        yield subscription


async def heard(subscription: AsyncIterator[Any], uri: str) -> None:
    with anyio.fail_after(DEADLINE_S):
        event = await anext(subscription)
    assert isinstance(event, ResourceUpdated)
    assert event.uri == uri


# -- the tests --------------------------------------------------------------------------------------------------------
async def test_a_resumed_get_stream_replays_the_updates_sent_while_the_client_was_away(canon: Canon) -> None:
    async with legacy_session(canon, A) as session:
        async with session.get_stream() as live:
            assert live.status_code == 200
            assert live.headers["content-type"].startswith("text/event-stream")
            await set_mission(canon, PAYMENTS, "one")
            first = await next_update(live, A)
        seen = _sse_id(first)  # the GET stream is closed: the client is away

        async with witness(canon, SENTINEL) as sentinel:
            await set_mission(canon, PAYMENTS, "two")
            await set_mission(canon, PAYMENTS, "three")
            await set_mission(canon, SEARCH, "sentinel")  # committed last: when it is heard, A's were sent
            await heard(sentinel, SENTINEL)

        async with session.get_stream(last_event_id=str(seen)) as resumed:
            assert resumed.status_code == 200
            assert resumed.headers["content-type"].startswith("text/event-stream")
            assert resumed.headers["mcp-session-id"] == session.id
            events, priming = await replayed(resumed)

    ids = [_sse_id(frame) for frame in events]
    assert all(i > seen for i in ids), f"replayed ids {ids} must all come after {seen}"
    assert ids == sorted(ids)
    assert [f for f in events if f.is_update_of(A)], f"no update of {A} was replayed: {events}"
    assert all(f.event == "message" for f in events)
    if priming is not None:
        assert _sse_id(priming) > max(ids, default=seen)


async def test_resuming_from_the_last_replayed_event_replays_nothing_again(canon: Canon) -> None:
    # Resuming from the last event heard replays nothing already heard: only what was sent after it.
    async with legacy_session(canon, A) as session:
        async with session.get_stream() as live:
            await set_mission(canon, PAYMENTS, "four")
            first = await next_update(live, A)
        async with witness(canon, SENTINEL) as sentinel:
            await set_mission(canon, PAYMENTS, "five")
            await set_mission(canon, SEARCH, "sentinel again")
            await heard(sentinel, SENTINEL)
        async with session.get_stream(last_event_id=str(_sse_id(first))) as resumed:
            events, _ = await replayed(resumed)
        assert events, "the update sent while away was not replayed"
        last = events[-1]
        async with session.get_stream(last_event_id=str(_sse_id(last))) as again:
            assert again.status_code == 200
            replayed_again, _ = await replayed(again)

    assert replayed_again == []


@pytest.mark.parametrize("unknown", ["999999999", "not-an-event-id"], ids=["never-issued", "not-a-number"])
async def test_an_unknown_last_event_id_replays_nothing(canon: Canon, unknown: str) -> None:
    # The SDK asks the event store for the stream of that id; canon's store knows none, so there is nothing to
    # replay and no stream to resume: the SDK answers 200 with an SSE stream that ends at once, empty.
    async with legacy_session(canon, A) as session:
        async with session.get_stream() as live:  # there are events in the store for this session
            await set_mission(canon, PAYMENTS, "six")
            await next_update(live, A)
        async with session.get_stream(last_event_id=unknown) as resumed:
            assert resumed.status_code == 200
            assert resumed.headers["content-type"].startswith("text/event-stream")
            with anyio.fail_after(DEADLINE_S):
                async with contextlib.aclosing(frames(resumed)) as stream:
                    received = [frame async for frame in stream]

    assert received == []


async def test_a_resumed_stream_replays_nothing_of_another_session(canon: Canon) -> None:
    # Session X hears of A only; session Y hears of B only. X resumes after Y was told of B: X must not get it.
    # (One event store serves every session and the SDK files every session's GET-stream messages under the
    # same stream id, `_GET_stream`; an event store that replays by stream id alone hands X what Y was sent.)
    async with legacy_session(canon, A) as x, legacy_session(canon, B) as y:
        async with x.get_stream() as live:
            await set_mission(canon, PAYMENTS, "seven")
            seen = _sse_id(await next_update(live, A))
        async with y.get_stream() as other:
            await set_mission(canon, BILLING, "for Y only")
            await next_update(other, B)  # sent to Y, so stored
        async with x.get_stream(last_event_id=str(seen)) as resumed:
            events, _ = await replayed(resumed)

    leaked = [f.message for f in events if f.data]
    assert leaked == [], f"session X was replayed another session's messages: {leaked}"
