"""Write validation through `Store.commit`: every problem with its pointer, all or nothing, and revision checks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from core.store import StoreStats
from core.store.sqlite import SQLiteStore
from core.values.errors import ConflictError, ValidationError
from core.values.operations import DeleteEdge, DeleteNode, Operation, PutEdge, PutNode
from core.values.records import Edge, Node


def person(id: str, email: str | None = None, **extra: Any) -> Node:
    handle = id.removeprefix("person-")
    properties = {
        "email": email or f"{handle}@northwind.test",
        "name": handle.title(),
        "handle": handle,
        "title": "Engineer",
        "role": "engineer",
        **extra,
    }
    return Node(id, "Person", properties)


def team(id: str) -> Node:
    slug = id.removeprefix("team-")
    return Node(id, "Team", {"slug": slug, "name": slug.title(), "mission": "Ship things.", "area": "product"})


def service(id: str) -> Node:
    name = id.removeprefix("service-")
    return Node(id, "Service", {"name": name, "description": "Does things.", "lifecycle": "production", "tier": 2})


def decision(id: str, number: str) -> Node:
    return Node(id, "Decision", {"number": number, "title": "Decide.", "status": "accepted", "date": "2024-01-05"})


def edge(type_: str, source: str, target: str, **properties: Any) -> PutEdge:
    return PutEdge(Edge(type_, source, target, properties))


def put(*nodes: Node) -> list[Operation]:
    return [PutNode(n) for n in nodes]


def snapshot(store: SQLiteStore) -> tuple[int, StoreStats]:
    return store.revision(), store.stats()


def rejected(store: SQLiteStore, operations: Sequence[Operation]) -> ValidationError:
    """Commit a batch that must be refused; check nothing was written and return the error."""
    before = snapshot(store)
    with pytest.raises(ValidationError) as caught:
        store.commit(operations, principal="test")
    assert snapshot(store) == before
    return caught.value


def pointers(error: ValidationError) -> list[str]:
    return [p.pointer for p in error.problems]


# -- types and properties ------------------------------------------------------------------------------------------
def test_unknown_node_type_is_refused_at_its_type_pointer(store: SQLiteStore) -> None:
    error = rejected(store, [PutNode(Node("x", "Persn", {"name": "X"}))])
    assert pointers(error) == ["/0/type"]


def test_unknown_node_type_message_suggests_the_close_name(store: SQLiteStore) -> None:
    error = rejected(store, [PutNode(Node("x", "Persn", {}))])
    assert "'Person'" in error.problems[0].message  # the suggestion is the feature


def test_unknown_edge_type_message_suggests_the_close_name(store: SQLiteStore) -> None:
    error = rejected(store, [*put(person("person-ada"), team("team-a")), edge("membr_of", "person-ada", "team-a")])
    assert pointers(error) == ["/2/type"]
    assert "'member_of'" in error.problems[0].message


def test_invalid_properties_are_refused_at_their_property_pointers(store: SQLiteStore) -> None:
    error = rejected(store, put(person("person-ada", level=9, email=42)))  # type: ignore[arg-type]
    assert sorted(pointers(error)) == ["/0/properties/email", "/0/properties/level"]


def test_missing_required_and_undeclared_properties_are_refused(store: SQLiteStore) -> None:
    node = Node("person-ada", "Person", {"email": "ada@northwind.test", "nickname": "A"})
    error = rejected(store, [PutNode(node)])
    # both are reported on the properties object itself (JSON Schema has no pointer for an absent key)
    assert pointers(error) == ["/0/properties"] * 5  # name, handle, title and role missing; nickname undeclared


def test_edge_properties_are_validated_against_the_edge_type(store: SQLiteStore) -> None:
    ops = [*put(service("service-a"), service("service-b")), edge("depends_on", "service-a", "service-b")]
    error = rejected(store, ops)
    assert pointers(error) == ["/2/properties"]
    ops[-1] = edge("depends_on", "service-a", "service-b", criticality="maybe")
    assert pointers(rejected(store, ops)) == ["/2/properties/criticality"]


def test_invalid_id_and_visibility_are_refused(store: SQLiteStore) -> None:
    node = Node("has space", "Team", team("team-a").properties, visibility="secret")  # type: ignore[arg-type]
    error = rejected(store, [PutNode(node)])
    assert sorted(pointers(error)) == ["/0/id", "/0/visibility"]


def test_every_problem_of_a_batch_is_listed_with_its_operation_index_and_nothing_is_written(
    seeded_store: SQLiteStore,
) -> None:
    ops: list[Operation] = [
        PutNode(team("team-new")),  # fine on its own
        PutNode(Node("x", "Persn", {})),
        PutNode(person("person-new", level=0)),
        edge("member_of", "person-new", "team-missing", role="member"),
        DeleteNode("no-such-node"),
    ]
    error = rejected(seeded_store, ops)
    # the invalid person-new is not put, so the edge from it has a missing source as well as a missing target
    assert pointers(error) == ["/1/type", "/2/properties/level", "/3/source", "/3/target", "/4/id"]
    assert seeded_store.node("team-new") is None


# -- edges ---------------------------------------------------------------------------------------------------------
def test_edge_to_a_missing_node_is_refused_at_its_target(store: SQLiteStore) -> None:
    error = rejected(store, [PutNode(person("person-ada")), edge("member_of", "person-ada", "team-x", role="member")])
    assert pointers(error) == ["/1/target"]


def test_edge_from_a_missing_node_is_refused_at_its_source(store: SQLiteStore) -> None:
    error = rejected(store, [PutNode(team("team-a")), edge("member_of", "person-x", "team-a", role="member")])
    assert pointers(error) == ["/1/source"]


def test_edge_to_a_node_of_a_disallowed_type_is_refused(store: SQLiteStore) -> None:
    ops = [*put(person("person-ada"), service("service-a")), edge("member_of", "person-ada", "service-a", role="lead")]
    error = rejected(store, ops)
    assert pointers(error) == ["/2/target"]


def test_edge_from_a_node_of_a_disallowed_type_is_refused(store: SQLiteStore) -> None:
    ops = [*put(service("service-a"), team("team-a")), edge("owns", "service-a", "team-a")]
    error = rejected(store, ops)
    assert sorted(pointers(error)) == ["/2/source", "/2/target"]


def test_a_person_cannot_be_member_of_two_teams(store: SQLiteStore) -> None:
    store.commit(
        [
            *put(person("person-ada"), team("team-a"), team("team-b")),
            edge("member_of", "person-ada", "team-a", role="member"),
        ],
        principal="test",
    )
    error = rejected(store, [edge("member_of", "person-ada", "team-b", role="member")])
    assert pointers(error) == ["/0/target"]


def test_a_person_cannot_join_two_teams_in_one_batch(store: SQLiteStore) -> None:
    ops = [
        *put(person("person-ada"), team("team-a"), team("team-b")),
        edge("member_of", "person-ada", "team-a", role="member"),
        edge("member_of", "person-ada", "team-b", role="member"),
    ]
    assert pointers(rejected(store, ops)) == ["/4/target"]


def test_moving_a_person_to_another_team_works_when_the_old_edge_is_deleted_first(store: SQLiteStore) -> None:
    store.commit(
        [
            *put(person("person-ada"), team("team-a"), team("team-b")),
            edge("member_of", "person-ada", "team-a", role="member"),
        ],
        principal="test",
    )
    store.commit(
        [DeleteEdge("member_of", "person-ada", "team-a"), edge("member_of", "person-ada", "team-b", role="member")],
        principal="test",
    )
    assert store.edge("member_of", "person-ada", "team-a") is None
    assert store.edge("member_of", "person-ada", "team-b") is not None


def test_a_service_has_at_most_one_owning_team(store: SQLiteStore) -> None:
    store.commit(
        [*put(team("team-a"), team("team-b"), service("service-a")), edge("owns", "team-a", "service-a")],
        principal="test",
    )
    error = rejected(store, [edge("owns", "team-b", "service-a")])
    assert pointers(error) == ["/0/source"]


def test_supersedes_is_one_to_one(store: SQLiteStore) -> None:
    store.commit(
        [
            *put(decision("adr-1", "ADR-0001"), decision("adr-2", "ADR-0002"), decision("adr-3", "ADR-0003")),
            edge("supersedes", "adr-2", "adr-1"),
        ],
        principal="test",
    )
    # adr-1 is already superseded by adr-2
    assert pointers(rejected(store, [edge("supersedes", "adr-3", "adr-1")])) == ["/0/source"]
    # adr-2 already supersedes adr-1
    assert pointers(rejected(store, [edge("supersedes", "adr-2", "adr-3")])) == ["/0/target"]


def test_reports_to_refuses_a_cycle(store: SQLiteStore) -> None:
    ops = [
        *put(person("person-a"), person("person-b")),
        edge("reports_to", "person-a", "person-b"),
        edge("reports_to", "person-b", "person-a"),
    ]
    assert pointers(rejected(store, ops)) == ["/3/target"]


def test_reports_to_refuses_a_longer_cycle_across_commits(store: SQLiteStore) -> None:
    store.commit(
        [
            *put(person("person-a"), person("person-b"), person("person-c")),
            edge("reports_to", "person-a", "person-b"),
            edge("reports_to", "person-b", "person-c"),
        ],
        principal="test",
    )
    assert pointers(rejected(store, [edge("reports_to", "person-c", "person-a")])) == ["/0/target"]


def test_reports_to_refuses_a_self_loop(store: SQLiteStore) -> None:
    ops = [PutNode(person("person-a")), edge("reports_to", "person-a", "person-a")]
    assert pointers(rejected(store, ops)) == ["/1/target"]


def test_supersedes_refuses_a_self_loop(store: SQLiteStore) -> None:
    ops = [PutNode(decision("adr-1", "ADR-0001")), edge("supersedes", "adr-1", "adr-1")]
    assert "/1/target" in pointers(rejected(store, ops))


def test_deleting_a_missing_edge_is_refused(store: SQLiteStore) -> None:
    error = rejected(store, [DeleteEdge("member_of", "person-a", "team-a")])
    assert pointers(error) == ["/0"]


# -- nodes ---------------------------------------------------------------------------------------------------------
def test_the_key_property_is_unique_within_a_type(store: SQLiteStore) -> None:
    ops = put(person("person-a", email="same@northwind.test"), person("person-b", email="same@northwind.test"))
    assert pointers(rejected(store, ops)) == ["/1/properties/email"]


def test_the_key_property_is_unique_against_stored_nodes(store: SQLiteStore) -> None:
    store.commit(put(person("person-a", email="same@northwind.test")), principal="test")
    error = rejected(store, put(person("person-b", email="same@northwind.test")))
    assert pointers(error) == ["/0/properties/email"]


def test_a_key_freed_earlier_in_the_batch_can_be_taken(store: SQLiteStore) -> None:
    store.commit(put(person("person-a", email="same@northwind.test")), principal="test")
    store.commit(
        put(person("person-a", email="new@northwind.test"), person("person-b", email="same@northwind.test")),
        principal="test",
    )
    b = store.node("person-b")
    assert b is not None
    assert b.properties["email"] == "same@northwind.test"


def test_the_same_key_in_two_types_is_allowed(store: SQLiteStore) -> None:
    store.commit(
        put(
            team("team-x"),
            Node("sys-x", "System", {"slug": "x", "name": "X", "description": "X.", "lifecycle": "production"}),
        ),
        principal="test",
    )
    store.commit(
        put(Node("doc-x", "Document", {"slug": "x", "title": "X", "doc_type": "guide", "summary": "X."})),
        principal="test",
    )
    assert store.stats().nodes == 3


def test_a_nodes_type_cannot_change(store: SQLiteStore) -> None:
    store.commit(put(Node("thing", "Team", team("team-thing").properties)), principal="test")
    error = rejected(store, put(Node("thing", "Service", service("service-thing").properties)))
    assert pointers(error) == ["/0/type"]
    stored = store.node("thing")
    assert stored is not None
    assert stored.type == "Team"


def test_readers_on_a_non_restricted_node_are_refused(store: SQLiteStore) -> None:
    node = Node("team-a", "Team", team("team-a").properties, visibility="internal", readers=("user:ada",))
    assert pointers(rejected(store, [PutNode(node)])) == ["/0/readers"]


def test_malformed_readers_are_refused(store: SQLiteStore) -> None:
    node = Node("team-a", "Team", team("team-a").properties, visibility="restricted", readers=("group:payments", "bob"))
    assert pointers(rejected(store, [PutNode(node)])) == ["/0/readers/1"]


def test_a_restricted_node_keeps_its_readers(store: SQLiteStore) -> None:
    node = Node("team-a", "Team", team("team-a").properties, visibility="restricted", readers=("user:ada", "group:sre"))
    store.commit([PutNode(node)], principal="test")
    stored = store.node("team-a")
    assert stored is not None
    assert (stored.visibility, stored.readers) == ("restricted", ("user:ada", "group:sre"))


def test_deleting_a_node_with_edges_is_refused(store: SQLiteStore) -> None:
    store.commit(
        [*put(person("person-a"), team("team-a")), edge("member_of", "person-a", "team-a", role="member")],
        principal="test",
    )
    error = rejected(store, [DeleteNode("team-a")])
    assert pointers(error) == ["/0/id"]
    assert store.node("team-a") is not None


def test_cascade_deletes_each_edge_then_the_node_in_one_commit(store: SQLiteStore) -> None:
    store.commit(
        [
            *put(person("person-a"), person("person-b"), team("team-a"), service("service-a")),
            edge("member_of", "person-a", "team-a", role="member"),
            edge("member_of", "person-b", "team-a", role="lead"),
            edge("owns", "team-a", "service-a"),
            edge("reports_to", "person-a", "person-b"),
        ],
        principal="test",
    )
    start = store.revision()
    result = store.commit([DeleteNode("team-a", cascade=True)], principal="test")

    assert [(c.op, c.kind) for c in result.changes] == [("delete", "edge")] * 3 + [("delete", "node")]
    assert {c.key for c in result.changes[:3]} == {
        "member_of:person-a->team-a",
        "member_of:person-b->team-a",
        "owns:team-a->service-a",
    }
    assert result.changes[-1].key == "team-a"
    assert [c.revision for c in result.changes] == [start + 1, start + 2, start + 3, start + 4]
    assert store.changes(start, 100) == list(result.changes)
    assert all(c.after is None and c.before is not None for c in result.changes)
    assert store.node("team-a") is None
    assert store.edge("reports_to", "person-a", "person-b") is not None  # unrelated edges stay
    assert store.stats().edges == 1


def test_later_operations_see_earlier_ones_in_the_same_batch(store: SQLiteStore) -> None:
    result = store.commit(
        [*put(person("person-a"), team("team-a")), edge("member_of", "person-a", "team-a", role="manager")],
        principal="test",
    )
    assert len(result.changes) == 3
    assert store.edge("member_of", "person-a", "team-a") is not None


def test_a_node_deleted_earlier_in_the_batch_cannot_be_linked(store: SQLiteStore) -> None:
    store.commit(put(person("person-a"), team("team-a")), principal="test")
    error = rejected(store, [DeleteNode("team-a"), edge("member_of", "person-a", "team-a", role="member")])
    assert pointers(error) == ["/1/target"]


def test_a_put_identical_to_the_stored_node_writes_no_change(store: SQLiteStore) -> None:
    store.commit(put(person("person-a"), team("team-a")), principal="test")
    store.commit([edge("member_of", "person-a", "team-a", role="member")], principal="test")
    before = snapshot(store)
    result = store.commit(
        [*put(person("person-a")), edge("member_of", "person-a", "team-a", role="member")], principal="other"
    )
    assert result.changes == ()
    assert result.revision == before[0]
    assert snapshot(store) == before
    stored = store.node("person-a")
    assert stored is not None
    assert stored.updated_by == "test"


def test_a_changed_put_writes_an_update_with_the_next_revision(store: SQLiteStore) -> None:
    store.commit(put(person("person-a")), principal="test")
    created = store.node("person-a")
    result = store.commit(put(person("person-a", level=3)), principal="editor")
    updated = store.node("person-a")
    assert created is not None
    assert updated is not None
    assert updated.revision == result.revision == created.revision + 1
    assert updated.properties["level"] == 3
    assert updated.created_at == created.created_at
    assert updated.updated_by == "editor"


# -- revisions -----------------------------------------------------------------------------------------------------
def test_a_stale_expected_revision_is_a_conflict_and_nothing_is_written(store: SQLiteStore) -> None:
    store.commit(put(person("person-a")), principal="test")
    store.commit(put(person("person-a", level=2)), principal="test")
    current = store.node("person-a")
    assert current is not None
    before = snapshot(store)
    stale = current.revision - 1
    with pytest.raises(ConflictError) as caught:
        store.commit(
            [PutNode(team("team-a")), PutNode(person("person-a", level=5), expected_revision=stale)], principal="test"
        )
    assert (caught.value.key, caught.value.expected, caught.value.actual) == ("person-a", stale, current.revision)
    assert snapshot(store) == before
    assert store.node("team-a") is None


def test_the_current_expected_revision_is_accepted(store: SQLiteStore) -> None:
    store.commit(put(person("person-a")), principal="test")
    current = store.node("person-a")
    assert current is not None
    store.commit([PutNode(person("person-a", level=5), expected_revision=current.revision)], principal="test")
    updated = store.node("person-a")
    assert updated is not None
    assert updated.properties["level"] == 5


def test_expected_revision_zero_means_the_node_must_not_exist(store: SQLiteStore) -> None:
    result = store.commit([PutNode(team("team-a"), expected_revision=0)], principal="test")
    assert store.node("team-a") is not None
    with pytest.raises(ConflictError) as caught:
        store.commit([PutNode(team("team-a"), expected_revision=0)], principal="test")
    assert (caught.value.expected, caught.value.actual) == (0, result.revision)


def test_a_stale_expected_revision_on_delete_is_a_conflict(store: SQLiteStore) -> None:
    store.commit(put(team("team-a")), principal="test")
    with pytest.raises(ConflictError) as caught:
        store.commit([DeleteNode("team-a", expected_revision=99)], principal="test")
    assert caught.value.expected == 99
    assert store.node("team-a") is not None


def test_a_stale_expected_revision_on_an_edge_is_a_conflict(store: SQLiteStore) -> None:
    store.commit(
        [*put(person("person-a"), team("team-a")), edge("member_of", "person-a", "team-a", role="member")],
        principal="test",
    )
    with pytest.raises(ConflictError) as caught:
        store.commit([DeleteEdge("member_of", "person-a", "team-a", expected_revision=0)], principal="test")
    assert caught.value.key == "member_of:person-a->team-a"
    assert store.edge("member_of", "person-a", "team-a") is not None


def test_dry_run_validates_but_writes_nothing(seeded_store: SQLiteStore) -> None:
    before = snapshot(seeded_store)
    result = seeded_store.commit(put(team("team-dry")), principal="test", dry_run=True)
    assert result.changes == ()
    assert result.revision == before[0]
    assert snapshot(seeded_store) == before
    assert seeded_store.node("team-dry") is None


def test_dry_run_still_reports_problems(store: SQLiteStore) -> None:
    before = snapshot(store)
    with pytest.raises(ValidationError) as caught:
        store.commit([PutNode(Node("x", "Persn", {}))], principal="test", dry_run=True)
    assert pointers(caught.value) == ["/0/type"]
    assert snapshot(store) == before


def test_an_edge_end_is_the_node_the_batch_left_there_not_the_one_stored(store: SQLiteStore) -> None:
    store.commit(put(person("p-1"), team("t-1"), service("s-1")), principal="test")
    error = rejected(store, [DeleteNode("t-1"), edge("member_of", "p-1", "t-1", role="member"),
                             PutNode(team("t-2")), edge("member_of", "p-1", "t-2", role="member"),
                             DeleteNode("s-1"), PutNode(person("s-1", "s1@example.com")),
                             edge("owns", "t-2", "s-1")])  # fmt: skip
    assert [(p.pointer, p.message) for p in error.problems] == [
        ("/1/target", "No node with id 't-1'."),
        ("/6/target", "a owns edge cannot end at a Person (allowed: Document, Service, System)"),
    ]
