"""A real `canon serve` (uvicorn on 127.0.0.1, a free port), spoken to with raw HTTP and with the SDK client.

Every malformed, hostile or oversized request gets its precise status and JSON-RPC error, and the server keeps
serving afterwards.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import mcp
import pytest

from core.mcp.server import SUPPORTED_VERSIONS
from tests.conftest import tool_names
from tests.mcp.conftest import (
    LEGACY,
    LEGACY_HEADERS,
    MODERN,
    Process,
    copy_store,
    envelope,
    initialize_body,
    modern_request,
    serving,
)

MAX_BODY_BYTES = 1024 * 1024  # Config.max_body_bytes' default


@pytest.fixture(scope="module")
def process(seed_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    folder = tmp_path_factory.mktemp("serve")
    with serving(copy_store(seed_template, folder / "canon.db"), cwd=folder) as running:
        yield running


@pytest.fixture
def http(process: Process) -> Iterator[httpx2.Client]:
    with httpx2.Client(base_url=process.base, timeout=10) as client:
        yield client


@dataclass(frozen=True)
class Bad:
    """A request and what canon must answer to it."""

    headers: dict[str, str]
    content: bytes
    status: int
    code: int | None = None  # the JSON-RPC error code, when the answer is a JSON-RPC error
    check: Callable[[dict[str, Any]], None] | None = None  # further checks of the JSON answer


def _request(method: str, params: dict[str, Any] | None = None, **headers: str) -> tuple[dict[str, str], bytes]:
    base, body = modern_request(method, params)
    return base | headers, json.dumps(body).encode()


def _call(name: str, arguments: dict[str, Any], **headers: str) -> tuple[dict[str, str], bytes]:
    return _request("tools/call", {"name": name, "arguments": arguments}, **headers)


def _no_meta() -> tuple[dict[str, str], bytes]:
    headers, body = modern_request("tools/list", meta=False)
    return headers, json.dumps(body).encode()


def _version(version: str) -> tuple[dict[str, str], bytes]:
    headers, body = modern_request("tools/list")
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = version
    return headers | {"MCP-Protocol-Version": version}, json.dumps(body).encode()


def _unsupported_version(answer: dict[str, Any]) -> None:
    data = answer["error"]["data"]
    assert data["requested"] == "1900-01-01"
    assert MODERN in data["supported"]


def _tool_error(code: str, *pointers: str) -> Callable[[dict[str, Any]], None]:
    def check(answer: dict[str, Any]) -> None:
        result = answer["result"]
        assert result["isError"] is True
        error = json.loads(result["content"][0]["text"])["error"]
        assert error["code"] == code
        assert sorted(p["pointer"] for p in error["problems"]) == sorted(pointers)

    return check


def _oversized() -> tuple[dict[str, str], bytes]:
    headers, body = _call("get_node", {"id": "x" * MAX_BODY_BYTES})
    assert len(body) > MAX_BODY_BYTES
    return headers, body


BAD: dict[str, Bad] = {
    "malformed-json": Bad(_request("tools/list")[0], b'{"jsonrpc": "2.0", "id": 1, "method":', 400, -32700),
    "no-meta": Bad(*_no_meta(), 400, -32602),
    "method-header-mismatch": Bad(*_request("tools/list", **{"Mcp-Method": "resources/list"}), 400, -32020),
    "name-header-mismatch": Bad(*_call("get_node", {"id": "team-payments"}, **{"Mcp-Name": "find_nodes"}), 400, -32020),
    "unsupported-version": Bad(*_version("1900-01-01"), 400, -32022, _unsupported_version),
    "unknown-method": Bad(*_request("nodes/explode"), 404, -32601),
    "unknown-tool": Bad(*_call("get_nod", {"id": "team-payments"}), 400, -32602),
    "wrong-argument-types": Bad(*_call("find_nodes", {"type": "Team", "limit": "ten"}), 200, None,
                                _tool_error("invalid_arguments", "/limit")),
    "huge-depth-and-limit": Bad(*_call("get_neighbors", {"id": "team-payments", "depth": 10**9, "limit": 10**9}),
                                200, None, _tool_error("invalid_arguments", "/depth", "/limit")),
    "oversized-body": Bad(*_oversized(), 413),
    "foreign-origin": Bad(*_request("tools/list", Origin="http://evil.example"), 403),
    "foreign-host": Bad(*_request("tools/list", Host="evil.example"), 421),
}  # fmt: skip


def _send(http: httpx2.Client, bad: Bad) -> httpx2.Response:
    return http.post("/mcp", headers=bad.headers, content=bad.content)


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_request_gets_its_status_and_json_rpc_error(http: httpx2.Client, case: str) -> None:
    bad = BAD[case]

    response = _send(http, bad)

    assert response.status_code == bad.status, response.text
    if bad.code is not None:
        answer = response.json()
        assert answer["jsonrpc"] == "2.0"
        assert answer["error"]["code"] == bad.code
    if bad.check is not None:
        bad.check(response.json())


def test_unsupported_version_error_lists_every_version_the_server_discovers(http: httpx2.Client) -> None:
    headers, body = _version("1900-01-01")
    refused = http.post("/mcp", headers=headers, content=body)
    headers, body = _request("server/discover")
    discovered = http.post("/mcp", headers=headers, content=body).json()["result"]["supportedVersions"]

    assert refused.status_code == 400
    assert discovered == SUPPORTED_VERSIONS
    # A dual-era server is told apart from a modern-only one by this list (the spec's example lists both).
    assert sorted(refused.json()["error"]["data"]["supported"]) == sorted(discovered)


def test_the_server_keeps_serving_after_every_bad_request(http: httpx2.Client, process: Process) -> None:
    for bad in BAD.values():
        _send(http, bad)

    headers, body = _call("get_node", {"id": "team-payments"})
    response = http.post("/mcp", headers=headers, content=body)

    assert response.status_code == 200
    assert response.json()["result"]["structuredContent"]["node"]["id"] == "team-payments"
    assert process.popen.poll() is None
    assert "Traceback" not in process.output()


def test_the_start_up_line_says_how_callers_are_identified(process: Process) -> None:
    announced = next(line for line in process.stderr if "serving MCP at" in line)
    assert "0 bearer token(s) in canon-tokens.json" in announced  # none created in this process's folder
    assert "callers without a token read public nodes" in announced


def test_healthz_reports_ok_and_the_store_revision(http: httpx2.Client) -> None:
    response = http.get("/healthz")

    assert response.status_code == 200
    health = response.json()
    assert health["status"] == "ok"
    assert isinstance(health["revision"], int)
    assert health["revision"] > 0
    assert health["protocolVersions"] == [MODERN, LEGACY]


def test_legacy_initialize_over_the_wire_opens_a_session(http: httpx2.Client) -> None:
    response = http.post("/mcp", headers=LEGACY_HEADERS, json=initialize_body())

    assert response.status_code == 200
    assert response.headers["mcp-session-id"]
    capabilities = response.json()["result"]["capabilities"]
    assert capabilities["tools"]["listChanged"] is True
    assert capabilities["resources"]["subscribe"] is True
    assert "logging" in capabilities


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_sdk_client_over_http_lists_and_calls_tools(process: Process, mode: str) -> None:
    async with mcp.Client(process.url, mode=mode) as client:  # pyright: ignore[reportArgumentType]
        tools = await client.list_tools()
        result = await client.call_tool("find_nodes", {"type": "Team", "limit": 3})
        with pytest.raises(mcp.MCPError) as raised:
            await client.call_tool("get_nod", {"id": "team-payments"})
        version = client.protocol_version

    assert version == (MODERN if mode == "auto" else LEGACY)
    assert [t.name for t in tools.tools] == tool_names("read")  # anonymous
    assert result.structured_content is not None
    assert len(result.structured_content["items"]) == 3
    assert raised.value.code == -32602


@pytest.fixture(scope="module")
def agent_process(seed_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    folder = tmp_path_factory.mktemp("serve-agent")
    store = copy_store(seed_template, folder / "canon.db")
    with serving(store, "--profile", "agent", "--tool-prefix", "canon_", cwd=folder) as running:
        yield running


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_serve_with_agent_profile_and_prefix_lists_prefixed_basic_tools_and_answers_hidden_ones(
    agent_process: Process, mode: str
) -> None:
    async with mcp.Client(agent_process.url, mode=mode) as client:  # pyright: ignore[reportArgumentType]
        listed = [t.name for t in (await client.list_tools()).tools]
        # public nodes: the caller has no token, so it is anonymous
        paths = await client.call_tool("canon_find_paths", {"source": "team-payments",
                                                            "target": "svc-checkout-api", "max_depth": 3})  # fmt: skip
        node = await client.call_tool("canon_get_node", {"id": "team-payments"})

    assert listed == [f"canon_{n}" for n in tool_names("read", advanced=False)]
    assert paths.is_error is not True
    # the agent profile answers with the result's JSON once, as text (ADR 0032)
    assert (paths.structured_content, node.structured_content) == (None, None)
    assert json.loads(text_of(paths))["items"]
    assert json.loads(text_of(node))["node"]["id"] == "team-payments"


def text_of(result: Any) -> str:
    [content] = result.content
    return str(content.text)


def test_serve_with_two_workers_answers_from_both_and_stops_them_all(seed_template: Path, tmp_path: Path) -> None:
    """`--workers 2`: two spawned processes share the port, every call is answered (a read after a write sees it,
    whichever worker each lands on), a SIGTERM to the parent stops both, and each flushes its audit log."""
    import psutil

    store = copy_store(seed_template, tmp_path / "canon.db")
    created = subprocess.run([sys.executable, "-m", "core.app.cli", "--store", str(store), "token", "create", "op",
                              "--role", "admin"], cwd=tmp_path, capture_output=True, text=True, check=True)  # fmt: skip
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call",
               "Authorization": f"Bearer {created.stdout.strip()}"}  # fmt: skip
    with serving(store, "--workers", "2", cwd=tmp_path) as process:
        children = psutil.Process(process.popen.pid).children()
        workers = [c for c in children if "spawn_main" in " ".join(c.cmdline())]  # not multiprocessing's tracker
        assert len(workers) == 2
        team = {"slug": "twoworkers", "name": "Two Workers", "mission": "Serve twice.", "area": "platform"}
        answers: list[dict[str, Any]] = []
        for i in range(40):  # a fresh connection each time: the kernel spreads them over both workers
            name, arguments = (("upsert_node", {"id": "team-two", "type": "Team", "properties": team}) if i == 0
                               else ("get_node", {"id": "team-two"}))  # fmt: skip
            body = {"jsonrpc": "2.0", "id": i, "method": "tools/call",
                    "params": {"name": name, "arguments": arguments, "_meta": envelope()}}  # fmt: skip
            with httpx2.Client() as http:
                answers.append(http.post(process.url, json=body, headers={**headers, "Mcp-Name": name}).json())
        status = process.stop(signal.SIGTERM)

    assert all("result" in a and not a["result"].get("isError") for a in answers), answers
    assert {a["result"]["structuredContent"]["node"]["id"] for a in answers[1:]} == {"team-two"}
    assert status == 143
    assert not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers)
    audit = subprocess.run([sys.executable, "-m", "core.app.cli", "--store", str(store), "audit", "--json", "--limit",
                            "100"], cwd=tmp_path, capture_output=True, text=True, check=True).stdout  # fmt: skip
    records = [json.loads(line) for line in audit.splitlines()]
    assert sum(r["target"] in ("get_node", "upsert_node") for r in records) == 40
    assert len({r["surface"] for r in records}) == 1


def test_workers_apply_to_http_only(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "core.app.cli", "--store", str(tmp_path / "c.db"), "serve", "--stdio",
                           "--workers", "2"], cwd=tmp_path, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 2
    assert "--workers applies to HTTP" in done.stderr


def _workers(process: Process) -> list[Any]:
    import psutil

    children = psutil.Process(process.popen.pid).children()
    return [c for c in children if "spawn_main" in " ".join(c.cmdline())]  # not multiprocessing's resource tracker


def _open_kept_alive(port: int, count: int) -> list[socket.socket]:
    """`count` connections opened at once, each then answered once on /healthz (so each has been accepted)."""
    connections = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(count)]
    request = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    for connection in connections:
        connection.sendall(request)
    for connection in connections:
        assert connection.recv(65536).startswith(b"HTTP/1.1 200"), "a /healthz answer on every connection"
    return connections


def test_two_workers_share_kept_alive_connections(seed_template: Path, tmp_path: Path) -> None:
    """Connections opened together land on both workers (each worker has its own SO_REUSEPORT socket).

    With one socket shared by both, the worker that woke first accepted every pending connection, so clients that
    keep their connections were all served by one process. 32 connections all hashed to one of two sockets would
    happen once in 2**31 runs.
    """
    store = copy_store(seed_template, tmp_path / "canon.db")
    with serving(store, "--workers", "2", cwd=tmp_path) as process:
        workers = _workers(process)
        assert len(workers) == 2
        connections = _open_kept_alive(process.port, 32)
        try:
            held = [sum(1 for c in w.net_connections(kind="tcp") if c.status == "ESTABLISHED"
                        and c.laddr.port == process.port) for w in workers]  # fmt: skip
        finally:
            for connection in connections:
                connection.close()
    assert sum(held) == 32
    assert min(held) >= 1, f"connections per worker: {held}"


def test_a_worker_that_dies_is_started_again_on_its_socket(seed_template: Path, tmp_path: Path) -> None:
    """SIGKILL one of two workers: the parent starts a new one on the same socket, and every connection, including
    those the kernel hashes to that socket, is answered again."""
    import psutil

    store = copy_store(seed_template, tmp_path / "canon.db")
    with serving(store, "--workers", "2", cwd=tmp_path) as process:
        first = _workers(process)
        assert len(first) == 2
        first[0].kill()
        first[0].wait(timeout=30)
        deadline = time.monotonic() + 60
        while not (replaced := [w for w in _workers(process) if w.pid != first[0].pid and w.pid != first[1].pid]):
            assert time.monotonic() < deadline, f"no new worker was started:\n{process.output()}"
            time.sleep(0.1)
        connections = _open_kept_alive(process.port, 32)  # waits for the new worker: its socket queues them
        for connection in connections:
            connection.close()
        running = _workers(process)
        status = process.stop(signal.SIGTERM)

    assert {w.pid for w in running} == {first[1].pid, replaced[0].pid}
    assert "exited with code -9; starting it again" in process.output()
    assert status == 143
    assert not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in running)


def test_workers_that_cannot_start_stop_the_server_with_a_clear_error(tmp_path: Path) -> None:
    """A worker that exits again and again right after starting is not restarted for ever: every worker is stopped
    and `serve_workers` says which worker failed and how often. (The store is not a SQLite file, so each worker
    fails to open it.)"""
    from core.http.serve import serve_workers
    from core.mcp.surface import McpSurface
    from core.ops.config import Config
    from core.values.errors import CanonError

    store = tmp_path / "canon.db"
    store.write_text("not a database")
    config = Config(store=store, port=0, tokens=tmp_path / "tokens.json")
    with pytest.raises(CanonError, match=r"worker \d exited 2 times within 30 s of starting \(last exit code 1\)"):
        serve_workers(config, [McpSurface()], 2, "a broken store", restarts=1, settle_s=30)
