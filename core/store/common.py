"""What every store backend shares: timestamps, JSON text, re-validating every stored record under a model (what
applying a model does, and what `canon model diff` reports), the refusals of a model change, the entries of the
model history (`ModelVersion`), the names of stored records in problems, a page of the audit log (`audit_page`),
and the batch-by-batch writer of a bulk import (`Bulk`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from core.lang.model import Model
from core.lang.model_migration import Moved
from core.lang.model_version import semver
from core.lang.validation import IndexedProblem, StateView, Write, check, indexed_problems, plan
from core.values.audit import AuditQuery
from core.values.documents import pointer
from core.values.errors import ModelError, Problem, ValidationError
from core.values.operations import Operation, PutEdge, PutNode
from core.values.records import Edge, Node

EdgeRef = tuple[str, str, str]  # (type, source, target)
FetchNodes = Callable[[Sequence[str]], dict[str, Node]]  # the stored nodes among these ids
FetchEdges = Callable[[Sequence[EdgeRef]], dict[EdgeRef, Edge]]  # the stored edges among these refs
FetchKeys = Callable[[Sequence[tuple[str, str]]], dict[tuple[str, str], str]]  # who holds these (type, key) pairs
FetchEnds = Callable[[Sequence[tuple[str, str]], bool], dict[tuple[str, str], list[str]]]  # `Store.far_ends`
FetchTypes = Callable[[Sequence[str]], dict[str, str]]  # the types of the stored nodes among these ids

__all__ = [
    "Bulk",
    "Discard",
    "EmptyView",
    "ModelVersion",
    "RecordCheck",
    "audit_page",
    "check_records",
    "check_replaced",
    "dumps",
    "edge_ends",
    "model_differs",
    "model_info",
    "model_version",
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

    def node_type(self, id: str) -> str | None:
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
            # counted over every record (nodes and edges), so the unit is one whichever pass refused
            return RecordCheck(len(all_ops), len({p.index for p in found}),
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


@dataclass(frozen=True)
class ModelVersion:
    """One entry of a store's model history: the model recorded at `revision` (`summary`: what `canon model apply`
    recorded of its diff; None for a store's first model)."""

    revision: int
    at: str
    principal: str
    version: str
    summary: Mapping[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"revision": self.revision, "at": self.at, "principal": self.principal, "version": self.version,
                "summary": dict(self.summary) if self.summary is not None else None}  # fmt: skip


def model_version(row: Sequence[Any]) -> ModelVersion:
    """A history entry from its row: revision, at, principal, version, summary (JSON text, or None)."""
    revision, at, principal, version, summary = row
    parsed = json.loads(summary) if isinstance(summary, str) else summary
    return ModelVersion(int(revision), str(at), str(principal), str(version), parsed)


def _serve_the_store_s(source: str) -> str:
    return (f"write the store's model to the file with 'canon model show > {source}', or point [model] path at a "
            "file that holds it")  # fmt: skip


def model_differs(location: str, recorded: Mapping[str, Any], model: Model) -> ModelError:
    """The error for opening a store with a model file that is neither its model nor an older one of its history
    (`superseded_file`): a newer model (the same `$id`, a higher version) or an unknown one. It names both fixes:
    apply the file, or make the file the store's model."""
    before = model_info(recorded)
    source = model.source
    label = f"The store {location} records the model {before.get('name')} {before.get('version')}, and {source} " \
            f"({model.name} {model.version})"  # fmt: skip
    if _is_newer(before, model):
        message = (f"{label} is newer; nothing was changed. See the changes with 'canon model diff {source}' and "
                   f"apply them with 'canon model apply {source}'; or, to serve the store's model, "
                   f"{_serve_the_store_s(source)}.")  # fmt: skip
    else:
        message = (
            f"{label} is neither that model nor one the store had before; nothing was changed. To serve the "
            f"store's model, {_serve_the_store_s(source)}; to make this one the store's model, see the "
            f"changes with 'canon model diff {source}' and apply them with 'canon model apply {source}'."
        )
    return ModelError(message, [Problem("", "differs from the store's model: apply it with 'canon model apply', or "
                                        "replace it with 'canon model show'", file=source)])  # fmt: skip


def superseded_file(location: str, recorded: Mapping[str, Any], model: Model) -> str:
    """The warning for opening a store with a model file that is an older entry of its history (applied once,
    replaced since, typically by `canon model apply` or the `apply_model` tool): the store's model is served."""
    now = model_info(recorded)
    return (f"The model file {model.source} holds {model.name} {model.version}, an older model of the store "
            f"{location}, which has applied {now.get('name')} {now.get('version')} since; serving the store's model. "
            f"To silence this, {_serve_the_store_s(model.source)}.")  # fmt: skip


def _is_newer(recorded: Mapping[str, Any], model: Model) -> bool:
    version = recorded.get("version")
    if recorded.get("id") != model.id or not isinstance(version, str):
        return False
    try:
        return semver(model.version) > semver(version)
    except ValueError:
        return False


def check_replaced(location: str, recorded: str, replaces: str | None) -> None:
    """Refuse to apply a model planned against another model than the one the store records now (`recorded`, its
    canonical JSON): another process applied one in between."""
    if replaces is not None and hashlib.sha256(recorded.encode()).hexdigest() != replaces:
        current = model_info(json.loads(recorded))
        raise ModelError(
            f"The store {location} changed its model to {current.get('name')} {current.get('version')} while this "
            "change was planned; nothing was changed. Look at the new plan and apply again.",
            [Problem("/x-canon-model/version", f"the store's model is now {current.get('version')}", file=location)],
        )


def model_info(document: Any, moved: Sequence[Moved] = ()) -> dict[str, Any]:
    """A model as its change-log entry shows it: its `$id` and `x-canon-model` (name, version), and what the
    renames the change declared moved (`renamed`: kind, from, to, the property's type, records moved), if any."""
    info = document.get("x-canon-model", {}) if isinstance(document, dict) else {}
    entry = {"id": document.get("$id") if isinstance(document, dict) else None, **info}
    if moved:
        entry["renamed"] = [m.as_dict() for m in moved]
    return entry


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


def audit_page(
    read: Callable[[str, Sequence[Any]], list[Any]],
    query: AuditQuery,
    fields: Sequence[str],
    *,
    before: int | None,
    limit: int,
    mark: str,
) -> tuple[list[dict[str, Any]], int]:
    """One page of the audit records `query` selects, newest first (ids below `before`), and how many match in
    all: the same SQL on every backend but for its parameter marker `mark` ("?" in SQLite, "%s" in psycopg)."""
    clauses, params = ["1 = 1"], list[Any]()
    for column in ("principal", "target", "outcome", "surface"):
        value = getattr(query, column)
        if value is not None:
            clauses.append(f"{column} = {mark}")
            params.append(value)
    if query.since is not None:
        clauses.append(f"at >= {mark}")
        params.append(query.since)
    where = " AND ".join(clauses)
    rows = read(
        f"SELECT {', '.join(fields)} FROM audit WHERE {where} AND id < {mark} ORDER BY id DESC LIMIT {mark}",
        [*params, before if before is not None else 2**63 - 1, limit],
    )
    total = int(read(f"SELECT count(*) FROM audit WHERE {where}", params)[0][0])
    return [dict(zip(fields, row, strict=True)) for row in rows], total


class Discard(Exception):
    """Raised inside a backend's bulk transaction to roll it back (a dry run)."""


class Bulk:
    """One write transaction fed batch by batch (`Store.bulk`): each batch is checked (`core.lang.validation.check`)
    on the state the batches before it left, and its good operations are written at once, so what one batch holds
    in memory is all any batch needs. Revisions continue from batch to batch, one per change."""

    def __init__(
        self,
        model: Model,
        view: StateView,
        apply: Callable[[list[Write]], object],
        revision: int,
        principal: str,
        fetch: tuple[FetchNodes, FetchTypes, FetchEdges, FetchKeys, FetchEnds],
    ) -> None:
        self._model, self._view, self._apply, self._principal = model, view, apply, principal
        self._fetch_nodes, self._fetch_types, self._fetch_edges, self._fetch_keys, self._fetch_ends = fetch
        self.revision = revision  # the store's revision after the batches written so far
        self.changed = 0  # changes made so far
        self.nodes_written = 0

    def write(self, operations: Sequence[Operation]) -> list[IndexedProblem]:
        """Check a batch and write its good operations; return its problems (indexed within the batch)."""
        checked = check(self._model, operations, self._prefetched(operations), base_revision=self.revision,
                        principal=self._principal, now=utc_now())  # fmt: skip
        if checked.writes:
            self._apply(checked.writes)
            self.revision = checked.writes[-1].revision
            self.changed += len(checked.writes)
            self.nodes_written += sum(w.kind == "node" for w in checked.writes)
        return checked.problems

    def _prefetched(self, operations: Sequence[Operation]) -> StateView:
        """The view `check` reads, with what the batch names fetched by a query each: the nodes it puts, the types
        of the nodes its edges end at (all an edge's check reads of them), its edges and node keys, and the edges
        the checks of its edges' shapes start from (the other edges of the same type at the source of a
        one-per-source type and the target of a one-per-target one; those leaving the target of an acyclic one,
        where the search for a cycle starts)."""
        ids: set[str] = set()
        ends: set[str] = set()
        refs: set[EdgeRef] = set()
        keys: set[tuple[str, str]] = set()
        out: set[tuple[str, str]] = set()
        into: set[tuple[str, str]] = set()
        for op in operations:
            if isinstance(op, PutNode):
                ids.add(op.node.id)
                node_type = self._model.node_types.get(op.node.type)
                key = op.node.properties.get(node_type.key) if node_type is not None else None
                if isinstance(key, str):
                    keys.add((op.node.type, key))
            elif isinstance(op, PutEdge):
                e = op.edge
                ends.update((e.source, e.target))
                refs.add((e.type, e.source, e.target))
                edge_type = self._model.edge_types.get(e.type)
                if edge_type is not None and edge_type.one_per_source:
                    out.add((e.source, e.type))
                if edge_type is not None and edge_type.acyclic:
                    out.add((e.target, e.type))
                if edge_type is not None and edge_type.one_per_target:
                    into.add((e.target, e.type))
        ends -= ids
        nodes, types, edges = (
            self._fetch_nodes(sorted(ids)),
            self._fetch_types(sorted(ends)),
            self._fetch_edges(sorted(refs)),
        )
        owners = self._fetch_keys(sorted(keys))
        targets, sources = self._fetch_ends(sorted(out), True), self._fetch_ends(sorted(into), False)
        return _Prefetched(self._view, {i: nodes.get(i) for i in ids}, {i: types.get(i) for i in ends},
                           {r: edges.get(r) for r in refs}, {k: owners.get(k) for k in keys},
                           {p: targets.get(p, []) for p in out}, {p: sources.get(p, []) for p in into})  # fmt: skip


class _Prefetched:
    """A `StateView` that answers the lookups fetched beforehand (None: known absent) from them, and every other
    read from the view under it, remembering the edges it read (the state under it does not change while a batch
    is checked: its writes come after)."""

    def __init__(
        self,
        view: StateView,
        nodes: dict[str, Node | None],
        types: dict[str, str | None],
        edges: dict[EdgeRef, Edge | None],
        owners: dict[tuple[str, str], str | None],
        targets: dict[tuple[str, str], list[str]],
        sources: dict[tuple[str, str], list[str]],
    ) -> None:
        self._view, self._nodes, self._types, self._edges, self._owners = view, nodes, types, edges, owners
        self._targets, self._sources = targets, sources

    def node(self, id: str) -> Node | None:
        return self._nodes[id] if id in self._nodes else self._view.node(id)

    def node_type(self, id: str) -> str | None:
        if id in self._nodes:
            node = self._nodes[id]
            return node.type if node is not None else None
        return self._types[id] if id in self._types else self._view.node_type(id)

    def node_id_by_key(self, type: str, key: str) -> str | None:
        pair = (type, key)
        return self._owners[pair] if pair in self._owners else self._view.node_id_by_key(type, key)

    def edge(self, type: str, source: str, target: str) -> Edge | None:
        ref = (type, source, target)
        return self._edges[ref] if ref in self._edges else self._view.edge(type, source, target)

    def out_targets(self, source: str, type: str) -> list[str]:
        pair = (source, type)
        if pair not in self._targets:
            self._targets[pair] = self._view.out_targets(source, type)
        return self._targets[pair]

    def in_sources(self, target: str, type: str) -> list[str]:
        pair = (target, type)
        if pair not in self._sources:
            self._sources[pair] = self._view.in_sources(target, type)
        return self._sources[pair]

    def incident_edges(self, id: str) -> list[Edge]:
        return self._view.incident_edges(id)
