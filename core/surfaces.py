"""Pluggable surfaces: the secondary views (REST, GraphQL, llms.txt, …) that map the registry onto HTTP.

A surface is one module in `generators/` plus one line in `pyproject.toml`'s `canon.surfaces` entry-point
group; core discovers it here and never imports it. Core's HTTP app (`core.http.app`) serves `/mcp` and
`/healthz` itself and hands every other path a surface claims to that surface's ASGI app, built for the
current registry (and built again when the model, so the registry, changes).

A surface holds no behaviour: every call it takes goes through `host.dispatcher`, the one dispatch path,
as the principal `host.principal_of(request)` names. Change events (for subscriptions) come from
`host.watch(sight, uri)`, the change feed's (`core.changes`), the same events MCP subscribers hear, already
filtered to what that sight may see.

This module names no framework: an ASGI app is any `async (scope, receive, send)` callable.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Protocol, runtime_checkable

from core.changes import Watch
from core.dispatch import Dispatcher
from core.instance import Instance
from core.principal import Principal
from core.registry import Registry

__all__ = ["ENTRY_POINT_GROUP", "RESERVED", "ASGIApp", "Surface", "SurfaceHost", "claims", "discover", "surface_named"]

log = logging.getLogger("canon.surfaces")
ENTRY_POINT_GROUP = "canon.surfaces"

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


@dataclass(frozen=True)
class SurfaceHost:
    """What core gives a surface: the instance, the one dispatch path, the caller, and change events."""

    instance: Instance
    principal_of: Callable[[Any], Principal]  # a request (the framework's object with a `.scope`) -> its caller
    watch: Watch  # the change feed's `ChangeFeed.watch`: committed changes, in order
    surface_name: str = ""  # what the audit log records as the surface (e.g. "rest")

    @property
    def dispatcher(self) -> Dispatcher:
        return self.instance.dispatcher

    @property
    def registry(self) -> Registry:
        """The current registry (it changes when another process changes the model)."""
        return self.instance.dispatcher.registry


@runtime_checkable
class Surface(Protocol):
    """One secondary surface. `name` is also its audit surface name; `paths` are what it serves.

    A path ending in `/` is a prefix (`/api/` serves `/api` and everything under it); any other path is
    served exactly. Paths never overlap another surface's or core's (`/mcp`, `/healthz`).
    """

    name: str
    paths: tuple[str, ...]

    def app(self, host: SurfaceHost, registry: Registry) -> ASGIApp:
        """An ASGI app serving this surface's paths for `registry` (full request paths, unchanged scope)."""
        ...

    def artifacts(self, host: SurfaceHost) -> Mapping[str, str]:
        """The reference artifacts this surface contributes to `canon generate`: file name -> exact text."""
        ...


def discover() -> list[Surface]:
    """Every installed surface, by entry-point name; a surface that fails to load is an error, not skipped."""
    found: list[Surface] = []
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
        surface = point.load()
        if not isinstance(surface, Surface):
            raise TypeError(f"entry point {point.name!r} ({point.value}) is not a canon surface")
        found.append(surface)
    _check_paths(found)
    return found


def surface_named(name: str, surfaces: list[Surface]) -> Surface:
    for surface in surfaces:
        if surface.name == name:
            return surface
    raise KeyError(f"no surface named {name!r}; installed: {', '.join(s.name for s in surfaces) or 'none'}")


RESERVED = ("/mcp", "/healthz", "/ui-assets/")


def _check_paths(surfaces: list[Surface]) -> None:
    owner: dict[str, str] = dict.fromkeys(RESERVED, "core")
    for surface in surfaces:
        for path in surface.paths:
            if not path.startswith("/"):
                raise ValueError(f"surface {surface.name!r}: path {path!r} must start with '/'")
            clash = next((o for o in owner if _overlap(o, path)), None)
            if clash is not None:
                raise ValueError(f"surface {surface.name!r}: path {path!r} overlaps {clash!r} of {owner[clash]}")
            owner[path] = surface.name


def _overlap(a: str, b: str) -> bool:
    def covers(prefix: str, path: str) -> bool:
        return path == prefix or (prefix.endswith("/") and (path.startswith(prefix) or path == prefix[:-1]))

    return covers(a, b) or covers(b, a)


def claims(path: str, request_path: str) -> bool:
    """Whether a surface path serves `request_path`."""
    if path.endswith("/"):
        return request_path == path[:-1] or request_path.startswith(path)
    return request_path == path
