"""How large a model canon takes: the bounds every model document is checked against, in one place.

Every surface is generated from the model, and applying one generates them all twice (`canon model diff`), so the
cost of a model grows with its types and properties: from a few hundredths to a few tenths of a second per type
on a small machine.
The bounds sit far above real models (the embedded one has 24 definitions, at most 11 properties a type and 6
levels of nesting) and stop a document that would hold the server's memory and time for minutes. They are checked
first (`core.lang.model.check_model`), before anything whose cost grows with the document, on every path that reads a
model: `canon validate`, start-up, `canon model diff` and `apply`, the `apply_model` tool.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.values.documents import pointer
from core.values.errors import Problem

__all__ = ["MAX_DEFINITIONS", "MAX_DEPTH", "MAX_PROPERTIES", "limit_problems"]

MAX_DEFINITIONS = 500  # entries of `$defs`: node types, edge types and the helpers they refer to
MAX_PROPERTIES = 200  # properties of one definition
MAX_DEPTH = 32  # levels of objects and arrays in the whole document (a property's schema is two levels deeper)


def limit_problems(document: Any) -> list[Problem]:
    """Each bound `document` goes past, named with the bound and the document's value; [] when it fits."""
    problems = _depth_problems(document)
    defs = document.get("$defs") if isinstance(document, dict) else None
    if not isinstance(defs, dict):
        return problems
    if len(defs) > MAX_DEFINITIONS:
        problems.append(Problem("/$defs", f"the model has {len(defs):,} definitions (node types, edge types and "
                                f"helpers); canon takes at most {MAX_DEFINITIONS:,}"))  # fmt: skip
    for name, definition in defs.items():
        props = definition.get("properties") if isinstance(definition, Mapping) else None
        if isinstance(props, Mapping) and len(props) > MAX_PROPERTIES:
            problems.append(Problem(pointer(["$defs", name, "properties"]), f"{name} has {len(props):,} properties; "
                                    f"a definition takes at most {MAX_PROPERTIES:,}"))  # fmt: skip
    return problems


def _depth_problems(document: Any) -> list[Problem]:
    """The first place nested deeper than `MAX_DEPTH` (iteratively: a hostile document can be deeper than Python's
    recursion limit)."""
    stack: list[tuple[Any, list[object]]] = [(document, [])]
    while stack:
        node, path = stack.pop()
        if not isinstance(node, dict | list):
            continue
        if len(path) >= MAX_DEPTH:
            return [Problem(pointer(path), f"the model nests more than {MAX_DEPTH} levels of objects and arrays "
                            "here; canon takes at most that many")]  # fmt: skip
        items = node.items() if isinstance(node, dict) else enumerate(node)  # pyright: ignore[reportUnknownMemberType]
        stack.extend((value, [*path, key]) for key, value in items)  # pyright: ignore[reportUnknownArgumentType]
    return []
