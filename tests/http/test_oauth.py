"""canon as an OAuth 2.1 resource server, against a real local issuer.

The issuer is an HTTP server on 127.0.0.1 (a thread) serving an OpenID Connect discovery document and a JWK Set
of keys made here; the tests mint access tokens with its private keys. canon finds the keys through discovery,
keeps them, and fetches them again when a token names a key it does not know (rotation), at most once per
`jwks_min_refresh_s`. Every kind of bad token is a 401 with the RFC 9728 `resource_metadata` challenge, audited as
rejected with its reason, and never served as the anonymous caller.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import threading
import time
from collections.abc import AsyncGenerator, Callable, Generator, Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jwt
import mcp
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm
from mcp.client.streamable_http import streamable_http_client
from websockets.sync.client import connect
from websockets.typing import Subprotocol

from core.http.app import build_app
from core.mcp.surface import McpSurface
from core.ops.config import Config, OAuthSettings
from core.seam.instance import Instance, open_instance
from core.values.audit import AuditRecord
from core.values.principal import Principal
from generators.graphql.ide import example_query
from tests.conftest import copy_store
from tests.generators.conftest import live
from tests.mcp.conftest import serving
from tests.mcp.test_mcp_tools import tool_error

pytestmark = pytest.mark.anyio

RESOURCE = "http://127.0.0.1:8000"  # canon's resource URL: the audience of its tokens
METADATA = f"{RESOURCE}/.well-known/oauth-protected-resource"
RESTRICTED = "svc-card-vault"  # readers: group:payments, group:security
PUBLIC = "team-payments"


# -- the issuer ------------------------------------------------------------------------------------------------------
@dataclass
class SigningKey:
    kid: str
    alg: str
    private: Any

    @property
    def jwk(self) -> dict[str, Any]:
        make = RSAAlgorithm if self.alg.startswith("RS") else ECAlgorithm
        jwk: dict[str, Any] = make.to_jwk(self.private.public_key(), as_dict=True)
        return jwk | {"kid": self.kid, "alg": self.alg, "use": "sig"}


def rsa_key(kid: str) -> SigningKey:
    return SigningKey(kid, "RS256", rsa.generate_private_key(public_exponent=65537, key_size=2048))


def ec_key(kid: str) -> SigningKey:
    return SigningKey(kid, "ES256", ec.generate_private_key(ec.SECP256R1()))


@dataclass
class Issuer:
    """An OpenID provider's discovery and JWKS endpoints, over real HTTP; `keys` are what its JWKS publishes."""

    url: str
    keys: list[SigningKey]
    jwks_fetches: int = 0
    requests: int = 0
    up: bool = True  # False: every request is answered 503
    lock: threading.Lock = field(default_factory=threading.Lock)
    stalled: bool = False  # True: every request waits, unanswered, until `released` is set (a slow issuer)
    asked: threading.Event = field(default_factory=threading.Event)  # a request reached the stalled issuer
    released: threading.Event = field(default_factory=threading.Event)

    def token(self, key: SigningKey | None = None, *, headers: dict[str, Any] | None = None, **claims: Any) -> str:
        key = key or self.keys[0]
        now = int(time.time())
        body = {"iss": self.url, "aud": RESOURCE, "sub": "pat", "iat": now, "exp": now + 300,
                "scope": "openid canon:read", "groups": ["payments"]} | claims  # fmt: skip
        body = {k: v for k, v in body.items() if v is not None}
        return jwt.encode(body, key.private, algorithm=key.alg, headers={"kid": key.kid} | (headers or {}))


@contextlib.contextmanager
def running_issuer(*, claims_to_be: str | None = None) -> Generator[Issuer]:
    """The issuer on a free port; `claims_to_be` makes its discovery document name another issuer."""
    issuer = Issuer("", [rsa_key("k1"), ec_key("k2")])

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            with issuer.lock:
                issuer.requests += 1
            if issuer.stalled:
                issuer.asked.set()
                issuer.released.wait(timeout=60)
            if not issuer.up:
                self.send_error(503)
            elif self.path == "/realms/acme/.well-known/openid-configuration":
                self.answer({"issuer": claims_to_be or issuer.url, "jwks_uri": f"{issuer.url}/jwks",
                             "authorization_endpoint": f"{issuer.url}/authorize",
                             "token_endpoint": f"{issuer.url}/token"})  # fmt: skip
            elif self.path == "/realms/acme/jwks":
                with issuer.lock:
                    issuer.jwks_fetches += 1
                    keys = [k.jwk for k in issuer.keys]
                self.answer({"keys": keys})
            else:
                self.send_error(404)

        def answer(self, document: dict[str, Any]) -> None:
            body = json.dumps(document).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    issuer.url = f"http://127.0.0.1:{server.server_address[1]}/realms/acme"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield issuer
    finally:
        issuer.released.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    with running_issuer() as running:
        yield running


# -- canon, configured for the issuer -------------------------------------------------------------------------------
def settings(issuer: Issuer, **overrides: Any) -> OAuthSettings:
    return replace(OAuthSettings(issuer=issuer.url, resource=RESOURCE, roles_claim="roles"), **overrides)


@contextlib.contextmanager
def canon(seed_template: Path, folder: Path, oauth: OAuthSettings, *, anonymous: bool = True) -> Generator[Instance]:
    folder.mkdir(parents=True, exist_ok=True)
    config = Config(
        store=copy_store(seed_template, folder / "canon.db"),
        tokens=folder / "tokens.json",
        oauth=oauth,
        anonymous=anonymous,
    )
    instance = open_instance(config)
    try:
        yield instance
    finally:
        instance.close()


@contextlib.asynccontextmanager
async def http(instance: Instance) -> AsyncGenerator[httpx2.AsyncClient]:
    app = build_app(instance)
    async with app.router.lifespan_context(app):
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url=RESOURCE) as client:
            yield client


def audited(instance: Instance) -> list[AuditRecord]:
    records: list[AuditRecord] = []
    instance.dispatcher.audit_hooks.append(records.append)
    return records


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def challenge(response: httpx2.Response) -> dict[str, str]:
    """The parameters of a `WWW-Authenticate: Bearer k="v", ...` challenge."""
    scheme, _, rest = response.headers["www-authenticate"].partition(" ")
    assert scheme == "Bearer"
    params: dict[str, str] = {}
    for part in rest.split('", '):
        name, _, value = part.partition("=")
        params[name.strip()] = value.strip().strip('"')
    return params


@pytest.fixture(scope="module")
def shared(issuer: Issuer, seed_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Instance]:
    """canon trusting the issuer, shared by the tests that neither write nor rotate keys."""
    with canon(seed_template, tmp_path_factory.mktemp("oauth"), settings(issuer)) as instance:
        yield instance


# -- metadata and challenges ----------------------------------------------------------------------------------------
async def test_protected_resource_metadata_names_the_resource_and_its_issuer(shared: Instance, issuer: Issuer) -> None:
    async with http(shared) as client:
        response = await client.get("/.well-known/oauth-protected-resource")

    assert response.status_code == 200
    document = response.json()
    assert document["resource"] == RESOURCE
    assert document["authorization_servers"] == [issuer.url]
    assert set(document["scopes_supported"]) == {"canon:read", "canon:write", "canon:admin"}
    assert document["bearer_methods_supported"] == ["header"]


async def test_a_resource_with_a_path_has_its_metadata_under_that_path(issuer: Issuer, seed_template: Path,
                                                                       tmp_path: Path) -> None:  # fmt: skip
    with canon(seed_template, tmp_path, settings(issuer, resource=f"{RESOURCE}/mcp")) as instance:
        async with http(instance) as client:
            at_path = await client.get("/.well-known/oauth-protected-resource/mcp")
            at_root = await client.get("/.well-known/oauth-protected-resource")
            refused = await client.post("/mcp", json={}, headers=bearer("not-a-token"))

    assert at_path.status_code == 200
    assert at_path.json()["resource"] == f"{RESOURCE}/mcp"
    assert at_root.status_code == 404
    assert challenge(refused)["resource_metadata"] == f"{METADATA}/mcp"


async def test_without_a_token_and_without_anonymous_access_the_401_points_to_the_metadata(
    issuer: Issuer, seed_template: Path, tmp_path: Path
) -> None:
    with canon(seed_template, tmp_path, settings(issuer), anonymous=False) as instance:
        async with http(instance) as client:
            mcp_answer = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            rest_answer = await client.get(f"/api/nodes/{PUBLIC}")

    for response in (mcp_answer, rest_answer):
        assert response.status_code == 401
        params = challenge(response)
        assert params["resource_metadata"] == METADATA
        assert params["scope"] == "canon:read"


# -- good tokens ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kid", ["k1", "k2"], ids=["RS256", "ES256"])
async def test_a_good_token_reads_with_its_groups_over_rest_and_graphql(
    shared: Instance, issuer: Issuer, kid: str
) -> None:
    key = next(k for k in issuer.keys if k.kid == kid)
    async with http(shared) as client:
        member = await client.get(f"/api/nodes/{RESTRICTED}", headers=bearer(issuer.token(key)))
        outsider = await client.get(f"/api/nodes/{RESTRICTED}", headers=bearer(issuer.token(key, groups=["ml"])))
        anonymous = await client.get(f"/api/nodes/{RESTRICTED}")
        query = f'{{ get_node(id: "{RESTRICTED}") {{ node {{ id }} }} }}'
        on_graphql = await client.post("/graphql", headers=bearer(issuer.token(key)), json={"query": query})

    assert member.status_code == 200, member.text
    assert member.json()["node"]["id"] == RESTRICTED
    assert on_graphql.status_code == 200, on_graphql.text
    assert on_graphql.json()["data"]["get_node"]["node"]["id"] == RESTRICTED
    assert outsider.status_code == 403  # canon's rule for a restricted node one may not read
    assert anonymous.status_code == 403


async def test_scopes_and_the_roles_claim_map_to_canon_roles(shared: Instance, issuer: Issuer) -> None:
    records = audited(shared)
    reader = issuer.token(sub="rita", scope="canon:read")
    admin = issuer.token(sub="alice", scope="openid", roles=["canon:admin"])
    async with http(shared) as client:
        refused = await client.get("/api/audit", headers=bearer(reader))
        allowed = await client.get("/api/audit", headers=bearer(admin))

    assert refused.status_code == 403, refused.text
    assert allowed.status_code == 200, allowed.text
    assert [(r.principal, r.outcome) for r in records if r.target == "get_audit_log"] == [
        ("oauth.rita", "forbidden"), ("oauth.alice", "ok")]  # fmt: skip


async def test_a_valid_token_granting_no_canon_role_is_403_insufficient_scope(shared: Instance, issuer: Issuer) -> None:
    records = audited(shared)
    token = issuer.token(scope="openid email")
    async with http(shared) as client:
        on_rest = await client.get(f"/api/nodes/{PUBLIC}", headers=bearer(token))
        on_mcp = await client.post("/mcp", headers=bearer(token) | {"Accept": "application/json, text/event-stream"},
                                   json={"jsonrpc": "2.0", "id": 1, "method": "ping"})  # fmt: skip

    for response in (on_rest, on_mcp):
        assert response.status_code == 403, response.text
        assert response.json()["error"] == "insufficient_scope"
        params = challenge(response)
        assert params["error"] == "insufficient_scope"
        assert params["scope"] == "canon:read"
        assert params["resource_metadata"] == METADATA
    assert on_rest.headers["content-type"].startswith("application/problem+json")
    assert [r.outcome for r in records] == ["rejected"] * 2


@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])
async def test_a_good_token_over_mcp_with_the_sdk_client_sees_what_its_groups_may(
    shared: Instance, issuer: Issuer, mode: str
) -> None:
    token = issuer.token(sub="pat", groups=["security"])
    with live(shared, surfaces=[McpSurface()]) as base:
        async with (
            httpx2.AsyncClient(headers=bearer(token), timeout=30) as http_client,
            mcp.Client(streamable_http_client(f"{base}/mcp", http_client=http_client), mode=mode) as client,  # pyright: ignore[reportArgumentType]
        ):
            restricted = await client.call_tool("get_node", {"id": RESTRICTED})
            write = await client.call_tool("delete_node", {"id": PUBLIC})

    assert not restricted.is_error, restricted
    assert isinstance(restricted.structured_content, dict)
    assert restricted.structured_content["node"]["id"] == RESTRICTED
    assert tool_error(write)["code"] == "forbidden"  # canon:read maps to the reader role


# -- bad tokens -----------------------------------------------------------------------------------------------------
def _unsigned(issuer: Issuer) -> str:
    header = base64.urlsafe_b64encode(b'{"alg":"none","typ":"JWT"}').rstrip(b"=").decode()
    claims = jwt.decode(issuer.token(), options={"verify_signature": False})
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"{header}.{payload}."


def _hmac_with_public_key(issuer: Issuer) -> str:
    """The classic confusion attack: HS256 'signed' with the issuer's public key as the secret."""
    public = issuer.keys[0].private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)  # fmt: skip
    claims = jwt.decode(issuer.token(), options={"verify_signature": False})
    header = base64.urlsafe_b64encode(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "k1"}).encode())
    signing_input = header.rstrip(b"=") + b"." + base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=")
    signature = base64.urlsafe_b64encode(hmac.new(public, signing_input, hashlib.sha256).digest()).rstrip(b"=")
    return (signing_input + b"." + signature).decode()


def _tampered(issuer: Issuer) -> str:
    header, payload, signature = issuer.token().split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["groups"] = ["payments", "security", "admins"]
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"{header}.{forged}.{signature}"


def _foreign_key(issuer: Issuer) -> str:
    return issuer.token(rsa_key("k-unknown"))


BAD_TOKENS: dict[str, tuple[Callable[[Issuer], str], str]] = {  # what it is -> (how to make it, audited reason)
    "wrong issuer": (lambda i: i.token(iss="http://127.0.0.1:1/realms/other"), "wrong issuer"),
    "wrong audience": (lambda i: i.token(aud="https://another-service.example"), "wrong audience"),
    "expired": (lambda i: i.token(exp=int(time.time()) - 120, iat=int(time.time()) - 600), "expired token"),
    "not yet valid": (lambda i: i.token(nbf=int(time.time()) + 600), "token not yet valid"),
    "alg none": (_unsigned, "algorithm not allowed"),
    "HS256 with the public key": (_hmac_with_public_key, "algorithm not allowed"),
    "unknown kid": (_foreign_key, "unknown key"),
    "tampered payload": (_tampered, "bad signature"),
    "no exp": (lambda i: i.token(exp=None), "missing claim"),
    "not a JWT": (lambda i: "not.a-jwt", "malformed token"),
    "exp a numeric string": (lambda i: i.token(exp=str(int(time.time()) + 600)), "claim exp of the wrong type"),
    "iat a string": (lambda i: i.token(iat="yesterday"), "claim iat of the wrong type"),
    "nbf true": (lambda i: i.token(nbf=True), "claim nbf of the wrong type"),
    "sub a number": (lambda i: i.token(sub=42), "claim sub of the wrong type"),
    "a revoked canon token": (lambda i: "canon_not-a-known-token", "unknown canon token"),
}


@pytest.mark.parametrize("kind", list(BAD_TOKENS))
async def test_every_bad_token_is_a_401_audited_as_rejected_never_anonymous(
    shared: Instance, issuer: Issuer, kind: str
) -> None:
    make, reason = BAD_TOKENS[kind]
    records = audited(shared)
    token = make(issuer)
    async with http(shared) as client:
        on_rest = await client.get(f"/api/nodes/{PUBLIC}", headers=bearer(token))  # anonymous could read it
        on_mcp = await client.post("/mcp", headers=bearer(token) | {"Accept": "application/json, text/event-stream"},
                                   json={"jsonrpc": "2.0", "id": 1, "method": "ping"})  # fmt: skip

    for response in (on_rest, on_mcp):
        assert response.status_code == 401, response.text
        params = challenge(response)
        assert params["error"] == "invalid_token"
        assert params["resource_metadata"] == METADATA
        assert params["error_description"] == f"The bearer token was refused: {reason}."  # which check, no claim
    assert on_rest.json()["error_description"] == on_rest.json()["detail"] == params["error_description"]
    assert [(r.outcome, r.principal) for r in records] == [("rejected", f"(invalid token: {reason})")] * 2
    assert all(token not in json.dumps(r.__dict__) for r in records)


# -- keys over time -------------------------------------------------------------------------------------------------
async def test_a_rotated_key_is_fetched_and_a_retired_one_refused(seed_template: Path, tmp_path: Path) -> None:
    with running_issuer() as issuer, canon(seed_template, tmp_path, settings(issuer, jwks_min_refresh_s=0)) as inst:
        old = issuer.keys[0]
        async with http(inst) as client:
            before = await client.get(f"/api/nodes/{RESTRICTED}", headers=bearer(issuer.token(old)))
            new = rsa_key("k3")
            issuer.keys = [new]  # the issuer rotates: k3 signs from now on, k1 and k2 are gone
            after = await client.get(f"/api/nodes/{RESTRICTED}", headers=bearer(issuer.token(new)))
            retired = await client.get(f"/api/nodes/{RESTRICTED}", headers=bearer(issuer.token(old)))

    assert before.status_code == 200, before.text
    assert after.status_code == 200, after.text
    assert retired.status_code == 401
    assert issuer.jwks_fetches == 3  # the first token, the new kid, the old kid once it was no longer known


async def test_unknown_kids_fetch_the_jwks_at_most_once_per_refresh_interval(seed_template: Path,
                                                                            tmp_path: Path) -> None:  # fmt: skip
    with running_issuer() as issuer, canon(seed_template, tmp_path, settings(issuer)) as instance:
        async with http(instance) as client:
            good = await client.get(f"/api/nodes/{PUBLIC}", headers=bearer(issuer.token()))
            made_up = [await client.get(f"/api/nodes/{PUBLIC}", headers=bearer(issuer.token(rsa_key(f"x{i}"))))
                       for i in range(5)]  # fmt: skip

    assert good.status_code == 200
    assert [r.status_code for r in made_up] == [401] * 5
    assert issuer.jwks_fetches == 1


async def test_an_unreachable_issuer_refuses_its_tokens_and_is_not_asked_again_at_once(
    seed_template: Path, tmp_path: Path
) -> None:
    with running_issuer() as issuer, canon(seed_template, tmp_path, settings(issuer)) as instance:
        issuer.up = False
        records = audited(instance)
        async with http(instance) as client:
            answers = [await client.get(f"/api/nodes/{PUBLIC}", headers=bearer(issuer.token())) for _ in range(3)]

    assert [a.status_code for a in answers] == [401] * 3
    assert {r.principal for r in records} == {"(invalid token: issuer keys unavailable)"}
    assert issuer.requests == 2  # one try: OpenID Connect discovery, then RFC 8414's; none for the next tokens


async def test_a_discovery_document_naming_another_issuer_is_not_trusted(seed_template: Path, tmp_path: Path) -> None:
    with (
        running_issuer(claims_to_be="https://impostor.example") as issuer,
        canon(seed_template, tmp_path, settings(issuer)) as instance,
    ):
        async with http(instance) as client:
            response = await client.get(f"/api/nodes/{PUBLIC}", headers=bearer(issuer.token()))

    assert response.status_code == 401
    assert issuer.jwks_fetches == 0


async def test_keys_fetched_before_serve_on_while_the_issuer_is_down(seed_template: Path, tmp_path: Path) -> None:
    expiring = {"jwks_cache_s": 0, "jwks_min_refresh_s": 0}  # fetch again on every token
    with running_issuer() as issuer, canon(seed_template, tmp_path, settings(issuer, **expiring)) as instance:
        async with http(instance) as client:
            first = await client.get(f"/api/nodes/{RESTRICTED}", headers=bearer(issuer.token()))
            issuer.up = False
            later = await client.get(f"/api/nodes/{RESTRICTED}", headers=bearer(issuer.token(sub="sam")))

    assert (first.status_code, later.status_code) == (200, 200)
    assert issuer.requests > 2  # it was asked again, and failed


async def test_a_token_accepted_once_is_accepted_again_without_checking_it_anew(seed_template: Path,
                                                                              tmp_path: Path) -> None:  # fmt: skip
    expiring = {"jwks_cache_s": 0, "jwks_min_refresh_s": 0}  # keys fetched again for every token checked
    with running_issuer() as issuer, canon(seed_template, tmp_path, settings(issuer, **expiring)) as instance:
        token = issuer.token()
        async with http(instance) as client:
            first = await client.get(f"/api/nodes/{RESTRICTED}", headers=bearer(token))
            asked = issuer.requests
            again = await client.get(f"/api/nodes/{RESTRICTED}", headers=bearer(token))

    assert (first.status_code, again.status_code) == (200, 200)
    assert issuer.requests == asked  # remembered until its exp: no keys fetched, no signature checked


def test_graphql_over_websocket_accepts_the_issuers_token_in_connection_init(shared: Instance, issuer: Issuer) -> None:
    url = "/graphql"
    protocol = [Subprotocol("graphql-transport-ws")]
    query = f'{{ get_node(id: "{RESTRICTED}") {{ node {{ id }} }} }}'  # a member of group:payments may read it
    with live(shared) as base, connect(base.replace("http://", "ws://") + url, subprotocols=protocol) as socket:
        socket.send(json.dumps({"type": "connection_init", "payload": {"Authorization": f"Bearer {issuer.token()}"}}))
        assert json.loads(socket.recv(timeout=10))["type"] == "connection_ack"
        socket.send(json.dumps({"id": "1", "type": "subscribe", "payload": {"query": query}}))
        answer = json.loads(socket.recv(timeout=10))

    assert answer["type"] == "next", answer
    assert answer["payload"]["data"]["get_node"]["node"]["id"] == RESTRICTED


async def test_the_issuers_principals_are_named_apart_from_canons_tokens(seed_template: Path, tmp_path: Path,
                                                                       issuer: Issuer) -> None:  # fmt: skip
    with canon(seed_template, tmp_path, settings(issuer)) as inst:
        records = audited(inst)
        admin = Principal("root", frozenset({"admin"}))
        for node, reader in ((PUBLIC, "user:alice"), (RESTRICTED, "user:oauth.alice")):
            patch = {"id": node, "visibility": "restricted", "readers": [reader]}
            assert not inst.dispatcher.call_tool(admin, "stdio", "patch_node", patch).is_error
        static = inst.tokens.create("alice", "reader")
        jwt_alice = issuer.token(sub="alice", groups=[])
        async with http(inst) as client:
            callers = (("static", static), ("jwt", jwt_alice))
            answers = {(who, node): (await client.get(f"/api/nodes/{node}", headers=bearer(token))).status_code
                       for who, token in callers for node in (PUBLIC, RESTRICTED)}  # fmt: skip

    assert answers == {("static", PUBLIC): 200, ("static", RESTRICTED): 403,
                       ("jwt", PUBLIC): 403, ("jwt", RESTRICTED): 200}  # fmt: skip
    assert {r.principal for r in records if r.target == "get_node"} == {"alice", "oauth.alice"}


async def test_static_tokens_still_work_beside_the_issuer(shared: Instance, issuer: Issuer) -> None:
    secret = shared.tokens.create("ci-bot", "reader", ["security"])
    async with http(shared) as client:
        response = await client.get(f"/api/nodes/{RESTRICTED}", headers=bearer(secret))

    assert response.status_code == 200, response.text


def test_canon_serve_configured_by_canon_toml_accepts_the_issuers_tokens(seed_template: Path, tmp_path: Path,
                                                                        issuer: Issuer) -> None:  # fmt: skip
    store = copy_store(seed_template, tmp_path / "canon.db")
    (tmp_path / "canon.toml").write_text(f'[oauth]\nissuer = "{issuer.url}"\nresource = "{RESOURCE}"\n\n'
                                         "[auth]\nanonymous = false\n", encoding="utf-8")  # fmt: skip
    with serving(store, cwd=tmp_path) as process, httpx2.Client(base_url=process.base, timeout=30) as client:
        member = client.get(f"/api/nodes/{RESTRICTED}", headers=bearer(issuer.token()))
        without = client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        metadata = client.get("/.well-known/oauth-protected-resource")
        announced = process.output()

    assert member.status_code == 200, member.text
    assert without.status_code == 401
    assert challenge(without)["resource_metadata"] == METADATA
    assert metadata.json()["authorization_servers"] == [issuer.url]
    assert f"the access tokens of {issuer.url}" in announced


# -- a slow issuer ----------------------------------------------------------------------------------------------------
async def test_a_stalled_issuer_delays_a_token_by_one_fetch_timeout_not_one_per_document(
    seed_template: Path, tmp_path: Path
) -> None:
    deadline = 1.0  # of the whole fetch; a timeout per document would have waited for two of them
    with running_issuer() as issuer, canon(seed_template, tmp_path, settings(issuer, fetch_timeout_s=deadline)) as inst:
        issuer.stalled = True
        async with http(inst) as client:
            started = time.monotonic()
            response = await client.get(f"/api/nodes/{PUBLIC}", headers=bearer(issuer.token()))
            took = time.monotonic() - started

    assert response.status_code == 401
    assert challenge(response)["error_description"] == "The bearer token was refused: issuer keys unavailable."
    assert deadline <= took < deadline + 5, took  # 20 s before: two discovery documents, 10 s each


async def test_while_keys_are_fetched_other_tokens_never_wait_for_the_fetch(seed_template: Path,
                                                                           tmp_path: Path) -> None:  # fmt: skip
    patient = {"fetch_timeout_s": 30, "jwks_min_refresh_s": 0}  # a fetch for every unknown kid, none cut short
    with running_issuer() as issuer, canon(seed_template, tmp_path, settings(issuer, **patient)) as inst:
        async with http(inst) as client:
            first = await client.get(f"/api/nodes/{RESTRICTED}", headers=bearer(issuer.token()))  # keys k1, k2
            issuer.stalled = True
            answered: dict[str, httpx2.Response] = {}

            async def rotated() -> None:  # a kid canon does not know: it fetches the keys, and the issuer stalls
                unknown = issuer.token(rsa_key("k9"))
                answered["rotated"] = await client.get(f"/api/nodes/{PUBLIC}", headers=bearer(unknown))

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(rotated)
                assert await anyio.to_thread.run_sync(issuer.asked.wait, 10)
                with anyio.fail_after(10):  # the fetch in flight takes up to 30 s
                    forged = await client.get(f"/api/nodes/{PUBLIC}", headers=bearer(issuer.token(rsa_key("k8"))))
                    known = await client.get(f"/api/nodes/{RESTRICTED}", headers=bearer(issuer.token(sub="sam")))
                still_fetching = "rotated" not in answered
                issuer.released.set()

    assert first.status_code == 200, first.text
    assert still_fetching  # the two answers came while the fetch was in flight, not after it
    assert forged.status_code == 401
    assert challenge(forged)["error_description"] == "The bearer token was refused: unknown key."
    assert known.status_code == 200, known.text  # a key known before serves on
    assert answered["rotated"].status_code == 401  # fetched at last: k9 is not the issuer's


# -- the docs pages with anonymous access off -------------------------------------------------------------------------
async def test_without_anonymous_access_the_page_shells_are_served_and_what_they_call_needs_a_token(
    issuer: Issuer, seed_template: Path, tmp_path: Path
) -> None:
    browser = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
    with canon(seed_template, tmp_path, settings(issuer), anonymous=False) as inst:
        query = example_query(inst.registry)
        async with http(inst) as client:
            shells = [await client.get(path, headers=browser) for path in ("/docs", "/graphql")]
            data = [await client.get("/openapi.json"), await client.post("/graphql", json={"query": query}),
                    await client.get("/graphql", params={"query": query}, headers=browser),
                    await client.get("/graphql", params={"query": ""}, headers=browser),
                    await client.get("/llms.txt"), await client.get("/schema.graphql")]  # fmt: skip
            with_token = await client.post("/graphql", json={"query": query}, headers=bearer(issuer.token()))

    for shell in shells:
        assert shell.status_code == 200, shell.text
        assert shell.headers["content-type"].startswith("text/html")
    docs, graphiql = (s.text for s in shells)
    assert 'id="canon-token"' in docs  # a field for the token the document needs
    assert "requestInterceptor" in docs
    assert json.dumps(query) in graphiql  # opened on this model's query, not GraphiQL's welcome
    assert json.dumps('{"Authorization": "Bearer "}') in graphiql
    assert "Welcome to GraphiQL" not in graphiql.split("const WELCOME")[0]
    assert [r.status_code for r in data] == [401] * len(data)
    assert with_token.status_code == 200, with_token.text
    answer = with_token.json()
    assert "errors" not in answer, answer
    assert answer["data"]["get_node"]["node"]["id"] == inst.registry.examples.id  # pyright: ignore[reportOptionalMemberAccess]
    assert answer["data"]["get_neighbors"]["total"] > 0
