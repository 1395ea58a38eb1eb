"""A browser signs in with the OAuth issuer (`[oauth]` with `client_id`), and is then served with a session cookie.

The flow is OpenID Connect's authorization code flow with PKCE (S256), canon being a confidential client:

* `GET /signin?return=/docs` finds the issuer's endpoints in its discovery document (the one `JwtVerifier` fetches
  for the keys, `core.http.oauth`), makes a `state`, a `nonce` and a PKCE verifier, keeps them in a short-lived
  encrypted cookie (`canon_signin`, ten minutes) and sends the browser to the issuer's `authorization_endpoint`;
* the issuer sends it back to the redirect URI (`public_url`, else the URL the browser used, + `redirect_path`); the
  callback checks that `state` is the cookie's (and `iss`, when the issuer names itself: RFC 9207), exchanges the
  code at the `token_endpoint` (HTTP Basic with the client id and secret, and the verifier), checks the ID token
  with the issuer's rule for every token it signs (`JwtVerifier.claims_of`: algorithm, key, signature, `iss`,
  `exp`, leeway; its `aud` is the client id, `azp` too when there are several) and that its `nonce` is the
  cookie's, and only then sets the session cookie and sends the browser back to where it was (`return`, a path on
  this server: anything else is `/`);
* the session cookie (`canon_session`) holds, encrypted and authenticated (Fernet: AES-128-CBC and HMAC-SHA256, the
  key derived from the client secret by HKDF), an id, the claims a principal is computed from, and the expiry: the
  ID token's `exp` or `session_max_age_s` from now, whichever is sooner. It is HttpOnly, SameSite=Lax, Path the
  path canon is reached at (`public_url`'s, else the root path), and Secure when canon is reached over https
  (`public_url`, or the scheme a trusted proxy names). Every request computes its principal with
  `JwtVerifier.principal_of`, the rule a bearer token's claims go through, so a session and a token with the same
  claims are the same principal, with the same roles and groups;
* `POST /signout` (from canon's own origin only) clears it (the id is also refused by this process until the
  expiry) and, when the issuer advertises an `end_session_endpoint`, sends the browser there to end its session too.

`Authenticate` (`core.http.auth`) asks `SignIn.principal` for a request without a bearer token: a bearer token wins
over a cookie; a cookie that is forged, expired, signed out or no longer maps to a role is no session at all (the
request is anonymous, or sent to sign in). Because a cookie goes with every request the browser makes,
`cross_site_refusal` is the rule that keeps other sites from acting with it: a request authenticated by the cookie
that changes something (any method but GET, HEAD and OPTIONS), and every WebSocket handshake, must come from canon's
own origin (its `Origin` header, else `Sec-Fetch-Site: same-origin`). `BearerGate` sends a browser asking for a page
without credentials to `/signin` when anonymous access is off (`wants_page`, `sign_in_location`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import secrets
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from html import escape
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import anyio
import anyio.to_thread
from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from starlette.requests import Request, cookie_parser
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import Scope

from core.http.oauth import JwtVerifier, KeysUnavailableError, Rejection
from core.values.principal import Principal
from core.web.problems import PAGE_ANSWER

__all__ = [
    "SESSION",
    "SESSION_COOKIE",
    "SIGNIN_PATH",
    "SIGNOUT_PATH",
    "SignIn",
    "cross_site_refusal",
    "own_origin",
    "safe_return",
    "wants_page",
]

LOG = logging.getLogger("canon.signin")
SESSION = "canon.session"
"""The scope key set (True) when the request's principal is its session cookie's, not a bearer token's."""
SESSION_COOKIE = "canon_session"
FLOW_COOKIE = "canon_signin"
SIGNIN_PATH = "/signin"
SIGNOUT_PATH = "/signout"
FLOW_MAX_AGE_S = 600  # a sign-in not finished in ten minutes starts again
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_MAX_ANSWER_BYTES = 1024 * 1024
_REVOKED_MAX = 10_000


# -- the rules other modules use --------------------------------------------------------------------------------------
def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def own_origin(scope: Scope, public_url: str | None) -> str:
    """canon's own web origin: `public_url`'s, else the scheme and Host the request reached canon with."""
    if public_url is not None:
        parts = urlsplit(public_url)
        return _origin(parts.scheme, parts.netloc)
    scheme = str(scope.get("scheme", "http"))
    scheme = {"ws": "http", "wss": "https"}.get(scheme, scheme)
    return _origin(scheme, _header(scope, b"host") or "")


def _origin(scheme: str, netloc: str) -> str:
    netloc = netloc.lower()
    default = {"http": ":80", "https": ":443"}.get(scheme, "")
    if default and netloc.endswith(default):
        netloc = netloc[: -len(default)]
    return f"{scheme}://{netloc}"


def cross_site_refusal(scope: Scope, public_url: str | None) -> str | None:
    """Why a request authenticated by the session cookie may not go on (None: it may): one that changes something
    (an HTTP method other than GET, HEAD and OPTIONS) or opens a WebSocket must come from canon's own origin, as its
    `Origin` header says (else `Sec-Fetch-Site: same-origin`), never from a page elsewhere that the browser sends the
    cookie for. The one rule against cross-site request forgery, for every surface and page."""
    if scope["type"] == "http" and scope.get("method", "GET") in SAFE_METHODS:
        return None
    own = own_origin(scope, public_url)
    origin = _header(scope, b"origin")
    if origin is not None:
        scheme, _, netloc = origin.partition("://")
        if _origin(scheme.lower(), netloc) == own:
            return None
        return f"a request made with the session cookie must come from {own}, not from {origin!r}"
    if _header(scope, b"sec-fetch-site") == "same-origin":
        return None
    return f"a request made with the session cookie must say it comes from {own} (its Origin header)"


def wants_page(scope: Scope) -> bool:
    """Whether a request is a browser asking for a page (GET or HEAD, accepting HTML): one to send to sign in."""
    if scope["type"] != "http" or scope.get("method") not in ("GET", "HEAD"):
        return False
    return "text/html" in (_header(scope, b"accept") or "")


def safe_return(value: str | None) -> str:
    """Where to go back to after signing in: a path on this server (relative to the root path, starting with one
    `/`, no scheme, host or control characters), else `/`. Never another site (no open redirect)."""
    if not value or not value.startswith("/") or value.startswith(("//", "/\\")):
        return "/"
    if any(ord(c) < 0x21 or c == "\\" for c in value) or len(value) > 2048:
        return "/"
    return value


def sign_in_location(scope: Scope, public_url: str | None = None) -> str:
    """The sign-in URL (a path on this host: under `public_url`'s path, else the root path) that brings the browser
    back to the page it asked for."""
    back = str(scope.get("path", "/"))
    if scope.get("query_string"):
        back += "?" + bytes(scope["query_string"]).decode("latin-1")
    base = urlsplit(public_url).path.rstrip("/") if public_url is not None else str(scope.get("app_root_path", ""))
    return f"{base}{SIGNIN_PATH}?return={quote(safe_return(back), safe='')}"


# -- the cookies' contents ------------------------------------------------------------------------------------------
class Sealed:
    """JSON sealed with a key derived from the client secret for one `purpose`: encrypted and authenticated, so a
    cookie is read back only as canon wrote it, and holds nothing readable."""

    def __init__(self, secret: str, purpose: str) -> None:
        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=f"canon {purpose} v1".encode()).derive(
            secret.encode()
        )
        self._fernet = Fernet(base64.urlsafe_b64encode(key))

    def seal(self, value: Mapping[str, Any]) -> str:
        return self._fernet.encrypt(json.dumps(value, separators=(",", ":")).encode()).decode("ascii")

    def open(self, sealed: str, *, max_age_s: int) -> dict[str, Any] | None:
        """What `seal` sealed, if it is canon's and not older than `max_age_s`; else None."""
        try:
            value: Any = json.loads(self._fernet.decrypt(sealed.encode("ascii"), ttl=max_age_s))
        except (InvalidToken, ValueError, UnicodeError):
            return None
        return value if isinstance(value, dict) else None  # pyright: ignore[reportUnknownVariableType]


@dataclass(frozen=True)
class Session:
    """A signed-in browser: `claims` are what its principal is computed from; it ends at `expires` (epoch s)."""

    sid: str
    claims: Mapping[str, Any]
    expires: float


class SignInError(Exception):
    """A sign-in that cannot finish: `status` and what the person is told (never a token or a secret)."""

    def __init__(self, status: int, told: str, reason: str) -> None:
        super().__init__(told)
        self.status, self.told, self.reason = status, told, reason


# -- the sign-in ----------------------------------------------------------------------------------------------------
class SignIn:
    """Browsers signing in with the issuer `verifier` checks tokens of, and their sessions."""

    def __init__(self, verifier: JwtVerifier, *, public_url: str | None,
                 on_reject: Callable[[str, str], None] = lambda path, reason: None) -> None:  # fmt: skip
        settings = verifier.settings
        assert settings.client_id is not None
        assert settings.client_secret is not None
        self.verifier = verifier
        self.settings = settings
        self.client_id: str = settings.client_id
        self._secret: str = settings.client_secret
        self.public_url = public_url
        self.on_reject = on_reject  # (path, reason), for the audit log
        bound = f"{settings.issuer} {settings.client_id} {self._secret}"  # another issuer or client: no old session
        self._sessions = Sealed(bound, "session cookie")
        self._flows = Sealed(bound, "sign-in cookie")
        self._revoked: dict[str, float] = {}  # signed-out session ids -> their expiry

    # -- sessions ---------------------------------------------------------------------------------------------------
    def session(self, scope: Scope) -> Session | None:
        """The request's session: its cookie, if canon sealed it, it has not expired and was not signed out."""
        sealed = _cookie(scope, SESSION_COOKIE)
        if sealed is None:
            return None
        value = self._sessions.open(sealed, max_age_s=self.settings.session_max_age_s)
        if value is None:
            return None
        sid, claims, expires = value.get("sid"), value.get("claims"), value.get("exp")
        if not isinstance(sid, str) or not isinstance(claims, dict) or not isinstance(expires, int | float):
            return None
        if time.time() >= expires or sid in self._revoked:
            return None
        return Session(sid, claims, float(expires))  # pyright: ignore[reportUnknownArgumentType]

    def principal(self, scope: Scope) -> Principal | None:
        """The principal of the request's session, computed as a bearer token's claims are; None: no session."""
        session = self.session(scope)
        if session is None:
            return None
        principal = self.verifier.principal_of(session.claims)
        return None if isinstance(principal, Rejection) else principal

    def session_cookie(self, claims: Mapping[str, Any], expires: float, *, secure: bool, path: str) -> str:
        """The `Set-Cookie` value of a new session (also what the tests make a session of canon's with)."""
        sealed = self._sessions.seal({"sid": secrets.token_urlsafe(16), "claims": dict(claims), "exp": expires})
        return _set_cookie(SESSION_COOKIE, sealed, max(1, int(expires - time.time())), secure=secure, path=path)

    def flow_cookie(self, flow: Mapping[str, Any], *, secure: bool, path: str) -> str:
        """The `Set-Cookie` value holding a sign-in in progress (`state`, `nonce`, the PKCE verifier, the return)."""
        return _set_cookie(FLOW_COOKIE, self._flows.seal(flow), FLOW_MAX_AGE_S, secure=secure, path=path)

    # -- routes -----------------------------------------------------------------------------------------------------
    def routes(self) -> list[Route]:
        return [
            Route(SIGNIN_PATH, self.start, methods=["GET", "HEAD"]),
            Route(self.settings.redirect_path, self.callback, methods=["GET"]),
            Route(SIGNOUT_PATH, self.sign_out, methods=["GET", "POST"]),
        ]

    async def start(self, request: Request) -> Response:
        """Send the browser to the issuer, with a new `state`, `nonce` and PKCE challenge kept in the flow cookie."""
        try:
            metadata = await self._metadata()
        except SignInError as exc:
            return self._failed(request, exc)
        verifier = secrets.token_urlsafe(48)
        flow = {"state": secrets.token_urlsafe(24), "nonce": secrets.token_urlsafe(24), "verifier": verifier,
                "return": safe_return(request.query_params.get("return")),
                "redirect_uri": self._redirect_uri(request)}  # fmt: skip
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        query = urlencode({"response_type": "code", "client_id": self.client_id,
                           "redirect_uri": flow["redirect_uri"], "scope": " ".join(self.settings.sign_in_scopes),
                           "state": flow["state"], "nonce": flow["nonce"], "code_challenge": challenge,
                           "code_challenge_method": "S256"})  # fmt: skip
        endpoint = metadata["authorization_endpoint"]
        answer = RedirectResponse(f"{endpoint}{'&' if '?' in endpoint else '?'}{query}", status_code=303)
        answer.headers.append("set-cookie", self.flow_cookie(flow, secure=self._secure(request),
                                                             path=self._flow_path(request)))  # fmt: skip
        answer.headers["cache-control"] = "no-store"
        return answer

    async def callback(self, request: Request) -> Response:
        """Finish a sign-in: state, code exchange, ID token, nonce; then the session cookie, and back."""
        try:
            flow = self._flow(request)
            claims, expires = await self._finish(request, flow)
        except SignInError as exc:
            return self._failed(request, exc)
        path = self._cookie_path(request)
        answer = RedirectResponse(self._path(request) + str(flow["return"]), status_code=303)
        answer.headers.append("set-cookie", self.session_cookie(claims, expires, secure=self._secure(request),
                                                                path=path))  # fmt: skip
        answer.headers.append("set-cookie", _clear_cookie(FLOW_COOKIE, self._flow_path(request)))
        answer.headers["cache-control"] = "no-store"
        return answer

    async def sign_out(self, request: Request) -> Response:
        """GET: a page with the sign-out button. POST: end the session here, then at the issuer if it says how."""
        if request.method == "GET":
            return HTMLResponse(_page("Sign out", f'<form method="post" action="{escape(self._path(request))}'
                                      f'{SIGNOUT_PATH}"><button type="submit">Sign out of canon</button></form>'),
                                headers={"cache-control": "no-store"})  # fmt: skip
        refused = cross_site_refusal(request.scope, self.public_url)  # with a session or not: never from elsewhere
        if refused is not None:
            self.on_reject(request.url.path, "cross-site sign-out")
            request.scope[PAGE_ANSWER] = True
            return HTMLResponse(_page("Sign out", f"<p>Refused: {escape(refused)}.</p>"), status_code=403)
        session = self.session(request.scope)
        if session is not None:
            if len(self._revoked) >= _REVOKED_MAX:
                now = time.time()
                self._revoked = {sid: until for sid, until in self._revoked.items() if until > now}
            self._revoked[session.sid] = session.expires
        location = self._path(request) + "/"
        try:
            end = (await self._metadata()).get("end_session_endpoint")
        except SignInError:
            end = None
        if isinstance(end, str) and end.startswith(("https://", "http://")):
            query = urlencode({"client_id": self.client_id, "post_logout_redirect_uri": self._base(request) + "/"})
            location = f"{end}{'&' if '?' in end else '?'}{query}"
        answer = RedirectResponse(location, status_code=303)
        answer.headers.append("set-cookie", _clear_cookie(SESSION_COOKIE, self._cookie_path(request)))
        answer.headers["cache-control"] = "no-store"
        return answer

    # -- the steps --------------------------------------------------------------------------------------------------
    def _flow(self, request: Request) -> dict[str, Any]:
        sealed = _cookie(request.scope, FLOW_COOKIE)
        flow = None if sealed is None else self._flows.open(sealed, max_age_s=FLOW_MAX_AGE_S)
        if flow is None:
            raise SignInError(400, "This sign-in was not started here, or took longer than ten minutes: "
                              "start again.", "no sign-in in progress")  # fmt: skip
        error = request.query_params.get("error")
        if error is not None:
            shown = "".join(c for c in error if c.isalnum() or c == "_")[:64]
            raise SignInError(400, f"The identity provider did not sign you in ({shown}).", f"issuer said {shown}")
        issuer = request.query_params.get("iss")  # RFC 9207: who answered, when the issuer says (mix-up defence)
        if issuer is not None and issuer != self.settings.issuer:
            raise SignInError(400, "The sign-in was answered by another identity provider than canon's.",
                              "wrong iss in the answer")  # fmt: skip
        state = request.query_params.get("state", "")
        if not hmac.compare_digest(state.encode(), str(flow.get("state", "")).encode()):
            raise SignInError(400, "The sign-in's state does not match the one this browser started: start again.",
                              "state mismatch")  # fmt: skip
        if not request.query_params.get("code"):
            raise SignInError(400, "The identity provider sent no authorization code.", "no code")
        return flow

    async def _finish(self, request: Request, flow: Mapping[str, Any]) -> tuple[dict[str, Any], float]:
        """The session's claims and expiry, from the code the issuer sent."""
        metadata = await self._metadata()
        form = {"grant_type": "authorization_code", "code": request.query_params["code"],
                "redirect_uri": str(flow["redirect_uri"]), "code_verifier": str(flow["verifier"]),
                "client_id": self.client_id}  # fmt: skip
        answer = await self._exchange(str(metadata["token_endpoint"]), form)
        id_token = answer.get("id_token")
        if not isinstance(id_token, str):
            raise SignInError(502, "The identity provider answered without an ID token.", "no id_token")
        claims = await self.verifier.claims_of(id_token, audience=self.client_id, require=("iat", "sub"))
        if isinstance(claims, Rejection):
            raise SignInError(400, f"The identity provider's ID token was refused: {claims.reason}.",
                              f"id token: {claims.reason}")  # fmt: skip
        audience = claims.get("aud")
        if isinstance(audience, list) and len(audience) > 1 and claims.get("azp") != self.client_id:  # OIDC 3.1.3.7
            raise SignInError(400, "The identity provider's ID token was refused: wrong azp.", "id token: wrong azp")
        if not hmac.compare_digest(str(claims.get("nonce", "")).encode(), str(flow["nonce"]).encode()):
            raise SignInError(400, "The identity provider's ID token was refused: its nonce is not this sign-in's.",
                              "id token: nonce mismatch")  # fmt: skip
        kept = self._kept_claims(claims, answer)
        principal = self.verifier.principal_of(kept)
        if isinstance(principal, Rejection):
            raise SignInError(403, f"You signed in, but your account has no role in canon ({principal.reason}).",
                              principal.reason)  # fmt: skip
        expires = min(float(claims["exp"]), time.time() + self.settings.session_max_age_s)
        return kept, expires

    def _kept_claims(self, claims: Mapping[str, Any], answer: Mapping[str, Any]) -> dict[str, Any]:
        """What the session keeps: the claims `principal_of` reads, and the scope the token endpoint granted when
        the ID token names none (an ID token rarely carries `scope`)."""
        names = {self.settings.name_claim, "scope", "scp", self.settings.roles_claim, self.settings.groups_claim}
        kept = {name: claims[name] for name in names if name is not None and name in claims}
        if "scope" not in kept and isinstance(answer.get("scope"), str):
            kept["scope"] = answer["scope"]
        return kept

    async def _metadata(self) -> dict[str, Any]:
        """The issuer's discovery document (`JwtVerifier.discovery`, kept), with the endpoints a sign-in needs."""
        deadline = time.monotonic() + self.settings.fetch_timeout_s
        try:
            with anyio.fail_after(self.settings.fetch_timeout_s):
                document = await anyio.to_thread.run_sync(self.verifier.discovery, deadline, abandon_on_cancel=True)
        except (KeysUnavailableError, TimeoutError) as exc:
            LOG.warning("canon: cannot fetch the OAuth issuer's metadata: %s", exc)
            raise SignInError(502, "The identity provider cannot be reached now: try again later.",
                              "issuer unavailable") from exc  # fmt: skip
        for name in ("authorization_endpoint", "token_endpoint"):
            if not (isinstance(document.get(name), str) and str(document[name]).startswith(("https://", "http://"))):
                raise SignInError(502, f"The identity provider's metadata has no {name}.", f"no {name}")
        methods = document.get("code_challenge_methods_supported")
        if isinstance(methods, list) and "S256" not in methods:
            raise SignInError(502, "The identity provider does not support PKCE with S256.", "no S256")
        return document

    async def _exchange(self, endpoint: str, form: Mapping[str, str]) -> dict[str, Any]:
        deadline = time.monotonic() + self.settings.fetch_timeout_s
        try:
            with anyio.fail_after(self.settings.fetch_timeout_s):
                return await anyio.to_thread.run_sync(self._post, endpoint, form, deadline, abandon_on_cancel=True)
        except TimeoutError as exc:
            raise SignInError(502, "The identity provider did not answer in time: try again.", "token timeout") from exc

    def _post(self, endpoint: str, form: Mapping[str, str], deadline: float) -> dict[str, Any]:
        """POST the code to the token endpoint (blocking): the client authenticates with HTTP Basic (RFC 6749
        section 2.3.1: id and secret form-encoded first)."""
        basic = base64.b64encode(f"{quote(self.client_id, safe='')}:{quote(self._secret, safe='')}".encode()).decode()
        request = urllib.request.Request(endpoint, data=urlencode(form).encode(), method="POST", headers={
            "Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json",
            "Authorization": f"Basic {basic}"})  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=max(0.1, deadline - time.monotonic())) as response:
                answer: Any = json.loads(response.read(_MAX_ANSWER_BYTES))
        except urllib.error.HTTPError as exc:  # the issuer's error answer: {"error": "invalid_grant", ...}
            error = _error_code(exc)
            raise SignInError(400, f"The identity provider refused the authorization code ({error}): start again.",
                              f"token endpoint said {error}") from exc  # fmt: skip
        except (OSError, ValueError) as exc:
            raise SignInError(502, "The identity provider's token endpoint cannot be reached now: try again.",
                              "token endpoint unavailable") from exc  # fmt: skip
        if not isinstance(answer, dict):
            raise SignInError(502, "The identity provider's token endpoint did not answer a JSON object.", "bad answer")
        return answer  # pyright: ignore[reportUnknownVariableType]

    # -- URLs and cookies -------------------------------------------------------------------------------------------
    def _base(self, request: Request) -> str:
        """canon's base URL: `public_url`, else the scheme, host and root path the request came with."""
        return self.public_url if self.public_url is not None else str(request.base_url).rstrip("/")

    def _redirect_uri(self, request: Request) -> str:
        return self._base(request) + self.settings.redirect_path

    def _secure(self, request: Request) -> bool:
        return urlsplit(self._base(request)).scheme == "https"

    def _path(self, request: Request) -> str:
        """The path canon is reached at in the browser ("" at the host's root): `public_url`'s, else the root path."""
        return urlsplit(self._base(request)).path.rstrip("/")

    def _cookie_path(self, request: Request) -> str:
        return self._path(request) or "/"

    def _flow_path(self, request: Request) -> str:
        """Where the flow cookie goes: the sign-in's own paths (the redirect path is under `/signin/`), nowhere else."""
        return f"{self._path(request)}{SIGNIN_PATH}/"

    def _failed(self, request: Request, error: SignInError) -> Response:
        self.on_reject(request.url.path, f"sign-in: {error.reason}")
        request.scope[PAGE_ANSWER] = True  # a page for the person signing in, not a problem document
        again = f'<p><a href="{escape(self._path(request))}{SIGNIN_PATH}">Sign in again</a></p>'
        answer = HTMLResponse(_page("Sign-in failed", f"<p>{escape(error.told)}</p>{again}"), status_code=error.status,
                              headers={"cache-control": "no-store"})  # fmt: skip
        answer.headers.append("set-cookie", _clear_cookie(FLOW_COOKIE, self._flow_path(request)))
        return answer


def _cookie(scope: Scope, name: str) -> str | None:
    """The cookie `name` of the request. Starlette's lenient parser, as browsers read cookies: the standard library's
    stops at the first cookie it finds malformed, which another application on the same site may well have set."""
    for key, value in scope["headers"]:
        if key.lower() == b"cookie" and (found := cookie_parser(bytes(value).decode("latin-1")).get(name)):
            return found
    return None


def _set_cookie(name: str, value: str, max_age: int, *, secure: bool, path: str) -> str:
    return f"{name}={value}; Path={path}; Max-Age={max_age}; HttpOnly; SameSite=Lax" + ("; Secure" if secure else "")


def _clear_cookie(name: str, path: str) -> str:
    return f"{name}=; Path={path}; Max-Age=0; HttpOnly; SameSite=Lax"


def _error_code(error: urllib.error.HTTPError) -> str:
    try:
        body: Any = json.loads(error.read(_MAX_ANSWER_BYTES))
    except (OSError, ValueError):
        return f"HTTP {error.code}"
    code = body.get("error") if isinstance(body, dict) else None  # pyright: ignore[reportUnknownMemberType]
    return "".join(c for c in code if c.isalnum() or c == "_")[:64] if isinstance(code, str) else f"HTTP {error.code}"


def _page(title: str, body: str) -> str:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>canon: {escape(title)}</title></head>'
            f"<body><h1>{escape(title)}</h1>{body}</body></html>")  # fmt: skip
