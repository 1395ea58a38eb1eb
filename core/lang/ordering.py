"""`find_nodes`' `order_by`: which properties a type's nodes are sorted by, with one meaning on every backend.

`order_by` names one to `MAX_SORTS` properties of the queried type, each ascending or, written `-name`,
descending; the node id breaks every tie, ascending, so the order is total and a page boundary is a position
(the last node's sort values and id) that the next page starts strictly after (keyset paging: a node is never
skipped or repeated because of the order). Only a property whose schema holds a number (`integer`, `number`) or
a string (an enum of strings, a date, text) can be sorted by: numbers compare as numbers, strings by code point
(so ISO dates sort by time). A node without the property (or holding a value of another JSON type) sorts after
every node with one, in either direction.

`sorted_nodes` is the reference semantics; a store that sorts in its query language must agree with it (the tests
run both backends against it).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cmp_to_key
from typing import Any

from core.lang.model import Model, NodeType
from core.values.errors import InvalidArgumentsError, Problem

__all__ = ["MAX_SORTS", "Sort", "parse_order", "sort_kind", "sorted_nodes"]

MAX_SORTS = 3


@dataclass(frozen=True, slots=True)
class Sort:
    property: str
    descending: bool = False
    numeric: bool = False  # the property holds numbers (else strings)

    def value(self, properties: Mapping[str, Any]) -> Any:
        """The node's sort value: its number or string, None when absent or of another JSON type."""
        value = properties.get(self.property)
        if self.numeric:
            return value if isinstance(value, int | float) and not isinstance(value, bool) else None
        return value if isinstance(value, str) else None


def sort_kind(schema: Mapping[str, Any]) -> str | None:
    """ "number" or "string" for a schema `order_by` may sort by, else None."""
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        if all(isinstance(v, str) for v in enum):  # pyright: ignore[reportUnknownVariableType]
            return "string"
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in enum):  # pyright: ignore[reportUnknownVariableType]
            return "number"
        return None
    kind = schema.get("type")
    if kind in ("integer", "number"):
        return "number"
    return "string" if kind == "string" else None


def parse_order(order_by: Sequence[str], node_type: NodeType | None, model: Model, *, tool: str) -> tuple[Sort, ...]:
    """The validated `order_by` argument: each a property of the queried type that holds numbers or strings,
    named once."""
    problems: list[Problem] = []
    sorts: list[Sort] = []
    if order_by and node_type is None:
        problems.append(Problem("/order_by", "order_by needs a type: it sorts one node type's properties"))
    if len(order_by) > MAX_SORTS:
        problems.append(Problem("/order_by", f"at most {MAX_SORTS} properties"))
    seen: set[str] = set()
    for i, entry in enumerate(order_by if node_type is not None else ()):
        assert node_type is not None
        name = entry.removeprefix("-")
        if name not in node_type.properties:
            close = difflib.get_close_matches(name, list(node_type.properties), n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            problems.append(Problem(f"/order_by/{i}", f"{node_type.name} has no property {name!r}{hint}"))
            continue
        kind = sort_kind(model.resolved(node_type.properties[name]))
        if kind is None:
            problems.append(Problem(f"/order_by/{i}", f"{name!r} cannot be sorted by: only a property holding "
                                                      "numbers or strings can"))  # fmt: skip
        elif name in seen:
            problems.append(Problem(f"/order_by/{i}", f"{name!r} is named twice"))
        else:
            sorts.append(Sort(name, entry.startswith("-"), kind == "number"))
        seen.add(name)
    if problems:
        raise InvalidArgumentsError(tool, problems)
    return tuple(sorts)


def _compare(sorts: Sequence[Sort], a: tuple[Mapping[str, Any], str], b: tuple[Mapping[str, Any], str]) -> int:
    for sort in sorts:
        x, y = sort.value(a[0]), sort.value(b[0])
        if x == y:
            continue
        if x is None or y is None:
            return 1 if x is None else -1  # absent last, either direction
        less = x < y
        return (1 if less else -1) if sort.descending else (-1 if less else 1)
    return (a[1] > b[1]) - (a[1] < b[1])  # the id breaks the tie (code point order)


def sorted_nodes(
    sorts: Sequence[Sort], nodes: Sequence[tuple[Mapping[str, Any], str]]
) -> list[tuple[Mapping[str, Any], str]]:
    """(properties, id) pairs in `sorts` order, ties by id: the reference the stores' ORDER BY agrees with."""
    return sorted(nodes, key=cmp_to_key(lambda a, b: _compare(sorts, a, b)))
