"""JSON Schema compatibility: how a change to one schema affects the callers who send or receive its values.

`diff_schema(old, new, direction)` walks two schemas side by side and yields one `Finding` per difference, with
its classification. The direction decides: a schema that callers *send* (`"input"`: tool arguments, request
bodies) may accept more, never less; a schema callers *receive* (`"output"`: results, responses) may promise
more, and may narrow the values it produces only if every stored record already fits (`NEEDS_DATA_CHECK`, which
`canon model diff --store` verifies).

| change | input | output |
|---|---|---|
| property added (optional) | compatible | compatible |
| property added and required, or made required | breaking | needs data check |
| property removed | breaking | breaking |
| required dropped | compatible | breaking |
| enum value or type added | compatible | compatible (enum), breaking (type) |
| enum value or type removed | breaking | needs data check |
| bound, length, pattern or format tightened | breaking | needs data check |
| bound, length, pattern or format loosened | compatible | compatible |
| description, title, examples, deprecated | compatible | compatible |

`x-canon-renamed-from` is no change of a schema: `core.model_diff` reports the rename it declares.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "BREAKING",
    "COMPATIBLE",
    "NEEDS_DATA_CHECK",
    "Classification",
    "Finding",
    "annotation_changes",
    "diff_schema",
    "keyed",
    "named",
    "worst",
]

Classification = Literal["breaking", "needs-data-check", "compatible"]
Direction = Literal["input", "output"]
BREAKING: Classification = "breaking"
NEEDS_DATA_CHECK: Classification = "needs-data-check"
COMPATIBLE: Classification = "compatible"
_RANK: dict[Classification, int] = {COMPATIBLE: 0, NEEDS_DATA_CHECK: 1, BREAKING: 2}

_ANNOTATIONS = frozenset({"description", "title", "examples", "deprecated", "default", "$comment", "$schema", "$id"})
_LOWER_BOUNDS = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
_UPPER_BOUNDS = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
_HANDLED = frozenset({"type", "enum", "const", "properties", "required", "items", "$ref", "$defs",
                      "additionalProperties", "pattern", "format", "anyOf", "oneOf", "allOf", "x-canon-node",
                      "x-canon-edge", "x-canon-model", "x-canon-renamed-from", *_LOWER_BOUNDS, *_UPPER_BOUNDS,
                      *_ANNOTATIONS})  # fmt: skip


@dataclass(frozen=True)
class Finding:
    """One difference on one surface: where (a surface-specific path), what, and what it means for callers."""

    surface: str
    where: str
    change: str
    classification: Classification

    def as_dict(self) -> dict[str, str]:
        return {"surface": self.surface, "where": self.where, "change": self.change,
                "classification": self.classification}  # fmt: skip


def worst(classifications: Iterator[Classification] | list[Classification]) -> Classification:
    """The most severe of `classifications` (compatible when there are none)."""
    result: Classification = COMPATIBLE
    for c in classifications:
        if _RANK[c] > _RANK[result]:
            result = c
    return result


def named(
    surface: str,
    kind: str,
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    differ: Callable[[str, str, Any, Any], Iterator[Finding]],
) -> Iterator[Finding]:
    """Named things of one `kind` (tools, operations, ...) compared by name: a removed one breaks its callers, an
    added one is compatible, a changed one is compared by `differ(surface, where, old, new)`."""
    for name in sorted(set(old) | set(new)):
        where = f"{kind} {name}"
        if name not in new:
            yield Finding(surface, where, f"{kind} removed", BREAKING)
        elif name not in old:
            yield Finding(surface, where, f"{kind} added", COMPATIBLE)
        elif old[name] != new[name]:
            yield from differ(surface, where, old[name], new[name])


def annotation_changes(
    surface: str, where: str, old: Mapping[str, Any], new: Mapping[str, Any], skip: frozenset[str] = frozenset()
) -> Iterator[Finding]:
    """Members other than `skip` that changed: what describes a thing (titles, hints, descriptions), compatible."""
    for key in sorted((set(old) | set(new)) - skip):
        if old.get(key) != new.get(key):
            yield Finding(surface, f"{where}/{key}", f"{key} changed", COMPATIBLE)


def keyed(items: list[Mapping[str, Any]], key: str) -> dict[str, Mapping[str, Any]]:
    """`items` by the value of their `key` member."""
    return {str(item[key]): item for item in items}


def _narrowed(direction: Direction) -> Classification:
    return BREAKING if direction == "input" else NEEDS_DATA_CHECK


def _widened(direction: Direction) -> Classification:
    return COMPATIBLE if direction == "input" else BREAKING


@dataclass(frozen=True)
class _Walk:
    surface: str
    direction: Direction
    old_root: Mapping[str, Any]
    new_root: Mapping[str, Any]

    def finding(self, where: str, change: str, classification: Classification) -> Finding:
        return Finding(self.surface, where, change, classification)


def diff_schema(
    surface: str,
    where: str,
    old: Any,
    new: Any,
    direction: Direction,
    roots: tuple[Mapping[str, Any], Mapping[str, Any]] | None = None,
) -> list[Finding]:
    """Every difference between the schemas `old` and `new` at `where`, classified for `direction`.

    `roots` are the documents local `$ref`s resolve in (default: the schemas themselves)."""
    old_root, new_root = roots or (old, new)
    walk = _Walk(surface, direction, old_root, new_root)
    return list(_diff(walk, where, old, new, frozenset()))


def _resolve(root: Mapping[str, Any], schema: Any) -> Any:
    while isinstance(schema, Mapping) and isinstance(ref := schema.get("$ref"), str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(target, Mapping) else None
        if target is None:
            return schema
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}  # type: ignore[dict-item]
    return schema


def _diff(walk: _Walk, where: str, old: Any, new: Any, seen: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    refs = (str(_ref(old)), str(_ref(new)))
    if refs != ("None", "None"):
        if refs in seen or (refs[0] == refs[1] and refs[0].startswith(("#/$defs/", "#/components/schemas/"))):
            return  # the same named definition on both sides: compared once, under $defs
        seen = seen | {refs}
    old, new = _resolve(walk.old_root, old), _resolve(walk.new_root, new)
    if old == new:
        return
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        yield walk.finding(where, "schema replaced", BREAKING)
        return
    yield from _types(walk, where, old, new)
    yield from _enum(walk, where, old, new)
    yield from _bounds(walk, where, old, new)
    yield from _properties(walk, where, old, new, seen)
    for key in ("items", "additionalProperties", "then", "else"):
        if isinstance(old.get(key), Mapping) and isinstance(new.get(key), Mapping):
            yield from _diff(walk, f"{where}/{key}", old[key], new[key], seen)
    yield from _definitions(walk, where, old, new, seen)
    yield from _alternatives(walk, where, old, new, seen)
    for key in sorted((set(old) | set(new)) - _HANDLED):
        if old.get(key) != new.get(key):
            yield walk.finding(where, f"'{key}' changed", BREAKING)
    for key in sorted(_ANNOTATIONS & (set(old) | set(new))):
        if old.get(key) != new.get(key) and key not in ("$schema", "$id"):
            yield walk.finding(where, f"{key} changed", COMPATIBLE)


def _ref(schema: Any) -> Any:
    return schema.get("$ref") if isinstance(schema, Mapping) else None


def _type_set(schema: Mapping[str, Any]) -> set[str] | None:
    value = schema.get("type")
    if value is None:
        return None
    types = {value} if isinstance(value, str) else set(value)
    return types | {"integer"} if "number" in types else types


def _types(walk: _Walk, where: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> Iterator[Finding]:
    before, after = _type_set(old), _type_set(new)
    if before == after:
        return
    if after is None or (before is not None and after > before):
        yield walk.finding(where, f"type widened from {old.get('type')} to {new.get('type', 'any')}",
                           _widened(walk.direction))  # fmt: skip
    elif before is None or after < before:
        yield walk.finding(where, f"type narrowed from {old.get('type', 'any')} to {new.get('type')}",
                           _narrowed(walk.direction))  # fmt: skip
    else:
        yield walk.finding(where, f"type changed from {old.get('type')} to {new.get('type')}", BREAKING)


def _values(schema: Mapping[str, Any]) -> list[Any] | None:
    if "const" in schema:
        return [schema["const"]]
    enum = schema.get("enum")
    return list(enum) if isinstance(enum, list) else None


def _enum(walk: _Walk, where: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> Iterator[Finding]:
    before, after = _values(old), _values(new)
    if before == after:
        return
    removed = [v for v in before or () if after is not None and v not in after]  # no enum now: every value allowed
    added = [v for v in after or () if before is not None and v not in before]  # no enum before: nothing added
    if removed or (before is None and after is not None):
        what = ", ".join(map(repr, removed)) if removed else "any value but " + ", ".join(map(repr, after or ()))
        yield walk.finding(where, f"enum narrowed: {what} no longer allowed", _narrowed(walk.direction))
    if added or (after is None and before is not None):
        what = ", ".join(map(repr, added)) if added else "any value"
        yield walk.finding(where, f"enum widened: {what} now allowed", COMPATIBLE)


def _bounds(walk: _Walk, where: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> Iterator[Finding]:
    for key in (*_LOWER_BOUNDS, *_UPPER_BOUNDS):
        before, after = old.get(key), new.get(key)
        if before == after:
            continue
        lower = key in _LOWER_BOUNDS
        tighter = after is not None and (before is None or (after > before if lower else after < before))
        verb = "tightened" if tighter else "loosened"
        yield walk.finding(f"{where}", f"{key} {verb} ({before} -> {after})",
                           _narrowed(walk.direction) if tighter else COMPATIBLE)  # fmt: skip
    for key in ("pattern", "format"):
        before, after = old.get(key), new.get(key)
        if before != after:
            loosened = after is None
            yield walk.finding(where, f"{key} {'removed' if loosened else 'changed'} ({before!r} -> {after!r})",
                               COMPATIBLE if loosened else _narrowed(walk.direction))  # fmt: skip


def _properties(
    walk: _Walk, where: str, old: Mapping[str, Any], new: Mapping[str, Any], seen: frozenset[tuple[str, str]]
) -> Iterator[Finding]:
    before: Mapping[str, Any] = old.get("properties") or {}
    after: Mapping[str, Any] = new.get("properties") or {}
    required_before: set[str] = set(old.get("required") or ())
    required_after: set[str] = set(new.get("required") or ())
    for name in sorted(set(before) | set(after)):
        at = f"{where}/properties/{name}"
        if name not in after:
            yield walk.finding(at, "property removed", BREAKING)
        elif name not in before:
            required = name in required_after
            yield walk.finding(at, "required property added" if required else "optional property added",
                               _narrowed(walk.direction) if required else COMPATIBLE)  # fmt: skip
        else:
            yield from _diff(walk, at, before[name], after[name], seen)
    for name in sorted((required_after - required_before) & set(before)):
        yield walk.finding(f"{where}/properties/{name}", "made required", _narrowed(walk.direction))
    for name in sorted((required_before - required_after) & set(after)):
        yield walk.finding(f"{where}/properties/{name}", "no longer required", _widened(walk.direction))


def _definitions(
    walk: _Walk, where: str, old: Mapping[str, Any], new: Mapping[str, Any], seen: frozenset[tuple[str, str]]
) -> Iterator[Finding]:
    """Named definitions, compared by name (a removed or added one shows where it was referenced)."""
    before: Mapping[str, Any] = old.get("$defs") or {}
    after: Mapping[str, Any] = new.get("$defs") or {}
    for name in sorted(set(before) & set(after)):
        yield from _diff(walk, f"{where}/$defs/{name}", before[name], after[name], seen)


def _branches(items: list[Any]) -> dict[str, Any]:
    """allOf/anyOf/oneOf entries by what they are about: an if/then entry by its condition, others by position."""
    return {json.dumps(item["if"], sort_keys=True) if isinstance(item, Mapping) and "if" in item else str(i): item
            for i, item in enumerate(items)}  # fmt: skip


def _alternatives(
    walk: _Walk, where: str, old: Mapping[str, Any], new: Mapping[str, Any], seen: frozenset[tuple[str, str]]
) -> Iterator[Finding]:
    for key in ("anyOf", "oneOf", "allOf"):
        before: list[Any] = list(old.get(key) or [])
        after: list[Any] = list(new.get(key) or [])
        if before == after:
            continue
        paired_before, paired_after = _branches(before), _branches(after)
        conditional = all(not k.isdigit() for k in (*paired_before, *paired_after))
        if len(before) == len(after) or conditional:  # a type's if/then branch comes and goes with its enum value
            for i, name in enumerate(k for k in paired_before if k in paired_after):
                yield from _diff(walk, f"{where}/{key}/{i}", paired_before[name], paired_after[name], seen)
        elif key == "allOf" or len(after) < len(before):
            yield walk.finding(where, f"{key} lost alternatives ({len(before)} -> {len(after)})",
                               _narrowed(walk.direction))  # fmt: skip
        else:
            yield walk.finding(where, f"{key} gained alternatives ({len(before)} -> {len(after)})",
                               _widened(walk.direction))  # fmt: skip
