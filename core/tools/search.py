"""search: nodes found by words, ranked (the rule and the query's parsing live in `core.search`)."""

from __future__ import annotations

from typing import Any

from core.dispatch import CallContext, handler
from core.paging import decode_cursor, encode_cursor, page
from core.search import parse_query, search


@handler("search")
def search_nodes(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    terms = parse_query("search", args["query"])
    limit = args["limit"]
    start = decode_cursor("search", args, int) or 0
    revision = ctx.index.revision
    result = search(ctx.store, ctx.model, ctx.sight, terms, args.get("types"))
    hits = result.hits[start : start + limit]
    more = start + limit < len(result.hits)
    cursor = encode_cursor("search", args, start + limit) if more else None
    answer = page([h.as_json(ctx.model) for h in hits], total=len(result.hits), limit=limit, revision=revision,
                  next_cursor=cursor, cut=result.cut)  # fmt: skip
    return {**answer, "facets": result.facets}
