"""The HTTP app: one ASGI application on one port, which later surfaces extend.

Routes: `/mcp` (Streamable HTTP, both protocol revisions: 2026-07-28 requests are served statelessly, their
`subscriptions/listen` streams and `tools/call` answers by canon itself (`core.mcp.fastpath`), the rest
by the SDK; 2025-11-25 clients get sessions, a GET stream (served by canon, `core.mcp.fastpath.legacy_streams`)
and `Last-Event-ID` resumption), `/healthz`, and every path a
discovered surface claims (`core.surfaces`: REST, GraphQL, llms.txt), each served by that surface's app for
the current registry. Bearer tokens
identify callers on every route (`core.http.auth`); `/mcp` refuses a bad token with 401. Outside every route,
`core.http.admission` checks Host (421) and Origin (403) and bounds the request body (413), one rule for all of
them, and `core.http.problems` makes every error answer an RFC 9457 problem (JSON-RPC errors stay on `/mcp`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncGenerator, Callable
from typing import Any

import anyio
from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Match, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from core.changes import ChangeFeed
from core.http.admission import Admission, allowed_for
from core.http.auth import BearerGate, auth_middleware, principal_of_request
from core.http.problems import ProblemAnswers, internal_error
from core.instance import Instance
from core.mcp.events import EventFanout
from core.mcp.fastpath.calls import CallRoute
from core.mcp.fastpath.legacy_streams import DEFAULT_LEGACY_LIMITS, LegacyLimits, LegacyRoute, LegacyStreams
from core.mcp.fastpath.listen import ListenRoute
from core.mcp.fastpath.listen_streams import DEFAULT_LIMITS, ListenLimits, ListenStreams
from core.mcp.fastpath.sdk_compat import fastpath, session_manager
from core.mcp.revision_gate import RevisionGate
from core.mcp.revisions import SUPPORTED_VERSIONS
from core.mcp.server import DEFAULT_OPTIONS, ServeOptions, build_server
from core.principal import Principal
from core.snapshot import PerSnapshot, Snapshot
from core.surfaces import Surface, SurfaceHost, claims, discover, host_for

__all__ = ["UI_ASSETS", "build_app", "close_streams"]

SURFACE = "mcp-http"
UI_ASSETS = "/ui-assets"
CHECKED_OUTSIDE = TransportSecuritySettings(enable_dns_rebinding_protection=False)
"""The SDK's own Host/Origin check is off: `core.http.admission` applies the one rule to every route, `/mcp` too."""


class SurfaceRoute(BaseRoute):
    """Every path one surface claims, served by its app for the current snapshot (built again for a new one, on
    the host bound to it: a request finishes on the app, so the model, it started with).

    The scope passes through unchanged, so a surface sees full request paths. A bad bearer token is a 401 in
    RFC 9457 form, as on `/mcp`.
    """

    def __init__(self, surface: Surface, host: SurfaceHost, gate: Callable[[ASGIApp], ASGIApp],
                 current: Callable[[], Snapshot]) -> None:  # fmt: skip
        self.surface = surface
        self.host = host
        self.gate = gate
        self.snapshot = current
        self._app = PerSnapshot(self._build)

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] in ("http", "websocket") and any(claims(p, scope["path"]) for p in self.surface.paths):
            return Match.FULL, {}
        return Match.NONE, {}

    def current(self) -> ASGIApp:
        return self._app(self.snapshot())

    def _build(self, snapshot: Snapshot) -> ASGIApp:
        return self.gate(self.surface.app(self.host.at(snapshot), snapshot.registry))  # pyright: ignore[reportArgumentType]

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.current()(scope, receive, send)

    def url_path_for(self, name: str, /, **path_params: Any) -> Any:
        from starlette.routing import NoMatchFound

        raise NoMatchFound(name, path_params)


def close_streams(app: Starlette) -> None:
    """End every change stream a `build_app` app serves, each as its protocol ends it: the 2026-07-28 listen
    streams with their result, the 2025-11-25 GET streams as their session's end does."""
    for streams in (getattr(app.state, "listen", None), getattr(app.state, "legacy", None)):
        if streams is not None:
            streams.close()


def build_app(instance: Instance, options: ServeOptions = DEFAULT_OPTIONS, surfaces: list[Surface] | None = None,
              *, listen: ListenLimits | None = DEFAULT_LIMITS, calls: bool = True,
              legacy: LegacyLimits | None = DEFAULT_LEGACY_LIMITS) -> Starlette:  # fmt: skip
    """The ASGI app serving `instance`. Its lifespan runs the MCP session manager and the change pump.

    Callers are identified by bearer token (`core.http.auth`); without one they are anonymous. `surfaces`
    defaults to every installed surface (`core.surfaces.discover`); pass `[]` for MCP alone. `listen` bounds
    canon's own 2026-07-28 listen streams (`app.state.listen`; its `close` ends them gracefully); None leaves
    listen to the SDK. `calls` has canon answer 2026-07-28 `tools/call` itself (`core.mcp.fastpath.calls`); False leaves
    them to the SDK's runner (the reference its tests compare with). `legacy` bounds canon's own 2025-11-25 GET
    streams (`app.state.legacy`; `core.mcp.fastpath.legacy_streams`); None, or `listen` None, leaves them to the SDK.
    `close_streams(app)` ends both kinds gracefully. Left at their defaults, both kinds take their bounds from the
    configuration (`[server] max_streams` and `stream_backlog`). With `[server] mcp_fastpath = false`, or an SDK
    other than the bypass expects (`core.mcp.fastpath.sdk_compat.fastpath`), all three are left to the SDK.
    """
    assert instance.index is not None
    config = instance.config
    if not fastpath(config.mcp_fastpath):  # switched off, or the SDK not as the bypass expects: the plain SDK path
        listen, calls, legacy = None, False, None
    if listen is DEFAULT_LIMITS:  # left as it is: the configured bounds
        listen = dataclasses.replace(DEFAULT_LIMITS, max_streams=config.max_streams, max_backlog=config.stream_backlog)
    if legacy is DEFAULT_LEGACY_LIMITS:
        legacy = dataclasses.replace(DEFAULT_LEGACY_LIMITS, max_streams=config.max_streams,
                                     max_backlog=config.stream_backlog)  # fmt: skip
    feed = ChangeFeed(instance.index, on_model_change=instance.reload_model)
    fanout = EventFanout(feed)

    def current() -> Snapshot:
        return instance.snapshot

    def principal_of(ctx: ServerRequestContext[Any]) -> Principal:
        return principal_of_request(ctx.request)

    server = build_server(current, fanout, principal_of, options, surface=SURFACE)
    manager = session_manager(
        app=server,
        json_response=True,
        stateless=False,
        security_settings=CHECKED_OUTSIDE,
        max_request_body_size=instance.config.max_body_bytes,
    )

    async def healthz(request: Request) -> JSONResponse:
        store = instance.store
        return JSONResponse({"status": "ok", "revision": store.revision(), "model": instance.model.name,
                             "protocolVersions": SUPPORTED_VERSIONS,
                             "surfaces": ["mcp", *(r.surface.name for r in surface_routes
                                                   if isinstance(r, SurfaceRoute))]})  # fmt: skip

    streams = None if listen is None else ListenStreams(server.server_info_stamp, listen)
    if streams is not None:
        fanout.add_sink(streams.deliver)
    get_streams = None if streams is None or legacy is None else LegacyStreams(legacy)
    if streams is not None and get_streams is not None:
        fanout.tell_legacy_through(get_streams)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncGenerator[None]:
        async with manager.run(), anyio.create_task_group() as tasks:
            tasks.start_soon(feed.pump)
            if streams is not None:
                tasks.start_soon(streams.keepalive)
            if get_streams is not None:
                tasks.start_soon(get_streams.keepalive)
            yield
            close_streams(app)
            tasks.cancel_scope.cancel()

    def reject(path: str, reason: str) -> None:
        instance.dispatcher.rejected(SURFACE, path, reason)

    sdk_endpoint: ASGIApp = RevisionGate(StreamableHTTPASGIApp(manager), security=manager.security_settings,
                                         max_body=manager.max_request_body_size)  # fmt: skip
    if streams is not None:
        sdk_endpoint = ListenRoute(sdk_endpoint, streams, current=current, surface=SURFACE,
                                   security=manager.security_settings,
                                   max_body=manager.max_request_body_size)  # fmt: skip
    if calls:
        sdk_endpoint = CallRoute(sdk_endpoint, server.calls, server_info=server.server_info_stamp,
                                 security=manager.security_settings,
                                 max_body=manager.max_request_body_size)  # fmt: skip
    if get_streams is not None:
        sdk_endpoint = LegacyRoute(sdk_endpoint, get_streams, manager)
    mcp_endpoint = BearerGate(sdk_endpoint, anonymous=instance.config.anonymous, on_reject=reject)
    surface_routes: list[BaseRoute] = []
    for surface in discover() if surfaces is None else surfaces:
        host = host_for(instance, surface.name, principal_of=principal_of_request, watch=feed.watch)

        def gate(app: ASGIApp, name: str = surface.name) -> ASGIApp:
            def refused(path: str, reason: str) -> None:
                instance.dispatcher.rejected(name, path, reason)

            return BearerGate(app, anonymous=instance.config.anonymous, problem=True, on_reject=refused)

        surface_routes.append(SurfaceRoute(surface, host, gate, current))
    if instance.config.ui_assets is not None:  # the docs pages' scripts and styles, for offline use
        surface_routes.append(Mount(UI_ASSETS, app=StaticFiles(directory=instance.config.ui_assets)))
    app = Starlette(
        routes=[Route("/mcp", endpoint=mcp_endpoint), Route("/healthz", healthz), *surface_routes],
        middleware=[
            Middleware(ProblemAnswers),
            Middleware(Admission, allowed=allowed_for(config.host), max_body=config.max_body_bytes),
            *auth_middleware(instance.tokens),
        ],
        exception_handlers={500: internal_error},
        lifespan=lifespan,
    )
    app.state.fanout = fanout
    app.state.listen = streams
    app.state.legacy = get_streams
    app.state.instance = instance
    return app
