"""The graph at a past revision (`Store.view`, `core.store.past`) and the difference between two revisions
(`Store.diff_revisions`), on both backends: records updated, deleted and re-created, edges added and removed, a
type renamed by a model change, visibility narrowed (the rule `core.store.view.sees_then`), and compaction (`gone`)."""

from __future__ import annotations

from typing import Any

import pytest

from core.lang.model import Model
from core.store import Store
from core.store.retention import Retention
from core.values.errors import ForbiddenError, FutureRevisionError, GoneError
from core.values.operations import DeleteEdge, DeleteNode, PatchNode, PutEdge, PutNode
from core.values.records import Edge, Node, Sight
from tests.core.test_model_migration import evolved, member_of_to_belongs_to, slug_to_code, team_to_squad

pytestmark = pytest.mark.both_backends

ANONYMOUS = Sight(frozenset({"public"}))
STAFF = Sight(frozenset({"public", "internal"}))  # an authenticated reader named nowhere
ALICE = Sight(frozenset({"public", "internal"}), ("user:alice",))


def team(id_: str, name: str, **access: Any) -> PutNode:
    properties = {"slug": id_, "name": name, "mission": f"{name} things.", "area": "platform"}
    return PutNode(Node(id_, "Team", properties, **access))


def person(id_: str) -> PutNode:
    properties = {"email": f"{id_}@example.com", "name": id_, "handle": id_, "title": "Engineer", "role": "engineer"}
    return PutNode(Node(id_, "Person", properties, "public"))


def member(source: str, target: str, role: str = "member") -> PutEdge:
    return PutEdge(Edge("member_of", source, target, {"role": role}))


def commit(store: Store, *operations: Any) -> int:
    return store.commit(list(operations), principal="test").revision


def test_a_node_reads_as_it_was_updated_deleted_and_re_created(store: Store) -> None:
    created = commit(store, team("team-a", "Alpha", visibility="public"))
    renamed = commit(store, PatchNode("team-a", {"name": "Alpha Two"}))
    deleted = commit(store, DeleteNode("team-a"))
    again = commit(store, team("team-a", "Alpha Three", visibility="public"))

    assert store.view(created - 1).node("team-a") is None
    assert store.view(created).node("team-a").properties["name"] == "Alpha"  # type: ignore[union-attr]
    assert store.view(renamed).node("team-a").properties["name"] == "Alpha Two"  # type: ignore[union-attr]
    assert store.view(deleted).node("team-a") is None
    assert store.view(again).node("team-a").properties["name"] == "Alpha Three"  # type: ignore[union-attr]
    assert store.view().node("team-a") == store.node("team-a")  # the current view is the current read
    assert store.view(renamed).node("team-a").revision == renamed  # type: ignore[union-attr]


def test_a_view_stays_pinned_to_its_revision_while_later_commits_land(store: Store) -> None:
    pinned = store.view(commit(store, team("team-a", "Alpha", visibility="public")))
    commit(store, PatchNode("team-a", {"name": "Later"}), team("team-b", "Beta", visibility="public"))
    assert pinned.node("team-a").properties["name"] == "Alpha"  # type: ignore[union-attr]
    assert pinned.node("team-b") is None
    assert [c.key for c in pinned.changes(10)] == ["team-a", "team-b"]  # what came after it
    found, total = pinned.find_nodes("Team")
    assert ([n.id for n in found], total) == (["team-a"], 1)


def test_find_nodes_at_a_revision_pages_in_id_order_and_counts_what_existed(store: Store) -> None:
    commit(store, *(team(f"team-{i}", f"T{i}", visibility="public") for i in range(6)))
    at = commit(store, DeleteNode("team-2"))
    commit(store, DeleteNode("team-4"), team("team-9", "T9", visibility="public"), PatchNode("team-1", {"name": "X"}))
    view = store.view(at)
    first, total = view.find_nodes("Team", limit=3)
    rest, _ = view.find_nodes("Team", after=first[-1].id, limit=3)
    assert total == 5
    assert [n.id for n in first + rest] == ["team-0", "team-1", "team-3", "team-4", "team-5"]
    assert first[1].properties["name"] == "T1"
    assert view.find_nodes("Person") == ([], 0)


def test_edges_added_and_removed_are_there_only_at_the_revisions_that_held_them(store: Store) -> None:
    nodes = commit(store, team("team-a", "Alpha", visibility="public"), person("pat"), person("sam"))
    added = commit(store, member("pat", "team-a"), member("sam", "team-a", "lead"))
    removed = commit(store, DeleteEdge("member_of", "pat", "team-a"))
    changed = commit(store, member("sam", "team-a", "member"))

    assert store.view(nodes).edges_of("team-a") == []
    assert [(e.source, e.properties["role"]) for e in store.view(added).edges_of("team-a", "in")] == [
        ("pat", "member"), ("sam", "lead")]  # fmt: skip
    assert [e.source for e in store.view(removed).edges_of("team-a")] == ["sam"]
    assert store.view(removed).edges_of("team-a", "out") == []
    assert [s.edge.properties["role"] for s in store.view(changed).neighbours("team-a")] == ["member"]
    steps = store.view(added).neighbours("pat", "out", ["member_of"])
    assert [(s.node.id, s.node.properties["name"]) for s in steps] == [("team-a", "Alpha")]


def test_narrowed_visibility_hides_the_history_from_who_lost_access_and_deletion_keeps_it(store: Store) -> None:
    open_at = commit(store, team("team-a", "Alpha", visibility="internal"), team("team-b", "Beta", visibility="public"))
    commit(store, PatchNode("team-a", visibility="restricted", readers=["user:alice"]))
    then = store.view(open_at)
    assert then.node("team-a", sight=ALICE) is not None  # may read it then and now
    with pytest.raises(ForbiddenError) as refused:
        then.node("team-a", sight=STAFF)  # could read it then, not now: its history is hidden
    assert refused.value.key == "team-a"
    assert [n.id for n in then.find_nodes("Team", sight=STAFF)[0]] == ["team-b"]
    assert then.find_nodes("Team", sight=ALICE)[1] == 2

    commit(store, DeleteNode("team-b"))
    assert then.node("team-b", sight=ANONYMOUS) is not None  # deleted since: visible to who could read it then
    assert store.view().node("team-b", sight=ANONYMOUS) is None


def test_an_edge_at_a_revision_is_seen_only_when_both_its_ends_are_then_and_now(store: Store) -> None:
    commit(store, team("team-a", "Alpha", visibility="public"), person("pat"))
    at = commit(store, member("pat", "team-a"))
    commit(store, PatchNode("team-a", visibility="restricted", readers=["user:alice"]))
    assert store.view(at).edges_of("pat", sight=STAFF) == []
    assert [e.target for e in store.view(at).edges_of("pat", sight=ALICE)] == ["team-a"]


def test_a_type_renamed_by_a_model_change_reads_by_its_old_name_under_the_old_model(store: Store, model: Model) -> None:
    before = commit(store, team("team-a", "Alpha", visibility="public"), team("team-b", "Beta", visibility="public"))
    edited = commit(store, PatchNode("team-b", {"name": "Beta Two"}))
    store.apply_model(evolved(model, "9.0.0", team_to_squad), principal="test")
    commit(store, PatchNode("team-b", {"name": "Beta Three"}))

    for revision in (before, edited):
        old = store.view(revision)
        assert "Team" in old.model.node_types
        assert "Squad" not in old.model.node_types
        assert {old.node(i).type for i in ("team-a", "team-b")} == {"Team"}  # type: ignore[union-attr]
        assert [n.id for n in old.find_nodes("Team")[0]] == ["team-a", "team-b"]
    assert store.view(edited).node("team-b").properties["name"] == "Beta Two"  # type: ignore[union-attr]
    now = store.view()
    assert "Squad" in now.model.node_types
    assert now.node("team-a").type == "Squad"  # type: ignore[union-attr]
    page = store.diff_revisions(before, types=["Squad"])
    assert page.model == (model.version, "9.0.0")
    assert [(e.key, e.change, dict(e.properties)) for e in page.entries] == [
        ("team-b", "changed", {"name": {"before": "Beta", "after": "Beta Three"}})]  # fmt: skip


def test_an_edge_type_and_a_property_renamed_read_by_their_old_names_at_the_old_revision(
    store: Store, model: Model
) -> None:
    commit(store, team("team-a", "Alpha", visibility="public"), person("pat"), person("sam"))
    before = commit(store, member("pat", "team-a"), member("sam", "team-a", "lead"))
    store.apply_model(evolved(model, "9.0.0", member_of_to_belongs_to, slug_to_code("Team")), principal="test")
    commit(store, DeleteEdge("belongs_to", "pat", "team-a"))

    old = store.view(before)
    assert [(e.type, e.source) for e in old.edges_of("team-a")] == [("member_of", "pat"), ("member_of", "sam")]
    assert old.node("team-a").properties["slug"] == "team-a"  # type: ignore[union-attr]
    assert "code" not in old.node("team-a").properties  # type: ignore[union-attr]
    assert [(e.type, e.source) for e in store.view().edges_of("team-a")] == [("belongs_to", "sam")]
    assert store.view().node("team-a").properties["code"] == "team-a"  # type: ignore[union-attr]
    page = store.diff_revisions(before)
    assert [(e.key, e.change) for e in page.entries] == [("belongs_to:pat->team-a", "removed")]


def test_revisions_before_a_compaction_are_gone_naming_the_oldest_kept(store: Store) -> None:
    first = commit(store, team("team-a", "A0", visibility="public"))
    for i in range(1, 6):
        commit(store, PatchNode("team-a", {"name": f"A{i}"}))
    newest = store.revision()
    assert store.view(first).node("team-a").properties["name"] == "A0"  # type: ignore[union-attr]
    done = store.compact(Retention(changes_keep_revisions=3))
    with pytest.raises(GoneError) as gone:
        store.view(first)
    assert gone.value.oldest == done.oldest == newest - 2
    with pytest.raises(GoneError):
        store.diff_revisions(first)
    kept = store.view(newest - 3)  # the floor itself: every change after it is kept
    assert kept.node("team-a").properties["name"] == "A2"  # type: ignore[union-attr]


def test_a_revision_the_store_has_not_reached_is_refused_naming_the_current_one(store: Store) -> None:
    now = commit(store, team("team-a", "Alpha", visibility="public"))
    with pytest.raises(FutureRevisionError) as future:
        store.view(now + 5)
    assert (future.value.revision, future.value.current) == (now + 5, now)


def test_a_diff_lists_what_was_added_removed_and_changed_with_each_property_before_and_after(store: Store) -> None:
    start = commit(store, team("team-a", "Alpha", visibility="public"), team("team-b", "Beta", visibility="public"),
                   person("pat"), member("pat", "team-a"))  # fmt: skip
    commit(store, PatchNode("team-a", {"name": "Alpha Two"}), DeleteNode("team-b"), team("team-c", "Gamma"))
    commit(store, DeleteEdge("member_of", "pat", "team-a"), member("pat", "team-c"))
    commit(store, team("team-d", "Delta"), DeleteNode("team-d"))  # came and went: no difference
    commit(store, PatchNode("pat", {"title": "Engineer"}))  # the same value again: no difference
    page = store.diff_revisions(start)
    assert [(e.kind, e.key, e.change) for e in page.entries] == [
        ("node", "team-a", "changed"), ("node", "team-b", "removed"), ("node", "team-c", "added"),
        ("edge", "member_of:pat->team-a", "removed"), ("edge", "member_of:pat->team-c", "added"),
    ]  # fmt: skip
    assert dict(page.entries[0].properties) == {"name": {"before": "Alpha", "after": "Alpha Two"}}
    assert page.next is None
    assert page.model is None
    assert [e.key for e in store.diff_revisions(start, ids=["pat"]).entries] == [
        "member_of:pat->team-a", "member_of:pat->team-c"]  # fmt: skip
    assert store.diff_revisions(start, start).entries == ()


def test_a_diff_is_paged_without_losing_or_repeating_an_entry(store: Store) -> None:
    start = commit(store, *(person(f"p{i}") for i in range(5)))
    commit(store, *(team(f"team-{i}", f"T{i}", visibility="public") for i in range(5)))
    commit(store, *(member(f"p{i}", f"team-{i}") for i in range(5)))
    keys: list[str] = []
    after = None
    while True:
        page = store.diff_revisions(start, limit=3, after=after)
        assert len(page.entries) <= 3
        keys += [e.key for e in page.entries]
        if page.next is None:
            break
        after = page.next
    assert keys == [f"team-{i}" for i in range(5)] + [f"member_of:p{i}->team-{i}" for i in range(5)]


def test_a_diff_hides_the_side_the_caller_may_not_see_and_says_so(store: Store) -> None:
    start = commit(store, team("team-a", "Alpha", visibility="public"), team("team-b", "Beta", visibility="public"))
    commit(store, PatchNode("team-a", {"name": "Secret"}, visibility="restricted", readers=["user:alice"]))
    for_alice = store.diff_revisions(start, sight=ALICE).entries
    assert [(e.key, e.redacted) for e in for_alice] == [("team-a", False)]
    assert for_alice[0].fields == ("visibility", "readers")
    assert store.diff_revisions(start, sight=STAFF).entries == ()  # it may see the record neither then (lost
    #                                                               access since) nor now
