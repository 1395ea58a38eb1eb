"""The graph at one revision: what `Store.view(revision)` gives, and what `Store.diff_revisions` answers.

A `View` is the one door a handler reads the graph through (`CallContext.view`): the current view answers from the
graph index and the store (`core.index.current.CurrentView`), a past one from the store's change log
(`core.store.past.StoredView`). What only the current revision answers (a ranked search, facet counts, counts of
the whole graph) is part of the interface too: a past view refuses it with `current_only`'s error, which names what
was asked. A find by conditions and text and a walk answer at a past revision as well: the find by the same
conditions (`NodeQuery.matches`, the meaning the stores' SQL agrees with, over the states the change log holds), the
walk over the topology then, read from the store as the walk reaches it (`core.store.past_graph`).

A `View` is pinned to one revision: its reads answer the nodes and edges as they were when the store was at
`revision`, under the model in force then (`View.model`), whatever is committed after it was made. The current
view is pinned to the revision the store was at when it was made. Every read takes the caller's `Sight` (None:
sees everything) and keeps the one rule for the past (`core.dispatch.access.sees_then`): a past state is shown only to a
caller who may read the record both at that revision and now (a record deleted since: who could read it then).

A store answers a past revision from its change log: a record's state at revision R is the `before` of the first
change to it after R, or its current state if none; model changes after R that renamed types or properties
(`core.lang.model_migration`) moved the stored records without a change each, so a state logged after such a change is
carried back through its renames (`unrename`). A revision older than the change log keeps is `gone`
(`core.values.errors.GoneError`, the change feed's error), and one beyond the store's is a `FutureRevisionError`.

`Store.diff_revisions(from, to)` compares two revisions: the nodes and edges added, removed and changed between
them, each changed property with its value before and after, in the names of the model at `to`, paged by
`DiffPage.next` (a position; the tools encode it as their cursor).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from core.lang.model import Model
from core.lang.model_migration import Rename
from core.values.audit import AuditQuery
from core.values.errors import Problem, ValidationError
from core.values.records import Change, Edge, Node, Sight

if TYPE_CHECKING:
    from core.store import NodeQuery
    from core.store.common import ModelVersion

__all__ = [
    "DiffEntry",
    "DiffPage",
    "DiffPosition",
    "Direction",
    "RenameLog",
    "Step",
    "View",
    "Walk",
    "carry",
    "current_only",
    "edge_of_state",
    "node_of_state",
    "renames_of",
    "sees_edge_then",
    "sees_then",
    "unrename",
]

Direction = Literal["out", "in", "both"]
DiffPosition = tuple[str, ...]  # where a diff page ends: ("node", id) or ("edge", source, target, type)
R = TypeVar("R", Node, Edge)
RenameLog = Sequence[tuple[int, tuple[Rename, ...]]]  # (revision of a model change, what it renamed), in order


@dataclass(frozen=True)
class Step:
    """One hop from a node at a view's revision: the edge, and the node at its other end."""

    edge: Edge
    node: Node


@dataclass(frozen=True)
class DiffEntry:
    """How one node or edge differs between two revisions (`Store.diff_revisions`).

    `before` is its state at the first revision and `after` at the second (None: absent, or hidden from the
    caller, and then `redacted` is true); `change` says which of added, removed, changed it is. `fields` lists
    the system fields that differ (`type`, `visibility`, `readers`), and `properties` each property that differs
    as `{"before": ..., "after": ...}` (a side absent when the property was)."""

    kind: Literal["node", "edge"]
    key: str  # the node's id or the edge's key (type:source->target), in the names of the later revision
    change: Literal["added", "removed", "changed"]
    before: Node | Edge | None
    after: Node | Edge | None
    fields: tuple[str, ...] = ()
    properties: Mapping[str, Mapping[str, Any]] = field(default_factory=dict[str, Mapping[str, Any]])
    redacted: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "key": self.key,
            "change": self.change,
            "before": self.before.to_json() if self.before is not None else None,
            "after": self.after.to_json() if self.after is not None else None,
            "fields": list(self.fields),
            "properties": {name: dict(sides) for name, sides in self.properties.items()},
        }
        if self.redacted:
            out["redacted"] = True
        return out


@dataclass(frozen=True)
class DiffPage:
    """One page of the differences between revisions `since` and `until` (`Store.diff_revisions`): nodes in id
    order, then edges by (source, target, type); `next` is where the next page starts (None: this is the last).
    `model` is the model versions at both revisions when they differ (a model change is in the range)."""

    since: int
    until: int
    entries: tuple[DiffEntry, ...]
    next: DiffPosition | None
    model: tuple[str, str] | None = None


def current_only(what: str) -> ValidationError:
    """The error a past view answers for what only the current revision can (`what`: e.g. "a ranked search")."""
    problem = Problem("/at", f"{what} is not supported with at (a read at a past revision)")
    return ValidationError(f"{what.capitalize()} reads the graph at the current revision only, not at a past one.",
                           [problem])  # fmt: skip


class Walk(Protocol):
    """The graph index at one revision, held for a walk (`View.walk`): `graph` (a networkx `MultiDiGraph` whose
    node attributes are the type, visibility and readers) never changes while the walk holds it."""

    @property
    def graph(self) -> Any: ...
    @property
    def revision(self) -> int: ...


class View(Protocol):
    """The graph at one revision (see the module docstring). Every read takes the caller's sight (None: all)."""

    @property
    def revision(self) -> int: ...
    @property
    def model(self) -> Model:
        """The model in force at `revision` (from the store's model history)."""
        ...

    def node(self, id: str, *, sight: Sight | None = None) -> Node | None:
        """The node as it was (None: it did not exist then); `ForbiddenError` if the caller may not see it."""
        ...

    def nodes(self, ids: Sequence[str], *, sight: Sight | None = None) -> dict[str, Node]:
        """Those of `ids` that existed then and the caller may see, by id."""
        ...

    def find_nodes(
        self, type: str | None = None, *, sight: Sight | None = None, after: str | None = None, limit: int = 50
    ) -> tuple[list[Node], int]:
        """One page of the nodes (of `type`, named as the view's model names it) in id order after `after`, and
        how many there were in all, among those the caller may see."""
        ...

    def edges_of(
        self, id: str, direction: Direction = "both", types: Sequence[str] = (), *, sight: Sight | None = None
    ) -> list[Edge]:
        """The edges at the node then (of `types`, if given), both ends visible to the caller, by (type, source,
        target)."""
        ...

    def neighbours(
        self, id: str, direction: Direction = "both", types: Sequence[str] = (), *, sight: Sight | None = None
    ) -> list[Step]:
        """Depth 1 from the node then: each edge and the node at its other end, by (neighbour id, edge type)."""
        ...

    def changes(self, limit: int, *, sight: Sight | None = None) -> list[Change]:
        """The changes committed after `revision`, oldest first (`Store.changes` from it)."""
        ...

    def named_then(self, kind: str, type: str, properties: Sequence[str] = ()) -> tuple[str, list[str]]:
        """What the model at `revision` called the type `type` of `kind` ("node type" or "edge type") and its
        `properties`, which the model now calls so (a tool's arguments are validated in today's names): the same
        names, unless a model change since renamed them."""
        ...

    # -- the rest of the door: what handlers read besides (a past view answers `current_only` where it says so) ---
    def find(self, query: NodeQuery, *, after: str | None, limit: int) -> tuple[list[Node], int]:
        """`find_nodes` by a whole `NodeQuery` (conditions, text, an id prefix), in the names of the view's model."""
        ...

    def facets(self, query: NodeQuery, names: Sequence[str], *, limit: int) -> dict[str, tuple[dict[str, int], bool]]:
        """How many of `query`'s nodes hold each value of each property of `names` (`Store.facet_counts`); current
        only."""
        ...

    def edge(self, type: str, source: str, target: str) -> Edge | None:
        """The edge as it was (no sight applied: the caller checked its ends)."""
        ...

    def edges(self, refs: Sequence[tuple[str, str, str]]) -> dict[tuple[str, str, str], Edge]:
        """The edges `refs` (type, source, target) name that existed then, by ref."""
        ...

    def walk(self) -> AbstractContextManager[Walk]:
        """The topology at this revision, held for a walk (neighbours at a depth, paths, patterns): the graph
        index's at the current revision, one read from the store as the walk reaches it at a past one
        (`core.store.past_graph`)."""
        ...

    def counts(self, sight: Sight | None) -> tuple[int, Counter[str], Counter[str]]:
        """(revision, nodes per node type, edges per edge type) that `sight` sees, at one revision; current only."""
        ...

    def search(self, model: Model, sight: Sight | None, terms: Sequence[Any], types: Sequence[str] | None,
               revision: int, *, compute: bool = True) -> Any:  # fmt: skip
        """The ranked search of `terms` (`core.index.search.ranked`: its `SearchResult`, or None once a ranking of
        an earlier `revision` is no longer kept); current only."""
        ...

    def latest(self) -> int:
        """The store's revision now (a current view: at least `revision`, when another process has committed)."""
        ...

    def floor(self) -> int:
        """The revision through which the change log was compacted (`Store.changes_floor`)."""
        ...

    def feed(self, since: int, limit: int, *, sight: Sight | None = None, until: int | None = None) -> list[Change]:
        """The change log after `since` up to `until` (`Store.changes`), as `sight` may see it."""
        ...

    def count_changes(self, since: int, *, sight: Sight | None = None, until: int | None = None) -> int:
        """How many of those there are (`Store.count_changes`)."""
        ...

    def diff(self, since: int, until: int | None = None, *, types: Sequence[str] | None = None,
             ids: Sequence[str] | None = None, sight: Sight | None = None, limit: int = 100,
             after: DiffPosition | None = None) -> DiffPage:  # fmt: skip
        """`Store.diff_revisions`: what differs between two revisions."""
        ...

    def at(self, revision: int) -> View:
        """The view at another revision (`Store.view`)."""
        ...

    def model_at(self, revision: int) -> Model:
        """The model in force at `revision` (`Store.model_at`)."""
        ...

    def model_history(self) -> list[ModelVersion]:
        """Every model the store has had (`Store.model_history`)."""
        ...

    def audit(self, query: AuditQuery, *, before: int | None, limit: int) -> tuple[list[dict[str, Any]], int]:
        """One page of the audit log, newest first (`Store.audit_records`)."""
        ...


# -- who may see the past (`core.dispatch.access` holds it as its own; it is here so the store can apply it)
# ---------------
def sees_then(sight: Sight | None, then: Node, now: Node | None) -> bool:
    """Whether a caller may see a node's state `then` (at a past revision), the node being `now` at present
    (None: deleted since): the one rule for the past. At the current revision (`then` is `now`) it is
    `core.dispatch.access.sees`."""
    if sight is None:
        return True
    return sight.sees(then.visibility, then.readers) and (now is None or sight.sees(now.visibility, now.readers))


def sees_edge_then(sight: Sight | None, ends: Sequence[tuple[Node | None, Node | None]]) -> bool:
    """Whether a caller may see an edge as it was: each end, as (then, now), passes `sees_then` (an end absent
    then, which a consistent store never has, passes for no one but an admin)."""
    return sight is None or all(then is not None and sees_then(sight, then, now) for then, now in ends)


# -- states in the change log ------------------------------------------------------------------------------------
def node_of_state(state: Mapping[str, Any]) -> Node:
    """A node from its logged state (`Node.to_json`)."""
    return Node(
        str(state["id"]), str(state["type"]), dict(state.get("properties") or {}), state.get("visibility", "internal"),
        tuple(state.get("readers") or ()), int(state.get("revision", 0)), state.get("created_at"),
        state.get("updated_at"), state.get("updated_by"),
    )  # fmt: skip


def edge_of_state(state: Mapping[str, Any]) -> Edge:
    """An edge from its logged state (`Edge.to_json`)."""
    return Edge(
        str(state["type"]), str(state["source"]), str(state["target"]), dict(state.get("properties") or {}),
        int(state.get("revision", 0)), state.get("created_at"), state.get("updated_at"), state.get("updated_by"),
    )  # fmt: skip


def renames_of(model_change: Mapping[str, Any] | None) -> tuple[Rename, ...]:
    """What a model change's logged `after` says it renamed (`core.store.common.model_info`'s `renamed`)."""
    found: list[Rename] = []
    for entry in (model_change or {}).get("renamed") or ():
        kind = entry["kind"]
        table = "edges" if kind == "edge type" else "nodes"  # a property's table is found by its owner's name
        found.append(Rename(kind, str(entry["from"]), str(entry["to"]), table, entry.get("type")))
    return tuple(found)


def _moved(record: Node | Edge, renames: Sequence[Rename], backward: bool) -> Node | Edge:
    """`record` carried across one model change's renames: forward as `migrate` moved it, or back (undoing the
    properties, named by their type's new name, before the types)."""
    kind = "node type" if isinstance(record, Node) else "edge type"
    type_, props = record.type, record.properties
    for r in reversed(renames) if backward else renames:
        old, new = (r.new, r.old) if backward else (r.old, r.new)
        if r.owner is None and r.kind == kind and type_ == old:
            type_ = new
        elif r.owner is not None and r.owner == type_ and old in props:
            props = {(new if k == old else k): v for k, v in props.items()}
    if type_ == record.type and props is record.properties:
        return record
    if isinstance(record, Node):
        return Node(record.id, type_, props, record.visibility, record.readers, record.revision, record.created_at,
                    record.updated_at, record.updated_by)  # fmt: skip
    return Edge(type_, record.source, record.target, props, record.revision, record.created_at, record.updated_at,
                record.updated_by)  # fmt: skip


def unrename(record: R, log: RenameLog, since: int, until: int | None) -> R:
    """`record`, stored in the names of the model after the model changes of `log` up to `until` (None: all),
    in the names it had at revision `since` (undoing the renames of the model changes after `since`)."""
    for revision, renames in reversed(log):
        if revision > since and (until is None or revision < until):
            record = _moved(record, renames, backward=True)  # type: ignore[assignment]
    return record


def carry(record: R, log: RenameLog, since: int, until: int) -> R:
    """`record`, in the names it had at revision `since`, in the names of revision `until` (later)."""
    for revision, renames in log:
        if since < revision <= until:
            record = _moved(record, renames, backward=False)  # type: ignore[assignment]
    return record
