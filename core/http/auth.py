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

With `[oauth]` configured, a bearer token that is not one of canon's is tried as the issuer's JWT
(`core.http.oauth.JwtVerifier`): a valid one is its principal, any other is refused as above (403
`insufficient_scope` for a valid token granting no canon role), the audit naming why, and every challenge
carries RFC 9728's `resource_metadata`.

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

from core.http.oauth import JwtVerifier, Rejection
from core.http.problems import PROBLEM_MEDIA, problem_body
from core.principal import ANONYMOUS, Principal
from core.tokens import TokenFile

__all__ = [
    "BearerGate",
    "CanonAccessToken",
    "CanonTokenVerifier",
    "access_token",
    "auth_middleware",
    "bearer_token",
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
            made = self._made[token] = access_token(token, principal)
        return made


def access_token(token: str, principal: Principal) -> CanonAccessToken:
    """The SDK's access token for a token canon verified as `principal`."""
    made = CanonAccessToken(token=token, client_id=principal.name, subject=principal.name,
                            scopes=sorted(principal.roles), claims={"groups": sorted(principal.groups)})  # fmt: skip
    made._principal = principal  # pyright: ignore[reportPrivateUsage]
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
                 problem: bool = False, oauth: JwtVerifier | None = None) -> None:  # fmt: skip
        self.app = app
        self.anonymous = anonymous
        self.on_reject = on_reject  # (path, reason), for the audit log
        self.problem = problem  # answer as RFC 9457 problem+json (the generated surfaces) besides RFC 6750
        self.oauth = oauth  # an OAuth issuer's JWTs, tried when the token is not one of canon's (core.http.oauth)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or isinstance(scope.get("user"), AuthenticatedUser):
            await self.app(scope, receive, send)
            return
        outcome = None if self.oauth is None else await _oauth_outcome(self.oauth, scope)
        if isinstance(outcome, Principal):
            scope["user"] = AuthenticatedUser(access_token(bearer_token(scope) or "", outcome))
            await self.app(scope, receive, send)
            return
        presented = any(name.lower() == b"authorization" for name, _ in scope["headers"])
        if scope["type"] == "websocket":  # browsers cannot send the header: a surface may accept a token later
            if presented:  # but one that was sent and is not current is refused here, as on HTTP
                self.on_reject(scope.get("path", ""), "invalid token" + (f": {outcome.reason}" if outcome else ""))
                await send({"type": "websocket.close", "code": 4401, "reason": "invalid bearer token"})
                return
            await self.app(scope, receive, send)
            return
        if not presented and self.anonymous:
            await self.app(scope, receive, send)
            return
        reason = "invalid token" if presented else "no token"
        error, description = _REJECTIONS[reason]
        status = 401
        if outcome is not None:
            reason, error, description, status = (
                f"{reason}: {outcome.reason}",
                outcome.error,
                outcome.description,
                outcome.status,
            )
        self.on_reject(scope.get("path", ""), reason)
        payload: dict[str, Any] = {"error": error, "error_description": description}
        content_type = b"application/json"
        body = json.dumps(payload).encode()
        if self.problem:
            code = "unauthorized" if status == 401 else "forbidden"
            body = problem_body(status, code, description, scope.get("path", ""), extra=payload)
            content_type = PROBLEM_MEDIA.encode()
        challenge = f'Bearer error="{error}", error_description="{description}"'
        if self.oauth is not None:
            challenge = self.oauth.challenge(error, description)
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", content_type), (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", challenge.encode())]})  # fmt: skip
        await send({"type": "http.response.body", "body": body})


def bearer_token(scope: Scope) -> str | None:
    """The token of an `Authorization: Bearer <token>` header (the scheme in any case), else None."""
    for name, value in scope["headers"]:
        if name.lower() == b"authorization":
            text = bytes(value).decode("latin-1")
            token = text[7:].strip() if text[:7].lower() == "bearer " else ""
            return token or None
    return None


async def _oauth_outcome(oauth: JwtVerifier, scope: Scope) -> Principal | Rejection | None:
    """What the OAuth issuer's rule says of the request's bearer token (None: it has none)."""
    token = bearer_token(scope)
    return None if token is None else await oauth.verify(token)


_REJECTIONS = {  # reason -> RFC 6750 error code and description
    "invalid token": ("invalid_token", "The bearer token is not valid (unknown, revoked or malformed)."),
    "no token": ("invalid_request", "A bearer token is required."),
}
