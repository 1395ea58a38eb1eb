"""Property conditions (`where`), shared by find_nodes and query_graph, with one meaning on every backend.

A `where` object maps property names to a plain value (equality) or an object of operators, all of which must
hold (`{"gte": 1, "lte": 2}` is a range): `eq`, `ne`, `in`, `contains` (case-insensitive substring of a string,
or membership in an array), `gt`/`gte`/`lt`/`lte` (numbers with numbers, strings with strings), `exists`. Each
operator is one `Condition` (`conditions_of`), so a store compiles a range as it compiles any two conditions.
`Condition.matches` is the reference semantics; a store that filters in its query language must agree with it (the
tests run both on the same data).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from core.lang.model import Model, NodeType
from core.values.errors import InvalidArgumentsError, Problem

__all__ = ["OPERATORS", "Condition", "conditions_of", "parse_where"]

OPERATORS = ("eq", "ne", "in", "contains", "gt", "gte", "lt", "lte", "exists")
_MISSING = object()


@dataclass(frozen=True, slots=True)
class Condition:
    property: str
    op: str
    value: Any

    def matches(self, properties: Mapping[str, Any]) -> bool:
        actual = properties.get(self.property, _MISSING)
        if self.op == "exists":
            return (actual is not _MISSING) == bool(self.value)
        if actual is _MISSING:
            return self.op == "ne"
        return _compare(self.op, actual, self.value)


def facet_key(value: Any) -> str | None:
    """How `find_nodes`' facets name a property's value: a string as it is, any other scalar as its JSON text
    (`true`, `3`, `null`); None for an array or an object, which are not counted. The stores compute the same
    key in SQL (`core.store.sql.Dialect.facet`)."""
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, bool | int | float):
        return json.dumps(value)
    return None


def _same(a: Any, b: Any) -> bool:
    """Equality with JSON semantics: true is not 1, 1 equals 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _compare(op: str, actual: Any, value: Any) -> bool:
    if op == "eq":
        return _same(actual, value)
    if op == "ne":
        return not _same(actual, value)
    if op == "in":
        return any(_same(actual, v) for v in value)
    if op == "contains":  # a substring of a string (strings only), or a member of an array
        if isinstance(actual, str):
            return isinstance(value, str) and value.lower() in actual.lower()
        return isinstance(actual, list) and any(_same(item, value) for item in actual)
    comparable = (_number(actual) and _number(value)) or (isinstance(actual, str) and isinstance(value, str))
    if not comparable:
        return False
    return {"gt": actual > value, "gte": actual >= value, "lt": actual < value, "lte": actual <= value}[op]


def conditions_of(name: str, spec: Any) -> tuple[Condition, ...]:
    """The conditions one property's entry of a validated `where` asks for: a plain value is equality; an object
    is one condition per operator, all of which must hold."""
    if isinstance(spec, dict):
        operators = cast("dict[str, Any]", spec)
        return tuple(Condition(name, op, value) for op, value in operators.items())
    return (Condition(name, "eq", spec),)


def parse_where(
    where: Mapping[str, Any], node_type: NodeType | None, *, tool: str, at: str = "/where"
) -> tuple[Condition, ...]:
    """Turn a validated `where` object into conditions; unknown properties of the type are refused."""
    problems: list[Problem] = []
    conditions: list[Condition] = []
    if where and node_type is None:
        problems.append(Problem(at, "where needs a type: property conditions apply to one node type"))
    for name, spec in where.items():
        if node_type is not None and name not in node_type.properties:
            close = difflib.get_close_matches(name, list(node_type.properties), n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            problems.append(Problem(f"{at}/{name}", f"{node_type.name} has no property {name!r}{hint}"))
            continue
        conditions += conditions_of(name, spec)
    if problems:
        raise InvalidArgumentsError(tool, problems)
    return tuple(conditions)


FACET_VALUES = 50  # the most values find_nodes' facets answer per property, most frequent first


def facet_kind(schema: Mapping[str, Any]) -> str | None:
    """What makes a property's (resolved) schema one `find_nodes` may facet: "an enum", "a boolean" or "an
    integer"; None for anything else (its values are not few, or not scalars)."""
    if isinstance(schema.get("enum"), list):
        return "an enum"
    if schema.get("type") == "boolean":
        return "a boolean"
    if schema.get("type") == "integer":
        return "an integer"
    return None


def parse_facets(names: Iterable[str], node_type: NodeType | None, model: Model, *, tool: str) -> tuple[str, ...]:
    """The validated `facets` argument: each a property of the queried type whose schema `facet_kind` accepts."""
    names = tuple(names)
    problems: list[Problem] = []
    if names and node_type is None:
        problems.append(Problem("/facets", "facets needs a type: they count one node type's property values"))
    for i, name in enumerate(names if node_type is not None else ()):
        assert node_type is not None
        if name not in node_type.properties:
            close = difflib.get_close_matches(name, list(node_type.properties), n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            problems.append(Problem(f"/facets/{i}", f"{node_type.name} has no property {name!r}{hint}"))
        elif facet_kind(model.resolved(node_type.properties[name])) is None:
            problems.append(Problem(f"/facets/{i}", f"{name!r} cannot be a facet: only an enum, a boolean or an "
                                                    "integer property can"))  # fmt: skip
    if problems:
        raise InvalidArgumentsError(tool, problems)
    return names


def all_match(conditions: Iterable[Condition], properties: Mapping[str, Any]) -> bool:
    return all(c.matches(properties) for c in conditions)
