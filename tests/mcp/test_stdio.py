"""`canon serve --stdio` on the wire: the revisions it serves, and the answers to lines it refuses, as raw JSON-RPC
lines from a real process. The refusals are the very ones canon answers over HTTP (`core.mcp.revisions`).

Its start: the opening `initialize` is answered before the SDK is imported, with the SDK's own answer (ADR 0036),
and nothing of the SDK or an HTTP stack is imported before that."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import AsyncGenerator, Generator, Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from anyio.streams.memory import MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from core.mcp.handshake import early_result, initialize_result, opening_request
from core.mcp.revisions import BATCH, SUPPORTED_VERSIONS
from core.mcp.server import CanonServer
from core.mcp.stdio_sdk import AnsweredOnce, Item, Opening
from core.ops.config import Config
from core.seam.instance import Instance
from tests.mcp.conftest import LEGACY, Served, asgi_http, copy_store, envelope, modern_request
from tests.mcp.test_handshake import ANSWERED

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


@contextlib.contextmanager
def spawned(command: list[str], store: Path, cwd: Path, env: dict[str, str] | None = None, *, stderr: Any = None,
            pass_fds: tuple[int, ...] = (), options: tuple[str, ...] = ()) -> Generator[Stdio]:  # fmt: skip
    """`command` (the python arguments before canon's) serving `store` over stdio with `serve`'s `options`, killed
    at the end if still up."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CANON_")} | (env or {})
    popen = subprocess.Popen([sys.executable, *command, "--store", str(store), "serve", "--stdio", *options],
                             cwd=cwd, env=clean, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL if stderr is None else stderr, text=True,
                             pass_fds=pass_fds)  # fmt: skip
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


@pytest.fixture
def stdio(seed_template: Path, tmp_path: Path) -> Iterator[Stdio]:
    with spawned(["-m", "core.app.cli"], copy_store(seed_template, tmp_path / "canon.db"), tmp_path) as process:
        yield process


@pytest.fixture
def agent_stdio(seed_template: Path, tmp_path: Path) -> Iterator[Stdio]:
    """`canon serve --stdio --profile agent`."""
    store = copy_store(seed_template, tmp_path / "canon.db")
    with spawned(["-m", "core.app.cli"], store, tmp_path, options=("--profile", "agent")) as process:
        yield process


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
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "core.app.cli", "--store", str(store), "serve",
                           "--stdio"], input=json.dumps(initialize("2025-11-25", 1)) + "\n", capture_output=True,
                          text=True, cwd=tmp_path, env=env, timeout=60, check=True)  # fmt: skip
    assert json.loads(done.stdout.splitlines()[0])["result"]["serverInfo"]["name"]
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "core.mcp.server" in imported  # the listing is real
    assert sorted(m for m in imported if any(m == p or m.startswith(f"{p}.") for p in NOT_FOR_STDIO)) == []


def _heaviest_neighbourhoods(instance: Instance, count: int) -> list[str]:
    """The ids of the `count` nodes whose default get_neighbors page is the largest object, for the principal a
    stdio client is by default (the local writer)."""
    caller = Config().local_principal()
    assert instance.index is not None
    with instance.index.reading() as view:
        ids = sorted(view.graph.nodes)
    size = {i: len(json.dumps(instance.dispatcher.call_tool(caller, "test", "get_neighbors", {"id": i}).as_json()))
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


AGENT_TOOLS_LIST_BUDGET = 12_800  # bytes of the agent profile's tools/list line (ADR 0032, ADR 0042: 12 KiB + as_of)
FULL_TOOLS_LIST_BUDGET = 73_728  # (ADR 0042: 48 KiB + as_of; ADR 0050: 68 KiB; ADR 0058: 72 KiB) programs, UIs


@pytest.mark.parametrize("role", ["writer", "admin"])
def test_the_tools_list_line_fits_its_budget_in_each_profile_and_only_the_full_profile_carries_tool_icons(
    seed_template: Path, tmp_path: Path, role: str
) -> None:
    """What every agent session pays before its first call, on the default model with the sample data: the agent
    profile's `tools/list` line within 12 KiB, the full profile's within 72 KiB, for the default local role and
    the admin (who may call more). Tools carry their icons in the full profile only (ADR 0042)."""
    (tmp_path / "canon.toml").write_text(f'[local]\nrole = "{role}"\n')
    store = copy_store(seed_template, tmp_path / "canon.db")
    lines: dict[str, str] = {}
    for profile, options in (("agent", ("--profile", "agent")), ("full", ())):
        env = {"CANON_CONFIG": str(tmp_path / "canon.toml")}
        with spawned(["-m", "core.app.cli"], store, tmp_path, env, options=options) as process:
            process.ask(initialize(LEGACY, 1))
            process.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            lines[profile] = process.ask_line({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})

    agent, full = (json.loads(lines[p])["result"]["tools"] for p in ("agent", "full"))
    assert {t["name"] for t in agent} >= {"search", "get_node", "upsert_node"}  # the role's tools, writes included
    assert len(lines["agent"].encode()) <= AGENT_TOOLS_LIST_BUDGET, len(lines["agent"].encode())
    assert len(lines["full"].encode()) <= FULL_TOOLS_LIST_BUDGET, len(lines["full"].encode())
    assert not any("icons" in t for t in agent)
    assert all(t["icons"][0]["src"].startswith("data:image/svg+xml") for t in full), [t["name"] for t in full]


# the SDK's import held back until the test lets it go: the first of its packages to be imported waits on a pipe
# the test writes to before it runs (in its loader, which holds no lock but that package's own)
GATED_CANON = """
import importlib.machinery, os, runpy, sys

class Held:
    def __init__(self, loader):
        self.loader = loader

    def __getattr__(self, name):
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        os.read(int(os.environ["SDK_GATE_FD"]), 1)
        self.loader.exec_module(module)

class HoldTheSdk:
    held = False

    def find_spec(self, name, path=None, target=None):
        if name not in ("mcp", "mcp_types", "pydantic") or self.held:
            return None
        self.held = True
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        spec.loader = Held(spec.loader)
        return spec

sys.meta_path.insert(0, HoldTheSdk())
sys.argv[0] = "canon"
runpy.run_module("core.app.cli", run_name="__main__", alter_sys=True)
"""
DIFFERS = "differs from the SDK's"  # what core.mcp.stdio_sdk logs if the early answer was not the SDK's


def test_stdio_answers_initialize_before_it_imports_the_sdk_then_the_sdk_serves_the_session(
    seed_template: Path, tmp_path: Path, shared_instance: Instance
) -> None:
    """An agent waits for `initialize` at every session start: it is answered while the SDK is still not imported
    (here, held back until the answer has arrived), and the SDK then serves the rest of the session, having
    answered the same `initialize` itself, the same way (ADR 0036)."""
    store = copy_store(seed_template, tmp_path / "canon.db")
    gate_read, gate_write = os.pipe()
    with (tmp_path / "stderr.log").open("w") as log, spawned(["-c", GATED_CANON], store, tmp_path,
            {"SDK_GATE_FD": str(gate_read)}, stderr=log, pass_fds=(gate_read,)) as canon:  # fmt: skip
        os.close(gate_read)
        early = canon.ask(initialize(LEGACY, 1))
        os.write(gate_write, b"go")
        os.close(gate_write)
        canon.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        listed = canon.ask({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        pinged = canon.ask({"jsonrpc": "2.0", "id": 1, "method": "ping"})  # the id of initialize, free again
        assert canon.popen.stdin is not None
        canon.popen.stdin.close()
        status = canon.popen.wait(timeout=30)
    expected = initialize_result(LEGACY, shared_instance.registry.instructions())
    assert early == {"jsonrpc": "2.0", "id": 1, "result": expected}
    assert listed["id"] == 2
    assert "describe_model" in [t["name"] for t in listed["result"]["tools"]]
    assert pinged == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert canon.lines.empty()  # the SDK's own answer to initialize was not sent again
    assert status == 0
    assert DIFFERS not in (tmp_path / "stderr.log").read_text()


def test_stdio_with_the_fast_path_off_answers_initialize_from_the_sdk_alone_with_the_same_answer(
    seed_template: Path, tmp_path: Path, shared_instance: Instance
) -> None:
    store = copy_store(seed_template, tmp_path / "canon.db")
    with spawned(["-m", "core.app.cli"], store, tmp_path, {"CANON_MCP_FASTPATH": "0"}) as canon:
        answer = canon.ask(initialize(LEGACY, 7))
    assert answer == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": initialize_result(LEGACY, shared_instance.registry.instructions()),
    }


@contextlib.asynccontextmanager
async def running(server: CanonServer, write: Any) -> AsyncGenerator[MemoryObjectSendStream[Item]]:
    """The SDK's loop serving one connection of `server` (as on stdio), reading what the block sends, writing to
    `write`."""
    send, reads = anyio.create_memory_object_stream[Item](10)
    async with send, anyio.create_task_group() as tasks:
        tasks.start_soon(server.run, reads, write, server.create_initialization_options())
        yield send
        tasks.cancel_scope.cancel()


def message(request: dict[str, Any]) -> SessionMessage:
    return SessionMessage(types.jsonrpc_message_adapter.validate_python(request))


@pytest.mark.parametrize("request_", ANSWERED.values(), ids=ANSWERED.keys())
async def test_the_early_answer_is_the_sdks_for_every_opening_request_canon_answers_early(
    served: Served, request_: dict[str, Any]
) -> None:
    """`core.mcp.handshake` answers `initialize` and `server/discover` as the SDK does (the capabilities it derives
    from canon's handlers, serverInfo, instructions, the negotiated revision), for every revision and request shape
    it answers early: a handler added without its capability there fails here."""
    writes, received = anyio.create_memory_object_stream[SessionMessage](10)
    async with received, running(served.server, writes) as send:
        await send.send(message(request_))
        with anyio.fail_after(10):
            answer = await received.receive()
    opening = opening_request(json.dumps(request_).encode())
    assert opening is not None
    assert answer.message.model_dump(by_alias=True, exclude_unset=True, mode="json") == {
        "jsonrpc": "2.0", "id": request_["id"],
        "result": early_result(opening, served.instance.registry.instructions())}  # fmt: skip


async def test_the_sdks_answer_to_an_initialize_answered_early_is_compared_and_not_sent_again(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    request = initialize(LEGACY, 1)
    told = Opening(json.dumps(request).encode(), 1, {"protocolVersion": "1900-01-01"})  # not what the SDK answers
    writes, received = anyio.create_memory_object_stream[SessionMessage](10)
    async with received, running(served.server, AnsweredOnce(writes, told)) as send:
        for sent in (request, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                     {"jsonrpc": "2.0", "id": 1, "method": "ping"}):  # fmt: skip
            await send.send(message(sent))
        with anyio.fail_after(10):
            answer = await received.receive()
    assert answer.message.model_dump(by_alias=True, exclude_unset=True, mode="json") == {
        "jsonrpc": "2.0", "id": 1, "result": {}}  # fmt: skip
    assert [r.levelname for r in caplog.records if DIFFERS in r.getMessage()] == ["ERROR"]


def test_the_stdio_entry_imports_neither_the_sdk_nor_an_http_stack(tmp_path: Path) -> None:
    """What `canon serve --stdio` imports before it answers `initialize`: the command line and the stdio entry,
    without the SDK (nor pydantic, its types, anyio's friends on the HTTP side) or any HTTP surface."""
    script = "import sys, core.app.cli, core.mcp.stdio; print(' '.join(sorted(sys.modules)))"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANON_")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=60, check=True)  # fmt: skip
    loaded = done.stdout.split()
    assert "core.mcp.stdio" in loaded  # the listing is real
    banned = (*NOT_FOR_STDIO, "mcp", "mcp_types", "pydantic", "pydantic_core", "starlette", "uvicorn", "httpx2")
    assert [m for m in loaded if any(m == p or m.startswith(f"{p}.") for p in banned)] == []


def test_arguments_nested_past_what_a_parser_follows_are_answered_under_their_id_over_stdio(stdio: Stdio) -> None:
    params = {"name": "get_node", "arguments": {"id": "@nested@"}, "_meta": envelope()}
    line = json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": params})
    line = line.replace('"@nested@"', "[" * 20_000 + "1" + "]" * 20_000)  # valid JSON, 40 KB; json.loads gives up

    answer = stdio.ask(line)

    assert answer["id"] == 4
    assert answer["result"]["isError"] is True
    refused = json.loads(answer["result"]["content"][0]["text"])["error"]
    assert refused["code"] == "invalid_arguments"
    [problem] = refused["problems"]
    assert problem["pointer"].startswith("/id/0/0/")
    assert "nested deeper than" in problem["message"]


async def test_a_lone_surrogate_in_a_stdio_call_is_answered_under_its_id_with_the_tool_error_http_gives(
    stdio: Stdio, shared_instance: Instance
) -> None:
    params = {"name": "get_node", "arguments": {"id": "\ud800"}, "_meta": envelope()}
    line = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params})
    assert "\\ud800" in line  # valid JSON (json.loads reads it back), which the SDK's own parser refuses

    over_stdio = stdio.ask(line)
    async with asgi_http(shared_instance) as http:  # the same request over HTTP
        headers, body = modern_request("tools/call", {"name": "get_node", "arguments": {"id": "\ud800"}}, id_=2)
        over_http = (await http.post("/mcp", content=json.dumps(body), headers=headers)).json()

    assert over_stdio["id"] == 2
    assert over_stdio["result"]["isError"] is True
    refused = json.loads(over_stdio["result"]["content"][0]["text"])
    assert refused["error"]["code"] == "invalid_arguments"
    assert [p["pointer"] for p in refused["error"]["problems"]] == ["/id"]
    assert over_stdio["result"] == over_http["result"]
