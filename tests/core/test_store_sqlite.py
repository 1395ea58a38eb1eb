"""The SQLite store: revisions and the change log, durability settings, opening bad files, model changes."""

from __future__ import annotations

import copy
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from core.errors import ModelError, StoreError, ValidationError
from core.model import Model, parse_model
from core.operations import DeleteEdge, DeleteNode, PutEdge, PutNode
from core.records import Edge, Node
from core.store import NodeQuery, open_store
from core.store.sqlite import SCHEMA_VERSION, SQLiteStore


def person(id: str, **extra: Any) -> Node:
    handle = id.removeprefix("person-")
    properties = {
        "email": f"{handle}@northwind.test",
        "name": handle.title(),
        "handle": handle,
        "title": "Engineer",
        "role": "engineer",
        **extra,
    }
    return Node(id, "Person", properties)


def team(id: str, **extra: Any) -> Node:
    slug = id.removeprefix("team-")
    properties = {"slug": slug, "name": slug.title(), "mission": "Ship things.", "area": "product", **extra}
    return Node(id, "Team", properties)


def member(source: str, target: str) -> PutEdge:
    return PutEdge(Edge("member_of", source, target, {"role": "member"}))


def changed_model(model: Model, change: Any) -> Model:
    document = copy.deepcopy(dict(model.document))
    change(document)
    return parse_model(document, source="changed.schema.json")


def with_optional_team_budget(document: dict[str, Any]) -> None:
    document["x-canon-model"]["version"] = "1.1.0"
    document["$defs"]["Team"]["properties"]["budget"] = {"description": "Yearly budget.", "type": "integer"}


def with_required_team_budget(document: dict[str, Any]) -> None:
    with_optional_team_budget(document)
    document["$defs"]["Team"]["required"].append("budget")


def stored_model_json(path: Path) -> str:
    db = sqlite3.connect(path)
    try:
        return str(db.execute("SELECT value FROM meta WHERE key = 'model'").fetchone()[0])
    finally:
        db.close()


# -- revisions and the change log ----------------------------------------------------------------------------------
def test_a_new_store_records_its_model_as_the_first_change(store: SQLiteStore, model: Model) -> None:
    (change,) = store.changes(0, 10)
    assert (change.revision, change.op, change.kind, change.key) == (1, "model", "model", model.id)
    assert change.before is None
    assert change.after is not None
    assert change.after["version"] == model.version
    assert store.revision() == 1


def test_revisions_are_strictly_increasing_one_per_change(store: SQLiteStore) -> None:
    results = [
        store.commit([PutNode(person("person-a")), PutNode(team("team-a"))], principal="test"),
        store.commit([member("person-a", "team-a")], principal="test"),
        store.commit([PutNode(person("person-a", level=2))], principal="test"),
        store.commit([DeleteNode("team-a", cascade=True)], principal="test"),
    ]
    log = store.changes(0, 1000)
    assert [c.revision for c in log] == list(range(1, len(log) + 1))
    assert [c.revision for r in results for c in r.changes] == list(range(2, len(log) + 1))
    assert [r.revision for r in results] == [3, 4, 5, 7]
    assert store.revision() == 7
    node = store.node("person-a")
    assert node is not None
    assert node.revision == 5


def test_revisions_continue_across_connections_to_one_file(store: SQLiteStore, store_path: Path, model: Model) -> None:
    other = SQLiteStore.open(store_path, model)
    try:
        first = store.commit([PutNode(team("team-a"))], principal="one")
        second = other.commit([PutNode(team("team-b"))], principal="two")
        third = store.commit([PutNode(team("team-c"))], principal="one")
    finally:
        other.close()
    assert [first.revision, second.revision, third.revision] == [2, 3, 4]
    assert [c.principal for c in store.changes(1, 10)] == ["one", "two", "one"]


def test_changes_pages_through_the_log_in_order(seeded_store: SQLiteStore) -> None:
    everything = seeded_store.changes(0, 1_000_000)
    pages, since = [], 0
    while page := seeded_store.changes(since, 250):
        assert len(page) <= 250
        pages.append(page)
        since = page[-1].revision
    assert [c for page in pages for c in page] == everything
    assert len(pages) == -(-len(everything) // 250)
    assert [c.revision for c in everything] == list(range(1, seeded_store.revision() + 1))
    assert seeded_store.changes(seeded_store.revision(), 10) == []


def test_each_change_carries_before_and_after_json(store: SQLiteStore) -> None:
    store.commit([PutNode(team("team-a"))], principal="creator")
    store.commit([PutNode(team("team-a", oncall=True))], principal="editor")
    store.commit([DeleteNode("team-a")], principal="remover")
    created, updated, deleted = store.changes(1, 10)

    assert (created.op, created.kind, created.key, created.type) == ("put", "node", "team-a", "Team")
    assert created.before is None
    assert created.after is not None
    assert created.after["properties"]["slug"] == "a"
    assert created.after["revision"] == created.revision

    assert updated.op == "put"
    assert updated.before == created.after
    assert updated.after is not None
    assert updated.after["properties"]["oncall"] is True
    assert updated.after["updated_by"] == "editor"

    assert (deleted.op, deleted.principal) == ("delete", "remover")
    assert deleted.before == updated.after
    assert deleted.after is None


def test_edge_changes_are_keyed_by_type_source_and_target(store: SQLiteStore) -> None:
    store.commit([PutNode(person("person-a")), PutNode(team("team-a")), member("person-a", "team-a")], principal="t")
    store.commit([DeleteEdge("member_of", "person-a", "team-a")], principal="t")
    put, delete = [c for c in store.changes(0, 10) if c.kind == "edge"]
    assert put.key == delete.key == "member_of:person-a->team-a"
    assert (put.before, delete.after) == (None, None)
    assert put.after == delete.before


def test_committed_data_survives_closing_and_reopening(store_path: Path, model: Model) -> None:
    first = SQLiteStore.open(store_path, model)
    first.commit([PutNode(team("team-a"))], principal="test")
    first.close()
    again = open_store(store_path, model)
    try:
        node = again.node("team-a")
        assert node is not None
        assert node.properties["slug"] == "a"
        assert again.revision() == 2  # reopening with the same model records nothing
    finally:
        again.close()


# -- durability settings -------------------------------------------------------------------------------------------
def test_the_store_is_in_wal_mode(store: SQLiteStore, store_path: Path) -> None:
    db = sqlite3.connect(store_path)
    try:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        db.close()


def test_the_store_connection_syncs_fully(store: SQLiteStore) -> None:
    full = 2
    db = store._db  # pyright: ignore[reportPrivateUsage]
    assert db.execute("PRAGMA synchronous").fetchone()[0] == full


# -- opening -------------------------------------------------------------------------------------------------------
def test_opening_a_file_that_is_not_sqlite_is_a_store_error(tmp_path: Path, model: Model) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not a database\n" * 200)
    with pytest.raises(StoreError) as caught:
        SQLiteStore.open(path, model)
    assert caught.value.path == str(path)
    assert path.read_bytes() == b"these are my notes, not a database\n" * 200


def test_opening_a_directory_is_a_store_error(tmp_path: Path, model: Model) -> None:
    with pytest.raises(StoreError) as caught:
        SQLiteStore.open(tmp_path, model)
    assert caught.value.path == str(tmp_path)


def test_opening_a_store_of_a_newer_schema_version_is_a_store_error(store_path: Path, model: Model) -> None:
    SQLiteStore.open(store_path, model).close()
    db = sqlite3.connect(store_path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(StoreError) as caught:
        SQLiteStore.open(store_path, model)
    assert caught.value.path == str(store_path)


def test_opening_creates_missing_parent_directories(tmp_path: Path, model: Model) -> None:
    path = tmp_path / "a" / "b" / "canon.db"
    opened = SQLiteStore.open(path, model)
    opened.close()
    assert path.is_file()


# -- model changes -------------------------------------------------------------------------------------------------
def test_opening_with_a_compatible_model_records_a_model_change(seeded_store: SQLiteStore, model: Model) -> None:
    path = Path(seeded_store.location)
    before = seeded_store.revision()
    newer = changed_model(model, with_optional_team_budget)
    reopened = SQLiteStore.open(path, newer, principal="admin")
    try:
        assert reopened.revision() == before + 1
        (change,) = reopened.changes(before, 10)
        assert (change.op, change.kind, change.key, change.principal) == ("model", "model", model.id, "admin")
        assert change.before is not None
        assert change.before["version"] == "1.0.0"
        assert change.after is not None
        assert change.after["version"] == "1.1.0"
        assert reopened.stored_model().digest == newer.digest
        assert reopened.model is newer
        assert reopened.stats().nodes == seeded_store.stats().nodes
    finally:
        reopened.close()


def test_opening_with_an_incompatible_model_is_a_model_error_and_changes_nothing(
    seeded_store: SQLiteStore, model: Model
) -> None:
    path = Path(seeded_store.location)
    before_revision, before_stats, before_model = seeded_store.revision(), seeded_store.stats(), stored_model_json(path)
    with pytest.raises(ModelError) as caught:
        SQLiteStore.open(path, changed_model(model, with_required_team_budget))
    assert caught.value.problems
    assert {p.file for p in caught.value.problems} == {str(path)}
    assert any(p.pointer.endswith("/properties") for p in caught.value.problems)  # 'budget' is required
    assert stored_model_json(path) == before_model == model.canonical_json
    assert seeded_store.revision() == before_revision
    assert seeded_store.stats() == before_stats
    assert seeded_store.stored_model().digest == model.digest


def test_an_incompatible_model_error_names_each_stored_record_it_refuses(
    seeded_store: SQLiteStore, model: Model
) -> None:
    """One problem per stored record the new model refuses, saying which record it is, and no follow-on noise."""
    teams = sorted(n.id for n in seeded_store.iter_nodes("Team"))
    with pytest.raises(ModelError) as caught:
        SQLiteStore.open(Path(seeded_store.location), changed_model(model, with_required_team_budget))
    problems = caught.value.problems
    assert len(problems) == len(teams)
    for team_id in teams:
        assert any(team_id in p.pointer or team_id in p.message for p in problems), team_id


def test_opening_with_a_model_that_drops_a_used_type_is_a_model_error(seeded_store: SQLiteStore, model: Model) -> None:
    def without_glossary(document: dict[str, Any]) -> None:
        del document["$defs"]["GlossaryTerm"]
        del document["$defs"]["defines"]
        del document["$defs"]["related_to"]

    path = Path(seeded_store.location)
    before = seeded_store.revision()
    with pytest.raises(ModelError):
        SQLiteStore.open(path, changed_model(model, without_glossary))
    assert seeded_store.revision() == before


def test_after_a_key_change_the_new_key_is_unique(store: SQLiteStore, model: Model) -> None:
    """A model that changes a type's key property must make uniqueness follow the new key for stored nodes too."""
    store.commit([PutNode(team("team-a"))], principal="test")  # slug 'a', name 'A'

    def key_is_name(document: dict[str, Any]) -> None:
        document["$defs"]["Team"]["x-canon-node"]["key"] = "name"

    reopened = SQLiteStore.open(Path(store.location), changed_model(model, key_is_name))
    try:
        # a different team may now use the old team's slug as its name...
        reopened.commit([PutNode(team("team-c", name="a"))], principal="test")
        # ...but not the old team's name
        with pytest.raises(ValidationError) as caught:
            reopened.commit([PutNode(team("team-b", name="A"))], principal="test")
        assert [p.pointer for p in caught.value.problems] == ["/0/properties/name"]
    finally:
        reopened.close()


T = TypeVar("T")


# -- reads beside the connection ----------------------------------------------------------------------------------
def in_another_thread(read: Callable[[], T]) -> T:
    """`read()` run in another thread, which must finish within 5 s (the caller may hold the store's connection)."""
    results: list[T] = []
    thread = threading.Thread(target=lambda: results.append(read()))
    thread.start()
    thread.join(5)
    assert not thread.is_alive(), "the read waited for the connection another thread holds"
    return results[0]


def test_a_read_proceeds_while_another_thread_holds_the_connection_and_sees_what_it_committed(
    store: SQLiteStore,
) -> None:
    text = NodeQuery("Team", text="ship", text_fields={"Team": ("mission",)})
    with store.uncontended() as free:  # this thread holds the connection, as a walk's read or a commit would
        assert free
        assert in_another_thread(lambda: store.node("team-a")) is None  # on a read connection, kept open after
        revision = store.commit([PutNode(team("team-a"))], principal="test").revision  # on the main connection
        assert in_another_thread(lambda: store.node("team-a")) is not None  # no snapshot left from the first read
        assert in_another_thread(store.revision) == revision
        assert in_another_thread(lambda: store.edge("member_of", "person-a", "team-a")) is None
        found, total = in_another_thread(lambda: store.find_nodes(text, after=None, limit=5))
        assert ([n.id for n in found], total) == (["team-a"], 1)


def test_an_uncontended_block_beside_a_held_connection_reads_one_state_until_it_ends(store: SQLiteStore) -> None:
    seen: list[object] = []
    reading, committed = threading.Event(), threading.Event()

    def read() -> None:
        with store.uncontended() as free:
            seen.append(free)
            seen.append(store.revision())
            reading.set()
            assert committed.wait(5)
            seen.append((store.revision(), store.node("team-a")))  # the block's state, not the later commit
        seen.append(store.revision())

    with store.uncontended():
        thread = threading.Thread(target=read)
        thread.start()
        assert reading.wait(5)
        revision = store.commit([PutNode(team("team-a"))], principal="test").revision
        committed.set()
        thread.join(5)
        assert not thread.is_alive()
    assert seen == [True, revision - 1, (revision - 1, None), revision]


# -- change detection, integrity, stats ----------------------------------------------------------------------------
def test_changed_is_false_after_our_own_commit(store: SQLiteStore) -> None:
    store.changed()
    store.commit([PutNode(team("team-a"))], principal="test")
    assert store.changed() is False


def test_changed_is_true_after_another_connection_commits(store: SQLiteStore, store_path: Path, model: Model) -> None:
    other = SQLiteStore.open(store_path, model)
    try:
        store.changed()  # settle whatever opening the other connection did
        assert store.changed() is False
        other.commit([PutNode(team("team-a"))], principal="other")
        assert store.changed() is True
        assert store.changed() is False  # reported once per change
        assert store.node("team-a") is not None
        assert other.changed() is False
    finally:
        other.close()


def test_integrity_check_is_ok(seeded_store: SQLiteStore) -> None:
    assert seeded_store.integrity_check() == "ok"


def test_stats_count_nodes_and_edges_by_type(store: SQLiteStore) -> None:
    store.commit(
        [
            PutNode(person("person-a")),
            PutNode(person("person-b")),
            PutNode(team("team-a")),
            member("person-a", "team-a"),
            member("person-b", "team-a"),
            PutEdge(Edge("reports_to", "person-a", "person-b")),
        ],
        principal="test",
    )
    stats = store.stats()
    assert stats.nodes_by_type == {"Person": 2, "Team": 1}
    assert stats.edges_by_type == {"member_of": 2, "reports_to": 1}
    assert (stats.nodes, stats.edges) == (3, 3)
    assert stats.changes == 7  # the model, then six records
    assert stats.revision == store.revision() == 7
    assert stats.size_bytes > 0


def test_iteration_lists_every_node_and_edge_in_order(seeded_store: SQLiteStore) -> None:
    stats = seeded_store.stats()
    nodes = list(seeded_store.iter_nodes())
    edges = list(seeded_store.iter_edges())
    assert len(nodes) == stats.nodes
    assert len(edges) == stats.edges
    assert [n.id for n in nodes] == sorted(n.id for n in nodes)
    assert len(list(seeded_store.iter_nodes("Person"))) == stats.nodes_by_type["Person"]
    assert sorted(seeded_store.iter_topology()) == sorted((e.type, e.source, e.target) for e in edges)
    some = [n.id for n in nodes[:3]]
    assert set(seeded_store.nodes([*some, "no-such-node"])) == set(some)


def test_an_equality_on_the_key_property_is_found_through_the_key_index(seeded_store: SQLiteStore) -> None:
    from core.conditions import Condition
    from core.store import NodeQuery
    from core.store.sqlite import _node_filter

    email = "ingrid.halvorsen@northwind.example"

    def ids(*conditions: Condition) -> list[str]:
        nodes, total = seeded_store.find_nodes(NodeQuery("Person", conditions), after=None, limit=500)
        assert total == len(nodes)
        return [n.id for n in nodes]

    assert ids(Condition("email", "eq", email)) == ["person-ingrid-halvorsen"]
    assert ids(Condition("email", "eq", email.upper())) == []  # still exact: no case folding
    assert ids(Condition("email", "in", [email, "nobody@example.org"])) == ["person-ingrid-halvorsen"]
    assert ids(Condition("email", "in", [])) == []
    assert ids(Condition("email", "ne", email))[:1] != ["person-ingrid-halvorsen"]

    where, params = _node_filter(NodeQuery("Person", (Condition("email", "eq", email),)), "email")
    plan = seeded_store._read(f"EXPLAIN QUERY PLAN SELECT id FROM nodes WHERE {where}", params)
    assert "nodes_type_key" in " ".join(str(row) for row in plan)
    where, params = _node_filter(NodeQuery("Person", (Condition("name", "eq", "Ingrid Halvorsen"),)), "email")
    assert "key IN" not in where  # other properties are not the key
