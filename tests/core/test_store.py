"""The store on every backend (SQLite and PostgreSQL): revisions and the change log, reopening, model changes, change
detection, stats, concurrent writers, the audit log and copying between backends."""

from __future__ import annotations

import copy
import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from core.lang.model import Model, parse_model
from core.store import Store, open_existing_store, open_store
from core.store.sql import SQLStore
from core.values.audit import AuditQuery, AuditRecord
from core.values.errors import ModelError, ValidationError
from core.values.operations import DeleteEdge, DeleteNode, PutEdge, PutNode
from core.values.records import Edge, Node

pytestmark = pytest.mark.both_backends


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


def test_a_new_store_records_its_model_as_the_first_change(store: Store, model: Model) -> None:
    (change,) = store.changes(0, 10)
    assert (change.revision, change.op, change.kind, change.key) == (1, "model", "model", model.id)
    assert change.before is None
    assert change.after is not None
    assert change.after["version"] == model.version
    assert store.revision() == 1


def test_a_store_that_records_no_model_yet_says_so(store_location: str | Path, model: Model) -> None:
    """A store made for a copy records its model only with the copy: until then both backends name the gap, in
    the same error."""
    from core.store.postgres import PostgresStore
    from core.store.sqlite import SQLiteStore
    from core.values.errors import StoreError

    if isinstance(store_location, Path):
        empty: Store = SQLiteStore.open_empty(store_location, model)
    else:
        empty = PostgresStore.open_empty(store_location, model)
    try:
        with pytest.raises(StoreError, match="records no model"):
            empty.stored_model()
        assert empty.model_history() == []
        assert empty.revision() == 0
    finally:
        empty.close()


def test_a_cascade_deletes_an_edge_from_a_node_to_itself_once(store: Store) -> None:
    """The write transaction's view lists every edge at a node once, a loop too (found from both ends)."""
    properties = {"name": "service-loop", "description": "Calls itself.", "lifecycle": "production", "tier": 1}
    loop = Edge("depends_on", "service-loop", "service-loop", {"criticality": "soft"})
    store.commit([PutNode(Node("service-loop", "Service", properties)), PutEdge(loop)], principal="test")
    assert isinstance(store, SQLStore)
    with store._transaction() as db:  # pyright: ignore[reportPrivateUsage]
        assert [(e.type, e.source, e.target) for e in store._view(db).incident_edges("service-loop")] == [  # pyright: ignore[reportPrivateUsage]
            ("depends_on", "service-loop", "service-loop")
        ]
    deleted = store.commit([DeleteNode("service-loop", cascade=True)], principal="test")
    assert [(c.kind, c.key) for c in deleted.changes] == [
        ("edge", "depends_on:service-loop->service-loop"),
        ("node", "service-loop"),
    ]
    assert store.node("service-loop") is None
    assert list(store.iter_edges()) == []


def test_revisions_are_strictly_increasing_one_per_change(store: Store) -> None:
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


def test_revisions_continue_across_stores_opened_on_one_location(
    store: Store, store_location: str | Path, model: Model
) -> None:
    other = open_store(store_location, model)
    try:
        first = store.commit([PutNode(team("team-a"))], principal="one")
        second = other.commit([PutNode(team("team-b"))], principal="two")
        third = store.commit([PutNode(team("team-c"))], principal="one")
    finally:
        other.close()
    assert [first.revision, second.revision, third.revision] == [2, 3, 4]
    assert [c.principal for c in store.changes(1, 10)] == ["one", "two", "one"]


def test_changes_pages_through_the_log_in_order(seeded_store: Store) -> None:
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


def test_each_change_carries_before_and_after_json(store: Store) -> None:
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


def test_edge_changes_are_keyed_by_type_source_and_target(store: Store) -> None:
    store.commit([PutNode(person("person-a")), PutNode(team("team-a")), member("person-a", "team-a")], principal="t")
    store.commit([DeleteEdge("member_of", "person-a", "team-a")], principal="t")
    put, delete = [c for c in store.changes(0, 10) if c.kind == "edge"]
    assert put.key == delete.key == "member_of:person-a->team-a"
    assert (put.before, delete.after) == (None, None)
    assert put.after == delete.before


def test_committed_data_survives_closing_and_reopening(store_location: str | Path, model: Model) -> None:
    first = open_store(store_location, model)
    first.commit([PutNode(team("team-a"))], principal="test")
    first.close()
    again = open_store(store_location, model)
    try:
        node = again.node("team-a")
        assert node is not None
        assert node.properties["slug"] == "a"
        assert again.revision() == 2  # reopening with the same model records nothing
    finally:
        again.close()


def test_applying_a_compatible_model_records_a_model_change(
    seeded_store: Store, store_location: str | Path, model: Model
) -> None:
    before = seeded_store.revision()
    newer = changed_model(model, with_optional_team_budget)
    assert seeded_store.apply_model(newer, principal="admin") == before + 1
    reopened = open_store(store_location, newer)
    try:
        assert reopened.revision() == before + 1
        (change,) = reopened.changes(before, 10)
        assert (change.op, change.kind, change.key, change.principal) == ("model", "model", model.id, "admin")
        assert change.before is not None
        assert change.before["version"] == "1.0.0"
        assert change.after is not None
        assert change.after["version"] == "1.1.0"
        assert reopened.stored_model().digest == newer.digest
        assert seeded_store.model is newer
        assert reopened.stats().nodes == seeded_store.stats().nodes
    finally:
        reopened.close()


def test_opening_with_a_differing_model_is_a_model_error_and_changes_nothing(
    seeded_store: Store, store_location: str | Path, model: Model
) -> None:
    before = seeded_store.revision()
    with pytest.raises(ModelError) as caught:
        open_store(store_location, changed_model(model, with_optional_team_budget))
    assert "canon model apply" in str(caught.value)  # the message is the feature: it says how to apply it
    assert seeded_store.revision() == before
    assert seeded_store.stored_model().digest == model.digest


def test_opening_with_an_older_model_of_the_history_opens_on_the_store_s_model_and_warns_once(
    seeded_store: Store, store_location: str | Path, model: Model, caplog: pytest.LogCaptureFixture
) -> None:
    """The restart after an apply: the configured file is still the model the store started from."""
    newer = changed_model(model, with_optional_team_budget)
    applied = seeded_store.apply_model(newer, principal="admin")
    with caplog.at_level(logging.WARNING, logger="canon.store"):
        reopened = open_store(store_location, model)
    try:
        assert reopened.model.digest == newer.digest
        assert "budget" in reopened.model.node_types["Team"].properties
        assert reopened.revision() == applied  # opening changed nothing
        assert reopened.stored_model().digest == newer.digest
        warnings = [r.getMessage() for r in caplog.records if r.name == "canon.store" and r.levelno >= logging.WARNING]
        assert len(warnings) == 1, warnings
        assert model.source in warnings[0]
        assert f"canon model show > {model.source}" in warnings[0]  # the message is the feature: how to update
        assert "[model] path" in warnings[0]
    finally:
        reopened.close()


def _other_model(document: dict[str, Any]) -> None:
    document["$id"] = "https://example.com/other.schema.json"


@pytest.mark.parametrize(("change", "words"), [(with_optional_team_budget, "is newer"), (_other_model, "neither")])
def test_opening_with_a_newer_or_an_unknown_model_file_is_refused_naming_both_fixes(
    seeded_store: Store, store_location: str | Path, model: Model, change: Any, words: str
) -> None:
    before = seeded_store.revision()
    with pytest.raises(ModelError) as caught:
        open_store(store_location, changed_model(model, change))
    message = str(caught.value)
    assert words in message
    assert "canon model apply changed.schema.json" in message
    assert "canon model show > changed.schema.json" in message
    assert seeded_store.revision() == before


def test_applying_an_incompatible_model_is_a_model_error_and_changes_nothing(
    seeded_store: Store, store_location: str | Path, model: Model
) -> None:
    before_revision, before_stats = seeded_store.revision(), seeded_store.stats()
    before_model = seeded_store.stored_model().canonical_json
    with pytest.raises(ModelError) as caught:
        seeded_store.apply_model(changed_model(model, with_required_team_budget), principal="admin")
    assert caught.value.problems
    assert {p.file for p in caught.value.problems} == {seeded_store.location}
    assert any(p.pointer.endswith("/properties") for p in caught.value.problems)  # 'budget' is required
    assert seeded_store.stored_model().canonical_json == before_model == model.canonical_json
    assert seeded_store.revision() == before_revision
    assert seeded_store.stats() == before_stats
    assert seeded_store.stored_model().digest == model.digest


def test_an_incompatible_model_error_names_each_stored_record_it_refuses(
    seeded_store: Store, store_location: str | Path, model: Model
) -> None:
    """One problem per stored record the new model refuses, saying which record it is, and no follow-on noise."""
    teams = sorted(n.id for n in seeded_store.iter_nodes("Team"))
    with pytest.raises(ModelError) as caught:
        seeded_store.apply_model(changed_model(model, with_required_team_budget), principal="admin")
    problems = caught.value.problems
    assert len(problems) == len(teams)
    for team_id in teams:
        assert any(team_id in p.pointer or team_id in p.message for p in problems), team_id


def test_applying_a_model_that_drops_a_used_type_is_a_model_error(
    seeded_store: Store, store_location: str | Path, model: Model
) -> None:
    def without_glossary(document: dict[str, Any]) -> None:
        document["x-canon-model"]["version"] = "2.0.0"
        del document["$defs"]["GlossaryTerm"]
        del document["$defs"]["defines"]
        del document["$defs"]["related_to"]

    before = seeded_store.revision()
    with pytest.raises(ModelError):
        seeded_store.apply_model(changed_model(model, without_glossary), principal="admin")
    assert seeded_store.revision() == before


@pytest.mark.parametrize("version", ["1.0.0", "0.9.9"])
def test_a_changed_model_with_an_equal_or_lower_version_is_refused_and_changes_nothing(
    seeded_store: Store, store_location: str | Path, model: Model, version: str
) -> None:
    def same_version_new_property(document: dict[str, Any]) -> None:
        with_optional_team_budget(document)  # a change every stored record fits
        document["x-canon-model"]["version"] = version

    before = seeded_store.revision()
    with pytest.raises(ModelError) as caught:
        seeded_store.apply_model(changed_model(model, same_version_new_property), principal="admin")
    assert [p.pointer for p in caught.value.problems] == ["/x-canon-model/version"]
    assert seeded_store.revision() == before
    assert seeded_store.stored_model().digest == model.digest


def test_a_store_opened_read_only_refuses_every_write(seeded_store: Store, store_location: str | Path) -> None:
    reader = open_existing_store(store_location, read_only=True)
    try:
        assert reader.stats() == seeded_store.stats()
        with pytest.raises(Exception, match=r"(?i)read"):  # the backend's own error: none canon could skip
            reader.commit([PutNode(team("team-new"))], principal="test")
    finally:
        reader.close()
    assert seeded_store.node("team-new") is None


def test_after_a_key_change_the_new_key_is_unique(store: Store, store_location: str | Path, model: Model) -> None:
    """A model that changes a type's key property must make uniqueness follow the new key for stored nodes too."""
    store.commit([PutNode(team("team-a"))], principal="test")  # slug 'a', name 'A'

    def key_is_name(document: dict[str, Any]) -> None:
        document["x-canon-model"]["version"] = "1.1.0"
        document["$defs"]["Team"]["x-canon-node"]["key"] = "name"

    store.apply_model(changed_model(model, key_is_name), principal="admin")
    # a different team may now use the old team's slug as its name...
    store.commit([PutNode(team("team-c", name="a"))], principal="test")
    # ...but not the old team's name
    with pytest.raises(ValidationError) as caught:
        store.commit([PutNode(team("team-b", name="A"))], principal="test")
    assert [p.pointer for p in caught.value.problems] == ["/0/properties/name"]


def test_a_key_holding_the_nul_character_is_refused_alike_on_every_backend(store: Store) -> None:
    """PostgreSQL text cannot hold NUL, so neither store takes it in a key (a property elsewhere keeps it)."""
    with pytest.raises(ValidationError) as caught:
        store.commit([PutNode(Node("term-nul", "GlossaryTerm", {"term": "a\x00b", "definition": "d"}))], principal="t")
    assert [p.pointer for p in caught.value.problems] == ["/0/properties/term"]

    store.commit([PutNode(Node("term-nul", "GlossaryTerm", {"term": "nul", "definition": "a\x00b"}))], principal="t")
    stored = store.node("term-nul")
    assert stored is not None
    assert stored.properties["definition"] == "a\x00b"


def test_changed_is_false_after_our_own_commit(store: Store) -> None:
    store.changed()
    store.commit([PutNode(team("team-a"))], principal="test")
    assert store.changed() is False


def test_changed_is_true_after_another_connection_commits(
    store: Store, store_location: str | Path, model: Model
) -> None:
    other = open_store(store_location, model)
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


def test_stats_count_nodes_and_edges_by_type(store: Store) -> None:
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


def test_iteration_lists_every_node_and_edge_in_order(seeded_store: Store) -> None:
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


# -- concurrent writers, the audit log -----------------------------------------------------------------------------
def test_concurrent_writers_get_gap_free_totally_ordered_revisions(store_location: str | Path, model: Model) -> None:
    """Four stores on one location (as four processes would be), each committing from its own thread: every
    change gets its own revision, with no gap, and each writer's changes come in the order it made them."""
    stores = [open_store(store_location, model) for _ in range(4)]
    errors: list[BaseException] = []

    def write(store: Store, writer: int) -> None:
        try:
            for i in range(15):
                store.commit([PutNode(team(f"team-w{writer}-{i}"))], principal=f"writer-{writer}")
        except Exception as exc:  # noqa: BLE001  (reported by the assertion below)
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(s, n)) for n, s in enumerate(stores)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not errors
        log = stores[0].changes(0, 1000)
        assert [c.revision for c in log] == list(range(1, 62))
        for writer in range(4):
            mine = [c.key for c in log if c.principal == f"writer-{writer}"]
            assert mine == [f"team-w{writer}-{i}" for i in range(15)]
    finally:
        for s in stores:
            s.close()


def test_a_stale_expected_revision_is_a_conflict_on_every_backend(store: Store) -> None:
    from core.values.errors import ConflictError

    first = store.commit([PutNode(team("team-a"))], principal="test").revision
    store.commit([PutNode(team("team-a", oncall=True))], principal="test")
    with pytest.raises(ConflictError):
        store.commit([PutNode(team("team-a"), expected_revision=first)], principal="test")


def test_the_audit_log_pages_newest_first_with_exact_totals(store: Store) -> None:
    records = [AuditRecord(f"2026-12-01T00:00:0{i}.000Z", "user:a" if i % 2 else "user:b", "mcp-http", "tools/call",
                           "get_node", "digest", "ok", i, 1.5) for i in range(6)]  # fmt: skip
    store.append_audit(records[:3])
    store.append_audit(records[3:])
    page, total = store.audit_records(AuditQuery(principal="user:a"), before=None, limit=2)
    assert total == 3
    assert [r["revision"] for r in page] == [5, 3]
    older, _ = store.audit_records(AuditQuery(principal="user:a"), before=page[-1]["id"], limit=2)
    assert [r["revision"] for r in older] == [1]
    assert page[0]["duration_ms"] == 1.5
