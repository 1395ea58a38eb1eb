"""Moving each schema's `$defs` into an OpenAPI document's `components/schemas`, and back.

Schemas are the registry's, unchanged except that each one's `$defs` move into `components/schemas` (a
definition shared by several tools is stored once; different definitions with one name get `_2`, `_3`, …) with
their refs rewritten. `hoist` does the move and says where each definition went; `generators.rest.openapi` records
that on each operation (`x-canon-defs`, beside its input schema's top-level keywords in `x-canon-input`), so
`unhoist` rebuilds the exact input and output schemas.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["COMPONENTS", "DEFS", "hoist", "unhoist"]

DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})  # values, not schemas: never rewritten
COMPONENT_NAME = re.compile(r"[^A-Za-z0-9._-]")
DEFS, COMPONENTS = "#/$defs/", "#/components/schemas/"


def _rewrite(node: Any, ref: Callable[[str], str]) -> Any:
    """A copy of a schema with every `$ref` passed through `ref`; values of data keywords are left alone."""
    if isinstance(node, Mapping):
        out: dict[str, Any] = {}
        for key, value in node.items():  # pyright: ignore[reportUnknownVariableType]
            if key == "$ref" and isinstance(value, str):
                out[key] = ref(value)
            elif key in DATA_KEYWORDS:
                out[key] = copy.deepcopy(value)
            else:
                out[key] = _rewrite(value, ref)
        return out
    if isinstance(node, list):
        return [_rewrite(item, ref) for item in node]  # pyright: ignore[reportUnknownVariableType]
    return node


def _renamer(source: str, target: str, mapping: Mapping[str, str]) -> Callable[[str], str]:
    def ref(value: str) -> str:
        if not value.startswith(source):
            return value
        head, sep, tail = value[len(source) :].partition("/")
        name = head.replace("~1", "/").replace("~0", "~")
        if name not in mapping:
            return value
        return target + mapping[name].replace("~", "~0").replace("/", "~1") + sep + tail

    return ref


def hoist(schema: Mapping[str, Any], components: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """`schema` without `$defs` (refs now into components) and where each definition went; fills `components`."""
    defs: Mapping[str, Any] = schema.get("$defs", {})
    base = {name: COMPONENT_NAME.sub("_", name) for name in defs}
    suffix = dict.fromkeys(defs, 1)

    def target(name: str) -> str:
        return base[name] if suffix[name] == 1 else f"{base[name]}_{suffix[name]}"

    while True:  # bump clashing names until stable: each bump only moves towards a free name
        mapping = {name: target(name) for name in defs}
        rewritten = {name: _rewrite(d, _renamer(DEFS, COMPONENTS, mapping)) for name, d in defs.items()}
        seen: set[str] = set()
        clashes: list[str] = []
        for name in defs:
            stored = components.get(mapping[name])
            if mapping[name] in seen or (stored is not None and stored != rewritten[name]):
                clashes.append(name)
            seen.add(mapping[name])
        if not clashes:
            break
        for name in clashes:
            suffix[name] += 1
    for name in defs:
        components.setdefault(mapping[name], rewritten[name])
    body = {k: v for k, v in schema.items() if k != "$defs"}
    return _rewrite(body, _renamer(DEFS, COMPONENTS, mapping)), mapping


def unhoist(doc: Mapping[str, Any], operation: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A tool operation's exact input and output schemas, rebuilt from the document (the inverse of hoisting)."""
    components: dict[str, Any] = doc["components"]["schemas"]
    defs: Mapping[str, Mapping[str, str]] = operation.get("x-canon-defs", {})
    properties: dict[str, Any] = {}
    for param in operation.get("parameters", ()):
        properties[param["name"]] = (
            param["schema"] if "schema" in param else param["content"]["application/json"]["schema"]
        )
    if "requestBody" in operation:
        properties |= operation["requestBody"]["content"]["application/json"]["schema"].get("properties", {})
    frame: dict[str, Any] = dict(operation["x-canon-input"])
    output = operation["responses"]["200"]["content"]["application/json"]["schema"]

    def rebuilt(body: Mapping[str, Any], mapping: Mapping[str, str]) -> dict[str, Any]:
        back = _renamer(COMPONENTS, DEFS, {v: k for k, v in mapping.items()})
        out: dict[str, Any] = _rewrite(body, back)
        if mapping:
            out["$defs"] = {name: _rewrite(components[c], back) for name, c in mapping.items()}
        return out

    frame["properties"] = properties
    return rebuilt(frame, defs.get("input", {})), rebuilt(output, defs.get("output", {}))
