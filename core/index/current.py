"""The graph at the current revision: the `core.store.view.View` a handler reads through when it names no `at`.

It answers as fast as the handlers did when they held the store and the index themselves, because it is the same
reads: a record by key from the store, a walk over the graph index's published view (`GraphIndex.reading`, ADR
0017), counts from the index, a ranked search from the store's text index (`core.index.search`), the change log
from the store. Its `revision` is the graph index's (what a sync has applied), read when asked, so a read after
a write of the same call sees the write. `at(revision)` is the store's past view (`Store.view`).

A read here applies no sight unless it takes one: a handler that reads a record by key checks it with
`CallContext.readable`, whose error names the caller.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from core.index.graph import GraphIndex
from core.index.search import Term, ranked
from core.lang.model import Model
from core.store import NodeQuery, Store
from core.store.common import ModelVersion
from core.store.view import DiffPage, DiffPosition, Direction, Step, View, Walk
from core.values.audit import AuditQuery
from core.values.errors import ForbiddenError
from core.values.records import Change, Edge, Node, Sight

__all__ = ["CurrentView"]


@dataclass(frozen=True)
class CurrentView:
    """The current revision of `store`, as `index` has applied it (see the module docstring)."""

    store: Store
    index: GraphIndex

    @property
    def revision(self) -> int:
        return self.index.revision

    @property
    def model(self) -> Model:
        return self.store.model

    def node(self, id: str, *, sight: Sight | None = None) -> Node | None:
        node = self.store.node(id)
        if node is not None and sight is not None and not sight.sees(node.visibility, node.readers):
            raise ForbiddenError("node", id, f"You may not read node {id!r}: it is {node.visibility}.")
        return node

    def nodes(self, ids: Sequence[str], *, sight: Sight | None = None) -> dict[str, Node]:
        found = self.store.nodes(ids)
        if sight is None:
            return found
        return {id: n for id, n in found.items() if sight.sees(n.visibility, n.readers)}

    def find_nodes(
        self, type: str | None = None, *, sight: Sight | None = None, after: str | None = None, limit: int = 50
    ) -> tuple[list[Node], int]:
        return self.store.find_nodes(NodeQuery(type, sight=sight), after=after, limit=limit)

    def named_then(self, kind: str, type: str, properties: Sequence[str] = ()) -> tuple[str, list[str]]:
        return type, list(properties)

    def find(self, query: NodeQuery, *, after: str | None, limit: int) -> tuple[list[Node], int]:
        return self.store.find_nodes(query, after=after, limit=limit)

    def facets(self, query: NodeQuery, names: Sequence[str], *, limit: int) -> dict[str, tuple[dict[str, int], bool]]:
        return self.store.facet_counts(query, names, limit=limit)

    def edges_of(
        self, id: str, direction: Direction = "both", types: Sequence[str] = (), *, sight: Sight | None = None
    ) -> list[Edge]:
        edges = [s.edge for s in self.neighbours(id, direction, types, sight=sight)]
        return sorted(edges, key=lambda e: (e.type, e.source, e.target))

    def neighbours(
        self, id: str, direction: Direction = "both", types: Sequence[str] = (), *, sight: Sight | None = None
    ) -> list[Step]:
        """Depth 1 from the node, read from the graph index's view and then the store (by (neighbour, edge type))."""
        with self.index.reading() as held:
            graph: Any = held.graph  # networkx's adjacency dicts are not in its type stubs
            if id not in graph:
                return []
            refs = [(k, id, t) for t, keys in graph._succ[id].items() for k in keys] if direction != "in" else []
            refs += [(k, s, id) for s, keys in graph._pred[id].items() for k in keys] if direction != "out" else []
        refs = [r for r in refs if not types or r[0] in types]
        ends = self.nodes(sorted({r[2] if r[1] == id else r[1] for r in refs}), sight=sight)
        stored = self.store.edges(refs)
        steps = [Step(stored[r], ends[r[2] if r[1] == id else r[1]]) for r in refs
                 if r in stored and (r[2] if r[1] == id else r[1]) in ends]  # fmt: skip
        return sorted(steps, key=lambda s: (s.node.id, s.edge.type, s.edge.source))

    def changes(self, limit: int, *, sight: Sight | None = None) -> list[Change]:
        return self.store.changes(self.revision, limit, sight=sight)

    def edge(self, type: str, source: str, target: str) -> Edge | None:
        return self.store.edge(type, source, target)

    def edges(self, refs: Sequence[tuple[str, str, str]]) -> dict[tuple[str, str, str], Edge]:
        return self.store.edges(refs)

    def walk(self) -> AbstractContextManager[Walk]:
        return self.index.reading()

    def counts(self, sight: Sight | None) -> tuple[int, Counter[str], Counter[str]]:
        with self.index.settled() as revision:
            nodes, edges = self.index.visible_counts(sight)
        return revision, nodes, edges

    def search(self, model: Model, sight: Sight | None, terms: Sequence[Term], types: Sequence[str] | None,
               revision: int, *, compute: bool = True) -> Any:  # fmt: skip
        def visible() -> Counter[str]:
            with self.index.settled():
                return self.index.visible_counts(sight)[0]

        return ranked(self.store, model, sight, terms, types, revision, compute=compute, visible=visible)

    def latest(self) -> int:
        return self.store.revision()

    def floor(self) -> int:
        return self.store.changes_floor()

    def feed(self, since: int, limit: int, *, sight: Sight | None = None, until: int | None = None) -> list[Change]:
        return self.store.changes(since, limit, sight=sight, until=until)

    def count_changes(self, since: int, *, sight: Sight | None = None, until: int | None = None) -> int:
        return self.store.count_changes(since, sight=sight, until=until)

    def diff(self, since: int, until: int | None = None, *, types: Sequence[str] | None = None,
             ids: Sequence[str] | None = None, sight: Sight | None = None, limit: int = 100,
             after: DiffPosition | None = None) -> DiffPage:  # fmt: skip
        return self.store.diff_revisions(since, until, types=types, ids=ids, sight=sight, limit=limit, after=after)

    def at(self, revision: int) -> View:
        return self.store.view(revision)

    def model_at(self, revision: int) -> Model:
        return self.store.model_at(revision)

    def model_history(self) -> list[ModelVersion]:
        return self.store.model_history()

    def audit(self, query: AuditQuery, *, before: int | None, limit: int) -> tuple[list[dict[str, Any]], int]:
        return self.store.audit_records(query, before=before, limit=limit)
