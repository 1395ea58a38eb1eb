"""canon's resources over MCP, in-process, on both protocol revisions: listing, templates, reads, completion."""

from __future__ import annotations

import json
from typing import Any

import mcp
import mcp_types as types
import pytest

from core.values.uris import MODEL_AT_TEMPLATE, NODE_AT_TEMPLATE, NODE_TEMPLATE, PROPOSAL_TEMPLATE
from tests.mcp.conftest import MODERN, Served

pytestmark = pytest.mark.anyio

PAGE = 100
RESOURCE_NOT_FOUND_LEGACY = -32002


def _text(result: types.ReadResourceResult) -> tuple[str, str | None, Any]:
    [content] = result.contents
    assert isinstance(content, types.TextResourceContents)
    return content.uri, content.mime_type, json.loads(content.text)


async def test_resources_list_pages_through_every_fixed_resource_and_every_node(served: Served, revision: str) -> None:
    instance = served.instance
    pages: list[types.ListResourcesResult] = []
    async with served.client(revision) as client:
        cursor: str | None = None
        while True:
            pages.append(await client.list_resources(cursor=cursor))
            cursor = pages[-1].next_cursor
            if cursor is None:
                break
            assert len(pages) <= 50, "the cursor never ends"

    uris = [r.uri for page in pages for r in page.resources]
    fixed = [r.uri for r in instance.registry.resources]
    nodes = [f"canon://nodes/{n.type}/{n.id}" for n in sorted(instance.store.iter_nodes(), key=lambda n: n.id)]
    assert len(pages[0].resources) == PAGE
    assert pages[0].next_cursor is not None
    assert all(len(page.resources) == PAGE for page in pages[:-1])
    assert uris == fixed + nodes  # fixed first, then one per node in id order
    assert len(uris) == len(set(uris))
    assert {"canon://model", "canon://changes", "canon://types/Person", "canon://types/member_of"} <= set(uris)


async def test_resources_list_describes_a_node_by_its_display_property(served: Served, revision: str) -> None:
    async with served.client(revision) as client:
        found = [r for page in [await client.list_resources()] for r in page.resources
                 if r.uri.startswith("canon://nodes/")]  # fmt: skip

    assert found
    for resource in found:
        node_type, node_id = resource.uri.removeprefix("canon://nodes/").split("/")
        node = served.instance.store.node(node_id)
        assert node is not None
        assert node.type == node_type
        assert resource.name == node_id
        display = served.instance.model.node_types[node_type].display
        assert resource.title == str(node.properties.get(display, node_id))
        assert resource.mime_type == "application/json"


async def test_templates_list_has_the_node_template_and_the_model_at_a_revision(served: Served, revision: str) -> None:
    async with served.client(revision) as client:
        templates = (await client.list_resource_templates()).resource_templates

    assert [t.uri_template for t in templates] == [NODE_TEMPLATE, NODE_AT_TEMPLATE, PROPOSAL_TEMPLATE,
                                                   MODEL_AT_TEMPLATE]  # fmt: skip
    assert [NODE_TEMPLATE, NODE_AT_TEMPLATE, PROPOSAL_TEMPLATE, MODEL_AT_TEMPLATE] == [
        "canon://nodes/{type}/{id}", "canon://nodes/{type}/{id}/at/{revision}", "canon://proposals/{id}",
        "canon://model/at/{revision}",
    ]  # fmt: skip
    assert [t.mime_type for t in templates] == ["application/json", "application/json", "application/json",
                                                "application/schema+json"]  # fmt: skip


async def test_read_model_resource_is_the_model_document(served: Served, revision: str) -> None:
    async with served.client(revision) as client:
        uri, mime, document = _text(await client.read_resource("canon://model"))

    assert uri == "canon://model"
    assert mime == "application/schema+json"
    assert document == served.instance.model.document


async def test_read_type_resource_is_a_self_contained_schema_of_that_type(served: Served, revision: str) -> None:
    async with served.client(revision) as client:
        uri, mime, schema = _text(await client.read_resource("canon://types/Person"))

    assert uri == "canon://types/Person"
    assert mime == "application/schema+json"
    assert schema["$ref"] == "#/$defs/Person"
    assert "Person" in schema["$defs"]


async def test_read_changes_resource_is_the_latest_changes_newest_last(served: Served, revision: str) -> None:
    async with served.client(revision) as client:
        uri, mime, feed = _text(await client.read_resource("canon://changes"))

    head = served.instance.store.revision()
    assert (uri, mime) == ("canon://changes", "application/json")
    assert feed["revision"] == head
    assert [c["revision"] for c in feed["items"]] == list(range(head - PAGE + 1, head + 1))


async def test_read_node_resource_equals_get_node(served: Served, revision: str) -> None:
    uri = "canon://nodes/Team/team-payments"
    async with served.client(revision) as client:
        read_uri, mime, node = _text(await client.read_resource(uri))
        got = await client.call_tool("get_node", {"id": "team-payments"})

    assert (read_uri, mime) == (uri, "application/json")
    assert got.structured_content is not None
    assert node == got.structured_content["node"]


@pytest.mark.parametrize(
    "uri",
    ["canon://nodes/Team/team-nowhere", "canon://nodes/Person/team-payments", "canon://types/Nothing", "canon://x"],
    ids=["unknown-id", "wrong-type", "unknown-type", "unknown-uri"],
)
async def test_read_unknown_resource_is_resource_not_found_in_each_revisions_code(
    served: Served, revision: str, uri: str
) -> None:
    async with served.client(revision) as client:
        with pytest.raises(mcp.MCPError) as raised:
            await client.read_resource(uri)

    expected = types.INVALID_PARAMS if revision == MODERN else RESOURCE_NOT_FOUND_LEGACY
    assert raised.value.code == expected
    assert raised.value.error.data == {"uri": uri}


async def test_completion_of_type_gives_node_types_by_prefix(served: Served, revision: str) -> None:
    ref = types.ResourceTemplateReference(type="ref/resource", uri=NODE_TEMPLATE)
    async with served.client(revision) as client:
        result = await client.complete(ref, {"name": "type", "value": "Te"})

    assert result.completion.values == ["Team"]
    assert result.completion.total == 1
    assert result.completion.has_more is False


async def test_completion_of_id_gives_ids_of_that_type_by_prefix(served: Served, revision: str) -> None:
    ref = types.ResourceTemplateReference(type="ref/resource", uri=NODE_TEMPLATE)
    async with served.client(revision) as client:
        result = await client.complete(ref, {"name": "id", "value": "team-p"}, {"type": "Team"})
        everything = await client.complete(ref, {"name": "id", "value": "team-p"}, {"type": "Person"})

    expected = sorted(n.id for n in served.instance.store.iter_nodes("Team") if n.id.startswith("team-p"))
    assert expected == ["team-payments", "team-platform"]
    assert result.completion.values == expected
    assert result.completion.total == len(expected)
    assert result.completion.has_more is False
    assert everything.completion.values == []  # no Person id starts with team-p
    assert everything.completion.total == 0


@pytest.mark.parametrize(
    ("template", "argument"),
    [("canon://nothing/{x}", "x"), (NODE_TEMPLATE, "colour")],
    ids=["unknown-template", "unknown-argument"],
)
async def test_completion_of_an_unknown_template_or_argument_is_invalid_params(
    served: Served, revision: str, template: str, argument: str
) -> None:
    # Not "resource not found" (-32002 in 2025-11-25): that code is for reading a resource; completion's
    # failures are invalid params on both revisions (the server's own error table says so too).
    ref = types.ResourceTemplateReference(type="ref/resource", uri=template)
    async with served.client(revision) as client:
        with pytest.raises(mcp.MCPError) as raised:
            await client.complete(ref, {"name": argument, "value": ""})

    assert raised.value.code == types.INVALID_PARAMS


async def test_every_listed_resource_and_the_node_template_carry_an_icon(served: Served, revision: str) -> None:
    async with served.client(revision) as client:
        listed = (await client.list_resources()).resources
        templates = (await client.list_resource_templates()).resource_templates

    fixed = [r for r in listed if not r.uri.startswith("canon://nodes/")]
    assert {"canon://model", "canon://changes", "canon://types/member_of", "canon://types/Team"} <= {
        r.uri for r in fixed
    }
    for entry in [*listed, *templates]:
        assert entry.icons, f"{entry.name} has no icon"
        assert entry.icons[0].src.startswith(("data:", "https:"))
    assert [t.uri_template for t in templates] == [NODE_TEMPLATE, NODE_AT_TEMPLATE, PROPOSAL_TEMPLATE,
                                                   MODEL_AT_TEMPLATE]  # fmt: skip


async def test_the_node_template_describes_what_reading_it_gives(served: Served, revision: str) -> None:
    async with served.client(revision) as client:
        [template] = [t for t in (await client.list_resource_templates()).resource_templates
                      if t.uri_template == NODE_TEMPLATE]  # fmt: skip
        read = await client.read_resource("canon://nodes/Team/team-payments")
        called = await client.call_tool("get_node", {"id": "team-payments"})

    _, _, node = _text(read)
    assert called.structured_content is not None
    assert node == called.structured_content["node"]  # get_node's `node`, without its revision
    assert template.description is not None
    assert "under `node`" in template.description
