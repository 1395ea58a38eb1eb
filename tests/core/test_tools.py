"""The read-only tools through the dispatch path, checked against answers computed directly from the store."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import networkx as nx
import pytest
from jsonschema import Draft202012Validator

from core.dispatch import proposals
from core.dispatch.dispatcher import ToolResult
from core.dispatch.registry import type_schema
from core.ops.config import Config
from core.seam.instance import Instance, open_instance
from core.store import Store
from core.values.paging import encode_cursor
from core.values.principal import LOCAL
from tests.conftest import walking_in_a_worker

ORIGIN = "team-payments"
PERSON = "person-ada-okafor"
SERVICE = "svc-checkout-api"
PROPOSAL = "p-000000000001"  # the first of the two proposals the shared instance holds


@pytest.fixture(scope="module")
def instance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Instance]:
    """A seeded instance shared by the module: every tool here only reads. It holds two proposals (which change no
    revision), the first with the known id `PROPOSAL`."""
    opened = open_instance(Config(store=tmp_path_factory.mktemp("tools") / "canon.db", walk_workers=0))
    for n in (1, 2):
        made = proposals.propose(opened.store, LOCAL, [{"op": "patch_node", "id": SERVICE, "properties": {}}],
                                 f"Proposal {n}", "For the read tools.")  # fmt: skip
        with opened.store.unit_of_work() as work:
            work.execute("UPDATE proposals SET id = ? WHERE id = ?", (f"p-00000000000{n}", made.id))
    yield opened
    opened.close()


@pytest.fixture(scope="module", params=["in-process", "mapped", "worker"])
def walking(instance: Instance, request: pytest.FixtureRequest) -> Iterator[Instance]:
    """The shared instance, whose walks run in the process over the index it built (dicts); another on its store
    whose index is the file the first saved, mapped (core.index.mapped), walking in the process; or one whose walks
    run in a walk worker process (core.dispatch.walkers), over the mapped file too: the same answers."""
    assert instance.index is not None
    instance.save_index()  # waits for the save the first start began (after it, the index stands on the file)
    if request.param == "in-process":
        instance.index.reload()  # built from the store again: dicts, until a newer file is saved (none here)
        assert not instance.index.mapped
        yield instance
        return
    if request.param == "mapped":
        opened = open_instance(Config(store=instance.config.store, walk_workers=0))
        try:
            assert opened.index is not None
            assert opened.index.mapped
            yield opened
        finally:
            opened.close()
        return
    with walking_in_a_worker(instance.config.store) as opened:
        yield opened


@pytest.fixture(scope="module")
def store(instance: Instance) -> Store:
    return instance.store


def call(instance: Instance, name: str, arguments: dict[str, Any]) -> ToolResult:
    return instance.dispatcher.call_tool(LOCAL, "test", name, arguments)


def ok(instance: Instance, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = call(instance, name, arguments)
    assert result.value is not None, result.as_json()
    return result.value


def error(instance: Instance, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = call(instance, name, arguments)
    assert result.is_error, result.as_json()
    body: dict[str, Any] = result.as_json()["error"]
    return body


def all_pages(instance: Instance, name: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    """Every page of a paged answer, following next_cursor."""
    pages = [ok(instance, name, arguments)]
    while pages[-1]["next_cursor"] is not None:
        pages.append(ok(instance, name, {**arguments, "cursor": pages[-1]["next_cursor"]}))
        assert len(pages) < 1000
    return pages


def topology(store: Store, edge_types: set[str] | None = None, *, directed: bool) -> nx.Graph[str]:
    """The store's edges as a simple graph, built from the store (not from the index the tools use)."""
    graph: nx.Graph[str] = nx.DiGraph() if directed else nx.Graph()
    graph.add_nodes_from(n.id for n in store.iter_nodes())
    graph.add_edges_from((e.source, e.target) for e in store.iter_edges() if not edge_types or e.type in edge_types)
    return graph


# -- find_nodes ---------------------------------------------------------------------------------------------------


def test_find_nodes_text_matches_the_types_text_fields_case_insensitively(instance: Instance, store: Store) -> None:
    fields = instance.model.node_types["Service"].text
    expected = sorted(
        n.id
        for n in store.iter_nodes("Service")
        if any("checkout" in str(n.properties.get(f, "")).lower() for f in fields)
    )

    answer = ok(instance, "find_nodes", {"type": "Service", "text": "ChEcKoUt", "limit": 100})

    assert [n["id"] for n in answer["items"]] == expected
    assert answer["total"] == len(expected)
    assert SERVICE in expected
    assert all(n["type"] == "Service" for n in answer["items"])


def test_find_nodes_text_without_a_type_searches_every_types_text_fields(instance: Instance, store: Store) -> None:
    text = {name: t.text for name, t in instance.model.node_types.items()}
    expected = sorted(
        n.id
        for n in store.iter_nodes()
        if any("checkout" in str(n.properties.get(f, "")).lower() for f in text[n.type])
    )

    ids = [n["id"] for page in all_pages(instance, "find_nodes", {"text": "CHECKOUT"}) for n in page["items"]]

    assert ids == expected
    assert len({n.split("-")[0] for n in ids}) > 1  # services, teams, documents, ...


def test_find_nodes_where_on_an_unknown_property_names_the_close_one(instance: Instance) -> None:
    body = error(instance, "find_nodes", {"type": "Service", "where": {"tierr": 1}})

    assert body["code"] == "invalid_arguments"
    [problem] = body["problems"]
    assert problem["pointer"] == "/where/tierr"
    assert "did you mean tier" in problem["message"]  # the hint is the feature


def test_find_nodes_where_without_a_type_is_invalid(instance: Instance) -> None:
    body = error(instance, "find_nodes", {"where": {"tier": 1}})

    assert body["code"] == "invalid_arguments"
    assert [p["pointer"] for p in body["problems"]] == ["/where"]


def test_find_nodes_where_selects_exactly_the_matching_nodes(instance: Instance, store: Store) -> None:
    expected = sorted(
        n.id
        for n in store.iter_nodes("Service")
        if n.properties["tier"] == 1 and n.properties["lifecycle"] == "production"
    )

    answer = ok(
        instance,
        "find_nodes",
        {"type": "Service", "where": {"tier": 1, "lifecycle": {"eq": "production"}}, "limit": 100},
    )

    assert [n["id"] for n in answer["items"]] == expected
    assert answer["total"] == len(expected) > 0


def test_find_nodes_where_with_a_value_of_another_json_type_matches_nothing(instance: Instance) -> None:
    # the schema allows any JSON value for eq; an array is never equal to a string, so nothing matches
    answer = ok(instance, "find_nodes", {"type": "Service", "where": {"lifecycle": {"eq": ["production"]}}})

    assert (answer["items"], answer["total"]) == ([], 0)


def test_find_nodes_pages_concatenate_to_every_match_in_id_order(instance: Instance, store: Store) -> None:
    people = [n.id for n in store.iter_nodes("Person")]

    pages = all_pages(instance, "find_nodes", {"type": "Person", "limit": 7})

    assert [n["id"] for page in pages for n in page["items"]] == people
    assert len(pages) == math.ceil(len(people) / 7)
    assert {page["total"] for page in pages} == {len(people)}
    assert all(len(page["items"]) == 7 and page["truncated"] for page in pages[:-1])
    assert pages[-1]["next_cursor"] is None
    assert pages[-1]["truncated"] is False
    assert {page["limit"] for page in pages} == {7}


def test_a_cursor_from_another_query_is_refused(instance: Instance) -> None:
    cursor = ok(instance, "find_nodes", {"type": "Person", "limit": 7})["next_cursor"]
    assert cursor is not None

    body = error(instance, "find_nodes", {"type": "Service", "limit": 7, "cursor": cursor})

    assert body["code"] == "invalid_arguments"
    assert [p["pointer"] for p in body["problems"]] == ["/cursor"]


def test_a_damaged_cursor_is_refused(instance: Instance) -> None:
    body = error(instance, "find_nodes", {"type": "Person", "cursor": "not-a-cursor"})

    assert body["code"] == "invalid_arguments"
    assert [p["pointer"] for p in body["problems"]] == ["/cursor"]


PAGED = {  # every tool that pages, with arguments that have more than one page
    "search": {"query": "payments", "limit": 2},
    "find_nodes": {"type": "Person", "limit": 2},
    "get_neighbors": {"id": ORIGIN, "depth": 2, "limit": 2},
    "find_paths": {"source": ORIGIN, "target": PERSON, "limit": 1},
    "query_graph": {"match": [{"node": "t", "type": "Team"}], "limit": 2},
    "get_changes": {"limit": 2},
    "diff_revisions": {"from": 1500, "limit": 2},
    "get_audit_log": {"limit": 2},
    "find_proposals": {"limit": 1},
}
FORGED_POSITIONS = ["team", [1], {"after": 1}, 2**70, -1, 1.5, True, None]


def forged(instance: Instance, tool: str, arguments: dict[str, Any], position: Any) -> dict[str, Any]:
    """`arguments` with a cursor anyone could build: the same encoding and fingerprint, a position of their own."""
    full = {**instance.registry.input_defaults(tool), **arguments}
    return {**arguments, "cursor": encode_cursor(tool, full, position)}


def test_every_paged_tool_is_in_the_forged_cursor_tests(instance: Instance) -> None:
    paged = {t.name for t in instance.registry.tools if "cursor" in t.input_schema.get("properties", {})}
    assert paged == set(PAGED)


@pytest.mark.parametrize("tool", sorted(PAGED))
def test_a_forged_cursor_position_is_invalid_arguments_at_cursor(instance: Instance, tool: str) -> None:
    issued = ok(instance, tool, PAGED[tool])["next_cursor"]
    assert issued is not None  # the arguments page, so the position is what the forgeries change
    for position in FORGED_POSITIONS:
        if tool in ("find_nodes", "find_proposals") and isinstance(position, str):
            continue  # an id: any string is a place to start from
        body = error(instance, tool, forged(instance, tool, PAGED[tool], position))

        assert body["code"] == "invalid_arguments", (position, body)
        assert [p["pointer"] for p in body["problems"]] == ["/cursor"]


@pytest.mark.parametrize(
    "position",
    [{"after": -3, "until": 1, "total": -3}, {"after": 5, "until": 4, "total": 1},
     {"after": 1, "until": 2**62, "total": 1}, {"after": 1, "until": 10, "total": 11},
     {"after": 1, "until": 10, "total": 1, "revision": -1}],
)  # fmt: skip
def test_get_changes_refuses_a_cursor_the_log_could_not_have_issued(instance: Instance, position: Any) -> None:
    body = error(instance, "get_changes", forged(instance, "get_changes", PAGED["get_changes"], position))

    assert body["code"] == "invalid_arguments"
    assert [p["pointer"] for p in body["problems"]] == ["/cursor"]


@pytest.mark.parametrize(
    "position", [{"to": 2**62, "total": 1, "node": "team-a"}, {"to": 1, "total": 1, "node": "team-a"}]
)
def test_diff_revisions_refuses_a_cursor_past_the_store_or_before_from(instance: Instance, position: Any) -> None:
    body = error(instance, "diff_revisions", forged(instance, "diff_revisions", PAGED["diff_revisions"], position))

    assert body["code"] == "invalid_arguments"
    assert [p["pointer"] for p in body["problems"]] == ["/cursor"]


@pytest.mark.parametrize("text", ["\x00", "a\x00", "team\x00"])  # one, two (no index) and five characters
def test_an_argument_holding_the_nul_character_is_invalid_before_a_store_sees_it(instance: Instance, text: str) -> None:
    """PostgreSQL's text cannot hold NUL, so no store keeps it: a search or id holding one is refused up front,
    alike on both backends, instead of matching nothing on one and failing inside the other."""
    for tool, arguments in (("find_nodes", {"text": text}), ("get_node", {"id": text}),
                            ("find_nodes", {"where": {"name": text}})):  # fmt: skip
        body = error(instance, tool, arguments)
        assert body["code"] == "invalid_arguments", (tool, body)
        assert "NUL" in body["problems"][0]["message"]


# -- get_node -----------------------------------------------------------------------------------------------------


def test_get_node_returns_the_stored_node(instance: Instance, store: Store) -> None:
    stored = store.node(SERVICE)
    assert stored is not None

    assert ok(instance, "get_node", {"id": SERVICE})["node"] == stored.to_json()


# -- get_neighbors ------------------------------------------------------------------------------------------------


def neighbours(instance: Instance, arguments: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    pages = all_pages(instance, "get_neighbors", {**arguments, "limit": 200})
    return [item for page in pages for item in page["items"]], pages


def expected_depths(store: Store, origin: str, direction: str, depth: int, types: set[str] | None) -> dict[str, int]:
    graph = topology(store, types, directed=direction != "both")
    if direction == "in":
        graph = graph.reverse()
    reached = nx.single_source_shortest_path_length(graph, origin, cutoff=depth)
    return {node: hops for node, hops in reached.items() if node != origin}


@pytest.mark.parametrize("direction", ["out", "in", "both"])
def test_get_neighbors_follows_only_edges_in_the_given_direction(
    walking: Instance, store: Store, direction: str
) -> None:
    items, pages = neighbours(walking, {"id": ORIGIN, "direction": direction})

    assert items
    for item in items:
        edge, node = item["edge"], item["node"]["id"]
        assert item["depth"] == 1
        if direction == "out":
            assert (edge["source"], edge["target"]) == (ORIGIN, node)
        elif direction == "in":
            assert (edge["source"], edge["target"]) == (node, ORIGIN)
        else:
            assert {edge["source"], edge["target"]} == {ORIGIN, node}
        assert store.edge(edge["type"], edge["source"], edge["target"]) is not None
    assert {i["node"]["id"]: 1 for i in items} == expected_depths(store, ORIGIN, direction, 1, None)
    assert pages[0]["total"] == len(items)


def test_get_neighbors_follows_only_the_given_edge_types(instance: Instance, store: Store) -> None:
    types = {"owns", "documents"}

    items, _ = neighbours(instance, {"id": ORIGIN, "edge_types": sorted(types), "depth": 2})

    assert {i["edge"]["type"] for i in items} == types
    assert {i["node"]["id"]: i["depth"] for i in items} == expected_depths(store, ORIGIN, "both", 2, types)


@pytest.mark.parametrize(("inverse", "forward"), [
    ({"direction": "out", "edge_types": ["members"]}, {"direction": "in", "edge_types": ["member_of"]}),
    ({"direction": "in", "edge_types": ["members"]}, {"direction": "out", "edge_types": ["member_of"]}),
    ({"direction": "both", "edge_types": ["members"]}, {"direction": "both", "edge_types": ["member_of"]}),
    ({"direction": "out", "edge_types": ["owns", "members"]},
     {"direction": "both", "edge_types": ["owns", "member_of"]}),
])  # fmt: skip
def test_get_neighbors_reads_an_inverse_edge_name_as_its_type_the_other_way(
    walking: Instance, inverse: dict[str, Any], forward: dict[str, Any]
) -> None:
    expected, _ = neighbours(walking, {"id": ORIGIN, **forward})

    items, _ = neighbours(walking, {"id": ORIGIN, **inverse})

    assert items == expected
    if inverse["edge_types"] == ["members"] and inverse["direction"] == "out":  # a team's members arrive at it
        assert items
        assert {(i["edge"]["type"], i["edge"]["target"]) for i in items} == {("member_of", ORIGIN)}


def test_an_edge_name_mixing_a_type_and_its_inverse_follows_both_ways(instance: Instance) -> None:
    both, _ = neighbours(instance, {"id": ORIGIN, "direction": "both", "edge_types": ["member_of"]})

    items, _ = neighbours(instance, {"id": ORIGIN, "direction": "out", "edge_types": ["member_of", "members"]})

    assert items == both


def test_an_unknown_edge_name_is_refused_with_the_names_there_are(instance: Instance) -> None:
    body = error(instance, "get_neighbors", {"id": ORIGIN, "edge_types": ["memberz"]})

    assert body["code"] == "invalid_arguments"
    assert [p["pointer"] for p in body["problems"]] == ["/edge_types/0"]
    assert "members" in body["problems"][0]["message"]


@pytest.mark.parametrize("direction", ["out", "in", "both"])
def test_get_neighbors_at_depth_two_lists_nearer_nodes_first_and_counts_every_node(
    walking: Instance, store: Store, direction: str
) -> None:
    origin = PERSON if direction == "out" else ORIGIN
    items, pages = neighbours(walking, {"id": origin, "direction": direction, "depth": 2})
    depths = [i["depth"] for i in items]

    assert depths == sorted(depths)
    assert set(depths) == {1, 2}
    reached = {i["node"]["id"]: i["depth"] for i in items}
    assert len(reached) == len(items)  # each node once, at its nearest depth
    assert reached == expected_depths(store, origin, direction, 2, None)
    assert {page["total"] for page in pages} == {len(items)}
    for item in items:  # every node is reached through an edge from the level before
        edge = item["edge"]
        previous = ({edge["source"], edge["target"]} - {item["node"]["id"]}).pop()
        assert reached.get(previous, 0) == item["depth"] - 1


def test_get_neighbors_pages_by_limit_with_a_constant_total(instance: Instance) -> None:
    everything, _ = neighbours(instance, {"id": ORIGIN, "depth": 2})

    pages = all_pages(instance, "get_neighbors", {"id": ORIGIN, "depth": 2, "limit": 25})

    assert [i["node"]["id"] for page in pages for i in page["items"]] == [i["node"]["id"] for i in everything]
    assert {page["total"] for page in pages} == {len(everything)}
    assert pages[-1]["next_cursor"] is None


def test_get_neighbors_of_an_unknown_node_is_not_found(instance: Instance) -> None:
    body = error(instance, "get_neighbors", {"id": "team-nobody"})

    assert (body["code"], body["kind"], body["key"]) == ("not_found", "node", "team-nobody")


# -- find_paths ---------------------------------------------------------------------------------------------------


def paths(instance: Instance, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    return [item for page in all_pages(instance, "find_paths", {**arguments, "limit": 50}) for item in page["items"]]


@pytest.mark.parametrize(
    "arguments",
    [
        {"source": PERSON, "target": SERVICE, "max_depth": 3},
        {"source": PERSON, "target": SERVICE, "max_depth": 4, "direction": "out"},
        {"source": SERVICE, "target": PERSON, "max_depth": 4, "direction": "in"},
        {"source": PERSON, "target": SERVICE, "max_depth": 4, "edge_types": ["member_of", "owns", "reports_to"]},
    ],
    ids=["both", "out", "in", "edge-types"],
)
def test_find_paths_returns_every_simple_path_shortest_first(
    walking: Instance, store: Store, arguments: dict[str, Any]
) -> None:
    direction = arguments.get("direction", "both")
    types = set(arguments.get("edge_types", []))

    found = paths(walking, arguments)

    assert found
    lengths = [len(p["edges"]) for p in found]
    assert lengths == sorted(lengths)
    assert max(lengths) <= arguments["max_depth"]
    for path in found:
        nodes, edges = path["nodes"], path["edges"]
        assert (nodes[0], nodes[-1]) == (arguments["source"], arguments["target"])
        assert len(set(nodes)) == len(nodes)  # simple
        assert len(edges) == len(nodes) - 1
        for here, there, edge in zip(nodes, nodes[1:], edges, strict=False):
            if direction == "out":
                assert (edge["source"], edge["target"]) == (here, there)
            elif direction == "in":
                assert (edge["source"], edge["target"]) == (there, here)
            else:
                assert {edge["source"], edge["target"]} == {here, there}
            assert not types or edge["type"] in types
            assert store.edge(edge["type"], edge["source"], edge["target"]) is not None
    graph = topology(store, types or None, directed=direction != "both")
    if direction == "in":
        graph = graph.reverse()
    expected = {
        tuple(p) for p in nx.all_simple_paths(graph, arguments["source"], arguments["target"], arguments["max_depth"])
    }
    assert {tuple(p["nodes"]) for p in found} == expected
    assert lengths[0] == nx.shortest_path_length(graph, arguments["source"], arguments["target"])


def test_find_paths_reads_an_inverse_edge_name_as_its_type_the_other_way(walking: Instance) -> None:
    between = {"source": SERVICE, "target": PERSON, "max_depth": 2}  # the service <-owns- a team <-member_of- Ada
    expected = paths(walking, {**between, "direction": "in", "edge_types": ["owns", "member_of"]})

    found = paths(walking, {**between, "direction": "out", "edge_types": ["owned_by", "members"]})

    assert found == expected
    assert found
    assert [[e["type"] for e in p["edges"]] for p in found] == [["owns", "member_of"]] * len(found)
    assert paths(walking, {**between, "direction": "out", "edge_types": ["owns", "member_of"]}) == []


def test_find_paths_respects_max_depth(instance: Instance, store: Store) -> None:
    shortest = nx.shortest_path_length(topology(store, directed=False), PERSON, "svc-search-api")

    assert paths(instance, {"source": PERSON, "target": "svc-search-api", "max_depth": shortest - 1}) == []
    found = paths(instance, {"source": PERSON, "target": "svc-search-api", "max_depth": shortest})
    assert found
    assert {len(p["edges"]) for p in found} == {shortest}


def test_find_paths_from_an_unknown_node_is_not_found(instance: Instance) -> None:
    body = error(instance, "find_paths", {"source": "person-nobody", "target": SERVICE})

    assert (body["code"], body["key"]) == ("not_found", "person-nobody")


# -- query_graph --------------------------------------------------------------------------------------------------


def all_rows(instance: Instance, arguments: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    pages = all_pages(instance, "query_graph", {**arguments, "limit": 100})
    return [row for page in pages for row in page["items"]], pages


def test_query_graph_chain_returns_exactly_the_bindings_in_the_store(walking: Instance, store: Store) -> None:
    managers = {n.id for n in store.iter_nodes("Person") if n.properties["role"] == "engineering_manager"}
    services = {n.id for n in store.iter_nodes("Service")}
    edges = list(store.iter_edges())
    expected = {
        (m.source, m.target, o.target)
        for m in edges
        if m.type == "member_of" and m.source in managers
        for o in edges
        if o.type == "owns" and o.source == m.target and o.target in services
    }
    pattern = [
        {"node": "s", "type": "Service"},
        {"edge": "owns", "from": "t", "to": "s"},
        {"node": "t", "type": "Team"},
        {"edge": "member_of", "from": "p", "to": "t"},
        {"node": "p", "type": "Person", "where": {"role": "engineering_manager"}},
    ]

    rows, pages = all_rows(walking, {"match": pattern})

    assert {(r["p"], r["t"], r["s"]) for r in rows} == expected
    assert len(rows) == len(expected) > 0
    assert {page["total"] for page in pages} == {len(expected)}
    nodes = {n["id"]: n for page in pages for n in page["nodes"]}
    assert all(nodes[r["p"]]["properties"]["role"] == "engineering_manager" for r in rows)


def test_query_graph_return_projects_and_removes_duplicates(instance: Instance, store: Store) -> None:
    edges = list(store.iter_edges())
    services = {n.id for n in store.iter_nodes("Service")}
    with_members = {e.target for e in edges if e.type == "member_of"}
    owning = {e.source for e in edges if e.type == "owns" and e.target in services}
    pattern = [
        {"edge": "member_of", "from": "p", "to": "t"},
        {"edge": "owns", "from": "t", "to": "s"},
        {"node": "s", "type": "Service"},
    ]

    rows, pages = all_rows(instance, {"match": pattern, "return": ["t"]})

    assert all(set(r) == {"t"} for r in rows)
    ids = [r["t"] for r in rows]
    assert len(ids) == len(set(ids))
    assert set(ids) == with_members & owning
    assert pages[0]["total"] == len(ids)


def test_query_graph_edge_where_filters_on_edge_properties(instance: Instance, store: Store) -> None:
    expected = {
        (e.source, e.target) for e in store.iter_edges() if e.type == "member_of" and e.properties["role"] == "lead"
    }
    pattern = [{"edge": "member_of", "from": "p", "to": "t", "where": {"role": "lead"}}]

    rows, _ = all_rows(instance, {"match": pattern})

    assert {(r["p"], r["t"]) for r in rows} == expected
    all_members = {(e.source, e.target) for e in store.iter_edges() if e.type == "member_of"}
    assert 0 < len(expected) < len(all_members)


def test_query_graph_reads_an_inverse_edge_name_with_from_and_to_swapped(walking: Instance) -> None:
    team = {"node": "t", "id": ORIGIN}
    expected, _ = all_rows(walking, {"match": [team, {"edge": "member_of", "from": "p", "to": "t"}]})

    rows, _ = all_rows(walking, {"match": [team, {"edge": "members", "from": "t", "to": "p"}]})

    assert rows == expected
    assert len(rows) > 1


def test_query_graph_conditions_on_a_node_do_not_depend_on_term_order(instance: Instance) -> None:
    typed_first = [
        {"node": "p", "type": "Person"},
        {"node": "p", "where": {"role": "engineer"}},
        {"edge": "member_of", "from": "p", "to": "t"},
    ]
    where_first = [typed_first[1], typed_first[0], typed_first[2]]

    expected, _ = all_rows(instance, {"match": typed_first})
    rows, _ = all_rows(instance, {"match": where_first})

    assert rows == expected


def test_query_graph_runs_the_example_in_its_description(instance: Instance, store: Store) -> None:
    description = instance.registry.tool("query_graph").description
    call = description.split("Example: query_graph(", 1)[1].split(") → ", 1)[0]  # the example, as an agent reads it
    example = json.loads(call)
    examples = instance.registry.examples
    assert examples is not None

    rows, _ = all_rows(instance, example)

    assert {row["b"] for row in rows} >= {examples.target}
    for row in rows:
        assert store.edge(examples.edge, examples.id, row["b"]) is not None


def test_query_graph_unknown_return_variable_is_invalid(instance: Instance) -> None:
    body = error(
        instance, "query_graph", {"match": [{"edge": "member_of", "from": "p", "to": "t"}], "return": ["p", "x"]}
    )

    assert body["code"] == "invalid_arguments"
    assert [p["pointer"] for p in body["problems"]] == ["/return"]


def test_query_graph_with_more_than_four_edge_terms_is_invalid(instance: Instance) -> None:
    chain = [{"edge": "reports_to", "from": f"p{i}", "to": f"p{i + 1}"} for i in range(5)]

    body = error(instance, "query_graph", {"match": chain})

    assert body["code"] == "invalid_arguments"
    assert "/match" in [p["pointer"] for p in body["problems"]]
    assert not call(instance, "query_graph", {"match": chain[:4]}).is_error


def test_query_graph_disconnected_pattern_is_invalid(instance: Instance) -> None:
    pattern = [{"node": "a", "type": "Team"}, {"node": "b", "type": "Service"}]

    body = error(instance, "query_graph", {"match": pattern})

    assert body["code"] == "invalid_arguments"
    assert [p["pointer"] for p in body["problems"]] == ["/match"]


# -- get_changes --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("since", [0, 1000])
def test_get_changes_pages_through_the_log_after_since(instance: Instance, store: Store, since: int) -> None:
    expected = [c.revision for c in store.changes(since, 1_000_000)]

    pages = all_pages(instance, "get_changes", {"since": since, "limit": 250})

    assert [c["revision"] for page in pages for c in page["items"]] == expected
    assert {page["total"] for page in pages} == {len(expected)}
    assert len(pages) == math.ceil(len(expected) / 250)
    assert pages[-1]["next_cursor"] is None
    assert all(page["truncated"] for page in pages[:-1])


def test_get_changes_after_the_latest_revision_is_empty(instance: Instance, store: Store) -> None:
    answer = ok(instance, "get_changes", {"since": store.revision()})

    assert (answer["items"], answer["total"], answer["next_cursor"]) == ([], 0, None)


# -- describe_model -----------------------------------------------------------------------------------------------


def test_describe_model_counts_what_the_store_holds(instance: Instance, store: Store) -> None:
    stats = store.stats()

    answer = ok(instance, "describe_model", {})

    assert {t["name"]: t["count"] for t in answer["node_types"]} == {
        name: stats.nodes_by_type.get(name, 0) for name in instance.model.node_types
    }
    assert {t["name"]: t["count"] for t in answer["edge_types"]} == {
        name: stats.edges_by_type.get(name, 0) for name in instance.model.edge_types
    }
    assert answer["model"]["digest"] == instance.model.digest
    assert all("schema" not in t for t in answer["node_types"] + answer["edge_types"])


def test_describe_model_says_a_model_without_defaults_makes_new_nodes_internal(instance: Instance) -> None:
    answer = ok(instance, "describe_model", {})

    assert {(t["default_visibility"], "default_readers" in t) for t in answer["node_types"]} == {("internal", False)}


def test_describe_model_with_schemas_adds_each_types_schema(instance: Instance) -> None:
    answer = ok(instance, "describe_model", {"include_schemas": True})

    for entry in answer["node_types"] + answer["edge_types"]:
        assert entry["schema"] == type_schema(instance.model, entry["name"])


# -- every tool ---------------------------------------------------------------------------------------------------

EVERY_TOOL = [
    ("search", {"query": "payments platform"}),
    ("describe_model", {"include_schemas": True}),
    ("get_node", {"id": SERVICE}),
    ("find_nodes", {"type": "Service", "where": {"tier": 1}, "text": "api"}),
    ("get_neighbors", {"id": ORIGIN, "depth": 2}),
    ("find_paths", {"source": PERSON, "target": SERVICE}),
    ("query_graph", {"match": [{"edge": "member_of", "from": "p", "to": "t"}]}),
    ("get_changes", {"since": 1500}),
    ("diff_revisions", {"from": 1500}),
    ("get_audit_log", {"limit": 5}),
    ("get_proposal", {"id": PROPOSAL}),
    ("find_proposals", {"state": "open"}),
]


def test_every_read_only_tool_is_covered_here(instance: Instance) -> None:
    """The write tools have their own module (tests/core/test_writes.py), on stores of their own."""
    read_only = {t.name for t in instance.registry.tools if t.annotations["readOnlyHint"]}
    assert {name for name, _ in EVERY_TOOL} == read_only


@pytest.mark.parametrize(("name", "arguments"), EVERY_TOOL, ids=[name for name, _ in EVERY_TOOL])
def test_every_result_carries_the_stores_revision(
    instance: Instance, store: Store, name: str, arguments: dict[str, Any]
) -> None:
    assert ok(instance, name, arguments)["revision"] == store.revision()


@pytest.mark.parametrize(("name", "arguments"), EVERY_TOOL, ids=[name for name, _ in EVERY_TOOL])
def test_every_result_validates_against_the_tools_output_schema(
    instance: Instance, name: str, arguments: dict[str, Any]
) -> None:
    schema = instance.registry.tool(name).output_schema
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)

    errors = [f"{e.json_path}: {e.message}" for e in validator.iter_errors(ok(instance, name, arguments))]

    assert errors == []


def test_descriptions_name_a_public_edge_of_the_served_data(instance: Instance) -> None:
    examples = instance.registry.examples
    assert examples is not None
    source, target = instance.store.node(examples.id), instance.store.node(examples.target)

    assert source is not None
    assert target is not None
    assert source.visibility == target.visibility == "public"
    assert instance.store.edge(examples.edge, examples.id, examples.target) is not None
    assert f'"id": "{examples.id}"' in instance.registry.tool("get_node").description
    assert examples.id in instance.registry.instructions()


def test_summary_gives_each_node_as_id_type_and_display_name_on_every_read_tool(instance: Instance) -> None:
    node_id = instance.registry.examples.id if instance.registry.examples else "team-payments"
    got = ok(instance, "get_node", {"id": node_id, "summary": True})["node"]
    found = ok(instance, "find_nodes", {"type": "Team", "summary": True, "limit": 3})["items"]
    around = ok(instance, "get_neighbors", {"id": node_id, "summary": True, "limit": 3})["items"]

    assert set(got) == {"id", "type", "name"}
    assert got["id"] == node_id
    assert all(set(n) == {"id", "type", "name"} and n["name"] for n in found)
    assert all(set(item["node"]) == {"id", "type", "name"} for item in around)
    assert around


def test_fields_keeps_only_the_named_properties_and_leaves_the_metadata_out(instance: Instance) -> None:
    full = ok(instance, "find_nodes", {"type": "Team", "limit": 3})
    short = ok(instance, "find_nodes", {"type": "Team", "limit": 3, "fields": ["name"]})

    assert [set(n["properties"]) for n in short["items"]] == [{"name"}] * 3
    assert [set(n) for n in short["items"]] == [{"id", "type", "visibility", "properties"}] * 3
    assert [n["id"] for n in short["items"]] == [n["id"] for n in full["items"]]
    assert short["total"] == full["total"]
    assert len(json.dumps(short)) < len(json.dumps(full))


def test_fields_naming_a_metadata_field_keeps_it(instance: Instance) -> None:
    full = ok(instance, "get_node", {"id": ORIGIN})["node"]

    short = ok(instance, "get_node", {"id": ORIGIN, "fields": ["name", "revision", "updated_at"]})["node"]

    assert short == {"id": ORIGIN, "type": "Team", "visibility": full["visibility"],
                     "properties": {"name": full["properties"]["name"]},
                     "revision": full["revision"], "updated_at": full["updated_at"]}  # fmt: skip


def test_get_neighbors_with_fields_leaves_the_metadata_of_nodes_and_edges_out(instance: Instance) -> None:
    around = {"id": "team-billing", "direction": "in", "edge_types": ["member_of"], "limit": 50}
    full = ok(instance, "get_neighbors", around)["items"]

    short = ok(instance, "get_neighbors", {**around, "fields": ["name", "title", "role"]})["items"]

    assert len(short) == len(full) == 8
    for item, whole in zip(short, full, strict=True):
        assert set(item["node"]) == {"id", "type", "visibility", "properties"}
        assert item["edge"] == {k: whole["edge"][k] for k in ("type", "source", "target", "properties")}
    size = len(json.dumps(short, separators=(",", ":")))
    assert size < len(json.dumps(full, separators=(",", ":"))) / 2


def test_query_graph_lists_each_bound_node_once_and_binds_ids(instance: Instance, store: Store) -> None:
    pattern = [{"node": "t", "id": "team-billing"}, {"edge": "member_of", "from": "p", "to": "t"}]

    answer = ok(instance, "query_graph", {"match": pattern, "limit": 50})

    members = sorted(e.source for e in store.iter_edges() if e.type == "member_of" and e.target == "team-billing")
    assert answer["items"] == [{"p": p, "t": "team-billing"} for p in members]
    assert [n["id"] for n in answer["nodes"]] == sorted([*members, "team-billing"])  # the team once, not 8 times
    assert answer["nodes"] == [store.node(n["id"]).to_json() for n in answer["nodes"]]  # type: ignore[union-attr]


@pytest.mark.parametrize("form", [{"summary": True}, {"fields": ["name"]}])
def test_query_graph_takes_fields_and_summary_like_the_other_reads(instance: Instance, form: dict[str, Any]) -> None:
    pattern = {"match": [{"node": "t", "id": "team-billing"}, {"edge": "member_of", "from": "p", "to": "t"}]}
    full = ok(instance, "query_graph", pattern)

    short = ok(instance, "query_graph", {**pattern, **form})

    assert short["items"] == full["items"]
    if "summary" in form:
        assert [set(n) for n in short["nodes"]] == [{"id", "type", "name"}] * len(full["nodes"])
    else:
        assert [n["properties"] for n in short["nodes"]] == [{"name": n["properties"]["name"]} for n in full["nodes"]]
        assert not any("revision" in n for n in short["nodes"])
    assert [n["id"] for n in short["nodes"]] == [n["id"] for n in full["nodes"]]


def test_summary_gives_each_edge_of_a_neighbour_as_type_source_and_target(instance: Instance) -> None:
    full = ok(instance, "get_neighbors", {"id": "team-payments"})["items"]
    short = ok(instance, "get_neighbors", {"id": "team-payments", "summary": True})["items"]

    assert [set(item["edge"]) for item in short] == [{"type", "source", "target"}] * len(full)
    assert [item["edge"] for item in short] == [
        {k: item["edge"][k] for k in ("type", "source", "target")} for item in full
    ]


@pytest.mark.parametrize(("name", "arguments"), [
    ("find_nodes", {"type": "Service"}), ("find_nodes", {"type": "Person"}), ("find_nodes", {"type": "Decision"}),
    ("get_neighbors", {"id": "team-payments", "summary": True}), ("get_neighbors", {"id": "svc-checkout-api"}),
])  # fmt: skip
def test_a_default_page_fits_8_kb_and_says_what_it_left_out(
    instance: Instance, name: str, arguments: dict[str, Any]
) -> None:
    page = ok(instance, name, arguments)
    size = len(json.dumps(page, ensure_ascii=False, separators=(",", ":")).encode())

    assert size <= 8 * 1024, size
    assert page["total"] >= len(page["items"]) > 0
    assert page["truncated"] is (page["total"] > len(page["items"]))
    assert (page["next_cursor"] is not None) is page["truncated"]


@pytest.mark.parametrize("form", [{"summary": True}, {"fields": ["name"]}])
def test_short_forms_validate_against_the_generic_output_schema(instance: Instance, form: dict[str, Any]) -> None:
    for name, arguments in (
        ("find_nodes", {"type": "Team"}),
        ("get_neighbors", {"id": "team-payments"}),
        ("query_graph", {"match": [{"edge": "member_of", "from": "p", "to": "t"}]}),
    ):
        validator = Draft202012Validator(instance.registry.tool(name).output_schema)
        assert list(validator.iter_errors(ok(instance, name, {**arguments, **form}))) == []
