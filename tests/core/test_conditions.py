"""`where` conditions mean one thing everywhere: `Condition.matches` (the reference) and each backend's filter (SQLite
and PostgreSQL: the module runs on both) agree.

hypothesis is not installed, so the agreement is checked over a deterministic grid instead: every operator on
every listed Service property, with values of the property's own type and of the other JSON types, over the
seeded Services plus a few crafted ones with missing properties and awkward text.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from core.lang.conditions import OPERATORS, Condition, parse_where
from core.lang.model import Model, default_seed_path
from core.store import NodeQuery, Store, open_store
from core.store.interchange import import_path
from core.values.operations import PutNode
from core.values.records import Node

pytestmark = pytest.mark.both_backends

EDGE = "svc-zz-edge"  # every optional property, awkward text
BARE = "svc-zz-bare"  # only the required properties
WHOLE = "svc-zz-whole"  # an integral SLO, stored as an integer
ZOE = "person-zz-zoe"
TERM = "term-zz-idempotency"

CRAFTED = [
    Node(EDGE, "Service", {
        "name": "zz-edge", "description": "Routes 50% of traffic_to the Ärger queue; owned by Zoë.",
        "lifecycle": "experimental", "tier": 2, "slo_availability": 99.5, "public_api": True, "handles_pii": False,
        "tags": ["edge", "pci"],
    }),
    Node(BARE, "Service", {"name": "zz-bare", "description": "A bare service.", "lifecycle": "retired", "tier": 3}),
    Node(WHOLE, "Service", {
        "name": "zz-whole", "description": "Always up.", "lifecycle": "production", "tier": 1,
        "slo_availability": 100, "language": "go", "public_api": False, "tags": [],
    }),
    Node(ZOE, "Person", {
        "email": "zoe.arnberg@northwind.test", "name": "Zoë Ärnberg", "handle": "zoe-arnberg",
        "title": "100% Engineer_x", "role": "engineer", "level": 5,
    }),
    Node(TERM, "GlossaryTerm", {
        "term": "Idempotence token", "definition": "A client-chosen key that makes a retried request safe.",
        "synonyms": ["Idem key", "dedupe key"],
    }),
]  # fmt: skip


_NODES: dict[tuple[int, str], list[Node]] = {}  # the module's store does not change once built


@pytest.fixture(scope="module")
def graph(module_store_location: str | Path, model: Model) -> Iterator[Store]:
    """The seed data plus the crafted nodes; the module only reads it after that."""
    opened = open_store(module_store_location, model)
    import_path(opened, default_seed_path(), principal="test:seed")
    opened.commit([PutNode(n) for n in CRAFTED], principal="test:conditions")
    yield opened
    _NODES.clear()
    opened.close()


def sql_ids(store: Store, node_type: str, *conditions: Condition) -> set[str]:
    nodes, total = store.find_nodes(NodeQuery(node_type, conditions), after=None, limit=1000)
    assert total == len(nodes)  # the limit is above every type's size, so the page is the whole answer
    return {n.id for n in nodes}


def python_ids(store: Store, node_type: str, *conditions: Condition) -> set[str]:
    nodes = _NODES.get((id(store), node_type))
    if nodes is None:
        nodes = _NODES[(id(store), node_type)] = list(store.iter_nodes(node_type))
    return {n.id for n in nodes if all(c.matches(n.properties) for c in conditions)}


# -- the reference semantics, pinned on crafted nodes, on both sides ----------------------------------------------

CASES: list[tuple[str, str, Condition, bool]] = [
    # booleans are not numbers: true is not 1, false is not 0
    ("Service", EDGE, Condition("public_api", "eq", True), True),
    ("Service", EDGE, Condition("public_api", "eq", 1), False),
    ("Service", WHOLE, Condition("public_api", "eq", 0), False),
    ("Service", WHOLE, Condition("public_api", "eq", False), True),
    ("Service", EDGE, Condition("public_api", "in", [1, "true"]), False),
    ("Service", EDGE, Condition("public_api", "ne", 1), True),
    ("Service", WHOLE, Condition("tier", "eq", True), False),
    ("Service", WHOLE, Condition("tier", "in", [True, "1"]), False),
    ("Service", EDGE, Condition("public_api", "gt", 0), False),
    # numbers compare as numbers: 2 is 2.0, 100 is 100.0
    ("Service", EDGE, Condition("tier", "eq", 2.0), True),
    ("Service", WHOLE, Condition("slo_availability", "eq", 100.0), True),
    ("Service", WHOLE, Condition("slo_availability", "gte", 100), True),
    ("Service", EDGE, Condition("slo_availability", "gt", 99), True),
    ("Service", EDGE, Condition("slo_availability", "gte", 99.5), True),
    ("Service", EDGE, Condition("slo_availability", "lt", 99.5), False),
    ("Service", EDGE, Condition("slo_availability", "lte", 99.5), True),
    # ... and never with strings
    ("Service", EDGE, Condition("slo_availability", "lte", "99.5"), False),
    ("Service", EDGE, Condition("tier", "eq", "2"), False),
    ("Service", EDGE, Condition("lifecycle", "gt", 1), False),
    # strings compare as strings
    ("Service", EDGE, Condition("lifecycle", "gt", "deprecated"), True),
    ("Service", EDGE, Condition("lifecycle", "lt", "f"), True),
    ("Service", EDGE, Condition("lifecycle", "lte", "experimental"), True),
    ("Service", EDGE, Condition("lifecycle", "lt", "experimental"), False),
    # a missing property: ne and exists false match it, nothing else does
    ("Service", BARE, Condition("language", "ne", "go"), True),
    ("Service", BARE, Condition("public_api", "ne", True), True),
    ("Service", BARE, Condition("language", "eq", "go"), False),
    ("Service", BARE, Condition("language", "in", ["go", "python"]), False),
    ("Service", BARE, Condition("language", "lt", "zzz"), False),
    ("Service", BARE, Condition("slo_availability", "gte", 0), False),
    ("Service", BARE, Condition("tags", "contains", "pci"), False),
    ("Service", BARE, Condition("language", "exists", False), True),
    ("Service", BARE, Condition("language", "exists", True), False),
    ("Service", EDGE, Condition("tags", "exists", True), True),
    ("Service", WHOLE, Condition("tags", "exists", True), True),  # an empty array exists
    # contains: case-insensitive substring of a string ...
    ("Service", EDGE, Condition("description", "contains", "ROUTES"), True),
    ("Service", EDGE, Condition("description", "contains", "routes 50"), True),
    ("Service", EDGE, Condition("description", "contains", "ärger"), True),  # non-ASCII letters fold too
    ("Person", ZOE, Condition("name", "contains", "ärnberg"), True),
    ("Person", ZOE, Condition("name", "contains", "ZOË"), True),
    ("Service", EDGE, Condition("description", "contains", ""), True),
    # ... where % and _ are plain characters, not wildcards
    ("Service", EDGE, Condition("description", "contains", "50%"), True),
    ("Service", EDGE, Condition("description", "contains", "5%"), False),
    ("Service", EDGE, Condition("description", "contains", "c_t"), True),
    ("Service", EDGE, Condition("description", "contains", "f_c"), False),
    ("Person", ZOE, Condition("title", "contains", "%"), True),
    ("Person", ZOE, Condition("title", "contains", "R_X"), True),
    ("Person", ZOE, Condition("title", "contains", "r%x"), False),
    # ... or exact membership of an array
    ("Service", EDGE, Condition("tags", "contains", "pci"), True),
    ("Service", EDGE, Condition("tags", "contains", "PCI"), False),
    ("Service", EDGE, Condition("tags", "contains", "pc"), False),
    ("GlossaryTerm", TERM, Condition("synonyms", "contains", "Idem key"), True),
    ("GlossaryTerm", TERM, Condition("synonyms", "contains", "idem key"), False),
    ("Service", EDGE, Condition("tier", "contains", 2), False),
    # arrays equal arrays element by element, in order
    ("Service", EDGE, Condition("tags", "eq", ["edge", "pci"]), True),
    ("Service", EDGE, Condition("tags", "eq", ["pci", "edge"]), False),
    ("Service", WHOLE, Condition("tags", "eq", []), True),
    ("Service", EDGE, Condition("tags", "in", [["pci"], ["edge", "pci"]]), True),
    ("Service", EDGE, Condition("tags", "ne", ["edge", "pci"]), False),
    # in: any of the values; an empty list matches nothing
    ("Service", EDGE, Condition("lifecycle", "in", ["production", "experimental"]), True),
    ("Service", EDGE, Condition("lifecycle", "in", []), False),
    ("Person", ZOE, Condition("level", "in", [4, 5.0]), True),
]


@pytest.mark.parametrize(
    ("node_type", "node_id", "condition", "expected"),
    CASES,
    ids=[f"{c.property}-{c.op}-{c.value!r}-{node_id}" for _, node_id, c, _ in CASES],
)
def test_a_condition_means_the_same_in_python_and_in_the_store_s_query(
    graph: Store, node_type: str, node_id: str, condition: Condition, expected: bool
) -> None:
    node = graph.node(node_id)
    assert node is not None

    assert condition.matches(node.properties) is expected
    assert (node_id in sql_ids(graph, node_type, condition)) is expected


def test_the_cases_cover_every_operator() -> None:
    assert {c.op for _, _, c, _ in CASES} == set(OPERATORS)


# -- agreement over the whole grid --------------------------------------------------------------------------------

SERVICE_PROPERTIES = ["tier", "lifecycle", "language", "slo_availability", "public_api", "handles_pii", "tags",
                      "description", "name"]  # fmt: skip
SCALARS: list[Any] = [
    1, 2, 3, 0, 1.0, 2.5, 99, 99.0, 99.5, 99.9, 99.95, 99.99, 100, True, False, None,
    "1", "go", "Go", "o", "python", "production", "PRODUCTION", "prod", "deprecated", "pci", "PCI", "payments",
    "customer-facing", "checkout", "CHECKOUT", "api", "", "%", "_", "e_a", "99.9", "true",
]  # fmt: skip
ORDERED: list[Any] = [v for v in SCALARS if isinstance(v, int | float | str) and not isinstance(v, bool)]
ARRAYS: list[Any] = [[], ["pci"], ["edge", "pci"], ["checkout", "payments", "customer-facing"]]


def grid_values(prop: str, op: str) -> list[Any]:
    """The values the input schema allows for `op`, of every JSON type (arrays only where the property is one)."""
    if op == "exists":
        return [True, False]
    if op in ("gt", "gte", "lt", "lte"):
        return ORDERED
    if op == "contains":
        return [v for v in SCALARS if v is not None]
    values = SCALARS + (ARRAYS if prop == "tags" else [])
    if op == "in":
        return [[v] for v in values] + [[v, w] for v, w in zip(values, values[1:] + values[:1], strict=True)] + [[]]
    return values


@pytest.mark.parametrize("op", OPERATORS)
@pytest.mark.parametrize("prop", SERVICE_PROPERTIES)
def test_python_and_the_store_s_query_select_the_same_services(graph: Store, prop: str, op: str) -> None:
    disagreements: list[str] = []
    for value in grid_values(prop, op):
        condition = Condition(prop, op, value)
        expected = python_ids(graph, "Service", condition)
        actual = sql_ids(graph, "Service", condition)
        if actual != expected:
            disagreements.append(
                f"{value!r}: only SQL {sorted(actual - expected)[:3]}, only Python {sorted(expected - actual)[:3]}"
            )

    assert not disagreements, "\n".join(disagreements)


@pytest.mark.parametrize("op", OPERATORS)
def test_the_grid_selects_some_services_and_not_others_for_every_operator(graph: Store, op: str) -> None:
    everything = {n.id for n in graph.iter_nodes("Service")}
    sizes = {
        len(python_ids(graph, "Service", Condition(prop, op, value)))
        for prop in SERVICE_PROPERTIES
        for value in grid_values(prop, op)
    }

    # agreement on empty or full answers only would prove little: some values must split the Services
    assert any(0 < size < len(everything) for size in sizes)


def test_several_conditions_must_all_hold_on_both_sides(graph: Store) -> None:
    conditions = (
        Condition("tier", "eq", 1),
        Condition("lifecycle", "ne", "deprecated"),
        Condition("tags", "contains", "payments"),
        Condition("slo_availability", "gte", 99.9),
    )

    expected = python_ids(graph, "Service", *conditions)

    assert expected  # the seed has tier-1 payments services with a high SLO
    assert sql_ids(graph, "Service", *conditions) == expected
    assert expected < python_ids(graph, "Service", conditions[0])


@pytest.mark.parametrize(
    ("node_type", "prop", "spec"),
    [("Service", "tier", {"gte": 2, "lte": 2}), ("Service", "slo_availability", {"gt": 99.5, "lte": 99.95}),
     ("Decision", "date", {"gte": "2023-01-01", "lt": "2024-07-01"}), ("Service", "tier", {"ne": 1, "lt": 3})],
)  # fmt: skip
def test_a_range_on_one_property_is_its_bounds_all_holding_on_both_sides(
    graph: Store, model: Model, node_type: str, prop: str, spec: dict[str, Any]
) -> None:
    conditions = parse_where({prop: spec}, model.node_types[node_type], tool="find_nodes")
    assert [(c.op, c.value) for c in conditions] == list(spec.items())  # one condition per operator
    expected = python_ids(graph, node_type, *conditions)
    low, high = (python_ids(graph, node_type, c) for c in conditions)
    assert expected == low & high
    assert expected  # the range holds some nodes, and each bound alone holds more
    assert expected < low
    assert expected < high
    assert sql_ids(graph, node_type, *conditions) == expected


def test_an_array_value_compared_to_a_string_property_matches_nothing_rather_than_failing(graph: Store) -> None:
    for op, value in (("eq", ["production"]), ("ne", ["production"]), ("in", [["production"], "retired"])):
        condition = Condition("lifecycle", op, value)

        assert sql_ids(graph, "Service", condition) == python_ids(graph, "Service", condition), op


def test_a_number_contained_in_a_string_property_means_the_same_on_both_sides(graph: Store) -> None:
    condition = Condition("description", "contains", 50)  # EDGE's description says "Routes 50% of traffic"

    assert sql_ids(graph, "Service", condition) == python_ids(graph, "Service", condition)


# -- free-text search: a literal, case-insensitive substring --------------------------------------------------------


def text_fields(model: Model) -> Mapping[str, tuple[str, ...]]:
    return {name: t.text for name, t in model.node_types.items()}


def python_text_ids(store: Store, model: Model, needle: str) -> set[str]:
    fields = text_fields(model)
    return {
        n.id
        for n in store.iter_nodes()
        if any(isinstance(v := n.properties.get(f), str) and needle.lower() in v.lower() for f in fields[n.type])
    }


@pytest.mark.parametrize(
    "needle",
    ["%", "_", "50%", "5%", "c_t", "f_c", "r_x", "%_", "\\", "checkout", "CHECKOUT", "müller", "MÜLLER", "ärger",
     "ÄRGER", "Zoë Ä"],
)  # fmt: skip
def test_text_search_is_a_literal_case_insensitive_substring(graph: Store, model: Model, needle: str) -> None:
    nodes, total = graph.find_nodes(NodeQuery(text=needle, text_fields=text_fields(model)), after=None, limit=1000)

    assert {n.id for n in nodes} == python_text_ids(graph, model, needle)
    assert total == len(nodes)


@pytest.mark.parametrize(
    "needle",
    ["%", "50%", "c_t", "\\", "checkout", "CHECKOUT", "müller", "ÄRGER", "Zoë Ä", "pay", "a\nb", "ss"],
)  # fmt: skip
def test_a_node_query_means_in_python_what_the_store_s_query_selects(graph: Store, model: Model, needle: str) -> None:
    """`NodeQuery.matches`, what a read at a past revision applies to the states the change log holds, selects what
    the store's SQL does, for text, conditions and both, with and without a type."""
    fields = text_fields(model)
    queries = [
        NodeQuery(text=needle, text_fields=fields),
        NodeQuery("Service", text=needle, text_fields=fields),
        NodeQuery("Service", (Condition("tier", "lte", 2),), needle, fields),
        NodeQuery("Service", (Condition("tags", "contains", "payments"), Condition("lifecycle", "ne", "retired"))),
    ]
    everything = list(graph.iter_nodes())
    for query in queries:
        nodes, total = graph.find_nodes(query, after=None, limit=1000)
        assert {n.id for n in nodes} == {n.id for n in everything if query.matches(n)}, query
        assert total == len(nodes)
    if needle in ("checkout", "CHECKOUT", "pay"):  # agreement on empty answers alone would prove little
        assert any(queries[0].matches(n) for n in everything)
        assert any(queries[3].matches(n) for n in everything)


def test_percent_and_underscore_in_text_search_are_not_wildcards(graph: Store, model: Model) -> None:
    def found(text: str) -> set[str]:
        nodes, _ = graph.find_nodes(
            NodeQuery("Service", text=text, text_fields=text_fields(model)), after=None, limit=1000
        )
        return {n.id for n in nodes}

    # as LIKE patterns, "5%" would match "Routes 50% of ..." and "f_c" would match "traffic"
    assert EDGE not in found("5%")
    assert EDGE not in found("f_c")
    assert EDGE in found("50%")
    assert EDGE in found("c_t")
