"""The pagination contract every list answer keeps, on every surface.

A page is `{"items", "total", "truncated", "next_cursor", "limit", "revision"}`. `total` counts every match, not
just the page; `truncated` is true whenever something was left out (more pages, or a bound stopped the work);
`next_cursor` is null on the last page. Nothing is ever cut silently.

Cursors are opaque to callers: URL-safe base64 of a small JSON object holding the position and a fingerprint
of the query it belongs to, so a cursor replayed with other arguments is refused instead of answering wrong.

A cursor is not a secret and is not signed: anyone can decode one and build another. What makes that harmless is
that a decoded cursor is checked as strictly as any argument (`decode_cursor`: the shape each tool declares, every
number a non-negative 64-bit integer, every key valid Unicode of bounded length; the tool then checks positions
against its state, as `get_changes` does), and that a position only chooses where a page starts: every read still
goes through the caller's sight, so a forged cursor can show nothing an honest one would not.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from core.values.documents import parse_json
from core.values.errors import InvalidArgumentsError, Problem
from core.values.json_values import INT64_MAX, value_problems

__all__ = ["MAX_CURSOR", "Shape", "decode_cursor", "encode_cursor", "page", "query_fingerprint", "refused_cursor"]

Shape = type[int] | type[str] | Mapping[str, "type[int] | type[str]"]
MAX_CURSOR = 1024  # characters; the cursors canon issues are under 200
MAX_KEY = 512  # characters of a key position (a node id is at most 128)


def query_fingerprint(tool: str, arguments: Mapping[str, Any]) -> str:
    """A short digest of a query's arguments, without its paging arguments."""
    relevant = {k: v for k, v in arguments.items() if k not in ("cursor", "limit")}
    text = json.dumps([tool, relevant], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def encode_cursor(tool: str, arguments: Mapping[str, Any], position: Any) -> str:
    raw = json.dumps({"q": query_fingerprint(tool, arguments), "p": position}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(tool: str, arguments: Mapping[str, Any], *shapes: Shape) -> Any:
    """The position stored in `arguments["cursor"]` (None when absent), if it has one of `shapes`; a foreign,
    damaged or forged cursor is `InvalidArgumentsError` at `/cursor`.

    A shape is `int` (a count or an id: 0 to 2**63-1), `str` (a key: valid Unicode, at most `MAX_KEY` characters)
    or a mapping of member names to those (exactly those members)."""
    cursor = arguments.get("cursor")
    if cursor is None:
        return None
    if not isinstance(cursor, str) or len(cursor) > MAX_CURSOR:
        raise refused_cursor(tool)
    try:
        data = parse_json(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, binascii.Error):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise refused_cursor(tool) from None
    if not isinstance(data, dict) or set(data) != {"q", "p"}:  # pyright: ignore[reportUnknownArgumentType]
        raise refused_cursor(tool)
    fingerprint, position = data["q"], data["p"]
    if fingerprint != query_fingerprint(tool, arguments):
        raise refused_cursor(tool, "this cursor belongs to a query with other arguments; start again without it")
    if not any(_fits(position, shape) for shape in shapes):
        raise refused_cursor(tool)
    return position


def refused_cursor(tool: str, why: str = "not a cursor this server issued") -> InvalidArgumentsError:
    """The error for a cursor that cannot be used (for a tool that checks what it decoded against its state)."""
    return InvalidArgumentsError(tool, [Problem("/cursor", why)])


def _fits(value: Any, shape: Shape) -> bool:
    if shape is int:
        return type(value) is int and 0 <= value <= INT64_MAX
    if shape is str:
        return type(value) is str and len(value) <= MAX_KEY and not value_problems(value)
    if isinstance(shape, Mapping) and isinstance(value, dict):
        members: dict[Any, Any] = value
        return set(members) == set(shape) and all(_fits(members[k], kind) for k, kind in shape.items())
    return False


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
