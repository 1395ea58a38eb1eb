"""`canon serve`'s uvicorn server (`core.http.serve`): how it shuts down, and the sockets it listens on."""

from __future__ import annotations

import asyncio
import functools
import re
import socket
from pathlib import Path

import anyio
import httpx2
import pytest
from starlette.applications import Starlette

from core.http.serve import GracefulServer, listening_socket
from core.seam.instance import Instance
from tests.mcp.conftest import DEADLINE_S, copy_store, mcp_app, serving

pytestmark = pytest.mark.anyio

POLL = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


class Watched(GracefulServer):
    """The server, telling the test when it serves and the moment its shutdown begins."""

    def __init__(self, app: Starlette) -> None:
        super().__init__(app)
        self.ready, self.stopping = asyncio.Event(), asyncio.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.stopping.set()
        await super().shutdown(sockets)


async def _poll_until_closed(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> int:
    """As the flaky test's poll did: a request on the kept-alive connection, the answer, the next request; the
    number of answers until the server closes the connection."""
    answers = 0
    try:
        while True:
            writer.write(POLL)
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(int(h.split(b":")[1]) for h in head.lower().split(b"\r\n") if h.startswith(b"content-length"))
            await reader.readexactly(length)
            answers += 1
    except (asyncio.IncompleteReadError, ConnectionError):  # closed by the server
        return answers


async def test_a_connection_that_registers_after_shutdown_began_is_closed_and_shutdown_ends(
    instance: Instance,
) -> None:
    # A connection accepted just before the listening socket closed registers (connection_made) after uvicorn told
    # the connections it knew of to finish. Made here as asyncio makes one when it accepts, at that very moment.
    server = Watched(mcp_app(instance))
    sock = listening_socket("127.0.0.1", 0)
    ours, theirs = socket.socketpair()
    with sock, ours, theirs, anyio.fail_after(DEADLINE_S * 2):  # before the fix: polled for ever, never shut down
        async with anyio.create_task_group() as tasks:  # ends when serve() returns: shutdown has ended
            tasks.start_soon(server.serve, [sock])
            await server.ready.wait()
            server.should_exit = True
            await server.stopping.wait()  # this runs once uvicorn's shutdown is at its first await: it told the others
            protocol = functools.partial(server.config.http_protocol_class, config=server.config,
                                         server_state=server.server_state, app_state=server.lifespan.state)  # fmt: skip
            await asyncio.get_running_loop().connect_accepted_socket(protocol, ours)
            reader, writer = await asyncio.open_connection(sock=theirs)
            answers = await _poll_until_closed(reader, writer)
            writer.close()

    assert answers >= 1  # it was served, then closed
    assert not server.server_state.connections


def test_the_listening_socket_hands_out_connections_with_nagle_off() -> None:
    """Without TCP_NODELAY on accepted sockets, each response on a kept-alive connection waited ~40 ms."""
    server = listening_socket("127.0.0.1", 0)
    try:
        assert server.proto == socket.IPPROTO_TCP  # what asyncio checks before it sets TCP_NODELAY itself
        with socket.create_connection(server.getsockname()[:2]) as client:
            accepted, _ = server.accept()
            with accepted:
                assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
                client.sendall(b"ping")
                assert accepted.recv(4) == b"ping"
    finally:
        server.close()


def test_the_start_up_lines_name_the_store_and_the_model_and_paths_under_the_root_path(
    seed_template: Path, tmp_path: Path
) -> None:
    store = copy_store(seed_template, tmp_path / "canon.db")
    (tmp_path / "canon.toml").write_text('[server]\nroot_path = "/kb"\n', encoding="utf-8")
    with serving(store, cwd=tmp_path) as process:
        first = next(line for line in process.stderr if "serving MCP at" in line)
        second = next(line for line in process.stderr if line.startswith("canon: also serving "))
        paths = re.findall(r"(/[^ ,()]*)", second.removeprefix("canon: also serving "))
        health = httpx2.get(f"{process.base}/kb/healthz").json()
    assert process.url == f"{process.base}/kb/mcp"
    assert len(paths) >= 4, second  # REST, its OpenAPI document and docs, GraphQL, llms.txt
    assert all(path.startswith("/kb/") for path in paths), second
    assert "(health: /kb/healthz)" in first
    assert f"the model {health['model']} {health['modelVersion']} from the store {store};" in first
