"""Who an HTTP caller is: bearer tokens checked against canon's token file, one rule for every surface.

`Authenticate` (outside every route) reads the `Authorization` header and, for a current bearer token, puts the
token's canon `Principal` in the ASGI scope. `BearerGate` (around every surface's routes, `/mcp` included) turns
the outcome into the rule:

* a current token → that token's principal;
* an `Authorization` header that is not a current bearer token (wrong, revoked, malformed) → 401 with
  `WWW-Authenticate: Bearer error="invalid_token"`, audited as `rejected`; never a silent downgrade to
  anonymous, so a client with a stale token finds out;
* no `Authorization` header → the anonymous principal (read-only, public nodes only), or 401 when the
  configuration turns anonymous access off, except for a surface's page shell (`core.seam.surfaces.page_shell_of`: a
  docs page holding no data), served as ever, whose calls then carry a token.

With `[oauth]` configured, `Authenticate` asks the issuer's rule (`core.http.oauth.JwtVerifier`) about a bearer
token that is not one of canon's: a valid JWT puts its principal in the scope like a canon token; a refused one
leaves its `Rejection` there (`REJECTION`), and `BearerGate` answers with that rejection's status and error (403
`insufficient_scope` for a valid token granting no canon role), the audit naming why. Every challenge then
carries RFC 9728's `resource_metadata` and the scope to ask for.

With a browser's sign-in (`[oauth] client_id`, `core.http.signin`), `Authenticate` gives a request that has no
`Authorization` header the principal of its session cookie, if it has a valid one: the principal a bearer token
with the same claims would have. A bearer token always wins over the cookie; an invalid or expired cookie is no
session (anonymous). A request the cookie authenticates that changes something must come from canon's own origin
(`core.http.signin.cross_site_refusal`), else it is refused with 403 before any route. `BearerGate` then sends a
browser asking for a page (`wants_page`) without credentials, when anonymous access is off, to sign in (303 to
`/signin?return=...`), page shells included; API clients get the 401 as ever.

The principal goes into the scope under `core.seam.surfaces.PRINCIPAL`; `principal_of_scope` there (and
`principal_of_request`, for a framework's request object) gives it to every surface, none looks at client-supplied
identity. The token file is
asked on every request, so a revoked token is refused from the next request on.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from core.http.oauth import JwtVerifier, Rejection
from core.http.signin import SESSION, SignIn, cross_site_refusal, sign_in_location, wants_page
from core.ops.tokens import TokenFile
from core.seam.surfaces import PRINCIPAL
from core.web.problems import MCP_PATH, PROBLEM_MEDIA, problem_body, refuse

__all__ = [
    "REJECTION",
    "SESSION",
    "Authenticate",
    "BearerGate",
    "bearer_token",
]

REJECTION = "canon.rejection"
"""The scope key holding why the OAuth issuer's rule refused a request's bearer token (a `Rejection`)."""


def bearer_token(scope: Scope) -> str | None:
    """The token of an `Authorization: Bearer <token>` header (the scheme in any case), else None."""
    for name, value in scope["headers"]:
        if name.lower() == b"authorization":
            text = bytes(value).decode("latin-1")
            return text[7:] if text[:7].lower() == "bearer " else None
    return None


class Authenticate:
    """Put the principal of a current bearer token in the scope (`PRINCIPAL`): one of canon's tokens, else, with
    `oauth`, the issuer's JWT (a refused one leaves its `REJECTION`); without an `Authorization` header, with
    `sign_in`, the session cookie's (`SESSION`), if it comes from canon's own origin when it must. Every other
    request goes on as it is."""

    def __init__(self, app: ASGIApp, *, tokens: TokenFile, oauth: JwtVerifier | None = None,
                 sign_in: SignIn | None = None, on_reject: Callable[[str, str], None] = lambda path, why: None,
                 public_url: str | None = None) -> None:  # fmt: skip
        self.app = app
        self.tokens = tokens
        self.oauth = oauth  # an OAuth issuer's JWTs, tried when the token is not one of canon's (core.http.oauth)
        self.sign_in = sign_in  # browsers' sessions (core.http.signin)
        self.on_reject = on_reject  # (path, reason), for the audit log
        self.public_url = public_url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            token = bearer_token(scope)
            principal = None if not token else self.tokens.verify(token)
            if token and principal is None and self.oauth is not None:
                outcome = await self.oauth.verify(token)
                if isinstance(outcome, Rejection):
                    scope[REJECTION] = outcome
                else:
                    principal = outcome
            if principal is None and self.sign_in is not None and not _has_authorization(scope):
                principal = self.sign_in.principal(scope)
                if principal is not None and (refused := cross_site_refusal(scope, self.public_url)) is not None:
                    self.on_reject(scope.get("path", ""), "cross-site request with the session cookie")
                    if scope["type"] == "websocket":
                        await send({"type": "websocket.close", "code": 1008, "reason": "cross-site request"})
                    else:
                        await refuse(send, scope, "origin_not_allowed", f"Refused: {refused}.")
                    return
                if principal is not None:
                    scope[SESSION] = True
            if principal is not None:
                scope[PRINCIPAL] = principal
        await self.app(scope, receive, send)


def _has_authorization(scope: Scope) -> bool:
    return any(name.lower() == b"authorization" for name, _ in scope["headers"])


class BearerGate:
    """Refuse a request whose bearer token is not current (401, or the OAuth issuer's `REJECTION`), and,
    optionally, one without a token.

    The refusal is RFC 6750's JSON body on `/mcp` (MCP fixes its bodies) and an RFC 9457 problem carrying the same
    members everywhere else, both with the `WWW-Authenticate` challenge (`oauth`'s, pointing to the RFC 9728
    metadata, when an issuer is configured).
    """

    def __init__(self, app: ASGIApp, *, anonymous: bool, on_reject: Callable[[str, str], None],
                 oauth: JwtVerifier | None = None, shell: Callable[[Scope], bool] | None = None,
                 signs_in: bool = False, public_url: str | None = None) -> None:  # fmt: skip
        self.app = app
        self.public_url = public_url  # where browsers reach canon: the sign-in URL's path starts with its path
        self.signs_in = signs_in  # browsers sign in (core.http.signin): a page asked for without credentials is
        # answered by sending the browser there, when anonymous access is off
        self.anonymous = anonymous
        self.shell = shell  # which requests are for a page shell, served without a token (`page_shell_of`)
        self.on_reject = on_reject  # (path, reason), for the audit log
        self.oauth = oauth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or PRINCIPAL in scope:
            await self.app(scope, receive, send)
            return
        presented = _has_authorization(scope)
        rejection = scope.get(REJECTION)
        rejection = rejection if isinstance(rejection, Rejection) else None
        if scope["type"] == "websocket":  # browsers cannot send the header: a surface may accept a token later
            if presented:  # but one that was sent and is not current is refused here, as on HTTP
                self.on_reject(scope.get("path", ""), "invalid token" + (f": {rejection.reason}" if rejection else ""))
                await send({"type": "websocket.close", "code": 4401, "reason": "invalid bearer token"})
                return
            await self.app(scope, receive, send)
            return
        if not presented and not self.anonymous and self.signs_in and wants_page(scope):
            await send({"type": "http.response.start", "status": 303, "headers": [
                (b"location", sign_in_location(scope, self.public_url).encode("latin-1")), (b"content-length", b"0"),
                (b"cache-control", b"no-store")]})  # fmt: skip
            await send({"type": "http.response.body", "body": b""})
            return
        if not presented and (self.anonymous or (self.shell is not None and self.shell(scope))):
            await self.app(scope, receive, send)
            return
        reason = "invalid token" if presented else "no token"
        error, description = _REJECTIONS[reason]
        status = 401
        if rejection is not None:
            reason = f"{reason}: {rejection.reason}"
            error, description, status = rejection.error, rejection.told, rejection.status
        self.on_reject(scope.get("path", ""), reason)
        challenge = f'Bearer error="{error}", error_description="{description}"'
        if self.oauth is not None:
            challenge = self.oauth.challenge(error, description)
        await _refuse(scope, send, status, error, description, challenge)


async def _refuse(scope: Scope, send: Send, status: int, error: str, description: str, challenge: str) -> None:
    payload: dict[str, Any] = {"error": error, "error_description": description}
    path = scope.get("path", "")
    if path == MCP_PATH:
        content_type, body = b"application/json", json.dumps(payload).encode()
    else:
        content_type = PROBLEM_MEDIA.encode()
        code = "unauthorized" if status == 401 else "forbidden"
        body = problem_body(status, code, description, path, extra=payload)
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", content_type), (b"content-length", str(len(body)).encode()),
        (b"www-authenticate", challenge.encode())]})  # fmt: skip
    await send({"type": "http.response.body", "body": body})


_REJECTIONS = {  # reason -> RFC 6750 error code and description
    "invalid token": ("invalid_token", "The bearer token is not valid (unknown, revoked or malformed)."),
    "no token": ("invalid_request", "A bearer token is required."),
}
