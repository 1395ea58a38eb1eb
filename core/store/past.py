"""The graph at a past revision, over the SQL both backends speak: `StoredView` (`Store.view`) and
`diff_revisions` (`Store.diff_revisions`); see `core.store.view` for what they promise.

A record's state at revision R is the `before` of its first change after R, or its current row if it has none,
carried back through the renames of the model changes after R (`core.store.view.unrename`). The change log is indexed
by node id (`key`) and by edge end (`source`, `target`), each with the revision, so one record's first change
after R is one index probe, whatever R is. Who sees what is `core.store.view.sees_then`, applied here to every state
read; the SQL sight clause (`Dialect.sight`) only pre-filters records that did not change after R, whose state
then is their state now, where the rule is the current one.
"""

from __future__ import annotations

import json
import threading
from bisect import bisect_right
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from core.lang.model import Model
from core.store import NodeQuery
from core.store.past_graph import PastGraph, PastWalk
from core.store.retention import check_since
from core.store.sql import EDGE_COLUMNS, SQLStore, node_filter
from core.store.view import (
    DiffEntry,
    DiffPage,
    DiffPosition,
    Direction,
    RenameLog,
    Step,
    Walk,
    carry,
    current_only,
    edge_of_state,
    node_of_state,
    renames_of,
    sees_edge_then,
    sees_then,
    unrename,
)
from core.values.audit import AuditQuery
from core.values.errors import ForbiddenError, FutureRevisionError, NotFoundError, Problem, ValidationError
from core.values.records import Change, Edge, Node, Sight

if TYPE_CHECKING:
    from core.store.common import ModelVersion

__all__ = ["StoredView", "diff_entry", "diff_revisions", "forget_views", "open_view"]

EdgeId = tuple[str, str, str]  # (type, source, target), in the names of a view's revision
Then = tuple[Node | None, Node | None]  # a node as it was at a view's revision, and as it is now
BATCH = 300  # ids (or pairs) per query


def _state(value: Any) -> Mapping[str, Any] | None:
    """A logged state as stored: JSON text (SQLite) or already decoded (PostgreSQL's json)."""
    return json.loads(value) if isinstance(value, str) else value


def open_view(store: SQLStore, revision: int | None) -> StoredView:
    """The view of `store` at `revision` (None: the store's revision now): `GoneError` before what the change log
    keeps, `FutureRevisionError` beyond the store's revision."""
    m = store.DIALECT.mark
    head, floor, models = store._read(  # pyright: ignore[reportPrivateUsage]
        "SELECT (SELECT coalesce(max(revision), 0) FROM changes), (SELECT value FROM meta WHERE key = "
        f"'changes_floor'), (SELECT count(*) FROM model_history WHERE revision > {m})",
        (revision if revision is not None else 2**62,),
    )[0]
    if revision is None:
        revision = int(head)
    if revision > head:
        raise FutureRevisionError(revision=revision, current=int(head))
    if revision < 0:
        raise ValidationError(f"A revision is 0 or more, not {revision}.", [Problem("/revision", "below 0")])
    check_since(revision, int(floor) if floor is not None else 0)
    key = (revision, int(head))
    with _RECENT_LOCK:
        recent = _RECENT.setdefault(store, OrderedDict())
        view = recent.get(key)
        if view is not None:
            recent.move_to_end(key)
            return view
    view = StoredView(store, revision, _rename_log(store, revision) if models else ())
    with _RECENT_LOCK:
        recent[key] = view
        while len(recent) > RECENT_VIEWS:
            recent.popitem(last=False)
    return view


def forget_views(store: SQLStore) -> None:
    """Drop the views kept for `store` (the next read at any revision reads the change log again): what a
    benchmark calls to measure a first read at a revision."""
    with _RECENT_LOCK:
        _RECENT.pop(store, None)


RECENT_VIEWS = 8  # views kept per store, by (revision, the store's revision when made)
_RECENT: WeakKeyDictionary[SQLStore, OrderedDict[tuple[int, int], StoredView]] = WeakKeyDictionary()
_RECENT_LOCK = threading.Lock()
"""The views opened lately, so the calls of a task pinned to one revision (repeatable reads: a find, its next
pages, a walk) read the nodes changed since once, not once a call. A view holds no caller's state (each read
takes its sight) and re-reads what it keeps when the store moved on (`StoredView._changed_since`); one made
before a commit is not handed out after it (the store's revision is in the key), and neither is one made before
a model change (which is a commit)."""


def _rename_log(store: SQLStore, since: int) -> RenameLog:
    """The model changes after `since` that renamed something, oldest first (from the model history, which is
    small, and the change log's entry of each)."""
    m = store.DIALECT.mark
    rows = store._read(  # pyright: ignore[reportPrivateUsage]
        f"SELECT c.revision, c.after FROM changes c JOIN model_history h ON h.revision = c.revision "
        f"WHERE h.revision > {m} ORDER BY c.revision",
        (since,),
    )
    log = [(int(revision), renames_of(_state(after))) for revision, after in rows]
    return [(revision, renames) for revision, renames in log if renames]


class StoredView:
    """`core.store.view.View` of an SQL store at one revision. The renames of later model changes are read when it is
    made: a view is for one call or one task, and one held across a model change that renames is made again."""

    def __init__(self, store: SQLStore, revision: int, log: RenameLog) -> None:
        self._store, self._revision, self._log = store, revision, log
        self._mark, self._binary = store.DIALECT.mark, store.DIALECT.binary
        self._model: Model | None = None
        self._changed: tuple[int, frozenset[str], list[Node]] | None = None  # the store's revision, `_changed_since`

    @property
    def revision(self) -> int:
        return self._revision

    @property
    def model(self) -> Model:
        """The model in force at the view's revision (at revision 0, before any, the store's first model), read
        on first use."""
        if self._model is None:
            try:
                self._model = self._store.model_at(self._revision)
            except NotFoundError:
                history = self._store.model_history()
                self._model = self._store.model_at(history[0].revision) if history else self._store.model
        return self._model

    def _read(self, sql: str, params: Sequence[Any]) -> list[Any]:
        return self._store._read(sql, params)  # pyright: ignore[reportPrivateUsage]

    # -- nodes -------------------------------------------------------------------------------------------------
    def states(self, ids: Sequence[str], now: Mapping[str, Node] | None = None) -> dict[str, Then]:
        """(then, now) of each of `ids`: as it was at the view's revision and as it is (None: absent); `now`: the
        current nodes among `ids`, if the caller read them already."""
        ids = list(dict.fromkeys(ids))
        now = self._store.nodes(ids) if now is None else now
        first = self._first_changes(ids)
        out: dict[str, Then] = {}
        for id in ids:
            if id in first:
                revision, state = first[id]
                then = unrename(node_of_state(state), self._log, self._revision, revision) if state else None
            else:
                current = now.get(id)
                then = unrename(current, self._log, self._revision, None) if current is not None else None
            out[id] = (then, now.get(id))
        return out

    def _first_changes(self, ids: Sequence[str]) -> dict[str, tuple[int, Mapping[str, Any] | None]]:
        """The first change after the view's revision to each of `ids` that has one: its revision and `before`."""
        m, b = self._mark, self._binary
        found: dict[str, tuple[int, Mapping[str, Any] | None]] = {}
        for start in range(0, len(ids), BATCH):
            chunk = ids[start : start + BATCH]
            firsts = self._read(
                f"SELECT min(revision) FROM changes WHERE kind = 'node' AND key{b} IN ({', '.join([m] * len(chunk))}) "
                f"AND revision > {m} GROUP BY key{b}",
                [*chunk, self._revision],
            )
            found.update(self._logged([int(row[0]) for row in firsts]))
        return found

    def _logged(self, revisions: Sequence[int]) -> dict[str, tuple[int, Mapping[str, Any] | None]]:
        """The node changes at `revisions` (each found by its primary key): (revision, `before`) by node id."""
        m = self._mark
        found: dict[str, tuple[int, Mapping[str, Any] | None]] = {}
        for start in range(0, len(revisions), BATCH):
            chunk = revisions[start : start + BATCH]
            if chunk:
                sql = f"SELECT key, revision, before FROM changes WHERE revision IN ({', '.join([m] * len(chunk))})"
                found.update((str(key), (int(revision), _state(before))) for key, revision, before in
                             self._read(sql, chunk))  # fmt: skip
        return found

    def node(self, id: str, *, sight: Sight | None = None) -> Node | None:
        then, now = self.states([id])[id]
        if then is None:
            return None
        if not sees_then(sight, then, now):
            raise ForbiddenError(
                "node", id, f"You may not read node {id!r} as it was at revision {self._revision}: it is "
                f"{then.visibility} then, or not visible to you now.",
            )  # fmt: skip
        return then

    def nodes(self, ids: Sequence[str], *, sight: Sight | None = None) -> dict[str, Node]:
        return {id: then for id, (then, now) in self.states(ids).items()
                if then is not None and sees_then(sight, then, now)}  # fmt: skip

    def find_nodes(
        self, type: str | None = None, *, sight: Sight | None = None, after: str | None = None, limit: int = 50
    ) -> tuple[list[Node], int]:
        return self.find(NodeQuery(type, sight=sight), after=after, limit=limit)

    def find(self, query: NodeQuery, *, after: str | None, limit: int) -> tuple[list[Node], int]:
        """See `core.store.view.View.find`: the nodes that did not change since are selected in SQL from the nodes
        table by `node_filter`, the current read's own clause, with the query in the names of
        the model now (their state then is their state now), less the ids changed since (a set known from the one
        read of the change log below, so no row probes the log); those that did, from their first change after the
        revision, by `NodeQuery.matches`, the meaning that SQL agrees with; the two merged in id order. The ids of
        the first set are read whole (one scan, as the current read's count is) and its page's rows by id."""
        if query.order:
            raise current_only("a find in an order")
        now = self._query_now(query)
        node_type = self._store.model.node_types.get(now.type) if now.type is not None else None
        indexed = now.text_fields == self._store._text_fields()  # pyright: ignore[reportPrivateUsage]
        where, params = node_filter(self._store.DIALECT, now, node_type.key if node_type else None, indexed=indexed)
        since = self._changed_since()[0]  # their rows are not their state then
        ids = [str(row[0]) for row in self._read(f"SELECT id FROM nodes WHERE {where} ORDER BY id", params)]
        kept = [id for id in ids if id not in since]
        total = len(kept)
        start = bisect_right(kept, after) if after is not None else 0
        chosen = kept[start : start + limit]
        found = self._store.nodes(chosen) if chosen else {}
        unchanged = [unrename(found[id], self._log, self._revision, None) for id in chosen if id in found]
        changed = [n for n in self._changed_nodes(query.type, query.sight) if query.matches(n)]
        total += len(changed)
        merged = sorted([*unchanged, *(n for n in changed if after is None or n.id > after)], key=lambda n: n.id)
        return merged[:limit], total

    def _changed_nodes(self, type: str | None, sight: Sight | None) -> list[Node]:
        """The nodes changed after the view's revision, as they were then, of `type` and seen by `sight`."""
        then = [n for n in self._changed_states() if (type is None or n.type == type) and sees_then(sight, n, None)]
        if sight is None:
            return then
        now = self._store.nodes([n.id for n in then])
        return [n for n in then if sees_then(sight, n, now.get(n.id))]

    def _changed_states(self) -> list[Node]:
        """Every node changed after the view's revision that existed then, as it was then."""
        return self._changed_since()[1]

    def _changed_since(self) -> tuple[frozenset[str], list[Node]]:
        """The ids of the nodes changed after the view's revision, and the states then of those that existed then
        (the `before` of each one's first change after it): read in one query once while the store stays at the
        same revision (a walk or a paged find asks again and again), again when it moved."""
        head = self._store.revision()
        if self._changed is None or self._changed[0] != head:
            m, b = self._mark, self._binary
            rows = self._read(
                f"SELECT c.key, c.revision, c.before FROM changes c JOIN (SELECT min(revision) AS first FROM changes "
                f"WHERE kind = 'node' AND revision > {m} GROUP BY key{b}) f ON c.revision = f.first",
                (self._revision,),
            )
            states = [unrename(node_of_state(state), self._log, self._revision, int(revision))
                      for _, revision, before in rows if (state := _state(before))]  # fmt: skip
            self._changed = (head, frozenset(str(key) for key, _, _ in rows), states)
        return self._changed[1], self._changed[2]

    def named_then(self, kind: str, type: str, properties: Sequence[str] = ()) -> tuple[str, list[str]]:
        """See `core.store.view.View.named_then`: the names carried back through the renames since (`unrename`)."""
        if kind == "node type":
            node = unrename(Node("", type, dict.fromkeys(properties)), self._log, self._revision, None)
            return node.type, list(node.properties)
        edge = unrename(Edge(type, "", "", dict.fromkeys(properties)), self._log, self._revision, None)
        return edge.type, list(edge.properties)

    def _query_now(self, query: NodeQuery) -> NodeQuery:
        """`query` (in the names of the view's model) in the names of the model now: each name carried through
        the renames of the model changes since, as the stored records were (`carry`)."""
        if not self._log:
            return query
        head = 2**62

        def carried(type_: str, names: Sequence[str]) -> tuple[str, list[str]]:
            moved = carry(Node("", type_, dict.fromkeys(names)), self._log, self._revision, head)
            return moved.type, list(moved.properties)

        type_now, conditions = query.type, query.conditions
        if query.type is not None:
            type_now, names = carried(query.type, [c.property for c in query.conditions])
            conditions = tuple(replace(c, property=name) for c, name in zip(query.conditions, names, strict=True))
        fields = dict(carried(t, list(f)) for t, f in query.text_fields.items())
        return replace(
            query, type=type_now, conditions=conditions, text_fields={t: tuple(f) for t, f in fields.items()}
        )

    # -- edges -------------------------------------------------------------------------------------------------
    def edge_states(self, current: Iterable[Edge], changes: Iterable[Sequence[Any]]) -> dict[EdgeId, Edge | None]:
        """The edges as they were at the view's revision, by identity then: from the rows of the `changes`
        (revision, type, source, target, before; in revision order) to them after it, else their `current` row."""
        out: dict[EdgeId, Edge | None] = {}
        for revision, type_, source, target, before in changes:
            at = int(revision)
            then = unrename(Edge(str(type_), str(source), str(target)), self._log, self._revision, at)
            identity = (then.type, then.source, then.target)
            if identity not in out:
                state = _state(before)
                out[identity] = unrename(edge_of_state(state), self._log, self._revision, at) if state else None
        for edge in current:
            then = unrename(edge, self._log, self._revision, None)
            out.setdefault((then.type, then.source, then.target), then)
        return out

    def _edges_at(self, id: str, direction: Direction) -> dict[EdgeId, Edge | None]:
        m = self._mark
        ends = [end for end, wanted in (("source", ("out", "both")), ("target", ("in", "both"))) if direction in wanted]
        current: dict[EdgeId, Edge] = {}
        changes: list[Any] = []
        for end in ends:
            for row in self._read(f"SELECT {EDGE_COLUMNS} FROM edges WHERE {end} = {m}", (id,)):
                edge = self._store.to_edge(row)
                current[(edge.type, edge.source, edge.target)] = edge
            changes += self._read(f"SELECT revision, type, source, target, before FROM changes WHERE kind = 'edge' "
                                  f"AND {end} = {m} AND revision > {m}", (id, self._revision))  # fmt: skip
        changes.sort(key=lambda row: int(row[0]))
        return self.edge_states(current.values(), changes)

    def between(self, pairs: Sequence[tuple[str, str]]) -> dict[EdgeId, Edge | None]:
        """Every edge from source to target of `pairs` as it was at the view's revision (None: absent then, but
        changed after), by identity then; read by source (on the indexes that start with it), kept by pair."""
        m = self._mark
        if not pairs:
            return {}
        wanted = set(pairs)
        sources = sorted({source for source, _ in pairs})
        current: list[Edge] = []
        changes: list[Any] = []
        for start in range(0, len(sources), BATCH):
            chunk = sources[start : start + BATCH]
            marks = ", ".join([m] * len(chunk))
            rows = self._read(f"SELECT {EDGE_COLUMNS} FROM edges WHERE source IN ({marks})", chunk)
            current += (e for e in map(self._store.to_edge, rows) if (e.source, e.target) in wanted)
            rows = self._read(f"SELECT revision, type, source, target, before FROM changes WHERE kind = 'edge' "
                              f"AND source IN ({marks}) AND revision > {m}", [*chunk, self._revision])  # fmt: skip
            changes += (row for row in rows if (str(row[2]), str(row[3])) in wanted)
        changes.sort(key=lambda row: int(row[0]))
        return self.edge_states(current, changes)

    def _seen_edges(
        self, id: str, direction: Direction, types: Sequence[str], sight: Sight | None
    ) -> tuple[list[Edge], dict[str, Then]]:
        edges = [e for e in self._edges_at(id, direction).values()
                 if e is not None and (not types or e.type in types)]  # fmt: skip
        states = self.states([id, *(end for e in edges for end in (e.source, e.target))])
        seen = [e for e in edges if sees_edge_then(sight, (states[e.source], states[e.target]))]
        return sorted(seen, key=lambda e: (e.type, e.source, e.target)), states

    def edges_of(
        self, id: str, direction: Direction = "both", types: Sequence[str] = (), *, sight: Sight | None = None
    ) -> list[Edge]:
        return self._seen_edges(id, direction, types, sight)[0]

    def neighbours(
        self, id: str, direction: Direction = "both", types: Sequence[str] = (), *, sight: Sight | None = None
    ) -> list[Step]:
        edges, states = self._seen_edges(id, direction, types, sight)
        steps: list[Step] = []
        for e in edges:
            other = states[e.target if e.source == id else e.source][0]
            if other is not None:
                steps.append(Step(e, other))
        return sorted(steps, key=lambda s: (s.node.id, s.edge.type, s.edge.source))

    def changes(self, limit: int, *, sight: Sight | None = None) -> list[Change]:
        return self._store.changes(self._revision, limit, sight=sight)

    # -- the rest of the door (`core.store.view.View`): what a past revision answers, and what it refuses ----------
    def facets(self, query: NodeQuery, names: Sequence[str], *, limit: int) -> dict[str, tuple[dict[str, int], bool]]:
        raise current_only("counting facets")

    def edge(self, type: str, source: str, target: str) -> Edge | None:
        return self.edges([(type, source, target)]).get((type, source, target))

    def edges(self, refs: Sequence[tuple[str, str, str]]) -> dict[tuple[str, str, str], Edge]:
        """The edges `refs` name as they were (no sight applied: the caller checked their ends), by ref."""
        found = self.between(sorted({(source, target) for _, source, target in refs}))
        return {ref: edge for ref in refs if (edge := found.get(ref)) is not None}

    def edges_then(self, ids: Sequence[str]) -> dict[str, list[Edge]]:
        """Every edge at each of the nodes `ids` then, both ways, as stored, by node (what `PastGraph` reads a
        walk's frontier's adjacency from): their current edges and the change log's edges after the revision at
        them, a few queries for the whole frontier."""
        m = self._mark
        current: dict[EdgeId, Edge] = {}
        changes: dict[int, Any] = {}  # by revision: a change at two nodes of the frontier is read twice
        for start in range(0, len(ids), BATCH):
            chunk = list(ids[start : start + BATCH])
            marks = ", ".join([m] * len(chunk))
            for end in ("source", "target"):
                for row in self._read(f"SELECT {EDGE_COLUMNS} FROM edges WHERE {end} IN ({marks})", chunk):
                    edge = self._store.to_edge(row)
                    current[(edge.type, edge.source, edge.target)] = edge
                sql = (f"SELECT revision, type, source, target, before FROM changes WHERE kind = 'edge' AND {end} "
                       f"IN ({marks}) AND revision > {m}")  # fmt: skip
                for row in self._read(sql, [*chunk, self._revision]):
                    changes[int(row[0])] = row
        found: dict[str, list[Edge]] = {id: [] for id in ids}
        for edge in self.edge_states(current.values(), [changes[r] for r in sorted(changes)]).values():
            for end in {edge.source, edge.target} if edge is not None else ():
                if end in found:
                    found[end].append(edge)  # type: ignore[arg-type]
        return found

    def walk(self) -> AbstractContextManager[Walk]:
        """The topology then, read as the walk reaches it (`core.store.past_graph`)."""
        return nullcontext(PastWalk(PastGraph(self), self._revision))

    def counts(self, sight: Sight | None) -> tuple[int, Counter[str], Counter[str]]:
        raise current_only("counting the graph")

    def search(self, model: Model, sight: Sight | None, terms: Sequence[Any], types: Sequence[str] | None,
               revision: int, *, compute: bool = True) -> Any:  # fmt: skip
        raise current_only("a ranked search")

    def latest(self) -> int:
        return self._store.revision()

    def floor(self) -> int:
        return self._store.changes_floor()

    def feed(self, since: int, limit: int, *, sight: Sight | None = None, until: int | None = None) -> list[Change]:
        return self._store.changes(since, limit, sight=sight, until=until)

    def count_changes(self, since: int, *, sight: Sight | None = None, until: int | None = None) -> int:
        return self._store.count_changes(since, sight=sight, until=until)

    def diff(self, since: int, until: int | None = None, *, types: Sequence[str] | None = None,
             ids: Sequence[str] | None = None, sight: Sight | None = None, limit: int = 100,
             after: DiffPosition | None = None) -> DiffPage:  # fmt: skip
        return self._store.diff_revisions(since, until, types=types, ids=ids, sight=sight, limit=limit, after=after)

    def at(self, revision: int) -> StoredView:
        return open_view(self._store, revision)

    def model_at(self, revision: int) -> Model:
        return self._store.model_at(revision)

    def model_history(self) -> list[ModelVersion]:
        return self._store.model_history()

    def audit(self, query: AuditQuery, *, before: int | None, limit: int) -> tuple[list[dict[str, Any]], int]:
        return self._store.audit_records(query, before=before, limit=limit)


# -- differences -----------------------------------------------------------------------------------------------
def diff_revisions(
    store: SQLStore,
    since: int,
    until: int | None = None,
    *,
    types: Sequence[str] | None = None,
    ids: Sequence[str] | None = None,
    sight: Sight | None = None,
    limit: int = 100,
    after: DiffPosition | None = None,
) -> DiffPage:
    """See `core.store.Store.diff_revisions`."""
    to_view = open_view(store, until)
    if since > to_view.revision:
        raise ValidationError(
            f"A difference runs from an earlier revision to a later one: {since} is after {to_view.revision}.",
            [Problem("/from", f"after the revision to compare with ({to_view.revision})")],
        )
    from_view = open_view(store, since)
    log = _rename_log(store, since)
    diff = _Diff(store, from_view, to_view, log, sight, frozenset(types) if types else None, limit)
    if after is None or after[0] == "node":
        diff.nodes(after[1] if after else None, ids)
    if not diff.full():
        start = (after[1], after[2], after[3]) if after and after[0] == "edge" else None
        diff.edges(start, ids)
    model = _versions(store, since, to_view.revision)
    entries, next_at = diff.page()
    return DiffPage(since, to_view.revision, entries, next_at, model)


def _versions(store: SQLStore, since: int, until: int) -> tuple[str, str] | None:
    """The model versions at `since` and `until` when a model change lies between them."""
    history = store.model_history()
    if not any(since < v.revision <= until for v in history):
        return None

    def at(revision: int) -> str:
        return ([v.version for v in history if v.revision <= revision] or [history[0].version])[-1]

    return at(since), at(until)


class _Diff:
    """The entries of one diff page, gathered node by node, then pair of ends by pair."""

    def __init__(self, store: SQLStore, since: StoredView, until: StoredView, log: RenameLog, sight: Sight | None,
                 types: frozenset[str] | None, limit: int) -> None:  # fmt: skip
        self.store, self.since, self.until, self.log = store, since, until, log
        self.sight, self.types, self.limit = sight, types, limit
        self.found: list[tuple[DiffEntry, DiffPosition]] = []
        self.range = (since.revision, until.revision)
        self.mark, self.binary = store.DIALECT.mark, store.DIALECT.binary
        self.batch = min(BATCH, max(limit + 1, 50))  # records read at a time: about a page's worth

    def full(self) -> bool:
        return len(self.found) > self.limit  # one more than a page: there is a next page

    def page(self) -> tuple[tuple[DiffEntry, ...], DiffPosition | None]:
        entries = tuple(entry for entry, _ in self.found[: self.limit])
        return entries, (self.found[self.limit - 1][1] if self.full() and self.limit > 0 else None)

    def _read(self, sql: str, params: Sequence[Any]) -> list[Any]:
        return self.store._read(sql, params)  # pyright: ignore[reportPrivateUsage]

    def nodes(self, after: str | None, ids: Sequence[str] | None) -> None:
        m, b = self.mark, self.binary
        where = f"kind = 'node' AND revision > {m} AND revision <= {m} AND key{b} > {m}"
        params: list[Any] = [*self.range]
        if ids is not None:
            where += f" AND key{b} IN ({', '.join([m] * len(ids))})" if ids else " AND 1 = 0"
        position = after or ""
        while not self.full():
            rows = self._read(f"SELECT DISTINCT key{b} FROM changes WHERE {where} ORDER BY key{b} LIMIT {m}",
                              [*params, position, *(ids or ()), self.batch])  # fmt: skip
            keys = [str(row[0]) for row in rows]
            if not keys:
                return
            states = self._ranged(
                f"kind = 'node' AND key{b} IN ({', '.join([m] * len(keys))})", keys, lambda row: str(row[1])
            )
            now = self.store.nodes(keys) if self.sight is not None else {}
            for key in keys:
                first, last = states[key]
                then = carry(node_of_state(first[1]), self.log, first[0], self.range[1]) if first[1] else None
                later = carry(node_of_state(last[1]), self.log, last[0], self.range[1]) if last[1] else None
                current = now.get(key)
                self._add("node", key, then, later, [(then, current)], [(later, current)], ("node", key))
                if self.full():
                    return
            if len(keys) < self.batch:
                return
            position = keys[-1]

    def edges(self, after: tuple[str, str, str] | None, ids: Sequence[str] | None) -> None:
        """The edges changed in the range, pair of ends by pair, from `after` ((source, target, type): the last
        edge of the page before, whose pair may hold more)."""
        m = self.mark
        where = f"kind = 'edge' AND revision > {m} AND revision <= {m}"
        chosen: list[Any] = []
        if ids is not None:
            marks = ", ".join([m] * len(ids))
            where += f" AND (source IN ({marks}) OR target IN ({marks}))" if ids else " AND 1 = 0"
            chosen = [*ids, *ids]
        position, inclusive = (after[0], after[1]) if after else ("", ""), True
        while not self.full():
            step = ">=" if inclusive else ">"
            rows = self._read(
                f"SELECT DISTINCT source, target FROM changes WHERE {where} AND (source > {m} OR (source = {m} AND "
                f"target {step} {m})) ORDER BY source, target LIMIT {m}",
                [*self.range, *chosen, position[0], position[0], position[1], self.batch],
            )
            pairs = [(str(source), str(target)) for source, target in rows]
            self._pairs(pairs, after if inclusive else None)
            if len(pairs) < self.batch:
                return
            position, inclusive = pairs[-1], False

    def _ranged(
        self, where: str, params: Sequence[Any], identity: Callable[[Sequence[Any]], Any]
    ) -> dict[Any, tuple[tuple[int, Mapping[str, Any] | None], tuple[int, Mapping[str, Any] | None]]]:
        """For each record (by `identity` of its rows) changed in the range among those `where` selects: its
        first change's (revision, `before`) and its last change's (revision, `after`), the states at both ends
        of the range (each in the names of the model at its revision)."""
        rows = self._read(
            f"SELECT revision, key, type, source, target, before, after FROM changes WHERE {where} AND revision > "
            f"{self.mark} AND revision <= {self.mark} ORDER BY revision",
            [*params, *self.range],
        )
        raw: dict[Any, list[Any]] = {}
        for row in rows:
            found = raw.get(identity(row))
            if found is None:
                raw[identity(row)] = [row, row]
            else:
                found[1] = row
        return {key: ((int(first[0]), _state(first[5])), (int(last[0]), _state(last[6])))
                for key, (first, last) in raw.items()}  # fmt: skip

    def _pairs(self, pairs: Sequence[tuple[str, str]], skip_through: tuple[str, str, str] | None) -> None:
        if not pairs:
            return
        wanted = set(pairs)
        sources = sorted({source for source, _ in pairs})
        marks = ", ".join([self.mark] * len(sources))

        def identity(row: Sequence[Any]) -> EdgeId | None:
            if (str(row[3]), str(row[4])) not in wanted:
                return None
            moved = carry(Edge(str(row[2]), str(row[3]), str(row[4])), self.log, int(row[0]), self.range[1])
            return (moved.type, moved.source, moved.target)

        states = self._ranged(f"kind = 'edge' AND source IN ({marks})", sources, identity)
        states.pop(None, None)
        ends = {end for s, t in pairs for end in (s, t)}
        if self.sight is None:  # sees every end: no need to read them
            states_then = states_later = dict.fromkeys(ends, (None, None))
        else:
            now = self.store.nodes(list(ends))
            states_then, states_later = self.since.states(list(ends), now), self.until.states(list(ends), now)
        for type_, source, target in sorted(states, key=lambda k: (k[1], k[2], k[0])):
            if skip_through is not None and (source, target, type_) <= skip_through:
                continue
            first, last = states[(type_, source, target)]
            before = carry(edge_of_state(first[1]), self.log, first[0], self.range[1]) if first[1] else None
            after = carry(edge_of_state(last[1]), self.log, last[0], self.range[1]) if last[1] else None
            seen_then = [states_then[source], states_then[target]]
            seen_later = [states_later[source], states_later[target]]
            self._add("edge", f"{type_}:{source}->{target}", before, after, seen_then, seen_later,
                      ("edge", source, target, type_))  # fmt: skip
            if self.full():
                return

    def _add(
        self,
        kind: str,
        key: str,
        before: Node | Edge | None,
        after: Node | Edge | None,
        ends_then: Sequence[tuple[Node | None, Node | None]],
        ends_later: Sequence[tuple[Node | None, Node | None]],
        position: DiffPosition,
    ) -> None:
        if before is None and after is None:
            return
        if self.types is not None and not any(r is not None and r.type in self.types for r in (before, after)):
            return
        entry = diff_entry(kind, key, before, after, sees_edge_then(self.sight, ends_then),
                           sees_edge_then(self.sight, ends_later))  # fmt: skip
        if entry is not None:
            self.found.append((entry, position))


def diff_entry(kind: str, key: str, before: Node | Edge | None, after: Node | Edge | None, sees_before: bool,
               sees_after: bool) -> DiffEntry | None:  # fmt: skip
    """How a record differs from `before` to `after` (None: absent), as a caller who sees the one side or the other
    (`sees_before`, `sees_after`) may be shown it: None when nothing differs or it sees neither side; a side it may
    not see is left out and the entry `redacted`, without its fields and properties. The one rule of a shown
    difference: `diff_revisions` and a proposal's diff (`core.dispatch.proposals`) both make their entries with it."""
    fields, properties = _differences(before, after)
    if before is not None and after is not None and not fields and not properties:
        return None
    shown_before = before if before is not None and sees_before else None
    shown_after = after if after is not None and sees_after else None
    if shown_before is None and shown_after is None:
        return None
    redacted = (shown_before is None) != (before is None) or (shown_after is None) != (after is None)
    change = "added" if before is None else "removed" if after is None else "changed"
    return DiffEntry(kind, key, change, shown_before, shown_after,  # type: ignore[arg-type]
                     () if redacted else fields, {} if redacted else properties, redacted)  # fmt: skip


def _differences(
    before: Node | Edge | None, after: Node | Edge | None
) -> tuple[tuple[str, ...], dict[str, dict[str, Any]]]:
    """The system fields and the properties that differ between two states of a record (both given)."""
    if before is None or after is None:
        return (), {}
    fields = [name for name in ("type", "visibility", "readers")
              if getattr(before, name, None) != getattr(after, name, None)]  # fmt: skip
    properties: dict[str, dict[str, Any]] = {}
    for name in sorted({*before.properties, *after.properties}):
        old, new = before.properties.get(name, _MISSING), after.properties.get(name, _MISSING)
        if old != new or (old is _MISSING) != (new is _MISSING):
            sides = {"before": old, "after": new}
            properties[name] = {side: value for side, value in sides.items() if value is not _MISSING}
    return tuple(fields), properties


_MISSING: Any = object()
