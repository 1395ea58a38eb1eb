"""`canon serve --stdio` on the wire: the revisions it serves, and the answers to lines it refuses, as raw JSON-RPC
lines from a real process. The refusals are the very ones canon answers over HTTP (`core.mcp.revisions`)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.instance import Instance
from core.mcp.revisions import BATCH, SUPPORTED_VERSIONS
from core.principal import LOCAL
from tests.mcp.conftest import LEGACY, asgi_http, copy_store, envelope, modern_request

pytestmark = pytest.mark.anyio
OLDER = ("2024-11-05", "2025-03-26", "2025-06-18")


class Stdio:
    """A `canon serve --stdio` child process, spoken to one JSON-RPC line at a time."""

    def __init__(self, popen: subprocess.Popen[str]) -> None:
        self.popen = popen
        self.lines: queue.Queue[str] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.lines.put(line)

    def send(self, message: Any) -> None:
        assert self.popen.stdin is not None
        self.popen.stdin.write((message if isinstance(message, str) else json.dumps(message)) + "\n")
        self.popen.stdin.flush()

    def ask(self, message: Any) -> dict[str, Any]:
        """Send one line; the answer line (waiting at most 30 s: a cold start imports the SDK)."""
        answer: dict[str, Any] = json.loads(self.ask_line(message))
        return answer

    def ask_line(self, message: Any) -> str:
        """Send one line; the answer line as it came, without its newline."""
        self.send(message)
        return self.lines.get(timeout=30).rstrip("\n")


@pytest.fixture
def stdio(seed_template: Path, tmp_path: Path) -> Iterator[Stdio]:
    yield from _serving(seed_template, tmp_path)


@pytest.fixture
def agent_stdio(seed_template: Path, tmp_path: Path) -> Iterator[Stdio]:
    """`canon serve --stdio --profile agent`."""
    yield from _serving(seed_template, tmp_path, "--profile", "agent")


def _serving(seed_template: Path, tmp_path: Path, *options: str) -> Iterator[Stdio]:
    store = copy_store(seed_template, tmp_path / "canon.db")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANON_")}
    popen = subprocess.Popen([sys.executable, "-m", "core.cli", "--store", str(store), "serve", "--stdio", *options],
                             cwd=tmp_path, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)  # fmt: skip
    process = Stdio(popen)
    try:
        yield process
    finally:
        popen.kill()
        popen.wait(timeout=10)
        process.reader.join(timeout=10)  # it ends at the closed pipe's end
        for pipe in (popen.stdin, popen.stdout):
            if pipe is not None:
                pipe.close()


def initialize(version: str, id_: int) -> dict[str, Any]:
    client = {"name": "t", "version": "0"}
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": client}
    return {"jsonrpc": "2.0", "id": id_, "method": "initialize", "params": params}


def tools_list(version: str, id_: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/list", "params": {"_meta": envelope(version)}}


async def test_stdio_refuses_unserved_revisions_and_batches_without_choosing_a_revision_then_negotiates_older_ones(
    stdio: Stdio, shared_instance: Instance
) -> None:
    unserved = stdio.ask(tools_list("1900-01-01", 1))
    handshake_in_meta = stdio.ask(tools_list(LEGACY, 2))
    batch = stdio.ask(json.dumps([tools_list("2026-07-28", 3)]))
    not_json = stdio.ask("{")
    negotiated = {version: stdio.ask(initialize(version, 10 + i)) for i, version in enumerate(OLDER)}
    stdio.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    listed = stdio.ask({"jsonrpc": "2.0", "id": 20, "method": "tools/list"})
    async with asgi_http(shared_instance) as http:  # the same request over HTTP
        headers, body = modern_request("tools/list")
        body["params"]["_meta"] = envelope("1900-01-01")
        headers["MCP-Protocol-Version"] = "1900-01-01"
        over_http = (await http.post("/mcp", json=body, headers=headers)).json()

    assert unserved["error"]["code"] == -32022
    assert unserved["error"]["data"] == {"supported": SUPPORTED_VERSIONS, "requested": "1900-01-01"}
    assert unserved["error"] == over_http["error"]  # one answer on both transports
    assert handshake_in_meta["error"]["data"] == {"supported": SUPPORTED_VERSIONS, "requested": LEGACY}
    assert batch == {"jsonrpc": "2.0", "id": None, "error": BATCH.model_dump(exclude_none=True)}
    assert batch["error"]["code"] == -32600
    assert not_json["error"]["code"] == -32700
    # the refusals chose no revision: initialize is still served, and answers the one handshake revision served
    assert {v: a["result"]["protocolVersion"] for v, a in negotiated.items()} == dict.fromkeys(OLDER, LEGACY)
    assert listed["result"]["tools"]


NOT_FOR_STDIO = ("strawberry", "fastapi", "jinja2", "generators", "core.http", "yaml", "networkx")


def test_stdio_answers_initialize_without_importing_what_it_does_not_need(seed_template: Path, tmp_path: Path) -> None:
    """Start-up is paid at every agent session: stdio imports no HTTP surface or host (the SDK's own imports of
    starlette and uvicorn are the SDK's), nor YAML on a JSON model, nor networkx before a walk needs it. Asserted
    on module names from `-X importtime`, not on times."""
    store = copy_store(seed_template, tmp_path / "canon.db")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANON_")} | {"CANON_CACHE": str(tmp_path)}
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "core.cli", "--store", str(store), "serve",
                           "--stdio"], input=json.dumps(initialize("2025-11-25", 1)) + "\n", capture_output=True,
                          text=True, cwd=tmp_path, env=env, timeout=60, check=True)  # fmt: skip
    assert json.loads(done.stdout.splitlines()[0])["result"]["serverInfo"]["name"]
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "core.mcp.server" in imported  # the listing is real
    assert sorted(m for m in imported if any(m == p or m.startswith(f"{p}.") for p in NOT_FOR_STDIO)) == []


def _heaviest_neighbourhoods(instance: Instance, count: int) -> list[str]:
    """The ids of the `count` nodes whose default get_neighbors page is the largest object."""
    assert instance.index is not None
    with instance.index.reading() as view:
        ids = sorted(view.graph.nodes)
    size = {i: len(json.dumps(instance.dispatcher.call_tool(LOCAL, "test", "get_neighbors", {"id": i}).as_json()))
            for i in ids}  # fmt: skip
    return sorted(ids, key=lambda i: size[i], reverse=True)[:count]


def test_the_agent_profile_answers_the_two_heaviest_nodes_default_reads_within_8_kb_a_line(
    agent_stdio: Stdio, shared_instance: Instance
) -> None:
    agent_stdio.ask(initialize(LEGACY, 1))
    agent_stdio.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    heaviest = _heaviest_neighbourhoods(shared_instance, 2)
    calls = [(tool, node_id) for node_id in heaviest for tool in ("get_neighbors", "get_node")]

    lines = [agent_stdio.ask_line({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                                   "params": {"name": tool, "arguments": {"id": node_id}}})
             for n, (tool, node_id) in enumerate(calls, start=2)]  # fmt: skip

    for (tool, node_id), line in zip(calls, lines, strict=True):
        result = json.loads(line)["result"]
        assert result["isError"] is False, result
        assert len(line.encode()) <= 8 * 1024, (tool, node_id, len(line.encode()))
    pages = [json.loads(json.loads(line)["result"]["content"][0]["text"]) for line in lines[::2]]
    assert all(page["truncated"] and page["next_cursor"] for page in pages)  # the rest is a page away, said so
