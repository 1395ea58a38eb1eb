"""How the llms.txt surface writes Markdown: the jinja2 environment, its filters, and the text helpers the pages share.

Everything here is a pure function of its arguments (labels, type names, URLs, JSON blocks); what a page shows, and
where its data comes from, is `generators.llms.pages`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, StrictUndefined

__all__ = [
    "compact",
    "environment",
    "fence",
    "first_sentence",
    "label",
    "node_url",
    "oneline",
    "tidy",
    "to_json",
    "type_label",
    "value_text",
]


# -- text helpers (also the templates' filters) ---------------------------------------------------------------------
def to_json(value: Any) -> str:
    """JSON exactly as the schema blocks promise it (jinja2's own tojson sorts keys and escapes HTML)."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def oneline(text: Any) -> str:
    """Collapse whitespace: inside an llms.txt section every line must be one link item."""
    return " ".join(str(text).split())


def label(text: Any) -> str:
    """A link title the llms.txt parser reads whole: one line, no square brackets."""
    return oneline(text).replace("[", "(").replace("]", ")") or "(untitled)"


def fence(text: str) -> str:
    """A code fence longer than any backtick run inside `text`, so content cannot close the block."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def first_sentence(text: str) -> str:
    """The first sentence of a description (a full stop followed by a capital ends it, so "e.g. x" does not)."""
    flat = oneline(text)
    found = re.match(r"(.+?[.!?])\s+(?=[A-Z])", flat)
    return found.group(1) if found else flat


def value_text(value: Any) -> str:
    return oneline(value) if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def type_label(schema: Mapping[str, Any]) -> str:
    """A short type name for a property schema: `Slug`, `string (date)`, `one of "a", "b"`, `array of Tag`."""
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "enum" in schema:
        return "one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
    kind = schema.get("type", "any")
    text = " or ".join(kind) if isinstance(kind, list) else str(kind)
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        text = f"array of {type_label(schema['items'])}"
    return f"{text} ({schema['format']})" if "format" in schema else text


def node_url(node_type: str, id: str) -> str:
    return f"/nodes/{node_type}/{quote(id, safe='')}.md"


def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("generators.llms", "templates"),
        undefined=StrictUndefined,
        autoescape=False,  # Markdown, not HTML
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(json=to_json, oneline=oneline, label=label, fence=fence, show=value_text, compact=compact)
    return env


def tidy(text: str) -> str:
    """At most one blank line in a row and exactly one final newline (the parser needs it)."""
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"
