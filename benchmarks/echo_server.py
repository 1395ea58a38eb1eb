"""The floor: a one-tool MCP server on the same SDK (low-level Server), over stdio.

Its `echo` tool returns its arguments as structured content, with input validation done the way canon does it
(a compiled JSON Schema validator), so the difference to canon's `get_node` is canon's own work.

    python benchmarks/echo_server.py                 # over stdio
    python benchmarks/echo_server.py --http --port N # Streamable HTTP at http://127.0.0.1:PORT/mcp, set up as
                                                     # canon's is (sessions for 2025-11-25, JSON responses)
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import mcp_types as types
from jsonschema import Draft202012Validator
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

SCHEMA = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"], "additionalProperties": False}
VALIDATOR = Draft202012Validator(SCHEMA)
TOOL = types.Tool(name="echo", description="Echo the arguments.", input_schema=SCHEMA, output_schema={"type": "object"})


async def list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[TOOL])


async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    args = dict(params.arguments or {})
    errors = [e.message for e in VALIDATOR.iter_errors(args)]
    if errors:
        return types.CallToolResult(content=[types.TextContent(type="text", text="; ".join(errors))], is_error=True)
    text = types.TextContent(type="text", text=json.dumps(args))
    return types.CallToolResult(content=[text], structured_content=args)


def _server() -> Server[Any]:
    # get_tool_input_schema: what the SDK checks a 2026-07-28 HTTP call's Mcp-Param-* headers against. Without it
    # the SDK calls the tools/list handler on every tools/call to find the schema, work canon does not pay for
    return Server("echo", version="1", on_list_tools=list_tools, on_call_tool=call_tool,
                  get_tool_input_schema=lambda name: SCHEMA if name == "echo" else None)  # fmt: skip


async def main() -> None:
    server = _server()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def serve_http(port: int) -> None:
    """The same server over Streamable HTTP on 127.0.0.1, with the socket set up as canon's (Nagle off)."""
    import contextlib
    import sys
    from collections.abc import AsyncGenerator

    import uvicorn
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
    from starlette.applications import Starlette
    from starlette.routing import Route

    from core.http.serve import listening_socket

    manager = StreamableHTTPSessionManager(app=_server(), json_response=True, stateless=False)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncGenerator[None]:
        async with manager.run():
            yield

    app = Starlette(routes=[Route("/mcp", endpoint=StreamableHTTPASGIApp(manager))], lifespan=lifespan)
    sock = listening_socket("127.0.0.1", port)
    print(f"echo: serving MCP at http://127.0.0.1:{sock.getsockname()[1]}/mcp", file=sys.stderr, flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on")).run(sockets=[sock])


if __name__ == "__main__":
    import sys

    if "--http" in sys.argv:
        serve_http(int(sys.argv[sys.argv.index("--port") + 1]) if "--port" in sys.argv else 0)
    else:
        anyio.run(main)
