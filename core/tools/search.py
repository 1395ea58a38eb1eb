"""search: nodes found by words, ranked (the rule and the query's parsing live in `core.index.search`).

The hits per type (`facets`) are counted when asked (`facets: true`): a page of hits stays short by default.

A page's cursor holds where the next page starts and the revision its ranking was made at. The next page reads
that ranking (`core.index.search.ranked` keeps it), so the pages of one search are one ranking at one revision, each
as cheap as a slice; once the store has moved on and the ranking is no longer kept, the cursor is refused (start
the search again) rather than answering pages of two rankings.
"""

from __future__ import annotations

from typing import Any

from core.dispatch.dispatcher import CallContext, handler
from core.index.search import SearchResult, parse_query
from core.values.paging import decode_cursor, encode_cursor, page, refused_cursor


@handler("search")
def search_nodes(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    terms = parse_query("search", args["query"])
    limit = args["limit"]
    paged = {k: v for k, v in args.items() if k != "facets"}  # facets change no page: a cursor holds either way
    position = decode_cursor("search", paged, {"s": int, "r": int})  # start, revision: short, as pages are
    now = ctx.view.revision
    start, revision = (0, now) if position is None else (position["s"], position["r"])
    current = revision == now
    if revision > now:
        raise refused_cursor("search")
    result: SearchResult | None = ctx.view.search(ctx.model, ctx.sight, terms, args.get("types"), revision,
                                                  compute=current)  # fmt: skip
    if result is None:
        raise refused_cursor("search", f"the store has changed since this search (revision {revision}, now "
                                       f"{now}); search again without the cursor")  # fmt: skip
    hits = result.hits[start : start + limit]
    more = start + limit < len(result.hits)
    cursor = encode_cursor("search", paged, {"s": start + limit, "r": revision}) if more else None
    answer = page([h.as_json(ctx.model) for h in hits], total=len(result.hits), limit=limit, revision=revision,
                  next_cursor=cursor, cut=result.cut)  # fmt: skip
    return {**answer, "facets": result.facets} if args.get("facets") else answer
