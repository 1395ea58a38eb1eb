"""Pluggable surfaces: the secondary views (REST, GraphQL, llms.txt, …) that map the registry onto HTTP.

A surface is one module in `generators/` plus one line in `pyproject.toml`'s `canon.surfaces` entry-point
group; core discovers it here and never imports it. Core's HTTP app (`core.http.app`) serves `/mcp` and
`/healthz` itself and hands every other path a surface claims to that surface's ASGI app, built for the
current model's snapshot (and built again, on a host bound to the new snapshot, when the model changes).

A surface holds no behaviour: every call it takes goes through the one dispatch path (`host.call_tool`,
`host.run`), as the principal `host.principal_of(request)` names. Change events (for subscriptions) come from
`host.watch(sight, uri)`, the change feed's (`core.changes`), the same events MCP subscribers hear, already
filtered to what that sight may see. `SurfaceHost` is all a surface gets: no way into the instance behind it.

This module names no framework: an ASGI app is any `async (scope, receive, send)` callable.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Protocol, runtime_checkable

from core.changes import Watch
from core.dispatch import CallContext, ToolResult
from core.instance import Instance
from core.principal import Principal
from core.registry import Registry
from core.snapshot import Snapshot

__all__ = [
    "ENTRY_POINT_GROUP",
    "RESERVED",
    "ASGIApp",
    "Surface",
    "SurfaceHost",
    "SurfaceSettings",
    "claims",
    "discover",
    "host_for",
    "surface_named",
]

log = logging.getLogger("canon.surfaces")
ENTRY_POINT_GROUP = "canon.surfaces"

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


@dataclass(frozen=True)
class SurfaceSettings:
    """What a surface may know of the configuration."""

    max_body_bytes: int  # the largest request body the host admits (`[server] max_body_bytes`)
    local_ui_assets: bool = False  # docs pages load their scripts and styles from the host's `/ui-assets`
    anonymous: bool = True  # whether a caller without a token is served (as the anonymous principal)


@dataclass(frozen=True)
class SurfaceHost:
    """What core gives a surface, and all it gives: the model's snapshot and calls through its one dispatch path,
    the caller, change events, the store's revision and a few settings.

    A host is bound to one snapshot: the app a surface builds for a model calls that model's dispatcher, so a
    request that started before a model change finishes on the model it started with. (`at` is the same host for
    another snapshot; the HTTP host builds each surface's app again for every new snapshot.)
    """

    snapshot: Snapshot
    settings: SurfaceSettings
    principal_of: Callable[[Any], Principal]  # a request (the framework's object with a `.scope`) -> its caller
    authenticate: Callable[[str], Principal | None]  # a bearer token -> its principal; None: not a current token
    watch: Watch  # the change feed's `ChangeFeed.watch`: committed changes a sight may see, in order
    revision: Callable[[], int]  # the store's revision now
    surface_name: str  # what the audit log records as the surface (e.g. "rest")

    @property
    def registry(self) -> Registry:
        """The snapshot's registry: every tool and resource definition of its model."""
        return self.snapshot.registry

    def at(self, snapshot: Snapshot) -> SurfaceHost:
        """This host, bound to `snapshot`."""
        return dataclasses.replace(self, snapshot=snapshot)

    def call_tool(self, principal: Principal, name: str, arguments: Mapping[str, Any] | None, *,
                  received: float | None = None) -> ToolResult:  # fmt: skip
        """`Dispatcher.call_tool` as this surface (blocking: a surface on an event loop calls it in a thread)."""
        return self.snapshot.dispatcher.call_tool(principal, self.surface_name, name, arguments, received=received)

    def run(self, principal: Principal, action: str, target: str, work: Callable[[CallContext], Any]) -> Any:
        """A resource read or list (`action`) of `target` on the dispatch path (`Dispatcher.run`), as this surface."""
        return self.snapshot.dispatcher.run(principal, self.surface_name, action, target, {"target": target}, work)

    def rejected(self, target: str, reason: str) -> None:
        """Audit a request this surface refused before it had a principal."""
        self.snapshot.dispatcher.rejected(self.surface_name, target, reason)


def host_for(instance: Instance, surface_name: str, *, principal_of: Callable[[Any], Principal],
             watch: Watch) -> SurfaceHost:  # fmt: skip
    """The host a surface gets from `instance`, bound to its current snapshot."""
    config = instance.config
    settings = SurfaceSettings(config.max_body_bytes, config.ui_assets is not None, config.anonymous)
    return SurfaceHost(instance.snapshot, settings, principal_of, instance.tokens.verify, watch,
                       instance.store.revision, surface_name)  # fmt: skip


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
