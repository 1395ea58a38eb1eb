"""The revisions canon serves: a session opened by `initialize` in any other revision speaks 2025-11-25 throughout,
its handlers included (the SDK keeps the revision it read from the request, which `Negotiate` rewrote)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCNotification, JSONRPCRequest, JSONRPCResponse

from tests.mcp.conftest import DEADLINE_S, LEGACY, Served

pytestmark = pytest.mark.anyio


async def test_a_session_opened_in_an_older_revision_speaks_2025_11_25_in_its_answer_and_its_handlers(
    served: Served,
) -> None:
    seen: list[tuple[str, str]] = []

    async def record(ctx: ServerRequestContext[Any], call_next: CallNext) -> HandlerResult:
        seen.append((ctx.method, ctx.protocol_version))
        return await call_next(ctx)

    server = served.server
    server.middleware.append(record)
    to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception](4)
    server_writes, from_server = anyio.create_memory_object_stream[SessionMessage](4)
    client = {"name": "t", "version": "0"}
    opening = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}
    initialized = listed = None
    with anyio.fail_after(DEADLINE_S):
        async with to_server, server_reads, server_writes, from_server, anyio.create_task_group() as tasks:
            tasks.start_soon(server.run, server_reads, server_writes, server.create_initialization_options())
            await to_server.send(SessionMessage(JSONRPCRequest(jsonrpc="2.0", id=1, method="initialize",
                                                               params=opening)))  # fmt: skip
            initialized = (await from_server.receive()).message
            await to_server.send(SessionMessage(JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized")))
            await to_server.send(SessionMessage(JSONRPCRequest(jsonrpc="2.0", id=2, method="tools/list")))
            listed = (await from_server.receive()).message
            tasks.cancel_scope.cancel()

    assert isinstance(initialized, JSONRPCResponse)
    assert initialized.result["protocolVersion"] == LEGACY
    assert isinstance(listed, JSONRPCResponse)
    assert ("tools/list", LEGACY) in seen
