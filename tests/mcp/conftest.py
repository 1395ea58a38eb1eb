"""Fixtures for canon's MCP surface: seeded instances, in-process servers and clients, a real `canon serve`.

* `seed_template`, `instance`, `shared_instance`, `copy_store`, `open_copy`: in tests/conftest.py, shared with
  every package.
* `revision`: every in-process behaviour runs on both protocol revisions, `legacy` (2025-11-25, initialize
  and sessions) and `2026-07-28` (stateless, per-request `_meta`).
* `serving(...)`: a real `canon serve` child process on 127.0.0.1 and a free port; `Process.stop` stops it as an
  operator would (a signal), so it shuts down cleanly.
* `connect(url, mode, token)`: the SDK client over HTTP, presenting a bearer token (or none: anonymous).

`CANON_MCP_FASTPATH=0` in the tests' environment switches canon's MCP fast path off in every app and `canon serve`
they start (`FASTPATH`), as it does for canon: the plain SDK path must pass the same tests
(`tests/mcp/fastpath/test_plain_path.py` runs them so).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp
import psutil
import pytest
from mcp.client.streamable_http import streamable_http_client
from starlette.applications import Starlette

from core.http.app import build_app
from core.mcp.events import EventFanout
from core.mcp.server import DEFAULT_OPTIONS, CanonServer, ServeOptions, build_server
from core.mcp.surface import McpEndpoint, McpSurface
from core.seam.changes import ChangeFeed
from core.seam.instance import Instance
from core.seam.surfaces import discover
from core.store import Store
from core.values.operations import PutNode
from core.values.principal import LOCAL
from core.values.records import Node
from tests.conftest import FASTPATH_VAR, run_canon
from tests.conftest import copy_store as copy_store  # re-exported: MCP tests import it from here
from tests.conftest import open_copy as open_copy

LEGACY, MODERN = "2025-11-25", "2026-07-28"
REVISIONS = ("legacy", MODERN)  # the SDK client's `mode` for each protocol revision
MODES = ("auto", "legacy")  # over HTTP: `auto` negotiates 2026-07-28 (server/discover), `legacy` 2025-11-25
MODE_IDS = (MODERN, LEGACY)
SERVE_LINE = re.compile(r"canon: serving MCP at (http://127\.0\.0\.1:(\d+)(/[^ ]*)?/mcp)")
DEADLINE_S = 5.0


# -- stores and instances (`seed_template`, `instance`, `shared_instance`: tests/conftest.py) ---------------------
def touch_node(store: Store, node_id: str) -> int:
    """Commit a change to one node's properties (a new revision of it); return the store revision."""
    node = store.node(node_id)
    assert node is not None
    properties = dict(node.properties)
    properties["name"] = f"{properties['name']} ({store.revision() + 1})"
    result = store.commit([PutNode(dataclasses.replace(node, properties=properties))], principal="test:wire")
    assert len(result.changes) == 1
    return result.revision


# -- in-process servers ---------------------------------------------------------------------------------------------
@pytest.fixture(params=REVISIONS, ids=["2025-11-25", "2026-07-28"])
def revision(request: pytest.FixtureRequest) -> str:
    """The SDK client mode of one protocol revision; a test taking it runs once per revision."""
    mode: str = request.param
    return mode


@dataclass
class Served:
    """An in-process MCP server over an instance, with its change feed (whose pump a test runs) and fan-out."""

    instance: Instance
    server: CanonServer
    feed: ChangeFeed
    fanout: EventFanout
    options: ServeOptions = DEFAULT_OPTIONS

    def client(self, mode: str, **kwargs: Any) -> mcp.Client:
        return mcp.Client(self.server, mode=mode, **kwargs)  # pyright: ignore[reportArgumentType]


def mcp_app(instance: Instance, options: ServeOptions = DEFAULT_OPTIONS, *, alone: bool = True,
            **parts: Any) -> Starlette:  # fmt: skip
    """The host serving MCP (`McpSurface(options, **parts)`), alone or with every other installed surface."""
    mcp = McpSurface(options, **parts)
    return build_app(instance, [mcp] if alone else [mcp if s.name == mcp.name else s for s in discover()])


def mcp_of(app: Starlette) -> McpEndpoint:
    """The running `/mcp` of an app made by `mcp_app` (its lifespan running)."""
    endpoint = next(r.running.app for r in app.state.surfaces if r.surface.name == "mcp")
    assert isinstance(endpoint, McpEndpoint)
    return endpoint


def serve(instance: Instance, options: ServeOptions = DEFAULT_OPTIONS) -> Served:
    assert instance.index is not None
    feed = ChangeFeed(instance.index)
    fanout = EventFanout(feed)
    server = build_server(lambda: instance.snapshot, fanout, lambda ctx: LOCAL, options)
    return Served(instance, server, feed, fanout, options)


@pytest.fixture
def served(shared_instance: Instance) -> Served:
    """An in-process server over the shared (read-only) instance."""
    return serve(shared_instance)


@contextlib.asynccontextmanager
async def pumping(feed: ChangeFeed) -> AsyncIterator[None]:
    """Run the change pump (which delivers notifications) for the duration of the block."""
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(feed.pump)
        yield
        tasks.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def asgi_http(instance: Instance, options: ServeOptions = DEFAULT_OPTIONS) -> AsyncIterator[httpx2.AsyncClient]:
    """Raw HTTP to the ASGI app in-process, with its lifespan (session manager and pump) running."""
    app = mcp_app(instance, options, alone=False)
    async with app.router.lifespan_context(app):
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as http:
            yield http


# -- raw JSON-RPC over HTTP -----------------------------------------------------------------------------------------
def envelope(version: str = MODERN) -> dict[str, Any]:
    return {"io.modelcontextprotocol/protocolVersion": version, "io.modelcontextprotocol/clientCapabilities": {}}


def modern_request(method: str, params: dict[str, Any] | None = None, *, id_: int = 1,
                   meta: bool = True) -> tuple[dict[str, str], dict[str, Any]]:  # fmt: skip
    """Headers and body of a 2026-07-28 request, as a conforming client sends them."""
    body_params = dict(params or {})
    if meta:
        body_params["_meta"] = envelope()
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
    }
    if method == "tools/call":
        headers["Mcp-Name"] = str(body_params["name"])
    elif method == "resources/read":
        headers["Mcp-Name"] = str(body_params["uri"])
    return headers, {"jsonrpc": "2.0", "id": id_, "method": method, "params": body_params}


LEGACY_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def initialize_body() -> dict[str, Any]:
    return {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "tests", "version": "0"}},
    }  # fmt: skip


# -- a real `canon serve` -------------------------------------------------------------------------------------------
@dataclass
class Process:
    """A `canon serve` child process and what it has written to stderr so far."""

    popen: subprocess.Popen[str]
    url: str
    port: int
    stderr: list[str] = field(default_factory=list[str])

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        return "".join(self.stderr)

    def stop(self, sig: signal.Signals = signal.SIGINT, timeout: float = 30) -> int:
        """Stop the server as an operator does (a signal) and wait for it to exit; its exit status."""
        self.popen.send_signal(sig)
        return self.popen.wait(timeout=timeout)


def _drain(stream: Any, lines: list[str], ready: queue.Queue[str]) -> None:
    for line in stream:
        lines.append(line)
        ready.put(line)
    ready.put("")  # end of output: the process exited


def _wait_healthy(base: str, deadline: float, prefix: str = "") -> None:
    """Readiness: the socket is bound before uvicorn accepts on it, so ask /healthz until it answers."""
    with httpx2.Client(base_url=base, timeout=DEADLINE_S) as http:
        while True:
            try:
                if http.get(f"{prefix}/healthz").status_code == 200:
                    return
            except httpx2.TransportError:
                if time.monotonic() > deadline:
                    raise
            stop = threading.Event()
            stop.wait(0.02)  # a readiness poll: there is no event to wait on until the port accepts


@contextlib.contextmanager
def serving(store: Path | str, *options: str, cwd: Path) -> Iterator[Process]:
    """`canon --store STORE serve --port 0 OPTIONS` as a user runs it; killed when the block ends."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANON_") or k == FASTPATH_VAR}
    command = [sys.executable, "-m", "core.app.cli", "--store", str(store), "serve", "--port", "0",
               "--log-level", "warning", *options]  # fmt: skip
    popen = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
    lines: list[str] = []
    ready: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_drain, args=(popen.stderr, lines, ready), daemon=True).start()
    try:
        deadline = time.monotonic() + 30  # a cold start imports the SDK and builds the index
        while True:
            line = ready.get(timeout=max(0.0, deadline - time.monotonic()))
            assert line, f"canon serve exited before serving:\n{''.join(lines)}"
            if found := SERVE_LINE.search(line):
                break
        process = Process(popen, found[1], int(found[2]), lines)
        _wait_healthy(process.base, deadline, found[3] or "")  # under [server] root_path, if one is set
        yield process
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):  # worker processes (--workers) hold stderr open too
            for child in psutil.Process(popen.pid).children(recursive=True):
                child.kill()
        popen.kill()
        popen.wait(timeout=10)
        if popen.stderr is not None:
            popen.stderr.close()


def create_token(folder: Path, name: str, role: str, *groups: str) -> str:
    """`canon token create NAME --role ROLE [--group G]...` in `folder` (the default token file is there); the token."""
    done = run_canon("token", "create", name, "--role", role, *[a for g in groups for a in ("--group", g)], cwd=folder)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def revoke_token(folder: Path, name: str) -> None:
    done = run_canon("token", "revoke", name, cwd=folder)
    assert done.returncode == 0, done.stderr


# -- the SDK client over HTTP, with a bearer token --------------------------------------------------------------------
@contextlib.asynccontextmanager
async def connect(url: str, mode: str, token: str | None = None, **options: Any) -> AsyncGenerator[mcp.Client]:
    """An SDK client of `mode` (see MODES) at `url`, presenting `token` as a bearer token; none: anonymous."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
        mcp.Client(streamable_http_client(url, http_client=http), mode=mode, **options) as client,  # pyright: ignore[reportArgumentType]
    ):
        assert client.protocol_version == (LEGACY if mode == "legacy" else MODERN)
        yield client


# -- changes made while a server runs, and waiting for their effects -------------------------------------------------
async def until(condition: Callable[[], bool]) -> None:
    """Wait, within the deadline, for server-side state that follows an event the test cannot await."""
    with anyio.fail_after(DEADLINE_S):
        while not condition():
            await anyio.sleep(0.005)


async def commit_edits(instance: Instance, *node_ids: str, principal: str = "test:wire") -> None:
    """Change one free-text property of each of these nodes, in one transaction (one batch of events)."""

    def change() -> None:
        nodes = instance.store.nodes(list(node_ids))
        revision = instance.store.revision()
        puts = [PutNode(dataclasses.replace(nodes[i], properties=_edited(nodes[i].properties, revision)))
                for i in node_ids]  # fmt: skip
        instance.store.commit(puts, principal=principal)

    await anyio.to_thread.run_sync(change)


def _edited(properties: Any, revision: int) -> dict[str, Any]:
    key = next(k for k in ("description", "mission", "title") if k in properties)
    return {**properties, key: f"{properties[key]} ({revision})"}


async def create_team(instance: Instance, name: str, *, principal: str = "test:wire") -> None:
    """A new Team `team-NAME`, like team-payments: the resource list changes."""

    def create() -> None:
        template = instance.store.node("team-payments")
        assert isinstance(template, Node)
        properties = dict(template.properties) | {"slug": name, "name": name.title()}
        team = dataclasses.replace(template, id=f"team-{name}", properties=properties, revision=0)
        instance.store.commit([PutNode(team, expected_revision=0)], principal=principal)

    await anyio.to_thread.run_sync(create)
