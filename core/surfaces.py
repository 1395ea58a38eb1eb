"""Pluggable surfaces: MCP, REST, GraphQL, llms.txt, … each mapping the registry onto HTTP paths.

A surface is one module plus one line in `pyproject.toml`'s `canon.surfaces` entry-point group, built-ins
(`core.mcp.surface`, `generators/`) and third-party ones alike; the host discovers them here and never imports
one. The HTTP host (`core.http.app`) serves `/healthz` itself and hands every path a surface claims to that
surface's ASGI app, built for the current registry (and built again when the model, so the registry, changes).
A surface with work that lasts as long as the server (sessions, streams, keep-alives) also has a `lifespan`
(`Lifespan`): the host enters it at start-up and serves the app it yields for every registry.

A surface holds no behaviour: every call it takes goes through `host.dispatcher`, the one dispatch path,
as the principal `host.principal_of(request)` names. Change events (for subscriptions) come from
`host.watch()`, the same events MCP subscribers hear.

This module names no framework: an ASGI app is any `async (scope, receive, send)` callable.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, MutableMapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Protocol, runtime_checkable

from core.dispatch import Dispatcher
from core.instance import Instance
from core.principal import Principal
from core.records import Change
from core.registry import Registry

__all__ = [
    "ENTRY_POINT_GROUP",
    "FIRST",
    "RESERVED",
    "ASGIApp",
    "Lifespan",
    "Running",
    "Surface",
    "SurfaceHost",
    "audit_name_of",
    "claims",
    "discover",
    "surface_named",
]

log = logging.getLogger("canon.surfaces")
ENTRY_POINT_GROUP = "canon.surfaces"

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


@dataclass(frozen=True)
class SurfaceHost:
    """What core gives a surface: the instance, the one dispatch path, the caller, and change events."""

    instance: Instance
    principal_of: Callable[[Any], Principal]  # a request (the framework's object with a `.scope`) -> its caller
    watch: Callable[[], AbstractAsyncContextManager[AsyncIterator[Change]]]  # every committed change, in order
    surface_name: str = ""  # what the audit log records as the surface (e.g. "rest")
    changes: Any = None  # the change fan-out behind `watch` (until `core/changes.py` holds the feed: MCP's)

    @property
    def dispatcher(self) -> Dispatcher:
        return self.instance.dispatcher

    @property
    def registry(self) -> Registry:
        """The current registry (it changes when another process changes the model)."""
        return self.instance.dispatcher.registry


@runtime_checkable
class Surface(Protocol):
    """One surface. `name` is also its audit surface name, unless it has an `audit_name` (`audit_name_of`);
    `paths` are what it serves.

    A path ending in `/` is a prefix (`/api/` serves `/api` and everything under it); any other path is
    served exactly. Paths never overlap another surface's or the host's (`/healthz`, `/ui-assets/`).
    """

    name: str
    paths: tuple[str, ...]

    def app(self, host: SurfaceHost, registry: Registry) -> ASGIApp:
        """An ASGI app serving this surface's paths for `registry` (full request paths, unchanged scope)."""
        ...

    def artifacts(self, host: SurfaceHost) -> Mapping[str, str]:
        """The reference artifacts this surface contributes to `canon generate`: file name -> exact text."""
        ...


def _nothing() -> None:
    return None


@dataclass(frozen=True)
class Running:
    """What a surface with a lifespan serves while the server runs."""

    app: ASGIApp  # serves the surface's paths for every registry (it reads the current one per request)
    close: Callable[[], None] = _nothing  # end long-lived responses now: the server has begun to shut down
    health: Mapping[str, Any] = field(default_factory=dict[str, Any])  # members it adds to `/healthz`


@runtime_checkable
class Lifespan(Protocol):
    """The optional member of a `Surface` whose work lasts as long as the server (sessions, streams, keep-alives).

    The host enters `lifespan(host)` once at start-up, before any request, and leaves it at shutdown; the
    `Running` it yields replaces `Surface.app`.
    """

    def lifespan(self, host: SurfaceHost) -> AbstractAsyncContextManager[Running]: ...


def audit_name_of(surface: Surface) -> str:
    """What the audit log records as `surface`: its optional `audit_name` (MCP over HTTP is "mcp-http", told
    apart from stdio's "mcp"), else its `name`."""
    named = getattr(surface, "audit_name", None)
    return named if isinstance(named, str) else surface.name


FIRST = "mcp"
"""The entry-point name of the primary surface, which `discover` lists (and `/healthz` shows) first."""


def _listed_order(point: EntryPoint) -> tuple[bool, str]:
    return point.name != FIRST, point.name


def discover() -> list[Surface]:
    """Every installed surface: MCP first, then the others by entry-point name; a surface that fails to load is an
    error, not skipped."""
    found: list[Surface] = []
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=_listed_order):
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


RESERVED = ("/healthz", "/ui-assets/")


def _check_paths(surfaces: list[Surface]) -> None:
    owner: dict[str, str] = dict.fromkeys(RESERVED, "the host")
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
