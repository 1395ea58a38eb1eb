"""JSON Schema compatibility: how a change to one schema affects the callers who send or receive its values.

`diff_schema(old, new, direction)` walks two schemas side by side and yields one `Finding` per difference, with
its classification. The direction decides: a schema that callers *send* (`"input"`: tool arguments, request
bodies) may accept more, never less; a schema callers *receive* (`"output"`: results, responses) may promise
more, and may narrow the values it produces only if every stored record already fits (`NEEDS_DATA_CHECK`, which
`canon model diff` verifies against a store).

The classes are ordered, least first: `NONE` (nothing a caller meets changed: what no finding reports),
`COMPATIBLE`, `NEEDS_DATA_CHECK`, `BREAKING`; `worst` picks the most severe, `CLASSES` lists them in that order.
`$ref`s are followed on both sides (in the documents given as `roots`), so every rule compares what a reference
points to, whether or not its name changed; a reference met again on its own path is compared once.

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
| pattern changed, neither proven looser nor shown tighter | needs data check | needs data check |
| description, title, examples, deprecated | compatible | compatible |

`x-canon-renamed-from` is no change of a schema: `core.seam.model_diff` reports the rename it declares.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from core.lang.pattern_order import LOOSER, SAME, TIGHTER, compare_patterns

__all__ = [
    "BREAKING",
    "CLASSES",
    "COMPATIBLE",
    "NEEDS_DATA_CHECK",
    "NONE",
    "Classification",
    "Finding",
    "annotation_changes",
    "diff_schema",
    "keyed",
    "named",
    "worst",
]

Classification = Literal["none", "compatible", "needs-data-check", "breaking"]
Direction = Literal["input", "output"]
NONE: Classification = "none"  # nothing a caller meets changed
COMPATIBLE: Classification = "compatible"  # every caller goes on working: additions, loosened inputs, descriptions
NEEDS_DATA_CHECK: Classification = "needs-data-check"  # holds only if every stored record fits the new model
BREAKING: Classification = "breaking"  # some caller can fail: something removed, an input narrowed
CLASSES: tuple[Classification, ...] = (NONE, COMPATIBLE, NEEDS_DATA_CHECK, BREAKING)  # least severe first
_RANK: dict[Classification, int] = {c: i for i, c in enumerate(CLASSES)}

_ANNOTATIONS = frozenset({"description", "title", "examples", "deprecated", "default", "$comment", "$schema", "$id"})
_LOWER_BOUNDS = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
_UPPER_BOUNDS = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
# what a type says about the graph; its write rules (key, cardinality, ends, acyclic) are `core.seam.model_diff`'s
_CANON_RULES = frozenset({"x-canon-node", "x-canon-edge", "x-canon-model"})
_HANDLED = frozenset({"type", "enum", "const", "properties", "required", "items", "$ref", "$defs",
                      "additionalProperties", "pattern", "format", "anyOf", "oneOf", "allOf", "x-canon-renamed-from",
                      *_CANON_RULES, *_LOWER_BOUNDS, *_UPPER_BOUNDS, *_ANNOTATIONS})  # fmt: skip


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
    """The most severe of `classifications` (`NONE` when there are none)."""
    result: Classification = NONE
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


_Seen = frozenset[tuple[frozenset[str], frozenset[str]]]  # the references followed on each side, on this path


@dataclass(frozen=True)
class _Walk:
    surface: str
    direction: Direction
    old_root: Mapping[str, Any]
    new_root: Mapping[str, Any]
    annotations: bool = True
    changed_refs: dict[str, bool] = field(default_factory=dict[str, bool], compare=False)

    def finding(self, where: str, change: str, classification: Classification) -> Finding:
        return Finding(self.surface, where, change, classification)

    def unchanged(self, old: Any, new: Any) -> bool:
        """Whether `old` and `new` are the same text and every reference in it points to the same on both sides."""
        return old == new and not any(map(self.changed, _references(old)))

    def changed(self, ref: str) -> bool:
        """Whether the schema `ref` points to differs between the roots, or references one that does."""
        if ref not in self.changed_refs:
            self.changed_refs[ref] = False  # a reference back to itself changes nothing by itself
            before, after = _pointer(self.old_root, ref), _pointer(self.new_root, ref)
            self.changed_refs[ref] = before != after or any(map(self.changed, _references(before)))
        return self.changed_refs[ref]


def _references(schema: Any) -> Iterator[str]:
    """Every local `$ref` anywhere in `schema`."""
    if isinstance(schema, Mapping):
        for key, value in schema.items():  # type: ignore[union-attr]
            if key == "$ref" and isinstance(value, str) and value.startswith("#/"):
                yield value
            else:
                yield from _references(value)
    elif isinstance(schema, list):
        for item in schema:  # type: ignore[union-attr]
            yield from _references(item)


def diff_schema(
    surface: str,
    where: str,
    old: Any,
    new: Any,
    direction: Direction,
    roots: tuple[Mapping[str, Any], Mapping[str, Any]] | None = None,
    *,
    annotations: bool = True,
) -> list[Finding]:
    """Every difference between the schemas `old` and `new` at `where`, classified for `direction`.

    `roots` are the documents local `$ref`s resolve in (default: the schemas themselves). Without `annotations`,
    only what a schema accepts is compared (descriptions, titles, examples and the like are left out)."""
    old_root, new_root = roots or (old, new)
    walk = _Walk(surface, direction, old_root, new_root, annotations)
    return list(_diff(walk, where, old, new, frozenset()))


def _pointer(root: Mapping[str, Any], ref: str) -> Any:
    target: Any = root
    for part in ref[2:].split("/"):
        target = target.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(target, Mapping) else None
    return target


def _resolve(
    root: Mapping[str, Any], schema: Any, followed: frozenset[str] = frozenset()
) -> tuple[Any, frozenset[str]]:
    """`schema` as what it means: its local `$ref` replaced by what it points to (its other members kept), again
    while the result is a reference, then seen through a wrapper of references (`_unwrapped`); and the references
    followed. A reference that points nowhere, or back to one followed already, stays as it is."""
    while (isinstance(schema, Mapping) and isinstance(ref := schema.get("$ref"), str) and ref.startswith("#/")
           and ref not in followed and isinstance(target := _pointer(root, ref), Mapping)):  # fmt: skip
        followed |= {ref}
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}  # type: ignore[dict-item]
    if isinstance(schema, Mapping):
        return _unwrapped(root, schema, followed)  # type: ignore[arg-type]
    return schema, followed


def _unwrapped(
    root: Mapping[str, Any], schema: Mapping[str, Any], followed: frozenset[str]
) -> tuple[Mapping[str, Any], frozenset[str]]:
    """`schema` with an `allOf` of references (or a lone `anyOf`/`oneOf` one) merged into it where no keyword
    clashes: `{"allOf": [{"$ref": "#/$defs/Storage"}], "description": ...}` means what `Storage` says."""
    for key in ("allOf", "anyOf", "oneOf"):
        members = schema.get(key)
        if not isinstance(members, list) or not members or (key != "allOf" and len(members) != 1):  # type: ignore[arg-type]
            continue
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != key}
        reached = followed
        for member in members:  # type: ignore[union-attr]
            if not (isinstance(member, Mapping) and set(member) - _ANNOTATIONS == {"$ref"}):  # type: ignore[arg-type]
                break
            target, reached = _resolve(root, member, reached)
            if "$ref" in target or set(target) & set(merged) - _ANNOTATIONS:
                break
            merged = {**target, **merged}
        else:
            return merged, reached
    return schema, followed


def _diff(walk: _Walk, where: str, old: Any, new: Any, seen: _Seen) -> Iterator[Finding]:
    old, old_refs = _resolve(walk.old_root, old)
    new, new_refs = _resolve(walk.new_root, new)
    if old_refs or new_refs:
        if (old_refs, new_refs) in seen:
            return  # the same references again on this path (a recursive schema): compared where first met
        seen = seen | {(old_refs, new_refs)}
    if walk.unchanged(old, new):
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
    for key in sorted((_ANNOTATIONS | _CANON_RULES) & (set(old) | set(new)) if walk.annotations else ()):
        if old.get(key) != new.get(key) and key not in ("$schema", "$id"):  # a write rule shows on the writes row
            yield walk.finding(where, f"{key} changed", COMPATIBLE)


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
    before, after = old.get("format"), new.get("format")
    if before != after:
        loosened = after is None
        yield walk.finding(where, f"format {'removed' if loosened else 'changed'} ({before!r} -> {after!r})",
                           COMPATIBLE if loosened else _narrowed(walk.direction))  # fmt: skip
    yield from _pattern(walk, where, old.get("pattern"), new.get("pattern"))


def _pattern(walk: _Walk, where: str, before: Any, after: Any) -> Iterator[Finding]:
    """A changed pattern as `core.lang.pattern_order` proves it: looser (or the same values) is compatible, a value the
    old one accepts and the new one refuses narrows, and what is neither needs a data check."""
    if before == after:
        return
    change = f"({before!r} -> {after!r})"
    if after is None:
        yield walk.finding(where, f"pattern removed {change}", COMPATIBLE)
    elif before is None or not isinstance(before, str) or not isinstance(after, str):
        yield walk.finding(where, f"pattern added {change}", _narrowed(walk.direction))
    elif (order := compare_patterns(before, after)).order in (LOOSER, SAME):
        what = "loosened" if order.order == LOOSER else "rewritten, accepting the same values"
        yield walk.finding(where, f"pattern {what} {change}", COMPATIBLE)
    elif order.order == TIGHTER:
        yield walk.finding(where, f"pattern tightened {change}: {order.refused!r} no longer allowed",
                           _narrowed(walk.direction))  # fmt: skip
    else:
        yield walk.finding(where, f"pattern changed {change}; canon cannot tell whether it refuses values the old "
                           "one accepted: check the data", NEEDS_DATA_CHECK)  # fmt: skip


def _properties(
    walk: _Walk, where: str, old: Mapping[str, Any], new: Mapping[str, Any], seen: _Seen
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
    walk: _Walk, where: str, old: Mapping[str, Any], new: Mapping[str, Any], seen: _Seen
) -> Iterator[Finding]:
    """Named definitions, compared by name (a removed or added one shows where it was referenced)."""
    before: Mapping[str, Any] = old.get("$defs") or {}
    after: Mapping[str, Any] = new.get("$defs") or {}
    for name in sorted(set(before) & set(after)):
        yield from _diff(walk, f"{where}/$defs/{name}", before[name], after[name], seen)


def _branches(items: list[Any]) -> dict[str, Any]:
    """allOf/anyOf/oneOf entries by what they are about: an if/then entry by its condition, a reference by what it
    names, others by position."""
    return {_branch_key(item) or str(i): item for i, item in enumerate(items)}


def _branch_key(item: Any) -> str | None:
    if not isinstance(item, Mapping):
        return None
    if "if" in item:
        return "if " + json.dumps(item["if"], sort_keys=True)
    if set(item) - _ANNOTATIONS == {"$ref"}:  # type: ignore[arg-type]
        return f"$ref {item['$ref']}"
    return None


def _alternatives(
    walk: _Walk, where: str, old: Mapping[str, Any], new: Mapping[str, Any], seen: _Seen
) -> Iterator[Finding]:
    for key in ("anyOf", "oneOf", "allOf"):
        before: list[Any] = list(old.get(key) or [])
        after: list[Any] = list(new.get(key) or [])
        if walk.unchanged(before, after):
            continue
        paired_before, paired_after = _branches(before), _branches(after)
        by_name = all(not k.isdigit() for k in (*paired_before, *paired_after))
        if len(before) == len(after) or by_name:
            for i, name in enumerate(k for k in paired_before if k in paired_after):
                yield from _diff(walk, f"{where}/{key}/{i}", paired_before[name], paired_after[name], seen)
        if by_name:  # a type's if/then branch comes and goes with its enum value, which is compared there
            yield from _members(walk, where, key, paired_before, paired_after)
        elif len(before) == len(after):
            continue
        elif key == "allOf" or len(after) < len(before):
            yield walk.finding(where, f"{key} lost alternatives ({len(before)} -> {len(after)})",
                               _narrowed(walk.direction))  # fmt: skip
        else:
            yield walk.finding(where, f"{key} gained alternatives ({len(before)} -> {len(after)})",
                               _widened(walk.direction))  # fmt: skip


def _members(
    walk: _Walk, where: str, key: str, before: Mapping[str, Any], after: Mapping[str, Any]
) -> Iterator[Finding]:
    """References added to or removed from an allOf/anyOf/oneOf: one more allOf member, or one fewer alternative,
    narrows what is valid."""
    narrows = "added" if key == "allOf" else "removed"
    for name in sorted(set(before) ^ set(after)):
        if name.startswith("$ref "):
            change = "removed" if name in before else "added"
            narrowed = _narrowed(walk.direction) if change == narrows else _widened(walk.direction)
            yield walk.finding(where, f"{key} member {name[5:]} {change}", narrowed)
