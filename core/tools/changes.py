"""get_changes: the change log as a resumable feed, as the caller may see it (see `core.access.change_for`)."""

from __future__ import annotations

from typing import Any

from core.access import change_for
from core.dispatch import CallContext
from core.paging import decode_cursor, encode_cursor, page


def get_changes(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    limit = args.get("limit", 100)
    position = decode_cursor("get_changes", args)
    start = args.get("since", 0)
    since = position if position is not None else start
    revision = ctx.store.revision()
    changes = ctx.store.changes(since, limit + 1, sight=ctx.sight, until=revision)
    more = len(changes) > limit
    changes = changes[:limit]
    total = ctx.store.count_changes(start, sight=ctx.sight, until=revision)
    cursor = encode_cursor("get_changes", args, changes[-1].revision) if more else None
    items = [change_for(ctx.sight, c) for c in changes]
    return page(items, total=total, limit=limit, revision=revision, next_cursor=cursor)
