"""canon's own 2026-07-28 listen streams over HTTP (`core.mcp.fastpath.listen`), against real uvicorn on 127.0.0.1.

Clients speak raw HTTP/1.1 (parsed with h11) so the exact bytes are checked. Where a behaviour is the SDK's
promise (frames, errors), the same request also goes to the same app with canon's listen path switched off
(`mcp_app(..., listen=None)`, i.e. the SDK's `ListenHandler`), and the answers must be identical; the frames
are also pinned to the transcript the SDK path produced before canon took listen over. "Not heard" is proven by
order: the updates of one stream arrive in order, so one made later arriving first means the earlier one never
will.
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from starlette.applications import Starlette

from core import __version__
from core.http.serve import listening_socket
from core.mcp.fastpath.listen_streams import ListenLimits, ListenStreams
from core.mcp.handshake import CANON_ICON
from core.ops.config import Config
from core.seam.instance import Instance, open_instance
from core.values.audit import AuditQuery
from core.values.uris import node_uri
from tests.mcp.conftest import (
    DEADLINE_S,
    MODERN,
    commit_edits,
    copy_store,
    create_team,
    envelope,
    mcp_app,
    mcp_of,
    serving,
    until,
)
from tests.mcp.raw_http import Raw as RawHTTP
from tests.mcp.raw_http import Served, served

pytestmark = pytest.mark.anyio

PAYMENTS, BILLING = "team-payments", "team-billing"
A, B = node_uri("Team", PAYMENTS), node_uri("Team", BILLING)
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream",
           "mcp-protocol-version": MODERN, "mcp-method": "subscriptions/listen"}  # fmt: skip
SSE_HEAD = {"content-type": "text/event-stream", "cache-control": "no-cache, no-transform", "connection": "keep-alive",
            "x-accel-buffering": "no", "transfer-encoding": "chunked"}  # fmt: skip

# The SDK path's answer to TRANSCRIPT_LISTEN and to a change of team-payments, byte for byte (mcp 2.3.0).
TRANSCRIPT_LISTEN = {"resourceSubscriptions": [A, "canon://nodes/Team/nope"], "toolsListChanged": True,
                     "promptsListChanged": True, "resourcesListChanged": True}  # fmt: skip
TRANSCRIPT_ACK = (
    b'event: message\r\ndata: {"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":'
    b'{"_meta":{"io.modelcontextprotocol/subscriptionId":"L1"},"notifications":{"toolsListChanged":true,'
    b'"resourcesListChanged":true,"resourceSubscriptions":["canon://nodes/Team/team-payments"]}}}\r\n\r\n'
)
TRANSCRIPT_UPDATE = (
    b'event: message\r\ndata: {"jsonrpc":"2.0","method":"notifications/resources/updated","params":'
    b'{"_meta":{"io.modelcontextprotocol/subscriptionId":"L1"},"uri":"canon://nodes/Team/team-payments"}}\r\n\r\n'
)
TRANSCRIPT_LIMIT = b'{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"Subscription limit reached"}}'


def listen_body(notifications: dict[str, Any], id_: Any = "L1") -> dict[str, Any]:
    params = {"notifications": notifications, "_meta": envelope()}
    return {"jsonrpc": "2.0", "id": id_, "method": "subscriptions/listen", "params": params}


def result_frame(id_: Any) -> dict[str, Any]:
    """The graceful end the SDK sends (`ListenHandler.close`), as JSON."""
    info = {"name": "canon", "title": "canon", "version": __version__,
            "description": "A knowledge server for an organisation's canonical model.",
            "icons": [{"src": CANON_ICON, "mimeType": "image/svg+xml", "sizes": ["64x64"]}]}  # fmt: skip
    meta = {"io.modelcontextprotocol/subscriptionId": id_, "io.modelcontextprotocol/serverInfo": info}
    return {"jsonrpc": "2.0", "id": id_, "result": {"_meta": meta, "resultType": "complete"}}


def data_of(frame: bytes) -> dict[str, Any]:
    assert frame.startswith(b"event: message\r\ndata: "), frame
    assert frame.endswith(b"\r\n\r\n"), frame
    parsed: dict[str, Any] = json.loads(frame.removeprefix(b"event: message\r\ndata: "))
    return parsed


# -- a raw HTTP/1.1 client that listens --------------------------------------------------------------------------------
class Raw(RawHTTP):
    """A raw connection (`tests.mcp.raw_http`) that sends listen requests and reads their frames."""

    async def listen(self, notifications: dict[str, Any], id_: Any = "L1") -> None:
        await self.request(json.dumps(listen_body(notifications, id_)).encode(), HEADERS)

    async def update(self) -> str:
        """The URI of the next `notifications/resources/updated` frame."""
        frame = await self.frame()
        assert frame is not None
        message = data_of(frame)
        assert message["method"] == "notifications/resources/updated", message
        uri: str = message["params"]["uri"]
        return uri


async def refused_listen(port: int) -> tuple[tuple[int, dict[str, str]], bytes]:
    """The head and body of the answer to a listen request (id 7) expected not to become a stream."""
    raw = await Raw.connect(port)
    try:
        await raw.listen({"resourceSubscriptions": [A]}, 7)
        return await raw.head(), await raw.body()
    finally:
        await raw.aclose()


@contextlib.asynccontextmanager
async def listening(port: int, notifications: dict[str, Any], id_: Any = "L1", **options: Any) -> AsyncGenerator[Raw]:
    """A listen stream whose acknowledgement has arrived (so the server delivers to it from now on)."""
    raw = await Raw.connect(port, **options)
    try:
        await raw.listen(notifications, id_)
        status, _ = await raw.head()
        assert status == 200
        ack = await raw.frame()
        assert ack is not None
        assert data_of(ack)["method"] == "notifications/subscriptions/acknowledged"
        yield raw
    finally:
        await raw.aclose()


def streams_of(served: Served) -> ListenStreams:
    streams: ListenStreams = mcp_of(served.app).listen
    return streams


def fast(instance: Instance, **limits: Any) -> Starlette:
    """canon's HTTP app, listen served by canon (with these `ListenLimits`)."""
    return mcp_app(instance, listen=ListenLimits(**limits))


def sdk(instance: Instance) -> Starlette:
    """The same app with listen left to the SDK, as before canon took it over: the reference."""
    return mcp_app(instance, listen=None)


# -- frames ------------------------------------------------------------------------------------------------------------
async def test_a_listen_stream_is_the_ack_then_updates_byte_for_byte_as_the_sdk_sent_them(instance: Instance) -> None:
    async with served(fast(instance)) as ours, served(sdk(instance)) as theirs:
        streams = {name: await Raw.connect(s.port) for name, s in (("ours", ours), ("sdk", theirs))}
        try:
            heads, frames = {}, {}
            for name, raw in streams.items():
                await raw.listen(TRANSCRIPT_LISTEN)
                heads[name] = await raw.head()
                frames[name] = [await raw.frame()]
            await commit_edits(instance, PAYMENTS)
            for raw_frames, raw in ((frames[n], streams[n]) for n in streams):
                raw_frames.append(await raw.frame())
            await create_team(instance, "listen-1")  # the resource list changed
            for raw_frames, raw in ((frames[n], streams[n]) for n in streams):
                raw_frames.append(await raw.frame())
        finally:
            for raw in streams.values():
                await raw.aclose()

    assert heads["ours"] == heads["sdk"] == (200, {"server": "uvicorn", **SSE_HEAD})
    assert frames["ours"] == frames["sdk"]
    ack, update, list_changed = frames["ours"]
    assert (ack, update) == (TRANSCRIPT_ACK, TRANSCRIPT_UPDATE)
    assert list_changed is not None
    assert data_of(list_changed) == {"jsonrpc": "2.0", "method": "notifications/resources/list_changed",
                                     "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": "L1"}}}  # fmt: skip


async def test_every_listener_hears_with_its_own_subscription_id_whatever_its_type(instance: Instance) -> None:
    ids: list[Any] = [0, 7, -3, "x", "ü-id", 'quote"d', 2**53]
    async with served(fast(instance)) as ours, contextlib.AsyncExitStack() as stack:
        raws = [await stack.enter_async_context(listening(ours.port, {"resourceSubscriptions": [A]}, id_))
                for id_ in ids]  # fmt: skip
        await commit_edits(instance, PAYMENTS)
        frames = [await raw.frame() for raw in raws]

    for id_, frame in zip(ids, frames, strict=True):
        assert frame is not None
        assert data_of(frame)["params"] == {"_meta": {"io.modelcontextprotocol/subscriptionId": id_}, "uri": A}


# -- who may hear what -------------------------------------------------------------------------------------------------
async def test_uris_the_caller_may_not_read_are_dropped_from_the_ack_and_never_heard(instance: Instance) -> None:
    internal, restricted = node_uri("Decision", "adr-0002"), node_uri("Service", "svc-secrets-broker")
    unknown = node_uri("Team", "team-nowhere")
    requested = [internal, A, restricted, unknown, B]
    async with served(fast(instance)) as ours:
        raw = await Raw.connect(ours.port)
        try:
            await raw.listen({"resourceSubscriptions": requested, "promptsListChanged": True})
            assert (await raw.head())[0] == 200
            ack = await raw.frame()
            assert ack is not None
            await commit_edits(instance, "adr-0002")  # the anonymous caller may not read it
            await commit_edits(instance, PAYMENTS)
            heard = await raw.update()
        finally:
            await raw.aclose()

    assert data_of(ack)["params"]["notifications"] == {"resourceSubscriptions": [A, B]}  # and no prompts
    assert heard == A
    instance.audit.flush()
    records, _ = instance.store.audit_records(AuditQuery(surface="mcp-http"), before=None, limit=20)
    checked = {r["target"]: r["outcome"] for r in records if r["action"] == "subscriptions/listen"}
    assert set(checked) == set(requested)  # every URI was checked through the dispatcher, and audited
    assert checked[A] == "ok" != checked[internal]


# -- requests the SDK answers ------------------------------------------------------------------------------------------
def _body(**changes: Any) -> bytes:
    body = listen_body({"resourceSubscriptions": [A]}, 1)
    for key, value in changes.items():
        if value is None:
            body.pop(key, None)
        else:
            body[key] = value
    return json.dumps(body).encode()


_META = envelope()
BAD_REQUESTS: dict[str, tuple[bytes | None, dict[str, str], list[tuple[str, str]]]] = {
    "accept json only": (_body(), {**HEADERS, "accept": "application/json"}, []),
    "accept event stream only": (_body(), {**HEADERS, "accept": "text/event-stream"}, []),
    "params of the wrong shape": (
        _body(params={"notifications": {"resourceSubscriptions": "x"}, "_meta": _META}),
        HEADERS,
        [],
    ),
    "no notifications": (_body(params={"_meta": _META}), HEADERS, []),
    "no id (a notification)": (_body(id=None), HEADERS, []),
    "a null id": (json.dumps(listen_body({}, None)).encode(), HEADERS, []),
    "no _meta": (_body(params={"notifications": {}}), HEADERS, []),
    "client capabilities not an object": (
        _body(params={"notifications": {}, "_meta": {**_META, "io.modelcontextprotocol/clientCapabilities": 1}}),
        HEADERS,
        [],
    ),
    "an unsupported version": (
        _body(
            params={"notifications": {}, "_meta": {**_META, "io.modelcontextprotocol/protocolVersion": "1900-01-01"}}
        ),
        {**HEADERS, "mcp-protocol-version": "1900-01-01"},
        [],
    ),
    "the body's method is not the header's": (_body(method="tools/list"), HEADERS, []),
    "Mcp-Method twice": (_body(), HEADERS, [("mcp-method", "subscriptions/listen")]),
    "a 2025-11-25 version header": (_body(), {**HEADERS, "mcp-protocol-version": "2025-11-25"}, []),
    "not JSON": (b"{nope", HEADERS, []),
    "a batch": (b"[" + _body() + b"]", HEADERS, []),
    "wrong content type": (_body(), {**HEADERS, "content-type": "text/plain"}, []),
    "a foreign Origin": (_body(), {**HEADERS, "origin": "http://evil.example"}, []),
    "a foreign Host": (_body(), {**HEADERS, "host": "evil.example"}, []),
    "a declared length over the limit": (None, {**HEADERS, "content-length": str(2 * 1024 * 1024)}, []),
    "a chunked body over the limit": (
        b'{"x":"' + b"x" * (1024 * 1024) + b'"}',
        {**HEADERS, "transfer-encoding": "chunked"},
        [],
    ),
}


@pytest.mark.parametrize("case", BAD_REQUESTS)
async def test_a_request_that_is_not_a_valid_listen_is_answered_as_the_sdk_answers_it(instance: Instance,
                                                                                      case: str) -> None:  # fmt: skip
    body, headers, extra = BAD_REQUESTS[case]
    answers: list[tuple[int, str | None, bytes]] = []
    async with served(fast(instance)) as ours, served(sdk(instance)) as theirs:
        for port in (ours.port, theirs.port):
            raw = await Raw.connect(port)
            try:
                await raw.request(body, headers, extra=extra)
                status, head = await raw.head()
                answers.append((status, head.get("content-type"), await raw.body()))
            finally:
                await raw.aclose()
        assert streams_of(ours).count == 0

    assert answers[0] == answers[1]
    assert answers[0][1] != "text/event-stream"


# -- bounds ------------------------------------------------------------------------------------------------------------
async def test_a_listen_past_the_stream_cap_is_refused_as_the_sdk_refuses_it_until_a_stream_ends(
    instance: Instance,
) -> None:
    async with served(fast(instance, max_streams=2)) as ours:
        async with listening(ours.port, {"resourceSubscriptions": [A]}), listening(ours.port, {}):
            refused = await refused_listen(ours.port)
        await until(lambda: streams_of(ours).count == 0)
        async with listening(ours.port, {"resourceSubscriptions": [A]}, 7) as again:
            await commit_edits(instance, PAYMENTS)
            heard = await again.update()

    (status, head), body = refused
    assert (status, head["content-type"], body) == (200, "application/json", TRANSCRIPT_LIMIT)
    assert heard == A


async def test_the_configured_stream_bounds_apply_to_listen_and_get_streams(
    seed_template: Path, tmp_path: Path
) -> None:
    store = copy_store(seed_template, tmp_path / "canon.db")
    configured = open_instance(Config(store=store, tokens=tmp_path / "canon-tokens.json", max_streams=1,
                                      stream_backlog=7))  # fmt: skip
    try:
        app = mcp_app(configured)
        async with served(app) as ours, listening(ours.port, {"resourceSubscriptions": [A]}):
            endpoint = mcp_of(app)
            assert endpoint.listen is not None
            assert endpoint.legacy is not None
            assert endpoint.listen.limits == ListenLimits(max_streams=1, max_backlog=7)
            assert (endpoint.legacy.limits.max_streams, endpoint.legacy.limits.max_backlog) == (1, 7)
            refused = await refused_listen(ours.port)
    finally:
        configured.close()

    (status, _), body = refused
    assert (status, body) == (200, TRANSCRIPT_LIMIT)


async def test_a_listener_that_stops_reading_is_ended_at_the_backlog_bound_and_the_others_hear_everything(
    instance: Instance,
) -> None:
    nodes = [n for n in instance.store.iter_nodes() if n.visibility == "public" and "description" in n.properties][:60]
    public, uris = [n.id for n in nodes], [node_uri(n.type, n.id) for n in nodes]
    assert len(public) == 60
    sock = listening_socket("127.0.0.1", 0)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # inherited by accepted sockets: small, fixed
    async with (
        served(fast(instance, max_backlog=4), sock) as ours,
        listening(ours.port, {"resourceSubscriptions": uris}, "slow", receive_buffer=4096) as slow,
        listening(ours.port, {"resourceSubscriptions": uris}, "fast") as reader,
    ):
        heard: list[str] = []
        batches = 0
        while streams_of(ours).count == 2:  # each batch is ~12 kB a stream: the slow one fills its buffers in a few
            assert batches < 60, "the stream that stopped reading was never ended"
            await commit_edits(instance, *public)
            batches += 1
            heard += [await reader.update() for _ in public]  # in this batch's deliver the slow one may have ended
        await commit_edits(instance, *public)  # the fast one goes on hearing
        heard += [await reader.update() for _ in public]
        slow_frames: list[bytes] = []
        with anyio.fail_after(DEADLINE_S):
            while (frame := await slow.frame()) is not None:
                slow_frames.append(frame)

    assert heard == uris * (batches + 1)
    assert 0 < len(slow_frames) < len(public) * batches  # what was written before it was ended, then the end...
    assert all(data_of(f)["method"] == "notifications/resources/updated" for f in slow_frames)  # ...with no result


# -- how streams end ---------------------------------------------------------------------------------------------------
async def test_a_client_that_disconnects_releases_its_stream(instance: Instance) -> None:
    async with served(fast(instance)) as ours:
        async with listening(ours.port, {"resourceSubscriptions": [A], "toolsListChanged": True}):
            assert streams_of(ours).count == 1
        await until(lambda: streams_of(ours).count == 0)
        async with listening(ours.port, {"resourceSubscriptions": [A]}) as other:
            await commit_edits(instance, PAYMENTS)  # delivering to what is left (the released stream is not in the way)
            assert await other.update() == A


async def test_server_shutdown_ends_every_stream_with_the_listen_result(instance: Instance) -> None:
    async with served(fast(instance)) as ours:
        first = await Raw.connect(ours.port)
        second = await Raw.connect(ours.port)
        for raw, id_ in ((first, "L1"), (second, 2)):
            await raw.listen({"resourceSubscriptions": [A]}, id_)
            await raw.head()
            await raw.frame()
        ours.server.should_exit = True  # what SIGINT does
        with anyio.fail_after(DEADLINE_S):
            ends = [(await raw.frame(), await raw.frame()) for raw in (first, second)]
        for raw in (first, second):
            await raw.aclose()

    (result_1, end_1), (result_2, end_2) = ends
    assert result_1 is not None
    assert data_of(result_1) == result_frame("L1")
    assert result_2 is not None
    assert data_of(result_2) == result_frame(2)
    assert (end_1, end_2) == (None, None)


def test_canon_serve_stopped_by_sigint_ends_a_listen_stream_with_its_result_and_exits(
    seed_template: Path, tmp_path: Path
) -> None:
    store = copy_store(seed_template, tmp_path / "canon.db")

    async def listen_then_stop(port: int, stop: Callable[[], None]) -> tuple[bytes | None, bytes | None]:
        async with listening(port, {"resourceSubscriptions": [A]}, 5) as raw:
            stop()
            with anyio.fail_after(DEADLINE_S * 2):
                return await raw.frame(), await raw.frame()

    with serving(store, cwd=tmp_path) as process:
        result, end = anyio.run(listen_then_stop, process.port, lambda: process.popen.send_signal(signal.SIGINT))
        code = process.popen.wait(timeout=30)

    assert result is not None
    assert data_of(result) == result_frame(5)
    assert end is None
    assert code in (0, 130)


# -- many --------------------------------------------------------------------------------------------------------------
async def test_two_hundred_listeners_hear_every_event_in_order(instance: Instance) -> None:
    writes = 5
    heard: list[list[str]] = [[] for _ in range(200)]
    async with served(fast(instance)) as ours, contextlib.AsyncExitStack() as stack:
        raws = [await stack.enter_async_context(listening(ours.port, {"resourceSubscriptions": [A, B]}, i))
                for i in range(200)]  # fmt: skip
        for _ in range(writes):  # each write heard before the next: the pump sends one update per URI per batch
            await commit_edits(instance, PAYMENTS)
            await commit_edits(instance, BILLING)
            with anyio.fail_after(DEADLINE_S):
                for raw, uris in zip(raws, heard, strict=True):
                    uris += [await raw.update(), await raw.update()]

    assert heard == [[A, B] * writes] * 200
