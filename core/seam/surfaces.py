"""Pluggable surfaces: MCP, REST, GraphQL, llms.txt, … each mapping the registry onto HTTP paths.

A surface is one module plus one line in `pyproject.toml`'s `canon.surfaces` entry-point group, built-ins
(`core.mcp.plugin`, `generators/`) and third-party ones alike; the host discovers them here and never imports
one. The HTTP host (`core.http.app`) serves `/healthz` itself and hands every path a surface claims to that
surface's ASGI app, built for the current model's snapshot (and built again, on a host bound to the new
snapshot, when the model changes). A surface with work that lasts as long as the server (sessions, streams,
keep-alives) also has a `lifespan` (`Lifespan`): the host enters it at start-up and serves the app it yields for
every model (that app reads `host.current()` per request).

A surface holds no behaviour: every call it takes goes through the one dispatch path (`host.call_tool`,
`host.run`), as the principal `host.principal_of(request)` names. Change events (for subscriptions) come from
`host.watch(sight, uri)`, the change feed's (`core.seam.changes`), the same events MCP subscribers hear, already
filtered to what that sight may see. `SurfaceHost` is all a surface gets: no way into the instance behind it.

This module names no framework: an ASGI app is any `async (scope, receive, send)` callable.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from core.dispatch.dispatcher import CallContext, ToolResult
from core.dispatch.registry import Registry
from core.lang.schema_diff import Finding
from core.ops import plugins
from core.ops.config import Config
from core.ops.tokens import TokenFile
from core.seam.changes import ChangeFeed, Watch
from core.seam.snapshot import Snapshot
from core.store import Store
from core.values.principal import ANONYMOUS, Principal

__all__ = [
    "ENTRY_POINT_GROUP",
    "FIRST",
    "PRINCIPAL",
    "RESERVED",
    "ASGIApp",
    "Comparing",
    "Gauge",
    "Lifespan",
    "Opened",
    "Running",
    "Surface",
    "SurfaceHost",
    "SurfaceSettings",
    "audit_name_of",
    "claims",
    "discover",
    "home_of",
    "host_for",
    "page_shell_of",
    "principal_of_request",
    "principal_of_scope",
    "serves_browsers",
    "settings_of",
    "surface_named",
]

log = logging.getLogger("canon.surfaces")
ENTRY_POINT_GROUP = plugins.SURFACES

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]

PRINCIPAL = "canon.principal"
"""The scope key holding the principal of a request the host authenticated (the host puts it there)."""


def principal_of_scope(scope: Scope) -> Principal:
    """The caller of a request that passed the host's gate: its token's principal, or the anonymous one."""
    principal = scope.get(PRINCIPAL)
    return principal if isinstance(principal, Principal) else ANONYMOUS


def principal_of_request(request: Any) -> Principal:
    """The principal of a framework request (anything with a `.scope`) that passed the host's gate (None: no HTTP
    request, i.e. anonymous)."""
    return principal_of_scope(request.scope) if request is not None else ANONYMOUS


@dataclass(frozen=True)
class SurfaceSettings:
    """What a surface may know of the configuration. (Docs pages load their scripts and styles from the host's
    `/ui-assets/`: `core.http.ui_assets`.)"""

    max_body_bytes: int  # the largest request body the host admits (`[server] max_body_bytes`)
    anonymous: bool = True  # whether a caller without a token is served (as the anonymous principal)
    max_streams: int = 10_000  # change streams one process serves at once, of each kind (`[server] max_streams`)
    stream_backlog: int = 1_024  # events one change stream may fall behind (`[server] stream_backlog`)
    mcp_fastpath: bool = True  # canon answers parts of MCP's HTTP transport itself (`[server] mcp_fastpath`)
    base_url: str = ""  # what links to this server start with: `[server] public_url`, else `root_path` ("" at the
    # root of whatever host was asked), never ending in "/"; a path such as "/tools/x.md" is appended to it


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
    current: Callable[[], Snapshot] | None = None  # the model's snapshot now (for an app serving every model)
    feed: ChangeFeed | None = None  # the change feed itself, for a surface that hears every batch (MCP's fan-out)

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


def settings_of(config: Config) -> SurfaceSettings:
    """What a surface may know of `config`."""
    return SurfaceSettings(config.max_body_bytes, config.anonymous, config.max_streams, config.stream_backlog,
                           config.mcp_fastpath, config.public_url or config.root_path)  # fmt: skip


class Opened(Protocol):
    """What `host_for` reads of an opened canon (`core.seam.instance.Instance`, which imports this module)."""

    @property
    def config(self) -> Config: ...
    @property
    def snapshot(self) -> Snapshot: ...
    @property
    def tokens(self) -> TokenFile: ...
    @property
    def store(self) -> Store: ...


def host_for(instance: Opened, surface_name: str, *, principal_of: Callable[[Any], Principal],
             watch: Watch, feed: ChangeFeed | None = None,
             authenticate: Callable[[str], Principal | None] | None = None) -> SurfaceHost:  # fmt: skip
    """The host a surface gets from `instance`, bound to its current snapshot. Its `authenticate` is canon's token
    file, unless the HTTP host gives one trying an OAuth issuer's tokens too."""
    settings = settings_of(instance.config)

    def current() -> Snapshot:
        return instance.snapshot

    verify = instance.tokens.verify if authenticate is None else authenticate
    return SurfaceHost(instance.snapshot, settings, principal_of, verify, watch,
                       instance.store.revision, surface_name, current, feed)  # fmt: skip


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
class Gauge:
    """A number a running surface (or the host) reports at every `/metrics` scrape, read then (`core.http.metrics`):
    what it holds open, never counted on the way in and out."""

    name: str  # a Prometheus metric name, `canon_...`
    documentation: str
    read: Callable[[], float]


@dataclass(frozen=True)
class Running:
    """What a surface with a lifespan serves while the server runs."""

    app: ASGIApp  # serves the surface's paths for every registry (it reads the current one per request)
    close: Callable[[], None] = _nothing  # end long-lived responses now: the server has begun to shut down
    health: Mapping[str, Any] = field(default_factory=dict[str, Any])  # members it adds to `/healthz`
    gauges: tuple[Gauge, ...] = ()  # what it adds to `/metrics`, each read at scrape time


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


def serves_browsers(surface: Surface) -> bool:
    """Whether web pages on other origins may call `surface` (CORS, `core.http.cors`): its optional `cors`
    attribute (REST, GraphQL and llms.txt say True; MCP follows the MCP specification's Origin rule instead)."""
    return getattr(surface, "cors", False) is True


def home_of(surface: Surface) -> str | None:
    """Where a person starts on `surface`: its optional `home` path (the pages surface's `/browse/`), which the
    landing page links to; None for a surface without one."""
    home = getattr(surface, "home", None)
    return home if isinstance(home, str) else None


def _no_shells(scope: Scope) -> bool:
    return False


def page_shell_of(surface: Surface) -> Callable[[Scope], bool]:
    """Which requests to `surface` are for a page shell: its optional `page_shell(scope)` (REST's `/docs`, GraphQL's
    GraphiQL page), else none. A shell is a page that holds no data (HTML and scripts the same for every caller), so
    the host serves it without a token even when anonymous access is off; the calls it makes carry the token."""
    shell: Callable[[Scope], bool] | None = getattr(surface, "page_shell", None)
    return shell if callable(shell) else _no_shells


FIRST = "mcp"
"""The entry-point name of the primary surface, which `discover` lists (and `/healthz` shows) first."""


@runtime_checkable
class Comparing(Protocol):
    """What a surface may also do: classify what a model change does to its callers (`canon model diff`).

    `compare` gets the artifacts this surface generated (`Surface.artifacts`) for the old and the new model and
    returns one `Finding` per difference, each breaking, needs-data-check or compatible for its callers. The surface
    knows its own format (an SDL, an OpenAPI document), so the rules for it live with it; a surface without
    `compare` has every changed artifact reported as breaking, since nothing shows it is not.
    """

    def compare(self, old: Mapping[str, str], new: Mapping[str, str]) -> list[Finding]: ...


def discover() -> list[Surface]:
    """Every installed surface: MCP first, then the others by entry-point name; a surface that fails to load is an
    error, not skipped."""
    loaded = plugins.load(ENTRY_POINT_GROUP, lambda obj: isinstance(obj, Surface), "a canon surface", order=(FIRST,))
    found: list[Surface] = [p.obj for p in loaded]
    _check_paths(found)
    return found


def surface_named(name: str, surfaces: list[Surface]) -> Surface:
    for surface in surfaces:
        if surface.name == name:
            return surface
    raise KeyError(f"no surface named {name!r}; installed: {', '.join(s.name for s in surfaces) or 'none'}")


RESERVED = ("/healthz", "/metrics", "/ui-assets/", "/signin/", "/signout")


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
