"""Every server follows: a model applied by another process (`canon model apply`) reaches a running `canon serve`
on the wire: MCP clients of both revisions hear `tools/list_changed`, and OpenAPI and the GraphQL schema are
rebuilt. On both backends."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.client.subscriptions import ToolsListChanged

from core.lang.model import load_model
from core.store import copy_store as copy_any_store
from tests.conftest import copy_store, run_canon
from tests.mcp.conftest import DEADLINE_S, connect, serving
from tests.mcp.test_subscriptions import Notifications

pytestmark = [pytest.mark.anyio, pytest.mark.both_backends]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _extended_model_file(folder: Path) -> Path:
    """The embedded model with one more optional Team property, at 1.1.0."""
    document: dict[str, Any] = copy.deepcopy(dict(load_model().document))
    document["$defs"]["Team"]["properties"]["budget_code"] = {"type": "string", "description": "Finance code."}
    document["x-canon-model"]["version"] = "1.1.0"
    path = folder / "extended.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


async def test_a_model_applied_by_another_process_reaches_clients_of_both_revisions_and_every_surface(
    seed_template: Path, tmp_path: Path, store_location: str | Path
) -> None:
    if isinstance(store_location, Path):
        store: str | Path = copy_store(seed_template, store_location)
    else:  # a seeded PostgreSQL database: the apply reaches the server by its NOTIFY, not a file's data_version
        copy_any_store(seed_template, store_location)
        store = store_location
    extended = _extended_model_file(tmp_path)
    notifications = Notifications()
    with serving(store, cwd=tmp_path) as process:
        try:
            async with (
                connect(process.url, "legacy", message_handler=notifications) as legacy,
                connect(process.url, "auto") as modern,
                modern.listen(tools_list_changed=True) as subscription,
            ):
                await legacy.list_tools()
                applied = await anyio.to_thread.run_sync(
                    lambda: run_canon("--store", str(store), "model", "apply", "--yes", str(extended), cwd=tmp_path)
                )
                assert applied.returncode == 0, applied.stderr
                await notifications.next_of(types.ToolListChangedNotification)
                with anyio.fail_after(DEADLINE_S):
                    event = await anext(subscription)
                described = await modern.call_tool("describe_model", {})
                listed = await legacy.call_tool("describe_model", {})
        finally:
            notifications.close()
        async with httpx2.AsyncClient(base_url=process.base, timeout=DEADLINE_S) as http:
            openapi = (await http.get("/openapi.json")).text
            sdl = (await http.get("/schema.graphql")).text

    assert isinstance(event, ToolsListChanged)
    for answer in (described, listed):
        assert answer.structured_content is not None
        assert answer.structured_content["model"]["version"] == "1.1.0"
    assert "budget_code" in openapi
    assert "budget_code" in sdl
