"""`core.mcp.fastpath.sdk_compat`: the start-up check of the MCP SDK's shapes, the fallback to the plain SDK path with
one warning, the user's switch, and the fence itself (no other module names a private SDK attribute)."""

from __future__ import annotations

import ast
import contextlib
import logging
from collections.abc import AsyncGenerator
from pathlib import Path

import httpx2
import mcp
import pytest
from mcp.client.streamable_http import streamable_http_client
from mcp.server.session import ServerSession
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.applications import Starlette

from core.http.app import build_app
from core.mcp.fastpath import sdk_compat
from core.mcp.surface import McpSurface
from core.ops.config import Config
from core.seam.instance import Instance, open_instance
from tests.conftest import REPO
from tests.mcp.conftest import MODERN, copy_store, mcp_of

pytestmark = pytest.mark.anyio
SDK_LOGGER = "canon.sdk"


@contextlib.asynccontextmanager
async def sdk_client(app: Starlette) -> AsyncGenerator[mcp.Client]:
    """The SDK's own client (2026-07-28) talking to `app` in-process, with the app's lifespan running."""
    async with app.router.lifespan_context(app):
        transport = httpx2.ASGITransport(app=app)
        async with (
            httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as http,
            mcp.Client(streamable_http_client("http://127.0.0.1:8000/mcp", http_client=http), mode="auto") as client,  # pyright: ignore[reportArgumentType]
        ):
            assert client.protocol_version == MODERN
            yield client


async def served(app: Starlette) -> tuple[bool, str]:
    """Whether `app` serves `/mcp` through the SDK alone (none of canon's own stream routes was built), and the
    name a real SDK client's `get_node` call answered there."""
    async with sdk_client(app) as client:
        endpoint = mcp_of(app)
        result = await client.call_tool("get_node", {"id": "team-payments"})
    assert not result.is_error, result
    assert isinstance(result.structured_content, dict)
    plain = endpoint.listen is None and endpoint.legacy is None
    return plain, str(result.structured_content["node"]["properties"]["name"])


def sdk_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == SDK_LOGGER and r.levelno == logging.WARNING]


def test_the_installed_sdk_is_the_one_the_fast_path_expects() -> None:
    compat = sdk_compat.check()

    assert compat.differences == ()
    assert compat.version.startswith(sdk_compat.TESTED)


async def test_the_fast_path_serves_when_the_sdk_is_as_expected(
    shared_instance: Instance, caplog: pytest.LogCaptureFixture
) -> None:
    app = build_app(shared_instance, surfaces=[McpSurface()])

    assert await served(app) == (False, "Payments")
    assert sdk_warnings(caplog) == []


async def test_an_sdk_missing_an_expected_attribute_is_served_through_the_plain_path_with_one_warning(
    shared_instance: Instance, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new SDK minor that renamed a private method canon overrides: one warning naming it, the SDK path serves
    (and no event store is shared between sessions, since canon cannot give each its own)."""
    monkeypatch.delattr(StreamableHTTPSessionManager, "_admit_session")

    app = build_app(shared_instance, surfaces=[McpSurface()])

    assert await served(app) == (True, "Payments")
    [warning] = sdk_warnings(caplog)
    assert "StreamableHTTPSessionManager._admit_session" in warning
    assert "plain SDK path" in warning


async def test_an_sdk_whose_transport_lacks_a_private_attribute_is_served_through_the_plain_path(
    shared_instance: Instance, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The transport's in-flight counter renamed: the GET streams canon serves could not hold a session open."""
    made = StreamableHTTPServerTransport.__init__

    def renamed(self: StreamableHTTPServerTransport, *args: object, **kwargs: object) -> None:
        made(self, *args, **kwargs)  # pyright: ignore[reportArgumentType]
        self.__dict__["_in_flight"] = self.__dict__.pop("_requests_in_flight")

    monkeypatch.setattr(StreamableHTTPServerTransport, "__init__", renamed)

    app = build_app(shared_instance, surfaces=[McpSurface()])

    assert await served(app) == (True, "Payments")
    [warning] = sdk_warnings(caplog)
    assert "StreamableHTTPServerTransport._requests_in_flight" in warning


async def test_a_changed_signature_of_an_sdk_function_is_a_difference(monkeypatch: pytest.MonkeyPatch) -> None:
    import mcp.server.runner

    def modern_error_data(error: Exception) -> None: ...

    monkeypatch.setattr(mcp.server.runner, "modern_error_data", modern_error_data)

    assert sdk_compat.check().differences == ("mcp.server.runner.modern_error_data takes no parameter exc",)


async def test_switched_off_the_plain_sdk_path_serves_without_a_warning(
    seed_template: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = Config(store=copy_store(seed_template, tmp_path / "canon.db"), mcp_fastpath=False)
    with contextlib.closing(open_instance(config)) as instance:
        app = build_app(instance, surfaces=[McpSurface()])

        assert await served(app) == (True, "Payments")
        assert sdk_warnings(caplog) == []


def private_sdk_attributes() -> set[str]:
    """The private attributes of the SDK objects canon reaches into: their classes' and a new instance's."""
    probes = (StreamableHTTPServerTransport(mcp_session_id=None), StreamableHTTPSessionManager(app=None))  # pyright: ignore[reportArgumentType]
    names = {n for p in probes for n in vars(p)} | {n for c in (*map(type, probes), ServerSession) for n in vars(c)}
    names.add("_connection")  # ServerSession's, set per request
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def foreign_private_uses(path: Path, private: set[str]) -> list[str]:
    """`x._name` in `path`'s code for a private SDK attribute name, `x` anything but `self` (canon's own `self._x`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [f"{path.relative_to(REPO)}:{node.lineno}: .{node.attr}" for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr in private
            and not (isinstance(node.value, ast.Name) and node.value.id == "self")]  # fmt: skip


def test_no_module_but_sdk_compat_names_a_private_sdk_attribute() -> None:
    private = private_sdk_attributes()
    assert {"_request_streams", "_server_instances", "_admit_session", "_connection"} <= private
    fence = REPO / "core" / "mcp" / "fastpath" / "sdk_compat.py"
    found = [use for folder in ("core", "generators") for path in sorted((REPO / folder).rglob("*.py"))
             if path != fence for use in foreign_private_uses(path, private)]  # fmt: skip

    assert found == []
    assert foreign_private_uses(fence, private)  # the fence itself is where they are
