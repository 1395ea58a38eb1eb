"""Helpers for HTTP tests that check exact bytes: a raw HTTP/1.1 client (parsed with h11) and canon's uvicorn
server run in the test's own event loop on a free 127.0.0.1 port, shut down when the block ends."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import Any, Self

import anyio
import anyio.abc
import h11
from starlette.applications import Starlette

from core.http.serve import GracefulServer, listening_socket
from tests.mcp.conftest import DEADLINE_S

__all__ = ["Raw", "Served", "served"]


# -- a raw HTTP/1.1 client ---------------------------------------------------------------------------------------------
class Raw:
    """One connection: a request, then its answer as h11 parses it (head, body, SSE frames as they come)."""

    def __init__(self, stream: anyio.abc.SocketStream, port: int) -> None:
        self.stream, self.port = stream, port
        self.http = h11.Connection(h11.CLIENT)
        self.text = b""  # SSE text received and not yet split into frames

    @classmethod
    async def connect(cls, port: int, *, receive_buffer: int | None = None) -> Self:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if receive_buffer is not None:  # before connecting, so the window offered stays small
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        sock.connect(("127.0.0.1", port))  # on loopback the kernel completes this without the server's help
        sock.setblocking(False)
        return cls(await anyio.abc.SocketStream.from_socket(sock), port)

    async def request(
        self,
        body: bytes | None,
        headers: dict[str, str],
        *,
        extra: Sequence[tuple[str, str]] = (),
        target: str = "/mcp",
    ) -> None:
        """POST `body` to `target` with `headers` (plus `extra` lines, repeats allowed); None sends only the head."""
        fields = [*({"host": f"127.0.0.1:{self.port}"} | headers).items(), *extra]
        if body is not None and "transfer-encoding" not in headers:
            fields.append(("content-length", str(len(body))))
        data = self.http.send(h11.Request(method="POST", target=target, headers=fields))
        if body is not None:
            data += self.http.send(h11.Data(data=body)) + self.http.send(h11.EndOfMessage())
        await self.stream.send(data)

    async def event(self) -> Any:
        while (event := self.http.next_event()) is h11.NEED_DATA:
            try:
                data = await self.stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                data = b""
            self.http.receive_data(data)
        return event

    async def head(self) -> tuple[int, dict[str, str]]:
        response = await self.event()
        assert isinstance(response, h11.Response), response
        return response.status_code, {k.decode(): v.decode() for k, v in response.headers if k != b"date"}

    async def body(self) -> bytes:
        data = b""
        while isinstance(event := await self.event(), h11.Data):
            data += event.data
        assert isinstance(event, h11.EndOfMessage), event
        return data

    async def frame(self) -> bytes | None:
        """The next SSE frame, whole, or None where the response ends."""
        while (cut := self.text.find(b"\r\n\r\n")) < 0:
            event = await self.event()
            if isinstance(event, h11.EndOfMessage):
                assert not self.text, self.text
                return None
            assert isinstance(event, h11.Data), event
            self.text += event.data
        frame, self.text = self.text[: cut + 4], self.text[cut + 4 :]
        return frame

    async def aclose(self) -> None:
        await self.stream.aclose()


# -- real uvicorn, in this process -------------------------------------------------------------------------------------
class Uvicorn(GracefulServer):
    """`canon serve`'s uvicorn server, telling the test when it accepts connections."""

    def __init__(self, app: Starlette) -> None:
        super().__init__(app)
        self.ready = anyio.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()


@dataclass
class Served:
    app: Starlette
    server: Uvicorn
    port: int


@contextlib.asynccontextmanager
async def served(app: Starlette, sock: socket.socket | None = None) -> AsyncGenerator[Served]:
    """`app` under uvicorn on a free port (or on `sock`) until the block ends, then shut down as on SIGINT."""
    sock = sock or listening_socket("127.0.0.1", 0)
    server = Uvicorn(app)
    with sock:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(server.serve, [sock])
            with anyio.fail_after(DEADLINE_S):
                await server.ready.wait()
            try:
                yield Served(app, server, sock.getsockname()[1])
            finally:
                server.should_exit = True
