"""Authorisation, decided here and nowhere else.

Two questions, asked on the one dispatch path so every surface gets the same answers:

* **May this principal call this tool?** A tool definition names the permission it needs (`read`, `write`,
  `admin`); a principal's roles grant permissions (`core.values.principal.ROLES`). A tool the caller lacks is hidden
  from its tools/list and refused with `ForbiddenError` if called anyway.
* **May this principal see this record?** `public` nodes: everyone, the anonymous HTTP caller included.
  `internal`: every authenticated principal. `restricted`: principals named in the node's `readers`
  (`user:NAME`), members of a group named there (`group:NAME`), and admins. An edge is visible when both
  its ends are. Every read path filters with the caller's `Sight`: SQL queries, index walks, the change
  feed and its events (`sees_change`), resources, completions and subscriptions. Reading one record the
  caller may not see by id is a `ForbiddenError`; in lists, searches and counts it simply does not exist for
  that caller.
* **May this principal see a record as it was?** A past state (`core.store.view.View`, `Store.diff_revisions`) only
  if it may see the record both in that state and now (`sees_then`): making a record restricted hides its
  history from those who lose access, and a record deleted since stays visible at past revisions to those who
  could read it then. An edge as it was: when both its ends, as they were then, are (`sees_edge_then`). The
  rule is written beside the view (`core.store.view`), below the store that applies it, and is this module's.

Writes are checked inside the write transaction (`write_guard`): a caller may change only records it can
see, and edges only between nodes it can see.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from core.dispatch.registry import ToolDefinition
from core.lang.validation import StateView
from core.store.view import sees_edge_then, sees_then
from core.values.errors import ForbiddenError
from core.values.operations import DeleteNode, Operation, PatchNode, PutEdge, PutNode
from core.values.principal import Principal
from core.values.records import Change, Node, Sight

if TYPE_CHECKING:  # only annotations: the graph index imports networkx on first use (core.index.graph)
    import networkx as nx

    from core.store.past_graph import PastGraph

__all__ = [
    "WriteGuard",
    "change_for",
    "may_call",
    "require_node",
    "require_tool",
    "sees",
    "sees_change",
    "sees_edge_then",
    "sees_in_graph",
    "sees_then",
    "sight_of",
    "write_guard",
]

WriteGuard = Callable[[StateView, Sequence[Operation]], None]
_PUBLIC = Sight(frozenset({"public"}))


def may_call(principal: Principal, tool: ToolDefinition) -> bool:
    return tool.permission in principal.permissions


def require_tool(principal: Principal, tool: ToolDefinition) -> None:
    if not may_call(principal, tool):
        roles = ", ".join(sorted(principal.roles)) or "none"
        needed = {"read": "reader", "write": "writer", "admin": "admin"}[tool.permission]
        message = f"{principal.name} (roles: {roles}) may not call {tool.name}: it needs the {needed} role."
        raise ForbiddenError("tool", tool.name, message)


def sight_of(principal: Principal) -> Sight | None:
    """What `principal` may see; None when it sees everything (admins)."""
    if not principal.authenticated:
        return _PUBLIC
    if "admin" in principal.roles:
        return None
    return Sight(frozenset({"public", "internal"}), principal.reader_tags)


def sees(sight: Sight | None, node: Node) -> bool:
    return sight is None or sight.sees(node.visibility, node.readers)


def require_node(sight: Sight | None, principal: Principal, node: Node) -> None:
    if not sees(sight, node):
        message = f"{principal.name} may not read node {node.id!r}: it is {node.visibility}."
        raise ForbiddenError("node", node.id, message)


def sees_in_graph(sight: Sight | None, graph: nx.MultiDiGraph[str] | PastGraph, id: str) -> bool:
    """Whether the index node `id` is visible (absent nodes are not). In the topology at a past revision
    (`core.store.past_graph`), a node's attributes hold its state then and now, and the rule is the past's
    (`sees_then`)."""
    if sight is None:
        return id in graph
    attributes: Mapping[str, Any] | None = graph.nodes.get(id)
    if attributes is None:
        return False
    if "then" in attributes:
        return sees_then(sight, attributes["then"], attributes["now"])
    return sight.sees(attributes["visibility"], attributes["readers"])


def sees_change(sight: Sight | None, change: Change, graph: nx.MultiDiGraph[str]) -> bool:
    """Whether a caller may see something of `change`: the rule for every change event and entry.

    A model change: always. A node change: its state before or after is visible (`change_for` hides the other
    one). An edge change: both its ends are visible now, by `graph` (the index). `Store.changes` applies the
    same rule in its query (`core.store.sql.change_filter`); a test holds the two to agreement.
    """
    if sight is None or change.kind == "model":
        return True
    if change.kind == "node":
        return any(state is not None and sight.sees(str(state["visibility"]), list(state.get("readers", ())))
                   for state in (change.before, change.after))  # fmt: skip
    state = change.before or change.after or {}
    ends = state.get("source"), state.get("target")
    return all(isinstance(end, str) and sees_in_graph(sight, graph, end) for end in ends)


def change_for(sight: Sight | None, change: Change) -> dict[str, Any]:
    """A change log entry, as a caller the store selected it for may see it.

    The store selects the entries (`Store.changes` with the caller's sight): node changes whose state before
    or after the caller may see, edge changes whose ends it may see now, model changes. Here each node state
    it may not see becomes null and the entry says `redacted`: a node that became restricted reads as leaving
    the caller's view, without its new content.
    """
    entry = change.to_json()
    if sight is None or change.kind != "node":
        return entry
    for side in ("before", "after"):
        state: Mapping[str, Any] | None = entry[side]
        if state is not None and not sight.sees(str(state["visibility"]), list(state.get("readers", ()))):
            entry[side] = None
            entry["redacted"] = True
    return entry


def _require_visible_neighbours(view: StateView, sight: Sight, principal: Principal, id: str) -> None:
    """A node with edges to nodes the caller may not see cannot be deleted by it: a cascade would delete those
    edges, and a refusal would list them. The error names neither the edges nor the hidden nodes."""
    for edge in view.incident_edges(id):
        other = edge.target if edge.source == id else edge.source
        node = view.node(other)
        if node is not None and not sees(sight, node):
            raise ForbiddenError(
                "node", id, f"{principal.name} may not delete node {id!r}: it has edges to nodes you may not see; "
                "ask someone who can see them (an admin) to delete it.",
            )  # fmt: skip


def write_guard(principal: Principal) -> WriteGuard | None:
    """The check a commit runs inside its transaction: the caller may touch only what it may see."""
    sight = sight_of(principal)
    if sight is None:
        return None
    seen: Sight = sight

    def guard(view: StateView, operations: Sequence[Operation]) -> None:
        for op in operations:
            if isinstance(op, PutNode | PatchNode | DeleteNode):
                id_ = op.node.id if isinstance(op, PutNode) else op.id
                current = view.node(id_)
                if current is not None:
                    require_node(seen, principal, current)
                if isinstance(op, DeleteNode) and current is not None:
                    _require_visible_neighbours(view, seen, principal, id_)
            else:
                ref = (op.edge.type, op.edge.source, op.edge.target) if isinstance(op, PutEdge) else (
                    op.type, op.source, op.target)  # fmt: skip
                for end in ref[1:]:
                    node = view.node(end)
                    if node is not None and not sees(seen, node):
                        raise ForbiddenError(
                            "edge", f"{ref[0]}:{ref[1]}->{ref[2]}",
                            f"{principal.name} may not change edges of node {end!r}: it is {node.visibility}.",
                        )  # fmt: skip

    return guard
