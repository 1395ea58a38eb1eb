"""Markup and script stored in the data never reach a page unescaped.

Every free-text string property (no pattern, format or enum to refuse it) of a node of every type is set to
markup with a script, and every page that could show it (home and its changes, each type's table, each node's
page and its history and diff, search, the change log) must carry only its escaped form.
"""

from __future__ import annotations

from typing import Any

import pytest

from core.dispatch import proposals
from core.seam.instance import Instance
from core.values.principal import Principal
from tests.generators.conftest import asgi, token

pytestmark = pytest.mark.anyio

PAYLOAD = '<script>alert("pwned")</script><img src=x onerror=alert(1)>"\'><b>'
RAW = ("<script>alert", "<img src=x", "onerror=alert(1)>", "<b>")  # any of these in a page is an injection
ADMIN = Principal("erin", frozenset({"admin"}))


def _free_text(instance: Instance, node_type: str) -> list[str]:
    model = instance.snapshot.registry.model
    names: list[str] = []
    for name, declared in model.node_types[node_type].properties.items():
        schema = model.resolved(declared)
        if schema.get("type") == "string" and not {"pattern", "format", "enum"} & set(schema):
            names.append(name)
    return names


def _poison(instance: Instance) -> list[tuple[str, str]]:
    """Set every free-text property of the first node of each type to the payload; the (type, id) changed."""
    dispatcher = instance.snapshot.dispatcher
    changed: list[tuple[str, str]] = []
    for node_type in instance.snapshot.registry.model.node_types:
        names = _free_text(instance, node_type)
        node = next(iter(instance.store.iter_nodes(node_type)))
        properties: dict[str, Any] = {n: PAYLOAD[: _room(instance, node_type, n)] for n in names}
        result = dispatcher.call_tool(ADMIN, "test", "patch_node", {"id": node.id, "properties": properties})
        assert result.error is None, result.error
        changed.append((node_type, node.id))
    return changed


def _room(instance: Instance, node_type: str, name: str) -> int:
    schema = instance.snapshot.registry.model.resolved(instance.snapshot.registry.model.node_types[node_type]
                                                       .properties[name])  # fmt: skip
    return int(schema.get("maxLength", len(PAYLOAD)))


async def test_markup_and_script_in_every_string_property_show_escaped_on_every_page(
    fresh_instance: Instance,
) -> None:
    changed = _poison(fresh_instance)
    assert sum(len(_free_text(fresh_instance, t)) for t, _ in changed) > 10
    revision = fresh_instance.store.revision()
    paths = ["/browse/", "/browse/model", "/browse/changes", f"/browse/changes?since={revision - len(changed)}",
             "/browse/search?q=pwned", "/browse/search?q=alert+script"]  # fmt: skip
    for node_type, id in changed:
        paths += [f"/browse/types/{node_type}?_size=100", f"/browse/types/{node_type}?_text=pwned",
                  f"/browse/nodes/{id}", f"/browse/nodes/{id}?at={revision - 1}", f"/browse/nodes/{id}/edit",
                  f"/browse/nodes/{id}/diff?from={revision - len(changed) - 1}"]  # fmt: skip
    admin = {"Authorization": "Bearer " + token(fresh_instance, "escaping-admin", "admin")}
    escaped = 0
    async with asgi(fresh_instance) as http:
        for path in paths:
            answer = await http.get(path, headers=admin)
            assert answer.status_code == 200, (path, answer.text[:500])
            assert [r for r in RAW if r in answer.text] == [], path
            escaped += answer.text.count("&lt;script&gt;alert")
        search = await http.get("/browse/search?q=pwned", headers=admin)
    assert escaped > len(changed) * 3  # the payload is on the pages, escaped, not left out
    assert "<mark>pwned</mark>" in search.text  # the snippet's highlight is the page's own markup


async def test_markup_and_script_in_a_proposal_show_escaped_on_the_proposals_pages(fresh_instance: Instance) -> None:
    """What an agent proposes is text from outside: its title, rationale, a proposed value and a comment carry the
    payload, and neither the list nor the proposal's page runs it."""
    operations = [{"op": "patch_node", "id": "team-payments", "properties": {"mission": PAYLOAD}}]
    made = proposals.propose(fresh_instance.store, ADMIN, operations, PAYLOAD, PAYLOAD)
    proposals.comment(fresh_instance.store, ADMIN, made.id, PAYLOAD)
    admin = {"Authorization": "Bearer " + token(fresh_instance, "escaping-admin", "admin")}
    async with asgi(fresh_instance) as http:
        for path in ("/browse/proposals", f"/browse/proposals/{made.id}"):
            answer = await http.get(path, headers=admin)
            assert answer.status_code == 200, (path, answer.text[:500])
            assert [r for r in RAW if r in answer.text] == [], path
            assert answer.text.count("&lt;script&gt;alert") >= (1 if path == "/browse/proposals" else 4), path
