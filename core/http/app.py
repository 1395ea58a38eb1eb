"""The HTTP app: one ASGI application on one port, serving every surface and knowing none.

Routes: `/healthz`, `/metrics` (`core.http.metrics`, with the gauges each running surface reports), `/`, and every path
a discovered surface claims (`core.seam.surfaces`: MCP at `/mcp`, a built-in plugin in `core.mcp.plugin`; REST,
GraphQL,
llms.txt in `generators/`), each served by that surface's app for the current registry, or, for a surface with a
lifespan, by the app its lifespan yields. Outside every route the middleware list applies one rule each:
`core.web.problems` makes every error answer an RFC 9457 problem (JSON-RPC errors stay on `/mcp`),
`core.http.admission` checks Host (421) and Origin (403) and bounds the request body (413), `core.http.cors` answers the
browser-facing surfaces' CORS, and `core.http.auth` identifies the caller by bearer token; around every surface
`BearerGate` refuses a bad token with 401. With `[oauth]`, a token that is not canon's may be an issuer's JWT
(`core.http.oauth`), and RFC 9728 metadata is served at `/.well-known/oauth-protected-resource`; with `[oauth]
client_id`, browsers sign in at `/signin` and are served with a session cookie (`core.http.signin`). With `[logging]
access_log`, `core.http.access` logs every request. Outermost of all, `[server] trusted_proxies` lets
`core.http.forwarded` believe a proxy's `X-Forwarded-*` headers, and `[server] root_path` serves everything under a
prefix (`core.http.prefix`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Match, Mount, NoMatchFound, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from core import __version__
from core.http.access import AccessLog
from core.http.admission import Admission, Allowed, allowed_for
from core.http.auth import Authenticate, BearerGate, authenticators
from core.http.cors import Cors
from core.http.forwarded import TrustedProxies
from core.http.landing import landing_endpoint
from core.http.metrics import add_gauges, metrics_route
from core.http.oauth import JwtVerifier, metadata_path
from core.http.prefix import RootPath
from core.http.signin import SignIn
from core.http.ui_assets import BUNDLED
from core.ops.config import Config
from core.seam.changes import ChangeFeed
from core.seam.instance import Instance
from core.seam.snapshot import PerSnapshot, Snapshot
from core.seam.surfaces import (
    Gauge,
    Lifespan,
    Running,
    Surface,
    SurfaceHost,
    audit_name_of,
    claims,
    discover,
    host_for,
    page_shell_of,
    principal_of_request,
    serves_browsers,
)
from core.web.problems import ProblemAnswers, internal_error

__all__ = ["UI_ASSETS", "build_app", "close_streams"]

UI_ASSETS = "/ui-assets"
GZIP_MIN_BYTES = 1024  # smaller answers gain too little to pay for the compression


class SurfaceRoute(BaseRoute):
    """Every path one surface claims, behind `BearerGate`: served by the app its lifespan yielded (`running`), or
    else by its app for the current snapshot (built again, on the host bound to a new snapshot, when the model
    changes: a request finishes on the app, so the model, it started with).

    The scope passes through unchanged, so a surface sees full request paths.
    """

    def __init__(self, surface: Surface, host: SurfaceHost, current: Callable[[], Snapshot], *,
                 anonymous: bool, oauth: JwtVerifier | None = None, signs_in: bool = False,
                 public_url: str | None = None) -> None:  # fmt: skip
        self.surface = surface
        self.signs_in = signs_in  # browsers sign in: a page asked for without credentials sends them there
        self.public_url = public_url
        self.host = host
        self.snapshot = current
        self.anonymous = anonymous
        self.oauth = oauth  # the OAuth issuer's rule, whose challenge a refusal carries
        self.running: Running | None = None
        self._served: ASGIApp | None = None  # `running.app` behind the gate
        self._built = PerSnapshot(self._build)

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] in ("http", "websocket") and any(claims(p, scope["path"]) for p in self.surface.paths):
            return Match.FULL, {}
        return Match.NONE, {}

    def run(self, running: Running) -> None:
        self.running, self._served = running, self.gate(running.app)

    def gate(self, app: ASGIApp) -> ASGIApp:
        host, current = self.host, self.snapshot

        def refused(path: str, reason: str) -> None:
            host.at(current()).rejected(path, reason)

        return BearerGate(app, anonymous=self.anonymous, on_reject=refused, oauth=self.oauth,
                          shell=page_shell_of(self.surface), signs_in=self.signs_in,
                          public_url=self.public_url)  # fmt: skip

    def current(self) -> ASGIApp:
        if self._served is not None:
            return self._served
        return self._built(self.snapshot())

    def _build(self, snapshot: Snapshot) -> ASGIApp:
        return self.gate(self.surface.app(self.host.at(snapshot), snapshot.registry))  # pyright: ignore[reportArgumentType]

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


def resource_metadata(oauth: JwtVerifier) -> Callable[[Request], Awaitable[JSONResponse]]:
    """The route answering RFC 9728 Protected Resource Metadata (public: a client reads it before it has a token)."""
    document = oauth.resource_metadata()

    async def answer(request: Request) -> JSONResponse:
        return JSONResponse(document, headers={"Cache-Control": "public, max-age=3600"})

    return answer


def _network_layers(config: Config) -> list[Middleware]:
    """Outermost, in this order: the client, scheme and host a trusted proxy names; then the path prefix."""
    layers: list[Middleware] = []
    if config.trusted_proxies:
        layers.append(Middleware(TrustedProxies, proxies=config.trusted_proxies))
    if config.root_path:
        layers.append(Middleware(RootPath, prefix=config.root_path))
    return layers


def _allowed(config: Config) -> Allowed:
    return allowed_for(config.host, hosts=config.allowed_hosts, origins=config.allowed_origins,
                       public_url=config.public_url)  # fmt: skip


def _browser_paths(surfaces: list[Surface]) -> Callable[[str], bool]:
    """Whether a request path belongs to a surface that serves browsers on other origins (`serves_browsers`)."""
    paths = tuple(p for s in surfaces if serves_browsers(s) for p in s.paths)

    def serves(path: str) -> bool:
        return any(claims(p, path) for p in paths)

    return serves


def build_app(instance: Instance, surfaces: list[Surface] | None = None) -> Starlette:
    """The ASGI app serving `instance` on every surface in `surfaces` (default: every installed one,
    `core.seam.surfaces.discover`). Its lifespan runs the change pump and each surface's own lifespan.

    Callers are identified by bearer token (`core.http.auth`); without one they are anonymous.
    `close_streams(app)` ends the surfaces' long-lived responses gracefully.
    """
    assert instance.index is not None
    config = instance.config
    feed = ChangeFeed(instance.index, on_model_change=instance.reload_model)
    installed = discover() if surfaces is None else surfaces
    chain = authenticators(config, instance.tokens)  # the `canon.authenticators` in force (core.http.auth)
    oauth = chain.oauth  # the issuer's rule, if configured: its metadata, challenges and browsers' sign-in too
    authenticate = chain.blocking  # a token sent in a message (GraphQL's connection_init) is checked the same way

    def current() -> Snapshot:
        return instance.snapshot

    def host_of(surface: Surface) -> SurfaceHost:
        return host_for(instance, audit_name_of(surface), principal_of=principal_of_request, watch=feed.watch,
                        feed=feed, authenticate=authenticate)  # fmt: skip

    def http_rejected(path: str, why: str) -> None:
        instance.dispatcher.rejected("http", path, why)

    # a browser's sign-in with the issuer, and its session cookie (core.http.signin)
    sign_in = None
    if oauth is not None and oauth.settings.signs_in:
        sign_in = SignIn(oauth, public_url=config.public_url, on_reject=http_rejected)
    routes = [SurfaceRoute(s, host_of(s), current, anonymous=config.anonymous, oauth=oauth,
                           signs_in=sign_in is not None, public_url=config.public_url) for s in installed]  # fmt: skip

    async def healthz(request: Request) -> JSONResponse:
        model = instance.model
        health: dict[str, Any] = {"status": "ok", "revision": instance.store.revision(), "model": model.name,
                                  "modelVersion": model.version, "version": __version__}  # fmt: skip
        for route in routes:
            health.update(route.running.health if route.running is not None else {})
        return JSONResponse({**health, "surfaces": [r.surface.name for r in routes]})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncGenerator[None]:
        async with contextlib.AsyncExitStack() as running:
            for route in routes:
                if isinstance(route.surface, Lifespan):
                    route.run(await running.enter_async_context(route.surface.lifespan(route.host)))
                    add_gauges(instance, route.running.gauges if route.running is not None else ())
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(feed.pump)
                yield
                close_streams(app)
                tasks.cancel_scope.cancel()

    assets = BUNDLED if config.ui_assets is None else config.ui_assets  # the docs pages' scripts and styles
    landing = landing_endpoint(lambda: instance.model, installed, anonymous=config.anonymous,
                               public_url=config.public_url, issuer=None if oauth is None else oauth.settings.issuer,
                               static_tokens=instance.tokens.any, signs_in=sign_in is not None)  # fmt: skip
    # RFC 9728: where clients learn which issuer to get canon's tokens from
    metadata = [] if oauth is None else [Route(metadata_path(oauth.settings.resource), resource_metadata(oauth))]
    watches = Gauge("canon_change_watches", "Open watches of the change feed: GraphQL subscriptions.", feed.watchers)
    metrics = metrics_route(instance, [watches], on_reject=http_rejected)
    app = Starlette(
        routes=[
            Route("/healthz", healthz),
            *([metrics] if metrics is not None else []),
            Route("/", landing),
            *([] if sign_in is None else sign_in.routes()),
            *routes,
            Mount(UI_ASSETS, app=StaticFiles(directory=assets)),
            *metadata,
        ],
        middleware=[
            *_network_layers(config),
            *([Middleware(AccessLog)] if config.access_log else []),
            # text answers compressed when the client asks (llms-full.txt: 265 KB); never an event stream, whose
            # events must reach the client as they happen (Starlette excludes text/event-stream), nor a WebSocket
            Middleware(GZipMiddleware, minimum_size=GZIP_MIN_BYTES),
            Middleware(ProblemAnswers),
            Middleware(Admission, allowed=_allowed(config), max_body=config.max_body_bytes),
            Middleware(Cors, serves_browsers=_browser_paths(installed)),
            Middleware(
                Authenticate,
                authenticators=chain,
                sign_in=sign_in,
                on_reject=http_rejected,
                public_url=config.public_url,
            ),
        ],
        exception_handlers={500: internal_error},
        lifespan=lifespan,
    )
    app.state.surfaces = routes
    app.state.sign_in = sign_in
    app.state.feed = feed
    app.state.instance = instance
    return app
