"""The pagination contract every list answer keeps, on every surface.

A page is `{"items", "total", "truncated", "next_cursor", "limit", "revision"}`. `total` counts every match, not
just the page; `truncated` is true whenever something was left out (more pages, or a bound stopped the work);
`next_cursor` is null on the last page. Nothing is ever cut silently.

Cursors are opaque to callers: URL-safe base64 of a small JSON object holding the position and a fingerprint
of the query it belongs to, so a cursor replayed with other arguments is refused instead of answering wrong.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from core.errors import InvalidArgumentsError, Problem

__all__ = ["decode_cursor", "encode_cursor", "page", "query_fingerprint"]


def query_fingerprint(tool: str, arguments: Mapping[str, Any]) -> str:
    """A short digest of a query's arguments, without its paging arguments."""
    relevant = {k: v for k, v in arguments.items() if k not in ("cursor", "limit")}
    text = json.dumps([tool, relevant], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def encode_cursor(tool: str, arguments: Mapping[str, Any], position: Any) -> str:
    raw = json.dumps({"q": query_fingerprint(tool, arguments), "p": position}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(tool: str, arguments: Mapping[str, Any]) -> Any:
    """The position stored in `arguments["cursor"]` (None when absent); refuse a foreign or damaged cursor."""
    cursor = arguments.get("cursor")
    if cursor is None:
        return None
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        fingerprint, position = data["q"], data["p"]
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise InvalidArgumentsError(tool, [Problem("/cursor", "not a cursor this server issued")]) from None
    if fingerprint != query_fingerprint(tool, arguments):
        problem = Problem("/cursor", "this cursor belongs to a query with other arguments; start again without it")
        raise InvalidArgumentsError(tool, [problem])
    return position


def page(
    items: Sequence[Any], *, total: int, limit: int, revision: int, next_cursor: str | None, cut: bool = False
) -> dict[str, Any]:
    return {
        "items": list(items),
        "total": total,
        "truncated": next_cursor is not None or cut,
        "next_cursor": next_cursor,
        "limit": limit,
        "revision": revision,
    }
