"""How a property's value shows on a page, read from its JSON Schema: links, dates, enums, lists, JSON.

`shown(value, schema)` gives a `Shown` the templates render (jinja2 escapes every text in it). A `format: uri`
value becomes a link only when it is an absolute http(s) URL: a `javascript:` or `data:` URI in the data stays
text, so stored data cannot run script in a reader's browser.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

__all__ = ["Shown", "cell_text", "safe_href", "shown"]

DATES = ("date", "date-time", "time")


@dataclass(frozen=True)
class Shown:
    """A value as a page shows it: `kind` chooses the markup; `text` is what a reader reads."""

    kind: str  # text, number, boolean, enum, link, date, list, json, empty
    text: str
    href: str | None = None
    items: tuple[Shown, ...] = ()


def safe_href(value: str) -> str | None:
    """`value` when it is an absolute http or https URL with a host, else None (never a script URI)."""
    try:
        parts = urlsplit(value)
    except ValueError:
        return None
    return value if parts.scheme in ("http", "https") and parts.netloc else None


def shown(value: Any, schema: Mapping[str, Any], resolve: Any = None) -> Shown:
    """`value` as its (resolved) property schema says to show it; `resolve` follows the items' `$ref`s."""
    if value is None:
        return Shown("empty", "—")
    if isinstance(value, bool):
        return Shown("boolean", "yes" if value else "no")
    if isinstance(value, Sequence) and not isinstance(value, str):
        items: Mapping[str, Any] = schema.get("items", {}) if isinstance(schema.get("items"), Mapping) else {}
        if resolve is not None:
            items = resolve(items)
        return Shown("list", cell_text(value), items=tuple(shown(v, items, resolve) for v in value))
    if isinstance(value, Mapping):
        return Shown("json", json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True))
    if isinstance(value, int | float):
        return Shown("number", _number(value))
    text = str(value)
    if "enum" in schema:
        return Shown("enum", text)
    if schema.get("format") in ("uri", "iri", "url") and (href := safe_href(text)) is not None:
        return Shown("link", text, href)
    if schema.get("format") in DATES:
        return Shown("date", text)
    if schema.get("format") == "email":
        return Shown("link", text, "mailto:" + text) if "@" in text and ":" not in text else Shown("text", text)
    return Shown("text", text)


def _number(value: float) -> str:
    return str(value) if isinstance(value, int) or not value.is_integer() else str(int(value))


def cell_text(value: Any) -> str:
    """A value as one CSV cell: text and numbers as they are, booleans as true/false, lists and objects as JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
