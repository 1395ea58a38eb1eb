"""MCP over stdio: one process, one client; logs go to stderr only.

Before the SDK sees a line, canon answers the ones no revision it serves accepts (`screen`): a JSON-RPC batch or a
line that is no JSON-RPC message (the SDK drops those without a word), and a request naming a revision canon does
not serve (`core.mcp.revisions.refusal`: the same -32022 as over HTTP). A refused request changes nothing: the
SDK picks the connection's revision from the first request it sees, and it never sees that one.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterable, Awaitable, Callable

import anyio
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError, JSONRPCRequest, RequestId
from pydantic import ValidationError

from core.changes import ChangeFeed
from core.instance import Instance
from core.mcp.events import EventFanout
from core.mcp.revisions import BATCH, refusal
from core.mcp.server import DEFAULT_OPTIONS, ServeOptions, build_server

__all__ = ["screen", "serve_stdio"]

Item = SessionMessage | Exception


def serve_stdio(instance: Instance, options: ServeOptions = DEFAULT_OPTIONS) -> None:
    """Serve `instance` on stdin/stdout until the client closes stdin. The caller is the configured local principal."""
    assert instance.index is not None
    feed = ChangeFeed(instance.index, on_model_change=instance.reload_model)
    fanout = EventFanout(feed)
    local = instance.config.local_principal()
    # one client: a search answered from the store's indexes runs on the loop too, sparing it the thread hop (about
    # 0.3 ms of a 2 ms find_nodes), since the loop has nobody else to serve meanwhile
    server = build_server(lambda: instance.snapshot, fanout, lambda ctx: local, options, surface="mcp-stdio",
                          single_client=True)  # fmt: skip

    async def main() -> None:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(feed.pump)
            async with stdio_server() as (read, write):
                passed, screened = anyio.create_memory_object_stream[Item]()
                tasks.start_soon(screen, read, passed, write.send)
                await server.run(screened, write, server.create_initialization_options())
            tasks.cancel_scope.cancel()

    anyio.run(main)


async def screen(lines: AsyncIterable[Item], passed: MemoryObjectSendStream[Item],
                 answer: Callable[[SessionMessage], Awaitable[None]]) -> None:  # fmt: skip
    """Pass what arrives on `lines` to `passed` (the SDK's), and `answer` what canon refuses itself."""
    async with passed:
        async for item in lines:
            refused = _refused(item)
            if refused is None:
                await passed.send(item)
                continue
            request_id, error = refused
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await answer(SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error)))


def _refused(item: Item) -> tuple[RequestId | None, ErrorData] | None:
    """The id and error canon answers `item` with, or None to pass it to the SDK."""
    if isinstance(item, ValidationError):  # the line was no JSON-RPC message (the SDK parsed it)
        problems = item.errors()
        if any(p["type"] == "json_invalid" for p in problems):
            return None, ErrorData(code=PARSE_ERROR, message="Parse error: the line is not JSON.")
        if any(isinstance(p.get("input"), list) for p in problems):
            return None, BATCH
        return None, ErrorData(code=INVALID_REQUEST, message="Invalid Request: the line is not a JSON-RPC 2.0 "
                               "request, notification or response.")  # fmt: skip
    if isinstance(item, SessionMessage) and isinstance(item.message, JSONRPCRequest):
        error = refusal(item.message.method, item.message.params)
        return None if error is None else (item.message.id, error)
    return None
