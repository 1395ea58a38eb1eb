"""Fixtures for the generated surfaces: seeded instances, the app in-process, and the app under real uvicorn.

* `gen_instance` (module scope): a copy of the seeded store, for tests that only read.
* `fresh_instance`: a copy of its own, for tests that write.
* `asgi(instance, surfaces)`: raw HTTP to the whole app in-process (its lifespan running).
* `live(instance, surfaces)`: the whole app served by uvicorn on 127.0.0.1 and a free port, in a thread of the
  test process; yields the base URL and stops the server when the block ends.
* `token(instance, name, role, *groups)`: a bearer token for the instance's token file.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx2
import pytest
import uvicorn

from core.http.app import build_app
from core.http.serve import listening_socket
from core.ops.config import Config
from core.ops.tokens import TokenFile
from core.seam.instance import Instance, open_instance
from core.seam.surfaces import Surface
from core.tools import Toolset
from tests.conftest import copy_store


def open_copy(template: Path, folder: Path, tools: Toolset | None = None) -> Instance:
    """A copy of the seeded store, with a token file of its own in `folder` (and `tools` added)."""
    folder.mkdir(parents=True, exist_ok=True)
    config = Config(store=copy_store(template, folder / "canon.db"), tokens=folder / "tokens.json")
    return open_instance(config, tools=tools)


@pytest.fixture(scope="module")
def gen_instance(seed_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Instance]:
    instance = open_copy(seed_template, tmp_path_factory.mktemp("generated"))
    yield instance
    instance.close()


@pytest.fixture
def fresh_instance(seed_template: Path, tmp_path: Path) -> Iterator[Instance]:
    instance = open_copy(seed_template, tmp_path)
    yield instance
    instance.close()


def token(instance: Instance, name: str, role: str, *groups: str) -> str:
    """Create a bearer token in the instance's token file (as `canon token create` would)."""
    secret: str = TokenFile(instance.config.tokens).create(name, role, groups)
    return secret


@contextlib.asynccontextmanager
async def asgi(instance: Instance, surfaces: list[Surface] | None = None) -> AsyncIterator[httpx2.AsyncClient]:
    app = build_app(instance, surfaces=surfaces)
    async with app.router.lifespan_context(app):
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as http:
            yield http


@contextlib.contextmanager
def live(instance: Instance, surfaces: list[Surface] | None = None) -> Iterator[str]:
    """The app under uvicorn on a free port; the server is stopped (and its thread joined) on exit."""
    sock = listening_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(build_app(instance, surfaces=surfaces), log_level="warning",
                                           lifespan="on"))  # fmt: skip
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        for _ in range(1000):  # started is set once the lifespan has run and the socket accepts
            if server.started or not thread.is_alive():
                break
            threading.Event().wait(0.01)
        assert server.started, "uvicorn did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
        assert not thread.is_alive(), "uvicorn did not stop"
