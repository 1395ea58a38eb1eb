"""The names one surface prints about another: a tool's REST route, a resource's REST path and GraphQL field.

Each surface names its own operations with these functions, and llms.txt, whose pages tell a reader how to call
every surface, prints the same names; so the two cannot disagree, and no surface imports another
(tests/test_architecture.py).
"""

from __future__ import annotations

import re

from core.dispatch.registry import ToolDefinition
from core.values.uris import path_of

__all__ = ["API", "resource_field_name", "resource_path", "rest_route"]

API = "/api"
_METHODS = ("GET", "PUT", "POST", "PATCH", "DELETE")


def rest_route(tool: ToolDefinition) -> tuple[str, str]:
    """`(METHOD, /api/path template)` of a tool: its REST hint, else `GET` (read-only) or `POST`
    `/api/tools/<name>`. A hint that cannot be served (an unknown method, GET for a write) fails here."""
    read_only = bool(tool.annotations.get("readOnlyHint", False))
    hint = tool.surface.get("rest") or {"method": "GET" if read_only else "POST", "path": f"/tools/{tool.name}"}
    method, path = str(hint["method"]).upper(), API + str(hint["path"])
    if method not in _METHODS:
        raise ValueError(f"tool {tool.name!r}: REST method {method} is not one of {', '.join(_METHODS)}")
    if method == "GET" and not read_only:
        raise ValueError(f"tool {tool.name!r}: GET is only for read-only tools")
    return method, path


def resource_path(uri: str) -> str:
    """A type's schema URI -> `/api/resources/types/Team` (templates keep their `{var}` segments)."""
    return f"{API}/resources/{path_of(uri)}"


def resource_field_name(resource: str) -> str:
    """The Query (and Subscription) field of a resource: `resource_` and its name, non-name characters as `_`."""
    return "resource_" + re.sub(r"[^0-9A-Za-z_]", "_", resource)
