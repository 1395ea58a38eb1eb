"""MCP over Streamable HTTP at `/mcp`: a built-in surface on the host's `core.seam.surfaces.Surface` protocol.

It is registered in `pyproject.toml`'s `canon.surfaces` entry-point group next to REST, GraphQL and llms.txt
(built-ins are plugins), so the HTTP host (`core.http`) knows no surface. Both protocol revisions are served:
2026-07-28 requests statelessly, their `subscriptions/listen` streams and `tools/call` answers by canon itself
(`core.mcp.fastpath`), the rest by the SDK; 2025-11-25 clients get sessions, a GET stream (canon's,
`core.mcp.fastpath.legacy_streams`) and `Last-Event-ID` resumption.

The endpoint is a chain declared as data (`mcp_chain`), outermost first, as Starlette declares middleware:
`SdkUser` (the caller in the SDK's auth type, for its session ownership), canon's own routes (`fast_routes`:
each takes what it answers and hands everything else on untouched), `RevisionGate`, then the SDK's endpoint.
The host's `Admission` (Host/Origin, body limit) and `BearerGate` stand outside it.

Its `lifespan` runs the SDK's session manager and the keep-alives of canon's streams; `close` ends those streams
as each protocol ends them (a listen stream with its result, a GET stream as its session's end does).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from core.dispatch.registry import Registry
from core.mcp.events import EventFanout
from core.mcp.fastpath.calls import CallRoute
from core.mcp.fastpath.legacy_streams import DEFAULT_LEGACY_LIMITS, LegacyLimits, LegacyRoute, LegacyStreams
from core.mcp.fastpath.listen import ListenRoute
from core.mcp.fastpath.listen_streams import DEFAULT_LIMITS, ListenLimits, ListenStreams
from core.mcp.fastpath.sdk_compat import fastpath, open_sessions, session_manager
from core.mcp.revision_gate import RevisionGate
from core.mcp.revisions import SUPPORTED_VERSIONS
from core.mcp.server import DEFAULT_OPTIONS, CanonServer, ServeOptions, build_server
from core.seam.surfaces import Gauge, Running, SurfaceHost, principal_of_request, principal_of_scope
from core.values.principal import Principal

__all__ = ["SURFACE", "McpEndpoint", "McpSurface", "SdkUser", "fast_routes", "mcp_chain", "surface"]

SURFACE = "mcp-http"  # what the audit log records as the surface
CHECKED_OUTSIDE = TransportSecuritySettings(enable_dns_rebinding_protection=False)
"""The SDK's own Host/Origin check is off: the host's `core.http.admission` applies the one rule to every route."""

Wrap = Callable[[ASGIApp], ASGIApp]


class SdkUser:
    """Hand the SDK the caller in its own auth type (`scope["user"]`), for what it keys on the caller: a 2025-11-25
    session is served only to the principal that opened it. Anonymous callers are no user, as before."""

    MAX_CACHED = 1024

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._users: dict[Principal, AuthenticatedUser] = {}  # made once per principal: building one costs more

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        principal = principal_of_scope(scope)
        if principal.authenticated:
            scope["user"] = self.user_of(principal)
        await self.app(scope, receive, send)

    def user_of(self, principal: Principal) -> AuthenticatedUser:
        user = self._users.get(principal)
        if user is None:
            if len(self._users) >= self.MAX_CACHED:
                self._users.clear()
            name, groups = principal.name, sorted(principal.groups)
            token = AccessToken(token=name, client_id=name, subject=name, scopes=sorted(principal.roles),
                                claims={"groups": groups})  # fmt: skip
            user = self._users[principal] = AuthenticatedUser(token)
        return user


@dataclasses.dataclass(frozen=True)
class McpEndpoint:
    """The parts one served `/mcp` is made of (its streams are None where the SDK serves them)."""

    server: CanonServer
    manager: StreamableHTTPSessionManager
    fanout: EventFanout
    listen: ListenStreams | None
    legacy: LegacyStreams | None
    app: ASGIApp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)

    def gauges(self) -> tuple[Gauge, ...]:
        """What it holds open, for `/metrics`: sessions, and the streams canon serves (0 where the SDK serves them)."""
        listen, legacy, manager = self.listen, self.legacy, self.manager
        return (
            Gauge("canon_mcp_sessions", "Open MCP 2025-11-25 sessions.", lambda: open_sessions(manager)),
            Gauge("canon_mcp_listen_streams", "Open MCP 2026-07-28 subscriptions/listen streams (served by canon).",
                  lambda: listen.count if listen is not None else 0),
            Gauge("canon_mcp_get_streams", "Open MCP 2025-11-25 GET streams (served by canon).",
                  lambda: legacy.count if legacy is not None else 0),
        )  # fmt: skip

    def close(self) -> None:
        """End every change stream canon serves, each as its protocol ends it."""
        for streams in (self.listen, self.legacy):
            if streams is not None:
                streams.close()


def fast_routes(endpoint: McpEndpoint, *, calls: bool, listen: ListenStreams | None,
                legacy: LegacyStreams | None) -> list[Wrap]:  # fmt: skip
    """canon's own answers in front of the SDK, outermost first: the 2025-11-25 GET streams (`legacy`), 2026-07-28
    `tools/call` (`calls`) and `subscriptions/listen` (`listen`). None or False leaves that part to the SDK."""
    server, manager = endpoint.server, endpoint.manager
    routes: list[Wrap] = []
    if legacy is not None:
        routes.append(lambda app: LegacyRoute(app, legacy, manager))
    if calls:
        routes.append(lambda app: CallRoute(app, server.calls, server_info=server.server_info_stamp))
    if listen is not None:
        current = server.calls.current
        routes.append(lambda app: ListenRoute(app, listen, current=current, surface=SURFACE))
    return routes


def stack(wraps: Sequence[Wrap], app: ASGIApp) -> ASGIApp:
    """`app` inside `wraps`, the first outermost (as Starlette's middleware list)."""
    for wrap in reversed(wraps):
        app = wrap(app)
    return app


def mcp_chain(endpoint: McpEndpoint, routes: Sequence[Wrap]) -> list[Wrap]:
    """What a request to `/mcp` passes through before the SDK's endpoint, outermost first."""
    manager = endpoint.manager
    gate: Wrap = lambda app: RevisionGate(app, security=manager.security_settings)  # noqa: E731
    return [SdkUser, *routes, gate]


class McpSurface:
    """`/mcp`, both revisions. The parameters choose which parts canon serves itself rather than the SDK (its
    tests compare both): `calls` the 2026-07-28 `tools/call` answers, `listen` the 2026-07-28 listen streams,
    `legacy` the 2025-11-25 GET streams (None, or `listen` None, leaves them to the SDK). Left at their defaults,
    the streams take their bounds from the configuration (`[server] max_streams` and `stream_backlog`)."""

    name: str = "mcp"
    audit_name: str = SURFACE
    paths: tuple[str, ...] = ("/mcp",)

    def __init__(self, options: ServeOptions = DEFAULT_OPTIONS, *, listen: ListenLimits | None = DEFAULT_LIMITS,
                 calls: bool = True, legacy: LegacyLimits | None = DEFAULT_LEGACY_LIMITS) -> None:  # fmt: skip
        self.options = options
        self.listen = listen
        self.calls = calls
        self.legacy = legacy

    def app(self, host: SurfaceHost, registry: Registry) -> ASGIApp:
        raise RuntimeError("/mcp is served by the MCP surface's lifespan, for every registry")

    def artifacts(self, host: SurfaceHost) -> Mapping[str, str]:
        return {}

    def endpoint(self, host: SurfaceHost) -> McpEndpoint:
        """The served `/mcp` for `host`, its streams not yet running. With `[server] mcp_fastpath = false`, or an
        SDK other than the bypass expects (`core.mcp.fastpath.sdk_compat.fastpath`), the SDK serves all of it."""
        if host.feed is None or host.current is None:
            raise TypeError("the MCP surface needs the host's change feed and current snapshot")
        settings, current = host.settings, host.current
        fanout = EventFanout(host.feed)
        listen, calls, legacy = self.listen, self.calls, self.legacy
        if not fastpath(settings.mcp_fastpath):  # switched off, or the SDK not as the bypass expects
            listen, calls, legacy = None, False, None
        if listen is DEFAULT_LIMITS:  # left as it is: the configured bounds
            listen = dataclasses.replace(DEFAULT_LIMITS, max_streams=settings.max_streams,
                                         max_backlog=settings.stream_backlog)  # fmt: skip
        if legacy is DEFAULT_LEGACY_LIMITS:
            legacy = dataclasses.replace(DEFAULT_LEGACY_LIMITS, max_streams=settings.max_streams,
                                         max_backlog=settings.stream_backlog)  # fmt: skip

        def principal_of(ctx: ServerRequestContext[Any]) -> Principal:
            return principal_of_request(ctx.request)

        server = build_server(current, fanout, principal_of, self.options, surface=SURFACE)
        manager = session_manager(app=server, json_response=True, stateless=False, security_settings=CHECKED_OUTSIDE,
                                  max_request_body_size=settings.max_body_bytes)  # fmt: skip
        streams = None if listen is None else ListenStreams(server.server_info_stamp, listen)
        get_streams = None if streams is None or legacy is None else LegacyStreams(legacy)
        if streams is not None:
            fanout.add_sink(streams.deliver)
        if get_streams is not None:
            fanout.tell_legacy_through(get_streams)
        parts = McpEndpoint(server, manager, fanout, streams, get_streams, StreamableHTTPASGIApp(manager))
        routes = fast_routes(parts, calls=calls, listen=streams, legacy=get_streams)
        return dataclasses.replace(parts, app=stack(mcp_chain(parts, routes), parts.app))

    @contextlib.asynccontextmanager
    async def lifespan(self, host: SurfaceHost) -> AsyncGenerator[Running]:
        endpoint = self.endpoint(host)
        async with endpoint.manager.run(), anyio.create_task_group() as tasks:
            for streams in (endpoint.listen, endpoint.legacy):
                if streams is not None:
                    tasks.start_soon(streams.keepalive)
            yield Running(endpoint, close=endpoint.close, health={"protocolVersions": SUPPORTED_VERSIONS},
                          gauges=endpoint.gauges())  # fmt: skip
            endpoint.close()
            tasks.cancel_scope.cancel()


surface = McpSurface()
