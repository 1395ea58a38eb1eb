"""Reading JSON and YAML documents with positions, and JSON pointers.

Every input canon reads (model files, import files, configuration) goes through here, so a parse error always
names the file and the line. `parse_json` is the one JSON parser of every text canon decodes itself (tool-call
bodies, REST bodies and query parameters, GraphQL requests, cursors, import lines): RFC 8259 JSON, so `NaN` and
the infinities Python's `json` would read are refused (see `core.values.json_values` for what else canon refuses).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from core.values.errors import Problem

__all__ = ["WIRE_DEPTH", "load_document", "parse_json", "pointer", "pointer_join", "shallow_json"]

WIRE_DEPTH = 128  # levels of a message canon's transports read; deeper is cut (`shallow_json`)

_CONSTANT_OR_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)', re.DOTALL)


def _refuse_constant(name: str) -> Any:
    raise _Constant(name)


class _Constant(Exception):
    def __init__(self, name: str) -> None:
        self.name = name


def parse_json(text: str | bytes | bytearray) -> Any:
    """Parse JSON text; `json.JSONDecodeError` (a `ValueError`) on anything that is not JSON, `NaN` and the
    infinities included, with where it is, and on JSON nested too deeply for the parser to follow."""
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply to decode", "", 0) from None
    except _Constant as constant:
        document = text if isinstance(text, str) else bytes(text).decode("utf-8", "replace")
        found = next((m for m in _CONSTANT_OR_STRING.finditer(document) if m.group(1)), None)
        position = found.start() if found is not None else 0
        message = f"{constant.name} is not JSON (a number must be finite)"
        raise json.JSONDecodeError(message, document, position) from None


_BRACKET_OR_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


def shallow_json(text: bytes, depth: int = WIRE_DEPTH) -> bytes | None:
    """`text` with every array and object nested more than `depth` levels deep emptied (`[[1]]` cut at 1 is
    `[[]]`), or None when nothing is that deep.

    Python's `json` (and the SDK's parser) recurse, so valid JSON nested a few hundred levels deep is a parse error
    to them, and a parse error cannot name the request's id. A transport reads such a message cut instead: still
    deeper than any value canon holds (`core.values.json_values.MAX_DEPTH` < `depth`), so dispatch refuses its
    arguments as
    nested too deeply, with the pointer where, as the answer to that id. Linear, and never recursive; text that is
    not JSON stays not JSON."""
    pieces: list[bytes] = []
    level, kept_from, cut_at = 0, 0, None
    for found in _BRACKET_OR_STRING.finditer(text):
        token = found.group()
        if token in (b"[", b"{"):
            level += 1
            if level == depth + 1 and cut_at is None:
                pieces.append(text[kept_from : found.end()])
                cut_at = level
        elif token in (b"]", b"}"):
            if cut_at == level:
                kept_from, cut_at = found.start(), None
            level -= 1
    if not pieces:
        return None
    pieces.append(text[kept_from:] if cut_at is None else b"")
    return b"".join(pieces)


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
        return parse_json(text), []
    except json.JSONDecodeError as exc:
        return None, [Problem("", f"invalid JSON: {exc.msg} (column {exc.colno})", file=name, line=exc.lineno)]


@functools.cache
def _json_compatible_loader() -> type[Any]:
    """A safe loader that keeps dates and times as strings, as JSON would: a model says `format: date`.

    Made on first use: a start that reads no YAML (every `canon serve --stdio` on a JSON model) never imports it.
    """
    import yaml

    class JSONCompatibleLoader(yaml.SafeLoader):
        pass

    JSONCompatibleLoader.yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    return JSONCompatibleLoader


def _load_yaml(text: str, name: str) -> tuple[Any, list[Problem]]:
    import yaml

    try:
        return yaml.load(text, Loader=_json_compatible_loader()), []
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        reason = getattr(exc, "problem", None) or str(exc)
        return None, [Problem("", f"invalid YAML: {reason}", file=name, line=line)]
