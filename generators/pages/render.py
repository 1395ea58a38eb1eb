"""The jinja2 environment of the pages (autoescape on: every value a page shows is escaped), and the downloads.

Templates are in `templates/`, one per page, each extending `base.html.j2`; links are built with `url(path,
params)`, which starts every path with the server's base (`[server] public_url`, else `root_path`).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from generators.pages.values import cell_text

__all__ = ["PREFIX", "csv_text", "environment", "json_text", "link", "segment", "with_param"]

PREFIX = "/browse"


def link(base: str, path: str, params: Sequence[tuple[str, Any]] | Mapping[str, Any] = ()) -> str:
    """`base + /browse + path`, with `params` (pairs or a mapping; None and "" left out) as its query string."""
    pairs = params.items() if isinstance(params, Mapping) else params
    kept = [(k, _text(v)) for k, v in pairs if v is not None and v != ""]
    return base + PREFIX + path + ("?" + urlencode(kept) if kept else "")


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def segment(value: str) -> str:
    """A path segment: every character that is not unreserved, percent-encoded (an id may hold `.` or `:`)."""
    return quote(value, safe="")


def with_param(params: Sequence[tuple[str, str]], name: str, value: Any = None) -> list[tuple[str, Any]]:
    """`params` without any condition on property `name`, then `name=value` (none when `value` is None): the
    query of a facet link, which replaces that property's filter and keeps the others."""
    kept: list[tuple[str, Any]] = [(k, v) for k, v in params if k.partition("__")[0] != name]
    return kept if value is None else [*kept, (name, value)]


def kind(schema: Mapping[str, Any]) -> str:
    """A property schema's type in a few words: `string (uri)`, `integer`, `array of Tag`."""
    declared = schema.get("type", "any")
    text = " or ".join(declared) if isinstance(declared, list) else str(declared)
    items = schema.get("items")
    if declared == "array" and isinstance(items, Mapping):
        ref = items.get("$ref")
        text += " of " + (str(ref).rsplit("/", 1)[-1] if isinstance(ref, str) else str(items.get("type", "any")))
    return f"{text} ({schema['format']})" if "format" in schema else text


def environment(base: str) -> Environment:
    env = Environment(
        loader=PackageLoader("generators.pages", "templates"),
        undefined=StrictUndefined,
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )

    def url(path: str, params: Sequence[tuple[str, Any]] | Mapping[str, Any] = ()) -> str:
        return link(base, path, params)

    helpers: dict[str, Any] = {"base": base, "url": url,
                               "segment": segment, "with_param": with_param, "kind": kind}  # fmt: skip
    env.globals.update(helpers)
    filters: dict[str, Any] = {"tojson_text": pretty_json, "param": _text}
    env.filters.update(filters)
    return env


def csv_text(columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> str:
    """RFC 4180 CSV: a header row, then one row per item; lists and objects as JSON in their cell. A cell that a
    spreadsheet would read as a formula (`=`, `+`, `-`, `@` first) is led by `'`, as OWASP advises."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_defused(v) if isinstance(v := row.get(c), str) else cell_text(v) for c in columns])
    return out.getvalue()


def _defused(cell: str) -> str:
    """A text cell a spreadsheet cannot take for a formula."""
    return "'" + cell if cell[:1] in ("=", "+", "-", "@", "\t", "\r") else cell


def pretty_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True)


def json_text(answer: Mapping[str, Any]) -> str:
    return json.dumps(answer, ensure_ascii=False, indent=2) + "\n"
