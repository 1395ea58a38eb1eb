"""get_changes: the change log as a resumable feed, as the caller may see it (see `core.dispatch.access.change_for`).

A paged read is a snapshot: the first page fixes the revision it reads up to and counts `total` once (for a
non-admin that count filters the log in SQL, the costly part); both travel in the cursor, so later pages are
as cheap as the first page's rows and agree with it. Changes committed meanwhile come on the next read, from
the last revision seen. `until` (an advanced argument) ends the read at a revision: the change at revision r is
`since: r - 1, until: r` (what the people's pages read for a node's history). A read from before what the log keeps
(`canon store compact`) is `gone`, naming the oldest revision kept.
"""

from __future__ import annotations

from typing import Any

from core.dispatch.access import change_for
from core.dispatch.dispatcher import CallContext, handler
from core.store.retention import check_since
from core.values.errors import FutureRevisionError, InvalidArgumentsError, Problem
from core.values.paging import decode_cursor, encode_cursor, page, refused_cursor

POSITION = {"after": int, "until": int, "total": int}  # the last revision sent, the snapshot's, and its count


@handler("get_changes")
def get_changes(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    limit = args["limit"]
    position: dict[str, int] | None = decode_cursor("get_changes", args, POSITION)
    if position is None:
        after, latest = args["since"], ctx.view.latest()
        until = args.get("until", latest)
        if until > latest:
            raise FutureRevisionError(revision=until, current=latest)
        if "until" in args and until < after:  # a since past the latest, with no until, is an empty page as before
            raise InvalidArgumentsError("get_changes", [Problem("/until", f"before since ({after})")])
        check_since(after, ctx.view.floor())
        total = ctx.view.count_changes(after, sight=ctx.sight, until=until)
    else:
        after, until, total = position["after"], position["until"], position["total"]
        if not after <= until <= ctx.view.latest() or total > until:
            raise refused_cursor("get_changes")
        check_since(after, ctx.view.floor())  # compacted while the caller paged
    changes = ctx.view.feed(after, limit + 1, sight=ctx.sight, until=until)
    more = len(changes) > limit
    changes = changes[:limit]
    cursor = None
    if more:
        cursor = encode_cursor("get_changes", args, {"after": changes[-1].revision, "until": until, "total": total})
    items = [change_for(ctx.sight, c) for c in changes]
    return page(items, total=total, limit=limit, revision=until, next_cursor=cursor)
