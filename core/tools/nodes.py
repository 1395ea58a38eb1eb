"""get_node and find_nodes: reads of node records by id and by query."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any

from core.dispatch.access import sees
from core.dispatch.dispatcher import CallContext, handler
from core.lang.conditions import FACET_VALUES, parse_facets, parse_where
from core.lang.ordering import Sort, parse_order
from core.store import NodeQuery
from core.values.errors import InvalidArgumentsError, NotFoundError, Problem
from core.values.paging import decode_cursor, encode_cursor, page, refused_cursor
from core.values.records import Node


def not_at_a_past_revision(
    tool: str, args: dict[str, Any], names: tuple[str, ...], *, pins: tuple[str, ...] = ("at", "proposal")
) -> None:
    """Refuse the arguments among `names` that `tool` does not take together with `at` (a read at a past revision,
    `Store.view`, answers fewer questions than the current graph index: `core.store.view.current_only`) or with
    `proposal` (a read at a proposal, `core.dispatch.proposal_view`, answers the same as a read of the past)."""
    given = [name for name in names if name in args]
    for pinned, what in (("at", "at (a read at a past revision)"), ("proposal", "proposal (a read at a proposal)")):
        if pinned in pins and pinned in args and given:
            raise InvalidArgumentsError(tool, [Problem(f"/{name}", f"not supported with {what}") for name in given])


def pinned(args: dict[str, Any]) -> bool:
    """Whether the call reads another view than the current one: a past revision (`at`) or a proposal."""
    return "at" in args or "proposal" in args


@handler("get_node")
def get_node(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    view = ctx.view  # at the revision `at` names, at the proposal `proposal` names, or the current one
    if pinned(args):
        node = view.node(args["id"], sight=ctx.sight)  # the rule for the past (`core.store.view.sees_then`)
        if node is None:
            raise NotFoundError("node", args["id"])
        return {"node": node.to_json(), "revision": view.revision}
    revision = view.revision
    node = view.node(args["id"])
    if node is None:
        raise NotFoundError("node", args["id"])
    return {"node": ctx.readable(node).to_json(), "revision": revision}


def text_fields(ctx: CallContext) -> dict[str, tuple[str, ...]]:
    return {name: t.text for name, t in ctx.model.node_types.items()}


@handler("find_nodes")
def find_nodes(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    not_at_a_past_revision("find_nodes", args, ("facets", "order_by"))
    if "proposal" in args:
        not_at_a_past_revision("find_nodes", args, ("where", "text"), pins=("proposal",))
        return _find_nodes_at_a_proposal(ctx, args)
    node_type = ctx.model.node_types.get(args["type"]) if "type" in args else None
    conditions = parse_where(args.get("where", {}), node_type, tool="find_nodes")
    faceted = parse_facets(args.get("facets", ()), node_type, ctx.model, tool="find_nodes")
    order = parse_order(args.get("order_by", ()), node_type, ctx.model, tool="find_nodes")
    query = NodeQuery(args.get("type"), conditions, args.get("text"), text_fields(ctx), sight=ctx.sight, order=order)
    if "at" in args:
        query = query_then(ctx, query)
    limit = args["limit"]
    paged = {k: v for k, v in args.items() if k != "facets"}  # facets change no page: a cursor holds with or without
    after = decode_cursor("find_nodes", paged, ORDERED if order else str)
    if order and after is not None:
        after, query = _sorted_position(ctx, query, after)
    revision = ctx.view.revision
    nodes, total = ctx.view.find(query, after=after, limit=limit + 1)
    more = len(nodes) > limit
    nodes = nodes[:limit]
    cursor = (
        encode_cursor("find_nodes", paged, _position(order, nodes[-1]) if order else nodes[-1].id) if more else None
    )
    answer = page([n.to_json() for n in nodes], total=total, limit=limit, revision=revision, next_cursor=cursor)
    if "facets" in args:  # counted over every match (what `total` counts), not this page
        counted = ctx.view.facets(query, faceted, limit=FACET_VALUES)
        answer["facets"] = {name: counts for name, (counts, _) in counted.items()}
        answer["facets_cut"] = [name for name, (_, cut) in counted.items() if cut]
    return answer


ORDERED = {"after": str, "sorted": str}  # a sorted page's end: the last node's id and a digest of its sort values


def _position(order: tuple[Sort, ...], node: Node) -> dict[str, str]:
    return {"after": node.id, "sorted": _digest([o.value(node.properties) for o in order])}


def _digest(values: list[Any]) -> str:
    return hashlib.sha256(json.dumps(values, separators=(",", ":")).encode()).hexdigest()[:16]


def _sorted_position(ctx: CallContext, query: NodeQuery, after: Any) -> tuple[str, NodeQuery]:
    """A sorted page starts strictly after the node the previous page ended at, by that node's sort values (a
    keyset position: `core.lang.ordering`), read now. A cursor that is an id alone (from an unsorted call), or
    whose node is gone, hidden from the caller or holds other sort values since, names no position: start again."""
    if not isinstance(after, dict):
        raise refused_cursor("find_nodes")
    node = ctx.view.node(after["after"])
    values = [o.value(node.properties) for o in query.order] if node is not None else []
    if node is None or not sees(ctx.sight, node) or _digest(values) != after["sorted"]:
        raise refused_cursor("find_nodes", "the node this cursor's page ended at has changed or is gone since; "
                             "start again without the cursor")  # fmt: skip
    return node.id, replace(query, position=tuple(values))


def _find_nodes_at_a_proposal(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    """find_nodes at a proposal: by type, paged, from the proposal's view (`core.dispatch.proposal_view`)."""
    view = ctx.view
    limit = args["limit"]
    after = decode_cursor("find_nodes", args, str)
    nodes, total = view.find_nodes(args.get("type"), sight=ctx.sight, after=after, limit=limit + 1)
    more = len(nodes) > limit
    nodes = nodes[:limit]
    cursor = encode_cursor("find_nodes", args, nodes[-1].id) if more else None
    return page([n.to_json() for n in nodes], total=total, limit=limit, revision=view.revision, next_cursor=cursor)


def query_then(ctx: CallContext, query: NodeQuery) -> NodeQuery:
    """`query`, read from a tool's arguments in the names of the model now (which validated them), in the names
    of the model at the view's revision, with that model's text properties: what a find at a past revision asks
    (`View.find`). The same conditions: only their properties' names change, where a model change renamed them."""
    view = ctx.view
    conditions = query.conditions
    type_then = query.type
    if query.type is not None:
        type_then, names = view.named_then("node type", query.type, [c.property for c in conditions])
        conditions = tuple(replace(c, property=n) for c, n in zip(conditions, names, strict=True))
    fields = {name: t.text for name, t in view.model.node_types.items()}
    return replace(query, type=type_then, conditions=conditions, text_fields=fields)
