"""What every store backend shares: timestamps, JSON text, the empty view re-validation starts from, and the
names of stored records in problems."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from core.documents import pointer
from core.operations import Operation, PutEdge, PutNode
from core.records import Edge, Node

__all__ = ["EmptyView", "dumps", "edge_ends", "model_info", "record_pointer", "state_access", "utc_now"]


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class EmptyView:
    """`StateView` of an empty store: what re-validating every record under a new model starts from."""

    def node(self, id: str) -> Node | None:
        return None

    def node_id_by_key(self, type: str, key: str) -> str | None:
        return None

    def edge(self, type: str, source: str, target: str) -> Edge | None:
        return None

    def out_targets(self, source: str, type: str) -> list[str]:
        return []

    def in_sources(self, target: str, type: str) -> list[str]:
        return []

    def incident_edges(self, id: str) -> list[Edge]:
        return []


def record_pointer(op: Operation) -> str:
    """Where a stored record lives, as a JSON pointer: /nodes/{id} or /edges/{type:source->target}."""
    if isinstance(op, PutNode):
        return pointer(["nodes", op.node.id])
    assert isinstance(op, PutEdge)
    return pointer(["edges", op.edge.key])


def model_info(document: Any) -> dict[str, Any]:
    info = document.get("x-canon-model", {}) if isinstance(document, dict) else {}
    return {"id": document.get("$id") if isinstance(document, dict) else None, **info}


def edge_ends(key: str) -> tuple[str, str]:
    """(source, target) of an edge key, type:source->target (a type has no ':' and an id has no '>')."""
    source, _, target = key.partition(":")[2].partition("->")
    return source, target


def state_access(kind: str, state: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    """A logged node state's (visibility, readers as JSON), the change log's access columns."""
    if kind != "node" or state is None:
        return None, None
    readers = state.get("readers")
    return state.get("visibility"), dumps(list(readers)) if readers else None
