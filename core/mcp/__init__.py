"""The wire: canon's native MCP surface on the official SDK, over stdio and Streamable HTTP.

This package is the seam: the only place in core that imports the `mcp` SDK and an ASGI framework. Each
handler here translates between the SDK's types and one call on `core.dispatch.dispatcher.Dispatcher`; no behaviour of
canon lives here.
"""
