"""The in-memory graph index: topology, types and visibility of every node, kept current from the change log.

The index is a `networkx.MultiDiGraph` (edge key = edge type). It holds no property payloads: those stay in the
store and are read by id, which keeps the index small (see docs/operations/capacity.md for the measurements).

`sync()` brings the index up to the store's latest revision by replaying the change log, whoever committed:
this process or another one on the same store. It costs one primary-key lookup when nothing changed, so readers
call it before reading and `follow()` calls it in the background to push changes to listeners promptly.

Readers never wait for readers, and a sync never waits for a reader: `reading()` hands out the `GraphView`
published at the latest applied revision, and the walk reads it with no lock held. A sync that finds readers on
the current base applies its changes copy-on-write, to the few entries they touch (see `core.index.graph_layers`), and
publishes the next view; one that finds none changes the base in place. See
docs/decisions/0017-readers-walk-published-views.md.

A restored index's base may be a mapped file's read-only arrays (`core.index.mapped`, shared by every process
that maps the file, ADR 0061): its changes since the file then always stay copy-on-write, and `remap` moves the
index onto a newer file (views already handed out keep the old mapping).
"""

from __future__ import annotations

import functools
import gc
import logging
import threading
from collections import Counter
from collections.abc import Callable, Generator, Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.index.graph_layers import Entry, Layer
from core.index.mapped import MappedNodes
from core.store import Store
from core.values.records import Change, Sight, parse_edge_key

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["ChangeListener", "GraphIndex", "GraphView", "IndexState"]

ChangeListener = Callable[[list[Change]], None]
_PAGE = 10_000
log = logging.getLogger(__name__)
_NO_READERS: tuple[str, ...] = ()
_LEVELS = ("public", "internal", "restricted")
_LEVEL = {name: i for i, name in enumerate(_LEVELS)}
_REBASE_MIN = 4_096  # changes kept copy-on-write before a new base is made (or a sixteenth of the nodes, if more)


@dataclass(eq=False)
class _Base:
    """The shared base dicts' reader count: how many views of them are being walked."""

    readers: int = 0


@dataclass(frozen=True, eq=False)
class IndexState:
    """What the index holds at one revision (`core.index.persisted` saves and loads it): the three maps (networkx's
    dicts, or read-only mappings of them: a published view's, or a mapped file's) and the counts kept with them."""

    nodes: Any = field(repr=False)
    succ: Any = field(repr=False)
    pred: Any = field(repr=False)
    node_counts: dict[str, int]
    edge_counts: dict[str, int]
    by_visibility: dict[tuple[str, str], int]
    by_level: dict[tuple[str, str], int]
    readable: dict[str, set[str]]

    def counts(self) -> tuple[Any, ...]:
        return self.node_counts, self.edge_counts, self.by_visibility, self.by_level, self.readable


@dataclass(frozen=True, eq=False)
class GraphView:
    """The graph at one revision, for a walk: `graph` never changes while the view is held (see `reading()`)."""

    nodes: Any = field(repr=False)  # the maps networkx reads: node -> attributes,
    succ: Any = field(repr=False)  # source -> target -> edge type -> data,
    pred: Any = field(repr=False)  # and target -> source -> edge type -> data
    revision: int
    base: _Base = field(repr=False)

    @functools.cached_property
    def graph(self) -> nx.MultiDiGraph[str]:
        """The `MultiDiGraph` over the maps, made on first use: a stdio start answers `initialize` and `tools/list`
        without importing networkx (about a tenth of its import time). Two threads making it at once make two
        equal wrappers of the same maps."""
        return _graph_of(self.nodes, self.succ, self.pred)


def _graph_of(nodes: Any, succ: Any, pred: Any) -> nx.MultiDiGraph[str]:
    """A `MultiDiGraph` over these maps (networkx's own attributes, what its views and methods read)."""
    import networkx as nx

    graph: Any = nx.MultiDiGraph()
    graph._node, graph._adj, graph._pred = nodes, succ, pred  # `_succ` is `_adj`
    return graph


class GraphIndex:
    """A `MultiDiGraph` mirror of a store. Thread-safe: one writer at a time (`sync`, `apply`), readers never
    wait for it nor for each other."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._nodes, self._succ, self._pred = Layer({}), Layer({}), Layer({})
        self._base = _Base()
        self._applied = 0  # the writer's revision; `revision` is the published view's
        self.loaded_at: int | None = None  # the revision of the saved index it was loaded from (None: built)
        self.node_counts: Counter[str] = Counter()  # node type -> nodes, kept with the graph
        self.edge_counts: Counter[str] = Counter()  # edge type -> edges
        # for counting what a caller may see without walking the graph (see `visible_counts`):
        self._by_visibility: Counter[tuple[str, str]] = Counter()  # (node type, visibility) -> nodes
        self._by_level: Counter[tuple[str, str]] = Counter()  # (edge type, level of its less visible end) -> edges
        self._readable: dict[str, set[str]] = {}  # reader tag (user:X, group:Y) -> restricted nodes naming it
        self._lock = threading.RLock()  # the writer's: held by a sync or an apply, never by a walk
        self._pins = threading.Lock()  # taking and letting go of a view; changing the base in place
        self._listeners: list[ChangeListener] = []
        self._view = GraphView({}, {}, {}, 0, self._base)
        # called (holding the writer's lock: it must not wait for it) when the changes kept over a read-only base
        # pass the bound a dict base is copied at: the owner saves a newer file and `remap`s onto it
        self.on_grown: Callable[[], None] | None = None

    @property
    def graph(self) -> nx.MultiDiGraph[str]:
        """The latest published graph, for a quick look-up; a walk takes a view with `reading()`."""
        return self._view.graph

    @property
    def revision(self) -> int:
        """The revision of the latest published view."""
        return self._view.revision

    @classmethod
    def build(cls, store: Store) -> GraphIndex:
        """Load the whole topology from the store, then catch up with anything committed meanwhile."""
        index = cls(store)
        index._applied = store.revision()  # read first: replaying changes newer than the snapshot is idempotent
        collecting = gc.isenabled()
        gc.disable()  # millions of new dicts and no garbage: the cyclic collector would rescan them again and again
        try:
            index._load(store)
        finally:
            if collecting:
                gc.enable()
        index._publish()
        index.sync()
        return index

    @classmethod
    def restore(cls, store: Store, revision: int, state: IndexState) -> GraphIndex:
        """The index `state` describes, at `revision` (a saved index, `core.index.persisted`); `sync()` brings it up
        to date. `state`'s maps become the base: nothing else may change them (dicts; or a mapped file's arrays,
        which nothing changes)."""
        index = cls(store)
        index._nodes, index._succ, index._pred = Layer(state.nodes), Layer(state.succ), Layer(state.pred)
        index.node_counts, index.edge_counts = Counter(state.node_counts), Counter(state.edge_counts)
        index._by_visibility, index._by_level = Counter(state.by_visibility), Counter(state.by_level)
        index._readable = state.readable
        index._applied = index.loaded_at = revision
        index._publish()
        return index

    @contextmanager
    def snapshot(self) -> Generator[tuple[IndexState, int]]:
        """The index at the latest applied revision as `IndexState`, and that revision, for saving: the maps are a
        held view's (changes meanwhile go to copies, as for a walk), the counts copies taken with it."""
        with self._lock:  # no batch half applied: the counts are those of the published view
            with self._pins:
                view = self._view
                view.base.readers += 1
            state = IndexState(
                view.nodes, view.succ, view.pred, dict(self.node_counts),
                dict(self.edge_counts), dict(self._by_visibility), dict(self._by_level),
                {tag: set(ids) for tag, ids in self._readable.items()},
            )  # fmt: skip
        try:
            yield state, view.revision
        finally:
            with self._pins:
                view.base.readers -= 1

    def _load(self, store: Store) -> None:
        """Fill the empty base dicts with the store's topology, as networkx's adjacency dicts.

        Exactly what `add_node` / `add_edge(source, target, key=type)` build (one key dict shared by the
        successor and predecessor maps, an empty data dict per edge), without their per-call checks and cache
        clearing. Opening a 1,000,000-node, 3,200,000-edge store: 45.5 s before; 30.6 s with the cyclic collector
        off during the load (`build`); 23.5 s with this as well. networkx documents these dicts as the graph's data
        structure; `test_graph` checks the result equals one built with `add_edge`. Each id and type name is one
        string object wherever the maps hold it (the store's rows give a new one each time): less memory, and a saved
        index (`core.index.persisted`) writes each once.
        """
        nodes, succ, pred = self._nodes.base, self._succ.base, self._pred.base
        by_level, edge_counts = self._by_level, self.edge_counts
        canonical: dict[str, str] = {}  # one string object per id and type name, wherever the maps name it
        same = canonical.setdefault
        for id_, type_, visibility, readers in store.iter_node_heads():
            id_, type_ = same(id_, id_), same(type_, type_)
            nodes[id_] = {"type": type_, "visibility": same(visibility, visibility), "readers": readers or _NO_READERS}
            succ[id_], pred[id_] = {}, {}
            self._count_node(type_, visibility, 1, id_, readers)
        for type_, source_row, target_row in store.iter_topology():
            source, target = canonical.get(source_row), canonical.get(target_row)
            if source is None or target is None:  # an end committed after the nodes were read:
                continue  # its change (and this edge's) is newer than `revision`, so sync() replays both
            ends, type_ = (nodes[source], nodes[target]), same(type_, type_)
            keys = succ[source].get(target)
            if keys is None:
                keys = succ[source][target] = pred[target][source] = {}
            keys[type_] = {}
            edge_counts[type_] += 1
            level = max(_LEVEL[ends[0]["visibility"]], _LEVEL[ends[1]["visibility"]])
            by_level[(type_, _LEVELS[level])] += 1
        for layer in (self._nodes, self._succ, self._pred):
            layer.size = len(layer.base)

    # -- following the change log ------------------------------------------------------------------------------
    def add_listener(self, listener: ChangeListener) -> Callable[[], None]:
        """Call `listener` with every batch of changes the index applies; returns a function that removes it."""
        with self._lock:
            self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def sync(self) -> list[Change]:
        """Apply every change committed after the index's revision; return them (empty when up to date). Waits
        only for another sync, never for a reader; when the index is current it takes no lock at all, so the check
        every call makes first never turns away a read that must not wait (`uncontended`)."""
        if self.store.revision() == self._applied:  # the revision only grows: current now means nothing to apply
            return []
        with self._lock:  # another sync may have applied them meanwhile: then the first page is empty
            applied: list[Change] = []
            while page := self.store.changes(self._applied, _PAGE):
                if page[0].revision != self._applied + 1:  # revisions are gap-free: the log was compacted past us
                    log.warning("the change log was compacted past this process's graph index (at revision %d, the "
                                "log starts at %d): reloading it from the store; changes %d-%d were not delivered to "
                                "subscribers", self._applied, page[0].revision, self._applied + 1,
                                page[0].revision - 1)  # fmt: skip
                    self.reload()
                    break
                self.apply(page)
                applied += page
                if len(page) < _PAGE:  # the last page: one query fewer (on PostgreSQL, a round trip)
                    break
            listeners = list(self._listeners)
        if applied:
            for listener in listeners:
                listener(applied)
        return applied

    def reload(self) -> None:
        """Load the index afresh from the store: after `canon store compact` removed changes it had not applied, or
        after a model change that renamed types (`core.lang.model_migration` moves records without a change each).

        Views already handed out keep the state they were taken on; the next one is the store's. Listeners are not
        told of anything (the changes that are gone cannot be told; a rename is the model change they hear of).
        """
        fresh = GraphIndex.build(self.store)
        with self._lock, self._pins:  # the lock: a snapshot never sees the new counts with the old maps
            self._adopt(fresh)

    def remap(self, revision: int, state: IndexState) -> bool:
        """Move onto `state`, a saved index of this store at `revision` (a newer file the serving process wrote,
        `core.index.persisted.remap_index`), brought to exactly this index's revision from the change log first:
        the views that follow read the new file's base, those already handed out keep theirs (and its mapping).
        Listeners hear nothing (nothing changed). False, leaving the index as it was, when the file is ahead of
        this index (sync first) or the log no longer holds the changes between them."""
        fresh = GraphIndex.restore(self.store, revision, state)
        with self._lock:
            if revision > self._applied or not fresh._catch_up(self._applied):
                return False
            with self._pins:
                self._adopt(fresh)
            return True

    def _catch_up(self, until: int) -> bool:
        """Apply the change log up to revision `until` exactly (not past it); False if it has a gap (compacted)."""
        while self._applied < until:
            page = [c for c in self.store.changes(self._applied, min(_PAGE, until - self._applied)) if
                    c.revision <= until]  # fmt: skip
            if not page or page[0].revision != self._applied + 1:
                return False
            self.apply(page)
        return True

    def _adopt(self, fresh: GraphIndex) -> None:
        """Take `fresh`'s state as this index's (holding the writer's lock and the pins)."""
        self._nodes, self._succ, self._pred = fresh._nodes, fresh._succ, fresh._pred
        self._base = fresh._base
        self.node_counts, self.edge_counts = fresh.node_counts, fresh.edge_counts
        self._by_visibility, self._by_level = fresh._by_visibility, fresh._by_level
        self._readable = fresh._readable
        self._applied = fresh._applied
        self.loaded_at = fresh.loaded_at
        self._publish()

    def warm(self) -> None:
        """Decode the mapped base's ids at once (`core.index.mapped.Mapped.decode_all`; a walk worker, before it
        takes walks); nothing over a dict base."""
        base = self._nodes.base
        if isinstance(base, MappedNodes):
            base.mapped.decode_all()

    @property
    def mapped(self) -> bool:
        """Whether the index's base is a mapped file's read-only arrays (`core.index.mapped`), not dicts."""
        return not self._nodes.writable

    def apply(self, changes: Iterable[Change]) -> None:
        """Apply changes and publish the result (idempotent: re-applying a change already reflected is harmless).

        In place while nobody walks the base (new readers wait for this page, not for a walk); else copy-on-write,
        while the walks go on, and on a new base once the changes kept that way pass a sixteenth of the nodes. Over
        a read-only base (a mapped file's) always copy-on-write; past that bound `on_grown` is told instead."""
        with self._lock:
            writable = self._nodes.writable
            with self._pins:
                if self._base.readers == 0 and writable:
                    self._apply_in_place(changes)
                    return
            for change in changes:
                self._apply_one(change)
            if len(self._nodes.delta) + len(self._succ.delta) > max(_REBASE_MIN, self._nodes.size // 16):
                if writable:
                    for layer in (self._nodes, self._succ, self._pred):
                        layer.rebase()
                    self._base = _Base()
                elif self.on_grown is not None:
                    self.on_grown()
            self._publish()

    def _apply_in_place(self, changes: Iterable[Change]) -> None:
        layers = (self._nodes, self._succ, self._pred)
        for layer in layers:
            layer.fold()
            layer.in_place = True
        try:
            for change in changes:
                self._apply_one(change)
        finally:
            for layer in layers:
                layer.in_place = False
            self._publish()

    def _publish(self) -> None:
        published = self._nodes.published(), self._succ.published(), self._pred.published()
        self._view = GraphView(*published, self._applied, self._base)

    def _apply_one(self, c: Change) -> None:
        nodes = self._nodes
        if c.kind == "node":
            attributes = nodes.get(c.key)
            if c.after is not None:
                readers = tuple(c.after.get("readers", ())) or _NO_READERS
                visibility = str(c.after["visibility"])
                if attributes is not None:
                    self._revisit(c.key, visibility, readers)
                else:
                    nodes.put(c.key, {"type": c.type, "visibility": visibility, "readers": readers})
                    self._succ.put(c.key, {})
                    self._pred.put(c.key, {})
                    self._count_node(str(c.type), visibility, 1, c.key, readers)
            elif attributes is not None:
                self._drop_edges_of(c.key)
                self._count_node(attributes["type"], attributes["visibility"], -1, c.key, attributes["readers"])
                self._remove_node(c.key)
        elif c.kind == "edge":
            type_, source, target = parse_edge_key(c.key)
            keys = (self._succ.get(source) or {}).get(target)
            present = keys is not None and type_ in keys
            ends = nodes.get(source) is not None and nodes.get(target) is not None  # always, in log order
            if c.after is not None and not present and ends:
                self._set_keys(source, target, {**(keys or {}), type_: {}})
                self._count_edge(type_, source, target, 1)
            elif c.after is None and present:
                assert keys is not None
                self._count_edge(type_, source, target, -1)
                self._set_keys(source, target, {k: v for k, v in keys.items() if k != type_})
        self._applied = max(self._applied, c.revision)

    def _set_keys(self, source: str, target: str, keys: Entry) -> None:
        """Make the edge types from `source` to `target` `keys` (none: no adjacency), one dict in both maps."""
        out, into = self._succ.own(source), self._pred.own(target)
        if keys:
            out[target] = into[source] = keys
        else:
            out.pop(target, None)
            into.pop(source, None)

    def _remove_node(self, id: str) -> None:
        """Remove a node and its adjacency entries in its neighbours' maps."""
        for target in list(self._succ.get(id) or {}):
            if target != id:
                self._pred.own(target).pop(id, None)
        for source in list(self._pred.get(id) or {}):
            if source != id:
                self._succ.own(source).pop(id, None)
        for layer in (self._nodes, self._succ, self._pred):
            layer.drop(id)

    def _revisit(self, id: str, visibility: str, readers: tuple[str, ...]) -> None:
        """Update a present node's visibility and readers, and the counts that depend on them."""
        current = self._nodes.get(id)
        assert current is not None
        type_, was, had = current["type"], current["visibility"], current["readers"]
        if (was, had) == (visibility, readers):
            return
        edges = self._incident(id) if was != visibility else []  # their level follows their ends' visibility
        for edge in edges:
            self._count_edge(*edge, -1)
        self._count_node(type_, was, -1, id, had)
        attributes = self._nodes.own(id)
        attributes["visibility"], attributes["readers"] = visibility, readers
        self._count_node(type_, visibility, 1, id, readers)
        for edge in edges:
            self._count_edge(*edge, 1)

    def _incident(self, id: str) -> list[tuple[str, str, str]]:
        out = [(k, id, t) for t, keys in (self._succ.get(id) or {}).items() for k in keys]
        into = [(k, s, id) for s, keys in (self._pred.get(id) or {}).items() if s != id for k in keys]  # loops once
        return out + into

    def _count_node(self, type_: str, visibility: str, delta: int, id: str, readers: tuple[str, ...]) -> None:
        self.node_counts[type_] += delta
        self._by_visibility[(type_, visibility)] += delta
        if visibility != "restricted":
            return
        for tag in readers:
            if delta > 0:
                self._readable.setdefault(tag, set()).add(id)
            else:
                named = self._readable.get(tag, set())
                named.discard(id)
                if not named:
                    self._readable.pop(tag, None)

    def _count_edge(self, type_: str, source: str, target: str, delta: int) -> None:
        self.edge_counts[type_] += delta
        start, end = self._nodes.get(source), self._nodes.get(target)
        assert start is not None
        assert end is not None
        level = max(_LEVEL[start["visibility"]], _LEVEL[end["visibility"]])
        self._by_level[(type_, _LEVELS[level])] += delta

    def _drop_edges_of(self, node: str) -> None:
        """Count out the edges `remove_node` takes with it (the change log deletes them first, normally)."""
        for type_, source, target in self._incident(node):
            self._count_edge(type_, source, target, -1)

    def visible_counts(self, sight: Sight | None) -> tuple[Counter[str], Counter[str]]:
        """Nodes per node type and edges per edge type that `sight` sees (None: all), without walking the graph:
        the counts by visibility, plus a walk over just the restricted nodes that name the caller as a reader."""
        with self._lock:
            if sight is None:
                return Counter(self.node_counts), Counter(self.edge_counts)
            nodes: Counter[str] = Counter()
            edges: Counter[str] = Counter()
            for (type_, visibility), n in self._by_visibility.items():
                if visibility in sight.levels:
                    nodes[type_] += n
            for (type_, level), n in self._by_level.items():
                if level in sight.levels:
                    edges[type_] += n
            if not sight.tags:
                return nodes, edges
            graph = self.graph

            def sees(id: str) -> bool:
                attributes = graph.nodes[id]
                return sight.sees(attributes["visibility"], attributes["readers"])

            readable = set[str]().union(*(self._readable.get(tag, set[str]()) for tag in sight.tags))
            for id_ in readable:
                nodes[graph.nodes[id_]["type"]] += 1
                for _, target, key in graph.out_edges(id_, keys=True):  # counted here, from its source
                    edges[key] += sees(target)
                for source, _, key in graph.in_edges(id_, keys=True):  # unless the source is restricted too
                    if source != id_ and graph.nodes[source]["visibility"] != "restricted":
                        edges[key] += sees(source)
            return nodes, edges

    def follow(self, interval: float = 0.1) -> Callable[[], None]:
        """Sync in a background thread every `interval` seconds; returns a function that stops it. A sync that
        fails (the store unreachable for a while, say) is logged and tried again at the next interval: the thread
        never ends before it is stopped."""
        stop = threading.Event()

        def run() -> None:
            while not stop.wait(interval):
                try:
                    self.sync()
                except Exception:  # the follower must outlive any one failed sync; the next one catches up
                    log.exception("following the change log of %s failed; trying again", self.store.location)

        thread = threading.Thread(target=run, name="canon-index-follower", daemon=True)
        thread.start()

        def halt() -> None:
            stop.set()
            thread.join()

        return halt

    # -- reading -----------------------------------------------------------------------------------------------
    @contextmanager
    def uncontended(self) -> Generator[bool]:
        """For a short read that must not wait: True, with the index's writer and the store held for the block, when
        neither is in use by another thread (a sync, a query or a commit; walks hold neither) and the index is at the
        store's revision (no change log to replay); False, holding nothing, otherwise."""
        if not self._lock.acquire(blocking=False):
            yield False
            return
        try:
            with self.store.uncontended() as free:
                yield free and self.store.revision() == self.revision
        finally:
            self._lock.release()

    @contextmanager
    def reading(self) -> Generator[GraphView]:
        """The current view (synced first), unchanged for the duration of the block, with no lock held meanwhile:
        a sync that comes while it is held applies its changes to copies, for the views that follow."""
        self.sync()
        with self._pins:
            view = self._view
            view.base.readers += 1
        try:
            yield view
        finally:
            with self._pins:
                view.base.readers -= 1

    @contextmanager
    def settled(self) -> Generator[int]:
        """The revision, with no change applied until the block ends (for `visible_counts` at that revision)."""
        self.sync()
        with self._lock:
            yield self.revision

    def __len__(self) -> int:
        return len(self._view.nodes)
