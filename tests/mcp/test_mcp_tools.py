"""canon's tools over MCP, in-process, on both protocol revisions: listing, results, errors, paging, queries."""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp
import mcp_types as types
import pytest
from jsonschema import Draft202012Validator

from core.dispatch.dispatcher import CallContext
from core.lang.model import Model, default_seed_path
from core.lang.schemas import DIALECT
from core.tools import Toolset
from core.tools.query import MAX_WORK
from tests.conftest import tool_names
from tests.mcp.conftest import Served, asgi_http, modern_request, open_copy

pytestmark = pytest.mark.anyio

READ_TOOLS = tool_names("read")  # what a reader lists, in order
WRITE_TOOLS = tool_names("write")
WRITER_TOOLS = tool_names("read", "write")  # what a writer lists, in order
TOOL_NAMES = tool_names()  # all of them: the served principal is the local admin


def _seed() -> dict[str, Any]:
    seed: dict[str, Any] = json.loads(default_seed_path().read_text(encoding="utf-8"))
    return seed


def _edges(seed: dict[str, Any], edge_type: str) -> list[tuple[str, str]]:
    return [(e["source"], e["target"]) for e in seed["edges"] if e["type"] == edge_type]


def tool_error(result: types.CallToolResult) -> dict[str, Any]:
    """The `error` object of a tool error result (isError, with the error as JSON text)."""
    assert result.is_error is True
    assert isinstance(result.content[0], types.TextContent)
    body = json.loads(result.content[0].text)
    assert set(body) == {"error"}
    error: dict[str, Any] = body["error"]
    return error


def structured(result: types.CallToolResult) -> dict[str, Any]:
    """The structured result of a successful call, checked to equal its text content."""
    assert result.is_error is not True, result.content
    assert isinstance(result.content[0], types.TextContent)
    assert result.structured_content == json.loads(result.content[0].text)
    value: dict[str, Any] = result.structured_content
    return value


def canonical(value: Any) -> str:
    """JSON text with sorted keys: object member order is not part of JSON's meaning (the SDK reorders it)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def resolve(document: Any, pointer: str) -> Any:
    """Resolve an RFC 6901 JSON pointer; KeyError/IndexError when it points at nothing."""
    if pointer == "":
        return document
    assert pointer.startswith("/"), pointer
    for token in pointer[1:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        document = document[int(token)] if isinstance(document, list) else document[token]
    return document


# -- tools/list -----------------------------------------------------------------------------------------------------
async def test_tools_list_gives_the_registry_tools_in_order_with_their_exact_schemas(
    served: Served, revision: str, model: Model
) -> None:
    expected = served.instance.registry.tools  # its descriptions name the served data's ids

    async with served.client(revision) as client:
        listed = (await client.list_tools()).tools

    assert [t.name for t in listed] == [t.name for t in expected] == TOOL_NAMES
    for tool, definition in zip(listed, expected, strict=True):
        assert canonical({**tool.input_schema, "$schema": DIALECT}) == canonical(definition.input_schema)
        assert canonical({**(tool.output_schema or {}), "$schema": DIALECT}) == canonical(definition.output_schema)
        assert tool.title == definition.title
        assert tool.description == definition.description
        assert tool.annotations is not None
        writes = tool.name in WRITE_TOOLS or tool.name == "apply_model"  # apply_model: the admin's write
        assert tool.annotations.read_only_hint is not writes
        if tool.name.endswith(("_proposal", "_proposals")) or tool.name == "propose_changes":  # a proposal's writes
            hints = definition.annotations  # (tests/core/test_writes.py holds each proposal tool's)
            assert tool.annotations.destructive_hint is hints["destructiveHint"]
            assert tool.annotations.idempotent_hint is hints["idempotentHint"]
            continue
        assert tool.annotations.destructive_hint is writes  # upserts replace, deletes delete
        assert tool.annotations.idempotent_hint is (tool.name != "write_batch")
        assert tool.annotations.title is None  # the tool's title is said once


async def test_tools_list_names_no_dialect_and_gives_each_tool_its_own_icon(served: Served, revision: str) -> None:
    async with served.client(revision) as client:
        listed = (await client.list_tools()).tools

    assert all("$schema" not in t.input_schema and "$schema" not in (t.output_schema or {}) for t in listed)
    icons = [t.icons[0].src if t.icons else None for t in listed]  # 2020-12 is MCP's default dialect
    assert all(src and src.startswith("data:image/svg+xml;base64,") for src in icons), icons
    assert len(set(icons)) == len(icons)  # each tool its own, from its definition
    assert served.server.icons  # and the server's own, in serverInfo
    assert served.server.icons[0].src.startswith("data:image/svg+xml;base64,")


# -- results --------------------------------------------------------------------------------------------------------
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("describe_model", {}),
    ("describe_model", {"include_schemas": True}),
    ("get_node", {"id": "team-payments"}),
    ("find_nodes", {"type": "Service", "where": {"tier": 1, "lifecycle": "production"}, "text": "pay", "limit": 10}),
    ("get_neighbors", {"id": "team-payments", "direction": "out", "edge_types": ["owns"], "depth": 2}),
    ("find_paths", {"source": "person-ada-okafor", "target": "svc-checkout-api", "max_depth": 3}),
    ("query_graph", {"match": [{"node": "t", "id": "team-payments"}, {"edge": "owns", "from": "t", "to": "s"},
                               {"node": "s", "type": "Service", "where": {"tier": 1}}], "return": ["s"]}),
    ("get_changes", {"since": 1500, "limit": 20}),
]  # fmt: skip


@pytest.mark.parametrize(("name", "arguments"), CALLS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CALLS)])
async def test_every_tool_returns_structured_content_equal_to_its_text_and_valid_against_its_output_schema(
    served: Served, revision: str, name: str, arguments: dict[str, Any]
) -> None:
    async with served.client(revision) as client:  # the SDK client validates structured content too
        schema = next(t.output_schema for t in (await client.list_tools()).tools if t.name == name)
        result = await client.call_tool(name, arguments)

    value = structured(result)
    assert schema is not None
    assert list(Draft202012Validator(schema).iter_errors(value)) == []
    assert value["revision"] == served.instance.store.revision()
    if "items" in value:
        assert value["items"], f"{name} {arguments} found nothing; the call is not realistic"


async def test_get_node_returns_the_stored_node(served: Served, revision: str) -> None:
    async with served.client(revision) as client:
        result = await client.call_tool("get_node", {"id": "team-payments"})

    node = served.instance.store.node("team-payments")
    assert node is not None
    assert structured(result)["node"] == node.to_json()


async def test_get_node_waits_off_the_event_loop_while_a_walk_holds_the_index(served: Served, revision: str) -> None:
    """A point read runs on the event loop only when nothing it needs is busy: here it waits in a worker thread,
    and the server goes on answering other requests meanwhile."""
    index = served.instance.index
    assert index is not None
    holding, release, released = threading.Event(), threading.Event(), threading.Event()

    def walk() -> None:  # what a long get_neighbors or find_paths does: hold the index
        with index.reading():
            holding.set()
            release.wait(5)
        released.set()

    thread = threading.Thread(target=walk)
    thread.start()
    answers: list[types.CallToolResult] = []
    try:
        assert holding.wait(5)
        async with served.client(revision) as client:

            async def read() -> None:
                answers.append(await client.call_tool("get_node", {"id": "team-payments"}))

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(read)
                with anyio.fail_after(5):
                    templates = await client.list_resource_templates()  # needs no index
                assert templates.resource_templates
                assert not released.is_set()  # answered while the index was held, not after
                assert answers == []  # the read is still waiting for the index
                release.set()
    finally:
        release.set()
        thread.join(5)
    [answer] = answers
    assert structured(answer)["node"]["id"] == "team-payments"


async def test_get_node_unknown_id_is_a_tool_error(served: Served, revision: str) -> None:
    async with served.client(revision) as client:
        result = await client.call_tool("get_node", {"id": "team-nowhere"})

    error = tool_error(result)
    assert error["code"] == "not_found"
    assert (error["kind"], error["key"]) == ("node", "team-nowhere")
    assert result.structured_content is None


INVALID: list[tuple[str, str, dict[str, Any], str]] = [
    ("wrong-type", "get_node", {"id": 5}, "/id"),
    ("limit-too-big", "find_nodes", {"type": "Person", "limit": 101}, "/limit"),
    ("depth-9", "get_neighbors", {"id": "team-payments", "depth": 9}, "/depth"),
    ("wrong-enum", "get_neighbors", {"id": "team-payments", "direction": "sideways"}, "/direction"),
    ("nested", "find_nodes", {"type": "Person", "where": {"level": {"gt": [1]}}}, "/where/level"),
    ("unknown-property", "find_nodes", {"type": "Person", "colour": "red"}, ""),  # the object holding it: the root
    ("missing-required", "get_node", {}, ""),
    ("not-a-date-time", "get_audit_log", {"since": "yesterday"}, "/since"),  # format is asserted, not a 500
    ("id-with-a-trailing-newline", "delete_node", {"id": "team-payments\n"}, "/id"),  # ECMA-262 $: no final \n
]


@pytest.mark.parametrize(("name", "arguments", "pointer"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
async def test_invalid_arguments_are_a_tool_error_whose_problems_point_into_the_arguments(
    served: Served, revision: str, name: str, arguments: dict[str, Any], pointer: str
) -> None:
    async with served.client(revision) as client:
        result = await client.call_tool(name, arguments)

    error = tool_error(result)
    assert error["code"] == "invalid_arguments"
    assert error["tool"] == name
    pointers = [p["pointer"] for p in error["problems"]]
    assert pointer in pointers
    for found in pointers:  # RFC 6901: each names a place in the arguments ("" is the whole object)
        resolve(arguments, found)


async def test_unknown_tool_is_a_protocol_error_naming_the_closest_tools(served: Served, revision: str) -> None:
    async with served.client(revision) as client:
        with pytest.raises(mcp.MCPError) as raised:
            await client.call_tool("get_nod", {"id": "team-payments"})

    assert raised.value.code == types.INVALID_PARAMS
    assert "'get_node'" in raised.value.error.message  # the suggestion is the feature


async def test_unknown_tool_far_from_any_name_lists_every_tool(served: Served, revision: str) -> None:
    async with served.client(revision) as client:
        with pytest.raises(mcp.MCPError) as raised:
            await client.call_tool("zzzz", {})

    assert raised.value.code == types.INVALID_PARAMS
    assert all(name in raised.value.error.message for name in TOOL_NAMES)


# -- paging ---------------------------------------------------------------------------------------------------------
async def test_find_nodes_pages_through_a_type_to_the_end(served: Served, revision: str) -> None:
    arguments: dict[str, Any] = {"type": "Person", "limit": 5}
    pages: list[dict[str, Any]] = []
    async with served.client(revision) as client:
        cursor: str | None = None
        while True:
            page = structured(await client.call_tool("find_nodes", arguments | ({"cursor": cursor} if cursor else {})))
            pages.append(page)
            cursor = page["next_cursor"]
            if cursor is None:
                break
            assert len(pages) <= 100, "the cursor never ends"

    ids = [item["id"] for page in pages for item in page["items"]]
    persons = sorted(n["id"] for n in _seed()["nodes"] if n["type"] == "Person")
    assert ids == persons  # every Person once, in id order
    assert all(page["total"] == len(persons) for page in pages)
    assert all(len(page["items"]) == 5 and page["truncated"] is True for page in pages[:-1])
    assert pages[-1]["next_cursor"] is None
    assert pages[-1]["truncated"] is False


async def test_a_cursor_replayed_with_other_arguments_is_a_tool_error(served: Served, revision: str) -> None:
    async with served.client(revision) as client:
        first = structured(await client.call_tool("find_nodes", {"type": "Person", "limit": 5}))
        replayed = await client.call_tool("find_nodes", {"type": "Team", "limit": 5, "cursor": first["next_cursor"]})
        forged = await client.call_tool("find_nodes", {"type": "Person", "cursor": "not-a-cursor"})

    for result in (replayed, forged):
        error = tool_error(result)
        assert error["code"] == "invalid_arguments"
        assert [p["pointer"] for p in error["problems"]] == ["/cursor"]


async def test_a_cursor_keeps_working_with_another_limit(served: Served, revision: str) -> None:
    async with served.client(revision) as client:
        first = structured(await client.call_tool("find_nodes", {"type": "Team", "limit": 5}))
        rest = structured(await client.call_tool("find_nodes", {"type": "Team", "limit": 100,
                                                                "cursor": first["next_cursor"]}))  # fmt: skip

    ids = [n["id"] for n in first["items"] + rest["items"]]
    assert ids == sorted(n["id"] for n in _seed()["nodes"] if n["type"] == "Team")
    assert rest["next_cursor"] is None


# -- query_graph ----------------------------------------------------------------------------------------------------
async def test_query_graph_connected_pattern_binds_what_the_seed_data_holds(served: Served, revision: str) -> None:
    pattern = {
        "match": [
            {"node": "p", "type": "Person"},
            {"edge": "member_of", "from": "p", "to": "t"},
            {"edge": "owns", "from": "t", "to": "s"},
            {"node": "s", "id": "svc-checkout-api"},
        ],
        "return": ["p", "t"],
        "limit": 100,
    }
    async with served.client(revision) as client:
        value = structured(await client.call_tool("query_graph", pattern))

    seed = _seed()
    owners = {team for team, target in _edges(seed, "owns") if target == "svc-checkout-api"}
    expected = sorted((person, team) for person, team in _edges(seed, "member_of") if team in owners)
    got = [(item["p"], item["t"]) for item in value["items"]]
    assert got == expected
    assert value["total"] == len(expected) > 0
    assert value["truncated"] is False
    types = {node["id"]: node["type"] for node in value["nodes"]}  # each bound node once
    assert all(types[item["p"]] == "Person" and types[item["t"]] == "Team" for item in value["items"])
    assert len(value["nodes"]) == len({n for item in value["items"] for n in item.values()})


async def test_query_graph_disconnected_pattern_is_a_tool_error(served: Served, revision: str) -> None:
    pattern = {"match": [{"node": "t", "type": "Team"}, {"node": "p", "type": "Person"}]}
    async with served.client(revision) as client:
        result = await client.call_tool("query_graph", pattern)

    error = tool_error(result)
    assert error["code"] == "invalid_arguments"
    assert [p["pointer"] for p in error["problems"]] == ["/match"]


async def test_query_graph_past_its_work_bound_is_limit_exceeded(served: Served, revision: str) -> None:
    # Four people in one team: about sum(members^4) > MAX_WORK bindings, and the last edge's condition never
    # holds, so the result bound cannot stop it early; only the work bound can.
    assert sum(n**4 for n in Counter(t for _, t in _edges(_seed(), "member_of")).values()) > MAX_WORK
    pattern = {
        "match": [
            {"edge": "member_of", "from": "a", "to": "t"},
            {"edge": "member_of", "from": "b", "to": "t"},
            {"edge": "member_of", "from": "c", "to": "t"},
            {"edge": "member_of", "from": "d", "to": "t", "where": {"role": "no-such-role"}},
        ]
    }
    async with served.client(revision) as client:
        result = await client.call_tool("query_graph", pattern)

    error = tool_error(result)
    assert error["code"] == "limit_exceeded"
    assert error["limit"] == "work"


async def test_query_graph_more_than_four_edge_terms_is_a_tool_error(served: Served, revision: str) -> None:
    terms = [{"edge": "member_of", "from": v, "to": "t"} for v in ("a", "b", "c", "d")]
    pattern = {"match": [*terms, {"edge": "owns", "from": "t", "to": "s"}]}
    async with served.client(revision) as client:
        result = await client.call_tool("query_graph", pattern)

    error = tool_error(result)
    assert error["code"] == "invalid_arguments"
    assert "/match" in [p["pointer"] for p in error["problems"]]


# -- traversal ------------------------------------------------------------------------------------------------------
async def test_get_neighbors_depth_two_comes_nearest_first(served: Served, revision: str) -> None:
    async with served.client(revision) as client:
        value = structured(await client.call_tool("get_neighbors", {"id": "team-payments", "depth": 2, "limit": 200}))

    seed = _seed()
    adjacent = {s for s, t in ((e["source"], e["target"]) for e in seed["edges"]) if t == "team-payments"}
    adjacent |= {t for s, t in ((e["source"], e["target"]) for e in seed["edges"]) if s == "team-payments"}
    depths = [item["depth"] for item in value["items"]]
    assert depths == sorted(depths)
    assert set(depths) == {1, 2}
    assert {i["node"]["id"] for i in value["items"] if i["depth"] == 1} == adjacent
    ids = [i["node"]["id"] for i in value["items"]]
    assert len(ids) == len(set(ids)) == value["total"]
    assert "team-payments" not in ids
    for item in value["items"]:  # each was reached through an edge that touches it
        assert item["node"]["id"] in (item["edge"]["source"], item["edge"]["target"])


async def test_find_paths_path_nodes_are_joined_by_its_edges(served: Served, revision: str) -> None:
    source, target = "person-ada-okafor", "svc-checkout-api"
    async with served.client(revision) as client:
        value = structured(await client.call_tool("find_paths", {"source": source, "target": target,
                                                                 "max_depth": 3, "limit": 50}))  # fmt: skip

    edges = {(e["type"], e["source"], e["target"]) for e in _seed()["edges"]}
    assert value["items"]
    lengths = [len(path["edges"]) for path in value["items"]]
    assert lengths == sorted(lengths)  # shortest first
    for path in value["items"]:
        nodes = path["nodes"]
        assert (nodes[0], nodes[-1]) == (source, target)
        assert len(set(nodes)) == len(nodes)  # simple
        assert len(path["edges"]) == len(nodes) - 1
        for here, there, edge in zip(nodes, nodes[1:], path["edges"], strict=False):
            assert {edge["source"], edge["target"]} == {here, there}
            assert (edge["type"], edge["source"], edge["target"]) in edges


# -- changes and model ----------------------------------------------------------------------------------------------
async def test_get_changes_returns_later_revisions_in_order_and_resumes(served: Served, revision: str) -> None:
    head = served.instance.store.revision()
    since = head - 12
    async with served.client(revision) as client:
        first = structured(await client.call_tool("get_changes", {"since": since, "limit": 5}))
        pages = [first]
        while (cursor := pages[-1]["next_cursor"]) is not None:
            pages.append(
                structured(await client.call_tool("get_changes", {"since": since, "limit": 5, "cursor": cursor}))
            )
            assert len(pages) <= 10

    revisions = [c["revision"] for page in pages for c in page["items"]]
    assert revisions == list(range(since + 1, head + 1))
    assert [len(p["items"]) for p in pages] == [5, 5, 2]
    assert all(p["total"] == 12 and p["revision"] == head for p in pages)
    assert pages[-1]["truncated"] is False


async def test_describe_model_counts_equal_the_store_stats(served: Served, revision: str) -> None:
    async with served.client(revision) as client:
        value = structured(await client.call_tool("describe_model", {}))

    stats = served.instance.store.stats()
    assert {t["name"]: t["count"] for t in value["node_types"] if t["count"]} == stats.nodes_by_type
    assert {t["name"]: t["count"] for t in value["edge_types"] if t["count"]} == stats.edges_by_type
    assert [t["name"] for t in value["node_types"]] == list(served.instance.model.node_types)
    assert value["revision"] == stats.revision


# -- Mcp-Param headers: a tool whose input schema declares x-mcp-header gets them checked ----------------------------
REGIONAL = {
    "name": "regional_echo", "execution": "worker", "title": "Regional echo",
    "description": "Repeat a region back (a test-only tool whose region travels in an Mcp-Param header).",
    "inputSchema": {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
                    "required": ["region"], "additionalProperties": False},
    "outputSchema": {"type": "object", "properties": {"region": {"type": "string"}}, "required": ["region"]},
    "annotations": {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False},
    "permission": "read", "advanced": False,
}  # fmt: skip


def regional_echo(ctx: CallContext, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"region": arguments["region"]}


async def test_mcp_param_headers_are_checked_for_a_tool_that_declares_them_and_only_for_it(
    seed_template: Path, tmp_path: Path
) -> None:
    instance = open_copy(seed_template, tmp_path, Toolset((REGIONAL,), {"regional_echo": regional_echo}))
    try:
        async with asgi_http(instance) as http:

            async def call(name: str, arguments: dict[str, Any], **extra: str) -> httpx2.Response:
                headers, body = modern_request("tools/call", {"name": name, "arguments": arguments})
                return await http.post("/mcp", headers=headers | extra, json=body)

            missing = await call("regional_echo", {"region": "eu"})
            matching = await call("regional_echo", {"region": "eu"}, **{"Mcp-Param-Region": "eu"})
            other = await call("regional_echo", {"region": "eu"}, **{"Mcp-Param-Region": "us"})
            undeclared = await call("get_node", {"id": "team-payments"}, **{"Mcp-Param-Region": "us"})
    finally:
        instance.close()
    assert (missing.status_code, missing.json()["error"]["code"]) == (400, -32020)
    assert (other.status_code, other.json()["error"]["code"]) == (400, -32020)
    assert matching.status_code == 200
    assert matching.json()["result"]["structuredContent"] == {"region": "eu"}
    assert undeclared.status_code == 200  # get_node declares no header: a stray one is not its business
    assert "error" not in undeclared.json()
