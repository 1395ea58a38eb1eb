"""What every store backend shares: timestamps, JSON text, re-validating every stored record under a model (what
adopting a model does, and what `canon model diff` reports), and the names of stored records in problems."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from core.documents import pointer
from core.errors import ModelError, Problem, ValidationError
from core.model import Model
from core.operations import Operation, PutEdge, PutNode
from core.records import Edge, Node
from core.validation import indexed_problems, plan

__all__ = [
    "EmptyView",
    "RecordCheck",
    "check_records",
    "dumps",
    "edge_ends",
    "model_info",
    "record_pointer",
    "revalidate",
    "state_access",
    "utc_now",
]


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


@dataclass(frozen=True)
class RecordCheck:
    """Stored records checked under a model: how many, how many refused, and every problem as (the record's
    pointer, the pointer inside it, the message)."""

    checked: int
    refused: int = 0
    problems: tuple[tuple[str, str, str], ...] = ()


def check_records(model: Model, nodes: Iterable[Node], edges: Iterable[Edge]) -> RecordCheck:
    """Check every stored record under `model`, as if written into an empty store; nothing is written.

    Nodes are checked first: while some are refused, their edges would only repeat "no such node"."""
    node_ops: list[Operation] = [PutNode(n) for n in nodes]
    all_ops: list[Operation] = [*node_ops, *(PutEdge(e) for e in edges)]
    for ops in (node_ops, all_ops):
        try:
            plan(model, ops, EmptyView(), base_revision=0, principal="system", now=utc_now())
        except ValidationError as exc:
            found = list(indexed_problems(exc))
            return RecordCheck(len(ops), len({p.index for p in found}),
                               tuple((record_pointer(ops[p.index]), p.problem.pointer, p.problem.message)
                                     for p in found))  # fmt: skip
    return RecordCheck(len(all_ops))


def revalidate(model: Model, nodes: Iterable[Node], edges: Iterable[Edge], location: str) -> None:
    """`check_records`, refusing the model (`ModelError`, one problem per refused record, named by it) unless every
    record fits: what a store does before it adopts a changed model."""
    check = check_records(model, nodes, edges)
    if check.problems:
        problems = [Problem(f"{record}{at}", message, file=location) for record, at, message in check.problems]
        raise ModelError(
            f"The store {location} holds {len(problems)} problem(s) under the model {model.source}; "
            "fix the data or the model first. Nothing was changed.",
            problems,
        )


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
