"""Conditional requests (RFC 9110 §13): whether an `If-None-Match` header names a response's entity tag.

Every surface that answers GET with an `ETag` (REST reads, llms.txt pages) asks this one question before it
answers 304 Not Modified. The header is `*` (any tag) or a comma-separated list of entity tags, strong (`"abc"`)
or weak (`W/"abc"`); `If-None-Match` compares weakly (§13.1.2), so `W/"abc"` matches `"abc"` and back. A comma
inside a quoted tag is part of the tag, not a separator. What the grammar does not read (a bare word, an unclosed
quote) names no tag, so it never turns an answer into a 304.
"""

from __future__ import annotations

import re

__all__ = ["none_match"]

_ELEMENT = re.compile(r'(?:W/)?("[^"]*")|(?<![^\s,])(\*)(?![^\s,])')
"""A quoted entity tag (its weakness dropped), or `*` standing alone as a list element."""


def none_match(header: str | None, etag: str) -> bool:
    """True when `If-None-Match: header` names `etag` (weak comparison) or is `*`: answer 304, not the body."""
    if header is None:
        return False
    tags = {found[1] or found[2] for found in _ELEMENT.finditer(header)}
    return "*" in tags or etag.removeprefix("W/") in tags
