"""The in-memory graph index: topology, types and visibility of every node, kept current from the change log.

The index is a `networkx.MultiDiGraph` (edge key = edge type). It holds no property payloads: those stay in the
store and are read by id, which keeps the index small (see docs/operations/capacity.md for the measurements).

`sync()` brings the index up to the store's latest revision by replaying the change log, whoever committed:
this process or another one on the same store. It costs one primary-key lookup when nothing changed, so readers
call it before reading and `follow()` calls it in the background to push changes to listeners promptly.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Generator, Iterable
from contextlib import contextmanager

import networkx as nx

from core.records import Change, parse_edge_key
from core.store import Store

__all__ = ["ChangeListener", "GraphIndex"]

ChangeListener = Callable[[list[Change]], None]
_PAGE = 10_000
_NO_READERS: tuple[str, ...] = ()


class GraphIndex:
    """A `MultiDiGraph` mirror of a store. Thread-safe: mutations and `reading()` share one lock."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.graph: nx.MultiDiGraph[str] = nx.MultiDiGraph()
        self.revision = 0
        self.node_counts: Counter[str] = Counter()  # node type -> nodes, kept with the graph
        self.edge_counts: Counter[str] = Counter()  # edge type -> edges
        self._lock = threading.RLock()
        self._listeners: list[ChangeListener] = []

    @classmethod
    def build(cls, store: Store) -> GraphIndex:
        """Load the whole topology from the store, then catch up with anything committed meanwhile."""
        index = cls(store)
        index.revision = store.revision()  # read first: replaying changes newer than the snapshot is idempotent
        graph = index.graph
        for id_, type_, visibility, readers in store.iter_node_heads():
            graph.add_node(id_, type=type_, visibility=visibility, readers=readers or _NO_READERS)
            index.node_counts[type_] += 1
        for type_, source, target in store.iter_topology():
            graph.add_edge(source, target, key=type_)
            index.edge_counts[type_] += 1
        index.sync()
        return index

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
                        graph.add_node(c.key, type=c.type, visibility=c.after["visibility"], readers=readers)
                        self.node_counts[str(c.type)] += 0 if present else 1
                    elif present:
                        self.node_counts[graph.nodes[c.key]["type"]] -= 1
                        self._drop_edges_of(c.key)
                        graph.remove_node(c.key)
                elif c.kind == "edge":
                    type_, source, target = parse_edge_key(c.key)
                    present = graph.has_edge(source, target, key=type_)
                    if c.after is not None and not present:
                        graph.add_edge(source, target, key=type_)
                        self.edge_counts[type_] += 1
                    elif c.after is None and present:
                        graph.remove_edge(source, target, key=type_)
                        self.edge_counts[type_] -= 1
                self.revision = max(self.revision, c.revision)

    def _drop_edges_of(self, node: str) -> None:
        """Count out the edges `remove_node` takes with it (the change log deletes them first, normally)."""
        for _, _, key in self.graph.in_edges(node, keys=True):
            self.edge_counts[key] -= 1
        for _, target, key in self.graph.out_edges(node, keys=True):
            if target != node:  # a self-loop was counted by in_edges already
                self.edge_counts[key] -= 1

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
    def reading(self) -> Generator[nx.MultiDiGraph[str]]:
        """The graph, current and locked against concurrent changes for the duration of the block."""
        self.sync()
        with self._lock:
            yield self.graph

    def __len__(self) -> int:
        return int(self.graph.number_of_nodes())
