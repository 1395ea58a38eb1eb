"""get_changes: the change log as a resumable feed, as the caller may see it (see `core.access.change_for`)."""

from __future__ import annotations

from itertools import islice
from typing import Any

from core.access import change_for, head_visible
from core.dispatch import CallContext
from core.paging import decode_cursor, encode_cursor, page


def get_changes(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    limit = args.get("limit", 100)
    position = decode_cursor("get_changes", args)
    start = args.get("since", 0)
    since = position if position is not None else start
    if ctx.sight is None:
        revision = ctx.store.revision()
        changes = ctx.store.changes(since, limit + 1)
        total = ctx.store.count_changes(start)
        items = [c.to_json() for c in changes[:limit]]
        more = len(changes) > limit
    else:
        with ctx.index.reading() as graph:
            revision = ctx.index.revision

            def visible(since: int) -> Any:
                return (h.revision for h in ctx.store.iter_change_heads(since)
                        if h.revision <= revision and head_visible(ctx.sight, h, graph))  # fmt: skip

            chosen = list(islice(visible(since), limit + 1))
            total = sum(1 for _ in visible(start))
            more = len(chosen) > limit
            found = [change_for(ctx.sight, c, graph) for c in ctx.store.changes_at(chosen[:limit])]
            items = [entry for entry in found if entry is not None]
    cursor = encode_cursor("get_changes", args, items[-1]["revision"]) if more and items else None
    return page(items, total=total, limit=limit, revision=revision, next_cursor=cursor)
