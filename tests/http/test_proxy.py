"""canon behind a real nginx, reached by a hostname under a path prefix, as docs/operations/deploy.md sets it up.

One `canon serve` with the guide's own canon.toml (docs/operations/examples/canon-behind-nginx.toml: `public_url`,
`root_path = "/kb"`, `allowed_hosts`, `allowed_origins`, `trusted_proxies`, the JSON access log) and one nginx
running the guide's own nginx.conf (tests/reverse_proxy.py) serve the whole module; only ports and the public
URL's scheme (no TLS here) are changed. Every client connects to nginx on
127.0.0.1 and names the host `canon.example.test` (the `Host` header; a WebSocket's URL), as a resolver would.
"""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import AsyncGenerator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp
import pytest
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ResourceUpdated
from websockets.sync.client import connect as websocket

from core.values.uris import node_uri
from tests.conftest import copy_store
from tests.mcp.conftest import DEADLINE_S, LEGACY, MODERN, Process, create_token, serving
from tests.mcp.test_subscriptions import Notifications
from tests.reverse_proxy import EXAMPLE, Nginx, check_config, free_port

pytestmark = pytest.mark.anyio

HOST = "canon.example.test"
PREFIX = "/kb"
APP_ORIGIN = "https://app.example.test"
CLIENT = "127.0.0.2"  # the test's own address towards nginx: not a trusted proxy, unlike nginx's 127.0.0.1
FORGED = "203.0.113.9"
PUBLIC = "team-payments"
CANON_TOML = EXAMPLE.parent / "canon-behind-nginx.toml"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Deployment:
    canon: Process
    nginx: Nginx
    writer: str  # a writer's bearer token

    @property
    def public_url(self) -> str:
        return f"http://{HOST}:{self.nginx.port}{PREFIX}"

    @property
    def proxy(self) -> str:
        """Where a client connects: nginx, under the prefix."""
        return f"http://127.0.0.1:{self.nginx.port}{PREFIX}"

    def http(self, **headers: str) -> httpx2.Client:
        """A client of nginx from `CLIENT`, naming the host `canon.example.test`."""
        transport = httpx2.HTTPTransport(local_address=CLIENT)
        return httpx2.Client(base_url=self.proxy, headers={"Host": HOST, **headers}, transport=transport, timeout=30)

    def access(self) -> list[dict[str, Any]]:
        """canon's access log lines so far."""
        lines = (json.loads(line) for line in self.canon.stderr if line.startswith("{"))
        return [line for line in lines if line.get("event") == "access"]


def render_canon_toml(port: int) -> str:
    """The guide's canon.toml, its public URL on plain HTTP at nginx's `port` (the test has no TLS)."""
    text = CANON_TOML.read_text(encoding="utf-8")
    rendered, count = re.subn(rf'public_url = "https://{HOST}{PREFIX}"', f'public_url = "http://{HOST}:{port}{PREFIX}"',
                              text)  # fmt: skip
    assert count == 1, "the example canon.toml no longer has the public_url the tests change"
    return rendered


@pytest.fixture(scope="module")
def deployment(seed_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    folder = tmp_path_factory.mktemp("proxied")
    store = copy_store(seed_template, folder / "canon.db")
    writer = create_token(folder, "wendy", "writer")
    port = free_port()
    (folder / "canon.toml").write_text(render_canon_toml(port), encoding="utf-8")
    with serving(store, cwd=folder) as canon:
        nginx = Nginx.start(folder / "nginx", canon.port, port=port)
        try:
            yield Deployment(canon, nginx, writer)
        finally:
            nginx.stop()
        assert "Traceback" not in canon.output(), canon.output()


def test_the_guide_quotes_the_canon_toml_these_tests_run() -> None:
    guide = (EXAMPLE.parent.parent / "deploy.md").read_text(encoding="utf-8")
    section = guide.split("## Reverse proxy and TLS termination", 1)[1].split("\n## ", 1)[0]
    quoted = section.split("```toml", 1)[1].split("```", 1)[0]
    tested = {line.split("#", 1)[0].strip() for line in CANON_TOML.read_text(encoding="utf-8").splitlines()}

    lines = [line.strip() for line in quoted.splitlines() if line.strip()]
    assert lines
    assert [line for line in lines if line not in tested] == []


def test_the_guide_s_nginx_conf_passes_nginx_t(deployment: Deployment, tmp_path: Path) -> None:
    checked = check_config(tmp_path, free_port(), deployment.canon.port)

    assert checked.returncode == 0, checked.stderr
    assert "test is successful" in checked.stderr


# -- MCP: the SDK client on both revisions ---------------------------------------------------------------------------
@asynccontextmanager
async def sdk_client(deployment: Deployment, mode: str, **options: Any) -> AsyncGenerator[mcp.Client]:
    headers = {"Host": HOST, "Authorization": f"Bearer {deployment.writer}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
        mcp.Client(streamable_http_client(f"{deployment.proxy}/mcp", http_client=http), mode=mode, **options) as client,  # pyright: ignore[reportArgumentType]
    ):
        assert client.protocol_version == (LEGACY if mode == "legacy" else MODERN)
        yield client


def rename(deployment: Deployment, node_id: str, name: str) -> None:
    """A write over REST, through nginx, with the writer's token."""
    with deployment.http(Authorization=f"Bearer {deployment.writer}") as http:
        node = http.get(f"/api/nodes/{node_id}").json()["node"]
        answer = http.put(f"/api/nodes/{node_id}", json={"type": node["type"], "properties": {
            **node["properties"], "name": name}})  # fmt: skip
        assert answer.status_code == 200, answer.text


async def next_update(listening: Any, uri: str) -> ResourceUpdated:
    with anyio.fail_after(DEADLINE_S):
        while True:
            event = await anext(listening)
            if isinstance(event, ResourceUpdated) and event.uri == uri:
                return event


async def test_the_2026_07_28_sdk_client_calls_and_listens_through_nginx(deployment: Deployment) -> None:
    uri = node_uri("Team", PUBLIC)
    async with sdk_client(deployment, "auto") as client:
        read = await client.call_tool("get_node", {"id": PUBLIC})
        async with client.listen(resource_subscriptions=[uri]) as listening:
            await anyio.to_thread.run_sync(rename, deployment, PUBLIC, "Payments (listened)")
            heard = await next_update(listening, uri)

    assert read.structured_content is not None
    assert read.structured_content["node"]["id"] == PUBLIC
    assert heard.uri == uri


async def test_the_2025_11_25_sdk_client_keeps_its_session_and_hears_on_its_get_stream_through_nginx(
    deployment: Deployment,
) -> None:
    uri = node_uri("Team", PUBLIC)
    notifications = Notifications()
    try:
        async with sdk_client(deployment, "legacy", message_handler=notifications) as client:
            read = await client.call_tool("get_node", {"id": PUBLIC})
            with pytest.warns(mcp.MCPDeprecationWarning):
                await client.subscribe_resource(uri)  # pyright: ignore[reportDeprecated]
            await anyio.to_thread.run_sync(rename, deployment, PUBLIC, "Payments (subscribed)")
            heard = await notifications.next_update()
    finally:
        notifications.close()

    assert read.structured_content is not None
    assert read.structured_content["node"]["id"] == PUBLIC
    assert heard == uri


def test_the_landing_page_tells_agents_the_public_mcp_url(deployment: Deployment) -> None:
    with deployment.http() as http:
        page = http.get("/")

    assert page.status_code == 200
    assert f"&quot;url&quot;: &quot;{deployment.public_url}/mcp&quot;" in page.text
    assert f'href="{PREFIX}/healthz"' in page.text


# -- REST, GraphQL, llms.txt -----------------------------------------------------------------------------------------
def test_rest_reads_anonymously_and_writes_with_a_token_through_nginx(deployment: Deployment) -> None:
    rename(deployment, "team-platform", "Platform (over REST)")
    with deployment.http() as http:
        read = http.get("/api/nodes/team-platform")
        refused = http.put("/api/nodes/team-platform", json={"type": "Team", "properties": {}})

    assert read.status_code == 200
    assert read.json()["node"]["properties"]["name"] == "Platform (over REST)"
    assert refused.status_code == 403  # anonymous: reads only


def test_openapi_names_the_public_url_as_its_server_and_the_docs_page_loads_under_the_prefix(
    deployment: Deployment,
) -> None:
    with deployment.http() as http:
        document = http.get("/openapi.json").json()
        docs = http.get("/docs").text
        script = http.get("/ui-assets/swagger-ui-dist@5/swagger-ui-bundle.js")

    assert document["servers"] == [{"url": deployment.public_url}]
    assert f"{deployment.public_url}/openapi.json" in docs
    assert f"{deployment.public_url}/ui-assets/swagger-ui-dist@5/swagger-ui-bundle.js" in docs
    assert script.status_code == 200


def test_graphiql_loads_its_scripts_from_under_the_public_url(deployment: Deployment) -> None:
    with deployment.http() as http:
        page = http.get("/graphql", headers={"Accept": "text/html"}).text
        assets = [src for src in re.findall(r'(?:src|href)="([^"]+)"', page) if "/ui-assets/" in src]
        fetched = [http.get(src.removeprefix(deployment.public_url)).status_code for src in assets]

    assert assets
    assert all(src.startswith(f"{deployment.public_url}/ui-assets/") for src in assets), assets
    assert set(fetched) == {200}


def test_llms_txt_links_carry_the_public_url_and_prefix(deployment: Deployment) -> None:
    with deployment.http() as http:
        index = http.get("/llms.txt").text
        links = [line.split("](", 1)[1].split(")", 1)[0] for line in index.splitlines() if line.startswith("- [")]
        followed = http.get(links[0].removeprefix(deployment.public_url))

    assert links
    assert all(link.startswith(f"{deployment.public_url}/") for link in links), links
    assert followed.status_code == 200


def test_graphql_answers_a_query_and_a_websocket_subscription_hears_a_write_through_nginx(
    deployment: Deployment,
) -> None:
    with deployment.http() as http:
        answer = http.post("/graphql", json={"query": f'{{ get_node(id: "{PUBLIC}") {{ node {{ id }} }} }}'})
    assert answer.json()["data"]["get_node"]["node"]["id"] == PUBLIC

    url = f"ws://{HOST}:{deployment.nginx.port}{PREFIX}/graphql"
    query = f'subscription {{ resource_node(type: "Team", id: "{PUBLIC}") {{ uri }} }}'
    with websocket(url, sock=socket.create_connection(("127.0.0.1", deployment.nginx.port)),
                   subprotocols=["graphql-transport-ws"], open_timeout=10) as ws:  # type: ignore[list-item]  # fmt: skip
        ws.send(json.dumps({"type": "connection_init", "payload": {}}))
        assert json.loads(ws.recv(timeout=10))["type"] == "connection_ack"
        ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": {"query": query}}))
        # the subscription starts listening some time after `subscribe`: write every 0.1 s until it has heard one
        stop = threading.Event()

        def write() -> None:
            for n in range(100):
                if stop.wait(0.1):
                    return
                rename(deployment, PUBLIC, f"Payments ({n})")

        writer = threading.Thread(target=write)
        writer.start()
        try:
            message = json.loads(ws.recv(timeout=30))
        finally:
            stop.set()
            writer.join()

    assert message["type"] == "next", message
    assert message["payload"]["data"]["resource_node"]["uri"] == node_uri("Team", PUBLIC)


# -- who the client is -----------------------------------------------------------------------------------------------
def test_the_access_log_names_the_address_nginx_forwards_and_ignores_it_from_an_untrusted_peer(
    deployment: Deployment,
) -> None:
    with deployment.http(**{"X-Forwarded-For": FORGED}) as http:
        assert http.head("/llms.txt").status_code == 200  # nginx appends the address it saw: FORGED, CLIENT
    direct = httpx2.Client(base_url=f"{deployment.canon.base}{PREFIX}", transport=httpx2.HTTPTransport(
        local_address=CLIENT), headers={"X-Forwarded-For": FORGED}, timeout=30)  # fmt: skip
    with direct:
        assert direct.head("/healthz").status_code == 200  # straight to canon: CLIENT is no trusted proxy

    def clients(method: str, route: str) -> set[str]:
        return {line["client"] for line in deployment.access() if (line["method"], line["route"]) == (method, route)}

    deadline = threading.Event()
    for _ in range(500):  # the server writes its log line after the answer, on its own schedule
        if clients("HEAD", "/llms.txt") and clients("HEAD", "/healthz"):
            break
        deadline.wait(0.02)
    assert clients("HEAD", "/llms.txt") == {CLIENT}, "the nearest address that is not a trusted proxy"
    assert clients("HEAD", "/healthz") == {CLIENT}, "an untrusted peer's X-Forwarded-For is not believed"


# -- refusals --------------------------------------------------------------------------------------------------------
def test_a_host_canon_does_not_answer_to_is_421_through_nginx(deployment: Deployment) -> None:
    with deployment.http() as http:
        answer = http.get("/api/nodes/team-payments", headers={"Host": "rebound.example.test"})
        mcp_answer = http.post("/mcp", headers={"Host": "rebound.example.test"}, json={"jsonrpc": "2.0"})

    assert (answer.status_code, answer.json()["code"]) == (421, "host_not_allowed")
    assert mcp_answer.status_code == 421


def test_an_origin_not_allowed_is_403_and_an_allowed_one_gets_cors_headers(deployment: Deployment) -> None:
    with deployment.http() as http:
        foreign = http.get("/api/nodes/team-payments", headers={"Origin": "https://evil.example.test"})
        allowed = http.get("/api/nodes/team-payments", headers={"Origin": APP_ORIGIN})
        own = http.get("/llms.txt", headers={"Origin": f"http://{HOST}:{deployment.nginx.port}"})

    assert (foreign.status_code, foreign.json()["code"]) == (403, "origin_not_allowed")
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == APP_ORIGIN
    assert "ETag" in allowed.headers["access-control-expose-headers"]
    assert own.headers["access-control-allow-origin"] == f"http://{HOST}:{deployment.nginx.port}"  # public_url's


def preflight(origin: str, method: str = "PUT") -> dict[str, str]:
    return {"Origin": origin, "Access-Control-Request-Method": method,
            "Access-Control-Request-Headers": "authorization, content-type"}  # fmt: skip


@pytest.mark.parametrize("path", ["/api/nodes/team-payments", "/graphql", "/llms.txt"])
def test_a_preflight_from_an_allowed_origin_is_204_with_what_it_may_send(deployment: Deployment, path: str) -> None:
    with deployment.http() as http:
        answer = http.options(path, headers=preflight(APP_ORIGIN))

    assert answer.status_code == 204
    assert answer.headers["access-control-allow-origin"] == APP_ORIGIN
    assert "PUT" in answer.headers["access-control-allow-methods"]
    assert answer.headers["access-control-allow-headers"] == "authorization, content-type"
    assert "Origin" in answer.headers["vary"]


def test_a_preflight_from_another_origin_is_refused(deployment: Deployment) -> None:
    with deployment.http() as http:
        answer = http.options("/api/nodes/team-payments", headers=preflight("https://evil.example.test"))

    assert answer.status_code == 403
    assert "access-control-allow-origin" not in answer.headers


def test_the_mcp_endpoint_answers_no_preflight(deployment: Deployment) -> None:
    with deployment.http() as http:
        answer = http.options("/mcp", headers=preflight(APP_ORIGIN, "POST"))

    assert answer.status_code != 204
    assert "access-control-allow-origin" not in answer.headers


def test_outside_the_prefix_nothing_is_served(deployment: Deployment) -> None:
    with httpx2.Client(base_url=deployment.canon.base, timeout=30) as http:
        outside = http.get("/api/nodes/team-payments")
        inside = http.get(f"{PREFIX}/api/nodes/team-payments")

    assert (outside.status_code, outside.json()["code"]) == (404, "no_route")
    assert inside.status_code == 200
