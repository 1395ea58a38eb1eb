"""canon's own 2025-11-25 GET streams (`core.mcp.fastpath.legacy_streams`), against real uvicorn on 127.0.0.1.

Clients speak raw HTTP/1.1 (parsed with h11), so the exact bytes are checked. Where a behaviour is the SDK's
promise (frames, resumption, errors), the same scenario runs on the same instance through two apps at once: canon's,
and the app with the GET stream left to the SDK (`mcp_app(..., legacy=None)`); the answers must be the same, byte
for byte, but for the event ids (canon numbers a session's GET-stream events; the SDK numbers every message of the
session, responses included). "Not heard" is proven by order: a session's events arrive in order, so one made later
arriving first means the earlier one never will.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import signal
import socket
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any

import anyio
import h11
import mcp_types as types
import pytest
from mcp.server.streamable_http import GET_STREAM_KEY
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.applications import Starlette

from core.http.serve import listening_socket
from core.mcp.events import EventFanout
from core.mcp.fastpath.legacy_streams import LegacyLimits, LegacyStreams
from core.ops.config import Config
from core.seam.instance import Instance, open_instance
from core.values.uris import CHANGES_URI, node_uri
from tests.mcp.conftest import (
    DEADLINE_S,
    LEGACY,
    commit_edits,
    copy_store,
    create_team,
    initialize_body,
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
UPDATED = "notifications/resources/updated"
POST_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
SSE_HEAD = {"server": "uvicorn", "cache-control": "no-cache, no-transform", "connection": "keep-alive",
            "content-type": "text/event-stream", "x-accel-buffering": "no", "transfer-encoding": "chunked"}  # fmt: skip
_ID_LINE = re.compile(rb"^id: (\d+)\r\n")


# -- raw HTTP ----------------------------------------------------------------------------------------------------------
class Raw(RawHTTP):
    """A raw connection (`tests.mcp.raw_http`) that sends any method."""

    async def send(self, method: str, headers: dict[str, str], body: bytes | None = None) -> None:
        fields = [*({"host": f"127.0.0.1:{self.port}"} | headers).items()]
        if body is not None and "transfer-encoding" not in headers and "content-length" not in headers:
            fields.append(("content-length", str(len(body))))
        data = self.http.send(h11.Request(method=method, target="/mcp", headers=fields))
        if body is not None:
            data += self.http.send(h11.Data(data=body))
        if "content-length" not in headers or body is not None:
            data += self.http.send(h11.EndOfMessage())
        await self.stream.send(data)


async def exchange(port: int, method: str, headers: dict[str, str],
                   body: bytes | None = None) -> tuple[int, dict[str, str], bytes]:  # fmt: skip
    """One request on a new connection; the whole answer (an SSE answer is read to its end)."""
    raw = await Raw.connect(port)
    try:
        await raw.send(method, headers, body)
        with anyio.fail_after(DEADLINE_S):
            status, head = await raw.head()
            return status, head, await raw.body()
    finally:
        await raw.aclose()


@dataclasses.dataclass
class Session:
    """A 2025-11-25 session opened over raw HTTP."""

    port: int
    id: str
    token: str | None = None
    requests: int = 1

    def headers(self, **changes: str | None) -> dict[str, str]:
        """The session's GET headers, with these changed (None: left out)."""
        headers: dict[str, str | None] = {"accept": "text/event-stream", "mcp-session-id": self.id,
                                          "mcp-protocol-version": LEGACY}  # fmt: skip
        if self.token is not None:
            headers["authorization"] = f"Bearer {self.token}"
        headers |= {name.replace("_", "-"): value for name, value in changes.items()}
        return {k: v for k, v in headers.items() if v is not None}

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.requests += 1
        body = {"jsonrpc": "2.0", "id": self.requests, "method": method, "params": params}
        status, _, answer = await exchange(self.port, "POST", self.post_headers(), json.dumps(body).encode())
        assert status == 200, answer
        result: dict[str, Any] = json.loads(answer)["result"]
        return result

    def post_headers(self) -> dict[str, str]:
        return POST_HEADERS | self.headers(accept=POST_HEADERS["accept"])

    async def delete(self) -> int:
        status, _, _ = await exchange(self.port, "DELETE", self.headers())
        return status

    @contextlib.asynccontextmanager
    async def stream(self, **changes: str | None) -> AsyncGenerator[Raw]:
        """The session's GET stream (its head read and checked), closed when the block ends."""
        raw = await Raw.connect(self.port)
        try:
            await raw.send("GET", self.headers(**changes))
            with anyio.fail_after(DEADLINE_S):
                status, head = await raw.head()
            assert (status, head) == (200, SSE_HEAD | {"mcp-session-id": self.id}), (status, head)
            yield raw
        finally:
            await raw.aclose()


async def open_session(port: int, *uris: str, token: str | None = None) -> Session:
    """initialize, notifications/initialized, then resources/subscribe to each of `uris`."""
    auth = {} if token is None else {"authorization": f"Bearer {token}"}
    status, head, body = await exchange(port, "POST", POST_HEADERS | auth, json.dumps(initialize_body()).encode())
    assert status == 200, body
    session = Session(port, head["mcp-session-id"], token)
    initialized = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
    assert (await exchange(port, "POST", session.post_headers(), initialized))[0] == 202
    for uri in uris:
        assert await session.request("resources/subscribe", {"uri": uri}) == {}
    return session


# -- frames ------------------------------------------------------------------------------------------------------------
def event_id(frame: bytes) -> int:
    found = _ID_LINE.match(frame)
    assert found is not None, f"a frame without an id: {frame!r}"
    return int(found[1])


def without_id(frame: bytes | None) -> bytes | None:
    """The frame with its id line's number taken out: what must be the same on both paths."""
    return None if frame is None else _ID_LINE.sub(b"id: *\r\n", frame)


def message(frame: bytes) -> dict[str, Any]:
    data = frame.split(b"\r\ndata: ", 1)[1]
    assert data.endswith(b"\r\n\r\n"), frame
    parsed: dict[str, Any] = json.loads(data)
    return parsed


def update_of(frame: bytes | None) -> str:
    assert frame is not None, "the stream ended"
    parsed = message(frame)
    assert parsed["method"] == UPDATED, parsed
    uri: str = parsed["params"]["uri"]
    return uri


async def next_frame(raw: Raw) -> bytes | None:
    with anyio.fail_after(DEADLINE_S):
        return await raw.frame()


def same_answer(answer: tuple[int, dict[str, str], bytes], session: Session) -> tuple[int, dict[str, str], bytes]:
    """An answer with the session's id taken out (each app has sessions of its own)."""
    status, head, body = answer
    if "mcp-session-id" in head:  # the session's, or a new one (the SDK opens one for a GET without an id)
        head["mcp-session-id"] = "<session>" if head["mcp-session-id"] == session.id else "<new session>"
    return status, head, body.replace(session.id.encode(), b"<session>")


# -- apps --------------------------------------------------------------------------------------------------------------
def ours(instance: Instance, **limits: Any) -> Starlette:
    """canon's HTTP app, the GET streams served by canon (with these `LegacyLimits`)."""
    return mcp_app(instance, legacy=LegacyLimits(**limits))


def sdk(instance: Instance) -> Starlette:
    """The same app with the GET stream left to the SDK, as before canon took it over: the reference."""
    return mcp_app(instance, legacy=None)


def legacy_of(served: Served) -> LegacyStreams:
    streams = mcp_of(served.app).legacy
    assert streams is not None
    return streams


def fanout_of(served: Served) -> EventFanout:
    fanout: EventFanout = mcp_of(served.app).fanout
    return fanout


def manager_of(app: Starlette) -> StreamableHTTPSessionManager:
    """The SDK's session manager behind the app's /mcp route."""
    return mcp_of(app).manager


def get_stream_open(served: Served, session: Session) -> bool:
    """Whether the server holds a GET stream of the session (the SDK's, or canon's in the SDK's place)."""
    transport = manager_of(served.app)._server_instances.get(session.id)  # pyright: ignore[reportPrivateUsage]
    return transport is not None and GET_STREAM_KEY in transport._request_streams  # pyright: ignore[reportPrivateUsage]


@contextlib.asynccontextmanager
async def both(instance: Instance) -> AsyncGenerator[tuple[Served, Served]]:
    """canon's app and the SDK reference, on one instance, both served."""
    async with served(ours(instance)) as canon, served(sdk(instance)) as reference:
        yield canon, reference


# -- frames, as the SDK sent them --------------------------------------------------------------------------------------
async def test_a_get_stream_carries_updates_and_list_changes_as_the_sdk_sent_them(instance: Instance) -> None:
    frames: dict[str, list[bytes | None]]
    async with both(instance) as apps, contextlib.AsyncExitStack() as stack:
        streams = {}
        for name, app in zip(("ours", "sdk"), apps, strict=True):
            subscribed = await open_session(app.port, A, CHANGES_URI)
            listing = await open_session(app.port)  # no subscription: hears only that the lists changed
            await listing.request("resources/templates/list", {})
            streams[name] = [await stack.enter_async_context(s.stream()) for s in (subscribed, listing)]
        frames = {name: [] for name in streams}
        changes = [(lambda: commit_edits(instance, PAYMENTS), 2), (lambda: commit_edits(instance, BILLING), 1),
                   (lambda: create_team(instance, "legacy-1"), 2)]  # fmt: skip
        for change, heard in changes:
            await change()  # each heard before the next, so that no two are one batch
            for name, (subscribed_stream, _) in streams.items():
                frames[name] += [await next_frame(subscribed_stream) for _ in range(heard)]
        for name, (_, listing_stream) in streams.items():
            frames[name].append(await next_frame(listing_stream))

    assert [without_id(f) for f in frames["ours"]] == [without_id(f) for f in frames["sdk"]]
    assert [message(f)["method"] for f in frames["ours"] if f is not None] == [
        UPDATED, UPDATED, UPDATED, UPDATED, "notifications/resources/list_changed",
        "notifications/resources/list_changed",
    ]  # fmt: skip
    assert frames["ours"][0] == (
        b'id: 1\r\nevent: message\r\ndata: {"jsonrpc":"2.0","method":"notifications/resources/updated","params":'
        b'{"uri":"canon://nodes/Team/team-payments"}}\r\n\r\n'
    )
    ids = [event_id(f) for f in frames["ours"][:5] if f is not None]
    assert ids == [1, 2, 3, 4, 5]  # a session's own numbering, one by one


async def test_what_the_sdk_sends_on_the_standalone_stream_reaches_the_client_on_canons(instance: Instance) -> None:
    # canon's handlers send nothing there; were one to (a log message, say), it must not be lost.
    log = types.LoggingMessageNotification(params=types.LoggingMessageNotificationParams(level="info", data="hi"))
    frames: dict[str, bytes | None] = {}
    async with both(instance) as apps:
        for name, app in zip(("ours", "sdk"), apps, strict=True):
            session = await open_session(app.port, A)
            async with session.stream() as raw:
                fanout = fanout_of(app)
                (connection,) = fanout._legacy_all.values()  # pyright: ignore[reportPrivateUsage]  # its SDK session
                await connection.send_notification(log)
                frames[name] = await next_frame(raw)

    assert without_id(frames["ours"]) == without_id(frames["sdk"])
    assert frames["ours"] is not None
    assert message(frames["ours"])["params"] == {"level": "info", "data": "hi"}
    assert event_id(frames["ours"]) == 1


# -- resumption --------------------------------------------------------------------------------------------------------
async def test_last_event_id_replays_exactly_the_events_the_session_missed_then_goes_live(instance: Instance) -> None:
    # X hears of A only, Y of A and B. X goes away; A and B change; X comes back after its last id: it is replayed
    # the changes of A it missed (never Y's B), then a priming event, then it hears live.
    resumed: dict[str, list[bytes | None]] = {}
    seen: dict[str, int] = {}
    async with both(instance) as apps:
        sessions: dict[str, tuple[Session, Session]] = {}
        for name, app in zip(("ours", "sdk"), apps, strict=True):
            sessions[name] = (await open_session(app.port, A), await open_session(app.port, A, B))
        async with contextlib.AsyncExitStack() as stack:
            y_streams = {name: await stack.enter_async_context(y.stream()) for name, (_, y) in sessions.items()}
            async with contextlib.AsyncExitStack() as x_stack:
                x_streams = {name: await x_stack.enter_async_context(x.stream()) for name, (x, _) in sessions.items()}
                await commit_edits(instance, PAYMENTS)
                for name in sessions:
                    seen[name] = event_id(await next_frame(x_streams[name]) or b"")
                    assert update_of(await next_frame(y_streams[name])) == A
            for app, (x, _) in zip(apps, sessions.values(), strict=True):
                await until(lambda app=app, x=x: not get_stream_open(app, x))  # the server saw X go
            for node, uri in ((BILLING, B), (PAYMENTS, A), (BILLING, B), (PAYMENTS, A)):
                await commit_edits(instance, node)  # one at a time: each heard by Y before the next
                for y_stream in y_streams.values():
                    assert update_of(await next_frame(y_stream)) == uri
        async with contextlib.AsyncExitStack() as stack:
            again = {name: await stack.enter_async_context(x.stream(last_event_id=str(seen[name])))
                     for name, (x, _) in sessions.items()}  # fmt: skip
            for name, raw in again.items():
                resumed[name] = [await next_frame(raw), await next_frame(raw), await next_frame(raw)]
            await commit_edits(instance, PAYMENTS)
            for name, raw in again.items():
                resumed[name].append(await next_frame(raw))

    assert [without_id(f) for f in resumed["ours"]] == [without_id(f) for f in resumed["sdk"]]
    first, second, priming, live = resumed["ours"]
    assert (update_of(first), update_of(second), update_of(live)) == (A, A, A)
    assert priming == b"id: 4\r\ndata: \r\n\r\n"
    assert [event_id(f or b"") for f in resumed["ours"]] == [seen["ours"] + 1, seen["ours"] + 2, 4, 5]


async def test_resuming_while_the_stream_is_open_replays_and_ends_as_the_sdk_does(instance: Instance) -> None:
    answers: dict[str, tuple[int, dict[str, str], bytes]] = {}
    async with both(instance) as apps:
        for name, app in zip(("ours", "sdk"), apps, strict=True):
            session = await open_session(app.port, A)
            async with session.stream() as live:
                await commit_edits(instance, PAYMENTS)
                first = event_id(await next_frame(live) or b"")
                await commit_edits(instance, PAYMENTS)
                await next_frame(live)
                answer = await exchange(app.port, "GET", session.headers(last_event_id=str(first)))
                answers[name] = same_answer(answer, session)
                await commit_edits(instance, PAYMENTS)
                assert update_of(await next_frame(live)) == A  # the open stream goes on

    status, head, body = answers["ours"]
    assert (status, head) == (200, SSE_HEAD | {"mcp-session-id": "<session>"})
    assert (status, head) == answers["sdk"][:2]
    assert without_id(body) == without_id(answers["sdk"][2])
    assert update_of(body) == A  # the one event after `first`, and the end


@pytest.mark.parametrize("last_event_id", ["999", "0", "not-an-id", "9" * 8_000],
                         ids=["never-issued", "zero", "text", "8000-digits"])  # fmt: skip
async def test_an_unknown_last_event_id_is_an_empty_stream_that_ends_at_once(instance: Instance,
                                                                             last_event_id: str) -> None:  # fmt: skip
    answers = []
    async with both(instance) as apps:
        for app in apps:
            session = await open_session(app.port, A)
            async with session.stream() as live:  # events in the session's store
                await commit_edits(instance, PAYMENTS)
                await next_frame(live)
            await until(lambda app=app, session=session: not get_stream_open(app, session))
            answer = await exchange(app.port, "GET", session.headers(last_event_id=last_event_id))
            answers.append(same_answer(answer, session))

    assert answers[0] == answers[1] == (200, SSE_HEAD | {"mcp-session-id": "<session>"}, b"")


async def test_a_session_is_never_replayed_another_sessions_events(instance: Instance) -> None:
    async with served(ours(instance)) as canon:
        x, y = await open_session(canon.port, A), await open_session(canon.port, B)
        async with x.stream() as x_stream, y.stream() as y_stream:
            await commit_edits(instance, PAYMENTS)
            assert update_of(await next_frame(x_stream)) == A
            await commit_edits(instance, BILLING)
            assert update_of(await next_frame(y_stream)) == B  # Y's first event: id 1, as X's was
        for session in (x, y):
            _, _, body = await exchange(canon.port, "GET", session.headers(last_event_id="0"))
            assert body == b""  # 0 was never issued: nothing of anyone's
        async with x.stream(last_event_id="1") as x_again, y.stream(last_event_id="1") as y_again:
            primings = [await next_frame(x_again), await next_frame(y_again)]
            await commit_edits(instance, PAYMENTS, BILLING)
            heard = [update_of(await next_frame(x_again)), update_of(await next_frame(y_again))]

    assert primings == [b"id: 2\r\ndata: \r\n\r\n"] * 2  # nothing replayed: only its own event 1 came before
    assert heard == [A, B]


# -- requests the SDK answers ------------------------------------------------------------------------------------------
BAD_GETS: dict[str, Callable[[Session], dict[str, str]]] = {
    "accept json only": lambda s: s.headers(accept="application/json"),
    "no accept": lambda s: s.headers(accept=None),
    "a foreign Host": lambda s: s.headers(host="evil.example"),
    "a foreign Origin": lambda s: s.headers(origin="http://evil.example"),
    "an unknown session": lambda s: s.headers(mcp_session_id="0123456789abcdef"),
    "no session": lambda s: s.headers(mcp_session_id=None),
    "a 2026-07-28 version header": lambda s: s.headers(mcp_protocol_version="2026-07-28"),
    "an unknown version header": lambda s: s.headers(mcp_protocol_version="1900-01-01"),
    "a declared body over the limit": lambda s: s.headers(content_length=str(8 * 1024 * 1024)),
}


@pytest.mark.parametrize("case", BAD_GETS)
async def test_a_get_that_is_not_a_stream_the_sdk_would_serve_is_answered_as_the_sdk_answers_it(
    instance: Instance, case: str
) -> None:
    answers = []
    async with both(instance) as apps:
        for app in apps:
            session = await open_session(app.port, A)
            answers.append(same_answer(await exchange(app.port, "GET", BAD_GETS[case](session)), session))
        assert legacy_of(apps[0]).count == 0

    assert answers[0] == answers[1]
    assert answers[0][0] >= 400


async def test_a_second_get_stream_of_a_session_is_refused_as_the_sdk_refuses_it_until_the_first_ends(
    instance: Instance,
) -> None:
    answers = []
    async with both(instance) as apps:
        for app in apps:
            session = await open_session(app.port, A)
            async with session.stream():
                answers.append(same_answer(await exchange(app.port, "GET", session.headers()), session))
            await until(lambda app=app, session=session: not get_stream_open(app, session))
            async with session.stream() as again:
                await commit_edits(instance, PAYMENTS)
                assert update_of(await next_frame(again)) == A

    assert answers[0] == answers[1]
    status, head, body = answers[0]
    assert (status, head["content-type"]) == (409, "application/json")
    assert json.loads(body)["error"]["code"] == -32600


async def test_a_session_opened_with_another_token_is_not_found_as_in_the_sdk(seed_template: Path,
                                                                                tmp_path: Path) -> None:  # fmt: skip
    config = Config(store=copy_store(seed_template, tmp_path / "canon.db"), tokens=tmp_path / "canon-tokens.json")
    instance = open_instance(config)
    alice, bob = instance.tokens.create("alice", "reader"), instance.tokens.create("bob", "reader")
    answers = []
    async with both(instance) as apps:
        for app in apps:
            session = await open_session(app.port, A, token=alice)
            headers = session.headers(authorization=f"Bearer {bob}")
            answers.append(same_answer(await exchange(app.port, "GET", headers), session))
        assert legacy_of(apps[0]).count == 0
    instance.close()

    assert answers[0] == answers[1]
    assert answers[0][0] == 404


# -- how streams end ---------------------------------------------------------------------------------------------------
async def test_delete_ends_the_stream_and_drops_the_sessions_state(instance: Instance) -> None:
    ends = []
    async with both(instance) as apps:
        for app in apps:
            session = await open_session(app.port, A)
            async with session.stream() as live:
                assert await session.delete() == 200
                ends.append(await next_frame(live))
            answer = await exchange(app.port, "GET", session.headers())
            assert answer[0] == 404  # the session is gone: the SDK answers for it
        canon = apps[0]
        await until(lambda: fanout_of(canon).legacy_subscriptions() == 0)
        assert (legacy_of(canon).count, legacy_of(canon).sessions) == (0, 0)

    assert ends == [None, None]  # the response ends (its last chunk), on both paths


async def test_a_client_that_disconnects_releases_its_stream_and_is_told_on_its_return(instance: Instance) -> None:
    async with served(ours(instance)) as canon:
        session = await open_session(canon.port, A)
        async with session.stream() as live:
            await commit_edits(instance, PAYMENTS)
            last = event_id(await next_frame(live) or b"")
            assert legacy_of(canon).count == 1
        await until(lambda: legacy_of(canon).count == 0)
        await commit_edits(instance, PAYMENTS)  # recorded while the client is away
        witness = await open_session(canon.port, B)
        async with witness.stream() as other:
            await commit_edits(instance, BILLING)
            assert update_of(await next_frame(other)) == B  # committed later: A's change was recorded by now
        async with session.stream(last_event_id=str(last)) as again:
            replayed, priming = await next_frame(again), await next_frame(again)
            assert (legacy_of(canon).count, legacy_of(canon).sessions) == (1, 2)

    assert update_of(replayed) == A
    assert priming == b"id: %d\r\ndata: \r\n\r\n" % (last + 2)


@pytest.mark.parametrize("path", ["ours", "sdk"])
async def test_an_open_get_stream_keeps_its_session_alive_and_once_it_ends_the_session_expires(
    instance: Instance, path: str
) -> None:
    app = ours(instance, keepalive_s=0.1) if path == "ours" else sdk(instance)
    async with served(app) as server:
        manager = manager_of(app)
        manager.session_idle_timeout = 0.5  # sessions opened from now on expire after half a second without a request
        session = await open_session(server.port, A)
        async with session.stream() as live:
            await anyio.sleep(1.5)  # three idle periods pass while only the stream is open
            await commit_edits(instance, PAYMENTS)
            frame = await next_frame(live)
            if path == "ours":  # canon pings a stream that was silent for a tick (the SDK only every 15 s)
                assert frame is not None
                assert frame.startswith(b": ping - ")
                while (frame := await next_frame(live)) is not None and frame.startswith(b":"):
                    pass
            assert update_of(frame) == A
            assert await session.request("resources/templates/list", {}) != {}  # the session is alive
        await until(lambda: session.id not in manager._server_instances)  # pyright: ignore[reportPrivateUsage]
        if path == "ours":
            await until(lambda: fanout_of(server).legacy_subscriptions() == 0 and legacy_of(server).sessions == 0)


async def test_server_shutdown_ends_every_get_stream(instance: Instance) -> None:
    async with served(ours(instance)) as canon, contextlib.AsyncExitStack() as stack:
        raws = [await stack.enter_async_context((await open_session(canon.port, A)).stream()) for _ in range(2)]
        canon.server.should_exit = True  # what SIGINT does
        ends = [await next_frame(raw) for raw in raws]

    assert ends == [None, None]


def test_canon_serve_stopped_by_sigint_ends_a_get_stream_and_exits(seed_template: Path, tmp_path: Path) -> None:
    store = copy_store(seed_template, tmp_path / "canon.db")

    async def stream_then_stop(port: int, stop: Callable[[], None]) -> bytes | None:
        session = await open_session(port, A)
        async with session.stream() as raw:
            stop()
            with anyio.fail_after(DEADLINE_S * 2):
                return await raw.frame()

    with serving(store, cwd=tmp_path) as process:
        end = anyio.run(stream_then_stop, process.port, lambda: process.popen.send_signal(signal.SIGINT))
        code = process.popen.wait(timeout=DEADLINE_S * 2)

    assert end is None
    assert code in (0, 130)


# -- bounds ------------------------------------------------------------------------------------------------------------
async def test_a_get_stream_past_the_cap_is_refused_until_one_ends(instance: Instance) -> None:
    async with served(ours(instance, max_streams=1)) as canon:
        first, second = await open_session(canon.port, A), await open_session(canon.port, A)
        async with first.stream():
            status, head, body = await exchange(canon.port, "GET", second.headers())
        await until(lambda: legacy_of(canon).count == 0)
        async with second.stream() as again:
            await commit_edits(instance, PAYMENTS)
            heard = update_of(await next_frame(again))

    assert (status, head["content-type"], head["mcp-session-id"]) == (503, "application/json", second.id)
    assert json.loads(body) == {"jsonrpc": "2.0", "id": None,
                                "error": {"code": -32603, "message": "Too many open streams"}}  # fmt: skip
    assert heard == A


async def test_a_reader_that_stops_is_ended_at_the_backlog_bound_and_resumes_without_loss(instance: Instance) -> None:
    nodes = [n for n in instance.store.iter_nodes() if n.visibility == "public" and "description" in n.properties][:60]
    public, uris = [n.id for n in nodes], [node_uri(n.type, n.id) for n in nodes]
    sock = listening_socket("127.0.0.1", 0)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # inherited by accepted sockets: small, fixed
    async with served(ours(instance, max_backlog=4, replay=10_000), sock) as canon:
        slow, fast = await open_session(canon.port, *uris), await open_session(canon.port, *uris)
        slow_raw = await Raw.connect(canon.port, receive_buffer=4096)
        await slow_raw.send("GET", slow.headers())
        assert (await slow_raw.head())[0] == 200
        async with fast.stream() as reader:
            batches = 0
            while legacy_of(canon).count == 2:  # each batch is ~8 kB a stream: the slow one fills its buffers
                assert batches < 60, "the stream that stopped reading was never ended"
                await commit_edits(instance, *public)
                batches += 1
                assert [update_of(await next_frame(reader)) for _ in public] == uris
        written: list[bytes] = []
        while (frame := await next_frame(slow_raw)) is not None:
            written.append(frame)
        await slow_raw.aclose()
        async with slow.stream(last_event_id=str(event_id(written[-1]))) as again:
            replayed: list[bytes] = []
            while (frame := await next_frame(again)) is not None and b"event: message" in frame:
                replayed.append(frame)

    heard = written + replayed
    assert 0 < len(written) < len(public) * batches  # it was ended before it had everything...
    assert [event_id(f) for f in heard] == list(range(1, len(public) * batches + 1))  # ...and lost nothing
    assert [update_of(f) for f in heard] == uris * batches


# -- many --------------------------------------------------------------------------------------------------------------
async def test_two_hundred_sessions_hear_every_event_in_order(instance: Instance) -> None:
    writes = 5
    heard: list[list[bytes | None]] = [[] for _ in range(200)]
    async with served(ours(instance)) as canon, contextlib.AsyncExitStack() as stack:
        raws = [await stack.enter_async_context((await open_session(canon.port, A, B)).stream()) for _ in range(200)]
        for _ in range(writes):  # each write heard before the next: the pump sends one update per URI per batch
            await commit_edits(instance, PAYMENTS)
            await commit_edits(instance, BILLING)
            for raw, frames in zip(raws, heard, strict=True):
                frames += [await next_frame(raw), await next_frame(raw)]

    for frames in heard:
        assert [update_of(f) for f in frames] == [A, B] * writes
        assert [event_id(f or b"") for f in frames] == list(range(1, 2 * writes + 1))
