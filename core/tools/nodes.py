"""get_node and find_nodes: reads of node records by id and by query."""

from __future__ import annotations

from typing import Any

from core.dispatch.dispatcher import CallContext, handler
from core.lang.conditions import FACET_VALUES, parse_facets, parse_where
from core.store import NodeQuery
from core.values.errors import InvalidArgumentsError, NotFoundError, Problem
from core.values.paging import decode_cursor, encode_cursor, page


def not_at_a_past_revision(tool: str, args: dict[str, Any], names: tuple[str, ...]) -> None:
    """Refuse the arguments among `names` that `tool` does not take together with `at` (a read at a past revision,
    `Store.view`, answers fewer questions than the current graph index: `core.store.view.current_only`) or with
    `proposal` (a read at a proposal, `core.dispatch.proposal_view`, answers the same as a read of the past)."""
    given = [name for name in names if name in args]
    for pinned, what in (("at", "at (a read at a past revision)"), ("proposal", "proposal (a read at a proposal)")):
        if pinned in args and given:
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
    not_at_a_past_revision("find_nodes", args, ("where", "text", "facets"))
    if pinned(args):
        return _find_nodes_then(ctx, args)
    node_type = ctx.model.node_types.get(args["type"]) if "type" in args else None
    conditions = parse_where(args.get("where", {}), node_type, tool="find_nodes")
    faceted = parse_facets(args.get("facets", ()), node_type, ctx.model, tool="find_nodes")
    query = NodeQuery(args.get("type"), conditions, args.get("text"), text_fields(ctx), sight=ctx.sight)
    limit = args["limit"]
    paged = {k: v for k, v in args.items() if k != "facets"}  # facets change no page: a cursor holds with or without
    after = decode_cursor("find_nodes", paged, str)
    revision = ctx.view.revision
    nodes, total = ctx.view.find(query, after=after, limit=limit + 1)
    more = len(nodes) > limit
    nodes = nodes[:limit]
    cursor = encode_cursor("find_nodes", paged, nodes[-1].id) if more else None
    answer = page([n.to_json() for n in nodes], total=total, limit=limit, revision=revision, next_cursor=cursor)
    if "facets" in args:  # counted over every match (what `total` counts), not this page
        counted = ctx.view.facets(query, faceted, limit=FACET_VALUES)
        answer["facets"] = {name: counts for name, (counts, _) in counted.items()}
        answer["facets_cut"] = [name for name, (_, cut) in counted.items() if cut]
    return answer


def _find_nodes_then(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    """find_nodes at a past revision: by type, paged, from the store's view then (`Store.view`)."""
    view = ctx.view
    limit = args["limit"]
    after = decode_cursor("find_nodes", args, str)
    nodes, total = view.find_nodes(args.get("type"), sight=ctx.sight, after=after, limit=limit + 1)
    more = len(nodes) > limit
    nodes = nodes[:limit]
    cursor = encode_cursor("find_nodes", args, nodes[-1].id) if more else None
    return page([n.to_json() for n in nodes], total=total, limit=limit, revision=view.revision, next_cursor=cursor)
