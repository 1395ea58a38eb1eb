"""`core.mcp.handshake`: which opening lines canon answers itself on stdio (`initialize`, `server/discover`).

That its answer is the SDK's, for each of these shapes and revisions, is asserted in tests/mcp/test_stdio.py
against the SDK's own answer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from core.mcp.handshake import OpeningRequest, opening_request

CLIENT = {"name": "agent", "version": "1.0"}


def request(**params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": CLIENT} | params}  # fmt: skip


VERSION, CAPABILITIES = "io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities"


def discover(**meta: Any) -> dict[str, Any]:
    envelope = {VERSION: "2026-07-28", CAPABILITIES: {}}
    return {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": envelope | meta}}


ANSWERED = {
    "plain": request(),
    "client title": request(clientInfo=CLIENT | {"title": "Agent", "websiteUrl": "https://agent.example"}),
    "capabilities": request(capabilities={"roots": {"listChanged": True}, "sampling": {}, "elicitation": {}}),
    "_meta": request(_meta={"progressToken": "p"}),
    "an older revision": request(protocolVersion="2024-11-05"),
    "a newer revision": request(protocolVersion="2026-07-28"),
    "a string id": request() | {"id": "init-1"},
    "discover": discover(),
    "discover with clientInfo": discover(**{"io.modelcontextprotocol/clientInfo": CLIENT}),
    "discover with capabilities": discover(**{CAPABILITIES: {"sampling": {}}}),
}
LEFT_TO_THE_SDK = {
    "tools/list": request() | {"method": "tools/list"},
    "a batch": [request()],
    "no JSON": "{",
    "a boolean id": request() | {"id": True},
    "a null id": request() | {"id": None},
    "a notification": {k: v for k, v in request().items() if k != "id"},
    "another JSON-RPC version": request() | {"jsonrpc": "1.0"},
    "an extra key": request() | {"extra": 1},
    "no clientInfo": {**request(), "params": {"protocolVersion": "2025-11-25", "capabilities": {}}},
    "clientInfo without a version": request(clientInfo={"name": "agent"}),
    "client icons": request(clientInfo=CLIENT | {"icons": [{"src": "https://agent.example/i.png"}]}),
    "a revision that is no string": request(protocolVersion=20251125),
    "a capability that is no object": request(capabilities={"roots": True}),
    "an unknown parameter": request(extra={}),
    "discover naming 2025-11-25": discover(**{VERSION: "2025-11-25"}),
    "discover without client capabilities": {**discover(), "params": {"_meta": {VERSION: "2026-07-28"}}},
    "discover with another parameter": {**discover(), "params": {**discover()["params"], "cursor": "x"}},
    "discover with another _meta key": discover(progressToken="p"),
    "discover without an envelope": {**discover(), "params": {}},
}


def revision_asked(message: dict[str, Any]) -> str:
    """The revision an opening request asks for: initialize's protocolVersion, else the envelope's."""
    params = message["params"]
    return params.get("protocolVersion") or params["_meta"][VERSION]


@pytest.mark.parametrize("message", ANSWERED.values(), ids=ANSWERED.keys())
def test_a_plain_opening_request_is_answered_before_the_sdk_reads_it(message: dict[str, Any]) -> None:
    line = json.dumps(message).encode() + b"\n"
    assert opening_request(line) == OpeningRequest(message["id"], message["method"], revision_asked(message))


@pytest.mark.parametrize("message", LEFT_TO_THE_SDK.values(), ids=LEFT_TO_THE_SDK.keys())
def test_any_other_opening_line_is_left_to_the_sdk(message: Any) -> None:
    line = message if isinstance(message, str) else json.dumps(message)
    assert opening_request(line.encode() + b"\n") is None
