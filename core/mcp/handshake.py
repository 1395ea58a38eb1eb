"""How canon introduces itself to a client, in plain JSON, without importing the MCP SDK: the answers to
`initialize` (2025-11-25) and `server/discover` (2026-07-28).

Who canon says it is (`SERVER_INFO`, which the SDK's `Server` is also built from), what it declares
(`CAPABILITIES`, `capabilities`), which revision an `initialize` is answered with (`negotiate`), the revisions it
serves, and the whole answers (`initialize_result`, `discover_result`). An stdio process answers the client's
opening request from here while the SDK is still being imported (`core.mcp.stdio`, ADR 0036); the SDK then answers
the same request too, and that answer must be the same JSON: `tests/mcp/test_stdio.py` compares them, and
`core.mcp.stdio_sdk` compares them again at every start and logs an error if they ever differ (an SDK upgrade, a
handler added without its capability here).

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
    "DISCOVER_CACHE_SCOPE",
    "DISCOVER_TTL_MS",
    "HANDSHAKE",
    "MODERN",
    "SERVER_INFO",
    "SUPPORTED_VERSIONS",
    "OpeningRequest",
    "capabilities",
    "discover_result",
    "early_result",
    "initialize_result",
    "negotiate",
    "opening_request",
]

MODERN: Final = "2026-07-28"
HANDSHAKE: Final = "2025-11-25"
_HANDSHAKES: Final = (HANDSHAKE,)  # the revisions `initialize` negotiates, oldest first
SUPPORTED_VERSIONS: Final = [MODERN, HANDSHAKE]  # newest first, as `server/discover` and -32022 list them
DISCOVER_TTL_MS: Final = 60_000  # how long a client may reuse a `server/discover` answer
DISCOVER_CACHE_SCOPE: Final = "public"  # the same for every caller
_PROTOCOL_VERSION, _CLIENT_CAPABILITIES, _CLIENT_INFO, _SERVER_INFO = (
    f"io.modelcontextprotocol/{key}" for key in ("protocolVersion", "clientCapabilities", "clientInfo", "serverInfo")
)

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
    "prompts": {"listChanged": False},  # the same prompts for every model (core.dispatch.prompts)
    "resources": {"listChanged": True, "subscribe": True},
    "tools": {"listChanged": True},
}
"""What `initialize` declares (2025-11-25): what the SDK derives from the handlers `core.mcp.server` registers."""


def capabilities(revision: str) -> dict[str, Any]:
    """The capabilities canon declares in `revision` (a copy): logging is deprecated in 2026-07-28 and not served
    there (`core.mcp.client_log`), so not declared either."""
    declared = _copy(CAPABILITIES)
    if revision == MODERN:
        del declared["logging"]
    return declared


def _copy(document: Mapping[str, Any]) -> dict[str, Any]:
    copied: dict[str, Any] = json.loads(json.dumps(document))
    return copied


def negotiate(requested: str) -> str:
    """The revision `initialize` answers for a client asking for `requested`: the same one if canon serves it
    through the handshake, otherwise the newest it does (the client then decides whether to go on)."""
    return requested if requested in _HANDSHAKES else _HANDSHAKES[-1]


def initialize_result(requested: str, instructions: str) -> dict[str, Any]:
    """The `result` of `initialize` for a client asking for revision `requested`; `instructions` name the model
    served (`Registry.instructions`)."""
    return {
        "capabilities": capabilities(HANDSHAKE),
        "instructions": instructions,
        "protocolVersion": negotiate(requested),
        "serverInfo": _copy(SERVER_INFO),
    }


def discover_result(instructions: str) -> dict[str, Any]:
    """The `result` of `server/discover` (2026-07-28), as the SDK sends it: with `resultType` and the server's
    identity in `_meta`."""
    return {
        "cacheScope": DISCOVER_CACHE_SCOPE,
        "capabilities": capabilities(MODERN),
        "instructions": instructions,
        "resultType": "complete",
        "supportedVersions": list(SUPPORTED_VERSIONS),
        "ttlMs": DISCOVER_TTL_MS,
        "_meta": {_SERVER_INFO: _copy(SERVER_INFO)},
    }


def early_result(request: OpeningRequest, instructions: str) -> dict[str, Any]:
    """The `result` canon answers `request` with before the SDK has read it."""
    if request.method == "initialize":
        return initialize_result(request.revision, instructions)
    return discover_result(instructions)


@dataclass(frozen=True)
class OpeningRequest:
    """A request that can open a connection, as it arrived: its id, its method (`initialize` or `server/discover`)
    and the revision it asks for."""

    id: int | str
    method: str
    revision: str


_REQUEST_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
_INITIALIZE_KEYS = frozenset({"protocolVersion", "capabilities", "clientInfo", "_meta"})
_ENVELOPE_KEYS = frozenset({_PROTOCOL_VERSION, _CLIENT_CAPABILITIES, _CLIENT_INFO})
_CLIENT_KEYS = frozenset({"name", "version", "title", "description", "websiteUrl"})  # those given as strings


def opening_request(line: bytes) -> OpeningRequest | None:
    """`line` as a request canon may answer before the SDK has read it, else None: an `initialize`, or a
    2026-07-28 `server/discover`.

    Only a request of the plainest well-formed shape qualifies (a JSON object with exactly the JSON-RPC keys, an
    integer or string id, object capabilities, client information given as strings, and for `server/discover`
    nothing but the `_meta` envelope naming 2026-07-28): anything else, and every other method, is left to the SDK
    to answer as it always has."""
    try:
        message: object = json.loads(line)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past what `json` follows: the SDK's turn
        return None
    if not isinstance(message, dict) or frozenset(cast("dict[str, Any]", message)) != _REQUEST_KEYS:
        return None
    request = cast("dict[str, Any]", message)
    request_id, method, params = request["id"], request["method"], request["params"]
    if request["jsonrpc"] != "2.0" or not isinstance(params, dict):
        return None
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    params = cast("dict[str, Any]", params)
    if method == "initialize":
        revision = _initialize(params)
    elif method == "server/discover":
        revision = _discover(params)
    else:
        return None
    return None if revision is None else OpeningRequest(request_id, method, revision)


def _initialize(params: dict[str, Any]) -> str | None:
    """The revision a plain `initialize` asks for, else None."""
    requested = params.get("protocolVersion")
    if not set(params) <= _INITIALIZE_KEYS or not isinstance(requested, str):
        return None
    if not isinstance(params.get("_meta", {}), dict) or not _plain_capabilities(params.get("capabilities")):
        return None
    return requested if _plain_client(params.get("clientInfo")) else None


def _discover(params: dict[str, Any]) -> str | None:
    """2026-07-28 if a `server/discover` carries nothing but a plain envelope naming it, else None."""
    envelope = params.get("_meta")
    if set(params) != {"_meta"} or not isinstance(envelope, dict):
        return None
    envelope = cast("dict[str, Any]", envelope)
    if not {_PROTOCOL_VERSION, _CLIENT_CAPABILITIES} <= set(envelope) <= _ENVELOPE_KEYS:
        return None
    if envelope[_PROTOCOL_VERSION] != MODERN or not _plain_capabilities(envelope[_CLIENT_CAPABILITIES]):
        return None
    return MODERN if _CLIENT_INFO not in envelope or _plain_client(envelope[_CLIENT_INFO]) else None


def _plain_capabilities(capabilities: object) -> bool:
    """Whether `capabilities` is an object of objects."""
    return isinstance(capabilities, dict) and all(
        isinstance(v, dict) for v in cast("dict[str, Any]", capabilities).values()
    )


def _plain_client(client: object) -> bool:
    """Whether `client` is a `clientInfo` of strings only, with at least a name and a version."""
    if not isinstance(client, dict):
        return False
    info = cast("dict[str, Any]", client)
    return {"name", "version"} <= set(info) <= _CLIENT_KEYS and all(isinstance(v, str) for v in info.values())
