"""`find_nodes`' `order_by` means one thing on every backend (the module runs on SQLite and PostgreSQL): the pages
of a sorted query concatenate to every match in `core.lang.ordering.sorted_nodes`' order (numbers as numbers,
strings by code point, absent last in either direction, ties by id), the cursor is a keyset position that holds
under the sort, and bad input is a clear error naming the entry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from core.lang.ordering import Sort, sorted_nodes
from core.ops.config import Config
from core.seam.instance import Instance, open_instance
from core.values.operations import PutNode
from core.values.paging import encode_cursor
from core.values.principal import LOCAL, Principal
from core.values.records import Node

pytestmark = pytest.mark.both_backends

CRAFTED = [  # awkward values: no SLO, an integral SLO; names that sort by code point (Z before a before Ä)
    Node("svc-zz-bare", "Service", {"name": "zz-bare", "description": "d", "lifecycle": "retired", "tier": 3}),
    Node("svc-zz-whole", "Service", {"name": "zz-whole", "description": "d", "lifecycle": "production", "tier": 1,
                                     "slo_availability": 100}),
    *(Node(f"person-zz-{handle}", "Person", {"email": f"{handle}@northwind.test", "name": name, "handle": handle,
                                              "title": "Engineer", "role": "engineer", "level": 5})
      for handle, name in (("zed", "Zed Upper"), ("aaron", "aaron lower"), ("zoe", "Ärnberg Zoë"))),
]  # fmt: skip


@pytest.fixture(scope="module")
def instance(module_store_location: str | Path) -> Iterator[Instance]:
    opened = open_instance(Config(store=module_store_location))
    opened.store.commit([PutNode(n) for n in CRAFTED], principal="test:ordering")
    yield opened
    opened.close()


def call(instance: Instance, arguments: dict[str, Any], who: Principal = LOCAL) -> Any:
    return instance.dispatcher.call_tool(who, "test", "find_nodes", arguments)


def pages(instance: Instance, arguments: dict[str, Any]) -> list[str]:
    """The ids of every page of a sorted find_nodes, following next_cursor."""
    ids: list[str] = []
    cursor: str | None = None
    for _ in range(200):
        result = call(instance, {**arguments, **({"cursor": cursor} if cursor else {})})
        assert result.error is None, result.as_json()
        ids += [n["id"] for n in result.value["items"]]
        cursor = result.value["next_cursor"]
        if cursor is None:
            return ids
    raise AssertionError("more than 200 pages")


def expected(
    instance: Instance, node_type: str, order: list[str], where: Callable[[Mapping[str, Any]], bool] | None = None
) -> list[str]:
    nodes = [(n.properties, n.id) for n in instance.store.iter_nodes(node_type)]
    if where is not None:
        nodes = [(p, i) for p, i in nodes if where(p)]
    numeric = {"tier", "slo_availability", "level"}
    sorts = [Sort(o.removeprefix("-"), o.startswith("-"), o.removeprefix("-") in numeric) for o in order]
    return [i for _, i in sorted_nodes(sorts, nodes)]


@pytest.mark.parametrize(
    ("node_type", "order"),
    [("Service", ["tier"]), ("Service", ["-tier", "name"]), ("Service", ["slo_availability"]),
     ("Service", ["-slo_availability"]), ("Service", ["-name"]), ("Service", ["lifecycle", "-slo_availability"]),
     ("Decision", ["-date"]), ("Person", ["level", "-start_date", "name"])],
)  # fmt: skip
@pytest.mark.parametrize("limit", [7, 100])
def test_sorted_pages_concatenate_to_every_match_in_the_reference_order(
    instance: Instance, node_type: str, order: list[str], limit: int
) -> None:
    found = pages(instance, {"type": node_type, "order_by": order, "limit": limit})
    assert found == expected(instance, node_type, order)
    assert found != sorted(found)  # the order is not the id order the pages had before


def test_absent_values_sort_last_in_both_directions(instance: Instance) -> None:
    up = pages(instance, {"type": "Service", "order_by": ["slo_availability"], "limit": 5})
    down = pages(instance, {"type": "Service", "order_by": ["-slo_availability"], "limit": 5})
    assert up[-1] == "svc-zz-bare" == down[-1]
    assert down[0] == "svc-zz-whole"  # 100, an integer, above every 99.x


def test_text_sorts_by_code_point(instance: Instance) -> None:
    ids = pages(instance, {"type": "Person", "order_by": ["name"], "limit": 100, "summary": True})
    assert ids.index("person-zz-zed") < ids.index("person-zz-aaron") < ids.index("person-zz-zoe")  # Z < a < Ä


def test_a_sort_with_conditions_and_text_keeps_both(instance: Instance) -> None:
    arguments = {"type": "Service", "where": {"tier": {"gte": 1, "lte": 2}}, "order_by": ["-tier", "name"],
                 "limit": 4}  # fmt: skip
    found = pages(instance, arguments)

    def ranged(properties: Mapping[str, Any]) -> bool:
        return 1 <= properties.get("tier", 0) <= 2

    assert found == expected(instance, "Service", ["-tier", "name"], ranged)
    first = call(instance, arguments).value
    assert first["total"] == len(found)


def test_a_sorted_page_shows_only_what_the_caller_may_see(instance: Instance) -> None:
    reader = Principal("reader-x", frozenset({"reader"}))
    everything = pages(instance, {"type": "Service", "order_by": ["-tier"], "limit": 100})
    seen = []
    cursor = None
    while True:
        result = call(instance, {"type": "Service", "order_by": ["-tier"], "limit": 6,
                                 **({"cursor": cursor} if cursor else {})}, reader)  # fmt: skip
        assert result.error is None
        seen += [n["id"] for n in result.value["items"]]
        cursor = result.value["next_cursor"]
        if cursor is None:
            break
    visible = {n["id"] for n in call(instance, {"type": "Service", "limit": 100}, reader).value["items"]}
    assert seen == [i for i in everything if i in visible]


def test_a_cursor_whose_node_changed_its_sort_value_is_refused_with_a_way_out(instance: Instance) -> None:
    arguments = {"type": "Service", "order_by": ["tier"], "limit": 3}
    first = call(instance, arguments).value
    last = first["items"][-1]
    moved = Node(last["id"], "Service", {**last["properties"], "tier": 3 if last["properties"]["tier"] != 3 else 1})
    instance.store.commit([PutNode(moved)], principal="test:ordering")
    try:
        again = call(instance, {**arguments, "cursor": first["next_cursor"]})
        assert again.error is not None
        problem = again.as_json()["error"]
        assert problem["problems"][0]["pointer"] == "/cursor"
        assert "start again without the cursor" in problem["problems"][0]["message"]
        unsorted = call(instance, {"type": "Service", "limit": 3}).value["next_cursor"]
        other = call(instance, {**arguments, "cursor": unsorted})  # an id order's cursor is not a sorted one's
        assert other.error is not None
    finally:
        instance.store.commit([PutNode(Node(last["id"], "Service", last["properties"]))], principal="test:ordering")


@pytest.mark.parametrize(
    ("arguments", "pointer", "told"),
    [({"type": "Service", "order_by": ["teir"]}, "/order_by/0", "did you mean tier"),
     ({"type": "Service", "order_by": ["tags"]}, "/order_by/0", "cannot be sorted by"),
     ({"type": "Service", "order_by": ["handles_pii"]}, "/order_by/0", "cannot be sorted by"),
     ({"type": "Service", "order_by": ["name", "-name"]}, "/order_by/1", "named twice"),
     ({"order_by": ["name"]}, "/order_by", "needs a type"),
     ({"type": "Service", "order_by": ["a", "b", "c", "d"]}, "/order_by", "too long"),
     ({"type": "Service", "order_by": ["Name"]}, "/order_by/0", "no property 'Name'"),
     ({"type": "Service", "order_by": ["x" * 66]}, "/order_by/0", "too long"),
     ({"type": "Service", "order_by": ["tier"], "at": 1}, "/order_by", "past revision")],
)  # fmt: skip
def test_a_bad_order_by_is_a_clear_error_naming_the_entry(
    instance: Instance, arguments: dict[str, Any], pointer: str, told: str
) -> None:
    result = call(instance, arguments)
    assert result.error is not None
    problems = result.as_json()["error"]["problems"]
    assert any(p["pointer"] == pointer and told in p["message"] for p in problems), problems


@pytest.mark.parametrize(
    "position",
    ["svc-checkout-api", {"after": "svc-no-such", "sorted": "0" * 16}, {"after": "svc-checkout-api", "sorted": "x"},
     {"after": "svc-checkout-api"}, {"after": 5, "sorted": "0" * 16}],
)  # fmt: skip
def test_a_forged_sorted_cursor_is_refused_at_cursor(instance: Instance, position: Any) -> None:
    arguments = {"type": "Service", "order_by": ["tier"], "limit": 3}
    result = call(instance, {**arguments, "cursor": encode_cursor("find_nodes", arguments, position)})
    assert result.error is not None
    assert result.as_json()["error"]["problems"][0]["pointer"] == "/cursor"
