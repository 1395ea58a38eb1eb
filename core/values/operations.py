"""Write operations: what a caller asks the store to do.

A batch is a sequence of operations committed as one transaction: all of them or none. Every write path
(import, the write tools, REST, GraphQL) builds these and hands them to `Store.commit`, which validates them
with `core.lang.validation` inside the transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from core.values.records import Edge, Node, Visibility

__all__ = [
    "DeleteEdge", "DeleteNode", "Operation", "PatchNode", "PutEdge", "PutNode", "operation_of", "operations_of",
    "put_node",
]  # fmt: skip


@dataclass(frozen=True, slots=True)
class PutNode:
    """Create or replace a node. `expected_revision` 0 means "must not exist yet".

    With `keep_access` (the caller gave neither a visibility nor readers), replacing an existing node keeps its
    visibility and readers, and a new node takes its type's default ones (`NodeType.visibility`, `.readers`);
    both decided inside the write transaction, so a concurrent change of them is never undone.
    """

    node: Node
    expected_revision: int | None = None
    keep_access: bool = False


@dataclass(frozen=True, slots=True)
class PatchNode:
    """Change part of an existing node: `properties` is a JSON Merge Patch (RFC 7396, `core.values.merge_patch`) of its
    properties; `visibility` and `readers` replace the node's when given (`readers` () removes them).

    The patch is applied inside the write transaction to the node as it is there, so it never undoes a change
    committed in between. Patching a node that does not exist is `NotFoundError`.
    """

    id: str
    properties: Mapping[str, Any] = field(default_factory=dict[str, Any])
    visibility: str | None = None
    readers: tuple[str, ...] | None = None
    expected_revision: int | None = None


@dataclass(frozen=True, slots=True)
class DeleteNode:
    """Delete a node. A node with edges is refused unless `cascade`, which deletes its edges first."""

    id: str
    expected_revision: int | None = None
    cascade: bool = False


@dataclass(frozen=True, slots=True)
class PutEdge:
    """Create or replace the edge (type, source, target)."""

    edge: Edge
    expected_revision: int | None = None


@dataclass(frozen=True, slots=True)
class DeleteEdge:
    """Delete the edge (type, source, target)."""

    type: str
    source: str
    target: str
    expected_revision: int | None = None


Operation = PutNode | PatchNode | DeleteNode | PutEdge | DeleteEdge


def put_node(
    id: str,
    type: str,
    properties: Mapping[str, Any],
    *,
    visibility: str | None = None,
    readers: Sequence[str] | None = None,
    expected_revision: int | None = None,
    created_at: str | None = None,
    updated_at: str | None = None,
    updated_by: str | None = None,
) -> PutNode:
    """The `PutNode` a write asks for, from what it gave: the one rule for visibility left out.

    Neither visibility nor readers given: an existing node keeps its own, a new one takes its type's default.
    Readers without a visibility make the node restricted. A visibility that is none of the three is refused by
    `core.lang.validation.plan`, which names it.
    """
    given = visibility is not None or readers is not None
    chosen = visibility if visibility is not None else "restricted" if readers else "internal"
    node = Node(id, type, properties, cast("Visibility", chosen), tuple(readers or ()), 0, created_at, updated_at,
                updated_by)  # fmt: skip
    return PutNode(node, expected_revision, keep_access=not given)


def operation_of(op: str, args: Mapping[str, Any]) -> Operation:
    """The operation a write tool's arguments ask for (`op`: the tool's name; `write_batch`'s operations each name
    theirs), arguments already checked against the tool's input schema."""
    expected = args.get("expected_revision")
    if op == "upsert_node":
        return put_node(args["id"], args["type"], args["properties"], visibility=args.get("visibility"),
                        readers=args.get("readers"), expected_revision=expected)  # fmt: skip
    if op == "patch_node":
        readers = tuple(args["readers"] or ()) if "readers" in args else None  # null removes them (merge patch)
        return PatchNode(args["id"], args.get("properties", {}), args.get("visibility"), readers, expected)
    if op == "delete_node":
        return DeleteNode(args["id"], expected, cascade=args.get("cascade", False))
    if op == "upsert_edge":
        return PutEdge(Edge(args["type"], args["source"], args["target"], args.get("properties", {})), expected)
    return DeleteEdge(args["type"], args["source"], args["target"], expected)


def operations_of(requested: Sequence[Mapping[str, Any]]) -> list[Operation]:
    """The operations of `write_batch`'s `operations` argument (what a proposal holds, too)."""
    return [operation_of(r["op"], r) for r in requested]
