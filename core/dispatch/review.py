"""Which writes wait for review: the policy of issue 29's "agents propose, people approve".

A node or edge type is *reviewed* when the model marks it (`"review": "required"` in its `x-canon-node` or
`x-canon-edge`) or `[proposals] review_types` names it. A write touches a type when it creates, replaces, patches or
deletes a node of it (the type before and after), writes or deletes an edge of it, or deletes a node whose cascade
deletes such an edge. A principal `ReviewPolicy.direct` names (default: the admin role) writes reviewed types
directly; for anyone else, a write that touches one is refused inside its transaction (`ReviewRequiredError`, before
anything is written), and the write tools answer it with a proposal of the same operations (`core.tools.writes`).

Held in the commit every handler writes through (`core.dispatch.dispatcher.StoreCommit`), so no write tool, and
no plugin tool, writes a reviewed type around it. Merging a proposal is the approved path and is not held back;
nor are the operator's paths (`canon import`, `apply_model`, `canon model apply`), which do not go through a
handler's commit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from core.lang.model import Model
from core.lang.validation import StateView
from core.values.errors import ReviewRequiredError
from core.values.operations import DeleteNode, Operation, PatchNode, PutEdge, PutNode
from core.values.principal import Principal, ReviewPolicy

__all__ = ["review_guard", "reviewed_types", "touched_types"]

Guard = Callable[[StateView, Sequence[Operation]], None]


def reviewed_types(policy: ReviewPolicy, model: Model) -> frozenset[str]:
    """The types whose writes wait for review under `model`: those it marks, and those `policy` names."""
    return model.reviewed_types | policy.types


def touched_types(view: StateView, operations: Sequence[Operation]) -> set[str]:
    """The node and edge types `operations` would write, read on `view` (inside the write's transaction)."""
    found: set[str] = set()
    for op in operations:
        if isinstance(op, PutEdge):
            found.add(op.edge.type)
        elif isinstance(op, PutNode | PatchNode | DeleteNode):
            id_ = op.node.id if isinstance(op, PutNode) else op.id
            if isinstance(op, PutNode):
                found.add(op.node.type)
            current = view.node_type(id_)
            if current is not None:
                found.add(current)
            if isinstance(op, DeleteNode) and op.cascade and current is not None:
                found.update(e.type for e in view.incident_edges(id_))
        else:
            found.add(op.type)
    return found


def review_guard(policy: ReviewPolicy, model: Model, principal: Principal, inner: Guard | None) -> Guard | None:
    """`inner` (the principal's write guard), then: refuse a write touching a reviewed type, unless `principal`
    writes them directly. None when nothing is to be checked."""
    reviewed = reviewed_types(policy, model)
    if not reviewed or policy.direct(principal):
        return inner

    def guard(view: StateView, operations: Sequence[Operation]) -> None:
        if inner is not None:
            inner(view, operations)
        touched = sorted(touched_types(view, operations) & reviewed)
        if touched:
            raise ReviewRequiredError(principal.name, touched)

    return guard
