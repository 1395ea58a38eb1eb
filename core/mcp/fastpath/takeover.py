"""Taking a 2026-07-28 POST from the SDK's `/mcp` endpoint: only one the SDK would serve, with every other handed
back untouched (ADR 0013, ADR 0016).

canon serves two methods of the stateless revision itself: `subscriptions/listen` (`core.mcp.fastpath.listen`) and
`tools/call` (`core.mcp.fastpath.calls`). Either takes a request only when every check the SDK's transport
(`handle_modern_request`) and runner (`ServerRunner._on_request`) would make passes, made with the SDK's own
functions and models: body size, Host/Origin, Accept, JSON-RPC shape, the routing headers against the body, the
`_meta` envelope, and the method's params. A request that fails any of them goes to the SDK with its body replayed,
so the SDK answers every error exactly as it always has.

Upstream limitation: the SDK offers no hook to serve one method of its transport outside its runner. This module
goes when the last of `calls.py` and `listen.py` goes. Private SDK state: none, but the SDK functions it calls are
public by name only (`classify_inbound_request`, `find_duplicated_routing_header`, `ERROR_CODE_HTTP_STATUS`):
`core.mcp.fastpath.sdk_compat.check` verifies them at start-up.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp.server.streamable_http import check_accept_headers
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
)
from mcp_types import ErrorData, JSONRPCRequest, RequestId
from mcp_types import methods as wire_methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from core.values.documents import parse_json

__all__ = ["Recognised", "json_error", "may_be", "read_body", "recognise"]


@dataclass(frozen=True)
class Recognised:
    """A request the SDK would serve: its id, the revision it speaks and its params, as checked."""

    request_id: RequestId
    version: str
    params: Mapping[str, Any] | None


def may_be(scope: Scope, method: str) -> bool:
    """A POST routed to the SDK's 2026-07-28 path whose `Mcp-Method` header names `method`: only such a request
    can be one (the SDK requires the header to equal the body's method). Cheap: headers only."""
    if scope["type"] != "http" or scope["method"] != "POST":
        return False
    wanted = method.encode()
    seen = version = None
    for name, value in scope["headers"]:
        if name == b"mcp-method":
            if seen is not None or value != wanted:
                return False
            seen = value
        elif name == b"mcp-protocol-version":
            version = value
    return seen is not None and version is not None and version.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS


async def read_body(receive: Receive) -> tuple[bytes | None, Receive]:
    """The request body, or None if it did not arrive whole (the client went away); and a `receive` replaying what
    was read, so the SDK sees the request as it came. The host's `Admission` has read the body already, within the
    body limit, and hands it on in one message."""
    messages: list[Message] = [await receive()]
    first = messages[0]
    whole = first["type"] == "http.request" and not first.get("more_body", False)
    body: bytes | None = first.get("body", b"") if whole else None

    async def replay() -> Message:
        return messages.pop(0) if messages else await receive()

    return body, replay


async def recognise(scope: Scope, body: bytes, security: TransportSecurityMiddleware, method: str, *,
                    stream: bool) -> Recognised | None:  # fmt: skip
    """The `method` request in `body`, if the SDK would serve it: every check of its transport and runner passes
    (`stream`: the answer is an SSE stream, so the client must accept one). None sends it to the SDK."""
    request = Request(scope)
    if await security.validate_request(request, is_post=True) is not None:
        return None
    has_json, has_sse = check_accept_headers(request)
    if not has_json or (stream and not has_sse):
        return None
    try:
        decoded = parse_json(body)  # NaN and Infinity are not JSON: the SDK answers them as such
        message = JSONRPCRequest.model_validate(decoded)
    except (ValueError, RecursionError):  # pydantic's ValidationError is a ValueError
        return None
    if not isinstance(decoded, dict) or "id" not in decoded or message.method != method:
        return None
    if find_duplicated_routing_header(request.headers.items()) is not None:
        return None
    verdict = classify_inbound_request(decoded, headers=dict(request.headers))
    if isinstance(verdict, InboundLadderRejection):
        return None
    try:
        wire_methods.validate_client_request(method, verdict.protocol_version, message.params)
    except (KeyError, ValueError):
        return None
    return Recognised(message.id, verdict.protocol_version, message.params)


async def json_error(request_id: RequestId | None, error: ErrorData, scope: Scope, receive: Receive,
                     send: Send) -> None:  # fmt: skip
    """A JSON-RPC error answer in the SDK's form (its modern transport's `_write`), with the HTTP status it maps
    the code to."""
    # `id` stays even when null (a request whose id could not be read), as JSON-RPC asks
    message = {"jsonrpc": "2.0", "id": request_id, "error": error.model_dump(mode="json", exclude_none=True)}
    body = json.dumps(message, separators=(",", ":"))
    status = ERROR_CODE_HTTP_STATUS.get(error.code, 200)
    await Response(body, status_code=status, media_type="application/json")(scope, receive, send)
