"""search never reveals what the caller may not read: for each principal, its hits, scores, counts, facets and
snippets are exactly those of a store that holds only the nodes it may see (both backends), and MCP, REST and
GraphQL give the direct answer, whose every hit the caller may read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core.index.search import parse_query, search
from core.lang.model import Model, default_seed_path
from core.store import Store, open_store
from core.store.interchange import import_path
from core.values.principal import ANONYMOUS, Principal
from core.values.records import Sight
from tests.generators.conftest import open_copy, token
from tests.test_cross_surface import callers

# words of restricted nodes (svc-card-vault, the security and leadership documents) and of public ones
QUERIES = ("card vault", "security incident", "compensation bands", "payments", "PAN", "access review")
SIGHTS = {
    "anonymous": Sight(frozenset({"public"})),
    "reader": Sight(frozenset({"public", "internal"})),
    "payments": Sight(frozenset({"public", "internal"}), ("group:payments",)),
    "security": Sight(frozenset({"public", "internal"}), ("user:sam", "group:security")),
}


def answer(store: Store, model: Model, sight: Sight | None, text: str) -> dict[str, Any]:
    result = search(store, model, sight, parse_query("search", text), None)
    return {"hits": [(h.node.id, round(h.score, 6), h.property, h.snippet) for h in result.hits],
            "facets": result.facets, "cut": result.cut}  # fmt: skip


@pytest.mark.both_backends
@pytest.mark.parametrize("who", sorted(SIGHTS))
def test_a_callers_search_is_that_of_a_store_holding_only_what_it_sees(
    who: str, seeded_store: Store, model: Model, tmp_path: Path, store_location: Any, request: pytest.FixtureRequest
) -> None:
    sight = SIGHTS[who]
    data = json.loads(default_seed_path().read_text(encoding="utf-8"))
    seen = [n for n in data["nodes"] if sight.sees(n.get("visibility", "internal"), n.get("readers", []))]
    assert len(seen) < len(data["nodes"]), "the sample data should hold nodes this caller may not see"
    ids = {n["id"] for n in seen}
    edges = [e for e in data["edges"] if e["source"] in ids and e["target"] in ids]
    subset = tmp_path / "seen.json"
    subset.write_text(json.dumps({"nodes": seen, "edges": edges}), encoding="utf-8")
    if isinstance(store_location, Path):
        location: Any = tmp_path / "seen.db"
    else:
        location = request.getfixturevalue("postgres_server").new_database()
    only_seen = open_store(location, model)
    try:
        import_path(only_seen, subset, principal="test:seen")
        for text in QUERIES:
            assert answer(seeded_store, model, sight, text) == answer(only_seen, model, None, text), text
    finally:
        only_seen.close()


PRINCIPALS = {
    "reader": Principal("rita", frozenset({"reader"})),
    "grouped": Principal("gus", frozenset({"reader"}), frozenset({"payments"})),
    "anonymous": ANONYMOUS,
}


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("role", sorted(PRINCIPALS))
async def test_search_on_every_surface_holds_only_what_the_caller_may_read(
    role: str, seed_template: Path, tmp_path: Path, anyio_backend: str
) -> None:
    instance = open_copy(seed_template, tmp_path)
    principal = PRINCIPALS[role]
    secret = None if role == "anonymous" else token(instance, principal.name, "reader", *principal.groups)
    admin = Principal("root", frozenset({"admin"}))
    try:
        async with callers(instance, secret) as on:
            for text in QUERIES:
                arguments = {"query": text, "limit": 50, "facets": True}
                direct = instance.dispatcher.call_tool(principal, "test", "search", arguments).value
                everything = instance.dispatcher.call_tool(admin, "test", "search", arguments).value
                hidden = {i["id"] for i in everything["items"]} - {i["id"] for i in direct["items"]}
                readable = [instance.dispatcher.call_tool(principal, "test", "get_node", {"id": i["id"]}).error
                            for i in direct["items"]]  # fmt: skip
                assert readable == [None] * len(direct["items"]), text
                assert sum(direct["facets"].values()) == direct["total"] == len(direct["items"]), text
                assert not hidden & {i["id"] for i in direct["items"]}
                for surface, call in (("mcp", on.on_mcp), ("rest", on.on_rest), ("graphql", on.on_graphql)):
                    status, got = await call("search", arguments)
                    assert status == "ok", (surface, got)
                    assert comparable(got) == comparable(direct), f"{text!r} on {surface} as {role}"
    finally:
        instance.close()


def comparable(value: dict[str, Any]) -> Any:
    """An answer without the fields a surface may shape differently (GraphQL drops nulls of unselected fields)."""
    return {"items": [(i["id"], i["type"], i["name"], i["score"], i["match"]) for i in value["items"]],
            "total": value["total"], "facets": value["facets"], "truncated": value["truncated"]}  # fmt: skip
