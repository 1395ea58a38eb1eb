"""Every read the pages make, as the caller of the request, on the one dispatch path.

A `Reader` is one request's view of the graph: it calls tools through `SurfaceHost.call_tool` with the request's
principal and the time the request arrived (so the call's time bound counts the wait for a worker thread), and
turns a failed call into the `CanonError` it carried, for the page to show. Nothing here reads the store, checks
a right or validates an argument: the dispatcher does, as it does for every surface.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.seam.surfaces import SurfaceHost
from core.values.principal import Principal

__all__ = ["Reader"]


@dataclass(frozen=True)
class Reader:
    """Tool calls as one request's caller."""

    host: SurfaceHost
    principal: Principal
    received: float  # time.monotonic() when the request arrived

    def call(self, tool: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The tool's structured result; its error raised (a `CanonError`: not found, invalid, forbidden, ...)."""
        result = self.host.call_tool(self.principal, tool, dict(arguments), received=self.received)
        if result.error is not None:
            raise result.error
        assert result.value is not None
        return result.value

    def has(self, tool: str) -> bool:
        """Whether the registry has `tool` (a deployment may leave a tool out)."""
        return any(t.name == tool for t in self.host.registry.tools)
