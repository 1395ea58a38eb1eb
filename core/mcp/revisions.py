"""The protocol revisions canon serves, and the answers a request in any other revision gets, on every transport.

canon serves exactly two revisions: 2026-07-28 (stateless: each request names its revision in `params._meta`,
and over HTTP in the `MCP-Protocol-Version` header) and 2025-11-25 (negotiated once, by `initialize`). The SDK
accepts more (its handshake list reaches back to 2024-11-05) and lists fewer in its -32022 error (the 2026-07-28
revision alone), so both rules live here and both transports apply them before the SDK sees a request:

* `initialize` asking for a revision canon does not serve is answered with the one handshake revision it does
  serve, 2025-11-25 (the specification's rule: the server answers with a revision it supports, and the client
  decides whether to go on): `negotiate`, which lives with the rest of the handshake in `core.mcp.handshake`.
  `Negotiate`, a server middleware, applies it on every transport.
* A request naming an unserved revision gets -32022 `UnsupportedProtocolVersion` with `data.supported` listing
  both revisions (`unsupported`), changes nothing (a stdio connection stays open to either revision), and reaches
  no handler. `refusal` decides it from a decoded request; `core.mcp.stdio_sdk` and `core.mcp.revision_gate` (HTTP)
  both call it.
* A JSON-RPC batch is not part of either revision: -32600 (`BATCH`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, cast

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp_types import INVALID_REQUEST, PROTOCOL_VERSION_META_KEY, UNSUPPORTED_PROTOCOL_VERSION, ErrorData

from core.mcp.handshake import HANDSHAKE, MODERN, SUPPORTED_VERSIONS, negotiate

__all__ = [
    "BATCH",
    "HANDSHAKE",
    "MODERN",
    "SUPPORTED_VERSIONS",
    "Negotiate",
    "envelope_version",
    "negotiate",
    "refusal",
    "unsupported",
]

BATCH: Final = ErrorData(
    code=INVALID_REQUEST,
    message="JSON-RPC batches are not part of MCP 2025-11-25 or 2026-07-28: send each request as a message of its own.",
)


def unsupported(requested: str) -> ErrorData:
    """The -32022 error for a request naming `requested`, which canon does not serve (the same on every
    transport)."""
    return ErrorData(
        code=UNSUPPORTED_PROTOCOL_VERSION,
        message=f"Unsupported protocol version {requested!r}: canon serves {MODERN} (each request names it in "
        f"params._meta {PROTOCOL_VERSION_META_KEY!r}, and over HTTP in the MCP-Protocol-Version header) and "
        f"{HANDSHAKE} (negotiated by initialize).",
        data={"supported": list(SUPPORTED_VERSIONS), "requested": requested},
    )


def envelope_version(params: object) -> object:
    """The revision a request's `params._meta` names (None if it names none)."""
    if not isinstance(params, Mapping):
        return None
    meta = cast("Mapping[str, Any]", params).get("_meta")
    return cast("Mapping[str, Any]", meta).get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, Mapping) else None


def refusal(method: object, params: object) -> ErrorData | None:
    """-32022 for a request whose `_meta` names a revision canon does not serve per request (anything but
    2026-07-28, 2025-11-25 included: that one is negotiated by `initialize`), else None. A version that is not a
    string is a malformed envelope, left to the SDK's -32602."""
    version = envelope_version(params)
    if method == "initialize" or not isinstance(version, str) or version == MODERN:
        return None
    return unsupported(version)


class Negotiate:
    """Server middleware: `initialize` answers, and the connection then speaks, the revision `negotiate` picks.

    The SDK negotiates from the request's params twice, for the answer and (after the middleware chain) for the
    connection's state, so the negotiated revision is written into those params: both then agree.
    """

    async def __call__(self, ctx: ServerRequestContext[Any], call_next: CallNext) -> HandlerResult:
        params = ctx.params
        if ctx.method == "initialize" and isinstance(params, dict):
            requested = params.get("protocolVersion")
            if isinstance(requested, str) and requested != (chosen := negotiate(requested)):
                params["protocolVersion"] = chosen
        return await call_next(ctx)
