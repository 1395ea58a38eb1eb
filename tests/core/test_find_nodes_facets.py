"""find_nodes' facets: each value's count over every match, equal to the total of the same find with that value as
a `where` condition, on both backends; bad facets refused with a pointer; a cut said so; refused at a past revision."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.lang.conditions import facet_key, parse_where
from core.ops.config import Config
from core.seam.instance import Instance, open_instance
from core.store import NodeQuery, sql
from core.values.errors import ValidationError
from core.values.operations import PutNode
from core.values.principal import LOCAL
from core.values.records import Node

pytestmark = pytest.mark.both_backends

LANGUAGES = ("go", "java", "python", "rust")


def services() -> list[PutNode]:
    """30 services whose tier, language and public_api vary, some without a language or public_api."""
    made: list[PutNode] = []
    for i in range(30):
        properties: dict[str, Any] = {"name": f"svc-{i:02d}", "description": f"Service {i}.", "tier": 1 + i % 3,
                                      "lifecycle": ("production", "experimental")[i % 4 == 0]}  # fmt: skip
        if i % 5:
            properties["language"] = LANGUAGES[i % 7 % 4]
        if i % 3:
            properties["public_api"] = i % 2 == 0
        made.append(PutNode(Node(f"svc-{i:02d}", "Service", properties, "public")))
    return made


@pytest.fixture(scope="module")
def instance(module_store_location: str | Path) -> Iterator[Instance]:
    opened = open_instance(Config(store=module_store_location, seed=False, walk_workers=0))
    opened.store.commit(services(), principal="test")
    yield opened
    opened.close()


def ok(instance: Instance, arguments: dict[str, Any]) -> dict[str, Any]:
    result = instance.dispatcher.call_tool(LOCAL, "test", "find_nodes", arguments)
    assert result.value is not None, result.as_json()
    return result.value


def refused(instance: Instance, arguments: dict[str, Any]) -> dict[str, Any]:
    result = instance.dispatcher.call_tool(LOCAL, "test", "find_nodes", arguments)
    assert result.is_error, result.as_json()
    return result.as_json()["error"]


@pytest.mark.parametrize(
    "where", [{}, {"lifecycle": "production"}, {"tier": {"gte": 2}}], ids=["all", "production", "tier-2-or-more"]
)
@pytest.mark.parametrize("text", [None, "Service 1"], ids=["no-text", "text"])
def test_each_count_is_the_total_of_the_same_find_with_that_value(
    instance: Instance, where: dict[str, Any], text: str | None
) -> None:
    asked: dict[str, Any] = {"type": "Service", "limit": 3, **({"where": where} if where else {})}
    if text is not None:
        asked["text"] = text
    answer = ok(instance, {**asked, "facets": ["tier", "language", "public_api", "lifecycle"]})
    service = instance.model.node_types["Service"]

    assert len(answer["items"]) <= 3  # the page is as asked; the counts are over every match
    assert answer["facets_cut"] == []
    values = {"tier": [1, 2, 3], "language": list(LANGUAGES), "public_api": [True, False],
              "lifecycle": ["production", "experimental", "deprecated"]}  # fmt: skip
    for name, counts in answer["facets"].items():
        expected: dict[str, int] = {}
        for value in values[name]:
            if name in where and not parse_where({name: where[name]}, service, tool="t")[0].matches({name: value}):
                continue  # the page's own condition on the property leaves this value out
            total = ok(instance, {**asked, "where": {**asked.get("where", {}), name: value}, "limit": 1})["total"]
            if total:
                expected[str(facet_key(value))] = total
        assert counts == expected, name
        assert list(counts.values()) == sorted(counts.values(), reverse=True)  # most first
        missing = ok(instance, {**asked, "where": {**asked.get("where", {}), name: {"exists": False}}})["total"]
        assert sum(counts.values()) + missing == answer["total"]  # a node without the property is not counted
    assert answer["facets"]["public_api"].keys() <= {"true", "false"}


def test_without_facets_the_answer_has_none(instance: Instance) -> None:
    answer = ok(instance, {"type": "Service"})
    assert "facets" not in answer
    assert "facets_cut" not in answer


@pytest.mark.parametrize(
    ("arguments", "pointer", "says"),
    [
        ({"facets": ["tier"]}, "/facets", "needs a type"),
        ({"type": "Service", "facets": ["tier", "nope"]}, "/facets/1", "has no property 'nope'"),
        ({"type": "Service", "facets": ["description"]}, "/facets/0", "only an enum, a boolean or an integer"),
        ({"type": "Service", "facets": ["tags"]}, "/facets/0", "only an enum, a boolean or an integer"),
        ({"type": "Service", "facets": ["slo_availability"]}, "/facets/0", "only an enum, a boolean or an integer"),
        ({"type": "Service", "facets": ["tier"], "at": 1}, "/facets", "past revision"),
    ],
    ids=["no-type", "unknown", "text", "array", "number", "past"],
)
def test_a_bad_facet_is_refused_naming_it(
    instance: Instance, arguments: dict[str, Any], pointer: str, says: str
) -> None:
    error = refused(instance, arguments)
    assert error["code"] == "invalid_arguments", error
    problems = {p["pointer"]: p["message"] for p in error["problems"]}
    assert pointer in problems, problems
    assert says in problems[pointer], problems


def test_more_than_eight_facets_are_refused_by_the_schema(instance: Instance) -> None:
    error = refused(instance, {"type": "Service", "facets": [f"p{i}" for i in range(9)]})
    assert error["code"] == "invalid_arguments", error


def test_the_store_cuts_to_the_bound_most_first_and_says_so(instance: Instance) -> None:
    query = NodeQuery("Service")
    everything = instance.store.facet_counts(query, ["language"], limit=50)["language"]
    cut = instance.store.facet_counts(query, ["language"], limit=2)["language"]
    exact = instance.store.facet_counts(query, ["language"], limit=len(everything[0]))["language"]

    assert everything[1] is False
    assert exact == everything
    ranked = sorted(everything[0].items(), key=lambda kv: (-kv[1], kv[0]))
    assert cut == (dict(ranked[:2]), True)


def test_a_cursor_holds_with_or_without_facets(instance: Instance) -> None:
    """Facets change no page, so a page's cursor reads the next page whether or not the call asks for facets (a
    type page's cursor, from a call counting its facets, serves its downloads, which count none)."""
    first = ok(instance, {"type": "Service", "limit": 7, "facets": ["tier"]})
    plain = ok(instance, {"type": "Service", "limit": 7})
    assert first["next_cursor"] == plain["next_cursor"] is not None
    second = ok(instance, {"type": "Service", "limit": 7, "cursor": first["next_cursor"]})
    again = ok(instance, {"type": "Service", "limit": 7, "cursor": first["next_cursor"], "facets": ["language"]})
    assert [n["id"] for n in second["items"]] == [n["id"] for n in again["items"]]
    assert second["items"][0]["id"] > first["items"][-1]["id"]
    assert again["facets"] == ok(instance, {"type": "Service", "facets": ["language"]})["facets"]  # not this page's


@pytest.mark.parametrize("limit", [2, 50])
def test_counting_several_properties_in_one_scan_answers_what_counting_each_alone_does(
    instance: Instance, monkeypatch: pytest.MonkeyPatch, limit: int
) -> None:
    names = ["tier", "language", "public_api", "lifecycle"]
    query = NodeQuery("Service", parse_where({"tier": {"gte": 2}}, instance.model.node_types["Service"], tool="t"))
    joint = instance.store.facet_counts(query, names, limit=limit)
    alone = {name: instance.store.facet_counts(query, [name], limit=limit)[name] for name in names}
    monkeypatch.setattr(sql, "JOINT_GROUPS", 1)  # too many groups for one scan: each property on its own
    apart = instance.store.facet_counts(query, names, limit=limit)

    assert joint == alone == apart
    assert [list(joint[n][0].items()) for n in names] == [list(alone[n][0].items()) for n in names]  # same order
    assert any(cut for _, cut in joint.values()) is (limit == 2)


def test_a_past_view_refuses_facets_as_what_only_the_current_revision_answers(instance: Instance) -> None:
    past = instance.store.view(1)
    with pytest.raises(ValidationError) as refused_then:
        past.facets(NodeQuery("Service"), ["tier"], limit=50)
    assert [p.pointer for p in refused_then.value.problems] == ["/at"]
    assert "counting facets" in refused_then.value.problems[0].message
