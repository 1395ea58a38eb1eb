"""The surface guides' tool tables: one row per registry tool, in registry order, between the markers."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.dispatch.guides import BEGIN, END, fill, guides, tables
from core.dispatch.registry import build_registry
from core.lang.model import Model
from tests.conftest import tool_names

SCRATCH = {
    "execution": "worker", "name": "count_words", "title": "Count words", "description": "Count words. A test tool.",
    "annotations": {"readOnlyHint": True}, "permission": "read", "advanced": False,
    "surface": {"rest": {"method": "GET", "path": "/words"}},
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    "outputSchema": {"type": "object"},
}  # fmt: skip


def test_each_table_has_one_row_per_tool_in_registry_order(model: Model) -> None:
    for table in tables(build_registry(model)).values():
        rows = table.splitlines()[2:]
        assert [row.split("`")[1] for row in rows if "/api" not in row] in ([], tool_names())
        assert len(rows) == len(tool_names())


def test_a_new_definition_gets_its_row_in_every_guide(model: Model) -> None:
    made = tables(build_registry(model, [SCRATCH]))

    assert made["mcp.md"].splitlines()[-1] == "| `count_words` | Count words. | reader | read-only |  |"
    assert made["rest.md"].splitlines()[-1] == "| `GET /api/words` | `count_words` | reader |"
    assert made["graphql.md"].splitlines()[-1] == "| `count_words` | yes | `text` |"


def test_fill_replaces_only_what_stands_between_the_markers(model: Model, tmp_path: Path) -> None:
    page = f"# Guide\n\nbefore\n\n{BEGIN}\n| stale |\n{END}\n\nafter\n"

    filled = fill(page, "| fresh |")

    assert filled == f"# Guide\n\nbefore\n\n{BEGIN}\n| fresh |\n{END}\n\nafter\n"
    assert fill(filled, "| fresh |") == filled
    for name in ("mcp.md", "rest.md", "graphql.md"):
        (tmp_path / name).write_text("no markers here\n", encoding="utf-8")
    with pytest.raises(ValueError, match="markers"):
        guides(build_registry(model), tmp_path)
