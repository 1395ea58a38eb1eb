"""get_audit_log: the audit log, newest first (admins only: the registry says so, dispatch enforces it)."""

from __future__ import annotations

from typing import Any

from core.dispatch.dispatcher import CallContext, handler
from core.values.audit import AuditQuery
from core.values.paging import decode_cursor, encode_cursor, page


@handler("get_audit_log")
def get_audit_log(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    if ctx.audit is not None:
        ctx.audit.flush()  # include every call made before this one
    limit = args["limit"]
    query = AuditQuery(args.get("principal"), args.get("target"), args.get("outcome"), args.get("surface"),
                       utc(args.get("since")))  # fmt: skip
    before = decode_cursor("get_audit_log", args, int)
    records, total = ctx.view.audit(query, before=before, limit=limit + 1)
    more = len(records) > limit
    records = records[:limit]
    cursor = encode_cursor("get_audit_log", args, records[-1]["id"]) if more else None
    return page(records, total=total, limit=limit, revision=ctx.view.revision, next_cursor=cursor)


def utc(value: str | None) -> str | None:
    """An ISO 8601 time as the audit log writes it (UTC, milliseconds, Z), so text order is time order."""
    if value is None:
        return None
    from datetime import UTC, datetime

    moment = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
