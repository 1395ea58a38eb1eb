"""core.wire.priority: every HTTP request counts as cheap work while it is served; walks give way to it, not to
their own request."""

from __future__ import annotations

import time
from typing import Any

import anyio
import httpx2
import pytest
from starlette.types import Receive, Scope, Send

from core.instance import Instance
from core.priority import Priority, Request, current_request
from core.wire.priority import CountRequests
from tests.wire.conftest import (
    DEADLINE_S,
    LEGACY,
    LEGACY_HEADERS,
    asgi_http,
    initialize_body,
    modern_request,
    until,
)

pytestmark = pytest.mark.anyio

BASE = "http://127.0.0.1:8000"


async def _answer(send: Send, *, content_type: bytes = b"application/json") -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", content_type)]})


async def test_a_request_counts_while_it_is_served_in_worker_threads_too_and_no_more_once_answered() -> None:
    priority = Priority()
    seen: dict[str, Any] = {}

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen["cheap"] = priority.cheap
        seen["request"] = current_request.get()
        seen["in a worker thread"] = await anyio.to_thread.run_sync(current_request.get)
        await _answer(send)
        await send({"type": "http.response.body", "body": b"{}"})

    async with httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=CountRequests(app, priority)), base_url=BASE
    ) as http:
        response = await http.get("/anything")
    assert response.status_code == 200
    assert seen["cheap"] == 1
    assert isinstance(seen["request"], Request)
    assert seen["in a worker thread"] is seen["request"]
    assert priority.cheap == 0


async def test_a_request_counts_no_more_once_its_response_becomes_an_event_stream() -> None:
    priority = Priority()
    seen: list[int] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await _answer(send, content_type=b"text/event-stream")
        seen.append(priority.cheap)  # a stream stays open for minutes: not work
        await send({"type": "http.response.body", "body": b"data: {}\n\n"})

    async with httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=CountRequests(app, priority)), base_url=BASE
    ) as http:
        await http.get("/stream")
    assert seen == [0]
    assert priority.cheap == 0


async def test_a_request_whose_app_fails_or_is_cancelled_counts_no_more() -> None:
    priority = Priority()
    forever = anyio.Event()

    async def failing(scope: Scope, receive: Receive, send: Send) -> None:
        raise RuntimeError("a bug")

    async def stuck(scope: Scope, receive: Receive, send: Send) -> None:
        await forever.wait()

    async with httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=CountRequests(failing, priority)), base_url=BASE
    ) as http:
        with pytest.raises(RuntimeError):
            await http.get("/fails")
    assert priority.cheap == 0

    async with (
        httpx2.AsyncClient(transport=httpx2.ASGITransport(app=CountRequests(stuck, priority)), base_url=BASE) as http,
        anyio.create_task_group() as tasks,
    ):
        tasks.start_soon(http.get, "/stuck")
        await until(lambda: priority.cheap == 1)
        tasks.cancel_scope.cancel()  # the client went away
    assert priority.cheap == 0


async def _walk_legacy(http: httpx2.AsyncClient, call: dict[str, Any]) -> dict[str, Any]:
    init = await http.post("/mcp", headers=LEGACY_HEADERS, json=initialize_body())
    session = {**LEGACY_HEADERS, "Mcp-Session-Id": init.headers["mcp-session-id"], "MCP-Protocol-Version": LEGACY}
    await http.post("/mcp", headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    answer = await http.post("/mcp", headers=session, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                                            "params": call})  # fmt: skip
    return answer.json()["result"]


async def _walk_modern(http: httpx2.AsyncClient, call: dict[str, Any]) -> dict[str, Any]:
    headers, body = modern_request("tools/call", call)
    return (await http.post("/mcp", headers=headers, json=body)).json()["result"]


@pytest.mark.parametrize("walk", [_walk_legacy, _walk_modern], ids=["2025-11-25", "2026-07-28"])
async def test_a_walk_called_over_http_does_not_give_way_to_its_own_request(instance: Instance, walk: Any) -> None:
    """The host counts the walk's request like any other; the dispatcher stops counting it while it walks, on
    canon's own 2026-07-28 path and in the SDK's 2025-11-25 session task alike. Were it still counted, the walk
    would wait for itself until its time ran out."""
    instance.dispatcher.priority = priority = Priority(give_way_s=60)
    call = {"name": "get_neighbors", "arguments": {"id": "team-payments", "depth": 3}}
    async with asgi_http(instance) as http:
        started = time.monotonic()
        with anyio.fail_after(DEADLINE_S):
            result = await walk(http, call)
        assert time.monotonic() - started < DEADLINE_S
    assert result.get("isError") is not True, result
    assert result["structuredContent"]["items"]
    assert priority.cheap == 0
