"""The 2025-11-25 `initialize` handshake as canon answers it, in plain JSON, without importing the MCP SDK.

Who canon says it is (`SERVER_INFO`, which the SDK's `Server` is also built from), what it declares
(`CAPABILITIES`), which revision an `initialize` is answered with (`negotiate`), and the whole answer
(`initialize_result`). An stdio process answers the client's opening `initialize` from here while the SDK is still
being imported (`core.mcp.stdio`, ADR 0033); the SDK then answers the same request too, and that answer must be
the same JSON: `tests/mcp/test_stdio.py` compares them, and `core.mcp.stdio_sdk` compares them again at every
start and logs an error if they ever differ (an SDK upgrade, a handler added without its capability here).

This module imports nothing of the SDK, pydantic or anyio: that is its point (a test enforces it).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, cast

from core import __version__

__all__ = [
    "CANON_ICON",
    "CAPABILITIES",
    "HANDSHAKE",
    "MODERN",
    "SERVER_INFO",
    "Initialize",
    "initialize_result",
    "negotiate",
    "opening_initialize",
]

MODERN: Final = "2026-07-28"
HANDSHAKE: Final = "2025-11-25"
_HANDSHAKES: Final = (HANDSHAKE,)  # the revisions `initialize` negotiates, oldest first

_ICON_SVG = (
    b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64" fill="none" stroke="#000" stroke-linecap="round">'
    b'<path d="M16 16 48 20 30 48Z" stroke-width="3"/><path d="M16 16h0M48 20h0M30 48h0" stroke-width="16"/></svg>'
)
CANON_ICON: Final = "data:image/svg+xml;base64," + base64.b64encode(_ICON_SVG).decode()
SERVER_INFO: Final[Mapping[str, Any]] = {
    "name": "canon",
    "version": __version__,
    "title": "canon",
    "description": "A knowledge server for an organisation's canonical model.",
    "icons": [{"src": CANON_ICON, "mimeType": "image/svg+xml", "sizes": ["64x64"]}],
}
"""`serverInfo` in its wire form: the SDK's `Server` takes its name, version, title, description and icons."""

CAPABILITIES: Final[Mapping[str, Any]] = {
    "completions": {},
    "logging": {},
    "resources": {"listChanged": True, "subscribe": True},
    "tools": {"listChanged": True},
}
"""What `initialize` declares (2025-11-25): what the SDK derives from the handlers `core.mcp.server` registers."""


def negotiate(requested: str) -> str:
    """The revision `initialize` answers for a client asking for `requested`: the same one if canon serves it
    through the handshake, otherwise the newest it does (the client then decides whether to go on)."""
    return requested if requested in _HANDSHAKES else _HANDSHAKES[-1]


def initialize_result(requested: str, instructions: str) -> dict[str, Any]:
    """The `result` of `initialize` for a client asking for revision `requested`; `instructions` name the model
    served (`Registry.instructions`)."""
    return {
        "capabilities": json.loads(json.dumps(CAPABILITIES)),  # a copy the caller may change
        "instructions": instructions,
        "protocolVersion": negotiate(requested),
        "serverInfo": json.loads(json.dumps(SERVER_INFO)),
    }


@dataclass(frozen=True)
class Initialize:
    """An `initialize` request as it arrived: its id and the revision it asks for."""

    id: int | str
    requested: str


_REQUEST_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
_PARAMS_KEYS = frozenset({"protocolVersion", "capabilities", "clientInfo", "_meta"})
_CLIENT_KEYS = frozenset({"name", "version", "title", "description", "websiteUrl"})  # those given as strings


def opening_initialize(line: bytes) -> Initialize | None:
    """`line` as an `initialize` request canon may answer before the SDK has read it, else None.

    Only a request of the plainest well-formed shape qualifies (a JSON object with exactly the JSON-RPC keys, an
    integer or string id, a string revision, object capabilities, and client information given as strings):
    anything else, and every other method, is left to the SDK to answer as it always has."""
    try:
        message: object = json.loads(line)
    except ValueError:  # not JSON, or not UTF-8
        return None
    if not isinstance(message, dict) or frozenset(cast("dict[str, Any]", message)) != _REQUEST_KEYS:
        return None
    request = cast("dict[str, Any]", message)
    request_id, params = request["id"], request["params"]
    if request["jsonrpc"] != "2.0" or request["method"] != "initialize" or not isinstance(params, dict):
        return None
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    return _initialize(request_id, cast("dict[str, Any]", params))


def _initialize(request_id: int | str, params: dict[str, Any]) -> Initialize | None:
    requested, capabilities = params.get("protocolVersion"), params.get("capabilities")
    if (
        not set(params) <= _PARAMS_KEYS
        or not isinstance(requested, str)
        or not isinstance(params.get("_meta", {}), dict)
    ):
        return None
    if not isinstance(capabilities, dict) or not all(
        isinstance(v, dict) for v in cast("dict[str, Any]", capabilities).values()
    ):
        return None
    return Initialize(request_id, requested) if _plain_client(params.get("clientInfo")) else None


def _plain_client(client: object) -> bool:
    """Whether `client` is a `clientInfo` of strings only, with at least a name and a version."""
    if not isinstance(client, dict):
        return False
    info = cast("dict[str, Any]", client)
    return {"name", "version"} <= set(info) <= _CLIENT_KEYS and all(isinstance(v, str) for v in info.values())
