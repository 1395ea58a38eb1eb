"""The HTTP host in-process and under real uvicorn: `/healthz`, and the host's rules alike on every surface's route
(every installed surface served): problem+json errors, Host/Origin, the body limit."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
import pytest

from core import __version__
from core.seam.instance import Instance
from core.seam.surfaces import discover
from tests.generators.conftest import asgi
from tests.mcp.conftest import DEADLINE_S, LEGACY, MODERN, asgi_http, envelope, mcp_app, modern_request
from tests.mcp.raw_http import Raw, served

pytestmark = pytest.mark.anyio


async def test_healthz_reports_the_revision_the_model_and_its_version_the_protocol_versions_and_the_surfaces(
    shared_instance: Instance,
) -> None:
    async with asgi(shared_instance) as http:  # the host with its default surfaces: every installed one
        response = await http.get("/healthz")

    others = sorted(s.name for s in discover() if s.name != "mcp")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "revision": shared_instance.store.revision(),
        "model": shared_instance.model.name,
        "modelVersion": shared_instance.model.version,  # a probe can tell a model change took effect
        "version": __version__,  # canon's own
        "protocolVersions": [MODERN, LEGACY],
        "surfaces": ["mcp", *others],
    }


# -- the host's rules, alike on every route ----------------------------------------------------------------------------
_GRAPHQL = {"query": "{ describe_model { name } }"}
_MCP_HEADERS, _MCP_BODY = modern_request("tools/list")
ROUTES: dict[str, tuple[str, str, Any, dict[str, str]]] = {  # a request each surface answers with 200
    "rest": ("GET", "/api/nodes", None, {}),
    "graphql": ("POST", "/graphql", _GRAPHQL, {}),
    "llms": ("GET", "/llms.txt", None, {}),
    "health": ("GET", "/healthz", None, {}),
    "mcp": ("POST", "/mcp", _MCP_BODY, _MCP_HEADERS),
}


def assert_problem(response: httpx2.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json", response.text
    problem: dict[str, Any] = response.json()
    assert problem["type"] == f"urn:canon:problem:{code}"
    assert (problem["status"], problem["code"], problem["instance"]) == (status, code, response.request.url.path)
    assert problem["title"]
    assert problem["detail"]
    return problem


def assert_json_rpc_refusal(response: httpx2.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    answer = response.json()
    assert (answer["jsonrpc"], answer["id"], answer["error"]["data"]["code"]) == ("2.0", None, code)


async def _ask(http: httpx2.AsyncClient, route: str, **headers: str) -> httpx2.Response:
    method, path, body, fixed = ROUTES[route]
    return await http.request(method, path, json=body, headers={**fixed, **headers})


async def test_every_http_error_of_the_app_is_a_problem_with_a_code(shared_instance: Instance) -> None:
    async with asgi_http(shared_instance) as http:
        assert_problem(await http.get("/no/such/path"), 404, "no_route")
        assert_problem(await http.get("/api/no_such_route"), 404, "no_route")
        assert_problem(await http.get("/tools/no_such_tool.md"), 404, "not_found")
        for method, path, allowed in [("POST", "/healthz", "GET, HEAD"), ("DELETE", "/llms.txt", "GET, HEAD"),
                                      ("PUT", "/graphql", "GET, POST"), ("POST", "/schema.graphql", "GET, HEAD"),
                                      ("PATCH", "/api/resources", "GET")]:  # fmt: skip
            wrong = await http.request(method, path)
            assert_problem(wrong, 405, "method_not_allowed")
            assert set(wrong.headers["allow"].split(", ")) == set(allowed.split(", ")), path
        no_query = await http.post("/graphql", json={})
        on_mcp = await http.put("/mcp", headers=_MCP_HEADERS)

    # a GraphQL request error is GraphQL's own error document (GraphQL over HTTP), with canon's code
    assert no_query.status_code == 400
    [error] = no_query.json()["errors"]
    assert error["extensions"]["code"] == "BAD_REQUEST"
    assert "query" in error["message"]
    assert on_mcp.status_code == 405
    assert on_mcp.headers.get("content-type") != "application/problem+json"  # MCP's answer, untouched


async def test_a_foreign_host_or_origin_is_refused_on_every_route_and_no_origin_is_let_in(
    shared_instance: Instance,
) -> None:
    async with asgi_http(shared_instance) as http:
        for route in ROUTES:
            plain = await _ask(http, route)
            local = await _ask(http, route, origin="http://localhost:5173")
            foreign_host = await _ask(http, route, host="rebound.example:8000")
            foreign_origin = await _ask(http, route, origin="http://rebound.example")
            look_alike = await _ask(http, route, origin="http://127.0.0.1.rebound.example")

            assert (plain.status_code, local.status_code) == (200, 200), (route, plain.text, local.text)
            check = assert_json_rpc_refusal if route == "mcp" else assert_problem
            check(foreign_host, 421, "host_not_allowed")
            check(foreign_origin, 403, "origin_not_allowed")
            check(look_alike, 403, "origin_not_allowed")


async def test_a_graphql_websocket_opened_by_a_rebound_page_is_refused(shared_instance: Instance) -> None:
    """A page on a name rebound to 127.0.0.1 is same-origin with itself: only the Host rule stops it."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import InvalidStatus

    async with served(mcp_app(shared_instance, alone=False)) as server:
        rebound = f"rebound.example:{server.port}"
        with anyio.fail_after(DEADLINE_S), pytest.raises(InvalidStatus) as refused:
            async with connect(f"ws://{rebound}/graphql", origin=f"http://{rebound}",  # type: ignore[arg-type]
                               subprotocols=["graphql-transport-ws"], host="127.0.0.1", port=server.port):  # type: ignore[list-item]  # fmt: skip
                pass
        with anyio.fail_after(DEADLINE_S):
            async with connect(f"ws://127.0.0.1:{server.port}/graphql", origin=f"http://127.0.0.1:{server.port}",  # type: ignore[arg-type]
                               subprotocols=["graphql-transport-ws"]) as accepted:  # type: ignore[list-item]  # fmt: skip
                assert accepted.subprotocol == "graphql-transport-ws"

    assert refused.value.response.status_code == 403


async def _chunks(size: int) -> AsyncIterator[bytes]:
    sent = 0
    while sent < size:
        yield b"x" * min(64 * 1024, size - sent)
        sent += 64 * 1024


@pytest.mark.parametrize("path", ["/graphql", "/api/query", "/mcp"])
async def test_a_body_over_the_limit_is_413_on_every_route_without_a_declared_length(
    shared_instance: Instance, path: str
) -> None:
    limit = shared_instance.config.max_body_bytes
    headers = {"content-type": "application/json", **(_MCP_HEADERS if path == "/mcp" else {})}
    async with asgi_http(shared_instance) as http:
        refused = await http.post(path, content=_chunks(limit + 1), headers=headers)
        assert "content-length" not in refused.request.headers

    check = assert_json_rpc_refusal if path == "/mcp" else assert_problem
    check(refused, 413, "too_large")


async def test_a_declared_length_over_the_limit_is_refused_at_once_and_nobody_waits(shared_instance: Instance) -> None:
    fifty_mb = str(50 * 1024 * 1024)
    async with served(mcp_app(shared_instance, alone=False)) as server:
        for path in ("/graphql", "/api/query", "/mcp"):
            raw = await Raw.connect(server.port)
            try:
                with anyio.fail_after(DEADLINE_S):  # not one byte of the body is sent: only the head is read
                    await raw.request(None, {"content-type": "application/json", "content-length": fifty_mb},
                                      target=path)  # fmt: skip
                    status, headers = await raw.head()
                    body = json.loads(await raw.body())
            finally:
                await raw.aclose()
            assert status == 413, path
            if path == "/mcp":
                assert (headers["content-type"], body["error"]["data"]["code"]) == ("application/json", "too_large")
            else:
                assert (headers["content-type"], body["code"]) == ("application/problem+json", "too_large")


async def test_large_text_answers_are_gzipped_when_asked_and_event_streams_never(shared_instance: Instance) -> None:
    async with asgi(shared_instance) as http:
        plain = await http.get("/llms-full.txt", headers={"accept-encoding": "identity"})
        gzipped = await http.get("/llms-full.txt", headers={"accept-encoding": "gzip"})
        small = await http.get("/healthz", headers={"accept-encoding": "gzip"})
    assert "content-encoding" not in plain.headers
    assert gzipped.headers["content-encoding"] == "gzip"
    assert gzipped.text == plain.text  # httpx decodes: the same document, fewer bytes on the wire
    assert int(gzipped.headers["content-length"]) * 4 < len(plain.content)
    assert "content-encoding" not in small.headers


async def test_an_event_stream_is_never_gzipped_even_when_asked(shared_instance: Instance) -> None:
    body = {"jsonrpc": "2.0", "id": "L1", "method": "subscriptions/listen",
            "params": {"notifications": {"toolsListChanged": True}, "_meta": envelope()}}  # fmt: skip
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
               "mcp-protocol-version": MODERN, "mcp-method": "subscriptions/listen",
               "accept-encoding": "gzip"}  # fmt: skip
    async with served(mcp_app(shared_instance, alone=False)) as server:
        raw = await Raw.connect(server.port)
        try:
            with anyio.fail_after(DEADLINE_S):
                await raw.request(json.dumps(body).encode(), headers)
                status, head = await raw.head()
                first = await raw.frame()
        finally:
            await raw.aclose()
    assert (status, head["content-type"]) == (200, "text/event-stream")
    assert "content-encoding" not in head
    assert first is not None
    assert b"notifications/subscriptions/acknowledged" in first  # readable as it comes
