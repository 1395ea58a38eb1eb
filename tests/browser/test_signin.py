"""Signing in with the organisation's identity provider, in a real headless Chromium: `canon serve` with `[oauth]
client_id` and anonymous access off, and a real OpenID Connect provider (oidc-provider from npm,
`tests.identity_provider`), each on its own free 127.0.0.1 port.

A person opens the docs page, is sent to the provider's login page, signs in there, and comes back to the docs page,
whose calls then carry the session cookie (Swagger UI's "Try it out" reads a restricted node); GraphiQL runs its
query with it (a POST from canon's own page: let through by the cross-site rule); the landing page names them; they
sign out, at canon and at the provider, and the docs page sends them to log in again. The pages for people
(`/browse/`) send them to sign in too, then show and write as their principal.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, Route, expect

from tests.browser.conftest import WAIT_MS, Site, try_out
from tests.conftest import copy_store
from tests.identity_provider import Provider, running_provider
from tests.mcp.conftest import serving
from tests.reverse_proxy import free_port

RESTRICTED = "svc-card-vault"  # readers: group:payments, group:security
ACCOUNTS = {"pat": {"groups": ["payments"], "roles": ["canon:read", "canon:write"]}}


@pytest.fixture(scope="module")
def port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def provider(port: int) -> Iterator[Provider]:
    base = f"http://127.0.0.1:{port}"
    with running_provider(redirect_uris=[f"{base}/signin/callback"], post_logout_redirect_uris=[f"{base}/"],
                          resource=base, accounts=ACCOUNTS) as running:  # fmt: skip
        yield running


@pytest.fixture(scope="module")
def site(
    seed_template: Path, tmp_path_factory: pytest.TempPathFactory, provider: Provider, port: int
) -> Iterator[Site]:
    """`canon serve` signing browsers in with the provider, its client secret in a file, anonymous access off."""
    folder = tmp_path_factory.mktemp("signin-site")
    store = copy_store(seed_template, folder / "canon.db")
    (folder / "client-secret").write_text(provider.client_secret + "\n", encoding="utf-8")
    (folder / "canon.toml").write_text(
        f'[oauth]\nissuer = "{provider.issuer}"\nresource = "http://127.0.0.1:{port}"\nroles_claim = "roles"\n'
        f'client_id = "{provider.client_id}"\nclient_secret_file = "client-secret"\nscopes = ["openid"]\n\n'
        "[auth]\nanonymous = false\n",
        encoding="utf-8",
    )
    with serving(store, "--port", str(port), cwd=folder) as process:
        yield Site(process.base, RESTRICTED)
        assert process.popen.poll() is None, f"canon serve exited:\n{process.output()}"


@pytest.fixture
def person(browser: Browser, site: Site, provider: Provider) -> Iterator[tuple[Page, list[str]]]:
    """A fresh browser profile that may reach canon and the provider only; what failed on canon's pages is listed."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    problems: list[str] = []

    def route(route: Route) -> None:  # the provider's pages import a web font: offline here, and not canon's
        url = route.request.url
        if url.startswith((site.base, provider.issuer, "data:", "blob:")):
            route.continue_()
        else:
            route.abort()

    context.route("**/*", route)
    page.on("pageerror", lambda error: problems.append(f"uncaught {error.name}: {error.message}"))
    page.on("response", lambda r: problems.append(f"{r.request.method} {r.url}: {r.status}")
            if r.url.startswith(site.base) and r.status >= 400 else None)  # fmt: skip
    yield page, problems
    context.close()


def log_in_at_provider(page: Page, login: str) -> None:
    """The provider's login form, then its consent page, as a person fills them."""
    page.locator('input[name="login"]').fill(login)
    page.locator('input[name="password"]').fill("any password")
    page.locator('button[type="submit"]').click()
    page.get_by_role("button", name="Continue").click()


def test_a_person_signs_in_uses_the_docs_and_graphiql_with_the_session_and_signs_out(
    site: Site, provider: Provider, person: tuple[Page, list[str]], tmp_path: Path
) -> None:
    page, problems = person
    page.goto(f"{site.base}/docs")
    expect(page.locator('input[name="login"]')).to_be_visible()
    assert page.url.startswith(f"{provider.issuer}/")  # sent to the provider to sign in
    log_in_at_provider(page, "pat")

    page.wait_for_url(f"{site.base}/docs")  # back where they asked to go
    cookies = {c.get("name"): c for c in page.context.cookies(site.base)}
    assert cookies["canon_session"].get("httpOnly") is True
    assert cookies["canon_session"].get("sameSite") == "Lax"
    assert "canon_signin" not in cookies
    get_node = page.locator(".opblock-get", has=page.locator('[data-path="/api/nodes/{id}"]'))
    expect(get_node).to_be_visible()  # the document loaded with the session: no token pasted
    assert try_out(get_node, {"id": RESTRICTED})["node"]["id"] == RESTRICTED  # the group's node
    page.screenshot(path=tmp_path / "docs-signed-in.png")

    with page.expect_response(lambda r: r.url == f"{site.base}/graphql" and r.request.method == "POST") as schema:
        page.goto(f"{site.base}/graphql")
    assert schema.value.status == 200  # GraphiQL's own POST, from canon's page, with the cookie
    page.locator(".graphiql-execute-button").click()
    expect(page.locator(".graphiql-response")).to_contain_text('"get_neighbors"')

    page.goto(f"{site.base}/")
    caller = page.locator("#caller")
    expect(caller).to_contain_text("Signed in as oauth.pat")
    expect(caller.locator(".roles")).to_have_text("reader, writer")
    expect(caller.locator(".groups")).to_have_text("payments")
    page.screenshot(path=tmp_path / "landing-signed-in.png")
    assert problems == []

    caller.get_by_role("button", name="Sign out").click()
    page.get_by_role("button", name="Yes, sign me out").click()  # the provider asks, then sends back
    page.wait_for_url(f"{site.base}/")
    expect(page.locator("#caller")).to_contain_text("Not signed in")
    assert "canon_session" not in {c.get("name") for c in page.context.cookies(site.base)}
    page.goto(f"{site.base}/docs")
    expect(page.locator('input[name="login"]')).to_be_visible()  # signed out at the provider too: log in again
    assert re.match(rf"{re.escape(provider.issuer)}/", page.url)


def test_a_signed_in_person_browses_the_pages_as_their_principal_and_edits_with_the_session(
    site: Site, provider: Provider, person: tuple[Page, list[str]]
) -> None:
    page, problems = person
    page.goto(f"{site.base}/browse/types/Service?handles_pii=true")
    expect(page.locator('input[name="login"]')).to_be_visible()  # anonymous access is off: sign in first
    log_in_at_provider(page, "pat")
    page.wait_for_url(f"{site.base}/browse/types/Service?handles_pii=true")  # back on the page asked for

    rows = page.locator("section.results tbody th[scope=row]")
    expect(rows.filter(has_text=RESTRICTED)).to_have_count(1)  # the payments group's restricted service
    rows.filter(has_text=RESTRICTED).get_by_role("link").click()
    page.get_by_role("link", name="Edit", exact=True).click()
    page.get_by_label("description").fill("Edited by pat, signed in.")
    page.get_by_role("button", name="Save").click()  # a POST with the session cookie and the form's token
    expect(page).to_have_url(f"{site.base}/browse/nodes/{RESTRICTED}")
    described = page.locator("table.properties tr", has=page.get_by_role("rowheader", name="description"))
    expect(described.locator("td")).to_have_text("Edited by pat, signed in.")
    expect(page.locator("dl.meta")).to_contain_text("by oauth.pat")  # the write is the session's principal's
    assert problems == []
