"""2026-07-28 `tools/call` over HTTP, answered by canon rather than through the SDK's runner (ADR 0016).

The revision is stateless: a `tools/call` POST carries everything it needs, and its JSON answer is the tool's
result. On the SDK's path that result is checked against the protocol's result model, dumped, wrapped in a
response model, dumped again and encoded by `json.dumps`: three walks of the whole result, about 2 ms for a
50-node `get_neighbors` page (63 KB) and most of the SDK's 0.25 ms per call for a single node. canon built that
result in its wire form to begin with (`core.mcp.server._call_result`), so it can write it out directly.

`CallRoute` sits in front of the SDK's `/mcp` app, inside `BearerGate`, as `ListenRoute` does. It takes a request
only when the SDK would have run the tool (`core.mcp.fastpath.takeover`: every check of its transport and runner, made
with the SDK's own functions), the tool exists and its input schema declares no `x-mcp-header` (the SDK's
`Mcp-Param-*` check, left to the SDK). Anything else goes to the SDK untouched. A request taken is called through
the same `ToolCalls` the SDK's handler uses, and answered with the JSON the SDK would send: the same members and
values (a test compares both paths live), `resultType` and the `serverInfo` stamp included, in pydantic-core's
compact UTF-8 encoding. What it does not do: open the SDK's OpenTelemetry span for the call (canon's audit log
records every call either way).

Upstream limitation: the SDK's runner re-validates and re-encodes every handler result (no way for a handler to
return a result already in its wire form). Delete this module (and `CallRoute` in the app) when the SDK can send
a handler's pre-encoded result as it is, or when its own path costs no more than this one (`benchmarks/mcp_bench`).
Private SDK state: none (`core.mcp.fastpath.sdk_compat` checks the SDK names it imports).
"""

from __future__ import annotations

from typing import Any

import pydantic_core
from mcp.server.runner import modern_error_data
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp_types import SERVER_INFO_META_KEY, CallToolRequestParams, RequestId
from starlette.types import ASGIApp, Receive, Scope, Send

from core.dispatch.dispatcher import ToolResult
from core.dispatch.registry import ToolDefinition
from core.mcp.fastpath.takeover import json_error, may_be, read_body, recognise
from core.mcp.server import ToolCalls, asking_of
from core.seam.snapshot import Snapshot
from core.seam.surfaces import principal_of_scope
from core.values.errors import UnknownToolError

__all__ = ["CALL", "CallRoute", "response_body"]

CALL = "tools/call"


class CallRoute:
    """Answer 2026-07-28 `tools/call` requests from `calls`; pass every other request, untouched, to `app`."""

    def __init__(self, app: ASGIApp, calls: ToolCalls, *, server_info: dict[str, Any]) -> None:
        self.app = app
        self.calls = calls
        self.security = TransportSecurityMiddleware(None)  # its Content-Type check: the host checked Host/Origin
        self.meta = pydantic_core.to_json({SERVER_INFO_META_KEY: server_info})  # every result's `_meta`, encoded once

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not may_be(scope, CALL):
            await self.app(scope, receive, send)
            return
        body, replay = await read_body(receive)
        found = None if body is None else await recognise(scope, body, self.security, CALL, stream=False)
        taken = None if found is None else self.takes(found.params)
        if found is None or taken is None:  # the SDK answers it (an error, or a call it checks further)
            await self.app(scope, replay, send)
            return
        params, tool, snapshot = taken
        try:
            result = await self.calls.call(principal_of_scope(scope), params.name, dict(params.arguments or {}),
                                           tool=tool, snapshot=snapshot,
                                           asking=asking_of(params, found.version))  # fmt: skip
        except UnknownToolError:  # the model changed since `takes`: the SDK's handler words the error
            await self.app(scope, replay, send)
            return
        except Exception as exc:  # noqa: BLE001 - a bug: answered (and logged) as the SDK answers a handler that raised
            await json_error(found.request_id, modern_error_data(exc), scope, receive, send)
            return
        answer = response_body(found.request_id, result, self.meta, structured=self.calls.structured)
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-length", str(len(answer)).encode()), (b"content-type", b"application/json")]})  # fmt: skip
        await send({"type": "http.response.body", "body": answer})

    def takes(self, raw: Any) -> tuple[CallToolRequestParams, ToolDefinition, Snapshot] | None:
        """The call's params, its tool (looked up once, here) and the model's snapshot it was found in, if canon
        answers it: the tool exists and the SDK has no `Mcp-Param-*` headers to check against its schema."""
        try:
            params = CallToolRequestParams.model_validate(raw or {}, by_name=False)
        except ValueError:
            return None
        snapshot = self.calls.current()
        tool = self.calls.tool_of(params.name, snapshot)
        if tool is None or self.calls.header_schema(tool, snapshot) is not None:  # the SDK's handler answers it
            return None
        return params, tool, snapshot


def response_body(request_id: RequestId, result: ToolResult, meta: bytes, *, structured: bool = True) -> bytes:
    """The JSON-RPC response carrying `result`, as `_call_result` builds it and the SDK sends it on 2026-07-28,
    with the result's JSON encoded once: it is both the structured content and the text copy."""
    if result.asks is not None:  # the input-required result (`core.dispatch.confirm`), as `_call_result` has it
        asked = pydantic_core.to_json({"resultType": "input_required", "inputRequests": dict(result.asks)})
        return b"".join([b'{"jsonrpc":"2.0","id":', pydantic_core.to_json(request_id), b',"result":', asked[:-1],
                         b',"_meta":', meta, b"}}"])  # fmt: skip
    body = pydantic_core.to_json(result.as_json())
    parts = [b'{"jsonrpc":"2.0","id":', pydantic_core.to_json(request_id),
             b',"result":{"content":[{"type":"text","text":', pydantic_core.to_json(body.decode()), b"}]"]  # fmt: skip
    if structured and not result.is_error:
        parts += [b',"structuredContent":', body]
    flag = b"true" if result.is_error else b"false"
    parts += [b',"isError":', flag, b',"resultType":"complete","_meta":', meta, b"}}"]
    return b"".join(parts)
