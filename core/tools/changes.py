"""get_changes: the change log as a resumable feed."""

from __future__ import annotations

from typing import Any

from core.dispatch import CallContext
from core.paging import decode_cursor, encode_cursor, page


def get_changes(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    limit = args.get("limit", 100)
    position = decode_cursor("get_changes", args)
    since = position if position is not None else args.get("since", 0)
    revision = ctx.store.revision()
    changes = ctx.store.changes(since, limit + 1)
    more = len(changes) > limit
    changes = changes[:limit]
    total = ctx.store.count_changes(args.get("since", 0))
    cursor = encode_cursor("get_changes", args, changes[-1].revision) if more else None
    return page([c.to_json() for c in changes], total=total, limit=limit, revision=revision, next_cursor=cursor)
