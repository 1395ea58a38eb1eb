"""Write validation, identical on every path: one function turns a batch of operations into the writes to commit.

`plan` runs inside the store's write transaction against a `StateView` of the committed state, so what it
checks cannot change before the writes land. It checks, for every operation, in order:

* the type exists and the properties validate against the type's schema (problems carry JSON pointers);
* ids, visibility and readers are well formed; the node type's key property is unique within the type;
* edges reference existing nodes of allowed types, respect cardinality, and do not close a cycle of an
  acyclic edge type;
* a node is deleted only without edges, or with `cascade`, which deletes its edges first (each edge deletion
  is its own change, before the node's);
* a patch (`PatchNode`) names an existing node (else `NotFoundError`) and keeps every property its type
  requires; the patched node is then checked as a whole, exactly as a put;
* a put that gives no visibility keeps an existing node's, and gives a new node its type's default;
* an `expected_revision` matches the record's current revision (0 = the record must not exist).

Later operations see the effect of earlier ones in the same batch. All problems are collected before anything
is refused, so a caller fixes a bad batch in one pass. A patch of a missing node raises `NotFoundError`, and a
stale expected revision `ConflictError`.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol, cast

from core.lang.model import Model
from core.values.dialect import ecma_regex
from core.values.documents import pointer
from core.values.errors import ConflictError, NotFoundError, Problem, ValidationError
from core.values.merge_patch import merge_patch, removed_members
from core.values.operations import DeleteEdge, DeleteNode, Operation, PatchNode, PutEdge, PutNode
from core.values.records import ID_RE, READER_PATTERN, VISIBILITIES, Edge, Node, Visibility, edge_key

__all__ = ["Checked", "IndexedProblem", "StateView", "Write", "check", "plan"]

READER_RE = ecma_regex(READER_PATTERN)
EdgeId = tuple[str, str, str]  # (type, source, target)


class StateView(Protocol):
    """The committed state validation reads: what a store backend provides inside its write transaction."""

    def node(self, id: str) -> Node | None: ...
    def node_type(self, id: str) -> str | None: ...  # the node's type (None: no such node), all an edge end needs
    def node_id_by_key(self, type: str, key: str) -> str | None: ...
    def edge(self, type: str, source: str, target: str) -> Edge | None: ...
    def out_targets(self, source: str, type: str) -> list[str]: ...
    def in_sources(self, target: str, type: str) -> list[str]: ...
    def incident_edges(self, id: str) -> list[Edge]: ...


@dataclass(frozen=True, slots=True)
class Write:
    """One change to commit: `after` None deletes. Revisions are already assigned."""

    index: int  # the operation it came from
    kind: Literal["node", "edge"]
    key: str
    type: str
    before: Node | Edge | None
    after: Node | Edge | None
    revision: int = 0


@dataclass(frozen=True, slots=True)
class IndexedProblem:
    index: int
    problem: Problem


def plan(
    model: Model,
    operations: Sequence[Operation],
    view: StateView,
    *,
    base_revision: int,
    principal: str,
    now: str,
    progress: Callable[[str, int, int], None] | None = None,
) -> list[Write]:
    """Validate a batch against the model and the committed state; return the writes with revisions assigned.

    Raises `ValidationError` (with every problem, each pointer prefixed by `/<operation index>`),
    `NotFoundError` (the first patch of a missing node) or `ConflictError` (the first stale expected revision).
    """
    checked = check(model, operations, view, base_revision=base_revision, principal=principal, now=now,
                    progress=progress)  # fmt: skip
    if checked.problems:
        problems = [Problem(f"/{p.index}{p.problem.pointer}", p.problem.message) for p in checked.problems]
        raise ValidationError(f"The batch has {len(problems)} problem(s); nothing was written.", problems)
    return checked.writes


@dataclass(frozen=True, slots=True)
class Checked:
    """What `check` found: the writes of the operations without problems (numbered), and every problem."""

    writes: list[Write]
    problems: list[IndexedProblem]


def check(
    model: Model,
    operations: Sequence[Operation],
    view: StateView,
    *,
    base_revision: int,
    principal: str,
    now: str,
    progress: Callable[[str, int, int], None] | None = None,
) -> Checked:
    """`plan`'s checks, where a problem refuses only its own operation: the writes of the others come back with
    every problem (a bulk import checks batch after batch this way, writing each batch's good operations so the
    next batch sees them, and refuses the whole import at the end). Without problems, raises as `plan` does."""
    planner = _Planner(model, view, principal, now)
    for index, op in enumerate(operations):
        planner.apply(index, op)
        if progress is not None and (index % 1000 == 999 or index == len(operations) - 1):
            progress("checking", index + 1, len(operations))
    if not planner.problems and planner.missing:
        raise planner.missing[0]
    if not planner.problems and planner.conflicts:
        raise planner.conflicts[0]
    return Checked(_number(planner.writes, base_revision), planner.problems)


def indexed_problems(error: ValidationError) -> Iterator[IndexedProblem]:
    """Split the problems of a batch error back into (operation index, problem relative to the operation)."""
    for p in error.problems:
        head, _, rest = p.pointer.lstrip("/").partition("/")
        yield IndexedProblem(int(head), Problem("/" + rest if rest else "", p.message))


def _number(writes: list[Write], base: int) -> list[Write]:
    numbered: list[Write] = []
    for offset, w in enumerate(writes, start=1):
        revision, a = base + offset, w.after
        after = a.restamped(revision, a.created_at, a.updated_at, a.updated_by) if a is not None else None
        numbered.append(Write(w.index, w.kind, w.key, w.type, w.before, after, revision))
    return numbered


class _Planner:
    """Applies operations to an overlay of the committed state, collecting problems and writes."""

    def __init__(self, model: Model, view: StateView, principal: str, now: str) -> None:
        self.model, self.view, self.principal, self.now = model, view, principal, now
        self.nodes: dict[str, Node | None] = {}
        self.keys: dict[tuple[str, str], str | None] = {}
        self.edges: dict[EdgeId, Edge | None] = {}
        self.out_added: dict[tuple[str, str], set[str]] = {}
        self.in_added: dict[tuple[str, str], set[str]] = {}
        self.problems: list[IndexedProblem] = []
        self.conflicts: list[ConflictError] = []
        self.missing: list[NotFoundError] = []
        self.writes: list[Write] = []

    # -- the overlay -------------------------------------------------------------------------------------------
    def node(self, id: str) -> Node | None:
        return self.nodes[id] if id in self.nodes else self.view.node(id)

    def node_type(self, id: str) -> str | None:
        if id in self.nodes:
            node = self.nodes[id]
            return node.type if node is not None else None
        return self.view.node_type(id)

    def edge(self, e: EdgeId) -> Edge | None:
        return self.edges[e] if e in self.edges else self.view.edge(*e)

    def out_targets(self, source: str, type_: str) -> set[str]:
        found = {t for t in self.view.out_targets(source, type_) if self.edges.get((type_, source, t), True)}
        return found | self.out_added.get((source, type_), set())

    def in_sources(self, target: str, type_: str) -> set[str]:
        found = {s for s in self.view.in_sources(target, type_) if self.edges.get((type_, s, target), True)}
        return found | self.in_added.get((target, type_), set())

    def incident(self, id: str) -> list[EdgeId]:
        found = {(e.type, e.source, e.target) for e in self.view.incident_edges(id)}
        found |= {e for e in self.edges if id in (e[1], e[2])}
        return sorted(e for e in found if self.edge(e) is not None)

    def set_edge(self, e: EdgeId, value: Edge | None) -> None:
        self.edges[e] = value
        type_, source, target = e
        out, into = self.out_added.setdefault((source, type_), set()), self.in_added.setdefault((target, type_), set())
        if value is None:
            out.discard(target)
            into.discard(source)
        else:
            out.add(target)
            into.add(source)

    # -- operations --------------------------------------------------------------------------------------------
    def apply(self, index: int, op: Operation) -> None:
        if isinstance(op, PutNode):
            self.put_node(index, op)
        elif isinstance(op, PatchNode):
            self.patch_node(index, op)
        elif isinstance(op, DeleteNode):
            self.delete_node(index, op)
        elif isinstance(op, PutEdge):
            self.put_edge(index, op)
        else:
            self.delete_edge(index, op)

    def problem(self, index: int, at: Iterable[object], message: str) -> None:
        self.problems.append(IndexedProblem(index, Problem(pointer(at), message)))

    def check_revision(self, key: str, expected: int | None, current: Node | Edge | None) -> None:
        actual = current.revision if current is not None else 0
        if expected is not None and expected != actual:
            self.conflicts.append(ConflictError(key, expected=expected, actual=actual))

    def put_node(self, index: int, op: PutNode, *, problems_from: int | None = None) -> None:
        """Check a put and plan its write; problems found since `problems_from` (default: now) refuse it."""
        node = op.node
        count = len(self.problems) if problems_from is None else problems_from
        current = self.node(node.id)
        node_type = self.model.node_types.get(node.type)
        if op.keep_access and current is not None:
            node = replace(node, visibility=current.visibility, readers=current.readers)
        elif op.keep_access and node_type is not None:
            node = replace(node, visibility=node_type.visibility, readers=node_type.readers)
        if not ID_RE.starts(node.id):
            self.problem(index, ["id"], f"{node.id!r} is not a valid id (letters, digits, . _ : -; at most 128)")
        self._check_access(index, node)
        if node_type is None:
            self.problem(
                index,
                ["type"],
                f"{node.type!r} is not a node type of the model{_hint(node.type, self.model.node_types)}",
            )
            return
        for error in self.model.property_errors(node.type, dict(node.properties)):
            self.problem(index, ["properties", *error.absolute_path], error.message)
        if current is not None and current.type != node.type:
            self.problem(index, ["type"], f"node {node.id!r} is a {current.type}; a node's type cannot change")
        key_value = node.properties.get(node_type.key)
        if isinstance(key_value, str) and "\x00" in key_value:  # a key is looked up as text, which holds no NUL
            self.problem(index, ["properties", node_type.key], f"a key ({node_type.key}) cannot hold the NUL character")
        elif isinstance(key_value, str):
            owner = self._key_owner(node.type, key_value)
            if owner is not None and owner != node.id:
                self.problem(
                    index,
                    ["properties", node_type.key],
                    f"{node.type} {owner!r} already has {node_type.key} {key_value!r}",
                )
        self.check_revision(node.id, op.expected_revision, current)
        if len(self.problems) > count or (current is not None and _same_node(current, node)):
            return
        if current is not None and isinstance(current.properties.get(node_type.key), str):
            self.keys[(node.type, current.properties[node_type.key])] = None
        if isinstance(key_value, str):
            self.keys[(node.type, key_value)] = node.id
        stored = node.restamped(
            node.revision,
            current.created_at if current is not None else (node.created_at or self.now),
            node.updated_at or self.now,
            node.updated_by or self.principal,
        )
        self.nodes[node.id] = stored
        self.writes.append(Write(index, "node", node.id, node.type, current, stored))

    def patch_node(self, index: int, op: PatchNode) -> None:
        """Apply the merge patch to the node as it is now (in this batch), then check the result as a put."""
        current = self.node(op.id)
        if current is None:
            self.missing.append(NotFoundError("node", op.id))
            return
        count = len(self.problems)
        properties: dict[str, Any] = merge_patch(current.properties, op.properties)
        node_type = self.model.node_types.get(current.type)
        required = node_type.schema.get("required", ()) if node_type is not None else ()
        for name in removed_members(current.properties, op.properties):
            if name in required:  # named here, where the patch removes it; checked below as still there
                self.problem(index, ["properties", name], f"{current.type} requires {name!r}; a patch cannot remove it")
                properties[name] = current.properties[name]
        patched = replace(
            current,
            properties=properties,
            visibility=cast("Visibility", op.visibility) if op.visibility is not None else current.visibility,
            readers=op.readers if op.readers is not None else current.readers,
            updated_at=None,
            updated_by=None,
        )
        self.put_node(index, PutNode(patched, op.expected_revision), problems_from=count)

    def _check_access(self, index: int, node: Node) -> None:
        if node.visibility not in VISIBILITIES:
            self.problem(index, ["visibility"], f"{node.visibility!r} is not one of {', '.join(VISIBILITIES)}")
        if node.readers and node.visibility != "restricted":
            self.problem(index, ["readers"], "readers are only allowed on restricted nodes")
        for i, reader in enumerate(node.readers):
            if not READER_RE.starts(reader):
                self.problem(index, ["readers", i], f"{reader!r} is not a reader (user:NAME or group:NAME)")

    def _key_owner(self, type_: str, value: str) -> str | None:
        if (type_, value) in self.keys:
            return self.keys[(type_, value)]
        return self.view.node_id_by_key(type_, value)

    def delete_node(self, index: int, op: DeleteNode) -> None:
        current = self.node(op.id)
        if current is None:
            self.problem(index, ["id"], f"No node with id {op.id!r}.")
            return
        self.check_revision(op.id, op.expected_revision, current)
        incident = self.incident(op.id)
        if incident and not op.cascade:
            shown = ", ".join(edge_key(*e) for e in incident[:3]) + (" …" if len(incident) > 3 else "")
            self.problem(
                index,
                ["id"],
                f"node {op.id!r} has {len(incident)} edge(s) ({shown}); delete them first or pass cascade=true",
            )
            return
        for e in incident:
            self.writes.append(Write(index, "edge", edge_key(*e), e[0], self.edge(e), None))
            self.set_edge(e, None)
        node_type = self.model.node_types.get(current.type)
        if node_type is not None and isinstance(current.properties.get(node_type.key), str):
            self.keys[(current.type, current.properties[node_type.key])] = None
        self.nodes[op.id] = None
        self.writes.append(Write(index, "node", op.id, current.type, current, None))

    def put_edge(self, index: int, op: PutEdge) -> None:
        edge = op.edge
        count = len(self.problems)
        edge_type = self.model.edge_types.get(edge.type)
        if edge_type is None:
            self.problem(
                index,
                ["type"],
                f"{edge.type!r} is not an edge type of the model{_hint(edge.type, self.model.edge_types)}",
            )
            return
        for end, allowed in (("source", edge_type.sources), ("target", edge_type.targets)):
            node_id: str = getattr(edge, end)
            node_type = self.node_type(node_id)
            if node_type is None:
                self.problem(index, [end], f"No node with id {node_id!r}.")
            elif node_type not in allowed:
                self.problem(
                    index,
                    [end],
                    f"a {edge.type} edge cannot {'start' if end == 'source' else 'end'} at a {node_type} "
                    f"(allowed: {', '.join(sorted(allowed))})",
                )
        for error in self.model.property_errors(edge.type, dict(edge.properties)):
            self.problem(index, ["properties", *error.absolute_path], error.message)
        if len(self.problems) == count:
            self._check_shape(index, edge, edge_type.one_per_source, edge_type.one_per_target, edge_type.acyclic)
        e = (edge.type, edge.source, edge.target)
        current = self.edge(e)
        self.check_revision(edge_key(*e), op.expected_revision, current)
        if len(self.problems) > count or (current is not None and dict(current.properties) == dict(edge.properties)):
            return
        stored = edge.restamped(
            edge.revision,
            current.created_at if current is not None else (edge.created_at or self.now),
            edge.updated_at or self.now,
            edge.updated_by or self.principal,
        )
        self.set_edge(e, stored)
        self.writes.append(Write(index, "edge", edge_key(*e), edge.type, current, stored))

    def _check_shape(self, index: int, edge: Edge, one_out: bool, one_in: bool, acyclic: bool) -> None:
        if one_out:
            others = self.out_targets(edge.source, edge.type) - {edge.target}
            if others:
                self.problem(
                    index,
                    ["target"],
                    f"{edge.source!r} already has a {edge.type} edge (to {min(others)!r}); at most one is allowed",
                )
        if one_in:
            others = self.in_sources(edge.target, edge.type) - {edge.source}
            if others:
                self.problem(
                    index,
                    ["source"],
                    f"{edge.target!r} already has an incoming {edge.type} edge (from {min(others)!r}); "
                    "at most one is allowed",
                )
        if acyclic and self._reaches(edge.target, edge.source, edge.type):
            self.problem(
                index, ["target"], f"a {edge.type} edge from {edge.source!r} to {edge.target!r} would close a cycle"
            )

    def _reaches(self, start: str, goal: str, type_: str) -> bool:
        seen, frontier = {start}, [start]
        while frontier:
            current = frontier.pop()
            if current == goal:
                return True
            for nxt in self.out_targets(current, type_):
                if nxt not in seen:
                    seen.add(nxt)
                    frontier.append(nxt)
        return False

    def delete_edge(self, index: int, op: DeleteEdge) -> None:
        e = (op.type, op.source, op.target)
        current = self.edge(e)
        if current is None:
            self.problem(index, [], f"No edge {edge_key(*e)!r}.")
            return
        self.check_revision(edge_key(*e), op.expected_revision, current)
        self.set_edge(e, None)
        self.writes.append(Write(index, "edge", edge_key(*e), op.type, current, None))


def _same_node(a: Node, b: Node) -> bool:
    return (a.type, a.visibility, tuple(a.readers), dict(a.properties)) == (
        b.type,
        b.visibility,
        tuple(b.readers),
        dict(b.properties),
    )


def _hint(name: str, known: Mapping[str, Any]) -> str:
    close = difflib.get_close_matches(name, list(known), n=3)
    return f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
