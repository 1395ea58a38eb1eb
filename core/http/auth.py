"""Who an HTTP caller is: bearer tokens through the SDK's token-verifier seam, for every HTTP surface.

The stack, outermost first: Starlette's `AuthenticationMiddleware` with the SDK's `BearerAuthBackend` over
`CanonTokenVerifier` (which asks `core.tokens.TokenFile`), the SDK's `AuthContextMiddleware`, then
`BearerGate`, which turns the outcome into a rule:

* a current token → that token's principal;
* an `Authorization` header that is not a current bearer token (wrong, revoked, malformed) → 401 with
  `WWW-Authenticate: Bearer error="invalid_token"`, audited as `rejected`; never a silent downgrade to
  anonymous, so a client with a stale token finds out;
* no `Authorization` header → the anonymous principal (read-only, public nodes only), or 401 when the
  configuration turns anonymous access off.

`principal_of_request` gives the principal of a request that passed the gate; surfaces call it, never
look at client-supplied identity.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend
from mcp.server.auth.provider import AccessToken
from pydantic import PrivateAttr
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from core.http.problems import PROBLEM_MEDIA, problem_body
from core.principal import ANONYMOUS, Principal
from core.tokens import TokenFile

__all__ = [
    "BearerGate",
    "CanonAccessToken",
    "CanonTokenVerifier",
    "auth_middleware",
    "principal_of_request",
    "principal_of_scope",
]


class CanonAccessToken(AccessToken):
    """The SDK's access token, carrying the principal canon verified it as."""

    _principal: Principal = PrivateAttr()


class CanonTokenVerifier:
    """The SDK's `TokenVerifier` protocol over canon's token file.

    Every request asks the token file (so a revoked token is refused from the next request on); the access token
    handed to the SDK is made once per token and principal and then reused, as building it cost more than the
    check itself. At most `MAX_CACHED` are kept.
    """

    MAX_CACHED = 1024

    def __init__(self, tokens: TokenFile) -> None:
        self.tokens = tokens
        self._made: dict[str, CanonAccessToken] = {}

    async def verify_token(self, token: str) -> AccessToken | None:
        principal = self.tokens.verify(token)
        if principal is None:
            self._made.pop(token, None)
            return None
        made = self._made.get(token)
        if made is None or made._principal != principal:  # pyright: ignore[reportPrivateUsage]
            if len(self._made) >= self.MAX_CACHED:
                self._made.clear()
            groups = {"groups": sorted(principal.groups)}
            made = CanonAccessToken(token=token, client_id=principal.name, subject=principal.name,
                                    scopes=sorted(principal.roles), claims=groups)  # fmt: skip
            made._principal = principal  # pyright: ignore[reportPrivateUsage]
            self._made[token] = made
        return made


def auth_middleware(tokens: TokenFile) -> list[Middleware]:
    return [
        Middleware(AuthenticationMiddleware, backend=BearerAuthBackend(CanonTokenVerifier(tokens))),
        Middleware(AuthContextMiddleware),
    ]


def principal_of_scope(scope: Scope) -> Principal:
    user = scope.get("user")
    if isinstance(user, AuthenticatedUser):
        token = user.access_token
        if isinstance(token, CanonAccessToken):
            return token._principal  # pyright: ignore[reportPrivateUsage]
        groups = (token.claims or {}).get("groups", ())
        return Principal(token.client_id, frozenset(token.scopes), frozenset(groups))
    return ANONYMOUS


def principal_of_request(request: Any) -> Principal:
    """The principal of a Starlette request that passed `BearerGate` (None: no HTTP request, i.e. anonymous)."""
    return principal_of_scope(request.scope) if request is not None else ANONYMOUS


class BearerGate:
    """Refuse a request whose bearer token is not current (401), and, optionally, one without a token."""

    def __init__(self, app: ASGIApp, *, anonymous: bool, on_reject: Callable[[str, str], None],
                 problem: bool = False) -> None:  # fmt: skip
        self.app = app
        self.anonymous = anonymous
        self.on_reject = on_reject  # (path, reason), for the audit log
        self.problem = problem  # answer as RFC 9457 problem+json (the generated surfaces) besides RFC 6750

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or isinstance(scope.get("user"), AuthenticatedUser):
            await self.app(scope, receive, send)
            return
        presented = any(name.lower() == b"authorization" for name, _ in scope["headers"])
        if scope["type"] == "websocket":  # browsers cannot send the header: a surface may accept a token later
            if presented:  # but one that was sent and is not current is refused here, as on HTTP
                self.on_reject(scope.get("path", ""), "invalid token")
                await send({"type": "websocket.close", "code": 4401, "reason": "invalid bearer token"})
                return
            await self.app(scope, receive, send)
            return
        if not presented and self.anonymous:
            await self.app(scope, receive, send)
            return
        reason = "invalid token" if presented else "no token"
        error, description = _REJECTIONS[reason]
        self.on_reject(scope.get("path", ""), reason)
        payload: dict[str, Any] = {"error": error, "error_description": description}
        content_type = b"application/json"
        body = json.dumps(payload).encode()
        if self.problem:
            body = problem_body(401, "unauthorized", description, scope.get("path", ""), extra=payload)
            content_type = PROBLEM_MEDIA.encode()
        challenge = f'Bearer error="{error}", error_description="{description}"'
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", content_type), (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", challenge.encode())]})  # fmt: skip
        await send({"type": "http.response.body", "body": body})


_REJECTIONS = {  # reason -> RFC 6750 error code and description
    "invalid token": ("invalid_token", "The bearer token is not valid (unknown, revoked or malformed)."),
    "no token": ("invalid_request", "A bearer token is required."),
}
