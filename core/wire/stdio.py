"""MCP over stdio: one process, one client; logs go to stderr only."""

from __future__ import annotations

import anyio
from mcp.server.stdio import stdio_server

from core.instance import Instance
from core.wire.events import EventFanout
from core.wire.mcp_server import DEFAULT_OPTIONS, ServeOptions, build_server

__all__ = ["serve_stdio"]


def serve_stdio(instance: Instance, options: ServeOptions = DEFAULT_OPTIONS) -> None:
    """Serve `instance` on stdin/stdout until the client closes stdin. The caller is the configured local principal."""
    assert instance.index is not None
    fanout = EventFanout(instance.index, on_model_change=instance.reload_model)
    local = instance.config.local_principal()
    # one client: a search answered from the store's indexes runs on the loop too, sparing it the thread hop (about
    # 0.3 ms of a 2 ms find_nodes), since the loop has nobody else to serve meanwhile
    server = build_server(instance.dispatcher, fanout, lambda ctx: local, options, surface="mcp-stdio",
                          single_client=True)  # fmt: skip

    async def main() -> None:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(fanout.pump)
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())
            tasks.cancel_scope.cancel()

    anyio.run(main)
