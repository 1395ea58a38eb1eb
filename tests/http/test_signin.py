"""A browser's sign-in with the OAuth issuer (OpenID Connect, code flow with PKCE) and its session cookie, against a
real OpenID Connect provider (oidc-provider from npm, `tests.identity_provider`) started here.

canon runs in this process (its ASGI app over httpx's transport, at `RESOURCE`); the provider is a real process on
its own port, which canon asks for its discovery document, keys and tokens over real HTTP, as in production. The
"browser" is two httpx clients with cookie jars: one for canon, one for the provider, whose login and consent forms
it fills as a person would. Every refusal (tampered state, injected nonce, replayed code, expired or forged cookie,
cross-site request) is checked to leave no session.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import re
import secrets
import time
from collections.abc import AsyncGenerator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit

import httpx2
import jwt
import psutil
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect
from websockets.typing import Subprotocol

from core.http.app import build_app
from core.http.oauth import JwtVerifier
from core.http.signin import SESSION_COOKIE, SignIn, cross_site_refusal, safe_return
from core.ops.config import OAuthSettings
from core.seam.instance import Instance
from tests.conftest import copy_store
from tests.generators.conftest import live
from tests.http.test_oauth import RESOURCE, audited, canon
from tests.identity_provider import Provider, running_provider, sign_in_at_provider
from tests.mcp.conftest import serving
from tests.reverse_proxy import free_port

pytestmark = pytest.mark.anyio

RESTRICTED = "svc-card-vault"  # readers: group:payments, group:security
ACCOUNTS = {
    "pat": {"groups": ["payments"], "roles": ["canon:read", "canon:write"]},
    "robin": {"groups": [], "roles": []},  # signs in at the provider, but has no role in canon
}
HTML = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
OWN = {"Origin": RESOURCE}


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with running_provider(redirect_uris=[f"{RESOURCE}/signin/callback"], post_logout_redirect_uris=[f"{RESOURCE}/"],
                          resource=RESOURCE, accounts=ACCOUNTS) as running:  # fmt: skip
        yield running


def settings(provider: Provider, **overrides: Any) -> OAuthSettings:
    return replace(OAuthSettings(issuer=provider.issuer, resource=RESOURCE, roles_claim="roles",
                                 client_id=provider.client_id, client_secret=provider.client_secret,
                                 scopes=("openid",)), **overrides)  # fmt: skip


@pytest.fixture(scope="module")
def shared(provider: Provider, seed_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Instance]:
    with canon(seed_template, tmp_path_factory.mktemp("signin"), settings(provider), anonymous=False) as instance:
        yield instance


@contextlib.asynccontextmanager
async def site(instance: Instance) -> AsyncGenerator[tuple[httpx2.AsyncClient, SignIn]]:
    """canon's app, and a client that keeps cookies as a browser does (`follow_redirects` off: each step is seen)."""
    app = build_app(instance)
    async with app.router.lifespan_context(app):
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url=RESOURCE) as client:
            yield client, app.state.sign_in


def at_provider(provider: Provider) -> httpx2.Client:
    return httpx2.Client(base_url=provider.issuer, timeout=30)


async def start(client: httpx2.AsyncClient, back_to: str = "/docs") -> str:
    """A browser asks canon for the page `back_to` without a session: the URL canon sends it to at the provider."""
    asked = await client.get(back_to, headers=HTML)
    assert asked.status_code == 303, asked.text
    signin = asked.headers["location"]
    assert signin.startswith("/signin?return=")
    sent = await client.get(signin)
    assert sent.status_code == 303, sent.text
    return sent.headers["location"]


async def sign_in(client: httpx2.AsyncClient, provider: Provider, login: str = "pat", back_to: str = "/docs") -> str:
    """The whole sign-in; gives where canon finally sends the browser."""
    authorize = await start(client, back_to)
    with at_provider(provider) as browser:
        back = sign_in_at_provider(browser, provider.issuer, authorize, login)
    done = await client.get(back)
    assert done.status_code == 303, done.text
    return done.headers["location"]


def caller_line(page: str) -> str:
    found = re.search(r'<div id="caller">(.*?)</div>', page, re.S)
    assert found is not None, page
    return found.group(1)


def who(page: str) -> tuple[str, str, str]:
    """The name, roles and groups the landing page says its caller has."""
    line = caller_line(page)
    spans = {k: re.search(rf'<span class="{k}">(.*?)</span>', line) for k in ("name", "roles", "groups")}
    assert all(spans.values()), line
    return tuple(m.group(1) for m in spans.values() if m is not None)  # type: ignore[return-value]


# -- the sign-in ----------------------------------------------------------------------------------------------------
async def test_a_browser_asking_a_page_signs_in_with_pkce_and_comes_back_with_a_session(
    shared: Instance, provider: Provider
) -> None:
    async with site(shared) as (client, _):
        authorize = await start(client, "/docs?x=1")
        asked = parse_qs(urlsplit(authorize).query)
        assert authorize.startswith(f"{provider.issuer}/auth?")
        assert asked["response_type"] == ["code"]
        assert asked["client_id"] == [provider.client_id]
        assert asked["redirect_uri"] == [f"{RESOURCE}/signin/callback"]
        assert asked["code_challenge_method"] == ["S256"]
        assert len(asked["state"][0]) >= 32
        assert len(asked["nonce"][0]) >= 32
        assert asked["scope"] == ["openid"]
        with at_provider(provider) as browser:
            back = sign_in_at_provider(browser, provider.issuer, authorize, "pat")
        done = await client.get(back)
        assert done.status_code == 303
        assert done.headers["location"] == "/docs?x=1"  # back where it was
        cookies = done.headers.get_list("set-cookie")
        session = next(c for c in cookies if c.startswith(f"{SESSION_COOKIE}="))
        attributes = [a.strip() for a in session.split(";")]
        assert "HttpOnly" in attributes
        assert "SameSite=Lax" in attributes
        assert "Path=/" in attributes
        assert "Secure" not in attributes  # plain http here; https: tests below
        assert 0 < int(next(a for a in attributes if a.startswith("Max-Age="))[8:]) <= 3600  # the ID token's exp
        value = session.split(";")[0].split("=", 1)[1]
        assert "pat" not in value
        assert "payments" not in base64.urlsafe_b64decode(value + "==").decode("latin-1")  # sealed, not readable
        assert any(c.startswith("canon_signin=;") and "Path=/signin/" in c for c in cookies)  # the sign-in is over

        page = await client.get("/", headers=HTML)
        assert who(page.text) == ("oauth.pat", "reader, writer", "payments")
        assert "Signed in as" in caller_line(page.text)
        restricted = await client.get(f"/api/nodes/{RESTRICTED}")  # the group's node, read with the session
        assert restricted.status_code == 200, restricted.text
        docs = await client.get("/docs", headers=HTML)
        assert docs.status_code == 200


async def test_the_session_is_the_principal_a_bearer_token_with_the_same_claims_is(
    shared: Instance, provider: Provider
) -> None:
    """The provider's own access token for the same person (a JWT for canon, with the same groups and roles claims)
    and the session cookie: one principal, with the same name, roles and groups, in the page and in the audit."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = urlencode({"response_type": "code", "client_id": provider.client_id, "scope": "openid",
                       "redirect_uri": f"{RESOURCE}/signin/callback", "state": "s" * 32, "nonce": "n" * 32,
                       "code_challenge": challenge, "code_challenge_method": "S256", "resource": RESOURCE})  # fmt: skip
    with at_provider(provider) as browser:
        back = sign_in_at_provider(browser, provider.issuer, f"{provider.issuer}/auth?{query}", "pat")
        code = parse_qs(urlsplit(back).query)["code"][0]
        tokens = browser.post("/token", auth=(provider.client_id, provider.client_secret), data={
            "grant_type": "authorization_code", "code": code, "redirect_uri": f"{RESOURCE}/signin/callback",
            "code_verifier": verifier, "resource": RESOURCE}).json()  # fmt: skip
    access = tokens["access_token"]
    assert jwt.decode(access, options={"verify_signature": False})["aud"] == RESOURCE  # a JWT for canon
    records = audited(shared)
    async with site(shared) as (client, _):
        by_token = await client.get("/", headers={"Authorization": f"Bearer {access}"})
        assert "Calling as" in caller_line(by_token.text)
        read = await client.get(f"/api/nodes/{RESTRICTED}", headers={"Authorization": f"Bearer {access}"})
        assert read.status_code == 200
        await sign_in(client, provider)
        by_session = await client.get("/", headers=HTML)
        assert "Signed in as" in caller_line(by_session.text)
        assert (await client.get(f"/api/nodes/{RESTRICTED}")).status_code == 200
    assert who(by_session.text) == who(by_token.text) == ("oauth.pat", "reader, writer", "payments")
    reads = [r.principal for r in records if r.target == "get_node"]
    assert reads == ["oauth.pat", "oauth.pat"]


async def test_a_bearer_token_wins_over_the_session_cookie(shared: Instance, provider: Provider) -> None:
    async with site(shared) as (client, _):
        await sign_in(client, provider)
        bad = await client.get(f"/api/nodes/{RESTRICTED}", headers={"Authorization": "Bearer not-a-token"})
        assert bad.status_code == 401  # a refused token is refused, never served as the cookie's principal
        token = shared.tokens.create("ci-reader", "reader", ())
        page = await client.get("/", headers={"Authorization": f"Bearer {token}"} | HTML)
        assert who(page.text) == ("ci-reader", "reader", "none")  # the token's principal, not the session's
        assert (await client.get(f"/api/nodes/{RESTRICTED}", headers={"Authorization": f"Bearer {token}"})
                ).status_code == 403  # fmt: skip


async def test_an_api_client_without_credentials_still_gets_the_401_challenge(shared: Instance) -> None:
    async with site(shared) as (client, _):
        answer = await client.get(f"/api/nodes/{RESTRICTED}", headers={"Accept": "application/json"})
        assert answer.status_code == 401
        assert answer.headers["content-type"].startswith("application/problem+json")
        assert "resource_metadata=" in answer.headers["www-authenticate"]
        shell = await client.get("/openapi.json")
        assert shell.status_code == 401


async def test_an_account_with_no_canon_role_signs_in_at_the_provider_but_gets_no_session(
    shared: Instance, provider: Provider
) -> None:
    records = audited(shared)
    async with site(shared) as (client, _):
        authorize = await start(client)
        with at_provider(provider) as browser:
            back = sign_in_at_provider(browser, provider.issuer, authorize, "robin")
        done = await client.get(back)
        assert done.status_code == 403
        assert "no role in canon" in done.text
        assert not any(c.startswith(f"{SESSION_COOKIE}=") for c in done.headers.get_list("set-cookie"))
    assert any(r.outcome == "rejected" and "no canon role" in r.principal for r in records), records


# -- what is refused ------------------------------------------------------------------------------------------------
def _no_session(answer: httpx2.Response) -> None:
    assert not any(c.startswith(f"{SESSION_COOKIE}=") and "Max-Age=0" not in c
                   for c in answer.headers.get_list("set-cookie"))  # fmt: skip


async def test_a_tampered_state_is_refused(shared: Instance, provider: Provider) -> None:
    records = audited(shared)
    async with site(shared) as (client, _):
        authorize = await start(client)
        with at_provider(provider) as browser:
            back = sign_in_at_provider(browser, provider.issuer, authorize, "pat")
        state = parse_qs(urlsplit(back).query)["state"][0]
        tampered = back.replace(f"state={state}", f"state={state[:-2]}xy")
        answer = await client.get(tampered)
        assert answer.status_code == 400
        assert "state does not match" in answer.text
        _no_session(answer)
        assert (await client.get(f"/api/nodes/{RESTRICTED}")).status_code == 401
    assert any("state mismatch" in r.principal for r in records)


async def test_an_id_token_with_another_nonce_is_refused(shared: Instance, provider: Provider) -> None:
    """The provider is sent a nonce other than the one this browser's sign-in holds (a code and ID token injected
    from another sign-in): the code exchanges, and the ID token is refused."""
    records = audited(shared)
    async with site(shared) as (client, _):
        authorize = await start(client)
        nonce = parse_qs(urlsplit(authorize).query)["nonce"][0]
        with at_provider(provider) as browser:
            back = sign_in_at_provider(browser, provider.issuer, authorize.replace(nonce, "another" + nonce[7:]), "pat")
        answer = await client.get(back)
        assert answer.status_code == 400
        assert "nonce" in answer.text
        _no_session(answer)
    assert any("nonce mismatch" in r.principal for r in records)


async def test_a_replayed_code_is_refused(shared: Instance, provider: Provider) -> None:
    async with site(shared) as (client, _):
        authorize = await start(client)
        flow = client.cookies.get("canon_signin")
        assert flow
        with at_provider(provider) as browser:
            back = sign_in_at_provider(browser, provider.issuer, authorize, "pat")
        assert (await client.get(back)).status_code == 303
    async with site(shared) as (replayer, _):  # the same callback again, with the same sign-in cookie
        replayer.cookies.set("canon_signin", flow)
        answer = await replayer.get(back)
        assert answer.status_code == 400
        assert "invalid_grant" in answer.text
        _no_session(answer)


async def test_a_callback_without_the_sign_in_cookie_is_refused(shared: Instance, provider: Provider) -> None:
    async with site(shared) as (client, _):
        authorize = await start(client)
        with at_provider(provider) as browser:
            back = sign_in_at_provider(browser, provider.issuer, authorize, "pat")
    async with site(shared) as (other, _):  # another browser, which did not start this sign-in
        answer = await other.get(back)
        assert answer.status_code == 400
        assert "not started here" in answer.text
        _no_session(answer)


async def test_an_expired_session_is_no_session(shared: Instance, provider: Provider) -> None:
    async with site(shared) as (client, sign_in_):
        claims = {"sub": "pat", "roles": ["canon:read"], "groups": ["payments"]}
        live = sign_in_.session_cookie(claims, time.time() + 60, secure=False, path="/").split(";")[0].split("=", 1)[1]
        dead = sign_in_.session_cookie(claims, time.time() - 1, secure=False, path="/").split(";")[0].split("=", 1)[1]
        client.cookies.set(SESSION_COOKIE, live)
        assert (await client.get(f"/api/nodes/{RESTRICTED}")).status_code == 200
        beside = {"Cookie": f'other="unterminated; x=a b; {SESSION_COOKIE}={live}'}  # another app's odd cookies
        assert (await client.get(f"/api/nodes/{RESTRICTED}", headers=beside)).status_code == 200
        client.cookies.set(SESSION_COOKIE, dead)
        assert (await client.get(f"/api/nodes/{RESTRICTED}")).status_code == 401
        page = await client.get("/docs", headers=HTML)
        assert page.status_code == 303
        assert page.headers["location"] == "/signin?return=%2Fdocs"


@pytest.mark.parametrize("forged", ["garbage", "gAAAAA" + "A" * 120, "sealed with another secret", "a;b=c"])
async def test_a_forged_cookie_is_no_session_and_no_error(shared: Instance, provider: Provider, forged: str) -> None:
    async with site(shared) as (client, _):
        if forged == "sealed with another secret":
            assert shared.config.oauth is not None
            other = SignIn(JwtVerifier(replace(shared.config.oauth, client_secret="another")), public_url=None)
            forged = other.session_cookie({"sub": "pat", "roles": ["canon:admin"]}, time.time() + 60,
                                          secure=False, path="/").split(";")[0].split("=", 1)[1]  # fmt: skip
        headers = {"Cookie": f"{SESSION_COOKIE}={forged}"}
        api = await client.get(f"/api/nodes/{RESTRICTED}", headers=headers)
        assert api.status_code == 401
        page = await client.get("/docs", headers=headers | HTML)
        assert page.status_code == 303
        landing = await client.get("/", headers=headers | HTML)
        assert landing.status_code == 200
        assert "Not signed in" in caller_line(landing.text)


async def test_a_request_with_the_session_cookie_that_changes_something_must_come_from_canons_origin(
    shared: Instance, provider: Provider
) -> None:
    query = {"query": "{ describe_model { name } }"}
    records = audited(shared)
    async with site(shared) as (client, _):
        await sign_in(client, provider)
        assert (await client.post("/graphql", json=query, headers=OWN)).status_code == 200
        fetch = await client.post("/graphql", json=query, headers={"Sec-Fetch-Site": "same-origin"})
        assert fetch.status_code == 200
        for headers in ({}, {"Origin": "http://127.0.0.1:9999"}, {"Sec-Fetch-Site": "same-site"}):
            refused = await client.post("/graphql", json=query, headers=headers)
            assert refused.status_code == 403, headers
            assert refused.json()["code"] == "origin_not_allowed"
            assert "session cookie" in refused.json()["detail"]
        read = await client.get(f"/api/nodes/{RESTRICTED}", headers={"Origin": "http://127.0.0.1:9999"})
        assert read.status_code == 200  # a read changes nothing (and SameSite keeps other sites' reads cookieless)
    assert any(r.outcome == "rejected" and "cross-site" in r.principal for r in records)


def test_a_websocket_opened_with_the_session_cookie_must_come_from_canons_origin(shared: Instance) -> None:
    """GraphQL subscriptions over a WebSocket carry the cookie (no token in `connection_init`): canon's own page may
    open one, a page on another origin may not (cross-site WebSocket hijacking)."""
    assert shared.config.oauth is not None
    claims = {"sub": "pat", "roles": ["canon:read"], "groups": ["payments"]}
    made = SignIn(JwtVerifier(shared.config.oauth), public_url=None)  # the same key: as another worker would
    cookie = made.session_cookie(claims, time.time() + 60, secure=False, path="/").split(";")[0]
    protocol = [Subprotocol("graphql-transport-ws")]
    query = f'{{ get_node(id: "{RESTRICTED}") {{ node {{ id }} }} }}'
    with live(shared) as base:
        url = base.replace("http://", "ws://") + "/graphql"
        with connect(url, subprotocols=protocol, additional_headers={"Cookie": cookie, "Origin": base}) as socket:
            socket.send(json.dumps({"type": "connection_init", "payload": {}}))
            assert json.loads(socket.recv(timeout=10))["type"] == "connection_ack"
            socket.send(json.dumps({"id": "1", "type": "subscribe", "payload": {"query": query}}))
            answer = json.loads(socket.recv(timeout=10))
        assert answer["payload"]["data"]["get_node"]["node"]["id"] == RESTRICTED, answer
        with pytest.raises(InvalidStatus) as refused:
            connect(url, subprotocols=protocol, additional_headers={"Cookie": cookie, "Origin": "http://127.0.0.1:9"})
        assert refused.value.response.status_code == 403


async def test_an_answer_naming_another_issuer_is_refused(shared: Instance, provider: Provider) -> None:
    """RFC 9207: the provider names itself in `iss` on the way back; an answer from another issuer is a mix-up."""
    async with site(shared) as (client, _):
        authorize = await start(client)
        with at_provider(provider) as browser:
            back = sign_in_at_provider(browser, provider.issuer, authorize, "pat")
        assert parse_qs(urlsplit(back).query)["iss"] == [provider.issuer]  # oidc-provider says who it is
        other = back.replace(f"iss={quote(provider.issuer, safe='')}", "iss=https%3A%2F%2Fevil.example")
        assert other != back
        answer = await client.get(other)
        assert answer.status_code == 400
        _no_session(answer)


async def test_scripts_with_a_bearer_token_need_no_origin(shared: Instance, provider: Provider) -> None:
    async with site(shared) as (client, _):
        authorize = await start(client)  # a cookie jar with a sign-in in progress, and no session
        assert authorize
        token = shared.tokens.create("script", "reader", ())
        answer = await client.post("/graphql", json={"query": "{ describe_model { name } }"},
                                   headers={"Authorization": f"Bearer {token}"})  # fmt: skip
        assert answer.status_code == 200


async def test_signing_out_clears_the_cookie_ends_the_session_and_the_providers(
    shared: Instance, provider: Provider
) -> None:
    async with site(shared) as (client, _):
        await sign_in(client, provider)
        kept = client.cookies.get(SESSION_COOKIE)
        assert (await client.get(f"/api/nodes/{RESTRICTED}")).status_code == 200
        offered = await client.get("/signout")  # a link may lead here: the page's button posts
        assert offered.status_code == 200
        assert '<form method="post" action="/signout">' in offered.text
        refused = await client.post("/signout")  # no Origin: a cross-site sign-out is refused too
        assert refused.status_code == 403
        out = await client.post("/signout", headers=OWN)
        assert out.status_code == 303
        end = urlsplit(out.headers["location"])
        assert f"{end.scheme}://{end.netloc}{end.path}" == f"{provider.issuer}/session/end"
        assert parse_qs(end.query) == {"client_id": [provider.client_id],
                                       "post_logout_redirect_uri": [f"{RESOURCE}/"]}  # fmt: skip
        cleared = next(c for c in out.headers.get_list("set-cookie") if c.startswith(f"{SESSION_COOKIE}="))
        assert "Max-Age=0" in cleared
        assert (await client.get(f"/api/nodes/{RESTRICTED}")).status_code == 401
        client.cookies.set(SESSION_COOKIE, kept or "")  # the signed-out cookie, kept by someone: refused here
        assert (await client.get(f"/api/nodes/{RESTRICTED}")).status_code == 401


async def test_a_session_lasts_at_most_session_max_age_s_when_that_is_sooner_than_the_id_token(
    provider: Provider, seed_template: Path, tmp_path: Path
) -> None:
    with canon(seed_template, tmp_path, settings(provider, session_max_age_s=600), anonymous=False) as instance:
        async with site(instance) as (client, _):
            authorize = await start(client)
            with at_provider(provider) as browser:
                back = sign_in_at_provider(browser, provider.issuer, authorize, "pat")
            done = await client.get(back)
    session = next(c for c in done.headers.get_list("set-cookie") if c.startswith(f"{SESSION_COOKIE}="))
    assert 590 <= int(session.split("Max-Age=", 1)[1].split(";", 1)[0]) <= 600  # not the ID token's hour


async def test_a_sign_out_from_another_site_is_refused_even_without_a_session(shared: Instance) -> None:
    async with site(shared) as (client, _):
        answer = await client.post("/signout", headers={"Origin": "http://127.0.0.1:9999"})
        assert answer.status_code == 403
        assert "must come from" in answer.text
        assert "location" not in answer.headers


async def test_behind_tls_the_cookies_are_secure_and_the_redirect_uri_is_the_public_url(
    provider: Provider, seed_template: Path, tmp_path: Path
) -> None:
    with canon(seed_template, tmp_path, settings(provider), anonymous=False) as instance:
        instance.config = replace(instance.config, public_url="https://canon.example.test/kb")
        async with site(instance) as (client, _):
            asked = await client.get("/graphql", headers={"Host": "canon.example.test"} | HTML)
            assert asked.headers["location"] == "/kb/signin?return=%2Fgraphql"  # the prefix the proxy took off
            sent = await client.get("/signin?return=/graphql", headers={"Host": "canon.example.test"})
            assert sent.status_code == 303
            asked = parse_qs(urlsplit(sent.headers["location"]).query)
            assert asked["redirect_uri"] == ["https://canon.example.test/kb/signin/callback"]
            flow = next(c for c in sent.headers.get_list("set-cookie") if c.startswith("canon_signin="))
            assert "Secure" in [a.strip() for a in flow.split(";")]
            assert "Path=/kb/signin/" in flow  # where the browser sees canon: public_url's path


@pytest.mark.parametrize(("asked", "kept"), [
    ("/docs?x=1", "/docs?x=1"), ("/", "/"), (None, "/"), ("", "/"), ("https://evil.example/", "/"),
    ("//evil.example/x", "/"), ("/\\evil.example", "/"), ("docs", "/"), ("/a\r\nSet-Cookie: x", "/"),
    ("javascript:alert(1)", "/"),
])  # fmt: skip
def test_the_return_address_is_a_path_on_this_server(asked: str | None, kept: str) -> None:
    assert safe_return(asked) == kept


async def test_a_sign_in_started_with_a_foreign_return_address_comes_back_home(
    shared: Instance, provider: Provider
) -> None:
    async with site(shared) as (client, _):
        sent = await client.get("/signin?return=//evil.example/steal")
        with at_provider(provider) as browser:
            back = sign_in_at_provider(browser, provider.issuer, sent.headers["location"], "pat")
        done = await client.get(back)
        assert done.status_code == 303
        assert done.headers["location"] == "/"


def test_every_worker_process_opens_every_session(seed_template: Path, tmp_path: Path) -> None:
    """`canon serve --workers 2`: the sign-in's steps and the requests after it land on either process (a fresh
    connection each), and each opens the other's cookies, since the key comes from the configuration alone."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    store = copy_store(seed_template, tmp_path / "canon.db")
    with running_provider(redirect_uris=[f"{base}/signin/callback"], post_logout_redirect_uris=[f"{base}/"],
                          resource=base, accounts=ACCOUNTS) as idp:  # fmt: skip
        (tmp_path / "canon.toml").write_text(
            f'[oauth]\nissuer = "{idp.issuer}"\nresource = "{base}"\nroles_claim = "roles"\n'
            f'client_id = "{idp.client_id}"\nclient_secret = "{idp.client_secret}"\nscopes = ["openid"]\n\n'
            "[auth]\nanonymous = false\n",
            encoding="utf-8",
        )
        with serving(store, "--workers", "2", "--port", str(port), cwd=tmp_path) as process:
            workers = [c for c in psutil.Process(process.popen.pid).children() if "spawn_main" in " ".join(c.cmdline())]
            assert len(workers) == 2
            jar = httpx2.Cookies()

            def fresh() -> httpx2.Client:  # a new connection per request, keeping the browser's cookies
                return httpx2.Client(base_url=base, cookies=jar, timeout=30)

            with fresh() as http:
                sent = http.get("/signin?return=/")
                jar.update(http.cookies)
            with at_provider(idp) as browser:
                back = sign_in_at_provider(browser, idp.issuer, sent.headers["location"], "pat")
            with fresh() as http:
                done = http.get(back)
                assert done.status_code == 303, done.text
                jar.update(http.cookies)
            statuses = []
            for _ in range(30):
                with fresh() as http:
                    statuses.append(http.get(f"/api/nodes/{RESTRICTED}").status_code)
    assert statuses == [200] * 30


def _scope(method: str, headers: dict[str, str], *, kind: str = "http", scheme: str = "http") -> dict[str, Any]:
    return {"type": kind, "method": method, "scheme": scheme,
            "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]}  # fmt: skip


@pytest.mark.parametrize(("method", "headers", "public_url", "allowed"), [
    ("GET", {"Host": "canon.test"}, None, True),  # reads change nothing
    ("HEAD", {"Host": "canon.test", "Origin": "https://evil.example"}, None, True),
    ("POST", {"Host": "canon.test", "Origin": "http://canon.test"}, None, True),
    ("POST", {"Host": "canon.test:80", "Origin": "http://canon.test"}, None, True),  # the default port, either way
    ("POST", {"Host": "Canon.Test", "Origin": "http://canon.test:80"}, None, True),
    ("POST", {"Host": "canon.test", "Origin": "https://canon.test"}, None, False),  # another scheme: another origin
    ("POST", {"Host": "canon.test", "Origin": "http://canon.test:8080"}, None, False),
    ("POST", {"Host": "canon.test", "Origin": "null"}, None, False),  # a sandboxed frame, a data: page
    ("DELETE", {"Host": "canon.test"}, None, False),  # no Origin, no Sec-Fetch-Site
    ("PATCH", {"Host": "canon.test", "Sec-Fetch-Site": "same-origin"}, None, True),
    ("PUT", {"Host": "canon.test", "Sec-Fetch-Site": "same-site"}, None, False),
    ("POST", {"Host": "internal:8000", "Origin": "https://canon.example.com"}, "https://canon.example.com/kb", True),
    ("POST", {"Host": "canon.example.com", "Origin": "http://canon.example.com"}, "https://canon.example.com", False),
])  # fmt: skip
def test_the_cross_site_rule(method: str, headers: dict[str, str], public_url: str | None, allowed: bool) -> None:
    assert (cross_site_refusal(_scope(method, headers), public_url) is None) is allowed


def test_every_websocket_handshake_with_the_cookie_must_come_from_canons_origin() -> None:
    scope = _scope("GET", {"Host": "canon.test", "Origin": "http://elsewhere.test"}, kind="websocket", scheme="ws")
    assert cross_site_refusal(scope, None) is not None
    own = _scope("GET", {"Host": "canon.test", "Origin": "http://canon.test"}, kind="websocket", scheme="ws")
    assert cross_site_refusal(own, None) is None
