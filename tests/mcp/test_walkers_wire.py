"""Walk worker processes (core.dispatch.walkers) behind a real `canon serve`, over Streamable HTTP and over stdio: walks
answered by a worker equal the same walks in process, and the workers end with the server."""

from __future__ import annotations

import contextlib
import re
import sys
import time
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp
import psutil
import pytest
from mcp.client.stdio import StdioServerParameters, stdio_client

from core.ops.config import Config
from core.seam.instance import open_instance
from core.values.principal import ANONYMOUS, Principal
from tests.mcp.conftest import LEGACY, MODE_IDS, MODERN, MODES, connect, copy_store, serving
from tests.mcp.test_mcp_tools import structured, tool_error

pytestmark = pytest.mark.anyio

SERVICE = "svc-checkout-api"
WALKS = [
    ("get_neighbors", {"id": SERVICE, "depth": 3, "limit": 50}),
    ("find_paths", {"source": SERVICE, "target": "team-leadership", "max_depth": 5, "limit": 20}),
    ("query_graph", {"match": [{"node": "p", "type": "Person"}, {"edge": "member_of", "from": "p", "to": "t"}],
                     "limit": 50}),
    ("get_neighbors", {"id": "no-such-node"}),
]  # fmt: skip
CONFIG = "[server]\nwalk_workers = 1\n"
DEADLINE_S = 60.0  # a cold worker imports canon and loads the graph; a shared machine may be slow


def prepared(seed_template: Path, folder: Path) -> Path:
    """`folder` with a seeded store and a canon.toml asking for one walk worker."""
    copy_store(seed_template, folder / "canon.db")
    (folder / "canon.toml").write_text(CONFIG, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def folder(seed_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return prepared(seed_template, tmp_path_factory.mktemp("walkers"))


def in_process(folder: Path, who: Principal) -> list[dict[str, Any]]:
    """The walks' answers from an instance on the same store whose walks run in process."""
    opened = open_instance(Config(store=folder / "canon.db", walk_workers=0))
    try:
        return [opened.dispatcher.call_tool(who, "test", name, arguments).as_json() for name, arguments in WALKS]
    finally:
        opened.close()


async def answers(client: mcp.Client) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for name, arguments in WALKS:
        result = await client.call_tool(name, arguments)
        found.append({"error": tool_error(result)} if result.is_error else structured(result))
    return found


def walkers_of(folder: Path) -> list[psutil.Process]:
    """The walk worker processes started by a server running in `folder`."""
    found: list[psutil.Process] = []
    for process in psutil.process_iter(["cmdline", "cwd"]):
        with contextlib.suppress(psutil.Error):
            if process.info["cwd"] == str(folder) and "core.dispatch.walkers" in (process.info["cmdline"] or []):
                found.append(process)
    return found


def ready_workers(base: str) -> int:
    text = httpx2.get(f"{base}/metrics", timeout=10).text
    found = re.search(r"^canon_walk_workers_ready (\d+)", text, re.MULTILINE)
    assert found is not None, "the server reports no walk workers"
    return int(found[1])


@pytest.fixture(scope="module")
def server(folder: Path) -> Iterator[Any]:
    with serving(folder / "canon.db", cwd=folder) as running:
        yield running


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
async def test_walks_over_http_answered_by_a_worker_equal_the_same_walks_in_process(
    folder: Path, server: Any, mode: str
) -> None:
    expected = in_process(folder, ANONYMOUS)  # no token: the anonymous caller, who sees public nodes only
    async with connect(server.url, mode) as client:
        assert client.protocol_version == (LEGACY if mode == "legacy" else MODERN)
        await client.call_tool(*WALKS[0])  # the first walk starts the worker
        with anyio.fail_after(DEADLINE_S):
            while ready_workers(server.base) < 1:
                await anyio.sleep(0.05)
        assert [p.ppid() for p in walkers_of(folder)] == [server.popen.pid]
        assert await answers(client) == expected


@contextlib.asynccontextmanager
async def stdio(folder: Path) -> AsyncGenerator[mcp.Client]:
    parameters = StdioServerParameters(command=sys.executable, args=["-m", "core.app.cli", "serve", "--stdio",
                                       "--log-level", "warning"], cwd=folder)  # fmt: skip
    with (folder / "stdio.log").open("a", encoding="utf-8") as errors:
        async with mcp.Client(stdio_client(parameters, errlog=errors), mode="auto") as client:  # pyright: ignore[reportArgumentType]
            yield client


async def test_walks_over_stdio_answer_as_in_process_and_their_worker_ends_with_the_session(
    seed_template: Path, tmp_path: Path
) -> None:
    folder = prepared(seed_template, tmp_path)
    expected = in_process(folder, Config().local_principal())  # the stdio caller: the configured local principal
    async with stdio(folder) as client:
        await client.call_tool(*WALKS[0])  # the first walk starts the worker
        with anyio.fail_after(DEADLINE_S):
            while not walkers_of(folder):
                await anyio.sleep(0.05)
        assert await answers(client) == expected
        workers = walkers_of(folder)
        assert len(workers) == 1
    deadline = time.monotonic() + DEADLINE_S
    while any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers):  # its pipe has closed
        assert time.monotonic() < deadline, "the walk worker outlived its server"
        await anyio.sleep(0.05)
