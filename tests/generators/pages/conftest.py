"""What the pages tests share: the app in process as a writer (`http`), what they read out of a page (its links,
table rows and text, by the standard library's HTML parser: the pages are plain HTML, no script builds anything;
a hidden field's value), and every page a caller reaches by its links (`crawl_pages`, the leak checks' crawl)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

import anyio
import httpx2
import pytest

from core.seam.instance import Instance
from core.seam.surfaces import ASGIApp, host_for
from core.values.principal import Principal
from core.values.records import Change
from generators.pages.app import surface as pages
from tests.generators.conftest import asgi, token


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def http(fresh_instance: Instance) -> AsyncIterator[httpx2.AsyncClient]:
    """The whole app in process over a fresh copy of the seeded store, as the writer `editor` (a test that wants
    another caller sets its own `Authorization`)."""
    async with asgi(fresh_instance) as client:
        client.headers["Authorization"] = "Bearer " + token(fresh_instance, "editor", "writer")
        yield client


def hidden(page: str, name: str) -> str:
    """The value of the form field `name` the page holds (the first one)."""
    found = re.search(rf'name="{name}" value="([^"]*)"', page)
    assert found is not None, f"no hidden field {name}"
    return found[1]


@dataclass
class Parsed:
    links: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])  # (href, text)
    row_headers: list[str] = field(default_factory=list[str])  # the text of each <th scope="row">
    text: list[str] = field(default_factory=list[str])
    tags: list[tuple[str, dict[str, str]]] = field(default_factory=list[tuple[str, dict[str, str]]])


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parsed = Parsed()
        self._link: tuple[str, list[str]] | None = None
        self._row: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        self.parsed.tags.append((tag, values))
        if tag == "a" and "href" in values:
            self._link = (values["href"], [])
        if tag == "th" and values.get("scope") == "row":
            self._row = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._link is not None:
            self.parsed.links.append((self._link[0], "".join(self._link[1]).strip()))
            self._link = None
        if tag == "th" and self._row is not None:
            self.parsed.row_headers.append("".join(self._row).strip())
            self._row = None

    def handle_data(self, data: str) -> None:
        self.parsed.text.append(data)
        if self._link is not None:
            self._link[1].append(data)
        if self._row is not None:
            self._row.append(data)


def parse(html: str) -> Parsed:
    parser = _Parser()
    parser.feed(html)
    parser.close()
    return parser.parsed


def node_ids(parsed: Parsed, prefix: str = "/browse/nodes/") -> list[str]:
    """The node ids the page links to, in page order (each node page's link, percent-decoded)."""
    found: list[str] = []
    for href, _ in parsed.links:
        path = urlsplit(href).path
        if path.startswith(prefix) and "/" not in path.removeprefix(prefix):
            found.append(unquote(path.removeprefix(prefix)))
    return found


@contextlib.asynccontextmanager
async def _no_changes(
    sight: Any, uri: str | None = None, *, max_buffer: int = 0
) -> AsyncGenerator[AsyncIterator[Change]]:
    raise AssertionError("the pages surface watched the change feed")  # it never does: it has no subscriptions
    yield  # (an async generator, as a watch is)


def pages_app(instance: Instance, who: Principal) -> ASGIApp:
    """The pages surface alone (no host around it), every request as `who`."""
    host = host_for(instance, "pages", principal_of=lambda request: who, watch=_no_changes)
    return pages.app(host, instance.registry)


def crawl_pages(instance: Instance, who: Principal, seeds: Sequence[str], bound: int = 2_000) -> dict[str, str]:
    """Every page under /browse/ reachable from `seeds` by its links (downloads included), as `who`: url -> body
    (a link to a node the caller may not read now, or that is gone, is its 403 or 404 page)."""
    app = pages_app(instance, who)
    found: dict[str, str] = {}

    async def walk() -> None:
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://pages") as http:
            queue = list(seeds)
            while queue and len(found) < bound:
                url = queue.pop(0)
                if url in found:
                    continue
                answer = await http.get(url)
                assert answer.status_code in (200, 403, 404), (who.name, url, answer.status_code)
                refused = answer.status_code != 200
                assert not refused or url.startswith("/browse/nodes/"), (who.name, url, answer.status_code)
                found[url] = answer.text
                if answer.headers["content-type"].startswith("text/html") and not refused:
                    for href, _ in parse(answer.text).links:
                        target = urljoin(url, href)
                        if urlsplit(target).path.startswith("/browse/") and "#" not in target and target not in found:
                            queue.append(target)
            assert not queue, f"more than {bound} pages"

    anyio.run(walk)
    return found
