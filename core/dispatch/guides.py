"""The per-tool tables of the surface guides (docs/surfaces/{mcp,rest,graphql}.md), generated from the registry.

Each guide holds its table between `<!-- generated: tools -->` and `<!-- end -->`; `canon generate` rewrites
what is between the markers and `canon generate --check` fails while it is stale, so a new tool reaches the
guides with no hand edit. The tables carry only what the registry says (names, first sentences, permissions,
annotations, REST hints, input properties); how a surface maps them is its guide's prose.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path

from core.dispatch.registry import Registry, ToolDefinition

__all__ = ["BEGIN", "END", "fill", "guides", "tables"]

BEGIN, END = "<!-- generated: tools -->", "<!-- end -->"
_ROLE = {"read": "reader", "write": "writer", "admin": "admin"}


def _summary(tool: ToolDefinition) -> str:
    """The description's first sentence."""
    first = re.split(r"(?<=[.!?])\s", tool.description, maxsplit=1)[0]
    return first.replace("|", "\\|")


def _annotations(tool: ToolDefinition) -> str:
    hints = tool.annotations
    if hints.get("readOnlyHint"):
        return "read-only"
    return ", ".join(word for key, word in (("destructiveHint", "destructive"), ("idempotentHint", "idempotent"))
                     if hints.get(key))  # fmt: skip


def _mcp(tool: ToolDefinition) -> str:
    advanced = "yes" if tool.advanced else ""
    return f"| `{tool.name}` | {_summary(tool)} | {_ROLE[tool.permission]} | {_annotations(tool)} | {advanced} |"


def _rest(tool: ToolDefinition) -> str:
    hint = tool.surface["rest"]
    return f"| `{hint['method']} /api{hint['path']}` | `{tool.name}` | {_ROLE[tool.permission]} |"


def _graphql(tool: ToolDefinition) -> str:
    names = ", ".join(f"`{n}`" for n in tool.input_schema.get("properties", {}))
    return f"| `{tool.name}` | {'yes' if tool.annotations.get('readOnlyHint') else ''} | {names} |"


_TABLES: Mapping[str, tuple[str, Callable[[ToolDefinition], str]]] = {
    "mcp.md": ("| tool | what it does | role | annotations | advanced |\n|---|---|---|---|---|", _mcp),
    "rest.md": ("| method and path | tool | role |\n|---|---|---|", _rest),
    "graphql.md": ("| field | read-only | arguments |\n|---|---|---|", _graphql),
}


def tables(registry: Registry) -> dict[str, str]:
    """Each guide's tool table, by guide file name, in registry order."""
    return {name: "\n".join([head, *(row(t) for t in registry.tools)]) for name, (head, row) in _TABLES.items()}


def fill(text: str, table: str) -> str:
    """`text` with what stands between its markers replaced by `table`; `ValueError` when the markers are missing."""
    start, end = text.find(BEGIN), text.find(END, text.find(BEGIN))
    if start < 0 or end < 0:
        raise ValueError(f"no {BEGIN} … {END} markers")
    return f"{text[: start + len(BEGIN)]}\n{table}\n{text[end:]}"


def guides(registry: Registry, folder: Path) -> dict[str, str]:
    """The guides of `folder` (docs/surfaces) with current tool tables: file name -> the whole new text. A guide
    the folder does not hold is left out (`canon generate --out` elsewhere writes no guides)."""
    return {name: fill((folder / name).read_text(encoding="utf-8"), table)
            for name, table in tables(registry).items() if (folder / name).is_file()}  # fmt: skip
