"""The HTTP and WebSocket app of the GraphQL surface (`generators.graphql.schema`), around a built schema.

`/graphql` answers POST and GET queries, shows GraphiQL to a browser's GET (`generators.graphql.ide`: opened on a
query for this model, a page shell served without a token; its CDN scripts pointed at the host's `/ui-assets/`,
see `local_assets`) and carries subscriptions over WebSocket with the
graphql-transport-ws protocol; the caller is canon's principal, from the `Authorization` header or, on a
WebSocket, from `connection_init`. `/schema.graphql` answers the printed SDL.

A request GraphQL cannot even read (a body that is not JSON, or not an object, or JSON nested past what Python can
decode; a subscription over POST or GET; an operation name the document lacks) is answered with its HTTP status
(400) and a GraphQL error body: `{"errors": [{"message": ..., "extensions": {"code": "BAD_REQUEST"}}]}`.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import anyio
import strawberry
from cross_web import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.exceptions import ConnectionRejectionError
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL
from strawberry.types.unset import UNSET, UnsetType

from core.seam.surfaces import ASGIApp
from core.values.documents import parse_json
from generators.graphql.bounds import MAX_SUBSCRIPTIONS_PER_CONNECTION
from generators.graphql.ide import ide_page, shows_ide
from generators.graphql.runtime import Runtime

__all__ = ["CanonGraphQL", "asgi_app", "local_assets"]

UI_ASSETS = "/ui-assets/"
ASSET_URL = re.compile(
    r'(?P<attr>\b(?:src|href)=")https://[^/"]+/(?:[^"@]*/)?(?P<path>(?:@[\w.-]+/)?[\w.-]+@[^/"]+/[^"]*)"'
)


def local_assets(html: str, base_url: str = "") -> str:
    """Point a page's CDN scripts and styles (`https://<host>/[npm/]<package>@<version>/<file>`) at
    `<base_url>/ui-assets/<package>@<version>/<file>`; the files are the same, so `integrity` attributes stay
    valid."""
    return ASSET_URL.sub(lambda m: f'{m["attr"]}{base_url}{UI_ASSETS}{m["path"]}"', html)


class CanonGraphQL(GraphQL[dict[str, Any], None]):
    """strawberry's ASGI view, with canon's caller on every request and WebSocket connection."""

    def __init__(self, schema: strawberry.Schema, runtime: Runtime, surface: str) -> None:
        super().__init__(schema, subscription_protocols=(GRAPHQL_TRANSPORT_WS_PROTOCOL,),
                         max_subscriptions_per_connection=MAX_SUBSCRIPTIONS_PER_CONNECTION,
                         connection_init_wait_timeout=timedelta(seconds=30))  # fmt: skip
        self.runtime = runtime
        self.host = runtime.host
        self.surface = surface
        self._page: str | None = None  # GraphiQL's page, made at its first request

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        try:
            response = await self.run(Request(scope=scope, receive=receive))
        except HTTPException as e:
            code = {405: "METHOD_NOT_ALLOWED", 404: "NOT_FOUND"}.get(e.status_code, "BAD_REQUEST")
            response = JSONResponse({"errors": [{"message": e.reason, "extensions": {"code": code}}]}, e.status_code)
        await response(scope, receive, send)

    def decode_json(self, data: str | bytes) -> object:
        """Request bodies, `variables` and WebSocket messages, parsed as canon parses all JSON (no NaN, no nesting
        past the recursion limit: either is undecodable JSON like any other, on HTTP and WebSocket)."""
        return parse_json(data)

    def parse_json(self, data: str | bytes) -> Any:
        """A request body (or its `variables` or `extensions` parameter) as an object, or a request error."""
        try:
            value = self.decode_json(data)
        except json.JSONDecodeError as e:
            raise HTTPException(400, f"The request is not JSON: {e.msg}.") from None
        if not isinstance(value, dict | list):
            kind = "a string" if isinstance(value, str) else "null" if value is None else "a boolean or a number"
            raise HTTPException(400, f"A GraphQL request is a JSON object, not {kind}.")
        return value

    async def get_context(self, request: Request | WebSocket, response: Response | WebSocket) -> dict[str, Any]:
        principal = self.host.principal_of(request)
        presented = any(k.lower() == b"authorization" for k, _ in request.scope.get("headers", ()))
        return self.runtime.context(request=request, response=response, principal=principal,
                                    bad_token=presented and not principal.authenticated)  # fmt: skip

    async def on_ws_connect(self, context: dict[str, Any]) -> UnsetType | dict[str, object] | None:
        """`connection_init` may carry `{"Authorization": "Bearer <token>"}` (browsers cannot send the header)."""
        params: Any = context.get("connection_params") or {}
        given = next((v for k, v in params.items() if str(k).lower() == "authorization"), None)
        if context["bad_token"]:
            self._reject("invalid token")
        if given is not None:
            token = (
                given.removeprefix("Bearer ").strip() if isinstance(given, str) and given.startswith("Bearer ") else ""
            )
            principal = await anyio.to_thread.run_sync(self.host.authenticate, token) if token else None
            if principal is None:
                self._reject("invalid token")
            context["principal"] = principal
        elif not context["principal"].authenticated and not self.host.settings.anonymous:
            self._reject("no token")
        return UNSET

    def _reject(self, reason: str) -> None:
        self.host.rejected("/graphql", reason)
        raise ConnectionRejectionError({"reason": reason})

    def should_render_graphql_ide(self, request: Any) -> bool:
        """The one rule (`shows_ide`) by which the host also lets the page in without a token."""
        return shows_ide(request.method, request.query_params.get("query"), request.headers.get("accept", ""))

    async def render_graphql_ide(self, request: Request) -> HTMLResponse:
        if self._page is None:
            self._page = local_assets(ide_page(self.graphql_ide_html, self.host.registry), self.host.settings.base_url)
        return HTMLResponse(self._page)


def asgi_app(schema: strawberry.Schema, runtime: Runtime, surface: str) -> ASGIApp:
    """The ASGI app serving `schema` at `/graphql` and its SDL at `/schema.graphql`, as the surface `surface`,
    resolving through `runtime` (its host's)."""
    view = CanonGraphQL(schema, runtime, surface)
    sdl = schema.as_str() + "\n"

    async def serve(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/schema.graphql":
            if scope["method"] in ("GET", "HEAD"):
                response = PlainTextResponse(sdl)
            else:
                response = PlainTextResponse("Method Not Allowed", 405, headers={"Allow": "GET, HEAD"})
            await response(scope, receive, send)
            return
        if scope["type"] == "http" and scope["method"] not in ("GET", "POST"):  # strawberry's 405 names no Allow
            response = PlainTextResponse("GraphQL is served over GET and POST.", 405, headers={"Allow": "GET, POST"})
            await response(scope, receive, send)
            return
        await view(scope, receive, send)

    return serve
