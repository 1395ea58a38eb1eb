"""A model change committed by another process is served at once and announced to clients of both revisions."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import anyio
import mcp
import mcp_types as types
import pytest
from mcp.client.subscriptions import ToolsListChanged

from core.lang.model import Model, load_model, parse_model
from core.mcp.events import EventFanout
from core.mcp.server import build_server
from core.seam.changes import ChangeFeed
from core.seam.instance import Instance
from core.store.sqlite import SQLiteStore
from core.values.principal import LOCAL
from core.values.uris import type_uri
from tests.mcp.conftest import DEADLINE_S, open_copy, pumping
from tests.mcp.test_subscriptions import Notifications

pytestmark = pytest.mark.anyio


def _extended() -> Model:
    """The embedded model with one more optional Team property."""
    document: dict[str, Any] = copy.deepcopy(dict(load_model().document))
    document["$defs"]["Team"]["properties"]["budget_code"] = {"type": "string", "description": "Finance code."}
    document["x-canon-model"]["version"] = "1.1.0"
    return parse_model(document)


def _adopt_in_another_process(path: Path) -> None:
    """What `canon model apply new.json` does in another process: the store applies the new model."""
    store = SQLiteStore.open_existing(path)
    try:
        store.apply_model(_extended(), principal="admin")
    finally:
        store.close()


def _serve(instance: Instance) -> tuple[Any, ChangeFeed]:
    assert instance.index is not None
    feed = ChangeFeed(instance.index, on_model_change=instance.reload_model)
    return build_server(lambda: instance.snapshot, EventFanout(feed), lambda ctx: LOCAL), feed


async def _team_properties(client: mcp.Client) -> set[str]:
    """The Team properties the server serves: its type resource (tool output schemas describe nodes generically)."""
    read = await client.read_resource(type_uri("Team"))
    content = read.contents[0]
    assert isinstance(content, types.TextResourceContents)
    return set(json.loads(content.text)["$defs"]["Team"]["properties"])


@pytest.fixture
def instance(seed_template: Path, tmp_path: Path) -> Any:
    opened = open_copy(seed_template, tmp_path)
    yield opened
    opened.close()


async def test_a_legacy_client_hears_tools_list_changed_and_then_lists_the_new_model(instance: Instance) -> None:
    server, feed = _serve(instance)
    notifications = Notifications()
    try:
        async with pumping(feed), mcp.Client(server, mode="legacy", message_handler=notifications) as client:
            await client.list_tools()
            assert "budget_code" not in await _team_properties(client)
            await anyio.to_thread.run_sync(_adopt_in_another_process, Path(instance.store.location))
            await notifications.next_of(types.ToolListChangedNotification)
            listed = (await client.list_tools()).tools
            after = await _team_properties(client)
            found = await client.call_tool("find_nodes", {"type": "Team", "where": {"budget_code": {"exists": False}}})
    finally:
        notifications.close()

    assert "budget_code" in after
    assert [t.name for t in listed] == [t.name for t in instance.registry.tools]  # the new snapshot's list
    assert not found.is_error, found.content
    assert found.structured_content is not None
    assert found.structured_content["total"] == 13


async def test_a_modern_listener_hears_tools_list_changed_and_describe_model_shows_the_new_version(
    instance: Instance,
) -> None:
    server, feed = _serve(instance)
    async with (
        pumping(feed),
        mcp.Client(server, mode="2026-07-28") as client,
        client.listen(tools_list_changed=True) as subscription,
    ):
        await anyio.to_thread.run_sync(_adopt_in_another_process, Path(instance.store.location))
        with anyio.fail_after(DEADLINE_S):
            event = await anext(subscription)
        described = await client.call_tool("describe_model", {})

    assert isinstance(event, ToolsListChanged)
    assert described.structured_content is not None
    assert described.structured_content["model"]["version"] == "1.1.0"
    team = next(t for t in described.structured_content["node_types"] if t["name"] == "Team")
    assert "budget_code" in team["properties"]


async def test_writes_after_a_model_change_are_validated_under_the_new_model(instance: Instance) -> None:
    _, feed = _serve(instance)
    async with pumping(feed):
        await anyio.to_thread.run_sync(_adopt_in_another_process, Path(instance.store.location))
        with anyio.fail_after(DEADLINE_S):
            while instance.model.version != "1.1.0":
                await anyio.sleep(0.02)

    assert instance.store.model.version == "1.1.0"
    assert "budget_code" in json.dumps(instance.registry.tool("get_node").typed_output_schema)  # the exact schemas
