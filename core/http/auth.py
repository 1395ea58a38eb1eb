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

Which rules check a bearer token is the `canon.authenticators` entry-point group (`authenticators`, read through
`core.ops.plugins`): canon's token file (`tokens`, first), the issuer's JWTs (`oauth`, when `[oauth]` is configured),
then any an installed distribution adds, by name. Each entry point names a factory `(Config, TokenFile) ->
Authenticator or None` (None: not configured here); an `Authenticator`'s `verify(token)` gives the token's
`Principal`, a `Rejection` (refused, and why), or None (not a token it knows). The first principal wins; without
one, the first rejection is the answer, else the token is not current. docs/development/plugins.md.

The principal goes into the scope under `core.seam.surfaces.PRINCIPAL`; `principal_of_scope` there (and
`principal_of_request`, for a framework's request object) gives it to every surface, none looks at client-supplied
identity. The token file is
asked on every request, so a revoked token is refused from the next request on.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import anyio.from_thread
from starlette.types import ASGIApp, Receive, Scope, Send

from core.http.oauth import JwtVerifier, Rejection
from core.http.signin import SESSION, SignIn, cross_site_refusal, sign_in_location, wants_page
from core.ops import plugins
from core.ops.config import Config
from core.ops.tokens import TokenFile
from core.seam.surfaces import PRINCIPAL
from core.values.principal import Principal
from core.web.problems import MCP_PATH, PROBLEM_MEDIA, problem_body, refuse

__all__ = [
    "REJECTION",
    "SESSION",
    "Authenticate",
    "Authenticator",
    "Authenticators",
    "BearerGate",
    "Rejection",
    "StaticTokens",
    "authenticators",
    "bearer_token",
    "static_tokens",
]

REJECTION = "canon.rejection"
"""The scope key holding why the OAuth issuer's rule refused a request's bearer token (a `Rejection`)."""


@runtime_checkable
class Authenticator(Protocol):
    """A rule for bearer tokens: what a `canon.authenticators` factory makes."""

    async def verify(self, token: str) -> Principal | Rejection | None:
        """The token's principal; a `Rejection` if it is one of this rule's and refused (why, for the audit log and
        the answer); None if it is not a token this rule knows."""
        ...


class StaticTokens:
    """canon's own tokens (`canon token create`), from the token file, asked on every request."""

    def __init__(self, tokens: TokenFile) -> None:
        self.tokens = tokens

    async def verify(self, token: str) -> Principal | None:
        return self.tokens.verify(token)


def static_tokens(config: Config, tokens: TokenFile) -> StaticTokens:
    """The `tokens` entry point of `canon.authenticators`: canon's token file, always on."""
    return StaticTokens(tokens)


FIRST = ("tokens", "oauth")
"""The built-in authenticators, asked first and in this order; the others follow by entry-point name."""


class Authenticators:
    """The authenticators in force, asked in order: the first principal wins, else the first rejection."""

    def __init__(self, chain: Sequence[Authenticator]) -> None:
        self.chain = tuple(chain)

    @property
    def oauth(self) -> JwtVerifier | None:
        """The OAuth issuer's rule, if it is in force: the host also serves its metadata, challenges and sign-in."""
        return next((a for a in self.chain if isinstance(a, JwtVerifier)), None)

    async def verify(self, token: str) -> Principal | Rejection | None:
        refused: Rejection | None = None
        for authenticator in self.chain:
            outcome = await authenticator.verify(token)
            if isinstance(outcome, Principal):
                return outcome
            if isinstance(outcome, Rejection) and refused is None:
                refused = outcome
        return refused

    def blocking(self, token: str) -> Principal | None:
        """`verify` for a worker thread of the app's event loop (a surface checking a token it was sent in a
        message, e.g. GraphQL's `connection_init`): the principal, or None for any refusal."""
        outcome = anyio.from_thread.run(self.verify, token)
        return outcome if isinstance(outcome, Principal) else None


def authenticators(config: Config, tokens: TokenFile) -> Authenticators:
    """The authenticators of every `canon.authenticators` entry point that is configured here (its factory gives
    one), canon's own first (`FIRST`); a factory that fails, or gives no `Authenticator`, stops start-up naming
    its entry point."""
    chain: list[Authenticator] = []
    for plugin in plugins.load(plugins.AUTHENTICATORS, callable, "a factory (Config, TokenFile) -> Authenticator",
                               order=FIRST):  # fmt: skip
        try:
            made = plugin.obj(config, tokens)
        except Exception as exc:
            raise plugins.PluginError(f"{plugins.AUTHENTICATORS}: entry point {plugin.origin} failed to make its "
                                      f"authenticator: {type(exc).__name__}: {exc}") from exc  # fmt: skip
        if made is None:
            continue
        if not isinstance(made, Authenticator):
            raise plugins.PluginError(f"{plugins.AUTHENTICATORS}: entry point {plugin.origin} made "
                                      f"{type(made).__name__}, not an Authenticator (no verify(token))")  # fmt: skip
        chain.append(made)
    return Authenticators(chain)


def bearer_token(scope: Scope) -> str | None:
    """The token of an `Authorization: Bearer <token>` header (the scheme in any case), else None."""
    for name, value in scope["headers"]:
        if name.lower() == b"authorization":
            text = bytes(value).decode("latin-1")
            return text[7:] if text[:7].lower() == "bearer " else None
    return None


class Authenticate:
    """Put the principal of a current bearer token in the scope (`PRINCIPAL`), as `authenticators` find it (a
    refused one leaves its `REJECTION`); without an `Authorization` header, with `sign_in`, the session cookie's
    (`SESSION`), if it comes from canon's own origin when it must. Every other request goes on as it is."""

    def __init__(self, app: ASGIApp, *, authenticators: Authenticators, sign_in: SignIn | None = None,
                 on_reject: Callable[[str, str], None] = lambda path, why: None,
                 public_url: str | None = None) -> None:  # fmt: skip
        self.app = app
        self.authenticators = authenticators  # canon's tokens, the issuer's JWTs, an installed distribution's rules
        self.sign_in = sign_in  # browsers' sessions (core.http.signin)
        self.on_reject = on_reject  # (path, reason), for the audit log
        self.public_url = public_url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            token = bearer_token(scope)
            principal = None
            if token:
                outcome = await self.authenticators.verify(token)
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
