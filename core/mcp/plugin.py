"""The MCP surface as the `canon.surfaces` entry point finds it: light until it serves.

Every other module of `core/mcp` imports the MCP SDK (about 1.5 s of a start). A command that only discovers the
surfaces, such as `canon model diff`, `canon model apply` and `canon generate`, needs of MCP its name, its paths and
its artifacts (none: the registry's manifest is MCP's artifact), so the entry point names this module, which imports
no SDK, and the surface proper (`core.mcp.surface.McpSurface`) is made the first time the host serves `/mcp`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Mapping
from typing import TYPE_CHECKING, Any

from core.seam.surfaces import Running, SurfaceHost

if TYPE_CHECKING:
    from core.dispatch.registry import Registry
    from core.mcp.surface import McpSurface
    from core.seam.surfaces import ASGIApp

__all__ = ["McpPlugin", "surface"]


class McpPlugin:
    """`/mcp`, both revisions: `core.mcp.surface.McpSurface(*args, **kwargs)`, made when first served."""

    name: str = "mcp"
    audit_name: str = "mcp-http"  # core.mcp.surface.SURFACE; a test holds the two equal
    paths: tuple[str, ...] = ("/mcp",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._args, self._kwargs = args, kwargs
        self._surface: McpSurface | None = None

    def served(self) -> McpSurface:
        """The surface proper, made (and the SDK imported) at the first call."""
        if self._surface is None:
            from core.mcp.surface import McpSurface

            self._surface = McpSurface(*self._args, **self._kwargs)
        return self._surface

    def app(self, host: SurfaceHost, registry: Registry) -> ASGIApp:
        return self.served().app(host, registry)

    def artifacts(self, host: SurfaceHost) -> Mapping[str, str]:
        return {}  # as McpSurface's: the manifest is the registry's, generated beside the surfaces

    @contextlib.asynccontextmanager
    async def lifespan(self, host: SurfaceHost) -> AsyncGenerator[Running]:
        async with self.served().lifespan(host) as running:
            yield running


surface = McpPlugin()
