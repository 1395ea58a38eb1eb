"""Where canon answers parts of the MCP SDK's Streamable HTTP transport itself, for speed (ADRs 0013, 0015, 0016).

Each module names, in its docstring, the SDK limitation it works around and when to delete it. The SDK's private
state is touched only by `sdk_compat`, whose `check` runs when an HTTP app is built: if the SDK differs from what
the bypass expects, or `[server] mcp_fastpath` is false, `/mcp` is served by the SDK alone (the plain path).
"""
