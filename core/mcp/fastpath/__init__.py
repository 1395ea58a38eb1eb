"""Where canon answers parts of the MCP SDK's Streamable HTTP transport itself, for speed (ADRs 0013, 0015, 0016)."""
