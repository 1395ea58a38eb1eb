"""PostgreSQL's SQL for canon's queries: visibility, conditions on properties, the text search.

The pieces `core.store.sql` builds `find_nodes`' and the change feed's conditions from (`DIALECT`), as
`core.store.sqlite_sql` holds SQLite's. Each returns a condition and its parameters (psycopg's `%s`
placeholders); every value is a bound parameter, and the only names interpolated are property names, which the
model's meta-schema restricts to identifiers. Each agrees with the rule it compiles: `Condition.matches`,
`Sight.sees`, and the text search of `NodeQuery.text`.

Properties are stored as `json` (the text as written, so key order survives); a condition reads one property
with `->` and checks its JSON type before casting it, in a CASE, since PostgreSQL does not promise to evaluate
the operands of AND in order.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from core.lang.conditions import Condition
from core.lang.model import searchable_text
from core.lang.ordering import Sort
from core.store import NodeQuery
from core.store.sql import Dialect
from core.values.records import Sight

__all__ = ["DIALECT", "like_pattern", "search_text", "sight_sql"]

# How a text property is lowered in SQL where the stored search text cannot answer: ICU's root locale lowers
# beyond ASCII as Python's str.lower does (a few special cases, such as a dotted capital I, differ).
_LOWER = 'lower(({}) COLLATE "und-x-icu")'


def sight_sql(sight: Sight, visibility: str = "visibility", readers: str = "readers") -> tuple[str, list[Any]]:
    """True when `sight` sees a record with these visibility and readers (a jsonb array or NULL) columns."""
    sql = f"{visibility} = ANY(%s)"
    if not sight.tags:
        return sql, [sorted(sight.levels)]
    return f"({sql} OR ({visibility} = 'restricted' AND {readers} ?| %s))", [sorted(sight.levels), sorted(sight.tags)]


def search_text(properties: Any, fields: tuple[str, ...]) -> str:
    """`searchable_text`, without NUL characters (which PostgreSQL text cannot hold)."""
    return searchable_text(properties, fields).replace("\x00", "")


def like_pattern(needle: str) -> str:
    """A LIKE pattern for "contains `needle`" (its wildcards and the escape character escaped)."""
    return "%" + needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _text_filter(query: NodeQuery, indexed: bool) -> tuple[str, list[Any]]:
    needle = (query.text or "").lower()
    if "\x00" in needle:
        return "false", []  # PostgreSQL text holds no NUL, so no stored text holds this needle
    if indexed and "\n" not in needle:
        return "search LIKE %s", [like_pattern(needle)]
    groups: list[str] = []
    params: list[Any] = []
    for type_name, fields in sorted(query.text_fields.items()):
        if query.type is not None and type_name != query.type:
            continue
        found = " OR ".join(f"strpos({_LOWER.format(_property_text(f))}, %s) > 0" for f in fields)
        if found:
            groups.append(f"(type = %s AND ({found}))")
            params += [type_name, *([needle] * len(fields))]
    return "(" + (" OR ".join(groups) or "false") + ")", params


def _value(name: str) -> str:
    return f"(properties -> '{name}')"


def _text(name: str) -> str:
    return f"(properties ->> '{name}')"


def _property_text(name: str) -> str:
    """The SQL of one text property's text, as `property_text` renders it (NULL for anything else)."""
    strings = (f"(SELECT string_agg(e #>> '{{}}', E'\\n') FROM json_array_elements(properties -> '{name}') e "
               "WHERE json_typeof(e) = 'string')")  # fmt: skip
    return f"(CASE {_kind(name)} WHEN 'string' THEN {_text(name)} WHEN 'array' THEN {strings} END)"


def _kind(name: str) -> str:
    return f"json_typeof(properties -> '{name}')"


def _facet_sql(name: str) -> str:
    """A property's facet key (`core.lang.conditions.facet_key`): a string as it is, any other scalar as its JSON
    text; NULL when absent, an array or an object. The same `->` and JSON type `_condition_sql` reads."""
    nothing = "WHEN 'array' THEN NULL WHEN 'object' THEN NULL"
    return f"(CASE {_kind(name)} WHEN 'null' THEN 'null' {nothing} ELSE {_text(name)} END)"


def _condition_sql(c: Condition) -> tuple[str, list[Any]]:
    name = c.property
    if c.op == "exists":
        return (f"{_value(name)} IS {'NOT ' if c.value else ''}NULL"), []
    if c.op in ("eq", "ne", "in"):
        values = c.value if c.op == "in" else [c.value]
        parts = [_equals_sql(_value(name), v) for v in values]
        same = " OR ".join(sql for sql, _ in parts) or "false"
        params = [p for _, ps in parts for p in ps]
        if c.op == "ne":
            return f"({_value(name)} IS NULL OR NOT ({same}))", params
        return f"({same})", params
    if c.op == "contains":
        if isinstance(c.value, str):
            text_match = f"strpos({_LOWER.format(_text(name))}, {_LOWER.format('%s::text')}) > 0"
            member = (f"EXISTS (SELECT 1 FROM json_array_elements({_value(name)}) e "
                      "WHERE json_typeof(e) = 'string' AND e #>> '{}' = %s)")  # fmt: skip
            sql = f"(CASE {_kind(name)} WHEN 'string' THEN {text_match} WHEN 'array' THEN {member} ELSE false END)"
            return sql, [c.value, c.value]
        element, params = _equals_sql("e", c.value)
        each = f"EXISTS (SELECT 1 FROM json_array_elements({_value(name)}) e WHERE {element})"
        return f"(CASE {_kind(name)} WHEN 'array' THEN {each} ELSE false END)", params
    operator = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}[c.op]
    if isinstance(c.value, str):
        return f"(CASE {_kind(name)} WHEN 'string' THEN {_text(name)} COLLATE \"C\" {operator} %s ELSE false END)", [
            c.value
        ]
    return f"(CASE {_kind(name)} WHEN 'number' THEN {_text(name)}::numeric {operator} %s ELSE false END)", [c.value]


def _sort_sql(sort: Sort) -> str:
    """A property's sort value (`core.lang.ordering.Sort.value`): its number, or its text compared by code point
    (`COLLATE "C"`, as SQLite compares), NULL when absent or of another JSON type."""
    name = sort.property
    if sort.numeric:
        return f"(CASE {_kind(name)} WHEN 'number' THEN {_text(name)}::numeric END)"
    return f"(CASE {_kind(name)} WHEN 'string' THEN {_text(name)} END) COLLATE \"C\""


def _equals_sql(value: str, v: Any) -> tuple[str, list[Any]]:
    """`value` (a json expression) equals the JSON value `v`, as Python's == compares decoded JSON."""
    kind = f"json_typeof({value})"
    if isinstance(v, bool):
        return f"({kind} = 'boolean' AND {value}::text = '{'true' if v else 'false'}')", []
    if v is None:
        return f"{kind} = 'null'", []
    if isinstance(v, str):
        return f"(CASE {kind} WHEN 'string' THEN ({value} #>> '{{}}') = %s ELSE false END)", [v]
    if isinstance(v, int | float):
        return f"(CASE {kind} WHEN 'number' THEN ({value} #>> '{{}}')::numeric = %s ELSE false END)", [v]
    kinds = "('array', 'object')"
    return f"(CASE WHEN {kind} IN {kinds} THEN {value}::jsonb = %s::jsonb ELSE false END)", [json.dumps(v)]


def _key_in(keys: Sequence[str]) -> tuple[str, list[Any]]:
    return "key = ANY(%s)", [list(keys)]


def _type_is(query: NodeQuery, by_key: bool) -> str:
    return "type = %s"


DIALECT = Dialect(
    mark="%s", true="true", sight=sight_sql, condition=_condition_sql, key_in=_key_in, type_is=_type_is,
    text=_text_filter, binary=' COLLATE "C"', facet=_facet_sql, sort=_sort_sql,
)  # fmt: skip
