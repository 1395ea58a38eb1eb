"""Renames declared in a model, and the data move that adopting the model makes in the store.

A model renames a node type, an edge type or a property by naming its previous name (`x-canon-renamed-from`,
checked by `core.lang.model.check_model`). `declared_renames` compares the store's recorded model document with the new
model and lists the renames that apply to it: a declared rename whose previous name the stored model no longer has
was applied before, and is left alone, so the annotation may stay in the model for as long as its author likes.

`migrate` moves the stored records in the store's own transaction, before the store re-validates every record under
the new model: node and edge types by their type column, properties inside each record's JSON properties. Ids,
edges, the change log and the audit log are untouched, so a node keeps its history; the store's key column and
text index are recomputed by the adopting store afterwards, as for any model change. `renamed_node` and
`renamed_edge` apply the same renames to one record in memory, for a report that writes nothing
(`canon model diff`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, LiteralString, Protocol

from core.lang.model import Model, property_renamed_from
from core.values.errors import ModelError, Problem
from core.values.records import Edge, Node

__all__ = [
    "POSTGRES",
    "SQLITE",
    "MoveSql",
    "Moved",
    "Rename",
    "declared_renames",
    "migrate",
    "renamed_edge",
    "renamed_node",
    "renames_types",
]

RenameKind = Literal["node type", "edge type", "property"]
Table = Literal["nodes", "edges"]


@dataclass(frozen=True)
class Rename:
    """One declared rename: a node type, an edge type, or a property of `owner` (the type's new name), stored in
    `table`."""

    kind: RenameKind
    old: str
    new: str
    table: Table
    owner: str | None = None

    def __str__(self) -> str:
        prefix = f"{self.owner}." if self.owner else ""
        return f"{self.kind} {prefix}{self.old} -> {prefix}{self.new}"

    def as_dict(self) -> dict[str, Any]:
        """As reports and the change log show it: kind, from, to, and the type a property belongs to."""
        return {"kind": self.kind, "from": self.old, "to": self.new, "type": self.owner}


@dataclass(frozen=True)
class Moved:
    """A rename and how many stored records it moved."""

    rename: Rename
    records: int

    def as_dict(self) -> dict[str, Any]:
        return {**self.rename.as_dict(), "records": self.records}


class _Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...


Execute = Callable[[LiteralString, Sequence[Any]], _Cursor]  # a connection's execute, inside the adopting transaction


@dataclass(frozen=True)
class MoveSql:
    """A backend's statements that move records: `{table}` is nodes or edges. A type move takes (new, old); a
    property move takes (old, new, old, type, old)."""

    type_move: LiteralString
    property_move: LiteralString


SQLITE = MoveSql(
    "UPDATE {table} SET type = ? WHERE type = ?",
    "UPDATE {table} SET properties = json_set(json_remove(properties, '$.' || ?), '$.' || ?, "
    "properties -> ('$.' || ?)) WHERE type = ? AND json_type(properties, '$.' || ?) IS NOT NULL",
)
POSTGRES = MoveSql(
    "UPDATE {table} SET type = %s WHERE type = %s",
    "UPDATE {table} SET properties = ((properties::jsonb - %s::text) || "
    "jsonb_build_object(%s::text, properties::jsonb -> %s::text))::json WHERE type = %s AND properties::jsonb ? %s",
)


def declared_renames(stored: Mapping[str, Any], model: Model) -> tuple[Rename, ...]:
    """The renames `model` declares that apply to a store whose recorded model document is `stored`: types first,
    then properties (named by their type's new name). Raise `ModelError` for a rename onto a name the stored model
    also has (that would merge two types or properties)."""
    defs: Mapping[str, Any] = stored.get("$defs") or {}
    old_nodes = {n for n, d in defs.items() if isinstance(d, Mapping) and "x-canon-node" in d}
    old_edges = {n for n, d in defs.items() if isinstance(d, Mapping) and "x-canon-edge" in d}
    types = [
        *_type_renames("node type", "nodes", {n: t.renamed_from for n, t in model.node_types.items()}, old_nodes),
        *_type_renames("edge type", "edges", {n: t.renamed_from for n, t in model.edge_types.items()}, old_edges),
    ]
    _refuse_merges(types, defs, model)
    previous = {r.new: r.old for r in types}
    owners: list[tuple[Table, str, Mapping[str, Any], set[str]]] = [
        *(("nodes", n, t.properties, old_nodes) for n, t in model.node_types.items()),
        *(("edges", n, t.properties, old_edges) for n, t in model.edge_types.items()),
    ]
    properties: list[Rename] = []
    for table, name, props, stored_types in owners:
        before = previous.get(name, name)
        if before in stored_types:
            properties += _property_renames(name, props, defs[before], table)
    _refuse_merges(properties, defs, model, previous)
    return (*types, *properties)


def _type_renames(
    kind: RenameKind, table: Table, declared: Mapping[str, str | None], stored: set[str]
) -> Iterator[Rename]:
    for name, old in declared.items():
        if old is not None and old in stored:
            yield Rename(kind, old, name, table)


def _property_renames(
    owner: str, props: Mapping[str, Any], stored: Mapping[str, Any], table: Table
) -> Iterator[Rename]:
    stored_props: Mapping[str, Any] = stored.get("properties") or {}
    for name, schema in props.items():
        old = property_renamed_from(schema)
        if old is not None and old in stored_props:
            yield Rename("property", old, name, table, owner)


def _refuse_merges(
    renames: list[Rename], defs: Mapping[str, Any], model: Model, previous: Mapping[str, str] | None = None
) -> None:
    problems: list[Problem] = []
    for r in renames:
        if r.owner is None:
            taken = r.new in defs
            at = f"/$defs/{r.new}/x-canon-renamed-from"
        else:
            stored_props: Mapping[str, Any] = defs[(previous or {}).get(r.owner, r.owner)].get("properties") or {}
            taken = r.new in stored_props
            at = f"/$defs/{r.owner}/properties/{r.new}/x-canon-renamed-from"
        if taken:
            problems.append(Problem(at, f"the store's model has both {r.old!r} and {r.new!r}; a rename cannot merge "
                                        "them (remove one first)", file=model.source))  # fmt: skip
    if problems:
        raise ModelError(f"The model {model.source} renames onto names the store already uses. Nothing was changed.",
                         problems)  # fmt: skip


def renames_types(before: Model, after: Model) -> bool:
    """Whether adopting `after` in place of `before` renames a node or an edge type (what a graph index keys by:
    it must load the moved records again, since they moved without a change each)."""
    return any(r.kind != "property" for r in declared_renames(before.document, after))


def migrate(stored: Mapping[str, Any], model: Model, execute: Execute, sql: MoveSql) -> tuple[Moved, ...]:
    """Move the stored records of every rename `model` declares against the `stored` model document, with the
    backend's statements `sql`, inside the caller's transaction; return what moved."""
    moved: list[Moved] = []
    for r in declared_renames(stored, model):
        if r.owner is None:
            cursor = execute(sql.type_move.format(table=r.table), (r.new, r.old))
        else:
            cursor = execute(sql.property_move.format(table=r.table), (r.old, r.new, r.old, r.owner, r.old))
        moved.append(Moved(r, max(cursor.rowcount, 0)))
    return tuple(moved)


def renamed_node(renames: Sequence[Rename], node: Node) -> tuple[Node, tuple[Rename, ...]]:
    """`node` as `migrate` leaves it, and the renames that moved it."""
    type_, props, applied = _renamed(renames, "nodes", node.type, node.properties)
    return (replace(node, type=type_, properties=props) if applied else node), applied


def renamed_edge(renames: Sequence[Rename], edge: Edge) -> tuple[Edge, tuple[Rename, ...]]:
    """`edge` as `migrate` leaves it, and the renames that moved it."""
    type_, props, applied = _renamed(renames, "edges", edge.type, edge.properties)
    return (replace(edge, type=type_, properties=props) if applied else edge), applied


def _renamed(
    renames: Sequence[Rename], table: Table, type_: str, props: Mapping[str, Any]
) -> tuple[str, Mapping[str, Any], tuple[Rename, ...]]:
    applied: list[Rename] = []
    for r in renames:
        if r.table != table:
            continue
        if r.owner is None and type_ == r.old:
            type_ = r.new
            applied.append(r)
        elif r.owner == type_ and r.old in props:
            props = {k: v for k, v in props.items() if k != r.old} | {r.new: props[r.old]}
            applied.append(r)
    return type_, props, tuple(applied)
