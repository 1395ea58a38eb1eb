"""diff_revisions: what changed between two revisions (`Store.diff_revisions`, `core.store.view`), as the caller may
see.

A paged read is pinned to the later revision and counts `total` once, on its first page; both travel in the
cursor (as get_changes does), with the position `core.store.view.DiffPosition` where the next page starts, so every
page compares the same two revisions whatever is committed meanwhile.
"""

from __future__ import annotations

from typing import Any

from core.dispatch.dispatcher import CallContext, handler
from core.store.view import DiffPosition
from core.values.errors import FutureRevisionError, InvalidArgumentsError, Problem
from core.values.paging import decode_cursor, encode_cursor, page, refused_cursor

PAGE = 500  # entries per store read while counting a first page's total
AT_NODE = {"to": int, "total": int, "node": str}  # a cursor's position: after this node
AT_EDGE = {"to": int, "total": int, "source": str, "target": str, "type": str}  # after this edge


def _position(cursor: dict[str, Any]) -> DiffPosition:
    if "node" in cursor:
        return ("node", cursor["node"])
    return ("edge", cursor["source"], cursor["target"], cursor["type"])


def _cursor(position: DiffPosition, until: int, total: int) -> dict[str, Any]:
    if position[0] == "node":
        return {"to": until, "total": total, "node": position[1]}
    _, source, target, type_ = position
    return {"to": until, "total": total, "source": source, "target": target, "type": type_}


@handler("diff_revisions")
def diff_revisions(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    since, limit = args["from"], args["limit"]
    types, ids = args.get("types") or None, args.get("ids") or None
    cursor: dict[str, Any] | None = decode_cursor("diff_revisions", args, AT_NODE, AT_EDGE)
    if cursor is not None:
        until, total, after = cursor["to"], cursor["total"], _position(cursor)
        if not since <= until <= ctx.view.latest():
            raise refused_cursor("diff_revisions")
    else:
        now = ctx.view.latest()
        until, after = args.get("to", now), None
        if since > until:
            if "to" not in args:
                raise FutureRevisionError(revision=since, current=now)
            raise InvalidArgumentsError(
                "diff_revisions", [Problem("/from", f"after to ({until}): a difference runs from earlier to later")]
            )
        total = _count(ctx, since, until, types, ids)

    found = ctx.view.diff(
        since, until, types=types, ids=ids, sight=ctx.sight, limit=limit, after=after
    )  # GoneError before what the change log keeps, FutureRevisionError beyond the store
    next_cursor = None
    if found.next is not None:
        next_cursor = encode_cursor("diff_revisions", args, _cursor(found.next, found.until, total))
    answer = page([e.to_json() for e in found.entries], total=total, limit=limit, revision=found.until,
                  next_cursor=next_cursor)  # fmt: skip
    answer["model"] = list(found.model) if found.model else None
    return answer


def _count(ctx: CallContext, since: int, until: int, types: list[str] | None, ids: list[str] | None) -> int:
    """How many entries the whole difference holds (read page by page, checking the call's time)."""
    total, after = 0, None
    while True:
        found = ctx.view.diff(since, until, types=types, ids=ids, sight=ctx.sight, limit=PAGE, after=after)
        total += len(found.entries)
        if found.next is None:
            return total
        after = found.next
        ctx.check_time()
