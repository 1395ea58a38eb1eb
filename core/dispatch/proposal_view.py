"""The graph as it would be if an open proposal were merged: a `View` over the current revision plus the proposal's
pending operations, what `get_node`, `find_nodes` and `get_neighbors` read with `proposal` (issue 29, item 2).

The operations are planned on the current revision by the one write path's dry run (`Store.commit(dry_run=True)`),
as a merge would apply them now; a proposal that no longer applies, or is no longer open, is refused with a
`ValidationError` that says why. The view answers what a read of the past answers (a node, a type's nodes by id,
one hop of neighbours) and refuses the rest (`current_only`'s error, naming "a proposal").

What a caller sees follows the one rule for a state other than the current one (`core.store.view.sees_then`): a
node as proposed is shown only to a caller who may read it both as proposed and as it is now (a node the proposal
creates: as proposed), so a proposal can never show a caller what it may not read today, nor what the proposal
would hide from it. An edge is shown when both its ends are.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from core.dispatch.proposals import Proposal
from core.lang.model import Model
from core.store import Store
from core.store.view import DiffPage, DiffPosition, Direction, Step, View, Walk, sees_then
from core.values.audit import AuditQuery
from core.values.errors import CanonError, ForbiddenError, Problem, ValidationError
from core.values.operations import operations_of
from core.values.records import Change, Edge, Node, Sight

if TYPE_CHECKING:
    from core.store import NodeQuery
    from core.store.common import ModelVersion

__all__ = ["ProposalView", "at_a_proposal"]

EdgeRef = tuple[str, str, str]  # (type, source, target)
PAGE = 10_000  # the current view's nodes of a type are read in pages of this many


def at_a_proposal(what: str) -> ValidationError:
    """The error for what a read at a proposal does not answer (`what`: e.g. "a ranked search")."""
    problem = Problem("/proposal", f"{what} is not supported with proposal (a read at a proposal)")
    return ValidationError(f"{what.capitalize()} reads the graph at a revision, not at a proposal.", [problem])


class ProposalView:
    """The current view `base` with proposal `p`'s writes applied (see the module docstring)."""

    def __init__(self, store: Store, base: View, p: Proposal) -> None:
        if p.state != "open":
            where = f" at its merge revision (at: {p.merge_revision})" if p.merge_revision is not None else ""
            raise ValidationError(f"Proposal {p.id!r} is {p.state}: read the graph{where} instead.",
                                  [Problem("/proposal", f"proposal {p.id!r} is {p.state}, not open")])  # fmt: skip
        try:
            planned = store.commit(operations_of(p.operations), principal=p.author, dry_run=True).planned
        except CanonError as exc:
            problem = Problem("/proposal", "the proposal no longer applies")
            raise ValidationError(f"Proposal {p.id!r} no longer applies to the current revision; get_proposal says "
                                  "why.", [problem]) from exc  # fmt: skip
        self.base, self.proposal = base, p
        self._revision = base.revision
        self._nodes: dict[str, Node | None] = {}
        self._edges: dict[EdgeRef, Edge | None] = {}
        for w in planned:
            if w.kind == "node":
                self._nodes[w.key] = w.after if isinstance(w.after, Node) else None
            else:
                record = w.after if isinstance(w.after, Edge) else w.before
                assert isinstance(record, Edge)
                self._edges[(record.type, record.source, record.target)] = (
                    w.after if isinstance(w.after, Edge) else None
                )

    @property
    def revision(self) -> int:
        return self._revision

    @property
    def model(self) -> Model:
        return self.base.model

    # -- nodes ---------------------------------------------------------------------------------------------------------
    def _node(self, id: str, sight: Sight | None) -> tuple[Node | None, bool]:
        """(the node as proposed, whether `sight` may see it)."""
        now = self.base.node(id)  # as stored now, whoever may read it (decided below)
        proposed = self._nodes.get(id, now)
        if proposed is None:
            return None, True
        return proposed, sees_then(sight, proposed, now)

    def node(self, id: str, *, sight: Sight | None = None) -> Node | None:
        proposed, visible = self._node(id, sight)
        if proposed is not None and not visible:
            raise ForbiddenError("node", id, f"You may not read node {id!r} as the proposal would leave it.")
        return proposed

    def nodes(self, ids: Sequence[str], *, sight: Sight | None = None) -> dict[str, Node]:
        found: dict[str, Node] = {}
        for id in ids:
            proposed, visible = self._node(id, sight)
            if proposed is not None and visible:
                found[id] = proposed
        return found

    def find_nodes(
        self, type: str | None = None, *, sight: Sight | None = None, after: str | None = None, limit: int = 50
    ) -> tuple[list[Node], int]:
        ids: set[str] = set()
        cursor: str | None = None
        while True:  # every node of the type now (the caller's sight is applied below, to each as proposed)
            page, _ = self.base.find_nodes(type, after=cursor, limit=PAGE)
            ids.update(n.id for n in page)
            if len(page) < PAGE:
                break
            cursor = page[-1].id
        ids.update(id for id, n in self._nodes.items() if n is not None and (type is None or n.type == type))
        shown = [n for n in self.nodes(sorted(ids), sight=sight).values() if type is None or n.type == type]
        total = len(shown)
        if after is not None:
            shown = [n for n in shown if n.id > after]
        return shown[:limit], total

    # -- edges ---------------------------------------------------------------------------------------------------------
    def neighbours(
        self, id: str, direction: Direction = "both", types: Sequence[str] = (), *, sight: Sight | None = None
    ) -> list[Step]:
        if not self.nodes([id], sight=sight):  # absent as proposed (or hidden): no neighbours to show
            return []
        edges: dict[EdgeRef, Edge | None] = {_ref(s.edge): s.edge for s in self.base.neighbours(id, direction, types)}
        for ref, edge in self._edges.items():
            here = (direction != "in" and ref[1] == id) or (direction != "out" and ref[2] == id)
            if here and (not types or ref[0] in types):
                edges[ref] = edge  # None: deleted by the proposal
        kept = {ref: edge for ref, edge in edges.items() if edge is not None}
        ends = self.nodes(sorted({_other(ref, id) for ref in kept}), sight=sight)
        steps = [Step(edge, ends[_other(ref, id)]) for ref, edge in kept.items() if _other(ref, id) in ends]
        return sorted(steps, key=lambda s: (s.node.id, s.edge.type))

    def edges_of(
        self, id: str, direction: Direction = "both", types: Sequence[str] = (), *, sight: Sight | None = None
    ) -> list[Edge]:
        edges = [s.edge for s in self.neighbours(id, direction, types, sight=sight)]
        return sorted(edges, key=lambda e: (e.type, e.source, e.target))

    # -- what a read at a proposal does not answer -----------------------------------------------------------------
    def changes(self, limit: int, *, sight: Sight | None = None) -> list[Change]:
        raise at_a_proposal("the change log")

    def find(self, query: NodeQuery, *, after: str | None, limit: int) -> tuple[list[Node], int]:
        raise at_a_proposal("a query with conditions or text")

    def facets(self, query: NodeQuery, names: Sequence[str], *, limit: int) -> dict[str, tuple[dict[str, int], bool]]:
        raise at_a_proposal("facets")

    def edge(self, type: str, source: str, target: str) -> Edge | None:
        raise at_a_proposal("an edge by its key")

    def edges(self, refs: Sequence[tuple[str, str, str]]) -> dict[tuple[str, str, str], Edge]:
        raise at_a_proposal("edges by their keys")

    def walk(self) -> AbstractContextManager[Walk]:
        raise at_a_proposal("a walk over the graph")

    def counts(self, sight: Sight | None) -> tuple[int, Counter[str], Counter[str]]:
        raise at_a_proposal("counting the graph")

    def search(self, model: Model, sight: Sight | None, terms: Sequence[Any], types: Sequence[str] | None,
               revision: int, *, compute: bool = True) -> Any:  # fmt: skip
        raise at_a_proposal("a ranked search")

    def latest(self) -> int:
        return self.base.latest()

    def floor(self) -> int:
        return self.base.floor()

    def feed(self, since: int, limit: int, *, sight: Sight | None = None, until: int | None = None) -> list[Change]:
        raise at_a_proposal("the change log")

    def count_changes(self, since: int, *, sight: Sight | None = None, until: int | None = None) -> int:
        raise at_a_proposal("the change log")

    def diff(self, since: int, until: int | None = None, *, types: Sequence[str] | None = None,
             ids: Sequence[str] | None = None, sight: Sight | None = None, limit: int = 100,
             after: DiffPosition | None = None) -> DiffPage:  # fmt: skip
        raise at_a_proposal("a diff of revisions")

    def at(self, revision: int) -> View:
        return self.base.at(revision)

    def model_at(self, revision: int) -> Model:
        return self.base.model_at(revision)

    def model_history(self) -> list[ModelVersion]:
        return self.base.model_history()

    def audit(self, query: AuditQuery, *, before: int | None, limit: int) -> tuple[list[dict[str, Any]], int]:
        raise at_a_proposal("the audit log")


def _ref(edge: Edge) -> EdgeRef:
    return edge.type, edge.source, edge.target


def _other(ref: EdgeRef, id: str) -> str:
    """The end of the edge `ref` that is not `id` (a loop: `id`)."""
    return ref[2] if ref[1] == id else ref[1]
