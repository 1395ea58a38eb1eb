"""The trigram text index answers exactly what the plain scan answers, through writes, deletes and model changes.

`find_nodes` text search is a case-insensitive substring match over each node type's text properties. From
three characters on, candidates come from the index (schema v3); the oracle here is a direct Python scan. The
tests of what the index answers run on both backends (PostgreSQL: the `search` column and pg_trgm); those that read
SQLite's FTS5 tables or query plans are SQLite's alone.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from core.lang.model import Model, parse_model, property_text
from core.store import NodeQuery, Store, open_store
from core.store.sqlite import SQLiteStore
from core.values.operations import DeleteNode, PutNode
from core.values.records import Node

SPECIAL = ["pay", "PAY", "Payments", "*", "a*b", "?ay", "[pa", "50%", "a_b", "ß", "straße", "ÉCO", "\n", "ts\nsvc",
           "zzzz-not-there", "e", "ay", "é"]  # fmt: skip


def _fields(model: Model) -> dict[str, tuple[str, ...]]:
    return {name: t.text for name, t in model.node_types.items()}


def _oracle(store: Store, model: Model, needle: str, type_: str | None = None) -> list[str]:
    found: list[str] = []
    for node in store.iter_nodes(type_):
        values = [property_text(node.properties.get(f)) for f in model.node_types[node.type].text]
        if any(needle.lower() in v.lower() for v in values):
            found.append(node.id)
    return sorted(found)


def _search(store: Store, model: Model, needle: str, type_: str | None = None) -> list[str]:
    nodes, total = store.find_nodes(NodeQuery(type_, text=needle, text_fields=_fields(model)), after=None,
                                    limit=100_000)  # fmt: skip
    assert total == len(nodes)
    return [n.id for n in nodes]


def _needles(store: Store, model: Model, count: int, seed: int) -> list[str]:
    """Substrings of real text (so most needles match something), of 1 to 9 characters, plus the special ones."""
    rng = random.Random(seed)
    texts = [v for n in store.iter_nodes() for f in model.node_types[n.type].text
             if isinstance(v := n.properties.get(f), str) and v]  # fmt: skip
    needles = list(SPECIAL)
    for _ in range(count):
        text = rng.choice(texts)
        start = rng.randrange(len(text))
        needles.append(text[start : start + rng.randint(1, 9)])
    return needles


@pytest.mark.both_backends
def test_the_index_agrees_with_a_scan_for_every_needle(seeded_store: Store, model: Model) -> None:
    for needle in _needles(seeded_store, model, 300, seed=1):
        assert _search(seeded_store, model, needle) == _oracle(seeded_store, model, needle), needle
    for needle in ("pay", "ing", "er"):
        for type_ in model.node_types:
            assert _search(seeded_store, model, needle, type_) == _oracle(seeded_store, model, needle, type_)


@pytest.mark.both_backends
def test_the_index_follows_puts_replacements_and_deletes(seeded_store: Store, model: Model) -> None:
    team = seeded_store.node("team-payments")
    assert team is not None
    renamed = Node(team.id, team.type, {**team.properties, "name": "Quokka Wrangling", "mission": "Straße [*] 100%"},
                   team.visibility, team.readers)  # fmt: skip
    seeded_store.commit([PutNode(renamed)], principal="test")
    assert _search(seeded_store, model, "quokka") == ["team-payments"]
    assert _search(seeded_store, model, "straße [*] 100%") == ["team-payments"]
    assert "team-payments" not in _search(seeded_store, model, "payments processing")

    edges = [e for e in seeded_store.iter_edges() if "team-payments" in (e.source, e.target)]
    assert edges  # the delete below cascades
    seeded_store.commit([DeleteNode("team-payments", cascade=True)], principal="test")
    assert _search(seeded_store, model, "quokka") == []
    for needle in _needles(seeded_store, model, 100, seed=2):
        assert _search(seeded_store, model, needle) == _oracle(seeded_store, model, needle), needle


@pytest.mark.both_backends
def test_one_batch_that_puts_a_node_twice_and_deletes_and_recreates_another_indexes_what_it_leaves(
    seeded_store: Store, model: Model
) -> None:
    team = seeded_store.node("team-payments")
    assert team is not None

    def named(node: Node, name: str, id: str | None = None) -> PutNode:
        properties = {**node.properties, "name": name, **({"slug": id} if id is not None else {})}
        return PutNode(Node(id or node.id, node.type, properties, node.visibility, node.readers))

    fresh = Node("team-fresh", "Team", {"slug": "team-fresh", "name": "Wombat Herding", "mission": "Fresh things.",
                                        "area": "product"})  # fmt: skip
    seeded_store.commit([named(team, "Quokka Wrangling"), named(team, "Numbat Counting"), PutNode(fresh),
                         DeleteNode("team-fresh"), named(fresh, "Dingo Dancing", "team-fresh"),
                         named(fresh, "Wombat Herding", "team-newer")], principal="test")  # fmt: skip
    assert _search(seeded_store, model, "quokka") == []
    assert _search(seeded_store, model, "numbat") == ["team-payments"]
    assert _search(seeded_store, model, "dingo") == ["team-fresh"]
    assert _search(seeded_store, model, "wombat") == ["team-newer"]
    for needle in _needles(seeded_store, model, 100, seed=3):
        assert _search(seeded_store, model, needle) == _oracle(seeded_store, model, needle), needle


@pytest.mark.both_backends
def test_a_model_with_other_text_properties_rebuilds_the_index(
    seeded_store: Store, model: Model, store_location: str | Path
) -> None:
    document = model.document
    version = {**document["x-canon-model"], "version": "1.1.0"}  # a changed model is a new version
    changed = {**document, "x-canon-model": version, "$defs": {**document["$defs"], "Team": {
        **document["$defs"]["Team"],
        "x-canon-node": {**document["$defs"]["Team"]["x-canon-node"], "text": ["slug"]},
    }}}  # fmt: skip
    other = parse_model(changed, source="test")
    seeded_store.apply_model(other, principal="test")
    seeded_store.close()

    store = open_store(store_location, other)
    try:
        assert _search(store, other, "payments", "Team") == ["team-payments"]  # its slug
        assert _search(store, other, "processing", "Team") == []  # words of its mission are no longer text
        for needle in _needles(store, other, 100, seed=3):
            assert _search(store, other, needle) == _oracle(store, other, needle), needle
    finally:
        store.close()


def test_a_store_from_before_the_index_gets_it_when_opened(seeded_store: SQLiteStore, model: Model,
                                                           store_path: Path) -> None:  # fmt: skip
    seeded_store.close()
    db = sqlite3.connect(store_path)
    db.execute("DELETE FROM node_text")
    db.execute("DELETE FROM node_text_ids")
    db.execute("DELETE FROM meta WHERE key = 'text_index'")  # as a v2 store migrated to v3 has it
    db.commit()
    db.close()

    store = SQLiteStore.open(store_path, model)
    try:
        for needle in _needles(store, model, 100, seed=4):
            assert _search(store, model, needle) == _oracle(store, model, needle), needle
    finally:
        store.close()


@pytest.mark.both_backends
def test_a_query_for_other_text_properties_than_the_index_holds_checks_those_properties(
    seeded_store: Store, model: Model
) -> None:
    only_slugs = {"Team": ("slug",)}  # the index holds every text property of every type
    nodes, _ = seeded_store.find_nodes(NodeQuery(text="processing", text_fields=only_slugs), after=None, limit=100)
    assert nodes == []  # in Team missions, not slugs
    slugs = {n.id: str(n.properties["slug"]).lower() for n in seeded_store.iter_nodes("Team")}
    for needle in _needles(seeded_store, model, 100, seed=5):
        nodes, _ = seeded_store.find_nodes(NodeQuery(text=needle, text_fields=only_slugs), after=None, limit=100_000)
        assert [n.id for n in nodes] == sorted(i for i, slug in slugs.items() if needle.lower() in slug), needle


def test_a_bulk_write_leaves_the_index_in_one_segment(seeded_store: SQLiteStore) -> None:
    """Merged after the import: each trigram a search looks up is one list to read, not one per segment."""
    db = seeded_store._db  # pyright: ignore[reportPrivateUsage]
    levels = db.execute("SELECT count(*) FROM node_text_idx WHERE segid > 0 GROUP BY segid").fetchall()
    assert len(levels) == 1


@pytest.mark.parametrize("needle", ["pay", "team"])
def test_a_long_needle_is_answered_from_the_index(seeded_store: SQLiteStore, needle: str) -> None:
    from core.store.sql import node_filter
    from core.store.sqlite_sql import DIALECT

    where, params = node_filter(DIALECT, NodeQuery(text=needle, text_fields={"Team": ("name",)}), None, indexed=False)
    plan = seeded_store._read(f"EXPLAIN QUERY PLAN SELECT id FROM nodes WHERE {where}", params)  # pyright: ignore[reportPrivateUsage]
    assert any("node_text" in str(row) for row in plan)


def test_a_typed_search_starts_from_the_text_index_not_from_every_node_of_the_type(
    seeded_store: SQLiteStore, model: Model
) -> None:
    from core.store.sql import node_filter
    from core.store.sqlite_sql import DIALECT

    query = NodeQuery("Person", text="payments", text_fields=_fields(model))
    where, params = node_filter(DIALECT, query, "email", indexed=True)
    sql = f"EXPLAIN QUERY PLAN SELECT id FROM nodes WHERE {where} AND id > ? ORDER BY id LIMIT ?"
    plan = [str(row[3]) for row in seeded_store._read(sql, [*params, "", 21])]  # pyright: ignore[reportPrivateUsage]
    assert "nodes_type" not in plan[0], plan  # not a walk over every Person in id order
    assert any("node_text" in step for step in plan)
