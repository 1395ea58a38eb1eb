"""How `canon serve` presents its tools: the agent profile and a tool-name prefix, on both protocol revisions."""

from __future__ import annotations

import json
from typing import Any

import mcp
import mcp_types as types
import pytest

from core.dispatch.registry import build_registry
from core.lang.model import Model, load_model
from core.mcp.server import ServeOptions
from core.seam.instance import Instance
from tests.mcp.conftest import asgi_http, modern_request, serve
from tests.mcp.test_mcp_tools import canonical, structured

pytestmark = pytest.mark.anyio

ADVANCED_CALLS: dict[str, dict[str, Any]] = {
    "find_paths": {"source": "person-ada-okafor", "target": "svc-checkout-api", "max_depth": 3},
    "query_graph": {"match": [{"node": "t", "id": "team-payments"}, {"edge": "owns", "from": "t", "to": "s"}]},
    "diff_revisions": {"from": 1500, "limit": 1},
    "write_batch": {"operations": [{"op": "patch_node", "id": "team-payments", "properties": {}}], "dry_run": True},
    "propose_changes": {"title": "t", "rationale": "r", "operations": [{"op": "patch_node", "id": "team-payments"}]},
    "get_audit_log": {"limit": 1},
    "apply_model": {"model": load_model().document, "dry_run": True},  # the store's own model: an empty plan
}
PROPOSAL_TOOLS = ["propose_changes", "get_proposal", "find_proposals", "revise_proposal", "comment_on_proposal",
                  "withdraw_proposal", "review_proposal"]  # fmt: skip
ADVANCED = ["find_paths", "query_graph", "diff_revisions", "write_batch", *PROPOSAL_TOOLS, "get_audit_log",
            "apply_model"]  # fmt: skip


def test_the_advanced_tools_are_find_paths_query_graph_diff_revisions_write_batch_the_proposals_and_admin_tools(
    model: Model,
) -> None:
    assert [t.name for t in build_registry(model).tools if t.advanced] == ADVANCED  # registry order
    assert set(ADVANCED_CALLS) <= set(ADVANCED)


async def test_agent_profile_hides_the_advanced_tools_from_the_list(
    shared_instance: Instance, revision: str, model: Model
) -> None:
    served = serve(shared_instance, ServeOptions(profile="agent"))
    async with served.client(revision) as client:
        listed = [t.name for t in (await client.list_tools()).tools]

    assert listed == [t.name for t in build_registry(model).tools if not t.advanced]
    assert not set(ADVANCED) & set(listed)


@pytest.mark.parametrize("name", sorted(ADVANCED_CALLS))
async def test_agent_profile_still_answers_a_call_to_a_hidden_tool(
    shared_instance: Instance, revision: str, name: str
) -> None:
    served = serve(shared_instance, ServeOptions(profile="agent"))
    async with served.client(revision) as client:
        await client.list_tools()
        result = await client.call_tool(name, ADVANCED_CALLS[name])

    assert not result.is_error
    assert result.structured_content is None  # the agent profile lists no output schemas: the object once, as text
    assert isinstance(result.content[0], types.TextContent)
    assert json.loads(result.content[0].text).get("items", True)


async def test_agent_profile_lists_no_output_schemas_and_full_lists_them(
    shared_instance: Instance, revision: str
) -> None:
    async with serve(shared_instance, ServeOptions(profile="agent")).client(revision) as client:
        lean = (await client.list_tools()).tools
        result = await client.call_tool("get_node", {"id": "team-payments"})
    async with serve(shared_instance, ServeOptions()).client(revision) as client:
        full = (await client.list_tools()).tools

    assert all(t.output_schema is None for t in lean)
    assert all(t.output_schema for t in full)
    assert result.structured_content is None
    assert isinstance(result.content[0], types.TextContent)
    assert json.loads(result.content[0].text)["node"]["id"] == "team-payments"


async def test_agent_profile_gives_only_the_hints_a_client_would_not_assume(
    shared_instance: Instance, revision: str, model: Model
) -> None:
    async with serve(shared_instance, ServeOptions(profile="agent")).client(revision) as client:
        lean = {t.name: t.annotations for t in (await client.list_tools()).tools}
    told = {t.name: t.annotations for t in build_registry(model).tools}

    assumed = {"read_only_hint": False, "destructive_hint": True, "idempotent_hint": False, "open_world_hint": True}
    for name, hints in lean.items():
        assert hints is not None
        given = {key: told[name][mcp_name] for key, mcp_name in HINT_NAMES.items()}
        read_only = given["read_only_hint"]
        for key, value in given.items():
            meaningless = read_only and key in ("destructive_hint", "idempotent_hint")
            effective = getattr(hints, key)
            assert effective == (None if meaningless or value == assumed[key] else value), (name, key)
            if not meaningless:
                assert (assumed[key] if effective is None else effective) == value, (name, key)


PROPERTY_NAME = "^[a-z][a-z0-9_]{0,63}$"  # the grammar of a model's property names (`fields`, `facets` entries)
GUARD_KEYWORDS = {"minLength", "maxLength", "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties",
                  "propertyNames"}  # fmt: skip


def _keywords(schema: Any, path: str = "") -> list[tuple[str, str, Any]]:
    """(pointer, keyword, value) of every keyword of `schema` and its subschemas (not inside enum/default/const)."""
    found: list[tuple[str, str, Any]] = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            found.append((path, key, value))
            if key in ("properties", "$defs") and isinstance(value, dict):
                for name, sub in value.items():
                    found += _keywords(sub, f"{path}/{key}/{name}")
            elif key in ("anyOf", "allOf", "oneOf") and isinstance(value, list):
                for i, sub in enumerate(value):
                    found += _keywords(sub, f"{path}/{key}/{i}")
            elif key in ("items", "additionalProperties", "propertyNames"):
                found += _keywords(value, f"{path}/{key}")
    return found


async def test_agent_profile_input_schemas_leave_out_the_guard_bounds_and_keep_what_a_value_means(
    shared_instance: Instance, revision: str
) -> None:
    async with serve(shared_instance, ServeOptions(profile="agent")).client(revision) as client:
        lean = {t.name: t.input_schema for t in (await client.list_tools()).tools}
        too_long = await client.call_tool("get_node", {"id": "team-payments", "fields": ["name", "name"]})
        unknown = await client.call_tool("get_node", {"id": "team-payments", "fiels": ["name"]})
        no_name = await client.call_tool("get_node", {"id": "team-payments", "fields": ["[0,1]"]})
    async with serve(shared_instance, ServeOptions()).client(revision) as client:
        full = {t.name: t.input_schema for t in (await client.list_tools()).tools if t.name in lean}
    advanced = {t.name: t.advanced_arguments for t in shared_instance.registry.tools}
    for name, inputs in advanced.items():  # the agent profile lists no advanced argument, and only those are gone
        if name in full:
            assert set(full[name]["properties"]) - set(lean[name]["properties"]) == set(inputs), name
            full[name] = {**full[name], "properties": {k: v for k, v in full[name]["properties"].items()
                                                       if k not in inputs}}  # fmt: skip
    assert advanced["find_nodes"] == ("order_by", "proposal")
    assert advanced["get_node"] == advanced["get_neighbors"] == ("proposal",)

    for name, schema in lean.items():
        kept = {(p, k, canonical(v)) for p, k, v in _keywords(schema) if k not in ("properties", "$defs", "items")}
        guards = [
            (p, k) for p, k, v in _keywords(schema) if k in GUARD_KEYWORDS or (k, v) == ("additionalProperties", False)
        ]
        assert guards == [], (name, guards)
        meaning = {(p, k, canonical(v)) for p, k, v in _keywords(full[name])
                   if k in ("enum", "required", "pattern", "minimum", "maximum", "default", "type", "description")
                   and "/propertyNames" not in p and (k, v) != ("pattern", PROPERTY_NAME)}  # fmt: skip  # name grammars
        assert meaning <= kept, (name, sorted(meaning - kept)[:3])
    assert any(k == "uniqueItems" for p, k, v in _keywords(full["get_node"]))  # the full profile keeps every bound
    checked = ((too_long, "non-unique"), (unknown, "'fiels' is not allowed"), (no_name, "does not match"))
    for result, told in checked:  # and the server checks them
        assert result.is_error
        assert isinstance(result.content[0], types.TextContent)
        assert told in result.content[0].text


HINT_NAMES = {"read_only_hint": "readOnlyHint", "destructive_hint": "destructiveHint",
              "idempotent_hint": "idempotentHint", "open_world_hint": "openWorldHint"}  # fmt: skip


async def test_prefix_lists_every_tool_under_the_prefix(shared_instance: Instance, revision: str, model: Model) -> None:
    served = serve(shared_instance, ServeOptions(prefix="canon_"))
    async with served.client(revision) as client:
        listed = [t.name for t in (await client.list_tools()).tools]

    assert listed == ["canon_" + t.name for t in build_registry(model).tools]


async def test_prefix_maps_a_prefixed_call_back_to_its_tool(shared_instance: Instance, revision: str) -> None:
    served = serve(shared_instance, ServeOptions(prefix="canon_"))
    async with served.client(revision) as client:
        await client.list_tools()
        result = await client.call_tool("canon_get_node", {"id": "team-payments"})
        invalid = await client.call_tool("canon_get_node", {"id": 5})

    assert structured(result)["node"]["id"] == "team-payments"
    assert invalid.is_error is True


@pytest.mark.parametrize(
    ("called", "named"),
    [("canon_get_nod", ["'canon_get_node'"]), ("canon_zzzz", [f"canon_{t}" for t in ("get_node", "find_paths")])],
    ids=["close", "far"],
)
async def test_prefix_unknown_tool_error_suggests_prefixed_names(
    shared_instance: Instance, revision: str, called: str, named: list[str]
) -> None:
    served = serve(shared_instance, ServeOptions(prefix="canon_"))
    async with served.client(revision) as client:
        with pytest.raises(mcp.MCPError) as raised:
            await client.call_tool(called, {})

    assert raised.value.code == types.INVALID_PARAMS
    message = raised.value.error.message
    assert all(name in message for name in named)
    assert "'get_node'" not in message  # never the bare name the client cannot call by that listing


async def test_prefix_refuses_the_unprefixed_name_and_points_to_the_listed_one(
    shared_instance: Instance, revision: str
) -> None:
    served = serve(shared_instance, ServeOptions(prefix="canon_"))
    async with served.client(revision) as client:
        with pytest.raises(mcp.MCPError) as raised:
            await client.call_tool("get_node", {"id": "team-payments"})

    assert raised.value.code == types.INVALID_PARAMS
    assert raised.value.error.message.startswith("Unknown tool: 'get_node'. Did you mean 'canon_get_node', ")


async def test_prefix_refuses_the_unprefixed_name_over_http_too(shared_instance: Instance) -> None:
    async with asgi_http(shared_instance, ServeOptions(prefix="canon_")) as http:
        headers, body = modern_request("tools/call", {"name": "get_node", "arguments": {"id": "team-payments"}})
        refused = await http.post("/mcp", json=body, headers=headers)
        headers, body = modern_request("tools/call", {"name": "canon_get_node", "arguments": {"id": "team-payments"}})
        served = await http.post("/mcp", json=body, headers=headers)

    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == types.INVALID_PARAMS
    assert error["message"].startswith("Unknown tool: 'get_node'. Did you mean 'canon_get_node', ")
    assert served.json()["result"]["structuredContent"]["node"]["id"] == "team-payments"


async def test_an_unknown_tool_never_hints_at_a_tool_the_agent_profile_hides(
    shared_instance: Instance, revision: str, model: Model
) -> None:
    served = serve(shared_instance, ServeOptions(profile="agent"))
    async with served.client(revision) as client:
        with pytest.raises(mcp.MCPError) as close:
            await client.call_tool("find_path", {})
        with pytest.raises(mcp.MCPError) as far:
            await client.call_tool("zzzz", {})

    assert not any(name in close.value.error.message for name in ADVANCED)
    shown = [t.name for t in build_registry(model).tools if not t.advanced]
    assert far.value.error.message == f"Unknown tool: 'zzzz'. Known tools: {', '.join(shown)}."
