"""MCP prompts (`core.dispatch.prompts`) on both protocol revisions: listed, rendered from the served model and its
data,
their arguments completed, the capability advertised, and refusals mapped like every other bad argument."""

from __future__ import annotations

import mcp
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from core.mcp.events import EventFanout
from core.mcp.server import ServeOptions, build_server
from core.seam.changes import ChangeFeed
from core.seam.instance import Instance
from core.values.principal import ANONYMOUS
from tests.mcp.conftest import LEGACY_HEADERS, MODERN, Served, asgi_http, initialize_body, modern_request, serve

pytestmark = pytest.mark.anyio


async def test_prompts_list_names_each_prompt_with_its_required_arguments(served: Served, revision: str) -> None:
    async with served.client(revision) as client:
        listed = (await client.list_prompts()).prompts

    assert [(p.name, [(a.name, a.required) for a in p.arguments or []]) for p in listed] == [
        ("explain_node", [("id", True)]), ("changes_since", [("revision", True)]), ("onboard_type", [("type", True)]),
    ]  # fmt: skip
    assert all(p.title and p.description for p in listed)


async def test_explain_node_names_the_node_its_edge_types_and_the_calls_to_make(served: Served, revision: str) -> None:
    async with served.client(revision) as client:
        result = await client.get_prompt("explain_node", {"id": "team-payments"})

    [message] = result.messages
    assert message.role == "user"
    assert isinstance(message.content, types.TextContent)
    text = message.content.text
    assert "Team “Payments” (`team-payments`" in text
    assert '`get_neighbors` {"id": "team-payments", "summary": true}' in text
    assert "- `owns` → Document, Service, System" in text
    assert "- `member_of` ← Person" in text


async def test_onboard_type_is_written_from_the_type_in_the_served_model(served: Served, revision: str) -> None:
    async with served.client(revision) as client:
        result = await client.get_prompt("onboard_type", {"type": "Service"})

    assert isinstance(result.messages[0].content, types.TextContent)
    text = result.messages[0].content.text
    service = served.instance.model.node_types["Service"]
    assert service.description in text
    assert all(f"`{p}`" in text for p in service.schema["properties"])
    assert '`find_nodes` {"type": "Service", "summary": true, "limit": 5}' in text


async def test_changes_since_names_the_revision_asked_and_the_current_one(served: Served, revision: str) -> None:
    now = served.instance.store.revision()
    async with served.client(revision) as client:
        result = await client.get_prompt("changes_since", {"revision": "12"})
        with pytest.raises(MCPError) as future:
            await client.get_prompt("changes_since", {"revision": str(now + 1)})

    assert isinstance(result.messages[0].content, types.TextContent)
    assert f"after revision 12 (now at revision {now})" in result.messages[0].content.text
    assert '`get_changes` {"since": 12}' in result.messages[0].content.text
    assert future.value.code == types.INVALID_PARAMS


async def test_a_prompt_names_the_tools_as_the_prefixed_list_does(shared_instance: Instance) -> None:
    async with serve(shared_instance, ServeOptions(prefix="canon_")).client(MODERN) as client:
        result = await client.get_prompt("explain_node", {"id": "team-payments"})

    assert isinstance(result.messages[0].content, types.TextContent)
    assert '`canon_get_node` {"id": "team-payments"}' in result.messages[0].content.text


@pytest.mark.parametrize(("name", "arguments"), [
    ("no_such_prompt", {}), ("explain_node", {"id": "no-such-node"}), ("onboard_type", {"type": "Planet"}),
    ("explain_node", {}),
])  # fmt: skip
async def test_an_unknown_prompt_node_type_or_missing_argument_is_invalid_params(
    served: Served, revision: str, name: str, arguments: dict[str, str]
) -> None:
    async with served.client(revision) as client:
        with pytest.raises(MCPError) as raised:
            await client.get_prompt(name, arguments)

    assert raised.value.code == types.INVALID_PARAMS


async def test_a_prompt_never_explains_a_node_its_caller_may_not_read(shared_instance: Instance) -> None:
    assert shared_instance.index is not None
    hidden = next(n for n in shared_instance.store.iter_nodes("Person") if n.visibility != "public")
    fanout = EventFanout(ChangeFeed(shared_instance.index))
    server = build_server(lambda: shared_instance.snapshot, fanout, lambda ctx: ANONYMOUS)
    async with mcp.Client(server, mode=MODERN) as client:  # pyright: ignore[reportArgumentType]
        with pytest.raises(MCPError) as raised:
            await client.get_prompt("explain_node", {"id": hidden.id})
        completed = await client.complete(types.PromptReference(type="ref/prompt", name="explain_node"),
                                          {"name": "id", "value": hidden.id})  # fmt: skip

    assert raised.value.code == types.INVALID_PARAMS
    assert completed.completion.values == []  # nor completes its id


async def test_prompt_arguments_complete_node_ids_and_type_names_by_prefix(served: Served, revision: str) -> None:
    async with served.client(revision) as client:
        ids = await client.complete(types.PromptReference(type="ref/prompt", name="explain_node"),
                                    {"name": "id", "value": "team-p"})  # fmt: skip
        names = await client.complete(types.PromptReference(type="ref/prompt", name="onboard_type"),
                                      {"name": "type", "value": "s"})  # fmt: skip
        none = await client.complete(types.PromptReference(type="ref/prompt", name="changes_since"),
                                     {"name": "revision", "value": "1"})  # fmt: skip

    assert ids.completion.values == ["team-payments", "team-platform"]
    assert names.completion.values == ["Service", "System"]
    assert none.completion.values == []


async def test_both_revisions_advertise_prompts_whose_list_never_changes(shared_instance: Instance) -> None:
    async with asgi_http(shared_instance) as http:
        legacy = (await http.post("/mcp", json=initialize_body(), headers=LEGACY_HEADERS)).json()["result"]
        headers, body = modern_request("server/discover")
        modern = (await http.post("/mcp", json=body, headers=headers)).json()["result"]

    assert legacy["capabilities"]["prompts"] == {"listChanged": False}
    assert modern["capabilities"]["prompts"] == {"listChanged": False}
    assert "completions" in legacy["capabilities"]
    assert "completions" in modern["capabilities"]


async def test_a_prompt_is_served_over_http_on_the_modern_revision(shared_instance: Instance) -> None:
    async with asgi_http(shared_instance) as http:
        headers, body = modern_request("prompts/get", {"name": "onboard_type", "arguments": {"type": "Team"}})
        headers["Mcp-Name"] = "onboard_type"
        answer = await http.post("/mcp", json=body, headers=headers)

    assert answer.status_code == 200, answer.text
    [message] = answer.json()["result"]["messages"]
    assert message["content"]["text"].startswith("Teach me the Team nodes of the northwind graph")
