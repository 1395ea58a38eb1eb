"""canon as an OAuth 2.1 resource server: JWT access tokens from one configured issuer, checked locally.

`JwtVerifier.verify(token)` is the whole rule, a bearer token in and a `Principal` or a `Rejection` out:

* the token is a JWS whose `alg` is on the allow-list (`[oauth] algorithms`, asymmetric only: `none` and the
  HMAC algorithms can never be configured, so a token "signed" with the issuer's public key as an HMAC secret
  fails like any other);
* its key is the issuer's, found by `kid` in the JWKS (`[oauth] jwks_url`, or the `jwks_uri` of the issuer's
  OpenID Connect / RFC 8414 discovery document). Keys are cached for `jwks_cache_s`; an unknown `kid` fetches
  the JWKS again (the issuer rotated its keys), at most once per `jwks_min_refresh_s`, so a flood of made-up
  `kid`s cannot make canon hammer the issuer. A fetch (discovery and JWKS together) has one deadline,
  `fetch_timeout_s`; while it is in flight no other request waits for it: each answers with the keys known then;
* `iss` is the issuer, `aud` names canon (`[oauth] audience`, by default its resource URL: RFC 8707, no token
  meant for another service is accepted), `exp` is required, and `exp`/`nbf`/`iat` hold within `leeway_s`;
* the principal is named by `name_claim` (default `sub`) after `name_prefix` (default `oauth.`: `sub = alice` is
  `oauth.alice`, never the principal of canon's token named `alice`, and `canon token create` refuses a name with
  the prefix); its roles are what `[oauth.roles]` maps its scopes (`scope`/`scp`) and the values of `roles_claim`
  to; its reader groups are the values of `groups_claim`. A valid token that maps to no role is refused with 403
  `insufficient_scope` (it could do nothing).

An accepted token is remembered until its `exp` (`MAX_VERIFIED` of them), so a client's next request costs a
lookup; fetching keys forgets them all. If the issuer cannot be reached when keys are due, the keys fetched
before stay in use (a warning is logged).

The pieces are shared with a browser's sign-in (`core.http.signin`), so one rule holds for both: `claims_of` checks
any JWT of the issuer for an audience (access tokens: canon's resource; ID tokens: canon's client id),
`principal_of` maps a set of claims to a principal (a token's, a session's), and `discovery` is the issuer's
metadata, fetched for the keys and kept (the sign-in reads its endpoints from it).

A rejection carries the RFC 6750 error, a reason for the audit log (never the token) and the HTTP status;
`challenge` writes the `WWW-Authenticate` value with the RFC 9728 `resource_metadata` parameter, and
`resource_metadata` is the document served at `metadata_path`.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.from_thread
import anyio.to_thread
import jwt

from core.ops.config import Config, OAuthSettings
from core.ops.tokens import TOKEN_PREFIX
from core.values.principal import ROLES, Principal

__all__ = [
    "METADATA_PREFIX",
    "JwtVerifier",
    "KeysUnavailableError",
    "Rejection",
    "authenticator",
    "get_json",
    "metadata_path",
]

METADATA_PREFIX = "/.well-known/oauth-protected-resource"
LOG = logging.getLogger("canon.oauth")
_KEY_TYPES = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP"}  # alg prefix -> the JWK key type it needs
_MAX_DOCUMENT_BYTES = 1024 * 1024
MAX_VERIFIED = 1024
"""Accepted tokens remembered (until their `exp`), so a client's next request costs a lookup, not a signature."""


@dataclass(frozen=True)
class Rejection:
    """Why a bearer token was refused: `reason` for the audit log, `error` and `status` for the answer."""

    reason: str
    error: str = "invalid_token"
    status: int = 401
    description: str = ""

    @property
    def told(self) -> str:
        """What the client is told (RFC 6750 `error_description`, and the problem's detail): which check failed,
        never what the token held, since `reason` names checks and claims, not their values."""
        return self.description or f"The bearer token was refused: {self.reason}."


def metadata_path(resource: str) -> str:
    """Where RFC 9728 puts the metadata of `resource`: the well-known prefix, then the resource URL's path."""
    path = urlsplit(resource).path.rstrip("/")
    return METADATA_PREFIX + path


class KeysUnavailableError(Exception):
    """The issuer's keys could not be fetched (discovery or JWKS unreachable or malformed)."""


class JwtVerifier:
    """Bearer JWTs of the configured issuer -> canon principals. One per app; keys are shared by its requests."""

    def __init__(self, settings: OAuthSettings) -> None:
        self.settings = settings
        self._jwks: dict[str, dict[str, Any]] = {}  # kid ("" for a key without one) -> the JWK
        self._parsed: dict[tuple[str, str], jwt.PyJWK] = {}  # (kid, alg) -> the key, ready to verify
        self._fetched = float("-inf")  # monotonic time of the last successful JWKS fetch
        self._tried = float("-inf")  # ... and of the last attempt
        self._refreshing = False  # a fetch is in flight (one at a time; no request waits for it but its own)
        self._verified: dict[str, tuple[Principal, float]] = {}  # token -> its principal, until its exp (+ leeway)
        self.fetches = 0  # JWKS documents fetched, for operators and tests
        self._discovered: tuple[dict[str, Any], float] | None = None  # the issuer's metadata, and when it was fetched

    # -- the rule ------------------------------------------------------------------------------------------------
    async def verify(self, token: str) -> Principal | Rejection:
        known = self._verified.get(token)
        if known is not None and time.time() < known[1]:
            return known[0]
        if token.startswith(TOKEN_PREFIX):  # one of canon's own, and not a current one
            return Rejection("unknown canon token")
        outcome = await self._check(token)
        if isinstance(outcome, Rejection):
            return outcome
        principal, until = outcome
        if len(self._verified) >= MAX_VERIFIED:
            self._verified.clear()
        self._verified[token] = (principal, until)
        return principal

    async def _check(self, token: str) -> tuple[Principal, float] | Rejection:
        """The token's principal and until when it holds (its `exp` plus the leeway), or why it is refused."""
        claims = await self.claims_of(token, audience=self.settings.expected_audience)
        if isinstance(claims, Rejection):
            return claims
        principal = self.principal_of(claims)
        return principal if isinstance(principal, Rejection) else (principal, claims["exp"] + self.settings.leeway_s)

    async def claims_of(self, token: str, *, audience: str,
                        require: tuple[str, ...] = ()) -> dict[str, Any] | Rejection:  # fmt: skip
        """The claims of a JWT of the issuer meant for `audience`, checked as every token of the issuer is: the
        algorithm allow-list, the issuer's key by `kid`, the signature, `iss`, `aud`, `exp` (and `require`d claims),
        `nbf`/`iat` within the leeway, and the JSON types of the registered claims. Access tokens (audience: canon's
        resource) and the ID tokens of a browser's sign-in (audience: canon's client id, `core.http.signin`) alike."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            return Rejection("malformed token")
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self.settings.algorithms:
            return Rejection("algorithm not allowed")
        kid = header.get("kid", "")
        try:
            key = await self._key(kid if isinstance(kid, str) else "", alg)
        except KeysUnavailableError as exc:
            LOG.warning("canon: cannot fetch the OAuth issuer's keys: %s", exc)
            return Rejection("issuer keys unavailable")
        if key is None:
            return Rejection("unknown key")
        try:
            claims: dict[str, Any] = jwt.decode(token, key, algorithms=[alg], audience=audience,
                                                issuer=self.settings.issuer, leeway=self.settings.leeway_s,
                                                options={"require": ["exp", "iss", "aud", *require]})  # fmt: skip
        except jwt.PyJWTError as exc:
            return Rejection(_REASONS.get(type(exc), "invalid token"))
        if (mistyped := _mistyped_claim(claims)) is not None:
            return Rejection(f"claim {mistyped} of the wrong type")
        return claims

    def verify_blocking(self, token: str) -> Principal | None:
        """`verify` for a worker thread of the app's event loop (a surface checking a token it was sent in a
        message, e.g. GraphQL's `connection_init`): the principal, or None for any rejection."""
        outcome = anyio.from_thread.run(self.verify, token)
        return outcome if isinstance(outcome, Principal) else None

    def principal_of(self, claims: Mapping[str, Any]) -> Principal | Rejection:
        """The canon principal of a set of the issuer's claims: the one rule for a bearer token's claims and a signed-in
        browser session's (`core.http.signin`), so both name, and grant, the same."""
        name = claims.get(self.settings.name_claim)
        if not isinstance(name, str) or not name:
            return Rejection(f"no {self.settings.name_claim} claim")
        name = self.settings.name_prefix + name  # the issuer's names, never one of canon's token names
        granted = [*_values(claims.get("scope")), *_values(claims.get("scp"))]
        if self.settings.roles_claim:
            granted += _values(claims.get(self.settings.roles_claim))
        roles = frozenset(role for value in granted if (role := self.settings.roles.get(value)) in ROLES)
        if not roles:
            return Rejection("no canon role", error="insufficient_scope", status=403,
                             description="The access token grants no canon role.")  # fmt: skip
        groups = _values(claims.get(self.settings.groups_claim)) if self.settings.groups_claim else []
        return Principal(name, roles, frozenset(groups))

    # -- what a refused client is told -----------------------------------------------------------------------------
    @property
    def metadata_url(self) -> str:
        parts = urlsplit(self.settings.resource)
        return f"{parts.scheme}://{parts.netloc}{metadata_path(self.settings.resource)}"

    @property
    def entry_scope(self) -> str:
        """The scopes a client asks for to be let in at all: those mapped to the reader role."""
        return " ".join(s for s, role in self.settings.roles.items() if role == "reader")

    def challenge(self, error: str, description: str) -> str:
        """The `WWW-Authenticate` value of a 401 or 403 (RFC 6750 section 3, RFC 9728 section 5.1)."""
        params = [("error", error), ("error_description", description), ("resource_metadata", self.metadata_url)]
        if self.entry_scope:
            params.append(("scope", self.entry_scope))
        return "Bearer " + ", ".join(f'{k}="{v}"' for k, v in params)

    def resource_metadata(self) -> dict[str, Any]:
        """The RFC 9728 Protected Resource Metadata document."""
        return {
            "resource": self.settings.resource,
            "authorization_servers": [self.settings.issuer],
            "scopes_supported": list(self.settings.roles),
            "bearer_methods_supported": ["header"],
            "resource_signing_alg_values_supported": list(self.settings.algorithms),
            "resource_name": "canon",
        }

    # -- keys ------------------------------------------------------------------------------------------------------
    async def _key(self, kid: str, alg: str) -> jwt.PyJWK | None:
        now = time.monotonic()
        wanted = kid not in self._jwks or now - self._fetched > self.settings.jwks_cache_s
        if wanted and not self._refreshing and now - self._tried >= self.settings.jwks_min_refresh_s:
            await self._refresh()  # never more often than that, even failing; never two at once
        if not self._jwks and self._tried > float("-inf"):
            raise KeysUnavailableError("they are being fetched" if self._refreshing else
                                       "the last fetch failed; canon tries again in jwks_min_refresh_s")  # fmt: skip
        jwk = self._jwks.get(kid)
        if jwk is None and not kid and len(self._jwks) == 1:  # a token without kid, from an issuer with one key
            kid, jwk = next(iter(self._jwks.items()))
        if jwk is None or _KEY_TYPES.get(alg[:2]) != jwk.get("kty") or jwk.get("alg", alg) != alg:
            return None
        parsed = self._parsed.get((kid, alg))
        if parsed is None:
            try:
                parsed = self._parsed[(kid, alg)] = jwt.PyJWK(jwk, algorithm=alg)  # pyright: ignore[reportArgumentType]
            except jwt.PyJWTError:
                return None
        return parsed

    async def _refresh(self) -> None:
        """Fetch the keys, within `fetch_timeout_s` overall. Meanwhile every other request answers with the keys
        known now (a kid only the new keys hold is refused at once): a slow issuer delays one request, not all."""
        self._refreshing, self._tried = True, time.monotonic()
        deadline = self._tried + self.settings.fetch_timeout_s
        try:
            with anyio.fail_after(self.settings.fetch_timeout_s):
                keys = await anyio.to_thread.run_sync(self._fetch_keys, deadline, abandon_on_cancel=True)
        except (KeysUnavailableError, TimeoutError) as exc:
            if not self._jwks:
                raise KeysUnavailableError(str(exc) or "the issuer did not answer in fetch_timeout_s") from exc
            LOG.warning("canon: cannot fetch the OAuth issuer's keys again; using those fetched before")
            return
        finally:
            self._refreshing = False
        self._jwks = _signing_keys(keys)
        self._parsed, self._verified = {}, {}  # a retired key's tokens are checked again, and refused
        self._fetched = self._tried
        self.fetches += 1

    def _fetch_keys(self, deadline: float) -> list[Any]:
        """The issuer's published keys, every request within the monotonic `deadline` (blocking: run on a worker
        thread)."""
        url = self.settings.jwks_url or _jwks_uri(self.discovery(deadline))
        if url is None:  # discovery checks a document has one before it keeps it
            raise KeysUnavailableError("The issuer's discovery document has no jwks_uri.")
        keys = get_json(url, deadline).get("keys")
        if not isinstance(keys, list):
            raise KeysUnavailableError(f"{url} is not a JWK Set (no 'keys' list).")
        return keys  # pyright: ignore[reportUnknownVariableType]

    def discovery(self, deadline: float) -> dict[str, Any]:
        """The issuer's metadata: its OpenID Connect discovery document, else its RFC 8414 document, naming this
        issuer exactly (blocking, within the monotonic `deadline`). Kept for `jwks_cache_s`, for the keys and a
        browser's sign-in (`core.http.signin`: its endpoints) alike."""
        now = time.monotonic()
        if self._discovered is not None and now - self._discovered[1] <= self.settings.jwks_cache_s:
            return self._discovered[0]
        issuer = self.settings.issuer
        parts = urlsplit(issuer)
        rfc8414 = f"{parts.scheme}://{parts.netloc}/.well-known/oauth-authorization-server{parts.path.rstrip('/')}"
        problems: list[str] = []
        for url in (issuer.rstrip("/") + "/.well-known/openid-configuration", rfc8414):
            try:
                document = get_json(url, deadline)
            except KeysUnavailableError as exc:
                problems.append(str(exc))
                continue
            if document.get("issuer") != issuer:
                raise KeysUnavailableError(f"{url} names the issuer {document.get('issuer')!r}, not {issuer!r}.")
            if _jwks_uri(document) is None:
                problems.append(f"{url} has no jwks_uri.")
                continue
            self._discovered = (document, now)
            return document
        raise KeysUnavailableError(" ".join(problems))


def _jwks_uri(document: Mapping[str, Any]) -> str | None:
    """The `jwks_uri` of a discovery document, if it is an http(s) URL."""
    jwks_uri = document.get("jwks_uri")
    return jwks_uri if isinstance(jwks_uri, str) and jwks_uri.startswith(("https://", "http://")) else None


def get_json(url: str, deadline: float) -> dict[str, Any]:
    left = deadline - time.monotonic()
    if left <= 0:
        raise KeysUnavailableError(f"GET {url} not tried: fetch_timeout_s is over.")
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=left) as response:  # each read within what is left
            document: Any = json.loads(response.read(_MAX_DOCUMENT_BYTES))
    except (OSError, ValueError) as exc:  # URLError and HTTPError are OSErrors
        raise KeysUnavailableError(f"GET {url} failed: {exc}.") from exc
    if not isinstance(document, dict):
        raise KeysUnavailableError(f"GET {url} did not answer a JSON object.")
    return document  # pyright: ignore[reportUnknownVariableType]


def _signing_keys(keys: list[Any]) -> dict[str, dict[str, Any]]:
    """A JWK Set's signature keys by `kid` (encryption keys left out)."""
    return {str(k.get("kid", "")): k for k in keys if isinstance(k, dict) and k.get("use", "sig") == "sig"}  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]


def _values(claim: Any) -> list[str]:
    """A claim's values: a space-separated string (as `scope` is) or a list of strings."""
    if isinstance(claim, str):
        return claim.split()
    if isinstance(claim, Iterable) and not isinstance(claim, (bytes, Mapping)):
        return [v for v in claim if isinstance(v, str)]  # pyright: ignore[reportUnknownVariableType]
    return []


_NUMERIC_DATES = ("exp", "nbf", "iat")  # RFC 7519 section 4.1: NumericDate, a JSON number


def _mistyped_claim(claims: Mapping[str, Any]) -> str | None:
    """The first registered claim (RFC 7519 section 4.1) whose JSON type is wrong, if any: PyJWT checks the values it
    compares, and lets through e.g. a numeric string `exp`, which canon would then add its leeway to."""
    for name in _NUMERIC_DATES:
        value = claims.get(name)
        if name in claims and (isinstance(value, bool) or not isinstance(value, int | float)):
            return name
    for name in ("iss", "sub", "jti"):
        if name in claims and not isinstance(claims[name], str):
            return name
    audience = claims.get("aud")
    if "aud" in claims and not (isinstance(audience, str) or (
            isinstance(audience, list) and all(isinstance(a, str) for a in audience))):  # fmt: skip
        return "aud"
    return None


_REASONS: dict[type[Exception], str] = {  # what the audit log says of a token PyJWT refused
    jwt.ExpiredSignatureError: "expired token",
    jwt.ImmatureSignatureError: "token not yet valid",
    jwt.InvalidAudienceError: "wrong audience",
    jwt.InvalidIssuerError: "wrong issuer",
    jwt.InvalidSignatureError: "bad signature",
    jwt.InvalidAlgorithmError: "algorithm not allowed",
    jwt.MissingRequiredClaimError: "missing claim",
    jwt.InvalidIssuedAtError: "claim iat of the wrong type",
    jwt.exceptions.InvalidSubjectError: "claim sub of the wrong type",
    jwt.exceptions.InvalidJTIError: "claim jti of the wrong type",
    jwt.DecodeError: "malformed token",
}


def authenticator(config: Config, tokens: object) -> JwtVerifier | None:
    """The `oauth` entry point of `canon.authenticators`: the issuer's JWTs, when `[oauth]` is configured."""
    return None if config.oauth is None else JwtVerifier(config.oauth)
