"""`[server]` network settings: checked with errors naming the setting, set from the environment too, and what each
changes in the app (hosts, origins, the path prefix, which proxies are believed). The same settings behind a real
nginx: tests/http/test_proxy.py."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import AsyncGenerator, Generator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx2
import pytest

from core.http.app import build_app
from core.ops.config import Config, OAuthSettings, load_config
from core.seam.instance import Instance, open_instance
from core.values.errors import ConfigError
from tests.conftest import copy_store, run_canon
from tests.mcp.conftest import serving

pytestmark = pytest.mark.anyio


def write(folder: Path, text: str) -> Path:
    path = folder / "canon.toml"
    path.write_text(text, encoding="utf-8")
    return path


# -- checked settings ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("server", "key"),
    [
        ('public_url = "canon.example.com"', "public_url"),
        ('public_url = "ftp://canon.example.com"', "public_url"),
        ('public_url = "https://canon.example.com/kb?x=1"', "public_url"),
        ('root_path = "kb"', "root_path"),
        ('trusted_proxies = ["proxy.internal"]', "trusted_proxies"),
        ('trusted_proxies = ["10.0.0.0/33"]', "trusted_proxies"),
        ('allowed_origins = ["app.example.com"]', "allowed_origins"),
        ('allowed_origins = ["https://app.example.com/page"]', "allowed_origins"),
        ('allowed_hosts = ["https://canon.example.com"]', "allowed_hosts"),
    ],
)
def test_a_bad_network_setting_is_an_error_naming_it_and_its_file(tmp_path: Path, server: str, key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(write(tmp_path, f"[server]\n{server}\n"), env={})

    assert raised.value.key == key
    assert f"[server] {key}" in str(raised.value)


def test_a_bad_setting_from_the_environment_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(None, env={"CANON_PUBLIC_URL": "/kb"})

    assert str(raised.value).startswith("$CANON_PUBLIC_URL:")


def test_the_environment_sets_every_network_setting() -> None:
    config = load_config(None, env={
        "CANON_ALLOWED_HOSTS": "canon.example.com, canon.internal:8443", "CANON_ALLOWED_ORIGINS": "https://app.example.com",
        "CANON_PUBLIC_URL": "https://canon.example.com/kb/", "CANON_ROOT_PATH": "/kb/",
        "CANON_TRUSTED_PROXIES": "127.0.0.1,10.0.0.0/8"})  # fmt: skip

    assert config.allowed_hosts == ("canon.example.com", "canon.internal:8443")
    assert config.allowed_origins == ("https://app.example.com",)
    assert (config.public_url, config.root_path) == ("https://canon.example.com/kb", "/kb")
    assert config.trusted_proxies == ("127.0.0.1", "10.0.0.0/8")
    assert config.origins["public_url"] == "$CANON_PUBLIC_URL"


def test_the_defaults_add_no_host_origin_prefix_or_proxy() -> None:
    config = load_config(None, env={})

    assert (config.allowed_hosts, config.allowed_origins, config.trusted_proxies) == ((), (), ())
    assert (config.public_url, config.root_path) == (None, "")


def test_the_oauth_resource_defaults_to_the_public_mcp_url_and_one_of_them_is_required(tmp_path: Path) -> None:
    issuer = '[oauth]\nissuer = "https://login.example.com"\n'
    derived = load_config(write(tmp_path, f'[server]\npublic_url = "https://canon.example.com/kb"\n\n{issuer}'), env={})
    with pytest.raises(ConfigError) as raised:
        load_config(write(tmp_path, issuer), env={})

    assert derived.oauth is not None
    assert derived.oauth.resource == "https://canon.example.com/kb/mcp"
    assert raised.value.key == "oauth.resource"


# -- what the settings change in the app -----------------------------------------------------------------------------
@contextlib.contextmanager
def instance_with(seed_template: Path, folder: Path, **settings: Any) -> Generator[Instance]:
    folder.mkdir(parents=True, exist_ok=True)
    config = replace(Config(store=copy_store(seed_template, folder / "canon.db"), tokens=folder / "tokens.json"),
                     **settings)  # fmt: skip
    instance = open_instance(config)
    try:
        yield instance
    finally:
        instance.close()


@contextlib.asynccontextmanager
async def client(seed_template: Path, folder: Path, **settings: Any) -> AsyncGenerator[httpx2.AsyncClient]:
    """The app in process; requests come from 127.0.0.1 (httpx's ASGI transport), to Host 127.0.0.1."""
    with instance_with(seed_template, folder, **settings) as instance:
        app = build_app(instance)
        async with app.router.lifespan_context(app):
            transport = httpx2.ASGITransport(app=app)
            async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
                yield http


async def test_by_default_only_local_names_and_origins_are_served(seed_template: Path, tmp_path: Path) -> None:
    async with client(seed_template, tmp_path) as http:
        named = await http.get("/healthz", headers={"Host": "canon.example.com"})
        page = await http.get("/healthz", headers={"Origin": "https://app.example.com"})
        local = await http.get("/healthz", headers={"Origin": "http://localhost:3000"})

    assert (named.status_code, page.status_code, local.status_code) == (421, 403, 200)


async def test_allowed_hosts_and_origins_are_served_on_every_route(seed_template: Path, tmp_path: Path) -> None:
    settings = {"allowed_hosts": ("canon.example.com",), "allowed_origins": ("https://app.example.com/",)}
    async with client(seed_template, tmp_path, **settings) as http:
        named = [await http.get(path, headers={"Host": "canon.example.com:8443"})
                 for path in ("/healthz", "/llms.txt", "/api/nodes/team-payments")]  # fmt: skip
        mcp = await http.post("/mcp", headers={"Host": "canon.example.com", "Origin": "https://app.example.com",
                                               "Accept": "application/json, text/event-stream"},
                              json={"jsonrpc": "2.0", "id": 1, "method": "ping"})  # fmt: skip
        other = await http.get("/healthz", headers={"Origin": "https://other.example.com"})

    assert [answer.status_code for answer in named] == [200, 200, 200]
    assert mcp.status_code != 403
    assert mcp.status_code != 421
    assert other.status_code == 403


async def test_forwarded_headers_are_believed_only_from_a_trusted_proxy(seed_template: Path, tmp_path: Path) -> None:
    forwarded = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "canon.example.com",
                 "X-Forwarded-For": "198.51.100.7"}  # fmt: skip
    settings: dict[str, Any] = {"allowed_hosts": ("canon.example.com",)}
    async with client(seed_template, tmp_path / "trusting", **settings, trusted_proxies=("127.0.0.0/8",)) as http:
        trusted = (await http.get("/", headers=forwarded)).text
    async with client(seed_template, tmp_path / "not", **settings) as http:
        untrusted = (await http.get("/", headers=forwarded)).text

    assert "&quot;https://canon.example.com/mcp&quot;" in trusted
    assert "&quot;http://127.0.0.1/mcp&quot;" in untrusted


async def test_under_a_root_path_every_route_is_served_under_it_and_nothing_outside(
    seed_template: Path, tmp_path: Path
) -> None:
    async with client(seed_template, tmp_path, root_path="/api") as http:  # a prefix that is also a surface's path
        inside = [
            await http.get(f"/api{path}")
            for path in (
                "/healthz",
                "/metrics",
                "/api/nodes/team-payments",
                "/graphql?query=%7B__typename%7D",
                "/llms.txt",
                "/ui-assets/swagger-ui-dist@5/swagger-ui.css",
                "/",
            )
        ]
        outside = await http.get("/healthz")
        landing = inside[-1].text

    assert [answer.status_code for answer in inside] == [200] * 7
    assert (outside.status_code, outside.json()["code"]) == (404, "no_route")
    assert "&quot;http://127.0.0.1/api/mcp&quot;" in landing
    assert 'href="/api/healthz"' in landing


async def test_without_a_public_url_links_start_with_the_root_path(seed_template: Path, tmp_path: Path) -> None:
    async with client(seed_template, tmp_path, root_path="/kb") as http:
        index = (await http.get("/kb/llms.txt")).text
        document = (await http.get("/kb/openapi.json")).json()

    assert "](/kb/tools/get_node.md)" in index
    assert document["servers"] == [{"url": "/kb"}]


async def test_under_a_root_path_every_problem_names_the_path_the_client_asked_for(
    seed_template: Path, tmp_path: Path
) -> None:
    refused = ("/kb/api/nodes", "/kb/llms.txt", "/kb/metrics")  # the token check, on three surfaces
    missing = ("/kb/api/nodes/no-such-node", "/kb/llms.txt/nope", "/kb/nothing-here", "/kb/api/nodes?limit=x")
    async with client(seed_template, tmp_path / "closed", root_path="/kb", anonymous=False) as http:
        answers = [await http.get(path) for path in refused]
    async with client(seed_template, tmp_path / "open", root_path="/kb") as http:
        answers += [await http.get(path) for path in missing]

    assert [a.status_code for a in answers] == [401, 401, 401, 404, 404, 404, 400]
    assert all(a.headers["content-type"].startswith("application/problem+json") for a in answers)
    assert [a.json()["instance"] for a in answers] == [path.split("?")[0] for path in (*refused, *missing)]
    assert all(int(a.headers["content-length"]) == len(a.content) for a in answers)


async def test_a_page_reads_rest_across_origins_only_from_an_allowed_origin(seed_template: Path,
                                                                            tmp_path: Path) -> None:  # fmt: skip
    async with client(seed_template, tmp_path, allowed_origins=("https://app.example.com",)) as http:
        missing = await http.get("/api/nodes/no-such-node", headers={"Origin": "https://app.example.com"})
        denied = await http.get("/api/nodes/team-payments", headers={"Origin": "https://other.example.com"})

    assert missing.status_code == 404  # an error answer carries CORS headers too: the page can read the problem
    assert missing.headers["access-control-allow-origin"] == "https://app.example.com"
    assert denied.status_code == 403


def test_canon_serve_does_not_believe_forwarded_headers_from_localhost_by_default(seed_template: Path,
                                                                                  tmp_path: Path) -> None:  # fmt: skip
    store = copy_store(seed_template, tmp_path / "canon.db")
    write(tmp_path, '[logging]\nformat = "json"\naccess_log = true\n')
    with serving(store, cwd=tmp_path) as process:
        with httpx2.Client(base_url=process.base, timeout=30) as http:
            assert http.head("/llms.txt", headers={"X-Forwarded-For": "198.51.100.7"}).status_code == 200
        seen: list[str] = []
        tick = threading.Event()
        for _ in range(500):  # the server writes its log line after the answer, on its own schedule
            lines = [json.loads(line) for line in process.stderr if line.startswith("{")]
            seen = [r["client"] for r in lines if r.get("event") == "access" and r["method"] == "HEAD"]
            if seen:
                break
            tick.wait(0.02)

    assert seen == ["127.0.0.1"]  # uvicorn alone would have believed 127.0.0.1's X-Forwarded-For


async def test_under_a_prefix_the_oauth_metadata_is_served_at_the_hosts_well_known_path(
    seed_template: Path, tmp_path: Path
) -> None:
    public = "https://canon.example.com/kb"
    oauth = OAuthSettings(issuer="https://login.example.com", resource=f"{public}/mcp")
    settings: dict[str, Any] = {"public_url": public, "root_path": "/kb", "oauth": oauth, "anonymous": False}
    async with client(seed_template, tmp_path, **settings) as http:
        host = {"Host": "canon.example.com"}
        metadata = await http.get("/.well-known/oauth-protected-resource/kb/mcp", headers=host)
        refused = await http.post("/kb/mcp", headers=host, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})

    assert metadata.json()["resource"] == f"{public}/mcp"
    assert refused.status_code == 401
    assert ("resource_metadata=\"https://canon.example.com/.well-known/oauth-protected-resource/kb/mcp\""
            in refused.headers["www-authenticate"])  # fmt: skip


def test_canon_config_shows_the_network_settings_and_where_they_came_from(tmp_path: Path) -> None:
    write(tmp_path, '[server]\nroot_path = "/kb"\ntrusted_proxies = ["10.0.0.0/8"]\n')
    done = run_canon("config", cwd=tmp_path)
    shown = json.loads(done.stdout)

    assert (shown["settings"]["root_path"], shown["settings"]["trusted_proxies"]) == ("/kb", ["10.0.0.0/8"])
    assert shown["from"]["root_path"].endswith("[server] root_path")
    assert shown["settings"]["allowed_hosts"] == []
