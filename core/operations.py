"""Write operations: what a caller asks the store to do.

A batch is a sequence of operations committed as one transaction: all of them or none. Every write path
(import, the write tools, REST, GraphQL) builds these and hands them to `Store.commit`, which validates them
with `core.validation` inside the transaction.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.records import Edge, Node

__all__ = ["DeleteEdge", "DeleteNode", "Operation", "PutEdge", "PutNode"]


@dataclass(frozen=True, slots=True)
class PutNode:
    """Create or replace a node. `expected_revision` 0 means "must not exist yet".

    With `keep_access`, replacing an existing node keeps its visibility and readers (decided inside the write
    transaction, so a concurrent change of them is never undone); a new node takes the ones given.
    """

    node: Node
    expected_revision: int | None = None
    keep_access: bool = False


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


Operation = PutNode | DeleteNode | PutEdge | DeleteEdge
