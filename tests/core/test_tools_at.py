"""Reads at a past revision through the tools (`at` on get_node, find_nodes and get_neighbors) and the difference
between two revisions (`diff_revisions`), on both backends, through the dispatch path: the old value of a node
updated since, a node deleted since, `gone` before what compaction keeps, `not_found` for a future revision, no past
state for a reader who lost access (`core.dispatch.access.sees_then`), and diff pages that lose nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.dispatch.resources import read_resource
from core.ops.config import Config
from core.seam.instance import Instance, open_instance
from core.store.retention import Retention
from core.values.errors import ForbiddenError, GoneError, NotFoundError
from core.values.principal import LOCAL, Principal
from core.values.uris import node_at_of, node_at_uri
from tests.conftest import walking_in_a_worker
from tests.core._past_reads import PERSON, READER, TEAM, call, ok

pytestmark = pytest.mark.both_backends


@pytest.fixture
def seeded(seeded_location: str | Path) -> Iterator[Instance]:
    opened = open_instance(Config(store=seeded_location, walk_workers=0))
    yield opened
    opened.close()


def error(instance: Instance, name: str, arguments: dict[str, Any], principal: Principal = LOCAL) -> dict[str, Any]:
    answer = call(instance, name, arguments, principal)
    assert "error" in answer, answer
    found: dict[str, Any] = answer["error"]
    return found


def rename(instance: Instance, id: str, name: str) -> int:
    return ok(instance, "patch_node", {"id": id, "properties": {"name": name}})["revision"]


def test_a_node_updated_since_reads_as_it_was_with_the_revision_read_at(seeded: Instance) -> None:
    before = seeded.store.revision()
    rename(seeded, TEAM, "Payments Renamed")
    got = ok(seeded, "get_node", {"id": TEAM, "at": before})
    assert (got["node"]["properties"]["name"], got["revision"]) == ("Payments", before)
    assert ok(seeded, "get_node", {"id": TEAM})["node"]["properties"]["name"] == "Payments Renamed"
    assert ok(seeded, "get_node", {"id": TEAM, "at": before, "summary": True})["node"] == {
        "id": TEAM, "type": "Team", "name": "Payments"
    }  # fmt: skip
    teams = ok(seeded, "find_nodes", {"type": "Team", "at": before, "limit": 100})
    assert teams["revision"] == before
    assert next(n for n in teams["items"] if n["id"] == TEAM)["properties"]["name"] == "Payments"
    now = ok(seeded, "find_nodes", {"type": "Team", "limit": 100})
    assert [n["id"] for n in teams["items"]] == [n["id"] for n in now["items"]]


def test_find_nodes_at_a_revision_pages_without_loss(seeded: Instance) -> None:
    before = seeded.store.revision()
    ok(seeded, "delete_node", {"id": PERSON, "cascade": True})
    pages = [ok(seeded, "find_nodes", {"type": "Person", "at": before, "limit": 25})]
    while pages[-1]["next_cursor"] is not None:
        arguments = {"type": "Person", "at": before, "limit": 25, "cursor": pages[-1]["next_cursor"]}
        pages.append(ok(seeded, "find_nodes", arguments))
    ids = [n["id"] for p in pages for n in p["items"]]
    assert PERSON in ids
    assert ids == sorted(set(ids))
    assert {p["total"] for p in pages} == {len(ids)}
    assert len(ids) == ok(seeded, "find_nodes", {"type": "Person"})["total"] + 1


def test_a_node_deleted_since_and_its_edges_read_at_the_old_revision(seeded: Instance) -> None:
    before = seeded.store.revision()
    around = ok(seeded, "get_neighbors", {"id": PERSON, "limit": 200})
    ok(seeded, "delete_node", {"id": PERSON, "cascade": True})
    assert error(seeded, "get_node", {"id": PERSON})["code"] == "not_found"
    assert ok(seeded, "get_node", {"id": PERSON, "at": before})["node"]["id"] == PERSON
    then = ok(seeded, "get_neighbors", {"id": PERSON, "at": before, "limit": 200})
    assert [(i["node"]["id"], i["edge"]) for i in then["items"]] == [
        (i["node"]["id"], i["edge"]) for i in around["items"]
    ]  # the same answer the graph index gave then
    assert then["revision"] == before
    assert then["total"] == around["total"] > 0
    team_then = ok(seeded, "get_neighbors", {"id": TEAM, "at": before, "direction": "in", "edge_types": ["member_of"],
                                             "limit": 200})  # fmt: skip
    assert PERSON in {i["node"]["id"] for i in team_then["items"]}
    team_now = ok(seeded, "get_neighbors", {"id": TEAM, "direction": "in", "edge_types": ["member_of"], "limit": 200})
    assert PERSON not in {i["node"]["id"] for i in team_now["items"]}


def test_past_reads_refuse_what_they_do_not_support_naming_it(seeded: Instance) -> None:
    at = seeded.store.revision()
    facets = error(seeded, "find_nodes", {"type": "Team", "at": at, "facets": ["area"]})
    assert (facets["code"], facets["problems"][0]["pointer"]) == ("invalid_arguments", "/facets")
    assert "at" in facets["problems"][0]["message"]


def every_page(instance: Instance, arguments: dict[str, Any], principal: Principal = LOCAL) -> list[Any]:
    """Every page of a get_neighbors answer, as (depth, node, edge) items, its total and revision checked alike."""
    pages = [ok(instance, "get_neighbors", arguments, principal)]
    while pages[-1]["next_cursor"] is not None:
        pages.append(ok(instance, "get_neighbors", {**arguments, "cursor": pages[-1]["next_cursor"]}, principal))
    assert len({(p["total"], p["revision"]) for p in pages}) == 1
    items = [(i["depth"], i["node"], i["edge"]) for p in pages for i in p["items"]]
    assert len(items) == pages[0]["total"]
    return items


@pytest.mark.parametrize("depth", [2, 3])
def test_get_neighbors_deeper_at_a_revision_answers_what_the_walk_answered_then(seeded: Instance, depth: int) -> None:
    """A walk of depth 2 or 3 at R (over the topology then, `core.store.past_graph`) gives, page for page, the
    items the walk over the graph index gave at R: after the walk's own nodes are renamed, an edge it used is
    removed, a node it reached is deleted and new edges are added, for the local principal and for a reader whose
    group sees only part of the graph."""
    before = seeded.store.revision()
    asks = [({"id": TEAM, "depth": depth, "limit": 40}, LOCAL),
            ({"id": PERSON, "depth": depth, "direction": "out", "limit": 40}, LOCAL),
            ({"id": TEAM, "depth": depth, "limit": 40}, READER)]  # fmt: skip
    then = [every_page(seeded, arguments, who) for arguments, who in asks]
    assert all(max(d for d, _, _ in items) > 1 for items in then)
    assert len(then[2]) < len(then[0])  # the reader sees less of the same walk
    reached = [n["id"] for _, n, _ in then[0] if n["id"] != PERSON and n["type"] == "Person"]
    rename(seeded, TEAM, "Payments Renamed")
    rename(seeded, reached[0], "Renamed Since")
    ok(seeded, "delete_node", {"id": reached[-1], "cascade": True})
    gone = next((d, n, e) for d, n, e in then[0] if d == 1 and e["type"] != "member_of")
    ok(seeded, "delete_edge", {"type": gone[2]["type"], "source": gone[2]["source"], "target": gone[2]["target"]})
    now = [every_page(seeded, arguments, who) for arguments, who in asks]
    assert now[0] != then[0]
    for (arguments, who), answered in zip(asks, then, strict=True):
        assert every_page(seeded, {**arguments, "at": before}, who) == answered, arguments


def test_a_future_revision_is_not_found_and_one_before_compaction_is_gone(seeded: Instance) -> None:
    head = seeded.store.revision()
    for tool, arguments in (("get_node", {"id": TEAM}), ("find_nodes", {"type": "Team"}),
                            ("get_neighbors", {"id": TEAM})):  # fmt: skip
        assert error(seeded, tool, {**arguments, "at": head + 1})["code"] == "not_found"
    assert error(seeded, "diff_revisions", {"from": head + 1})["code"] == "not_found"
    assert error(seeded, "diff_revisions", {"from": 0, "to": head + 1})["code"] == "not_found"
    rename(seeded, TEAM, "Later")
    done = seeded.store.compact(Retention(changes_keep_revisions=3))
    for tool, arguments in (("get_node", {"id": TEAM}), ("find_nodes", {"type": "Team"}),
                            ("get_neighbors", {"id": TEAM})):  # fmt: skip
        gone = error(seeded, tool, {**arguments, "at": done.oldest - 2})
        assert (gone["code"], gone["oldest"]) == ("gone", done.oldest), tool
    assert error(seeded, "diff_revisions", {"from": done.oldest - 2})["code"] == "gone"
    assert ok(seeded, "get_node", {"id": TEAM, "at": done.oldest - 1})["revision"] == done.oldest - 1


def test_a_reader_who_lost_access_sees_no_past_state(seeded: Instance) -> None:
    before = seeded.store.revision()
    assert ok(seeded, "get_node", {"id": TEAM, "at": before}, READER)["node"]["id"] == TEAM
    ok(seeded, "patch_node", {"id": TEAM, "properties": {}, "visibility": "restricted", "readers": ["group:security"]})
    assert error(seeded, "get_node", {"id": TEAM, "at": before}, READER)["code"] == "forbidden"
    assert ok(seeded, "get_node", {"id": TEAM, "at": before})["node"]["visibility"] == "public"  # an admin: as it was
    hidden = seeded.store.revision()
    ok(seeded, "patch_node", {"id": TEAM, "properties": {}, "visibility": "public", "readers": None})
    assert ok(seeded, "get_node", {"id": TEAM}, READER)["node"]["visibility"] == "public"  # visible now again
    assert error(seeded, "get_node", {"id": TEAM, "at": hidden}, READER)["code"] == "forbidden"  # not then
    ok(seeded, "patch_node", {"id": TEAM, "properties": {}, "visibility": "restricted", "readers": ["group:security"]})
    teams = ok(seeded, "find_nodes", {"type": "Team", "at": before, "limit": 100}, READER)
    assert TEAM not in {n["id"] for n in teams["items"]}
    assert TEAM in {n["id"] for n in ok(seeded, "find_nodes", {"type": "Team", "at": before, "limit": 100})["items"]}
    assert error(seeded, "get_neighbors", {"id": TEAM, "at": before}, READER)["code"] == "forbidden"
    around = ok(seeded, "get_neighbors", {"id": PERSON, "at": before, "limit": 200}, READER)
    assert TEAM not in {i["node"]["id"] for i in around["items"]}
    diff = ok(seeded, "diff_revisions", {"from": before, "ids": [TEAM]}, READER)
    assert all(e["before"] is None and e["after"] is None for e in diff["items"] if e["key"] == TEAM)
    assert ok(seeded, "diff_revisions", {"from": before, "ids": [TEAM]})["items"][0]["fields"] == [
        "visibility", "readers"
    ]  # fmt: skip


def read_at(instance: Instance, uri: str, principal: Principal = LOCAL) -> dict[str, Any]:
    content = instance.dispatcher.run(principal, "test", "resources/read", uri, {}, lambda ctx: read_resource(ctx, uri))
    found: dict[str, Any] = json.loads(content.text)
    return found


def test_the_node_at_a_revision_resource_reads_what_get_node_with_at_reads(seeded: Instance) -> None:
    """`canon://nodes/{type}/{id}/at/{revision}`: a node updated since and one deleted since as they were, the same
    object get_node with at gives under `node`, under the same rule for who sees the past."""
    before = seeded.store.revision()
    rename(seeded, TEAM, "Payments Renamed")
    ok(seeded, "delete_node", {"id": PERSON, "cascade": True})
    for node_type, node_id in (("Team", TEAM), ("Person", PERSON)):
        uri = node_at_uri(node_type, node_id, before)
        assert node_at_of(uri) == (node_type, node_id, before)
        assert read_at(seeded, uri) == ok(seeded, "get_node", {"id": node_id, "at": before})["node"]
    assert read_at(seeded, node_at_uri("Team", TEAM, before))["properties"]["name"] == "Payments"
    assert read_at(seeded, node_at_uri("Team", TEAM, seeded.store.revision()))["properties"]["name"] == (
        "Payments Renamed"
    )
    with pytest.raises(NotFoundError):  # deleted since: not at the current revision
        read_at(seeded, node_at_uri("Person", PERSON, seeded.store.revision()))
    with pytest.raises(NotFoundError):  # the id under another type is no such resource
        read_at(seeded, node_at_uri("Person", TEAM, before))
    with pytest.raises(NotFoundError):  # a revision not reached yet
        read_at(seeded, node_at_uri("Team", TEAM, seeded.store.revision() + 1))
    ok(seeded, "patch_node", {"id": TEAM, "properties": {}, "visibility": "restricted", "readers": ["group:security"]})
    with pytest.raises(ForbiddenError):  # a reader who lost access sees no past state
        read_at(seeded, node_at_uri("Team", TEAM, before), READER)
    oldest = seeded.store.compact(Retention(changes_keep_revisions=2)).oldest
    with pytest.raises(GoneError):
        read_at(seeded, node_at_uri("Team", TEAM, oldest - 2))


def test_diff_revisions_pages_without_loss_pinned_to_its_later_revision(seeded: Instance) -> None:
    before = seeded.store.revision()
    rename(seeded, TEAM, "Payments Two")
    ok(seeded, "delete_node", {"id": PERSON, "cascade": True})
    whole = ok(seeded, "diff_revisions", {"from": before})
    assert whole["next_cursor"] is None
    assert whole["total"] == len(whole["items"]) > 3
    pages = [ok(seeded, "diff_revisions", {"from": before, "limit": 2})]
    rename(seeded, "team-billing", "Billing Later")  # committed while paging: not in these pages
    while pages[-1]["next_cursor"] is not None:
        pages.append(ok(seeded, "diff_revisions", {"from": before, "limit": 2, "cursor": pages[-1]["next_cursor"]}))
    assert [e for p in pages for e in p["items"]] == whole["items"]
    assert {(p["total"], p["revision"]) for p in pages} == {(whole["total"], whole["revision"])}
    changed = next(e for e in whole["items"] if e["key"] == TEAM)
    assert (changed["change"], changed["properties"]) == ("changed", {"name": {"before": "Payments",
                                                                             "after": "Payments Two"}})  # fmt: skip
    assert {e["change"] for e in whole["items"] if e["key"] != TEAM} == {"removed"}
    later = ok(seeded, "diff_revisions", {"from": before})
    assert "team-billing" in {e["key"] for e in later["items"]}
    only = ok(seeded, "diff_revisions", {"from": before, "types": ["Team"]})
    assert {e["key"] for e in only["items"]} == {TEAM, "team-billing"}
    wrong = error(seeded, "diff_revisions", {"from": before, "to": before - 1})
    assert (wrong["code"], wrong["problems"][0]["pointer"]) == ("invalid_arguments", "/from")


def test_get_neighbors_at_a_revision_answers_the_same_from_a_walk_worker(seeded_location: str | Path) -> None:
    """get_neighbors is a walk: at a past revision it reads the store's view, which a walk worker's read-only store
    reads as the serving process does."""
    instance = open_instance(Config(store=seeded_location, walk_workers=0))
    try:
        before = instance.store.revision()
        ok(instance, "delete_node", {"id": PERSON, "cascade": True})
        here = ok(instance, "get_neighbors", {"id": PERSON, "at": before, "limit": 50})
    finally:
        instance.close()
    with walking_in_a_worker(seeded_location) as walking:
        there = ok(walking, "get_neighbors", {"id": PERSON, "at": before, "limit": 50})
    assert there == here
    assert here["items"]


def test_as_of_reads_at_the_last_revision_at_or_before_that_time(seeded: Instance) -> None:
    before = seeded.store.revision()
    logged = seeded.store.changes(before - 1, 1)[0].at
    rename(seeded, TEAM, "Payments As Of")
    got = ok(seeded, "get_node", {"id": TEAM, "as_of": logged})
    assert (got["node"]["properties"]["name"], got["revision"]) == ("Payments", before)
    later = logged.replace("Z", "+00:00")  # any RFC 3339 offset names the same instant
    assert ok(seeded, "find_nodes", {"type": "Team", "as_of": later})["revision"] == before
    assert ok(seeded, "get_neighbors", {"id": TEAM, "as_of": logged})["revision"] == before
    both = error(seeded, "get_node", {"id": TEAM, "at": before, "as_of": logged})
    assert (both["code"], both["problems"][0]["pointer"]) == ("invalid_arguments", "/as_of")
    bad = error(seeded, "get_node", {"id": TEAM, "as_of": "yesterday"})
    assert (bad["code"], bad["problems"][0]["pointer"]) == ("invalid_arguments", "/as_of")
    done = seeded.store.compact(Retention(changes_keep_revisions=1))
    gone = error(seeded, "get_node", {"id": TEAM, "as_of": "2000-01-01T00:00:00Z"})
    assert (gone["code"], gone["oldest"]) == ("gone", done.oldest)
