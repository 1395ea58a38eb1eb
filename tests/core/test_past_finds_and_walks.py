"""find_nodes by `where` and `text`, find_paths and query_graph at a past revision, on both backends, through the
dispatch path: each answers at revision R what the current read answered when the store was at R (recorded then,
compared after the graph moved on: records updated, deleted and re-created, edges added and removed, visibility
narrowed, a compaction), at the current revision what the current read answers, and no past state to a reader
who lost access (`core.store.view.sees_then`). A type renamed by a model change: `test_a_type_renamed_...` below,
on the store's view."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.lang.conditions import Condition
from core.lang.model import Model
from core.ops.config import Config
from core.seam.instance import Instance, open_instance
from core.store import NodeQuery, Store
from core.store.retention import Retention
from core.values.operations import DeleteEdge, PatchNode, PutEdge
from core.values.principal import LOCAL, Principal
from core.values.records import Edge
from tests.conftest import walking_in_a_worker
from tests.core._past_reads import PERSON, READER, TEAM, call, ok
from tests.core.test_model_migration import evolved, member_of_to_belongs_to, slug_to_code, team_to_squad
from tests.core.test_past_views import commit, member, person, team

pytestmark = pytest.mark.both_backends


FINDS: list[dict[str, Any]] = [  # find_nodes by conditions and text, each read whole, page by page
    {"type": "Team", "where": {"area": "product"}},
    {"type": "Team", "where": {"name": {"contains": "pay"}}},
    {"type": "Person", "where": {"email": {"exists": True}}, "limit": 7},
    {"text": "pay", "limit": 3},
    {"type": "Person", "text": "a", "limit": 5},
    {"type": "Team", "where": {"area": {"ne": "product"}}, "text": "a"},
]


@pytest.fixture
def seeded(seeded_location: str | Path) -> Iterator[Instance]:
    opened = open_instance(Config(store=seeded_location, walk_workers=0))
    yield opened
    opened.close()


def whole(instance: Instance, name: str, arguments: dict[str, Any], principal: Principal = LOCAL) -> dict[str, Any]:
    """Every page of a read, followed by its cursor: the items, the totals and the revisions the pages said."""
    pages = [ok(instance, name, arguments, principal)]
    while pages[-1]["next_cursor"] is not None:
        pages.append(ok(instance, name, {**arguments, "cursor": pages[-1]["next_cursor"]}, principal))
    return {"items": [i for p in pages for i in p["items"]], "totals": {p["total"] for p in pages},
            "revisions": {p["revision"] for p in pages}, "pages": len(pages)}  # fmt: skip


def paths_and_patterns(instance: Instance) -> list[tuple[str, dict[str, Any]]]:
    """The walks recorded: paths between a person and a team, and patterns around them (with conditions)."""
    return [
        ("find_paths", {"source": PERSON, "target": TEAM, "max_depth": 3, "limit": 50}),
        ("find_paths", {"source": PERSON, "target": "team-billing", "max_depth": 4, "limit": 50}),
        ("find_paths", {"source": PERSON, "target": TEAM, "direction": "out", "edge_types": ["member_of"]}),
        (
            "query_graph",
            {
                "match": [
                    {"node": "p", "type": "Person"},
                    {"edge": "member_of", "from": "p", "to": "t"},
                    {"node": "t", "id": TEAM},
                ],
                "limit": 100,
            },
        ),
        (
            "query_graph",
            {
                "match": [
                    {"node": "t", "type": "Team", "where": {"area": "product"}},
                    {"edge": "member_of", "from": "p", "to": "t", "where": {"role": {"exists": True}}},
                ],
                "limit": 100,
            },
        ),
    ]


def record(instance: Instance, principal: Principal = LOCAL) -> dict[str, Any]:
    """Every read above, as the current read answers it now."""
    answers = {f"find_nodes {i}": whole(instance, "find_nodes", {"limit": 4, **a}, principal)
               for i, a in enumerate(FINDS)}  # fmt: skip
    for i, (tool, arguments) in enumerate(paths_and_patterns(instance)):
        answers[f"{tool} {i}"] = whole(instance, tool, arguments, principal)
    return answers


def record_at(instance: Instance, revision: int, principal: Principal = LOCAL) -> dict[str, Any]:
    """The same reads with `at`: at a past revision, from the store's view."""
    answers = {f"find_nodes {i}": whole(instance, "find_nodes", {"limit": 4, **a, "at": revision}, principal)
               for i, a in enumerate(FINDS)}  # fmt: skip
    for i, (tool, arguments) in enumerate(paths_and_patterns(instance)):
        answers[f"{tool} {i}"] = whole(instance, tool, {**arguments, "at": revision}, principal)
    return answers


def move_on(instance: Instance) -> None:
    """Update, delete, re-create, add and remove edges: what the past reads must see through."""
    ok(instance, "patch_node", {"id": TEAM, "properties": {"name": "Renamed Team", "area": "platform"}})
    ok(instance, "patch_node", {"id": "team-billing", "properties": {"area": "product"}})
    members = ok(instance, "get_neighbors", {"id": TEAM, "direction": "in", "edge_types": ["member_of"], "limit": 200})
    removed = [i["edge"] for i in members["items"]][:2]
    for edge in removed:
        ok(instance, "delete_edge", {"type": "member_of", "source": edge["source"], "target": edge["target"]})
    ok(instance, "upsert_edge", {"type": "member_of", "source": PERSON, "target": "team-billing",
                                 "properties": {"role": "member"}})  # fmt: skip
    person_now = ok(instance, "get_node", {"id": PERSON})["node"]
    ok(instance, "delete_node", {"id": PERSON, "cascade": True})
    ok(instance, "upsert_node", {"id": PERSON, "type": "Person", "properties": person_now["properties"],
                                 "visibility": person_now["visibility"]})  # fmt: skip
    ok(instance, "upsert_edge", {"type": "member_of", "source": PERSON, "target": TEAM,
                                 "properties": {"role": "lead"}})  # fmt: skip


def test_past_finds_and_walks_answer_what_the_current_read_answered_then(seeded: Instance) -> None:
    before = seeded.store.revision()
    then = record(seeded)
    assert all(a["items"] for a in then.values()), {k for k, a in then.items() if not a["items"]}
    assert then["find_nodes 3"]["pages"] > 1  # paged by the cursor
    move_on(seeded)
    after = seeded.store.revision()
    now = record(seeded)
    assert now != then  # the graph moved on, in what these reads answer
    past = record_at(seeded, before)
    for key, answer in past.items():
        assert answer["revisions"] == {before}, key
        assert {**answer, "revisions": None} == {**then[key], "revisions": None}, key
    at_now = record_at(seeded, after)
    for key, answer in at_now.items():
        assert {**answer, "revisions": None} == {**now[key], "revisions": None}, key


def test_past_finds_and_walks_hold_across_a_compaction_and_are_gone_before_it(seeded: Instance) -> None:
    move_on(seeded)
    kept = seeded.store.revision()
    then = record(seeded)
    ok(seeded, "patch_node", {"id": TEAM, "properties": {"name": "Later"}})
    ok(seeded, "delete_edge", {"type": "member_of", "source": PERSON, "target": TEAM})
    done = seeded.store.compact(Retention(changes_keep_revisions=2))
    assert done.oldest - 1 <= kept
    past = record_at(seeded, kept)
    assert {k: {**a, "revisions": None} for k, a in past.items()} == {
        k: {**a, "revisions": None} for k, a in then.items()
    }
    for tool, arguments in [("find_nodes", {"type": "Team", "where": {"area": "product"}}),
                            ("find_nodes", {"text": "pay"}), *paths_and_patterns(seeded)]:  # fmt: skip
        gone = call(seeded, tool, {**arguments, "at": done.oldest - 2})["error"]
        assert (gone["code"], gone["oldest"]) == ("gone", done.oldest), tool


def test_a_reader_who_lost_access_finds_and_walks_through_no_past_state(seeded: Instance) -> None:
    before = seeded.store.revision()
    seen = record(seeded, READER)
    assert TEAM in {n["id"] for n in seen["find_nodes 1"]["items"]}
    ok(seeded, "patch_node", {"id": TEAM, "properties": {}, "visibility": "restricted", "readers": ["group:security"]})
    finds = {f"find_nodes {i}": whole(seeded, "find_nodes", {"limit": 4, **a, "at": before}, READER)
             for i, a in enumerate(FINDS)}  # fmt: skip
    assert TEAM not in {n["id"] for a in finds.values() for n in a["items"]}
    assert TEAM in {n["id"] for n in whole(seeded, "find_nodes", {**FINDS[1], "at": before})["items"]}  # an admin
    walks = paths_and_patterns(seeded)
    pattern = whole(seeded, walks[3][0], {**walks[3][1], "at": before}, READER)
    assert pattern["items"] == [] != seen["query_graph 3"]["items"]  # the team it is pinned to: hidden then, for him
    assert whole(seeded, walks[3][0], {**walks[3][1], "at": before})["items"] == seen["query_graph 3"]["items"]
    around = whole(seeded, walks[1][0], {**walks[1][1], "at": before}, READER)  # paths to another team
    assert TEAM not in {n for i in around["items"] for n in i["nodes"]}
    assert TEAM in {n for i in seen["find_paths 1"]["items"] for n in i["nodes"]}  # some went through it, for him
    for tool, arguments in (walks[0], walks[2]):  # each ends at the team
        forbidden = call(seeded, tool, {**arguments, "at": before}, READER)["error"]
        assert forbidden["code"] == "forbidden"
        assert "public" not in forbidden["message"]  # the state then is not told either
        assert whole(seeded, tool, {**arguments, "at": before})["items"]  # an admin: as it was
    # a record deleted since is seen at the past revision by who could read it then
    ok(seeded, "patch_node", {"id": TEAM, "properties": {}, "visibility": "public", "readers": None})
    hidden = seeded.store.revision() - 1
    ok(seeded, "delete_node", {"id": TEAM, "cascade": True})
    assert record_at(seeded, before, READER) == {k: {**a, "revisions": {before}} for k, a in seen.items()}
    assert call(seeded, "find_paths", {**walks[0][1], "at": hidden}, READER)["error"]["code"] == "forbidden"


def test_past_walks_answer_the_same_from_a_walk_worker(seeded_location: str | Path) -> None:
    instance = open_instance(Config(store=seeded_location, walk_workers=0))
    try:
        before = instance.store.revision()
        move_on(instance)
        here = record_at(instance, before)
    finally:
        instance.close()
    with walking_in_a_worker(seeded_location) as walking:
        there = record_at(walking, before)
    assert there == here
    assert all(a["items"] for a in here.values())


def test_the_hostile_and_the_unsupported_with_at_are_refused_naming_the_argument(seeded: Instance) -> None:
    at = seeded.store.revision()
    cases = [
        ("find_nodes", {"type": "Team", "at": at, "facets": ["area"]}, "/facets"),
        ("find_nodes", {"type": "Team", "at": -1, "where": {"area": "product"}}, "/at"),
        ("find_nodes", {"at": at, "where": {"area": "product"}}, "/where"),
        ("find_nodes", {"type": "Team", "at": at, "where": {"nope": 1}}, "/where/nope"),
        ("find_nodes", {"at": at, "text": "x" * 201}, "/text"),
        ("find_paths", {"source": PERSON, "target": TEAM, "at": "1"}, "/at"),
        ("find_paths", {"source": PERSON, "target": TEAM, "at": at, "as_of": "2026-01-01T00:00:00Z"}, "/as_of"),
        ("find_paths", {"source": PERSON, "target": TEAM, "as_of": "yesterday"}, "/as_of"),
        ("query_graph", {"match": [{"node": "a", "id": TEAM}], "at": at, "as_of": "2026-01-01T00:00:00Z"}, "/as_of"),
        (
            "query_graph",
            {"match": [{"node": "a", "type": "Team", "where": {"nope": 1}}], "at": at},
            "/match/0/where/nope",
        ),
    ]
    for tool, arguments, pointer in cases:
        found = call(seeded, tool, arguments)["error"]
        assert (found["code"], found["problems"][0]["pointer"]) == ("invalid_arguments", pointer), (tool, arguments)
    for tool, arguments in (("find_paths", {"source": PERSON, "target": TEAM}),
                            ("query_graph", {"match": [{"node": "a", "id": TEAM}]})):  # fmt: skip
        assert call(seeded, tool, {**arguments, "at": at + 1})["error"]["code"] == "not_found"
        nothing = ok(seeded, tool, {**arguments, "as_of": "2999-01-01T00:00:00Z"})
        assert nothing["revision"] == seeded.store.revision()


# -- on the store's view: a type renamed by a model change --------------------------------------------------------
def test_a_type_renamed_by_a_model_change_is_found_and_walked_by_its_names_then(store: Store, model: Model) -> None:
    commit(store, team("team-a", "Alpha", visibility="public"), team("team-b", "Beta", visibility="public"),
           person("pat"), person("sam"))  # fmt: skip
    before = commit(store, member("pat", "team-a"), member("sam", "team-b", "lead"))
    store.apply_model(evolved(model, "9.0.0", team_to_squad, member_of_to_belongs_to, slug_to_code("Squad")),
                      principal="test")  # fmt: skip
    commit(
        store, PatchNode("team-b", {"name": "Beta Two", "code": "team-b-2"}), DeleteEdge("belongs_to", "pat", "team-a")
    )
    commit(store, PutEdge(Edge("belongs_to", "pat", "team-b", {"role": "member"})))

    old = store.view(before)
    found, total = old.find(NodeQuery("Team", (Condition("slug", "eq", "team-b"),)), after=None, limit=10)
    assert ([(n.id, n.type, n.properties["name"]) for n in found], total) == ([("team-b", "Team", "Beta")], 1)
    fields = {name: t.text for name, t in old.model.node_types.items()}
    found, _ = old.find(NodeQuery("Team", text="alpha", text_fields=fields), after=None, limit=10)
    assert [n.id for n in found] == ["team-a"]
    assert old.named_then("node type", "Squad", ["code"]) == ("Team", ["slug"])
    assert old.named_then("edge type", "belongs_to") == ("member_of", [])
    assert store.view().named_then("node type", "Squad", ["code"]) == ("Squad", ["code"])
    with old.walk() as held:
        assert held.revision == before
        assert sorted(held.graph.out_edges("pat")) == [("pat", "team-a", "member_of")]
        assert held.graph.has_edge("sam", "team-b", "member_of")
        assert held.graph.nodes["team-a"]["type"] == "Team"
        assert "team-a" in held.graph
        assert "nobody" not in held.graph
    with store.view().walk() as held:
        assert sorted(held.graph.out_edges("pat", keys=True)) == [("pat", "team-b", "belongs_to")]


def test_a_type_renamed_by_a_model_change_is_found_and_walked_at_the_old_revision_by_its_name_now(
    seeded: Instance,
) -> None:
    """Through the tools: their arguments are validated in the names of the model now (Squad, code, belongs_to),
    and a read at a revision before the rename answers as the current read answered then (Team, slug, member_of)."""
    before = seeded.store.revision()
    then = {
        "find": whole(seeded, "find_nodes", {"type": "Team", "where": {"slug": {"contains": "pay"}}, "text": "pay"}),
        "paths": whole(seeded, "find_paths", {"source": PERSON, "target": TEAM, "edge_types": ["member_of"]}),
        "pattern": whole(
            seeded,
            "query_graph",
            {
                "match": [
                    {"node": "t", "type": "Team", "where": {"slug": "payments"}},
                    {"edge": "member_of", "from": "p", "to": "t", "where": {"role": {"exists": True}}},
                ],
                "return": ["p"],
                "limit": 100,
            },
        ),
    }
    then["around"] = whole(seeded, "get_neighbors", {"id": TEAM, "edge_types": ["member_of"], "limit": 200})
    then["deep"] = whole(seeded, "get_neighbors", {"id": PERSON, "depth": 2, "edge_types": ["member_of"],
                                                   "direction": "both", "limit": 200})  # fmt: skip
    then["teams"] = whole(seeded, "find_nodes", {"type": "Team", "limit": 100})
    assert all(a["items"] for a in then.values())
    model = seeded.store.model
    seeded.store.apply_model(evolved(model, "9.0.0", team_to_squad, member_of_to_belongs_to, slug_to_code("Squad")),
                             principal="test")  # fmt: skip
    assert seeded.reload_model()
    ok(seeded, "patch_node", {"id": TEAM, "properties": {"code": "renamed-team"}})
    ok(seeded, "delete_edge", {"type": "belongs_to", "source": PERSON, "target": TEAM})
    past = {
        "find": whole(
            seeded, "find_nodes", {"type": "Squad", "where": {"code": {"contains": "pay"}}, "text": "pay", "at": before}
        ),
        "paths": whole(
            seeded, "find_paths", {"source": PERSON, "target": TEAM, "edge_types": ["belongs_to"], "at": before}
        ),
        "pattern": whole(
            seeded,
            "query_graph",
            {
                "match": [
                    {"node": "t", "type": "Squad", "where": {"code": "payments"}},
                    {"edge": "belongs_to", "from": "p", "to": "t", "where": {"role": {"exists": True}}},
                ],
                "return": ["p"],
                "limit": 100,
                "at": before,
            },
        ),
    }
    past["around"] = whole(seeded, "get_neighbors", {"id": TEAM, "edge_types": ["belongs_to"], "at": before,
                                                     "limit": 200})  # fmt: skip
    past["deep"] = whole(seeded, "get_neighbors", {"id": PERSON, "depth": 2, "edge_types": ["belongs_to"],
                                                   "direction": "both", "at": before, "limit": 200})  # fmt: skip
    past["teams"] = whole(seeded, "find_nodes", {"type": "Squad", "at": before, "limit": 100})
    for key, answer in past.items():
        assert {**answer, "revisions": None} == {**then[key], "revisions": None}, key
    assert {n["type"] for n in past["find"]["items"]} == {"Team"}  # as it was then, in the names of then
    now = whole(seeded, "find_paths", {"source": PERSON, "target": TEAM, "edge_types": ["belongs_to"]})
    assert now["items"] != past["paths"]["items"]


def test_a_past_find_pages_past_runs_of_nodes_changed_since_losing_none(store: Store) -> None:
    """The unchanged nodes come from the nodes table less the ids changed since: a page whose first rows all
    changed since reads on until it is full, and every node of the revision is on exactly one page."""
    ids = [f"team-{i:02d}" for i in range(60)]
    before = commit(store, *(team(i, f"Team {i}", visibility="public") for i in ids))
    commit(store, *(PatchNode(i, {"area": "product"}) for i in ids[:45]))  # the first 45 in id order
    query = NodeQuery("Team", (Condition("area", "eq", "platform"),))
    view, pages = store.view(before), []
    after: str | None = None
    while True:
        found, total = view.find(query, after=after, limit=4)
        pages.append((found, total))
        if len(found) < 4:
            break
        after = found[-1].id
    assert [n.id for page, _ in pages for n in page] == ids
    assert {total for _, total in pages} == {60}
    now, total_now = store.view().find(query, after=None, limit=100)
    assert ([n.id for n in now], total_now) == (ids[45:], 15)
