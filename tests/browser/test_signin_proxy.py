"""The browser sign-in through the deployment guide's real nginx, under `/kb` on `canon.example.test`, in real Chromium.

canon runs with the guide's own canon.toml (`tests.http.test_proxy.render_canon_toml`: `public_url`, `root_path`,
`trusted_proxies`, ...) plus an `[oauth]` client and anonymous access off; nginx runs the guide's nginx.conf;
Chromium resolves `canon.example.test` to 127.0.0.1 and reaches canon only through nginx. The redirect URI is the
public URL's, the cookies' path is the prefix, and the cross-site rule compares with the public URL's origin.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, Route, expect, sync_playwright

from tests.browser.conftest import WAIT_MS, try_out
from tests.browser.test_signin import ACCOUNTS, RESTRICTED, log_in_at_provider
from tests.conftest import copy_store
from tests.http.test_proxy import HOST, PREFIX, render_canon_toml
from tests.identity_provider import Provider, running_provider
from tests.mcp.conftest import serving
from tests.reverse_proxy import Nginx, free_port


@dataclass(frozen=True)
class Deployed:
    public_url: str  # http://canon.example.test:PORT/kb: nginx's port, the prefix


@pytest.fixture(scope="module")
def nginx_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def provider(nginx_port: int) -> Iterator[Provider]:
    public = f"http://{HOST}:{nginx_port}{PREFIX}"
    with running_provider(redirect_uris=[f"{public}/signin/callback"], post_logout_redirect_uris=[f"{public}/"],
                          resource=f"{public}/mcp", accounts=ACCOUNTS) as running:  # fmt: skip
        yield running


@pytest.fixture(scope="module")
def deployed(seed_template: Path, tmp_path_factory: pytest.TempPathFactory, provider: Provider,
             nginx_port: int) -> Iterator[Deployed]:  # fmt: skip
    folder = tmp_path_factory.mktemp("signin-proxied")
    store = copy_store(seed_template, folder / "canon.db")
    (folder / "client-secret").write_text(provider.client_secret, encoding="utf-8")
    (folder / "canon.toml").write_text(
        render_canon_toml(nginx_port)
        + f'\n[oauth]\nissuer = "{provider.issuer}"\nroles_claim = "roles"\nclient_id = "{provider.client_id}"\n'
        'client_secret_file = "client-secret"\nscopes = ["openid"]\n\n[auth]\nanonymous = false\n',
        encoding="utf-8",
    )
    with serving(store, cwd=folder) as canon:
        nginx = Nginx.start(folder / "nginx", canon.port, port=nginx_port)
        try:
            yield Deployed(f"http://{HOST}:{nginx_port}{PREFIX}")
        finally:
            nginx.stop()
        assert "Traceback" not in canon.output(), canon.output()


@pytest.fixture(scope="module")
def resolving_browser(chromium: Path) -> Iterator[Browser]:
    """Headless Chromium that resolves canon.example.test to 127.0.0.1 (as DNS would to the proxy) and nothing else."""
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium, headless=True, args=[
            "--no-sandbox", "--no-proxy-server", f"--host-resolver-rules=MAP {HOST} 127.0.0.1"])  # fmt: skip
        yield launched
        launched.close()


@pytest.fixture
def person(resolving_browser: Browser, deployed: Deployed, provider: Provider) -> Iterator[tuple[Page, list[str]]]:
    context = resolving_browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    problems: list[str] = []
    origin = deployed.public_url.removesuffix(PREFIX)

    def route(route: Route) -> None:
        url = route.request.url
        if url.startswith((origin + "/", provider.issuer + "/", "data:", "blob:")):
            route.continue_()
        else:
            route.abort()

    context.route("**/*", route)
    page.on("pageerror", lambda error: problems.append(f"uncaught {error.name}: {error.message}"))
    page.on("response", lambda r: problems.append(f"{r.request.method} {r.url}: {r.status}")
            if r.url.startswith(origin) and r.status >= 400 else None)  # fmt: skip
    yield page, problems
    context.close()


def test_a_person_signs_in_through_nginx_under_the_prefix_and_out_again(
    deployed: Deployed, provider: Provider, person: tuple[Page, list[str]], tmp_path: Path
) -> None:
    page, problems = person
    public = deployed.public_url
    page.goto(f"{public}/docs")
    expect(page.locator('input[name="login"]')).to_be_visible()
    log_in_at_provider(page, "pat")

    page.wait_for_url(f"{public}/docs")
    session = next(c for c in page.context.cookies(public) if c.get("name") == "canon_session")
    assert session.get("path") == PREFIX
    assert session.get("domain") == HOST
    get_node = page.locator(".opblock-get", has=page.locator('[data-path="/api/nodes/{id}"]'))
    expect(get_node).to_be_visible()
    assert try_out(get_node, {"id": RESTRICTED})["node"]["id"] == RESTRICTED

    page.goto(f"{public}/graphql")
    page.locator(".graphiql-execute-button").click()  # a POST from the page: Origin is the public URL's
    expect(page.locator(".graphiql-response")).to_contain_text('"get_neighbors"')

    page.goto(f"{public}/")
    expect(page.locator("#caller")).to_contain_text("Signed in as oauth.pat")
    page.screenshot(path=tmp_path / "landing-through-nginx.png")
    assert problems == []

    page.locator("#caller").get_by_role("button", name="Sign out").click()
    page.get_by_role("button", name="Yes, sign me out").click()
    page.wait_for_url(f"{public}/")
    expect(page.locator("#caller")).to_contain_text("Not signed in")
