"""The HTTP app: one ASGI application on one port, serving every surface and knowing none.

Routes: `/healthz`, and every path a discovered surface claims (`core.surfaces`: MCP at `/mcp`, a built-in
plugin in `core.mcp.surface`; REST, GraphQL, llms.txt in `generators/`), each served by that surface's app for the
current registry, or, for a surface with a lifespan, by the app its lifespan yields. Outside every route the
middleware list applies one rule each: `core.http.problems` makes every error answer an RFC 9457 problem
(JSON-RPC errors stay on `/mcp`), `core.http.admission` checks Host (421) and Origin (403) and bounds the request
body (413), and `core.http.auth` identifies the caller by bearer token; around every surface `BearerGate`
refuses a bad token with 401.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Match, Mount, NoMatchFound, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from core.http.admission import Admission, allowed_for
from core.http.auth import Authenticate, BearerGate, principal_of_request
from core.http.problems import ProblemAnswers, internal_error
from core.instance import Instance
from core.mcp.events import EventFanout
from core.registry import Registry
from core.surfaces import Lifespan, Running, Surface, SurfaceHost, audit_name_of, claims, discover

__all__ = ["UI_ASSETS", "build_app", "close_streams"]

UI_ASSETS = "/ui-assets"


class SurfaceRoute(BaseRoute):
    """Every path one surface claims, behind `BearerGate`: served by the app its lifespan yielded (`running`), or
    else by its app for the current registry (rebuilt when that changes).

    The scope passes through unchanged, so a surface sees full request paths.
    """

    def __init__(self, surface: Surface, host: SurfaceHost, *, anonymous: bool) -> None:
        self.surface = surface
        self.host = host
        self.anonymous = anonymous
        self.running: Running | None = None
        self._served: ASGIApp | None = None  # `running.app` behind the gate
        self._built: tuple[Registry, ASGIApp] | None = None

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] in ("http", "websocket") and any(claims(p, scope["path"]) for p in self.surface.paths):
            return Match.FULL, {}
        return Match.NONE, {}

    def run(self, running: Running) -> None:
        self.running, self._served = running, self.gate(running.app)

    def gate(self, app: ASGIApp) -> ASGIApp:
        name, dispatcher = self.host.surface_name, self.host.dispatcher
        return BearerGate(app, anonymous=self.anonymous,
                          on_reject=lambda path, reason: dispatcher.rejected(name, path, reason))  # fmt: skip

    def current(self) -> ASGIApp:
        if self._served is not None:
            return self._served
        registry = self.host.registry
        if self._built is None or self._built[0] is not registry:
            self._built = (registry, self.gate(self.surface.app(self.host, registry)))  # pyright: ignore[reportArgumentType]
        return self._built[1]

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.current()(scope, receive, send)

    def url_path_for(self, name: str, /, **path_params: Any) -> Any:
        raise NoMatchFound(name, path_params)


def close_streams(app: Starlette) -> None:
    """End the long-lived responses of every running surface (change streams), each as its protocol ends them,
    so that a shutdown waiting for responses in flight can go on."""
    for route in app.state.surfaces:
        if route.running is not None:
            route.running.close()


def _change_feed(instance: Instance) -> EventFanout:
    """The change fan-out every surface watches (until the feed moves to `core/changes.py`: MCP's)."""
    assert instance.index is not None
    return EventFanout(instance.index, on_model_change=instance.reload_model)


def build_app(instance: Instance, surfaces: list[Surface] | None = None) -> Starlette:
    """The ASGI app serving `instance` on every surface in `surfaces` (default: every installed one,
    `core.surfaces.discover`). Its lifespan runs the change pump and each surface's own lifespan.

    Callers are identified by bearer token (`core.http.auth`); without one they are anonymous.
    `close_streams(app)` ends the surfaces' long-lived responses gracefully.
    """
    config = instance.config
    fanout = _change_feed(instance)
    routes = [
        SurfaceRoute(
            surface,
            SurfaceHost(instance, principal_of_request, fanout.watch, audit_name_of(surface), fanout),
            anonymous=config.anonymous,
        )
        for surface in (discover() if surfaces is None else surfaces)
    ]

    async def healthz(request: Request) -> JSONResponse:
        health: dict[str, Any] = {"status": "ok", "revision": instance.store.revision(), "model": instance.model.name}
        for route in routes:
            health.update(route.running.health if route.running is not None else {})
        return JSONResponse({**health, "surfaces": [r.surface.name for r in routes]})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncGenerator[None]:
        async with contextlib.AsyncExitStack() as running:
            for route in routes:
                if isinstance(route.surface, Lifespan):
                    route.run(await running.enter_async_context(route.surface.lifespan(route.host)))
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(fanout.pump)
                yield
                close_streams(app)
                tasks.cancel_scope.cancel()

    extra: list[BaseRoute] = []
    if config.ui_assets is not None:  # the docs pages' scripts and styles, for offline use
        extra.append(Mount(UI_ASSETS, app=StaticFiles(directory=config.ui_assets)))
    app = Starlette(
        routes=[Route("/healthz", healthz), *routes, *extra],
        middleware=[
            Middleware(ProblemAnswers),
            Middleware(Admission, allowed=allowed_for(config.host), max_body=config.max_body_bytes),
            Middleware(Authenticate, tokens=instance.tokens),
        ],
        exception_handlers={500: internal_error},
        lifespan=lifespan,
    )
    app.state.surfaces = routes
    app.state.fanout = fanout
    app.state.instance = instance
    return app
