"""What a type page's query string asks for, as `find_nodes` arguments, and which properties are facets.

The query string is Datasette's: a property's name is a filter on it (`?tier=1&lifecycle=production`), and
`<property>__<op>` one of the operators `find_nodes`' `where` takes (`?slo_availability__gte=99.9`,
`?name__contains=pay`). The page's own parameters start with `_` (`_text`, `_cursor`, `_size`, and `_sort`: a
property to sort the rows by, `-` before it for descending), which no property name can (the model's property
names start with a letter). Each value is read as its property's schema says (an integer, a number,
`true`/`false`, text), so the tool gets what a REST or MCP caller would send.

Several operators on one property are all asked for (`?tier__gte=1&tier__lte=2` is a range: `find_nodes`' `where`
takes `{"gte": 1, "lte": 2}`); one operator given twice is an error naming both parameters, never a silently
dropped bound. Everything else about the values (a bound of the wrong type, an unknown property, a property that
cannot be sorted by) is for the tool to refuse, as it does on every surface.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core.lang.model import Model, NodeType
from core.values.errors import Problem, ValidationError

__all__ = ["OPERATORS", "PAGE_SIZE", "Facet", "TypeQuery", "facets_of", "parse_type_query"]

OPERATORS = ("eq", "ne", "gt", "gte", "lt", "lte", "contains")  # find_nodes' where operators a page may ask for
PAGE_SIZE = 50  # rows on a type page unless _size says otherwise
MAX_SIZE = 100  # find_nodes' largest page
MAX_FACET_VALUES = 12  # an integer property with at most this many values (by its bounds) is a facet
OWN = ("_text", "_cursor", "_size", "_sort")
SORT = re.compile(r"-?[a-z][a-z0-9_]{0,63}")  # `_sort`: a property, `-` before it for descending


@dataclass(frozen=True)
class Facet:
    """A property whose values are few and known (an enum, a boolean, a small bounded integer)."""

    name: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class TypeQuery:
    """A type page's request: the `find_nodes` conditions, and where the page starts."""

    where: dict[str, Any] = field(default_factory=dict[str, Any])
    params: tuple[tuple[str, str], ...] = ()  # the filter parameters as given (for links that keep them)
    text: str | None = None
    cursor: str | None = None
    size: int = PAGE_SIZE
    sort: str | None = None  # `_sort`: find_nodes' order_by of one property (`-name`: descending)

    @property
    def own(self) -> list[tuple[str, str]]:
        """The page's own parameters a link to another page of these rows keeps: the text and the sort."""
        return [(k, v) for k, v in (("_text", self.text), ("_sort", self.sort)) if v is not None]

    def arguments(self, node_type: str) -> dict[str, Any]:
        """The `find_nodes` arguments of this page."""
        arguments: dict[str, Any] = {"type": node_type, "limit": self.size}
        if self.sort is not None:
            arguments["order_by"] = [self.sort]
        if self.where:
            arguments["where"] = self.where
        if self.text is not None:
            arguments["text"] = self.text
        if self.cursor is not None:
            arguments["cursor"] = self.cursor
        return arguments


def facets_of(model: Model, node_type: NodeType) -> list[Facet]:
    """The type's facet properties, in the model's order: enums, booleans and integers bounded to a few values."""
    found: list[Facet] = []
    for name, declared in node_type.properties.items():
        schema = model.resolved(declared)
        if isinstance(schema.get("enum"), list):
            found.append(Facet(name, tuple(schema["enum"])))
        elif schema.get("type") == "boolean":
            found.append(Facet(name, (True, False)))
        elif schema.get("type") == "integer" and _small_range(schema):
            found.append(Facet(name, tuple(range(int(schema["minimum"]), int(schema["maximum"]) + 1))))
    return found


def _small_range(schema: Mapping[str, Any]) -> bool:
    low, high = schema.get("minimum"), schema.get("maximum")
    return isinstance(low, int) and isinstance(high, int) and 0 <= high - low < MAX_FACET_VALUES


def parse_type_query(model: Model, node_type: NodeType, query: list[tuple[str, str]]) -> TypeQuery:
    """The request of a type page's query string; a `ValidationError` naming each parameter that is wrong."""
    problems: list[Problem] = []
    ops: dict[str, dict[str, Any]] = {}  # property -> operator -> value
    given: dict[tuple[str, str], str] = {}  # (property, operator) -> the parameter that set it
    params: list[tuple[str, str]] = []
    own: dict[str, str] = {}
    for key, raw in query:
        if key.startswith("_"):
            if key not in OWN:
                problems.append(Problem(f"/query/{key}", f"unknown parameter; this page takes {', '.join(OWN)}"))
            elif raw != "":
                own[key] = raw
            continue
        if raw == "":
            continue  # an empty form field asks for nothing
        name, _, op = key.partition("__")
        op = op or "eq"
        if name not in node_type.properties:
            problems.append(Problem(f"/query/{key}", f"{node_type.name} has no property {name!r}"))
            continue
        if op not in OPERATORS:
            problems.append(Problem(f"/query/{key}", f"unknown operator {op!r}; one of {', '.join(OPERATORS)}"))
            continue
        if (name, op) in given:
            problems.append(Problem(f"/query/{key}", f"{given[name, op]} already gives {name} a {op} condition; "
                                                     "give each operator once"))  # fmt: skip
            continue
        given[name, op] = key
        ops.setdefault(name, {})[op] = typed(model.resolved(node_type.properties[name]), raw, op)
        params.append((key, raw))
    where = {name: asked["eq"] if list(asked) == ["eq"] else asked for name, asked in ops.items()}
    size = _size(own.get("_size"), problems)
    sort = own.get("_sort")
    if sort is not None and not (SORT.fullmatch(sort) and sort.removeprefix("-") in node_type.properties):
        problems.append(Problem("/query/_sort", f"a property of {node_type.name} to sort by, - before it for "
                                                "descending"))  # fmt: skip
    if problems:
        raise ValidationError(f"This page cannot be shown for that query ({len(problems)} problem(s)).", problems)
    return TypeQuery(where, tuple(params), own.get("_text"), own.get("_cursor"), size, sort)


def _size(raw: str | None, problems: list[Problem]) -> int:
    if raw is None:
        return PAGE_SIZE
    if re.fullmatch(r"[0-9]{1,3}", raw) and 1 <= int(raw) <= MAX_SIZE:
        return int(raw)
    problems.append(Problem("/query/_size", f"rows per page, a whole number from 1 to {MAX_SIZE}"))
    return PAGE_SIZE


def typed(schema: Mapping[str, Any], raw: str, op: str) -> Any:
    """A query-string value as its property's schema reads it: an integer, a number, a boolean, else the text
    (a value that does not read so stays text, for the tool to refuse by the schema). `contains` on an array
    reads as its items do."""
    for choice in schema.get("enum", ()):
        if _as_text(choice) == raw:
            return choice  # an enum of numbers or booleans: the value whose text was sent
    kind = schema.get("type")
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        kind = schema["items"].get("type")
    if op == "contains" and kind not in ("integer", "number", "boolean"):
        return raw
    if kind == "boolean" and raw in ("true", "false"):
        return raw == "true"
    if kind == "integer" and re.fullmatch(r"-?[0-9]{1,19}", raw):
        return int(raw)
    if kind in ("number", "integer"):
        try:
            number = float(raw)
        except ValueError:
            return raw
        return number if math.isfinite(number) else raw  # JSON has no infinity
    return raw


def _as_text(value: Any) -> str:
    """How a value is written in a query string: JSON's `true`/`false`, numbers and text as they read."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
