"""What a POST to `/mcp` must carry for the revision it speaks, answered by canon where the SDK's answer misleads.

`RevisionGate` sits in front of the SDK's endpoint and reads each POST the SDK would otherwise judge first (canon's
own routes have taken every request that passes all the SDK's checks already). It answers, and nothing reaches
the SDK, when the request

* is a JSON-RPC batch: -32600 (`core.mcp.revisions.BATCH`; the SDK answered -32602 with a pydantic dump);
* names a revision canon does not serve, in the `MCP-Protocol-Version` header or in `params._meta`: -32022 listing
  both revisions (`core.mcp.revisions.refusal`, as over stdio; the SDK served 2024-11-05 to 2025-06-18 headers
  and listed only 2026-07-28);
* is a 2026-07-28 request without the headers that revision needs over HTTP: -32020 naming the missing header and
  the value to send (the SDK said "Missing session ID" when `MCP-Protocol-Version` was missing, and "header does
  not match" when `Mcp-Method` or `Mcp-Name` was);
* is a request of neither revision's shape, without a session: -32600 saying how each revision starts.

A body of valid JSON nested deeper than a parser can follow (Python's and the SDK's recurse) goes on cut to
`core.values.documents.WIRE_DEPTH` levels (`shallow_json`): still deeper than any value canon holds, so the tool refuses
it as nested too deeply (invalid_arguments, with the pointer), answering the request's id, not a -32700.

A GET or DELETE naming an unserved revision in its header gets the same -32022. Everything else, and every POST
failing a check the SDK makes first (Host/Origin, body size, JSON, an `Accept` that takes no JSON: its 406), goes
to the SDK as it came.

Upstream limitation: the SDK's -32022 lists only the revisions it would negotiate (not the ones the server
serves), it accepts 2024-11-05 to 2025-06-18 headers, and its -32020 wording misleads as above (ADR 0019). Delete
each answer here when the SDK takes the served revisions as a setting and words these errors itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, check_accept_headers
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.inbound import (
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    NAME_BEARING_METHODS,
    decode_header_value,
)
from mcp_types import HEADER_MISMATCH, INVALID_REQUEST, ErrorData, RequestId
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.mcp.fastpath.takeover import json_error, read_body
from core.mcp.revisions import BATCH, HANDSHAKE, MODERN, SUPPORTED_VERSIONS, envelope_version, refusal, unsupported
from core.values.documents import WIRE_DEPTH, shallow_json

__all__ = ["RevisionGate", "judge"]

GUIDE = "docs/surfaces/mcp.md, 'Protocol revisions'"


class RevisionGate:
    """Answer the POSTs `judge` refuses; pass every other request, untouched, to `app` (the SDK's endpoint)."""

    def __init__(self, app: ASGIApp, *, security: TransportSecuritySettings | None) -> None:
        self.app = app
        self.security = TransportSecurityMiddleware(security)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["method"] != "POST":  # a 2025-11-25 GET stream or DELETE: only its revision's header is checked
            version = Headers(scope=scope).get(MCP_PROTOCOL_VERSION_HEADER)
            foreign = await self.security.validate_request(Request(scope), is_post=False) is not None
            if version is None or version in SUPPORTED_VERSIONS or foreign:  # foreign: the SDK's 403 or 421
                await self.app(scope, receive, send)
                return
            await json_error(None, unsupported(version), scope, receive, send)
            return
        body, replay = await read_body(receive)
        cut = None if body is None else _readable(body)
        if cut is not None:  # the SDK reads the cut body: a tool refuses the arguments, answering the request's id
            body, replay = cut, _replaying(cut, receive)
        verdict = None if body is None else await self.verdict(scope, body)
        if verdict is None:
            await self.app(scope, replay, send)
            return
        await json_error(verdict[0], verdict[1], scope, receive, send)

    async def verdict(self, scope: Scope, body: bytes) -> tuple[RequestId | None, ErrorData] | None:
        request = Request(scope)
        if await self.security.validate_request(request, is_post=True) is not None:
            return None  # the SDK refuses it first (403, 421, 400)
        if not check_accept_headers(request)[0]:
            return None  # the SDK's 406: whatever the body says, no answer could be sent in a form the client takes
        try:
            decoded = json.loads(body)
        except (ValueError, RecursionError):
            return None  # the SDK's parse error
        return judge(decoded, Headers(scope=scope))


def _readable(body: bytes) -> bytes | None:
    """`body` cut to `WIRE_DEPTH` levels when it nests deeper (`shallow_json`), else None (it goes on as it came).
    The SDK's parser gives up past about 200 levels, Python's near 1,000: neither could name the request's id."""
    if body.count(b"[") + body.count(b"{") <= WIRE_DEPTH:  # the common case, in C: too few brackets to be that deep
        return None
    return shallow_json(body, WIRE_DEPTH)


def _replaying(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives `body` as the whole request, then what `receive` gives."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


def judge(decoded: Any, headers: Mapping[str, str]) -> tuple[RequestId | None, ErrorData] | None:
    """The id and error canon answers a decoded POST body with (header names lower-case), or None."""
    if isinstance(decoded, list):
        return None, BATCH
    if not isinstance(decoded, dict):
        return None
    message = cast("dict[str, Any]", decoded)
    method, params, request_id = message.get("method"), message.get("params"), message.get("id")
    if not isinstance(method, str) or method == "initialize":  # a response, or the handshake (`Negotiate`)
        return None
    request_id = request_id if isinstance(request_id, str | int) and not isinstance(request_id, bool) else None
    version, named = headers.get(MCP_PROTOCOL_VERSION_HEADER), envelope_version(params)
    if version is not None and named is not None and named != version:
        return None  # the header and params._meta disagree: the SDK's -32020 says so, before any version check
    if version is not None and version not in SUPPORTED_VERSIONS:
        return request_id, unsupported(version)
    if (error := refusal(method, params)) is not None:
        return request_id, error
    if "id" not in message:
        return None  # a notification: nothing to answer, the SDK acknowledges or drops it
    error = _missing_header(method, params, headers, version)
    if error is None and version in (None, HANDSHAKE) and named is None:
        error = _no_session(method, headers)
    return None if error is None else (request_id, error)


def _missing_header(method: str, params: Any, headers: Mapping[str, str], version: str | None) -> ErrorData | None:
    """-32020 for a 2026-07-28 request (`params._meta` names it) missing a header that revision needs, or whose
    `Mcp-Method` or `Mcp-Name` differs from its body."""
    if envelope_version(params) != MODERN:
        return None
    send = _headers_to_send(method, params)
    if version is None:
        return _mismatch(f"Missing the {_NAMES[MCP_PROTOCOL_VERSION_HEADER]} header: a {MODERN} request over HTTP "
                         f"sends {send}, the same values as its body (see {GUIDE}).")  # fmt: skip
    if version != MODERN:
        return None  # the SDK's own -32020: the header and params._meta name different revisions
    expected = {MCP_METHOD_HEADER: method}
    name_key = NAME_BEARING_METHODS.get(method)
    if name_key is not None and isinstance(params, Mapping):
        named = cast("Mapping[str, Any]", params).get(name_key)
        if isinstance(named, str):
            expected[MCP_NAME_HEADER] = named
    for header, value in expected.items():
        sent = headers.get(header)
        if sent is None:
            return _mismatch(f"Missing the {_NAMES[header]} header: send {_NAMES[header]}: {value} (a {MODERN} "
                             f"request over HTTP sends {send}).")  # fmt: skip
        if decode_header_value(sent) != value:
            return _mismatch(f"The {_NAMES[header]} header says {sent!r} but the body says {value!r}: send "
                             f"{_NAMES[header]}: {value}.")  # fmt: skip
    return None


def _no_session(method: str, headers: Mapping[str, str]) -> ErrorData | None:
    """-32600 for a request of neither revision: no session (2025-11-25) and no `params._meta` (2026-07-28)."""
    if headers.get(MCP_SESSION_ID_HEADER) is not None:
        return None
    return ErrorData(code=INVALID_REQUEST, message=(
        f"{method!r} names no protocol revision. A {HANDSHAKE} client sends initialize first, then the "
        f"Mcp-Session-Id header it was given (and {_NAMES[MCP_PROTOCOL_VERSION_HEADER]}: {HANDSHAKE}) with every "
        f"request; a {MODERN} client sends params._meta with 'io.modelcontextprotocol/protocolVersion': {MODERN} "
        f"and 'io.modelcontextprotocol/clientCapabilities', and the {_NAMES[MCP_PROTOCOL_VERSION_HEADER]} and "
        f"Mcp-Method headers (see {GUIDE})."))  # fmt: skip


def _headers_to_send(method: str, params: Any) -> str:
    """The routing headers of a 2026-07-28 request with this method and params, as a reader would type them."""
    sent = [f"{_NAMES[MCP_PROTOCOL_VERSION_HEADER]}: {MODERN}", f"{_NAMES[MCP_METHOD_HEADER]}: {method}"]
    name_key = NAME_BEARING_METHODS.get(method)
    if name_key is not None:
        sent.append(f"{_NAMES[MCP_NAME_HEADER]}: <params.{name_key}>")
    return ", ".join(sent[:-1]) + " and " + sent[-1]


def _mismatch(message: str) -> ErrorData:
    return ErrorData(code=HEADER_MISMATCH, message=message)


_NAMES = {MCP_PROTOCOL_VERSION_HEADER: "MCP-Protocol-Version", MCP_METHOD_HEADER: "Mcp-Method",
          MCP_NAME_HEADER: "Mcp-Name"}  # fmt: skip
