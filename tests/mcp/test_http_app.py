"""MCP on the HTTP host in-process (ASGI, raw JSON-RPC): discovery, caching hints, legacy initialize. The host's
own rules (health, problem+json errors, Host/Origin, the body limit) are tested in tests/http/test_app.py."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from core.mcp.server import SUPPORTED_VERSIONS
from core.seam.instance import Instance
from tests.conftest import tool_names
from tests.mcp.conftest import (
    LEGACY,
    LEGACY_HEADERS,
    MODERN,
    asgi_http,
    initialize_body,
    modern_request,
)

pytestmark = pytest.mark.anyio


async def _post(http: httpx2.AsyncClient, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    headers, body = modern_request(method, params)
    response = await http.post("/mcp", headers=headers, json=body)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    answer: dict[str, Any] = response.json()
    assert answer["id"] == body["id"]
    result: dict[str, Any] = answer["result"]
    return result


async def test_discover_lists_both_revisions_and_the_change_capabilities(shared_instance: Instance) -> None:
    async with asgi_http(shared_instance) as http:
        result = await _post(http, "server/discover")

    assert result["resultType"] == "complete"
    assert result["supportedVersions"] == SUPPORTED_VERSIONS == [MODERN, LEGACY]
    capabilities = result["capabilities"]
    assert capabilities["tools"]["listChanged"] is True
    assert capabilities["resources"]["subscribe"] is True
    assert capabilities["resources"]["listChanged"] is True
    assert "completions" in capabilities
    assert capabilities["prompts"] == {"listChanged": False}  # the same three prompts whatever the model
    assert result["instructions"]
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "canon"
    assert result["cacheScope"] == "public"  # the same for every caller
    assert isinstance(result["ttlMs"], int)


@pytest.mark.parametrize(
    ("method", "params"),
    [("tools/list", None), ("resources/list", None), ("resources/templates/list", None),
     ("resources/read", {"uri": "canon://nodes/Team/team-payments"}), ("resources/read", {"uri": "canon://model"})],
    ids=["tools-list", "resources-list", "templates-list", "read-node", "read-model"],
)  # fmt: skip
async def test_caller_dependent_results_are_cacheable_only_privately(
    shared_instance: Instance, method: str, params: dict[str, Any] | None
) -> None:
    async with asgi_http(shared_instance) as http:
        result = await _post(http, method, params)

    assert result["resultType"] == "complete"
    assert result["cacheScope"] == "private"
    assert result["ttlMs"] == 0


async def test_tools_call_result_carries_result_type_and_server_info(shared_instance: Instance) -> None:
    async with asgi_http(shared_instance) as http:
        result = await _post(http, "tools/call", {"name": "get_node", "arguments": {"id": "team-payments"}})

    assert result["resultType"] == "complete"
    assert result["structuredContent"]["node"]["id"] == "team-payments"
    assert "isError" not in result or result["isError"] is False
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "canon"


async def test_legacy_initialize_over_http_advertises_change_notifications_and_logging(
    shared_instance: Instance,
) -> None:
    async with asgi_http(shared_instance) as http:
        response = await http.post("/mcp", headers=LEGACY_HEADERS, json=initialize_body())

    assert response.status_code == 200, response.text
    assert response.headers["mcp-session-id"]
    result = response.json()["result"]
    assert result["protocolVersion"] == LEGACY
    capabilities = result["capabilities"]
    assert capabilities["tools"]["listChanged"] is True
    assert capabilities["resources"]["subscribe"] is True
    assert capabilities["resources"]["listChanged"] is True
    assert "logging" in capabilities
    assert "completions" in capabilities
    assert result["serverInfo"]["name"] == "canon"


async def test_legacy_session_answers_tools_list_without_caching_hints(shared_instance: Instance) -> None:
    async with asgi_http(shared_instance) as http:
        init = await http.post("/mcp", headers=LEGACY_HEADERS, json=initialize_body())
        session = {**LEGACY_HEADERS, "Mcp-Session-Id": init.headers["mcp-session-id"], "MCP-Protocol-Version": LEGACY}
        initialized = await http.post("/mcp", headers=session,
                                      json={"jsonrpc": "2.0", "method": "notifications/initialized"})  # fmt: skip
        listed = await http.post("/mcp", headers=session, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})

    assert initialized.status_code == 202
    assert listed.status_code == 200, listed.text
    result = listed.json()["result"]
    assert [t["name"] for t in result["tools"]] == tool_names("read")  # anonymous
    assert "cacheScope" not in result
    assert "ttlMs" not in result
