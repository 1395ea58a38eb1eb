"""The in-memory graph index: topology, types and visibility of every node, kept current from the change log.

The index is a `networkx.MultiDiGraph` (edge key = edge type). It holds no property payloads: those stay in the
store and are read by id, which keeps the index small (see docs/operations/capacity.md for the measurements).

`sync()` brings the index up to the store's latest revision by replaying the change log, whoever committed:
this process or another one on the same store. It costs one primary-key lookup when nothing changed, so readers
call it before reading and `follow()` calls it in the background to push changes to listeners promptly.
"""

from __future__ import annotations

import gc
import threading
from collections import Counter
from collections.abc import Callable, Generator, Iterable
from contextlib import contextmanager
from typing import Any

import networkx as nx

from core.records import Change, Sight, parse_edge_key
from core.store import Store

__all__ = ["ChangeListener", "GraphIndex"]

ChangeListener = Callable[[list[Change]], None]
_PAGE = 10_000
_NO_READERS: tuple[str, ...] = ()
_LEVELS = ("public", "internal", "restricted")
_LEVEL = {name: i for i, name in enumerate(_LEVELS)}


class GraphIndex:
    """A `MultiDiGraph` mirror of a store. Thread-safe: mutations and `reading()` share one lock."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.graph: nx.MultiDiGraph[str] = nx.MultiDiGraph()
        self.revision = 0
        self.node_counts: Counter[str] = Counter()  # node type -> nodes, kept with the graph
        self.edge_counts: Counter[str] = Counter()  # edge type -> edges
        # for counting what a caller may see without walking the graph (see `visible_counts`):
        self._by_visibility: Counter[tuple[str, str]] = Counter()  # (node type, visibility) -> nodes
        self._by_level: Counter[tuple[str, str]] = Counter()  # (edge type, level of its less visible end) -> edges
        self._readable: dict[str, set[str]] = {}  # reader tag (user:X, group:Y) -> restricted nodes naming it
        self._lock = threading.RLock()
        self._listeners: list[ChangeListener] = []

    @classmethod
    def build(cls, store: Store) -> GraphIndex:
        """Load the whole topology from the store, then catch up with anything committed meanwhile."""
        index = cls(store)
        index.revision = store.revision()  # read first: replaying changes newer than the snapshot is idempotent
        collecting = gc.isenabled()
        gc.disable()  # millions of new dicts and no garbage: the cyclic collector would rescan them again and again
        try:
            index._load(store)
        finally:
            if collecting:
                gc.enable()
        index.sync()
        return index

    def _load(self, store: Store) -> None:
        """Fill the empty graph with the store's topology, writing networkx's adjacency dicts directly.

        Exactly what `add_node` / `add_edge(source, target, key=type)` build (one key dict shared by the
        successor and predecessor maps, an empty data dict per edge), without their per-call checks and cache
        clearing. Opening a 1,000,000-node, 3,200,000-edge store: 45.5 s before; 30.6 s with the cyclic collector
        off during the load (`build`); 23.5 s with this as well. networkx documents these dicts as the graph's data
        structure; `test_graph` checks the result equals one built with `add_edge`.
        """
        graph: Any = self.graph  # its adjacency dicts are not in the type stubs
        nodes: dict[str, dict[str, Any]] = graph._node
        succ: dict[str, dict[str, dict[str, dict[str, Any]]]] = graph._succ
        pred: dict[str, dict[str, dict[str, dict[str, Any]]]] = graph._pred
        by_level, edge_counts = self._by_level, self.edge_counts
        for id_, type_, visibility, readers in store.iter_node_heads():
            nodes[id_] = {"type": type_, "visibility": visibility, "readers": readers or _NO_READERS}
            succ[id_], pred[id_] = {}, {}
            self._count_node(type_, visibility, 1, id_, readers)
        for type_, source, target in store.iter_topology():
            ends = nodes.get(source), nodes.get(target)
            if ends[0] is None or ends[1] is None:  # an end committed after the nodes were read:
                continue  # its change (and this edge's) is newer than `revision`, so sync() replays both
            keys = succ[source].get(target)
            if keys is None:
                keys = succ[source][target] = pred[target][source] = {}
            keys[type_] = {}
            edge_counts[type_] += 1
            level = max(_LEVEL[ends[0]["visibility"]], _LEVEL[ends[1]["visibility"]])
            by_level[(type_, _LEVELS[level])] += 1
        nx._clear_cache(graph)  # pyright: ignore[reportPrivateUsage]

    # -- following the change log ------------------------------------------------------------------------------
    def add_listener(self, listener: ChangeListener) -> Callable[[], None]:
        """Call `listener` with every batch of changes the index applies; returns a function that removes it."""
        with self._lock:
            self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def sync(self) -> list[Change]:
        """Apply every change committed after the index's revision; return them (empty when up to date)."""
        with self._lock:
            if self.store.revision() == self.revision:
                return []
            applied: list[Change] = []
            while page := self.store.changes(self.revision, _PAGE):
                self.apply(page)
                applied += page
            listeners = list(self._listeners)
        if applied:
            for listener in listeners:
                listener(applied)
        return applied

    def apply(self, changes: Iterable[Change]) -> None:
        """Apply changes to the graph (idempotent: re-applying a change already reflected is harmless)."""
        with self._lock:
            graph = self.graph
            for c in changes:
                if c.kind == "node":
                    present = graph.has_node(c.key)
                    if c.after is not None:
                        readers = tuple(c.after.get("readers", ())) or _NO_READERS
                        visibility = str(c.after["visibility"])
                        if present:
                            self._revisit(c.key, visibility, readers)
                        else:
                            graph.add_node(c.key, type=c.type, visibility=visibility, readers=readers)
                            self._count_node(str(c.type), visibility, 1, c.key, readers)
                    elif present:
                        attributes = graph.nodes[c.key]
                        self._drop_edges_of(c.key)
                        self._count_node(attributes["type"], attributes["visibility"], -1, c.key, attributes["readers"])
                        graph.remove_node(c.key)
                elif c.kind == "edge":
                    type_, source, target = parse_edge_key(c.key)
                    present = graph.has_edge(source, target, key=type_)
                    if c.after is not None and not present:
                        graph.add_edge(source, target, key=type_)
                        self._count_edge(type_, source, target, 1)
                    elif c.after is None and present:
                        self._count_edge(type_, source, target, -1)
                        graph.remove_edge(source, target, key=type_)
                self.revision = max(self.revision, c.revision)

    def _revisit(self, id: str, visibility: str, readers: tuple[str, ...]) -> None:
        """Update a present node's visibility and readers, and the counts that depend on them."""
        attributes = self.graph.nodes[id]
        type_, was, had = attributes["type"], attributes["visibility"], attributes["readers"]
        if (was, had) == (visibility, readers):
            return
        edges = self._incident(id) if was != visibility else []  # their level follows their ends' visibility
        for edge in edges:
            self._count_edge(*edge, -1)
        self._count_node(type_, was, -1, id, had)
        attributes["visibility"], attributes["readers"] = visibility, readers
        self._count_node(type_, visibility, 1, id, readers)
        for edge in edges:
            self._count_edge(*edge, 1)

    def _incident(self, id: str) -> list[tuple[str, str, str]]:
        out = [(k, s, t) for s, t, k in self.graph.out_edges(id, keys=True)]
        return out + [(k, s, t) for s, t, k in self.graph.in_edges(id, keys=True) if s != id]  # self-loops once

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
        nodes = self.graph.nodes
        level = max(_LEVEL[nodes[source]["visibility"]], _LEVEL[nodes[target]["visibility"]])
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
        """Sync in a background thread every `interval` seconds; returns a function that stops it."""
        stop = threading.Event()

        def run() -> None:
            while not stop.wait(interval):
                self.sync()

        thread = threading.Thread(target=run, name="canon-index-follower", daemon=True)
        thread.start()

        def halt() -> None:
            stop.set()
            thread.join()

        return halt

    # -- reading -----------------------------------------------------------------------------------------------
    @contextmanager
    def uncontended(self) -> Generator[bool]:
        """For a short read that must not wait: True, with the index and the store held for the block, when neither
        is in use by another thread and the index is at the store's revision (no change log to replay); False,
        holding nothing, otherwise."""
        if not self._lock.acquire(blocking=False):
            yield False
            return
        try:
            with self.store.uncontended() as free:
                yield free and self.store.revision() == self.revision
        finally:
            self._lock.release()

    @contextmanager
    def reading(self) -> Generator[nx.MultiDiGraph[str]]:
        """The graph, current and locked against concurrent changes for the duration of the block."""
        self.sync()
        with self._lock:
            yield self.graph

    def __len__(self) -> int:
        return int(self.graph.number_of_nodes())
