"""Fixtures for the browser tests: headless Chromium, the pages' scripts and styles from npm, a real `canon serve`.

* `chromium`: the path of the Chromium binary (Debian's `chromium`; `$CANON_CHROMIUM` names another). Playwright
  drives it; Playwright's own browser downloads are never used.
* `site`: `canon serve` on a copy of the seeded store, with no `ui_assets` set (the pages load the copies canon
  ships, `core.http.ui_assets`), and the id of a public node.
* `browser` and `page`: a headless Chromium, and a page that records what would make a page silently half-work
  (console errors, uncaught exceptions, failed requests, requests that left the server).

The tests skip only when CANON_SKIP_BROWSER_TESTS=1; otherwise a missing Chromium fails them.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import (
    Browser,
    ConsoleMessage,
    Locator,
    Page,
    Request,
    Response,
    Route,
    expect,
    sync_playwright,
)

from core.dispatch.access import sees, sight_of
from core.lang.model import load_model
from core.store.sqlite import SQLiteStore
from core.values.principal import ANONYMOUS
from tests.conftest import copy_store
from tests.mcp.conftest import serving

SKIP = "CANON_SKIP_BROWSER_TESTS"
CHROMIUM = "CANON_CHROMIUM"
WAIT_MS = 30_000  # generous: two cores shared with other test runs; every wait is on a condition, never a sleep


# -- what must be installed -----------------------------------------------------------------------------------------
def _skip_if_asked() -> None:
    if os.environ.get(SKIP) == "1":
        pytest.skip(f"{SKIP}=1: the browser tests were asked to be skipped")


def _fail(problem: str) -> NoReturn:
    advice = f"Run scripts/test (it installs what the browser tests need), or set {SKIP}=1 to skip the browser tests"
    pytest.fail(f"{problem}. {advice}.", pytrace=False)


@pytest.fixture(scope="session")
def chromium() -> Path:
    """Chromium's binary: $CANON_CHROMIUM, else `chromium` (Debian) or `chromium-browser` on PATH."""
    _skip_if_asked()
    if named := os.environ.get(CHROMIUM):
        if not Path(named).is_file():
            _fail(f"The browser tests need Chromium: {CHROMIUM}={named} is not a file")
        return Path(named)
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        _fail("The browser tests need Chromium: there is no `chromium` on PATH (Debian: apt-get install chromium)")
    return Path(found)


# -- the server -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Site:
    """A running `canon serve`, and a node every caller (anonymous too) may read."""

    base: str
    public_id: str


def public_node_id(store_path: Path) -> str:
    """A seeded Service that an anonymous caller sees (by the same rule the server applies)."""
    store = SQLiteStore.open(store_path, load_model())
    try:
        sight = sight_of(ANONYMOUS)
        return next(node.id for node in store.iter_nodes("Service") if sees(sight, node))
    finally:
        store.close()


@pytest.fixture(scope="module")
def site(
    seed_template: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Site]:
    """`canon serve` as an operator runs it, with nothing configured: the pages must work offline as shipped."""
    folder = tmp_path_factory.mktemp("site")
    store = copy_store(seed_template, folder / "canon.db")
    public_id = public_node_id(store)
    with serving(store, cwd=folder) as process:
        yield Site(process.base, public_id)
        assert process.popen.poll() is None, f"canon serve exited:\n{process.output()}"


# -- the browser ----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser(chromium: Path) -> Iterator[Browser]:
    """Headless Chromium; no sandbox (CI runs as root) and no proxy (every request goes to 127.0.0.1)."""
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=chromium, headless=True, args=["--no-sandbox", "--no-proxy-server"]
        )
        yield launched
        launched.close()


@dataclass
class Watched:
    """A page, and what went wrong on it that the page itself would not show."""

    page: Page
    errors: list[str] = field(default_factory=list[str])  # console errors and uncaught exceptions
    failed: list[str] = field(default_factory=list[str])  # requests to the server that failed or were answered >= 400
    outside: list[str] = field(default_factory=list[str])  # requests for anything not on the server (blocked)

    def problems(self) -> list[str]:
        return (
            [f"console: {e}" for e in self.errors]
            + [f"failed: {f}" for f in self.failed]
            + [f"left the server: {o}" for o in self.outside]
        )


@pytest.fixture
def page(browser: Browser, site: Site) -> Iterator[Watched]:
    """A fresh page; a request for anything off the server is blocked and recorded (the pages must work offline)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(WAIT_MS)
    opened = context.new_page()
    watched = Watched(opened)

    def route(route: Route) -> None:
        url = route.request.url
        if url.startswith(("data:", "blob:")) or _origin(url) == site.base:
            route.continue_()
        else:
            watched.outside.append(url)
            route.abort()

    def console(message: ConsoleMessage) -> None:
        if message.type == "error":
            watched.errors.append(f"{message.text} ({message.location.get('url', '')})")

    def response(answer: Response) -> None:
        if answer.status >= 400 and _origin(answer.url) == site.base:
            watched.failed.append(f"{answer.request.method} {answer.url}: {answer.status}")

    def failed(request: Request) -> None:
        if _origin(request.url) == site.base:
            watched.failed.append(f"{request.method} {request.url}: {request.failure}")

    context.route("**/*", route)
    opened.on("console", console)
    opened.on("pageerror", lambda error: watched.errors.append(f"uncaught {error.name}: {error.message}"))
    opened.on("response", response)
    opened.on("requestfailed", failed)
    yield watched
    context.close()


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def try_out(operation: Locator, inputs: dict[str, str]) -> dict[str, Any]:
    """Swagger UI's "Try it out" on one operation, as a reader of the docs would: fill `inputs` (parameter name ->
    value), execute, wait for a 200 and give its JSON body."""
    operation.locator(".opblock-summary").click()
    operation.locator(".try-out__btn").click()
    for name, value in inputs.items():
        operation.locator(f'tr[data-param-name="{name}"] input').fill(value)
    operation.locator(".execute").click()
    live = operation.locator(".live-responses-table tr.response")
    expect(live.locator(".response-col_status")).to_have_text("200", timeout=WAIT_MS)
    body: dict[str, Any] = json.loads(live.locator(".response-col_description .highlight-code pre").inner_text())
    return body
