"""Authorisation, through the one dispatch path: which tools each role may call, and which records each caller sees.

A small graph holds a node of every kind of visibility (public, internal, restricted to a user, to a group, to
admins only, and to readers that only look like a user's or a group's), edges between all of them, a chain of
glossary terms of every visibility (so lists page and completions are cut), a node that went from public to
restricted and a restricted node that was deleted. What each principal may see is worked out here from the rules
in docs/operations/security.md, without core.dispatch.access, and every read path (the read tools, resources,
completions,
the change feed) is checked against it: no id of a record the caller may not see appears anywhere in an answer,
and every total and count is the caller's own.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import anyio
import httpx2
import networkx as nx
import pytest

from core.dispatch.access import sees_change, sight_of
from core.dispatch.dispatcher import CallContext, ToolResult
from core.dispatch.registry import ResourceDefinition
from core.dispatch.resources import complete, list_resources, read_resource
from core.lang.conditions import facet_key
from core.lang.model import load_model
from core.ops.config import Config
from core.seam.instance import Instance, open_instance
from core.store.view import node_of_state
from core.values.audit import AuditRecord
from core.values.errors import ForbiddenError, NotFoundError, UnknownToolError
from core.values.operations import DeleteNode, Operation, PutEdge, PutNode
from core.values.principal import ANONYMOUS, Principal
from core.values.records import Change, Edge, Node, Visibility
from core.values.uris import NODE_TEMPLATE, node_at_uri, proposal_uri
from tests.conftest import copy_store, walking_in_a_worker
from tests.generators.pages.conftest import crawl_pages, pages_app
from tests.postgres_server import Server

pytestmark = pytest.mark.both_backends

# -- the principals -----------------------------------------------------------------------------------------------

BOB = Principal("bob", frozenset({"reader"}))
ALICE = Principal("alice", frozenset({"reader"}))
CAROL = Principal("carol", frozenset({"reader"}), frozenset({"ops"}))
DAVE = Principal("dave", frozenset({"writer"}))
ERIN = Principal("erin", frozenset({"admin"}))
NOBODY = Principal("nobody")  # authenticated, but without any role
FRANK = Principal("frank", frozenset({"writer"}), frozenset({"ops"}))  # only for the write guard

EVERYONE = [ANONYMOUS, BOB, ALICE, CAROL, DAVE, ERIN, NOBODY]
CALLERS = [p for p in EVERYONE if p is not NOBODY]  # those whose role lets them call the read tools


def names(principals: Sequence[Principal]) -> list[str]:
    return [p.name for p in principals]


# -- the graph ----------------------------------------------------------------------------------------------------

TEAM = "team-open"  # public
PERSON = "person-pat"  # public
INSIDE = "svc-inside"  # internal
ALICE_DOC = "doc-alice"  # restricted: user:alice
OPS_SVC = "svc-opsonly"  # restricted: group:ops
HIDDEN = "svc-hidden"  # restricted, no readers: admins only
USER_OPS = "svc-userops"  # restricted: user:ops (not the group ops)
GROUP_ALICE = "doc-groupalice"  # restricted: group:alice (not the user alice)
FLIPPED = "svc-flipped"  # public, later restricted to group:ops
GONE = "doc-gone"  # restricted to user:alice, later deleted
TERM_ACCESS: list[tuple[Visibility, tuple[str, ...]]] = [
    ("public", ()),
    ("internal", ()),
    ("restricted", ("user:alice",)),
    ("restricted", ("group:ops",)),
]
TERMS = [f"term-{i:03d}" for i in range(120)]  # term-i has TERM_ACCESS[i % 4]

# Each node's text carries "ID@VISIBILITY", so a state's content is recognisable in any answer.


def service(id_: str, visibility: Visibility, readers: tuple[str, ...] = ()) -> Node:
    properties = {"name": id_, "description": f"{id_}@{visibility}", "lifecycle": "production", "tier": 2}
    return Node(id_, "Service", properties, visibility, readers)


def document(id_: str, visibility: Visibility, readers: tuple[str, ...] = ()) -> Node:
    properties = {"slug": id_, "title": f"Document {id_}", "doc_type": "guide", "summary": f"{id_}@{visibility}"}
    return Node(id_, "Document", properties, visibility, readers)


def term(i: int) -> Node:
    visibility, readers = TERM_ACCESS[i % 4]
    id_ = TERMS[i]
    properties = {"term": id_, "definition": f"{id_}@{visibility}", "category": ("technical", "business")[i % 2]}
    return Node(id_, "GlossaryTerm", properties, visibility, readers)


NODES = [
    Node(TEAM, "Team", {"slug": "open", "name": "Open", "mission": f"{TEAM}@public", "area": "platform"}, "public"),
    Node(
        PERSON,
        "Person",
        {"email": "pat@example.com", "name": "Pat", "handle": "pat", "title": f"{PERSON}@public", "role": "engineer"},
        "public",
    ),
    service(INSIDE, "internal"),
    document(ALICE_DOC, "restricted", ("user:alice",)),
    service(OPS_SVC, "restricted", ("group:ops",)),
    service(HIDDEN, "restricted"),
    service(USER_OPS, "restricted", ("user:ops",)),
    document(GROUP_ALICE, "restricted", ("group:alice",)),
    service(FLIPPED, "public"),
    document(GONE, "restricted", ("user:alice",)),
    *(term(i) for i in range(len(TERMS))),
]
EDGES = [
    *(Edge("owns", TEAM, t) for t in (INSIDE, ALICE_DOC, OPS_SVC, HIDDEN, USER_OPS, GROUP_ALICE, FLIPPED, GONE)),
    Edge("member_of", PERSON, TEAM, {"role": "member"}),
    *(Edge("authored", PERSON, d) for d in (ALICE_DOC, GROUP_ALICE, GONE)),
    Edge("documents", ALICE_DOC, INSIDE),
    Edge("documents", ALICE_DOC, OPS_SVC),
    Edge("documents", GROUP_ALICE, HIDDEN),
    Edge("depends_on", INSIDE, OPS_SVC, {"criticality": "hard"}),
    Edge("depends_on", INSIDE, HIDDEN, {"criticality": "hard"}),
    Edge("depends_on", OPS_SVC, FLIPPED, {"criticality": "soft"}),
    Edge("depends_on", FLIPPED, INSIDE, {"criticality": "soft"}),
    Edge("depends_on", HIDDEN, USER_OPS, {"criticality": "hard"}),
    Edge("depends_on", OPS_SVC, HIDDEN, {"criticality": "soft"}),
    *(Edge("related_to", a, b) for a, b in pairwise(TERMS)),
    *(Edge("defines", ALICE_DOC, t) for t in (TERMS[0], TERMS[2], TERMS[3])),
]
HISTORY: list[list[Operation]] = [
    [PutNode(n) for n in NODES],
    [PutEdge(e) for e in EDGES],
    [PutNode(service(FLIPPED, "restricted", ("group:ops",)))],  # public -> restricted
    [DeleteNode(GONE, cascade=True)],
]

# Which of the named nodes each principal sees, written out by hand (the rules below must agree).
CORE = {TEAM, PERSON, INSIDE, ALICE_DOC, OPS_SVC, HIDDEN, USER_OPS, GROUP_ALICE, FLIPPED}
AUTHENTICATED = {TEAM, PERSON, INSIDE}
CORE_SEEN = {
    "anonymous": {TEAM, PERSON},
    "bob": AUTHENTICATED,
    "alice": AUTHENTICATED | {ALICE_DOC},
    "carol": AUTHENTICATED | {OPS_SVC, FLIPPED},
    "dave": AUTHENTICATED,
    "erin": CORE,
    "nobody": AUTHENTICATED,
}


def may_see(who: Principal, visibility: str, readers: Iterable[str]) -> bool:
    """The visibility rules of docs/operations/security.md, written out again (not core.dispatch.access)."""
    if "admin" in who.roles or visibility == "public":
        return True
    if not who.authenticated:
        return False
    if visibility == "internal":
        return True
    mine = {f"user:{who.name}", *(f"group:{g}" for g in who.groups)}
    return visibility == "restricted" and bool(mine & set(readers))


def build(location: str | Path) -> Instance:
    instance = open_instance(Config(store=location, seed=False, walk_workers=0))
    try:
        for operations in HISTORY:
            instance.store.commit(operations, principal="test")
    except BaseException:
        instance.close()
        raise
    return instance


@dataclass(frozen=True)
class Truth:
    """The whole store, read directly (unfiltered), and what each principal should see of it."""

    nodes: dict[str, Node]  # current nodes by id
    edges: list[Edge]  # current edges
    changes: list[Change]  # the whole change log
    ever: dict[str, str]  # every node id the store has held -> its type

    @classmethod
    def of(cls, instance: Instance) -> Truth:
        store = instance.store
        changes = store.changes(0, 1_000_000)
        ever = {c.key: str(c.type) for c in changes if c.kind == "node"}
        return cls({n.id: n for n in store.iter_nodes()}, list(store.iter_edges()), changes, ever)

    def seen(self, who: Principal) -> set[str]:
        return {id_ for id_, n in self.nodes.items() if may_see(who, n.visibility, n.readers)}

    def hidden(self, who: Principal) -> set[str]:
        """Every id the store has held that `who` may not see now (deleted nodes included)."""
        return set(self.ever) - self.seen(who)

    def seen_edges(self, who: Principal) -> list[Edge]:
        seen = self.seen(who)
        return [e for e in self.edges if e.source in seen and e.target in seen]

    def topology(self, who: Principal) -> nx.Graph[str]:
        """The visible nodes and the edges between them, undirected and without parallel edges."""
        graph: nx.Graph[str] = nx.Graph()
        graph.add_nodes_from(self.seen(who))
        graph.add_edges_from((e.source, e.target) for e in self.seen_edges(who))
        return graph

    def feed(self, who: Principal, changes: Sequence[Change] | None = None) -> list[dict[str, Any]]:
        """The change log as `who` should read it: node changes with a visible state (the others null and
        `redacted`), edge changes whose ends are both visible now, and model changes. Admins read it whole."""
        seen = self.seen(who)
        out: list[dict[str, Any]] = []
        for change in self.changes if changes is None else changes:
            entry = change.to_json()
            if "admin" in who.roles:
                pass
            elif change.kind == "edge":
                state = change.after if change.after is not None else change.before
                assert state is not None
                if not (state["source"] in seen and state["target"] in seen):
                    continue
            elif change.kind == "node":
                shown = False
                for side in ("before", "after"):
                    state = entry[side]
                    if state is None:
                        continue
                    if may_see(who, state["visibility"], state.get("readers", ())):
                        shown = True
                    else:
                        entry[side], entry["redacted"] = None, True
                if not shown:
                    continue
            out.append(entry)
        return out

    def feed_secrets(self, who: Principal) -> set[str]:
        """What no change feed may show `who`: ids of nodes it never could see, and every state it cannot see."""
        visible_once: set[str] = set()
        secrets: set[str] = set()
        for change in self.changes:
            if change.kind != "node":
                continue
            for state in (change.before, change.after):
                if state is None:
                    continue
                marker = f"{change.key}@{state['visibility']}"
                if may_see(who, state["visibility"], state.get("readers", ())):
                    visible_once.add(change.key)
                else:
                    secrets.add(marker)
        return secrets | (set(self.ever) - visible_once)


# -- fixtures and helpers -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def instance(module_store_location: str | Path) -> Iterator[Instance]:
    """One instance shared by the read tests: nothing here writes to it."""
    opened = build(module_store_location)
    yield opened
    opened.close()


@pytest.fixture(scope="module", params=["in-process", "worker"])
def walking(
    instance: Instance, module_store_location: str | Path, request: pytest.FixtureRequest
) -> Iterator[Instance]:
    """The shared instance, whose walks run in the process; or another on its store whose walks run in a walk
    worker process (core.dispatch.walkers): a walk's visibility is the caller's either way."""
    if request.param == "in-process":
        yield instance
        return
    with walking_in_a_worker(module_store_location) as opened:
        yield opened


@pytest.fixture(scope="module")
def truth(instance: Instance) -> Truth:
    return Truth.of(instance)


@pytest.fixture(scope="module")
def built(
    backend: str, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[str | Path]:
    """A store holding the graph and its history, built once per module and backend and never opened by the tests:
    `scratch` opens a copy of it (a file copy; PostgreSQL's CREATE DATABASE TEMPLATE), which costs a quarter of
    building it again."""
    if backend == "sqlite":
        location = tmp_path_factory.mktemp("built") / "canon.db"
        build(location).close()
        yield location
        return
    server: Server = request.getfixturevalue("postgres_server")
    url = server.new_database()
    build(url).close()
    yield url
    server.drop_database(url)


@pytest.fixture
def scratch(built: str | Path, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Instance]:
    """An instance of its own, for a test that writes: on a copy of `built`, so it holds the same graph and history
    as `build` makes."""
    server: Server | None = None
    if isinstance(built, Path):
        location: str | Path = copy_store(built, tmp_path / "canon.db")
    else:
        postgres: Server = request.getfixturevalue("postgres_server")
        location, server = postgres.new_database(copy_of=built), postgres
    opened = open_instance(Config(store=location, seed=False, walk_workers=0))
    try:
        yield opened
    finally:
        opened.close()
        if server is not None:
            server.drop_database(str(location))


@pytest.fixture
def audit(instance: Instance) -> Iterator[list[AuditRecord]]:
    """The audit records of this test's calls on the shared instance."""
    records: list[AuditRecord] = []
    hook = records.append
    instance.dispatcher.audit_hooks.append(hook)
    yield records
    instance.dispatcher.audit_hooks.remove(hook)


def call(instance: Instance, who: Principal, name: str, arguments: dict[str, Any]) -> ToolResult:
    return instance.dispatcher.call_tool(who, "test", name, arguments)


def ok(instance: Instance, who: Principal, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = call(instance, who, name, arguments)
    assert result.value is not None, result.as_json()
    return result.value


def refusal(instance: Instance, who: Principal, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = call(instance, who, name, arguments)
    assert result.is_error, result.as_json()
    body: dict[str, Any] = result.as_json()["error"]
    return body


def all_pages(instance: Instance, who: Principal, name: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    pages = [ok(instance, who, name, arguments)]
    while pages[-1]["next_cursor"] is not None:
        pages.append(ok(instance, who, name, {**arguments, "cursor": pages[-1]["next_cursor"]}))
        assert len(pages) < 100
    return pages


def run(instance: Instance, who: Principal, action: str, target: str, work: Callable[[Any], Any]) -> Any:
    """A resource read or list or a completion, on the dispatch path as the surfaces run it."""
    return instance.dispatcher.run(who, "test", action, target, {}, work)


def assert_shows_none_of(answer: Any, secrets: Iterable[str]) -> None:
    text = json.dumps(answer, ensure_ascii=False, default=str)
    assert sorted(s for s in secrets if s in text) == []


def snapshot(instance: Instance) -> tuple[int, list[dict[str, Any]], list[dict[str, Any]]]:
    store = instance.store
    return store.revision(), [n.to_json() for n in store.iter_nodes()], [e.to_json() for e in store.iter_edges()]


# -- the oracle ---------------------------------------------------------------------------------------------------


def test_the_store_holds_the_graph_and_its_history(truth: Truth) -> None:
    assert set(truth.nodes) == {n.id for n in NODES} - {GONE}
    assert truth.nodes[FLIPPED].visibility == "restricted"
    assert GONE in truth.ever
    assert not any(GONE in (e.source, e.target) for e in truth.edges)
    assert len(truth.edges) == len(EDGES) - 2  # the deleted node's two edges went with it


@pytest.mark.parametrize("who", EVERYONE, ids=names(EVERYONE))
def test_the_rules_here_agree_with_the_table_written_by_hand(truth: Truth, who: Principal) -> None:
    terms_seen = {"anonymous": 30, "alice": 90, "carol": 90, "erin": 120}.get(who.name, 60)  # a quarter per access

    assert truth.seen(who) & CORE == CORE_SEEN[who.name]
    assert len(truth.seen(who) & set(TERMS)) == terms_seen


# -- get_node -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("who", CALLERS, ids=names(CALLERS))
def test_get_node_answers_visible_nodes_and_refuses_the_others(
    instance: Instance, truth: Truth, who: Principal
) -> None:
    seen, hidden = truth.seen(who), truth.hidden(who)

    for id_ in sorted(truth.ever):
        result = call(instance, who, "get_node", {"id": id_})
        if id_ in seen:
            assert result.value is not None, result.as_json()
            assert result.value["node"] == truth.nodes[id_].to_json()
            assert_shows_none_of(result.as_json(), hidden)
        elif id_ in truth.nodes:
            body = result.as_json()["error"]
            assert (body["code"], body["kind"], body["key"]) == ("forbidden", "node", id_)
            assert_shows_none_of(body, (hidden - {id_}) | {f"{id_}@"})  # nor the node's content
        else:
            assert result.as_json()["error"]["code"] == "not_found"


# -- find_nodes ---------------------------------------------------------------------------------------------------

FIND_NODES: list[tuple[str, dict[str, Any], Callable[[Node], bool]]] = [
    ("everything", {}, lambda n: True),
    ("type", {"type": "Service"}, lambda n: n.type == "Service"),
    (
        "where",
        {"type": "GlossaryTerm", "where": {"category": "technical"}},
        lambda n: n.type == "GlossaryTerm" and n.properties["category"] == "technical",
    ),
    ("text-restricted", {"text": "@RESTRICTED"}, lambda n: n.visibility == "restricted"),
    ("text-internal", {"text": "@internal"}, lambda n: n.visibility == "internal"),
]


@pytest.mark.parametrize(("arguments", "matches"), [c[1:] for c in FIND_NODES], ids=[c[0] for c in FIND_NODES])
@pytest.mark.parametrize("who", CALLERS, ids=names(CALLERS))
def test_find_nodes_lists_and_counts_only_visible_nodes(
    instance: Instance, truth: Truth, who: Principal, arguments: dict[str, Any], matches: Callable[[Node], bool]
) -> None:
    expected = sorted(id_ for id_ in truth.seen(who) if matches(truth.nodes[id_]))

    pages = all_pages(instance, who, "find_nodes", {**arguments, "limit": 17})

    assert [n["id"] for page in pages for n in page["items"]] == expected
    assert {page["total"] for page in pages} == {len(expected)}
    assert_shows_none_of(pages, truth.hidden(who))


FACETED = [("GlossaryTerm", "category"), ("Service", "lifecycle"), ("Service", "tier")]


@pytest.mark.parametrize(("type_", "facet"), FACETED, ids=[f"{t}.{f}" for t, f in FACETED])
@pytest.mark.parametrize("who", CALLERS, ids=names(CALLERS))
def test_find_nodes_facets_count_only_visible_nodes(
    instance: Instance, truth: Truth, who: Principal, type_: str, facet: str
) -> None:
    """A facet counts what `total` counts: the nodes the caller may see, never a hidden one; each count is the
    total of the same find with that value as a condition."""
    seen = [truth.nodes[i] for i in truth.seen(who) if truth.nodes[i].type == type_]
    expected: dict[str, int] = {}
    for n in seen:
        if facet in n.properties:
            key = str(facet_key(n.properties[facet]))
            expected[key] = expected.get(key, 0) + 1

    answer = ok(instance, who, "find_nodes", {"type": type_, "limit": 1, "facets": [facet]})

    assert answer["total"] == len(seen)
    assert answer["facets"] == {facet: expected}
    for key, count in answer["facets"][facet].items():
        value = json.loads(key) if facet == "tier" else key
        assert ok(instance, who, "find_nodes", {"type": type_, "where": {facet: value}, "limit": 1})["total"] == count


# -- get_neighbors ------------------------------------------------------------------------------------------------

ORIGINS = [(TEAM, 2), (PERSON, 3), (INSIDE, 2), (ALICE_DOC, 2), (OPS_SVC, 2), (HIDDEN, 1), (FLIPPED, 3),
           (TERMS[1], 3), (GONE, 1)]  # fmt: skip


@pytest.mark.parametrize(("origin", "depth"), ORIGINS, ids=[o for o, _ in ORIGINS])
@pytest.mark.parametrize("who", CALLERS, ids=names(CALLERS))
def test_get_neighbors_walks_only_through_visible_nodes(
    walking: Instance, truth: Truth, who: Principal, origin: str, depth: int
) -> None:
    arguments = {"id": origin, "depth": depth, "limit": 4}
    if origin not in truth.seen(who):
        body = refusal(walking, who, "get_neighbors", arguments)
        assert (body["code"], body["key"]) == ("forbidden" if origin in truth.nodes else "not_found", origin)
        return
    reached = nx.single_source_shortest_path_length(truth.topology(who), origin, cutoff=depth)
    expected = {id_: hops for id_, hops in reached.items() if id_ != origin}

    pages = all_pages(walking, who, "get_neighbors", arguments)

    items = [item for page in pages for item in page["items"]]
    assert {i["node"]["id"]: i["depth"] for i in items} == expected
    assert len(items) == len(expected)
    assert {page["total"] for page in pages} == {len(expected)}
    seen = truth.seen(who)
    assert all(i["edge"]["source"] in seen and i["edge"]["target"] in seen for i in items)
    assert_shows_none_of(pages, truth.hidden(who))


# -- find_paths ---------------------------------------------------------------------------------------------------

PAIRS = [(PERSON, INSIDE), (TEAM, FLIPPED), (PERSON, TERMS[0]), (TERMS[0], TERMS[4]), (INSIDE, HIDDEN),
         (ALICE_DOC, TEAM), (PERSON, GONE)]  # fmt: skip


@pytest.mark.parametrize(("source", "target"), PAIRS, ids=[f"{s}--{t}" for s, t in PAIRS])
@pytest.mark.parametrize("who", CALLERS, ids=names(CALLERS))
def test_find_paths_finds_only_paths_through_visible_nodes(
    walking: Instance, truth: Truth, who: Principal, source: str, target: str
) -> None:
    arguments = {"source": source, "target": target, "max_depth": 4, "limit": 3}
    for end in (source, target):
        if end not in truth.seen(who):
            body = refusal(walking, who, "find_paths", arguments)
            assert (body["code"], body["key"]) == ("forbidden" if end in truth.nodes else "not_found", end)
            return
    expected = {tuple(p) for p in nx.all_simple_paths(truth.topology(who), source, target, cutoff=4)}

    pages = all_pages(walking, who, "find_paths", arguments)

    found = [item for page in pages for item in page["items"]]
    assert {tuple(p["nodes"]) for p in found} == expected
    assert len(found) == len(expected)
    assert {page["total"] for page in pages} == {len(expected)}
    assert [len(p["nodes"]) for p in found] == sorted(len(p["nodes"]) for p in found)
    assert_shows_none_of(pages, truth.hidden(who))


def test_a_path_through_a_restricted_node_exists_only_for_those_who_see_it(instance: Instance) -> None:
    # every way from person-pat to term-000 passes doc-alice (restricted to user:alice) or a term alice alone sees
    answers = {who.name: ok(instance, who, "find_paths", {"source": PERSON, "target": TERMS[0]}) for who in CALLERS}

    assert {name for name, a in answers.items() if a["total"]} == {"alice", "erin"}
    assert {name: a["items"][0]["nodes"] for name, a in answers.items() if a["items"]} == {
        "alice": [PERSON, ALICE_DOC, TERMS[0]],
        "erin": [PERSON, ALICE_DOC, TERMS[0]],
    }
    assert all(ALICE_DOC in p["nodes"] for p in answers["alice"]["items"])
    assert answers["erin"]["total"] > answers["alice"]["total"]  # erin also goes through svc-hidden and others


# -- query_graph --------------------------------------------------------------------------------------------------

Rows = set[tuple[str, ...]]


def _pairs(edges: list[Edge], type_: str) -> Rows:
    return {(e.source, e.target) for e in edges if e.type == type_}


QUERIES: list[tuple[str, dict[str, Any], Callable[[list[Edge]], Rows]]] = [
    (
        "owned-by-id",
        {"match": [{"node": "t", "id": TEAM}, {"edge": "owns", "from": "t", "to": "x"}], "return": ["x"]},
        lambda edges: {(t,) for s, t in _pairs(edges, "owns") if s == TEAM},
    ),
    (
        "chain",
        {
            "match": [{"edge": "authored", "from": "p", "to": "d"}, {"edge": "documents", "from": "d", "to": "s"}],
            "return": ["p", "s"],
        },
        lambda edges: {(p, s) for p, d in _pairs(edges, "authored") for d2, s in _pairs(edges, "documents") if d == d2},
    ),
    ("related", {"match": [{"edge": "related_to", "from": "a", "to": "b"}]}, lambda e: _pairs(e, "related_to")),
    (
        "typed",
        {"match": [{"node": "s", "type": "Service"}, {"edge": "depends_on", "from": "s", "to": "d"}]},
        lambda edges: _pairs(edges, "depends_on"),
    ),
    (
        "hidden-id",
        {"match": [{"node": "s", "id": HIDDEN}, {"edge": "owns", "from": "t", "to": "s"}], "return": ["t", "s"]},
        lambda edges: {(s, t) for s, t in _pairs(edges, "owns") if t == HIDDEN},
    ),
]


@pytest.mark.parametrize(("arguments", "rows"), [q[1:] for q in QUERIES], ids=[q[0] for q in QUERIES])
@pytest.mark.parametrize("who", CALLERS, ids=names(CALLERS))
def test_query_graph_binds_and_counts_only_visible_nodes(
    walking: Instance, truth: Truth, who: Principal, arguments: dict[str, Any], rows: Callable[[list[Edge]], Rows]
) -> None:
    expected = rows(truth.seen_edges(who))
    returned: list[str] = arguments.get("return", ["s", "d"] if arguments["match"][0].get("type") else ["a", "b"])

    pages = all_pages(walking, who, "query_graph", {**arguments, "limit": 25})

    found = [tuple(row[name] for name in returned) for page in pages for row in page["items"]]
    assert set(found) == expected
    assert len(found) == len(expected)
    assert {page["total"] for page in pages} == {len(expected)}
    assert_shows_none_of(pages, truth.hidden(who))


# -- find_nodes by conditions, find_paths and query_graph at a past revision --------------------------------------


def then_and_now(truth: Truth) -> tuple[int, dict[str, Node], set[tuple[str, str, str]]]:
    """The revision before svc-flipped was restricted and doc-gone deleted, and the nodes and edges then, read
    from the change log (the last state logged at or before it), not from the view."""
    at = min(c.revision for c in truth.changes if c.key == FLIPPED and c.before is not None) - 1
    nodes: dict[str, Node] = {}
    edges: set[tuple[str, str, str]] = set()
    for change in truth.changes:
        if change.revision > at:
            break
        if change.kind == "node":
            if change.after is None:
                nodes.pop(change.key, None)
            else:
                nodes[change.key] = node_of_state(change.after)
        elif change.kind == "edge":
            state = change.after or change.before
            assert state is not None
            ref = (str(state["type"]), str(state["source"]), str(state["target"]))
            (edges.discard if change.after is None else edges.add)(ref)
    return at, nodes, edges


def seen_then(truth: Truth, who: Principal, nodes: dict[str, Node]) -> set[str]:
    """The rule for the past, written out again: visible then, and now (or deleted since)."""
    now = truth.nodes
    return {id_ for id_, n in nodes.items() if may_see(who, n.visibility, n.readers)
            and (id_ not in now or may_see(who, now[id_].visibility, now[id_].readers))}  # fmt: skip


@pytest.mark.parametrize("who", CALLERS, ids=names(CALLERS))
def test_past_finds_paths_and_patterns_show_only_what_was_visible_then_and_is_now(
    walking: Instance, truth: Truth, who: Principal
) -> None:
    at, nodes, edges = then_and_now(truth)
    assert {FLIPPED, GONE} <= set(nodes)
    assert nodes[FLIPPED].visibility == "public"
    seen = seen_then(truth, who, nodes)
    hidden = set(truth.ever) - seen
    found = all_pages(walking, who, "find_nodes", {"type": "Service", "where": {"description": {"contains": "@"}},
                                                   "at": at, "limit": 3})  # fmt: skip
    assert {n["id"] for p in found for n in p["items"]} == {i for i in seen if nodes[i].type == "Service"}
    assert_shows_none_of(found, hidden)
    graph: nx.Graph[str] = nx.Graph()
    graph.add_nodes_from(seen)
    graph.add_edges_from((s, t) for _, s, t in edges if s in seen and t in seen)
    for source, target in PAIRS:
        arguments = {"source": source, "target": target, "max_depth": 4, "limit": 3, "at": at}
        if not {source, target} <= seen:
            body = refusal(walking, who, "find_paths", arguments)
            assert body["code"] in ("forbidden", "not_found"), body
            assert_shows_none_of(body, hidden - {source, target})
            continue
        pages = all_pages(walking, who, "find_paths", arguments)
        expected = {tuple(p) for p in nx.all_simple_paths(graph, source, target, cutoff=4)}
        assert {tuple(p["nodes"]) for page in pages for p in page["items"]} == expected, (source, target)
        assert_shows_none_of(pages, hidden)
    for _, arguments, rows in QUERIES:
        pages = all_pages(walking, who, "query_graph", {**arguments, "limit": 25, "at": at})
        returned: list[str] = arguments.get("return", ["s", "d"] if arguments["match"][0].get("type") else ["a", "b"])
        got = {tuple(row[name] for name in returned) for page in pages for row in page["items"]}
        assert got == rows([Edge(*ref) for ref in edges if ref[1] in seen and ref[2] in seen])
        assert_shows_none_of(pages, hidden)


# -- describe_model -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("who", CALLERS, ids=names(CALLERS))
def test_describe_model_counts_only_visible_nodes_and_edges(instance: Instance, truth: Truth, who: Principal) -> None:
    nodes = Counter(truth.nodes[id_].type for id_ in truth.seen(who))
    edges = Counter(e.type for e in truth.seen_edges(who))

    answer = ok(instance, who, "describe_model", {})

    assert {t["name"]: t["count"] for t in answer["node_types"]} == {t: nodes[t] for t in instance.model.node_types}
    assert {t["name"]: t["count"] for t in answer["edge_types"]} == {t: edges[t] for t in instance.model.edge_types}
    assert_shows_none_of(answer, truth.hidden(who))


# -- get_changes --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("start", ["beginning", "before-the-flip"])
@pytest.mark.parametrize("who", CALLERS, ids=names(CALLERS))
def test_get_changes_shows_what_the_caller_may_see_of_each_change(
    instance: Instance, truth: Truth, who: Principal, start: str
) -> None:
    since = 0 if start == "beginning" else truth.changes[-1].revision - 10
    expected = [entry for entry in truth.feed(who) if entry["revision"] > since]

    pages = all_pages(instance, who, "get_changes", {"since": since, "limit": 40})

    assert [item for page in pages for item in page["items"]] == expected
    assert {page["total"] for page in pages} == {len(expected)}
    assert_shows_none_of(pages, truth.feed_secrets(who))


# Principals beyond EVERYONE whose reader tags only look like others' (`user:ops`, `group:alice`) or name both.
LOOKALIKES = [
    Principal("ops", frozenset({"reader"}), frozenset({"alice"})),
    Principal("alice", frozenset({"writer"}), frozenset({"ops"})),
]


@pytest.mark.parametrize("who", [*EVERYONE, *LOOKALIKES], ids=names([*EVERYONE, *LOOKALIKES]))
def test_the_store_s_change_filter_and_sees_change_select_the_same_entries(instance: Instance, who: Principal) -> None:
    """`Store.changes` decides in SQL (`core.store.sql.change_filter`) what `core.dispatch.access.sees_change` decides
    for
    change events (subscriptions): over the whole history (every visibility, a flip, a deletion and its edges,
    the model) both pick the same entries for every principal."""
    assert instance.index is not None
    instance.index.sync()
    sight = sight_of(who)
    everything = instance.store.changes(0, 1_000_000)

    by_sql = instance.store.changes(0, 1_000_000, sight=sight)
    by_rule = [c for c in everything if sees_change(sight, c, instance.index.graph)]

    assert [c.revision for c in by_sql] == [c.revision for c in by_rule]
    assert {c.kind for c in by_rule} >= {"node", "edge"}
    assert len(by_rule) == len(everything) if sight is None else 0 < len(by_rule) < len(everything)


SEE_THE_FLIP = {"carol", "erin"}  # who sees svc-flipped after it became restricted to group:ops
SEE_THE_GONE = {"alice", "erin"}  # who could see doc-gone (restricted to user:alice) before it was deleted


@pytest.mark.parametrize("who", CALLERS, ids=names(CALLERS))
def test_a_node_that_became_restricted_reads_as_leaving_the_view_without_its_new_content(
    instance: Instance, who: Principal
) -> None:
    items = [i for page in all_pages(instance, who, "get_changes", {}) for i in page["items"]]

    [created, flip] = [i for i in items if i["key"] == FLIPPED]
    assert created["before"] is None
    assert created["after"]["properties"]["description"] == f"{FLIPPED}@public"
    assert flip["before"] == created["after"]
    if who.name in SEE_THE_FLIP:
        assert flip["after"]["properties"]["description"] == f"{FLIPPED}@restricted"
        assert "redacted" not in flip
    else:
        assert (flip["after"], flip["redacted"]) == (None, True)
    gone = [(i["op"], i["before"] is None, i["after"] is None) for i in items if i["key"] == GONE]
    assert gone == ([("put", True, False), ("delete", False, True)] if who.name in SEE_THE_GONE else [])
    gone_edges = [i for i in items if i["kind"] == "edge" and GONE in i["key"]]
    assert len(gone_edges) == (4 if who is ERIN else 0)  # created, then deleted; an end is gone: admins only


# -- resources ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("who", CALLERS, ids=names(CALLERS))
def test_resources_list_pages_through_only_visible_nodes(instance: Instance, truth: Truth, who: Principal) -> None:
    seen = truth.seen(who)
    expected = [r.uri for r in instance.registry.resources] + [
        f"canon://nodes/{truth.nodes[id_].type}/{id_}" for id_ in sorted(seen)
    ]
    pages: list[list[ResourceDefinition]] = []
    cursor: str | None = None
    while True:
        entries, cursor = run(instance, who, "resources/list", "", lambda ctx, at=cursor: list_resources(ctx, at))
        pages.append(entries)
        if cursor is None:
            break
        assert len(pages) < 10

    assert [r.uri for page in pages for r in page] == expected
    assert all(len(page) <= 100 for page in pages)
    assert len(pages) == -(-len(expected) // 100)
    assert_shows_none_of([r.to_json() for page in pages for r in page], truth.hidden(who))


@pytest.mark.parametrize("who", CALLERS, ids=names(CALLERS))
def test_reading_a_node_resource_is_forbidden_unless_the_node_is_visible(
    instance: Instance, truth: Truth, who: Principal, audit: list[AuditRecord]
) -> None:
    seen, hidden = truth.seen(who), truth.hidden(who)
    outcomes: dict[str, str] = {}

    for id_, type_ in sorted(truth.ever.items()):
        uri = f"canon://nodes/{type_}/{id_}"
        if id_ in seen:
            content = run(instance, who, "resources/read", uri, lambda ctx, uri=uri: read_resource(ctx, uri))
            assert json.loads(content.text) == truth.nodes[id_].to_json()
            assert_shows_none_of(content.text, hidden)
            outcomes[uri] = "ok"
        elif id_ in truth.nodes:
            with pytest.raises(ForbiddenError) as caught:
                run(instance, who, "resources/read", uri, lambda ctx, uri=uri: read_resource(ctx, uri))
            assert (caught.value.kind, caught.value.key) == ("node", id_)
            assert f"{id_}@" not in str(caught.value)
            outcomes[uri] = "forbidden"
        else:
            with pytest.raises(NotFoundError):
                run(instance, who, "resources/read", uri, lambda ctx, uri=uri: read_resource(ctx, uri))
            outcomes[uri] = "not_found"

    assert {r.target: r.outcome for r in audit} == outcomes
    assert {(r.principal, r.action) for r in audit} == {(who.name, "resources/read")}
    assert set(outcomes.values()) == ({"ok", "not_found"} if who is ERIN else {"ok", "forbidden", "not_found"})


@pytest.mark.parametrize("who", CALLERS, ids=names(CALLERS))
def test_the_node_at_a_revision_resource_shows_only_what_the_caller_may_see(
    instance: Instance, truth: Truth, who: Principal
) -> None:
    """`canon://nodes/{type}/{id}/at/{revision}` at the current revision reads through the store's past view, a
    path of its own: the same nodes, the same refusals as the node resource, and nothing hidden in a body."""
    seen, hidden, revision = truth.seen(who), truth.hidden(who), instance.store.revision()
    outcomes: set[str] = set()
    for id_, type_ in sorted(truth.ever.items()):
        uri = node_at_uri(type_, id_, revision)
        if id_ in seen:
            content = run(instance, who, "resources/read", uri, lambda ctx, uri=uri: read_resource(ctx, uri))
            assert json.loads(content.text) == truth.nodes[id_].to_json()
            assert_shows_none_of(content.text, hidden)
            outcomes.add("ok")
        elif id_ in truth.nodes:
            with pytest.raises(ForbiddenError) as caught:
                run(instance, who, "resources/read", uri, lambda ctx, uri=uri: read_resource(ctx, uri))
            assert_shows_none_of(str(caught.value), hidden - {id_})
            outcomes.add("forbidden")
        else:
            with pytest.raises(NotFoundError):
                run(instance, who, "resources/read", uri, lambda ctx, uri=uri: read_resource(ctx, uri))
            outcomes.add("not_found")
    assert outcomes == ({"ok", "not_found"} if who is ERIN else {"ok", "forbidden", "not_found"})


@pytest.mark.parametrize("who", CALLERS, ids=names(CALLERS))
def test_the_changes_resource_shows_the_latest_changes_as_get_changes_would(
    instance: Instance, truth: Truth, who: Principal
) -> None:
    expected = truth.feed(who, truth.changes[-100:])

    content = run(instance, who, "resources/read", "canon://changes", lambda ctx: read_resource(ctx, "canon://changes"))

    assert json.loads(content.text) == {"items": expected, "revision": instance.store.revision()}
    assert_shows_none_of(content.text, truth.feed_secrets(who))


COMPLETIONS: list[tuple[str, dict[str, str]]] = [
    ("", {"type": "GlossaryTerm"}),
    ("", {}),
    ("svc-", {}),
    ("doc-", {"type": "Document"}),
    ("term-00", {"type": "GlossaryTerm"}),
]


@pytest.mark.parametrize(
    ("prefix", "context"), COMPLETIONS, ids=[f"{p}*:{c.get('type', 'any')}" for p, c in COMPLETIONS]
)
@pytest.mark.parametrize("who", CALLERS, ids=names(CALLERS))
def test_id_completions_offer_and_count_only_visible_nodes(
    instance: Instance, truth: Truth, who: Principal, prefix: str, context: dict[str, str]
) -> None:
    expected = sorted(
        id_
        for id_ in truth.seen(who)
        if id_.startswith(prefix) and truth.nodes[id_].type == context.get("type", truth.nodes[id_].type)
    )

    values, total, more = run(
        instance, who, "completion/complete", NODE_TEMPLATE,
        lambda ctx: complete(ctx, NODE_TEMPLATE, "id", prefix, context),
    )  # fmt: skip

    assert values == expected[:100]
    assert (total, more) == (len(expected), len(expected) > 100)
    assert_shows_none_of(values, truth.hidden(who))


def test_a_principal_without_a_role_may_read_no_resource_list_none_nor_complete(
    instance: Instance, audit: list[AuditRecord]
) -> None:
    public = "canon://nodes/Team/" + next(id_ for id_, n in instance_nodes(instance) if n.visibility == "public")
    actions: list[tuple[str, str, Callable[[CallContext], object]]] = [
        ("resources/read", public, lambda ctx: read_resource(ctx, public)),
        ("resources/read", "canon://model", lambda ctx: read_resource(ctx, "canon://model")),
        ("resources/list", "", lambda ctx: list_resources(ctx, None)),
        ("completion/complete", NODE_TEMPLATE, lambda ctx: complete(ctx, NODE_TEMPLATE, "id", "", {})),
    ]
    for action, target, work in actions:
        with pytest.raises(ForbiddenError):
            run(instance, NOBODY, action, target, work)

    assert [(r.principal, r.action, r.outcome) for r in audit] == [
        ("nobody", action, "forbidden") for action, _, _ in actions
    ]
    assert instance.dispatcher.tools_for(NOBODY, "test") == []


def instance_nodes(instance: Instance) -> list[tuple[str, Any]]:
    return [(n.id, n) for n in instance.store.iter_nodes("Team")]


# -- roles and tools ----------------------------------------------------------------------------------------------

PERMISSION = {  # docs/operations/security.md, "What a principal may do: roles"
    **dict.fromkeys(
        [
            "search",
            "describe_model",
            "get_node",
            "find_nodes",
            "get_neighbors",
            "find_paths",
            "query_graph",
            "get_changes",
            "diff_revisions",
            "get_proposal",
            "find_proposals",
        ],
        "read",
    ),
    **dict.fromkeys(
        [
            "upsert_node",
            "patch_node",
            "delete_node",
            "upsert_edge",
            "delete_edge",
            "write_batch",
            "propose_changes",
            "revise_proposal",
            "withdraw_proposal",
            "comment_on_proposal",
            "review_proposal",
        ],
        "write",
    ),
    "get_audit_log": "admin",
    "apply_model": "admin",
}
GRANTED = {
    "anonymous": {"read"},
    "bob": {"read"},
    "alice": {"read"},
    "carol": {"read"},
    "dave": {"read", "write"},
    "erin": {"read", "write", "admin"},
    "nobody": set[str](),
}
VALID = {  # arguments a caller with the role could use (on public nodes), so only the role can refuse them
    "search": {"query": "open team"},
    "describe_model": {},
    "get_node": {"id": TEAM},
    "find_nodes": {"type": "Team"},
    "get_neighbors": {"id": TEAM},
    "find_paths": {"source": PERSON, "target": TEAM},
    "query_graph": {"match": [{"edge": "member_of", "from": "p", "to": "t"}]},
    "get_changes": {"since": 0},
    "diff_revisions": {"from": 0, "limit": 1},
    "upsert_node": {"id": TEAM, "type": "Team", "properties": {"slug": "open", "name": "Renamed", "mission": "m",
                                                               "area": "data"}},
    "patch_node": {"id": TEAM, "properties": {"name": "Renamed"}},
    "delete_node": {"id": PERSON, "cascade": True},
    "upsert_edge": {"type": "member_of", "source": PERSON, "target": TEAM, "properties": {"role": "lead"}},
    "delete_edge": {"type": "member_of", "source": PERSON, "target": TEAM},
    "write_batch": {"operations": [{"op": "delete_edge", "type": "member_of", "source": PERSON, "target": TEAM}]},
    "get_audit_log": {"limit": 5},
    "apply_model": {"model": load_model().document, "dry_run": True},  # the store's own model: an empty plan
    "propose_changes": {"title": "t", "rationale": "r", "operations": [{"op": "patch_node", "id": TEAM}]},
    "get_proposal": {"id": "p-000000000000"},
    "find_proposals": {},
    "revise_proposal": {"id": "p-000000000000", "title": "t"},
    "withdraw_proposal": {"id": "p-000000000000"},
    "comment_on_proposal": {"id": "p-000000000000", "text": "?"},
    "review_proposal": {"id": "p-000000000000", "decision": "reject"},
}  # fmt: skip


def test_every_tool_of_the_registry_needs_the_permission_the_docs_give_it(instance: Instance) -> None:
    assert {t.name: t.permission for t in instance.registry.tools} == PERMISSION
    assert set(VALID) == set(PERMISSION)


@pytest.mark.parametrize("who", EVERYONE, ids=names(EVERYONE))
def test_tools_for_lists_exactly_the_tools_the_role_grants(
    instance: Instance, who: Principal, audit: list[AuditRecord]
) -> None:
    listed = [t.name for t in instance.dispatcher.tools_for(who, "test")]

    assert listed == [t.name for t in instance.registry.tools if PERMISSION[t.name] in GRANTED[who.name]]
    [record] = audit
    assert (record.principal, record.action, record.outcome) == (who.name, "tools/list", "ok")


@pytest.mark.parametrize("tool", list(PERMISSION))
@pytest.mark.parametrize("who", EVERYONE, ids=names(EVERYONE))
def test_a_tool_outside_the_role_is_forbidden_and_audited(
    instance: Instance, who: Principal, tool: str, audit: list[AuditRecord]
) -> None:
    before = snapshot(instance)

    if PERMISSION[tool] in GRANTED[who.name]:
        # authorised: the call gets as far as checking its arguments (and changes nothing)
        body = refusal(instance, who, tool, {"unexpected": True})
        assert body["code"] == "invalid_arguments"
        [record] = audit
        assert record.outcome == "invalid"
    else:
        for arguments in (VALID[tool], {"unexpected": True}):  # refused before the arguments are even looked at
            body = refusal(instance, who, tool, arguments)
            assert (body["code"], body["kind"], body["key"]) == ("forbidden", "tool", tool)
        assert [(r.principal, r.action, r.target, r.outcome) for r in audit] == [
            (who.name, "tools/call", tool, "forbidden")
        ] * 2
    assert snapshot(instance) == before


@pytest.mark.parametrize("who", EVERYONE, ids=names(EVERYONE))
def test_an_unknown_tool_raises_for_everyone_unlike_a_forbidden_one(
    instance: Instance, who: Principal, audit: list[AuditRecord]
) -> None:
    with pytest.raises(UnknownToolError) as caught:
        call(instance, who, "drop_everything", {})

    assert caught.value.tool == "drop_everything"
    [record] = audit
    assert (record.principal, record.target, record.outcome) == (who.name, "drop_everything", "unknown")


# -- the write guard ----------------------------------------------------------------------------------------------


def properties(node: Node, **changes: Any) -> dict[str, Any]:
    return dict(node.properties) | changes


GUARDED: list[tuple[str, str, dict[str, Any]]] = [
    ("replace-hidden", "upsert_node",
     {"id": HIDDEN, "type": "Service", "properties": properties(service(HIDDEN, "restricted"), tier=1)}),
    ("reveal-hidden", "upsert_node",
     {"id": HIDDEN, "type": "Service", "properties": properties(service(HIDDEN, "public")), "visibility": "public"}),
    ("take-alices", "upsert_node",
     {"id": ALICE_DOC, "type": "Document", "properties": properties(document(ALICE_DOC, "restricted")),
      "readers": ["user:dave"]}),
    ("delete-ops", "delete_node", {"id": OPS_SVC, "cascade": True}),
    ("delete-hidden", "delete_node", {"id": HIDDEN, "cascade": True}),
    ("change-edge", "upsert_edge",
     {"type": "depends_on", "source": INSIDE, "target": HIDDEN, "properties": {"criticality": "soft"}}),
    ("new-edge", "upsert_edge",
     {"type": "depends_on", "source": HIDDEN, "target": INSIDE, "properties": {"criticality": "soft"}}),
    ("delete-edge", "delete_edge", {"type": "documents", "source": ALICE_DOC, "target": INSIDE}),
    ("batch", "write_batch", {"operations": [  # the first operation alone would be allowed
        {"op": "upsert_node", "id": INSIDE, "type": "Service",
         "properties": properties(service(INSIDE, "internal"), tier=3)},
        {"op": "delete_edge", "type": "depends_on", "source": INSIDE, "target": OPS_SVC},
    ]}),
]  # fmt: skip


@pytest.mark.parametrize(("tool", "arguments"), [g[1:] for g in GUARDED], ids=[g[0] for g in GUARDED])
def test_a_writer_cannot_touch_a_node_or_edge_it_cannot_see_but_an_admin_can(
    scratch: Instance, tool: str, arguments: dict[str, Any]
) -> None:
    records: list[AuditRecord] = []
    scratch.dispatcher.audit_hooks.append(records.append)
    before = snapshot(scratch)

    body = refusal(scratch, DAVE, tool, arguments)

    assert body["code"] == "forbidden"
    assert body["kind"] in ("node", "edge")
    assert snapshot(scratch) == before  # nothing written, not even the batch's allowed first operation
    assert_shows_none_of(body, {f"{HIDDEN}@", f"{ALICE_DOC}@", f"{OPS_SVC}@"})
    assert [(r.principal, r.outcome) for r in records] == [("dave", "forbidden")]

    answer = ok(scratch, ERIN, tool, arguments)

    assert answer["revision"] > before[0]
    assert scratch.store.revision() == answer["revision"]


def test_a_writer_may_change_what_it_can_see(scratch: Instance) -> None:
    operations: list[dict[str, Any]] = [
        {"op": "upsert_node", "id": INSIDE, "type": "Service",
         "properties": properties(service(INSIDE, "internal"), tier=1)},
        {"op": "upsert_edge", "type": "member_of", "source": PERSON, "target": TEAM, "properties": {"role": "lead"}},
        {"op": "upsert_node", "id": "svc-daves", "type": "Service",
         "properties": properties(service("svc-daves", "internal"))},
        {"op": "upsert_edge", "type": "depends_on", "source": "svc-daves", "target": INSIDE,
         "properties": {"criticality": "soft"}},
    ]  # fmt: skip

    answer = ok(scratch, DAVE, "write_batch", {"operations": operations})

    assert answer["changes"] == 4
    inside = scratch.store.node(INSIDE)
    assert inside is not None
    assert (inside.properties["tier"], inside.visibility) == (1, "internal")  # access kept when not given
    assert scratch.store.edge("depends_on", "svc-daves", INSIDE) is not None


def test_a_writer_in_a_group_may_change_that_groups_restricted_node(scratch: Instance) -> None:
    arguments = {"id": OPS_SVC, "type": "Service", "properties": properties(service(OPS_SVC, "restricted"), tier=1)}

    assert refusal(scratch, DAVE, "upsert_node", arguments)["code"] == "forbidden"
    ok(scratch, FRANK, "upsert_node", arguments)

    node = scratch.store.node(OPS_SVC)
    assert node is not None
    assert (node.properties["tier"], node.visibility, node.readers) == (1, "restricted", ("group:ops",))


def test_a_cascading_delete_does_not_remove_edges_to_nodes_the_writer_cannot_see(scratch: Instance) -> None:
    # svc-inside is internal (dave sees it), but it has edges to svc-opsonly, svc-hidden and from doc-alice
    before = snapshot(scratch)

    result = call(scratch, DAVE, "delete_node", {"id": INSIDE, "cascade": True})

    assert result.as_json().get("error", {}).get("code") == "forbidden", result.as_json()
    assert snapshot(scratch) == before
    assert scratch.store.edge("depends_on", INSIDE, HIDDEN) is not None


def test_a_refused_delete_does_not_name_edges_to_nodes_the_writer_cannot_see(scratch: Instance) -> None:
    hidden = Truth.of(scratch).hidden(DAVE)

    body = refusal(scratch, DAVE, "delete_node", {"id": INSIDE})

    assert_shows_none_of(body, hidden)


# -- the pages surface: every page, CSV and JSON download a caller can reach ---------------------------------------


@pytest.mark.parametrize("who", CALLERS, ids=names(CALLERS))
def test_the_pages_and_their_downloads_show_only_what_the_caller_may_see(
    instance: Instance, truth: Truth, who: Principal
) -> None:
    seeds = ["/browse/", "/browse/changes", "/browse/search?q=term", "/browse/search?q=restricted",
             "/browse/search?q=svc", "/browse/types/Service?_text=%40restricted"]  # fmt: skip
    pages = crawl_pages(instance, who, seeds)
    changes = json.dumps([p["items"] for p in all_pages(instance, who, "get_changes", {"limit": 500})])
    named_by_the_log = {id_ for id_ in truth.hidden(who) if json.dumps(id_) in changes}  # a node that left the view
    secrets = (truth.hidden(who) - named_by_the_log) | {
        f"{id_}@{truth.nodes[id_].visibility}" for id_ in named_by_the_log if id_ in truth.nodes
    }
    leaked = {url: sorted(s for s in secrets if s in body) for url, body in pages.items()}
    assert {url: s for url, s in leaked.items() if s} == {}
    node_pages = {url.removeprefix("/browse/nodes/") for url in pages if url.count("/") == 3 and "?" not in url
                  and url.startswith("/browse/nodes/")}  # fmt: skip
    refused = {u.removeprefix("/browse/nodes/") for u, body in pages.items() if "<h1>40" in body}
    assert refused <= named_by_the_log | (set(truth.ever) - set(truth.nodes))  # links from the change log only
    assert node_pages - refused == truth.seen(who)  # and every node it may see is reachable by a link
    downloads = [url for url in pages if ".csv" in url or ".json" in url]
    assert any(url.endswith("/new") for url in pages)  # the "New" forms are reached (and show no data)
    assert any("/edge/new?name=" in url for url in pages)  # so are the forms adding an edge with properties
    assert any(".csv" in u for u in downloads)
    assert any(".json" in u for u in downloads)


def test_a_node_created_restricted_on_the_new_form_is_on_the_pages_of_its_readers_only(scratch: Instance) -> None:
    """FRANK (a writer in group ops) creates a Service from its New form, restricted to group:ops: the crawl of
    every page and download holds it for CAROL (a reader in ops) and for no one outside the group (the anonymous
    caller, a reader, a writer), and every caller's get_node agrees (ERIN, an admin, reads it too). The crawl is
    not run for every caller here (it is, over the same graph, in the test above): a crawl costs seconds."""
    made, secret = "svc-formmade", "svc-formmade@restricted"
    app = pages_app(scratch, FRANK)

    async def create() -> httpx2.Response:
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://pages") as http:
            await http.get("/browse/types/Service/new")
            access = {"_visibility": "restricted", "_readers": "group:ops"}
            form = {"_csrf": http.cookies["canon_pages_csrf"], "_id": made, "name": made, "description": secret,
                    "lifecycle": "production", "tier": "2", **access}  # fmt: skip
            return await http.post("/browse/types/Service/new", data=form)

    answer = anyio.run(create)
    assert answer.status_code == 303, answer.text[:500]
    stored = scratch.store.node(made)
    assert stored is not None
    assert (stored.visibility, stored.readers) == ("restricted", ("group:ops",))
    seeds = ["/browse/", "/browse/changes", "/browse/search?q=svc", "/browse/types/Service",
             f"/browse/nodes/{made}"]  # fmt: skip
    for who in CALLERS:
        assert (call(scratch, who, "get_node", {"id": made}).error is None) is (who in (CAROL, ERIN)), who.name
    for who in (ANONYMOUS, ALICE, DAVE, CAROL):
        readable = who is CAROL
        crawled = crawl_pages(scratch, who, seeds)
        showing = sorted(url for url, body in crawled.items() if secret in body)
        naming = sorted(url for url, body in crawled.items() if made in body and url != f"/browse/nodes/{made}")
        if readable:
            assert f"/browse/nodes/{made}" in showing, who.name
            assert any(url.startswith("/browse/types/Service.csv") for url in showing), who.name
        else:
            assert (showing, naming) == ([], []), who.name
            assert "<h1>40" in crawled[f"/browse/nodes/{made}"], who.name  # its page: the refusal, nothing of it


# -- proposals: what each caller is shown of a proposal's operations and diff --------------------------------------
PROPOSED = {"Team": "mission", "Person": "title", "Service": "description", "Document": "summary"}
NEW_EDGE = Edge("documents", GROUP_ALICE, OPS_SVC)  # both ends restricted, to different readers


def _proposed(truth: Truth) -> list[dict[str, Any]]:
    """A patch of every named node (each new value names its node) and a new edge between two restricted ones."""
    patches = [{"op": "patch_node", "id": id_, "properties": {PROPOSED[truth.nodes[id_].type]: f"{id_}@proposed"}}
               for id_ in sorted(CORE)]  # fmt: skip
    edge = {"op": "upsert_edge", "type": NEW_EDGE.type, "source": NEW_EDGE.source, "target": NEW_EDGE.target}
    return [*patches, edge]


def test_a_proposal_shows_each_caller_only_the_records_it_may_read(scratch: Instance, truth: Truth) -> None:
    """get_proposal, its resource and find_proposals, for every caller: its operations, touched records and diff
    hold exactly the records the caller may read, and no answer names a record it may not."""
    operations = _proposed(truth)
    arguments = {"title": "Everything", "rationale": "All of it.", "operations": operations}
    proposed = scratch.dispatcher.call_tool(ERIN, "test", "propose_changes", arguments)
    assert proposed.value is not None, proposed.error
    id_ = proposed.value["id"]
    for who in CALLERS:
        seen, hidden = truth.seen(who), truth.hidden(who)
        edge_seen = NEW_EDGE.source in seen and NEW_EDGE.target in seen
        nodes = sorted(CORE & seen)
        shown = ok(scratch, who, "get_proposal", {"id": id_})
        assert [e["key"] for e in shown["diff"]] == nodes + ([NEW_EDGE.key] if edge_seen else []), who.name
        assert all(e["properties"] for e in shown["diff"] if e["kind"] == "node")
        assert [o.get("id", o.get("source")) for o in shown["operations"]] == nodes + (
            [NEW_EDGE.source] if edge_seen else [])  # fmt: skip
        assert shown["proposal"]["touches"] == sorted(
            [f"node:{n}" for n in nodes] + ([f"edge:{NEW_EDGE.key}"] if edge_seen else []))  # fmt: skip
        assert_shows_none_of(shown, hidden)
        uri = proposal_uri(id_)
        content = run(scratch, who, "resources/read", uri, lambda ctx, uri=uri: read_resource(ctx, uri))
        assert_shows_none_of(content.text, hidden)
        listed = [p for page in all_pages(scratch, who, "find_proposals", {}) for p in page["items"]]
        assert [p["id"] for p in listed] == [id_]
        assert_shows_none_of(listed, hidden)
        for node in sorted(CORE):
            found = ok(scratch, who, "find_proposals", {"node": node})
            assert found["total"] == (1 if node in seen else 0), (who.name, node)


def test_a_read_at_a_proposal_shows_each_caller_only_the_records_it_may_read(scratch: Instance, truth: Truth) -> None:
    """get_node, find_nodes and get_neighbors at a proposal that patches every named node and adds an edge between
    two restricted ones, for every caller: a node as proposed exactly where the caller may read it, and no answer
    names a record it may not (the proposal's values name their nodes, so a leak of one shows)."""
    arguments = {"title": "Everything", "rationale": "All of it.", "operations": _proposed(truth)}
    proposed = scratch.dispatcher.call_tool(ERIN, "test", "propose_changes", arguments)
    assert proposed.value is not None, proposed.error
    at = {"proposal": proposed.value["id"]}
    for who in CALLERS:
        seen, hidden = truth.seen(who), truth.hidden(who)
        for id_ in sorted(CORE):
            result = call(scratch, who, "get_node", {"id": id_, **at}).as_json()
            if id_ in seen:
                assert f"{id_}@proposed" in json.dumps(result["node"]["properties"]), (who.name, id_)
            else:
                assert result["error"]["code"] == "forbidden", (who.name, id_)
            assert_shows_none_of(result, hidden - {id_})  # a refusal names the id asked for, as at the current one
        for type_ in sorted({truth.nodes[i].type for i in CORE}):
            listed = [n for page in all_pages(scratch, who, "find_nodes", {"type": type_, "limit": 100, **at})
                      for n in page["items"]]  # fmt: skip
            assert {n["id"] for n in listed} & CORE == {i for i in CORE & seen if truth.nodes[i].type == type_}
            assert_shows_none_of(listed, hidden)
        for id_ in sorted(CORE & seen):
            around = [i for page in all_pages(scratch, who, "get_neighbors", {"id": id_, "limit": 100, **at})
                      for i in page["items"]]  # fmt: skip
            assert_shows_none_of(around, hidden)
            if id_ == NEW_EDGE.source:
                shows = any(i["edge"]["type"] == NEW_EDGE.type and i["node"]["id"] == NEW_EDGE.target for i in around)
                assert shows == (NEW_EDGE.target in seen), who.name
