"""The landing page at `/` (core/http/landing.py): the surfaces, the served model, and an `.mcp.json` for this
server as the request reached it."""

from __future__ import annotations

import dataclasses
import html
import json
import re
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from core.ops.config import Config, OAuthSettings
from core.seam.instance import Instance, open_instance
from tests.generators.conftest import asgi

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[Instance]:
    opened = open_instance(Config(store=tmp_path / "canon.db", tokens=tmp_path / "tokens.json"))
    yield opened
    opened.close()


def _snippet(page: str) -> dict[str, object]:
    found = re.search(r"<pre>(.*?)</pre>", page, re.S)
    assert found is not None
    return json.loads(html.unescape(found[1]))


async def test_the_landing_page_lists_the_surfaces_the_model_and_an_mcp_json_for_this_host(instance: Instance) -> None:
    with anyio.fail_after(30):
        async with asgi(instance) as http:
            page = await http.get("/", headers={"Host": "localhost:8000"})
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert f"canon: {instance.model.name}" in page.text
    assert instance.model.version in page.text
    assert all(f"<code>{name}</code>" in page.text for name in instance.model.node_types)
    for link in (
        'href="/docs"',
        'href="/openapi.json"',
        'href="/graphql"',
        'href="/llms.txt"',
        "<code>/mcp</code>",
        'href="/browse/"',
    ):  # the pages for people, where a person starts (`home_of`)
        assert link in page.text
    assert "<code>/api/</code>" in page.text  # a prefix that is no one's start page is not a link
    assert _snippet(page.text) == {
        "mcpServers": {instance.model.name: {"type": "http", "url": "http://localhost:8000/mcp"}}
    }


async def test_without_anonymous_access_the_snippet_carries_a_bearer_token(instance: Instance) -> None:
    instance.config = dataclasses.replace(instance.config, anonymous=False)
    with anyio.fail_after(30):
        async with asgi(instance) as http:
            page = await http.get("/", headers={"Host": "127.0.0.1:9000"})
    server = _snippet(page.text)["mcpServers"]
    assert server == {instance.model.name: {"type": "http", "url": "http://127.0.0.1:9000/mcp",
                                            "headers": {"Authorization": "Bearer ${CANON_TOKEN}"}}}  # fmt: skip


ISSUER = "https://login.example.com/realms/acme"


def _snippets(page: str) -> list[dict[str, object]]:
    return [json.loads(html.unescape(found)) for found in re.findall(r"<pre>(.*?)</pre>", page, re.S)]


@pytest.mark.parametrize("static", [False, True], ids=["oauth-only", "oauth-and-static-tokens"])
async def test_with_an_oauth_issuer_the_snippet_is_the_url_and_the_token_form_only_beside_static_tokens(
    instance: Instance, static: bool
) -> None:
    oauth = OAuthSettings(issuer=ISSUER, resource="http://127.0.0.1:9000")
    instance.config = dataclasses.replace(instance.config, anonymous=False, oauth=oauth)
    if static:
        instance.tokens.create("ci-bot", "reader")
    with anyio.fail_after(30):
        async with asgi(instance) as http:
            page = await http.get("/", headers={"Host": "127.0.0.1:9000"})

    server = {"type": "http", "url": "http://127.0.0.1:9000/mcp"}
    url_only = {"mcpServers": {instance.model.name: server}}
    with_token = {"mcpServers": {instance.model.name: server | {"headers": {"Authorization": "Bearer ${CANON_TOKEN}"}}}}
    assert _snippets(page.text) == ([url_only, with_token] if static else [url_only])
    assert f"<code>{ISSUER}</code>" in page.text
    assert ("canon token create" in page.text) is static
