"""The floor: a one-tool MCP server on the same SDK (low-level Server), over stdio.

Its `echo` tool returns its arguments as structured content, with input validation done the way canon does it
(a compiled JSON Schema validator), so the difference to canon's `get_node` is canon's own work.

    python benchmarks/echo_server.py
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


async def main() -> None:
    server = Server("echo", version="1", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
