"""Reading JSON and YAML documents with positions, and JSON pointers.

Every input canon reads (model files, import files, configuration) goes through here, so a parse error always
names the file and the line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from core.errors import Problem

__all__ = ["load_document", "pointer", "pointer_join"]


def pointer(parts: Iterable[object]) -> str:
    """Return the RFC 6901 JSON pointer for a path of keys and indexes."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def pointer_join(base: str, parts: Iterable[object]) -> str:
    return base + pointer(parts)


def load_document(path: Path) -> tuple[Any, list[Problem]]:
    """Parse a JSON or YAML file (by extension); return the document or the problems that stop parsing."""
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, [Problem("", "file not found", file=name)]
    except (OSError, UnicodeDecodeError) as exc:
        return None, [Problem("", f"cannot read file: {exc}", file=name)]
    if path.suffix.lower() in {".yaml", ".yml"}:
        return _load_yaml(text, name)
    try:
        return json.loads(text), []
    except json.JSONDecodeError as exc:
        return None, [Problem("", f"invalid JSON: {exc.msg} (column {exc.colno})", file=name, line=exc.lineno)]


class _JSONCompatibleLoader(yaml.SafeLoader):
    """A safe loader that keeps dates and times as strings, as JSON would: a model says `format: date`."""


_JSONCompatibleLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _load_yaml(text: str, name: str) -> tuple[Any, list[Problem]]:
    try:
        return yaml.load(text, Loader=_JSONCompatibleLoader), []
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        reason = getattr(exc, "problem", None) or str(exc)
        return None, [Problem("", f"invalid YAML: {reason}", file=name, line=line)]
