"""JSON Schema 2020-12 as canon applies it: one validator factory for models, tool arguments and configuration.

Two things differ from a bare `jsonschema` validator, and both are the specification's meaning:

* `format` is an assertion for every format in `FORMATS`; `require_formats` fails loudly at start-up when a
  checker is missing (its package is not installed), rather than letting a format silently accept anything;
* regular expressions (`pattern`, `patternProperties`, the `regex` format, canon's own id patterns) follow
  ECMA-262, as JSON Schema specifies, not Python's `re`: `$` matches only at the very end (Python's also matches
  before a final newline, so an id `"x\\n"` passed `^…$`), `.` matches no line terminator, `\\d` and `\\w` are
  ASCII, named groups are `(?<name>…)`. `ecma_regex` translates a pattern once and caches it.

A failed `oneOf` over a tagged union reports the errors of the branch whose tag matched, with their pointers.
`unevaluatedProperties` sees `patternProperties` through `jsonschema`'s own code, routed to the same matcher.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

import re2  # type: ignore[import-untyped]
from jsonschema import Draft202012Validator, FormatChecker, SchemaError, ValidationError, validators
from jsonschema.exceptions import best_match
from jsonschema.protocols import Validator
from referencing import Registry

__all__ = ["FORMATS", "FORMAT_CHECKER", "Regex", "check_schema", "ecma_regex", "require_formats", "schema_validator"]

# Every format of JSON Schema 2020-12 a model author may rely on; each is asserted on every write and argument.
FORMATS = (
    "date-time", "date", "time", "duration", "email", "idn-email", "hostname", "idn-hostname", "ipv4", "ipv6",
    "uri", "uri-reference", "iri", "iri-reference", "uuid", "uri-template", "json-pointer",
    "relative-json-pointer", "regex",
)  # fmt: skip

_CLASS_ESCAPES = {
    "d": "0-9",
    "w": "A-Za-z0-9_",
    "b": "\\x08",  # a backspace, in a class
    "s": "\\t\\n\\v\\f\\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff",
}
_ESCAPES = {"d": "[0-9]", "D": "[^0-9]", "w": "[A-Za-z0-9_]", "W": "[^A-Za-z0-9_]",
            "s": f"[{_CLASS_ESCAPES['s']}]", "S": f"[^{_CLASS_ESCAPES['s']}]"}  # fmt: skip
_DOT = "[^\n\r\u2028\u2029]"  # the characters themselves: RE2 has no \\u escape
_PYTHON_ONLY = re.compile(r"(?<!\\)\(\?(?:P|#|[aiLmsux]+\))")  # (?P<n>…), (?#…), global flags (?i)
_LOOKAROUND = re.compile(r"(?<!\\)\(\?<?[=!]")
_BACKREFERENCE = re.compile(r"(?<!\\)\\(?:[1-9]|k<)")
_UNICODE_ESCAPE = re.compile(r"([0-9A-Fa-f]{4})|\{([0-9A-Fa-f]{1,6})\}")
_SURROGATE = re.compile("[\ud800-\udfff]")
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is the caller's error, not a line on stderr
_OPTIONS.max_mem = 8 << 20  # RE2's own default, stated: a pattern that needs more is refused, not matched slowly


class Regex:
    """A compiled ECMA-262 pattern, matched by RE2 in time linear in the value: no pattern a model author writes
    can make one value cost more than that (a backtracking engine takes exponential time on `^(a+)+$`).

    `search` returns a match or None, as `re.Pattern.search` does; a value with a lone surrogate (which canon
    refuses to store anyway) is matched with U+FFFD in its place, since RE2 reads UTF-8.
    """

    __slots__ = ("_compiled", "_engine", "pattern")

    def __init__(self, pattern: str, compiled: Any) -> None:
        self.pattern = pattern
        self._compiled = compiled
        self._engine = _engine(compiled)

    def search(self, value: str) -> object | None:
        return self._compiled.search(_SURROGATE.sub("\ufffd", value))

    def match(self, value: str) -> object | None:
        return self._compiled.match(_SURROGATE.sub("\ufffd", value))

    def found_in(self, value: str) -> bool:
        """Whether `search` would find a match: the same engine, without building the match (a quarter of the
        time: `re2`'s match object maps every offset back to characters)."""
        if self._engine is None:
            return self.search(value) is not None
        text = (value if value.isascii() else _SURROGATE.sub("\ufffd", value)).encode()
        return self._engine.Match(_UNANCHORED, text, 0, len(text))[0] != _NO_MATCH

    def starts(self, value: str) -> bool:
        """Whether `match` would find a match (see `found_in`)."""
        if self._engine is None:
            return self.match(value) is not None
        text = (value if value.isascii() else _SURROGATE.sub("\ufffd", value)).encode()
        return self._engine.Match(_ANCHOR_START, text, 0, len(text))[0] != _NO_MATCH


# The compiled RE2 program under `re2`'s wrapper, and how it is called (what `re2._Regexp._match` does first): used
# where only whether there is a match matters. If a release of `re2` names them otherwise, the wrapper is used.
_UNANCHORED = getattr(getattr(re2, "_Anchor", None), "UNANCHORED", None)
_ANCHOR_START = getattr(getattr(re2, "_Anchor", None), "ANCHOR_START", None)
_NO_MATCH = getattr(re2, "_NULL_SPAN", None)


def _engine(compiled: Any) -> Any:
    engine = getattr(compiled, "_regexp", None)
    if engine is None or _UNANCHORED is None or _ANCHOR_START is None or _NO_MATCH is None:
        return None
    return engine if hasattr(engine, "Match") else None


@lru_cache(maxsize=4096)
def ecma_regex(pattern: str) -> Regex:
    """The pattern that matches as the ECMA-262 `pattern` does, in linear time; `re.error` if it is not one, or if
    it needs backtracking (backreferences, lookahead, lookbehind), which canon does not run.

    Search with it (`.search`), as JSON Schema does: a pattern is not implicitly anchored.
    """
    if _PYTHON_ONLY.search(pattern):
        raise re.error(f"{pattern!r} uses Python-only syntax, not ECMA-262")
    if _LOOKAROUND.search(pattern) or _BACKREFERENCE.search(pattern):
        raise re.error(f"{pattern!r} uses a backreference or lookaround: canon matches patterns in linear time "
                       "(RE2), which these need backtracking for; write the pattern without them")  # fmt: skip
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            escaped = pattern[i + 1]
            if escaped in "AZz":
                raise re.error(f"\\{escaped} is not ECMA-262 (use ^ and $)")
            if escaped == "u" and (code := _UNICODE_ESCAPE.match(pattern, i + 2)):
                out.append(f"\\x{{{code[1] or code[2]}}}")  # RE2 writes \uXXXX and \u{X…} as \x{…}
                i = code.end()
                continue
            table = _CLASS_ESCAPES if in_class else _ESCAPES
            out.append(table.get(escaped, char + escaped))
            i += 2
            continue
        if in_class:
            in_class = char != "]"
            out.append(char)
        elif char == "[":
            in_class = True
            out.append(char)
        elif char == "$":
            out.append(r"\z")
        elif char == ".":
            out.append(_DOT)
        elif pattern.startswith("(?<", i):
            out.append("(?P<")
            i += 3
            continue
        else:
            out.append(char)
        i += 1
    try:
        return Regex(pattern, re2.compile("".join(out), _OPTIONS))
    except re2.error as error:
        reason = error.args[0].decode() if error.args and isinstance(error.args[0], bytes) else str(error)
        raise re.error(f"{pattern!r} is not a pattern canon can match: {reason}") from None


def _matches(pattern: str, value: str) -> bool:
    return ecma_regex(pattern).found_in(value)


# -- the keywords whose matching is a regular expression -----------------------------------------------------------
def _pattern(validator: Any, pattern: str, instance: Any, schema: Mapping[str, Any]) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _matches(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _matches(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    declared: Mapping[str, Any] = schema.get("properties", {})
    patterns: Mapping[str, Any] = schema.get("patternProperties", {})
    extras = [k for k in instance if k not in declared and not any(_matches(p, k) for p in patterns)]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif additional is False and extras:
        names = ", ".join(repr(k) for k in sorted(extras))
        allowed = ", ".join([*sorted(declared), *(f"a name matching {p!r}" for p in patterns)]) or "none"
        yield ValidationError(f"{names} {'is' if len(extras) == 1 else 'are'} not allowed (allowed: {allowed})")


def _one_of(validator: Any, branches: list[Any], instance: Any, schema: Mapping[str, Any]) -> Iterator[ValidationError]:
    """`oneOf`, telling a caller what is wrong with the branch they meant: when the instance fails every branch and
    exactly one branch has no `const` failing on a member (a tagged union whose tag matched, e.g. `"op":
    "upsert_node"` in a batch), that branch's own errors, with their pointers, instead of "not valid under any"."""
    failed: list[list[ValidationError]] = []
    valid: list[Any] = []
    for index, branch in enumerate(branches):
        errors = list(validator.descend(instance, branch, schema_path=index))
        if errors:
            failed.append(errors)
        else:
            valid.append(branch)
    if len(valid) > 1:
        yield ValidationError(f"{instance!r} is valid under each of {', '.join(map(repr, valid))}")
    if valid:
        return
    tagged = [e for e in failed if not any(x.validator == "const" and len(x.relative_path) == 1 for x in e)]
    if len(tagged) == 1:
        yield from tagged[0]
    else:
        everything = [error for errors in failed for error in errors]
        yield ValidationError(f"{instance!r} is not valid under any of the given schemas", context=everything)


def _is_regex(instance: object) -> bool:
    if isinstance(instance, str):
        ecma_regex(instance)
    return True


# RFC 3987 2.2: the characters an IRI may hold beyond a URI's; iprivate only in the query
_UCSCHAR = ((0xA0, 0xD7FF), (0xF900, 0xFDCF), (0xFDF0, 0xFFEF), *((p << 16, (p << 16) + 0xFFFD) for p in range(1, 14)),
            (0xE1000, 0xEFFFD))  # fmt: skip
_IPRIVATE = ((0xE000, 0xF8FF), (0xF0000, 0xFFFFD), (0x100000, 0x10FFFD))


def _in(ranges: tuple[tuple[int, int], ...], char: str) -> bool:
    return any(low <= ord(char) <= high for low, high in ranges)


def _iri_as_uri(value: str) -> str | None:
    """The URI an IRI maps to (RFC 3987 3.1: each character beyond ASCII percent-encoded as UTF-8); None when
    `value` holds a character no IRI may hold."""
    query = value.find("?")
    out: list[str] = []
    for i, char in enumerate(value):
        if char.isascii():
            out.append(char)
        elif _in(_UCSCHAR, char) or (query != -1 and i > query and _in(_IPRIVATE, char)):
            out.append("".join(f"%{b:02X}" for b in char.encode("utf-8")))
        else:
            return None
    return "".join(out)


def _iri_checker(rule: str) -> Any:
    """A checker of `iri` (rule "URI") or `iri-reference` ("URI_reference"): the URI the IRI maps to must be one.
    canon's own, so no IRI grammar is compiled at start-up (the package jsonschema would use took 2 s to import)."""
    from rfc3986_validator import validate_rfc3986  # pyright: ignore[reportMissingTypeStubs]

    def check(instance: object) -> bool:
        if not isinstance(instance, str):
            return True
        uri = _iri_as_uri(instance)
        return uri is not None and bool(validate_rfc3986(uri, rule=rule))

    return check


def require_formats(checker: FormatChecker) -> None:
    """Fail loudly if a format of `FORMATS` has no checker (its package is missing): it would accept anything."""
    missing = [name for name in FORMATS if name not in checker.checkers]
    if missing:
        raise RuntimeError(
            f"No checker for the JSON Schema format(s) {', '.join(missing)}: install canon with its dependencies "
            "(the format checkers jsonschema uses), or values of these formats would go unchecked."
        )


def _format_checker() -> FormatChecker:
    checker = FormatChecker(formats=())
    checker.checkers = dict(Draft202012Validator.FORMAT_CHECKER.checkers)
    checker.checks("regex", raises=re.error)(_is_regex)
    checker.checks("iri")(_iri_checker("URI"))
    checker.checks("iri-reference")(_iri_checker("URI_reference"))
    require_formats(checker)
    return checker


FORMAT_CHECKER = _format_checker()


class _EcmaSearch:
    """What `jsonschema._utils` calls `re` for: `search`, the one call it makes (matching `patternProperties` for
    `unevaluatedProperties` and `additionalProperties`), with canon's linear-time ECMA-262 matcher, so no keyword
    reaches Python's backtracking engine with a model's pattern. `_route_jsonschema_patterns` fails loudly at
    import if a new jsonschema stops calling it so."""

    @staticmethod
    def search(pattern: str, value: str) -> object | None:
        return ecma_regex(pattern).search(value)


def _route_jsonschema_patterns() -> None:
    internals: Any = importlib.import_module("jsonschema._utils")
    if getattr(internals, "re", None) is not re and not isinstance(internals.re, _EcmaSearch):
        raise RuntimeError("jsonschema._utils no longer matches patterns through `re`: check core/values/dialect.py")
    internals.re = _EcmaSearch()


_route_jsonschema_patterns()

_Validator: Any = validators.extend(
    Draft202012Validator,
    {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
        "oneOf": _one_of,
    },
    format_checker=FORMAT_CHECKER,
)


def schema_validator(schema: Mapping[str, Any], registry: Registry[Any] | None = None) -> Validator:
    """A validator of `schema` (JSON Schema 2020-12) with ECMA-262 regular expressions and asserted formats."""
    if registry is None:
        return _Validator(dict(schema), format_checker=FORMAT_CHECKER)  # type: ignore[no-any-return]
    return _Validator(dict(schema), registry=registry, format_checker=FORMAT_CHECKER)  # type: ignore[no-any-return]


def check_schema(schema: Mapping[str, Any]) -> None:
    """Raise `SchemaError` if `schema` is not a JSON Schema 2020-12 document (its regular expressions ECMA-262)."""
    error = best_match(schema_validator(Draft202012Validator.META_SCHEMA).iter_errors(schema))
    if error is not None:
        raise SchemaError.create_from(error)
