"""MCP over stdio on the SDK: the connection from the client's first line on (`core.mcp.stdio` reads that line).

The first line is replayed to the SDK as the first message it reads, parsed as the SDK's own reader parses a line
(`Opening`). If `core.mcp.stdio` has already answered it (an `initialize` or a `server/discover`, ADR 0036), the
SDK's answer to it is compared with the one sent, an error logged if they differ, and not sent again
(`AnsweredOnce`): the SDK's state is the one its own answer would have left, and the client hears one answer.

Before the SDK sees a line, canon answers the ones no revision it serves accepts (`screen`): a JSON-RPC batch or a
line that is no JSON-RPC message (the SDK drops those without a word), and a request naming a revision canon does
not serve (`core.mcp.revisions.refusal`: the same -32022 as over HTTP). A refused request changes nothing: the
SDK picks the connection's revision from the first request it sees, and it never sees that one.

A line the SDK's parser refuses is read again with canon's own (`core.values.documents.parse_json`, the one the HTTP
side
reads a body with) before it is called no JSON (`_reread`): the SDK's parser refuses a lone surrogate (`"\\ud800"`),
which is valid JSON, and would leave the client waiting for an answer to a request id nobody read. Read as over
HTTP, the request reaches the tool, whose arguments dispatch refuses as over HTTP.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
)
from pydantic import ValidationError

from core.mcp.events import EventFanout
from core.mcp.options import ServeOptions
from core.mcp.revisions import BATCH, refusal
from core.mcp.server import build_server
from core.seam.changes import ChangeFeed
from core.seam.instance import Instance
from core.values.documents import parse_json, shallow_json

__all__ = ["AnsweredOnce", "Opening", "screen", "serve_on_sdk"]

log = logging.getLogger("canon.mcp")
Item = SessionMessage | Exception


@dataclass(frozen=True)
class Opening:
    """What was read and answered before the SDK: the client's first line (empty: none, the SDK reads every line)
    and, if canon answered it, the request's id and the `result` sent."""

    line: bytes = b""
    answered_id: RequestId | None = None
    answered: dict[str, Any] | None = None


def serve_on_sdk(instance: Instance, options: ServeOptions, opening: Opening) -> None:
    """Serve `instance` on stdin/stdout from `opening` on, until the client closes stdin, as the configured local
    principal."""
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
                tasks.start_soon(screen, _after(opening.line, read), passed, write.send)
                answers = write if opening.answered is None else AnsweredOnce(write, opening)
                await server.run(screened, answers, server.create_initialization_options())
            tasks.cancel_scope.cancel()

    anyio.run(main)


async def _after(line: bytes, rest: AsyncIterable[Item]) -> AsyncIterator[Item]:
    """`line` (if any) as the SDK's stdio reader would have passed it on, then what arrives on `rest`."""
    if line:
        try:
            yield SessionMessage(types.jsonrpc_message_adapter.validate_json(line.decode(errors="replace"),
                                                                             by_name=False))  # fmt: skip
        except ValidationError as exc:
            yield exc
    async for item in rest:
        yield item


class AnsweredOnce:
    """The SDK's write stream, less the SDK's answer to the request answered before it (compared, then dropped)."""

    def __init__(self, inner: Any, opening: Opening) -> None:
        self.inner = inner
        self.opening: Opening | None = opening  # until the SDK's answer to it has passed

    async def send(self, item: SessionMessage, /) -> None:
        opening = self.opening
        message = item.message
        if (
            opening is not None
            and isinstance(message, JSONRPCResponse | JSONRPCError)
            and message.id == opening.answered_id
        ):
            self.opening = None
            _compare(item, opening)
            return
        await self.inner.send(item)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> AnsweredOnce:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc_val: BaseException | None,
                        exc_tb: TracebackType | None) -> None:  # fmt: skip
        await self.aclose()


def _compare(item: SessionMessage, opening: Opening) -> None:
    """Log an error if the SDK answered the opening request otherwise than canon did."""
    wire = item.message.model_dump(by_alias=True, exclude_unset=True, mode="json")
    if wire.get("result") != opening.answered:
        log.error("stdio: the answer sent to %s before the SDK was loaded differs from the SDK's: sent %s, the "
                  "SDK's %s", opening.line.decode(errors="replace").strip(), opening.answered, wire)  # fmt: skip


async def screen(lines: AsyncIterable[Item], passed: MemoryObjectSendStream[Item],
                 answer: Callable[[SessionMessage], Awaitable[None]]) -> None:  # fmt: skip
    """Pass what arrives on `lines` to `passed` (the SDK's), and `answer` what canon refuses itself."""
    async with passed:
        async for line in lines:
            item = _reread(line)
            refused = _refused(item)
            if refused is None:
                await passed.send(item)
                continue
            request_id, error = refused
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await answer(SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error)))


def _reread(item: Item) -> Item:
    """`item`, or, if the SDK's parser found no JSON in its line, the message canon's parser reads in it (a lone
    surrogate is JSON to canon's, as over HTTP, and not to the SDK's), or its error if that is no JSON-RPC message;
    `item` when canon's parser finds no JSON either."""
    if not isinstance(item, ValidationError):
        return item
    text = next((p["input"] for p in item.errors() if p["type"] == "json_invalid"), None)
    if not isinstance(text, str | bytes):
        return item
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    cut = shallow_json(raw)  # nested deeper than a parser follows: read cut, so the tool refuses it, to its id
    try:
        decoded = parse_json(raw if cut is None else cut)
    except ValueError:  # json.JSONDecodeError: not JSON to canon either
        return item
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_python(decoded, by_name=False))
    except ValidationError as exc:  # JSON, but no JSON-RPC message: `_refused` says which
        return exc


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
