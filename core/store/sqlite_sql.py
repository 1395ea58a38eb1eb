"""SQLite's SQL for canon's queries: visibility, conditions on properties, the text search and its index.

The pieces `core.store.sql` builds `find_nodes`' and the change feed's conditions from (`DIALECT`), as
`core.store.pg_sql` holds PostgreSQL's. Each returns a condition and its parameters (`?` placeholders); every
value is a bound parameter, and the only names interpolated are property and type names, which the model's
meta-schema restricts to identifiers. Each agrees with the rule it compiles: `Condition.matches`, `Sight.sees`
and the text search of `NodeQuery.text`. `canon_lower` is the store connection's SQL function lowering text as
Python does (`core.store.sqlite._connect`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from core.lang.conditions import Condition
from core.lang.ordering import Sort
from core.store import NodeQuery
from core.store.sql import Dialect
from core.values.records import Sight

__all__ = ["DIALECT", "property_text", "sight_sql"]


def sight_sql(sight: Sight, visibility: str, readers: str) -> tuple[str, list[Any]]:
    """The SQL condition true when `sight` sees a record with these visibility and readers columns (readers: a
    JSON array or NULL); agrees with `Sight.sees`."""
    levels = sorted(sight.levels)
    sql = f"{visibility} IN ({','.join('?' * len(levels))})"
    if not sight.tags:
        return sql, list(levels)
    named = f"SELECT 1 FROM json_each({readers}) WHERE value IN ({','.join('?' * len(sight.tags))})"
    return f"({sql} OR ({visibility} = 'restricted' AND EXISTS ({named})))", [*levels, *sight.tags]


def property_text(name: str) -> str:
    """The SQL expression (over a `nodes` row) of one text property's text: a string as it is, an array's strings
    one per line (NULL for anything else), as `pg_sql.property_text` and `search_text` render it."""
    path = f"'$.{name}'"
    strings = f"(SELECT group_concat(value, char(10)) FROM json_each(properties, {path}) WHERE type = 'text')"
    return (f"(CASE json_type(properties, {path}) WHEN 'text' THEN json_extract(properties, {path}) "
            f"WHEN 'array' THEN {strings} END)")  # fmt: skip


def _text_filter(query: NodeQuery, indexed: bool) -> tuple[str, list[Any]]:
    """The nodes whose text properties (`query.text_fields` of their type) hold `query.text`, ignoring case.

    The index (`node_text`) holds each node's text properties, lowered as `canon_lower` lowers them, one per
    line (`searchable_text`).
    A needle of 3 or more characters without a line break is in one of those properties exactly when it is in
    that text, so when the index holds the query's properties (`indexed`) the answer comes from the index alone:
    the nodes holding every trigram of a cover of the needle (`_trigram_cover`), then `instr` on their indexed
    text. Otherwise the index only proposes candidates (below 3 characters, every node is one), and each is
    checked property by property.
    """
    lowered = query.text.lower() if query.text else ""
    candidates = "id IN (SELECT m.id FROM node_text_ids m WHERE m.docid IN (SELECT rowid FROM node_text WHERE {}))"
    if _from_text_index(lowered):
        if indexed and "\n" not in lowered:
            return candidates.format("node_text MATCH ? AND instr(text, ?) > 0"), [_trigram_cover(lowered), lowered]
        clauses, params = [candidates.format("node_text MATCH ?")], list[Any]([_trigram_cover(lowered)])
    else:
        clauses, params = [], list[Any]()
    groups: list[str] = []
    for type_name, fields in sorted(query.text_fields.items()):
        if query.type is not None and type_name != query.type:
            continue
        # instr, not LIKE: a LIKE pattern ends at its first NUL, so '%<NUL>%' would match every text
        found = " OR ".join(f"instr(canon_lower({property_text(f)}), ?) > 0" for f in fields)
        if found:
            groups.append(f"(+type = ? AND ({found}))")  # +: never drive the search from the type index
            params += [type_name, *([lowered] * len(fields))]
    clauses.append("(" + (" OR ".join(groups) or "0") + ")")
    return " AND ".join(clauses), params


def _from_text_index(text: str | None) -> bool:
    """Whether the text index proposes the candidates of a search for `text`: it needs a trigram."""
    return text is not None and len(text.lower()) >= 3 and "\x00" not in text


def _trigram_cover(needle: str) -> str:
    """An FTS5 query for the nodes whose indexed text holds every trigram of a cover of `needle` (3 or more
    characters): consecutive trigrams that do not overlap, and the last one. Every text holding the needle holds
    these, and a few trigrams cost less to look up than all of them (each is one list of nodes to merge)."""
    grams = [needle[i : i + 3] for i in range(0, len(needle) - 2, 3)]
    grams.append(needle[-3:])
    return " AND ".join('"' + g.replace('"', '""') + '"' for g in dict.fromkeys(grams))


def _condition_sql(c: Condition) -> tuple[str, list[Any]]:
    path = f"'$.{c.property}'"  # property names are validated identifiers
    value = f"json_extract(properties, {path})"
    kind = f"json_type(properties, {path})"
    if c.op == "exists":
        return (f"{kind} IS NOT NULL" if c.value else f"{kind} IS NULL"), []
    if c.op in ("eq", "ne", "in"):
        values = c.value if c.op == "in" else [c.value]
        same = " OR ".join(_equals_sql(value, kind, v) for v in values) or "0"
        params = [_sql_value(v) for v in values if not isinstance(v, bool) and v is not None]
        if c.op == "ne":
            return f"({kind} IS NULL OR NOT ({same}))", params
        return f"({same})", params
    if c.op == "contains":
        if isinstance(c.value, str):
            text_match = f"({kind} = 'text' AND instr(canon_lower({value}), canon_lower(?)) > 0)"
            each_text = f"SELECT 1 FROM json_each(properties, {path}) WHERE type = 'text' AND value = ?"
            member = f"({kind} = 'array' AND EXISTS ({each_text}))"
            return f"({text_match} OR {member})", [c.value, c.value]
        each = f"SELECT 1 FROM json_each(properties, {path}) AS e WHERE {_equals_sql('e.value', 'e.type', c.value)}"
        params = [] if isinstance(c.value, bool) else [c.value]
        return f"({kind} = 'array' AND EXISTS ({each}))", params
    operator = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}[c.op]
    types = "('text')" if isinstance(c.value, str) else "('integer', 'real')"
    return f"({kind} IN {types} AND {value} {operator} ?)", [c.value]


def _facet_sql(name: str) -> str:
    """A property's facet key (`core.lang.conditions.facet_key`): a string as it is, any other scalar as JSON
    text; NULL when absent, an array or an object. The same path and JSON type `_condition_sql` reads."""
    path = f"'$.{name}'"
    value, kind = f"json_extract(properties, {path})", f"json_type(properties, {path})"
    scalars = "WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' WHEN 'null' THEN 'null'"
    numbers = f"WHEN 'integer' THEN CAST({value} AS TEXT) WHEN 'real' THEN CAST({value} AS TEXT)"
    return f"(CASE {kind} WHEN 'text' THEN {value} {scalars} {numbers} END)"


def _sort_sql(sort: Sort) -> str:
    """A property's sort value (`core.lang.ordering.Sort.value`): its number, or its text (compared by code point:
    SQLite's binary collation of UTF-8), NULL when absent or of another JSON type."""
    path = f"'$.{sort.property}'"  # property names are validated identifiers
    value, kind = f"json_extract(properties, {path})", f"json_type(properties, {path})"
    if sort.numeric:
        return f"(CASE {kind} WHEN 'integer' THEN {value} WHEN 'real' THEN {value} END)"
    return f"(CASE {kind} WHEN 'text' THEN {value} END)"


def _equals_sql(value: str, kind: str, v: Any) -> str:
    if isinstance(v, bool):
        return f"{kind} = '{'true' if v else 'false'}'"
    if v is None:
        return f"{kind} = 'null'"
    if isinstance(v, str):
        return f"({kind} = 'text' AND {value} = ?)"
    if isinstance(v, int | float):
        return f"({kind} IN ('integer', 'real') AND {value} = ?)"
    return f"({kind} IN ('array', 'object') AND json({value}) = json(?))"  # compare as canonical JSON


def _sql_value(v: Any) -> Any:
    return json.dumps(v, separators=(",", ":")) if isinstance(v, list | dict) else v


def _key_in(keys: Sequence[str]) -> tuple[str, list[Any]]:
    return f"key IN ({', '.join('?' * len(keys))})", list(keys)


def _type_is(query: NodeQuery, by_key: bool) -> str:
    """When the text index proposes the candidates, the type is written `+type`, so the search starts from those
    few nodes rather than from every node of the type in id order (unless a key condition finds the node by key
    anyway)."""
    return "+type = ?" if _from_text_index(query.text) and not by_key else "type = ?"


DIALECT = Dialect(
    mark="?",
    true="1",
    sight=sight_sql,
    condition=_condition_sql,
    key_in=_key_in,
    type_is=_type_is,
    text=_text_filter,
    sort=_sort_sql,
    facet=_facet_sql,
)
