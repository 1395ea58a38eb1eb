"""MCP logging: 2025-11-25 clients that set a level hear their own calls' outcomes and model changes; 2026-07-28
neither serves nor advertises logging.

Messages of one connection arrive in order and before the answer of the call they describe, so "nothing was
sent" is shown without timing: a later call that does earn a message is the first one heard.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import mcp
import mcp_types as types
import pytest

from core.dispatch.dispatcher import ToolResult
from core.mcp.client_log import SLOW_CALL_S, call_messages
from core.seam.changes import ChangeFeed
from core.seam.instance import Instance
from core.values.errors import NotFoundError
from tests.mcp.conftest import LEGACY, MODERN, Served, asgi_http, envelope, pumping
from tests.mcp.test_model_change import _adopt_in_another_process, _serve
from tests.mcp.test_subscriptions import Notifications

pytestmark = [
    pytest.mark.anyio,
    # the SDK client warns that logging/setLevel is deprecated as of 2026-07-28; these tests call it on purpose
    pytest.mark.filterwarnings(
        "ignore:The logging capability is deprecated:mcp.shared.exceptions.MCPDeprecationWarning"
    ),
]


class Heard:
    """A logging callback: the log messages a client received, in order."""

    def __init__(self) -> None:
        self.messages: list[types.LoggingMessageNotificationParams] = []

    async def __call__(self, params: types.LoggingMessageNotificationParams) -> None:
        self.messages.append(params)

    def events(self) -> list[tuple[str, str]]:
        return [(m.level, m.data["event"]) for m in self.messages]


async def test_a_client_that_set_no_level_hears_no_log_message(served: Served) -> None:
    heard = Heard()
    async with served.client("legacy", logging_callback=heard) as client:
        refused = await client.call_tool("get_node", {"id": "no-such-node"})

    assert refused.is_error
    assert heard.messages == []


async def test_at_debug_a_refused_call_is_logged_as_a_call_and_as_a_warning_naming_its_code(served: Served) -> None:
    heard = Heard()
    async with served.client("legacy", logging_callback=heard) as client:
        await client.set_logging_level("debug")
        await client.call_tool("get_node", {"id": "no-such-node"})

    assert heard.events() == [("debug", "call"), ("warning", "refused")]
    warning = heard.messages[1]
    assert warning.logger == "canon"
    assert warning.data["tool"] == "get_node"
    assert warning.data["code"] == "not_found"
    assert "no-such-node" in warning.data["message"]  # the caller's own answer, repeated


async def test_at_warning_a_successful_call_is_not_logged_and_a_refused_one_is(served: Served) -> None:
    heard = Heard()
    async with served.client("legacy", logging_callback=heard) as client:
        await client.set_logging_level("warning")
        answered = await client.call_tool("get_node", {"id": "team-payments"})
        refused = await client.call_tool("find_nodes", {"type": "NoSuchType"})

    assert not answered.is_error
    assert refused.is_error
    assert heard.events() == [("warning", "refused")]
    assert heard.messages[0].data["tool"] == "find_nodes"
    assert heard.messages[0].data["code"] == "invalid_arguments"


async def test_a_level_set_on_one_connection_is_not_heard_on_another(served: Served) -> None:
    first, second = Heard(), Heard()
    async with (
        served.client("legacy", logging_callback=first) as a,
        served.client("legacy", logging_callback=second) as b,
    ):
        await a.set_logging_level("debug")
        await b.call_tool("get_node", {"id": "no-such-node"})
        await a.call_tool("get_node", {"id": "no-such-node"})

    assert second.messages == []
    assert first.events() == [("debug", "call"), ("warning", "refused")]


def test_a_bound_that_stops_a_read_is_info_a_slow_call_notice_and_a_page_end_is_neither() -> None:
    cut = ToolResult("query_graph", {"items": [], "total": 5, "truncated": True, "next_cursor": None})
    more_pages = ToolResult("find_nodes", {"items": [], "total": 500, "truncated": True, "next_cursor": "abc"})
    refused = ToolResult("get_node", None, NotFoundError("node", "x"))

    assert [level for level, _ in call_messages(cut, 0.01)] == ["debug", "info"]
    assert [level for level, _ in call_messages(more_pages, 0.01)] == ["debug"]
    assert [level for level, _ in call_messages(more_pages, SLOW_CALL_S)] == ["debug", "notice"]
    assert [level for level, _ in call_messages(refused, 0.01)] == ["debug", "warning"]


async def test_a_client_at_notice_hears_of_a_model_change_with_its_new_version(instance: Instance) -> None:
    server, feed = _serve(instance)
    heard, notifications = Heard(), Notifications()
    assert isinstance(feed, ChangeFeed)
    try:
        async with (
            pumping(feed),
            mcp.Client(server, mode="legacy", logging_callback=heard, message_handler=notifications) as client,
        ):
            await client.set_logging_level("notice")
            await anyio.to_thread.run_sync(_adopt_in_another_process, Path(instance.store.location))
            await notifications.next_of(types.ToolListChangedNotification)
            with anyio.fail_after(5):
                while not heard.messages:  # the log follows the list_changed on the same connection
                    await notifications.next_of(types.LoggingMessageNotification)
    finally:
        notifications.close()

    assert heard.events() == [("notice", "model_changed")]
    assert heard.messages[0].data["version"] == "1.1.0"


async def test_modern_discover_does_not_advertise_logging_and_set_level_is_not_served(
    shared_instance: Instance,
) -> None:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": MODERN}  # fmt: skip
    async with asgi_http(shared_instance) as http:
        discover = await http.post("/mcp", headers=headers | {"Mcp-Method": "server/discover"},
                                   json={"jsonrpc": "2.0", "id": 1, "method": "server/discover",
                                         "params": {"_meta": envelope()}})  # fmt: skip
        set_level = await http.post("/mcp", headers=headers | {"Mcp-Method": "logging/setLevel"},
                                    json={"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel",
                                          "params": {"level": "debug", "_meta": envelope()}})  # fmt: skip

    assert discover.status_code == 200, discover.text
    assert "logging" not in discover.json()["result"]["capabilities"]
    assert set_level.json()["error"]["code"] == types.METHOD_NOT_FOUND
    assert LEGACY in discover.json()["result"]["supportedVersions"]
