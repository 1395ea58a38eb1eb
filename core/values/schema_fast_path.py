"""A quick yes for values a JSON Schema accepts: a check compiled once from a schema, which answers True only when
canon's validator (`core.values.dialect.schema_validator`) would find no error, and False whenever it is unsure.

Validating a record with `jsonschema` walks the schema anew for each value (a validator object per subschema, a
registry lookup per `$ref`): about 100 µs for a person of the default model, most of an import's time. Nearly every
record of an import is valid, and for those the answer is all a caller needs. `accepts(schema, defs)` compiles the
keywords models use into nested closures; a record it accepts needs no further check, and any other record is
validated by `jsonschema` as before, so every refusal, its message and its pointer come from there.

The closures decide exactly as the dialect does (the same `ecma_regex` matcher, the same `FORMAT_CHECKER`, the same
`additionalProperties` rule with `patternProperties`) or more strictly where exactness would cost more than it earns
(an `integer` written as `1.0`, an `enum` of non-strings compared by type and value, `uniqueItems` over anything but
strings): a stricter no only sends the record to `jsonschema`. A schema with a keyword outside `KEYWORDS` (or a
`$ref` other than `#/$defs/<name>`) compiles to None: its records always go to `jsonschema`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from core.values.dialect import FORMAT_CHECKER, ecma_regex

__all__ = ["ANNOTATIONS", "KEYWORDS", "Accept", "accepts"]

Accept = Callable[[Any], bool]

# keywords that never make a value invalid (JSON Schema 2020-12's annotations, and any `x-` extension)
ANNOTATIONS = frozenset({"title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly",
                         "$comment"})  # fmt: skip
KEYWORDS = frozenset({"type", "enum", "const", "minLength", "maxLength", "pattern", "format", "minimum", "maximum",
                      "exclusiveMinimum", "exclusiveMaximum", "properties", "patternProperties", "required",
                      "additionalProperties", "items", "minItems", "maxItems", "uniqueItems", "minProperties",
                      "maxProperties", "$ref", "allOf", "anyOf"})  # fmt: skip

_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: type(v) is int,  # stricter: 1.0 is an integer to JSON Schema, and goes to jsonschema
    "number": lambda v: type(v) is int or type(v) is float,
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}
_SCALARS = (str, int, float, bool, type(None))
_MEMBERS = frozenset({"properties", "patternProperties", "additionalProperties"})


class _Unsupported(Exception):
    """A schema holds something the fast path does not decide."""


def accepts(schema: Any, defs: Mapping[str, Any]) -> Accept | None:
    """The quick check of `schema` (whose `#/$defs/<name>` references name `defs`), or None if it has a keyword this
    module does not decide. The check's True means canon's validator finds no error; False means "ask it"."""
    try:
        return _Compiler(defs).compile(schema)
    except (_Unsupported, re.error):  # re.error: a pattern the dialect refuses, which jsonschema reports
        return None


class _Compiler:
    def __init__(self, defs: Mapping[str, Any]) -> None:
        self.defs = defs
        self.compiled: dict[str, Accept] = {}
        self.compiling: set[str] = set()

    def compile(self, schema: Any) -> Accept:
        if schema is True:
            return lambda _: True
        if schema is False:
            return lambda _: False
        if not isinstance(schema, dict):
            raise _Unsupported
        node: dict[str, Any] = schema  # pyright: ignore[reportUnknownVariableType]
        checks: list[Accept] = []
        if _MEMBERS & node.keys():
            checks.append(self.members(node))
        for keyword, value in node.items():
            if keyword in ANNOTATIONS or keyword.startswith("x-"):
                continue
            if keyword not in KEYWORDS:
                raise _Unsupported
            check = self.keyword(keyword, value, node)
            if check is not None:
                checks.append(check)
        return _all(checks)

    def keyword(self, keyword: str, value: Any, schema: Mapping[str, Any]) -> Accept | None:
        if keyword == "type":
            return _type(value)
        if keyword in ("enum", "const"):
            return _one_of_values(value if keyword == "enum" else [value])
        if keyword in ("minLength", "maxLength"):
            bound = _count(value)
            return (lambda v: not isinstance(v, str) or len(v) >= bound) if keyword == "minLength" else (
                lambda v: not isinstance(v, str) or len(v) <= bound)  # fmt: skip
        if keyword == "pattern":
            regex = ecma_regex(value)
            return lambda v: not isinstance(v, str) or regex.found_in(v)
        if keyword == "format":
            fmt = str(value)
            return lambda v: FORMAT_CHECKER.conforms(v, fmt)
        if keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            return _bound(keyword, value)
        if keyword in _MEMBERS:
            return None  # checked together, by `members`
        if keyword == "required":
            names = list(value)
            return lambda v: not isinstance(v, dict) or all(name in v for name in names)
        if keyword in ("minProperties", "maxProperties"):
            bound = _count(value)
            return (lambda v: not isinstance(v, dict) or len(v) >= bound) if keyword == "minProperties" else (
                lambda v: not isinstance(v, dict) or len(v) <= bound)  # fmt: skip
        if keyword == "items":
            if "prefixItems" in schema:
                raise _Unsupported
            each = self.compile(value)

            def items(v: Any) -> bool:
                if isinstance(v, list):
                    for item in v:  # pyright: ignore[reportUnknownVariableType]
                        if not each(item):
                            return False
                return True

            return items
        if keyword in ("minItems", "maxItems"):
            bound = _count(value)
            return (lambda v: not isinstance(v, list) or len(v) >= bound) if keyword == "minItems" else (
                lambda v: not isinstance(v, list) or len(v) <= bound)  # fmt: skip
        if keyword == "uniqueItems":
            return _unique if value is True else None
        if keyword == "$ref":
            return self.reference(value)
        branches = [self.compile(s) for s in value]  # allOf, anyOf
        return _all(branches) if keyword == "allOf" else lambda v: any(b(v) for b in branches)

    def members(self, schema: Mapping[str, Any]) -> Accept:
        """`properties`, `patternProperties` and `additionalProperties` together, as the dialect applies them: a
        member named in `properties` meets its schema, one whose name matches a pattern meets that pattern's, and
        any other meets `additionalProperties` (False: there is none)."""
        declared = {name: self.compile(s) for name, s in dict(schema.get("properties", {})).items()}
        patterns = [(ecma_regex(p), self.compile(s)) for p, s in dict(schema.get("patternProperties", {})).items()]
        additional = schema.get("additionalProperties", True)
        other = None if additional is True else self.compile(additional)

        def check(v: Any) -> bool:
            if not isinstance(v, dict):
                return True
            members: dict[Any, Any] = v  # pyright: ignore[reportUnknownVariableType]
            for name, member in members.items():
                found = declared.get(name)
                if found is not None and not found(member):
                    return False
                matched = False
                for regex, each in patterns:
                    if isinstance(name, str) and regex.found_in(name):
                        matched = True
                        if not each(member):
                            return False
                if not isinstance(name, str) and patterns:
                    return False  # a name jsonschema would match as text: let it decide
                if found is None and not matched and other is not None and not other(member):
                    return False
            return True

        return check

    def reference(self, ref: Any) -> Accept:
        prefix = "#/$defs/"
        if not isinstance(ref, str) or not ref.startswith(prefix) or "/" in ref[len(prefix) :]:
            raise _Unsupported
        name = ref[len(prefix) :]
        if name in self.compiled:
            return self.compiled[name]
        if name in self.compiling or name not in self.defs or "~" in name or "%" in name:
            raise _Unsupported  # recursive, missing, or escaped: jsonschema's to resolve
        self.compiling.add(name)
        self.compiled[name] = found = self.compile(self.defs[name])
        self.compiling.discard(name)
        return found


def _all(checks: list[Accept]) -> Accept:
    if not checks:
        return lambda _: True
    if len(checks) == 1:
        return checks[0]

    def every(v: Any) -> bool:
        for check in checks:  # noqa: SIM110 (a loop: all() over a generator costs more, per value)
            if not check(v):
                return False
        return True

    return every


def _type(value: Any) -> Accept:
    names = [value] if isinstance(value, str) else list(value)
    if not all(isinstance(n, str) and n in _TYPES for n in names):
        raise _Unsupported
    tests = [_TYPES[n] for n in names]
    if len(tests) == 1:
        return tests[0]
    return lambda v: any(test(v) for test in tests)


def _one_of_values(values: Any) -> Accept:
    """`enum`/`const`: the value equals one of them, of the same Python type (so True never passes for 1)."""
    if not isinstance(values, list) or not all(isinstance(v, _SCALARS) for v in values):  # pyright: ignore[reportUnknownVariableType]
        raise _Unsupported
    allowed = {(type(v), v) for v in values}  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    return lambda v: isinstance(v, _SCALARS) and (type(v), v) in allowed


def _count(value: Any) -> int:
    if type(value) is not int:
        raise _Unsupported
    return value


def _bound(keyword: str, value: Any) -> Accept:
    if type(value) not in (int, float):
        raise _Unsupported
    number = _TYPES["number"]
    if keyword == "minimum":
        return lambda v: not number(v) or v >= value
    if keyword == "maximum":
        return lambda v: not number(v) or v <= value
    if keyword == "exclusiveMinimum":
        return lambda v: not number(v) or v > value
    return lambda v: not number(v) or v < value


def _unique(v: Any) -> bool:
    """`uniqueItems`: strings all different (any other array goes to jsonschema, which compares JSON values)."""
    if not isinstance(v, list):
        return True
    items: list[Any] = v  # pyright: ignore[reportUnknownVariableType]
    return all(isinstance(item, str) for item in items) and len(set(items)) == len(items)
