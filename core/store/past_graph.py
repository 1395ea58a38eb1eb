"""The topology at a past revision, for a walk (`View.walk` of `core.store.past.StoredView`).

The walks (`find_paths`, `query_graph`) read the graph index's networkx graph: a node's attributes (type,
visibility, readers) and its adjacency dicts (`_succ`, `_pred`: neighbour -> {edge type: data}). At a past revision
there is no such graph in memory, and building one whole (the graph now, with every change since undone) would
cost the store's size for every call. `PastGraph` answers the same reads from the store's view instead, as a walk
reaches them: a node's adjacency is its edges then (`StoredView.edges_then`: its current edges and the change log
after the revision), read once per node and kept for the call (a breadth-first walk's whole frontier at once,
`expand`); a node's attributes are its state then, read in batches of neighbours. A walk stays bounded by what
it reaches, as over the index (its own work and time bounds hold), and answers what the same walk over the index
would have answered at that revision.

A node's attributes hold, besides its state then (`then`), its state now (`now`; None: deleted since), so
`core.dispatch.access.sees_in_graph` applies the rule for the past (`core.store.view.sees_then`) to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.values.records import Edge

if TYPE_CHECKING:
    from core.store.past import StoredView

__all__ = ["PastGraph", "PastWalk"]

PAGE = 5_000  # nodes per read when a walk lists every node (a pattern variable with neither type nor id)


class _Nodes(Mapping[str, Mapping[str, Any]]):
    """The nodes then, by id: each one's attributes (see the module docstring), read when first asked for."""

    def __init__(self, view: StoredView) -> None:
        self._view = view
        self._known: dict[str, Mapping[str, Any] | None] = {}

    def load(self, ids: Iterable[str]) -> None:
        """Read the states of those of `ids` not read yet, in one go."""
        wanted = [id for id in dict.fromkeys(ids) if id not in self._known]
        for id, (then, now) in self._view.states(wanted).items() if wanted else ():
            self._known[id] = None if then is None else {
                "type": then.type, "visibility": then.visibility, "readers": then.readers, "then": then, "now": now
            }  # fmt: skip

    def __getitem__(self, id: str) -> Mapping[str, Any]:
        found = self.get(id)
        if found is None:
            raise KeyError(id)
        return found

    def get(self, id: str, default: Any = None) -> Any:  # a Mapping's get: one read for an unknown id
        if id not in self._known:
            self.load([id])
        found = self._known[id]
        return default if found is None else found

    def __contains__(self, id: object) -> bool:
        return isinstance(id, str) and self.get(id) is not None

    def __iter__(self) -> Iterator[str]:
        """Every node then, in id order, read a page at a time."""
        after: str | None = None
        while True:
            page, _ = self._view.find_nodes(after=after, limit=PAGE)
            for node in page:
                self._known.setdefault(node.id, None)
                yield node.id
            if len(page) < PAGE:
                return
            after = page[-1].id

    def __len__(self) -> int:
        return self._view.find_nodes(limit=0)[1]


class _Adjacency(Mapping[str, Mapping[str, Mapping[str, Edge]]]):
    """One way of the adjacency then (`out`: networkx's `_succ`; `in`: `_pred`): node -> neighbour -> {edge type:
    the edge}, read from the store the first time a walk steps from that node (both ways at once)."""

    def __init__(self, graph: PastGraph, way: str) -> None:
        self._graph, self._way = graph, way

    def __getitem__(self, id: str) -> Mapping[str, Mapping[str, Edge]]:
        return self._graph.adjacency(id)[self._way]

    def __iter__(self) -> Iterator[str]:
        return iter(self._graph.nodes)

    def __len__(self) -> int:
        return len(self._graph.nodes)


class PastGraph:
    """The part of a networkx `MultiDiGraph`'s interface the walks read, over the topology at a view's revision."""

    def __init__(self, view: StoredView) -> None:
        self._view = view
        self.nodes = _Nodes(view)
        self._adjacent: dict[str, dict[str, dict[str, dict[str, Edge]]]] = {}
        self._succ = _Adjacency(self, "out")
        self._pred = _Adjacency(self, "in")

    def adjacency(self, id: str) -> dict[str, dict[str, dict[str, Edge]]]:
        """The edges at `id` then, both ways, by neighbour and edge type (and the neighbours' states read too)."""
        found = self._adjacent.get(id)
        if found is None:
            self.expand([id])
            found = self._adjacent[id]
        return found

    def expand(self, ids: Iterable[str]) -> None:
        """Read the adjacency of those of `ids` not read yet, and their neighbours' states, in one go: a walk
        about to step from each node of a frontier says so first (what it reads, and so what it answers, is the
        same; only the number of round trips to the store changes)."""
        wanted = [id for id in dict.fromkeys(ids) if id not in self._adjacent]
        if not wanted:
            return
        neighbours: list[str] = []
        for id, edges in self._view.edges_then(wanted).items():
            found: dict[str, dict[str, dict[str, Edge]]] = {"out": {}, "in": {}}
            for edge in edges:
                if edge.source == id:
                    found["out"].setdefault(edge.target, {})[edge.type] = edge
                if edge.target == id:
                    found["in"].setdefault(edge.source, {})[edge.type] = edge
            neighbours += [*found["out"], *found["in"]]
            self._adjacent[id] = found
        self.nodes.load(neighbours)  # the walk asks who it may see next

    def __contains__(self, id: object) -> bool:
        return id in self.nodes

    def number_of_nodes(self) -> int:
        return len(self.nodes)

    def has_edge(self, source: str, target: str, key: str) -> bool:
        return source in self.nodes and key in self.adjacency(source)["out"].get(target, {})

    def out_edges(self, id: str, keys: bool = True) -> list[tuple[str, str, str]]:
        return [(id, t, k) for t, types in self.adjacency(id)["out"].items() for k in types]

    def in_edges(self, id: str, keys: bool = True) -> list[tuple[str, str, str]]:
        return [(s, id, k) for s, types in self.adjacency(id)["in"].items() for k in types]

    def edge_then(self, type: str, source: str, target: str) -> Edge | None:
        """The edge as it was, if the walk has read its source's edges (else None: read it from the view)."""
        found = self._adjacent.get(source)
        return found["out"].get(target, {}).get(type) if found is not None else None


@dataclass(frozen=True)
class PastWalk:
    """`core.store.view.Walk` at a past revision: the `PastGraph` of one call."""

    graph: PastGraph
    revision: int
