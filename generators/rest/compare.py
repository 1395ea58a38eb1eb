"""What a model change does to REST callers: the old and new OpenAPI documents compared operation by operation.

An operation's parameters and request body are what callers send (input rules of `core.lang.schema_diff`), its
responses what they receive (output rules); the named component schemas are compared once each, in both
directions (a node type's schema is sent and received). An operation or parameter removed is breaking; the
document's `info` (the model's title and description) is described, compatible. What no rule compares (the order of
members, say) is no change at all.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from core.lang.schema_diff import COMPATIBLE, Finding, annotation_changes, diff_schema, named, worst

__all__ = ["OPENAPI", "compare"]

OPENAPI = "openapi.json"
_METHODS = ("get", "put", "post", "patch", "delete")
_Roots = tuple[Mapping[str, Any], Mapping[str, Any]]


def compare(old: Mapping[str, str], new: Mapping[str, str]) -> list[Finding]:
    """Every classified difference between the two OpenAPI documents (`openapi.json`)."""
    if old[OPENAPI] == new[OPENAPI]:
        return []
    before, after = json.loads(old[OPENAPI]), json.loads(new[OPENAPI])
    roots = (before, after)

    def operation(surface: str, where: str, a: Any, b: Any) -> Iterator[Finding]:
        return _operation(surface, where, a, b, roots)

    return [
        *annotation_changes("rest", "info", before.get("info", {}), after.get("info", {})),
        *named("rest", "operation", _operations(before), _operations(after), operation),
        *_components(roots),
    ]


def _operation(
    surface: str, where: str, a: Mapping[str, Any], b: Mapping[str, Any], roots: _Roots
) -> Iterator[Finding]:
    yield from diff_schema(surface, f"{where} parameters", _parameters(a), _parameters(b), "input", roots)
    yield from diff_schema(surface, f"{where} requestBody", _body(a.get("requestBody")), _body(b.get("requestBody")),
                           "input", roots)  # fmt: skip
    responses_a: Mapping[str, Any] = a.get("responses", {})
    responses_b: Mapping[str, Any] = b.get("responses", {})
    for status in sorted(set(responses_a) | set(responses_b)):
        before, after = responses_a.get(status), responses_b.get(status)
        if before is None or after is None:
            change = f"response {'added' if before is None else 'removed'}"
            yield Finding(surface, f"{where} {status}", change, COMPATIBLE)
        else:
            yield from diff_schema(surface, f"{where} {status}", _body(before), _body(after), "output", roots)
    yield from annotation_changes(surface, where, a, b, skip=frozenset({"parameters", "requestBody", "responses"}))


def _components(roots: _Roots) -> Iterator[Finding]:
    """Named schemas, compared once by name, in both directions; the worse finding of the two is kept."""
    before: Mapping[str, Any] = roots[0].get("components", {}).get("schemas", {})
    after: Mapping[str, Any] = roots[1].get("components", {}).get("schemas", {})
    for name in sorted(set(before) & set(after)):
        found: dict[tuple[str, str], Finding] = {}
        for direction in ("input", "output"):
            for f in diff_schema("rest", f"schema {name}", before[name], after[name], direction, roots):
                key = (f.where, f.change)
                if key not in found or worst([found[key].classification, f.classification]) == f.classification:
                    found[key] = f
        yield from found.values()


def _operations(document: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {f"{method.upper()} {path}": item[method] for path, item in document.get("paths", {}).items()
            for method in _METHODS if method in item}  # fmt: skip


def _parameters(operation: Mapping[str, Any]) -> dict[str, Any]:
    """An operation's parameters as one object schema, so adding, removing or requiring one follows the input
    rules of a property."""
    parameters: list[Mapping[str, Any]] = operation.get("parameters", [])
    return {"type": "object",
            "properties": {f"{p['in']}:{p['name']}": p.get("schema", {}) for p in parameters},
            "required": [f"{p['in']}:{p['name']}" for p in parameters if p.get("required")]}  # fmt: skip


def _body(holder: Mapping[str, Any] | None) -> Any:
    if holder is None:
        return {}
    return holder.get("content", {}).get("application/json", {}).get("schema", {})
