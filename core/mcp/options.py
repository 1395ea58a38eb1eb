"""How the MCP surface presents the registry (`canon serve --profile`, `--tool-prefix`), without the SDK.

Apart from `core.mcp.server` so that the command line can read them before anything imports the SDK (an stdio
start answers `initialize` first: `core.mcp.stdio`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_OPTIONS", "ServeOptions"]


@dataclass(frozen=True)
class ServeOptions:
    """How the MCP surface presents the registry."""

    profile: str = "full"  # "agent": the lean tool list and results of ADR 0032 (advanced tools hidden, still callable)
    prefix: str = ""  # e.g. "canon_": tools are listed as canon_get_node, the only names a call may use


DEFAULT_OPTIONS = ServeOptions()
