"""Whether one ECMA-262 `pattern` accepts every value another accepts: the order `canon model diff` needs to call a
changed pattern looser, tighter, or neither that it can prove.

`compare_patterns(old, new)` parses both patterns (Python's own regular-expression parser, on patterns
`core.values.dialect.ecma_regex` accepts) into small terms and proves inclusion of their languages, as JSON Schema
matches a pattern: anywhere in the value unless anchored (`^`, `$`). The proof is structural and incomplete on
purpose: it sees through groups, alternatives (added or removed), character classes (a wider class, `\\d`, `.`),
quantifier bounds (`{6}` -> `{6,8}`, `?`, `*`, `+`) and anchors (dropped, or an anchored prefix kept), and gives up
on anything else, on a pattern it cannot parse, or past a fixed amount of work.

A change is `LOOSER` (or `SAME`) only when proven so; `TIGHTER` only with a witness: a value built from the old
pattern that the old pattern accepts and the new one refuses (both matched as canon matches them). Anything else
is `UNKNOWN`, an honest answer: the caller says "check your data", never "compatible".

The terms follow ECMA-262's meaning, which `core.values.dialect` gives RE2: `.` matches no line terminator, `\\d`, `\\w`
and `\\s` are ASCII (and ECMA's white space), so the proof holds for what canon matches.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Any, Literal

from core.values.dialect import ecma_regex

__all__ = ["LOOSER", "SAME", "TIGHTER", "UNKNOWN", "Order", "PatternChange", "compare_patterns"]

Order = Literal["same", "looser", "tighter", "unknown"]
SAME: Order = "same"  # both accept exactly the same values
LOOSER: Order = "looser"  # the new pattern accepts every value the old one does, and maybe more
TIGHTER: Order = "tighter"  # the new pattern refuses a value the old one accepts
UNKNOWN: Order = "unknown"  # neither is shown

_parser: Any = importlib.import_module("re._parser")  # no stub; the parse tree is read through its op names
_MAX_CODE = 0x10FFFF
_INFINITE = 1 << 62  # a quantifier without an upper bound
_BUDGET = 5_000  # proof steps per comparison: a pattern pair past it is unknown, never a slow answer
_SAMPLES = 256  # values built from the old pattern to look for one the new pattern refuses
_LONGEST = 1024  # characters in a value built to try
_MOST_TERMS = 256  # a pattern with more is not read (the proof's steps grow with the terms' product)

Ranges = tuple[tuple[int, int], ...]  # sorted, disjoint, inclusive code point ranges


class _Hashed:
    """A frozen term that hashes once: the proof looks the same terms up many times."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash(tuple(getattr(self, f.name) for f in fields(self))))  # type: ignore[arg-type]

    def cached_hash(self) -> int:
        return self.__dict__["_hash"]


@dataclass(frozen=True)
class _Chars(_Hashed):
    """One character out of `ranges`."""

    ranges: Ranges
    __hash__ = _Hashed.cached_hash


@dataclass(frozen=True)
class _Repeat(_Hashed):
    """`body` repeated `low` to `high` times."""

    low: int
    high: int
    body: tuple[_Term, ...]
    __hash__ = _Hashed.cached_hash


@dataclass(frozen=True)
class _Either(_Hashed):
    """One of `choices`."""

    choices: tuple[tuple[_Term, ...], ...]
    __hash__ = _Hashed.cached_hash


@dataclass(frozen=True)
class _Anything:
    """Any string at all: what an unanchored end of a pattern adds."""


_Term = _Chars | _Repeat | _Either | _Anything
_Seq = tuple[_Term, ...]


class _Unprovable(Exception):
    """The pattern has something the proof does not model, or the proof ran out of steps."""


@dataclass(frozen=True)
class PatternChange:
    """How the values a new pattern accepts relate to an old one's; `refused` is a value the old pattern accepts and
    the new one refuses (with `TIGHTER`)."""

    order: Order
    refused: str | None = None


def compare_patterns(old: str, new: str) -> PatternChange:
    """How the values `new` accepts relate to those `old` accepts (see the module docstring)."""
    try:
        before, after = _language(old), _language(new)
    except _Unprovable:
        return PatternChange(UNKNOWN)
    if None not in before and _proven(_either(before), _either(after)):
        return PatternChange(SAME if None not in after and _proven(_either(after), _either(before)) else LOOSER)
    old_regex, new_regex = ecma_regex(old), ecma_regex(new)
    for value in _samples(_either(before), _SAMPLES):
        if old_regex.search(value) is not None and new_regex.search(value) is None:
            return PatternChange(TIGHTER, value)
    return PatternChange(UNKNOWN)


def _either(choices: tuple[_Seq | None, ...]) -> _Seq:
    """The alternatives that could be read (leaving one out only makes a pattern look tighter than it is)."""
    return (_Either(tuple(c for c in choices if c is not None)),)


def _proven(a: _Seq, b: _Seq) -> bool:
    try:
        return _Proof().subset(a, b)
    except (_Unprovable, RecursionError):
        return False


@lru_cache(maxsize=1024)
def _language(pattern: str) -> tuple[_Seq | None, ...]:
    """The values `pattern` accepts: its top-level alternatives, each padded with `_Anything` where it is not
    anchored, or None for one that has what the proof does not model."""
    try:
        ecma_regex(pattern)  # canon's own rules first: what it refuses, this does not try to read
    except re.error as error:
        raise _Unprovable(str(error)) from None
    if "{," in pattern or "[]" in pattern or "[^]" in pattern or "\\u{" in pattern:
        raise _Unprovable("syntax Python's parser reads otherwise than ECMA-262")
    return tuple(map(_branch, _top_level(pattern)))


def _branch(pattern: str) -> _Seq | None:
    try:
        read = _anchored(list(_parser.parse(pattern).data))
        return read if _size(read) <= _MOST_TERMS else None
    except _Unprovable:
        return None
    except (re.error, OverflowError, RecursionError):  # ECMA syntax Python does not read (\c, ...), or too deep
        return None


def _top_level(pattern: str) -> list[str]:
    """`pattern`'s top-level alternatives (parsed one by one, so that Python's parser does not move their anchors
    into a shared prefix), with ECMA's named groups `(?<name>` spelt as Python's `(?P<name>`."""
    branches, current, depth, in_class, i = [], [], 0, False, 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            current.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "(":
            depth += 1
            if pattern.startswith("(?<", i) and pattern[i + 3 : i + 4] not in ("=", "!"):
                current.append("(?P<")
                i += 3
                continue
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            branches.append("".join(current))
            current = []
            i += 1
            continue
        current.append(char)
        i += 1
    return [*branches, "".join(current)]


def _anchored(items: list[Any]) -> _Seq:
    start = bool(items) and _is_at(items[0], "AT_BEGINNING")
    end = bool(items) and _is_at(items[-1], "AT_END")
    body = items[1 if start else 0 : len(items) - 1 if end else len(items)]
    return (*(() if start else (_Anything(),)), *_terms(body), *(() if end else (_Anything(),)))


def _size(seq: _Seq) -> int:
    """The terms in `seq`, nested ones included."""
    total = 0
    for term in seq:
        if isinstance(term, _Repeat):
            total += _size(term.body)
        elif isinstance(term, _Either):
            total += sum(map(_size, term.choices))
        total += 1
    return total


def _is_at(item: Any, where: str) -> bool:
    return str(item[0]) == "AT" and str(item[1]) == where


def _terms(items: Iterable[Any]) -> _Seq:
    out: list[_Term] = []
    for op, value in items:
        name = str(op)
        if name in ("LITERAL", "NOT_LITERAL", "ANY", "IN"):
            out.append(_Chars(_chars(name, value)))
        elif name == "SUBPATTERN":
            if value[1] or value[2]:  # inline flags: not ECMA-262
                raise _Unprovable("inline flags")
            out.extend(_terms(value[3].data))
        elif name in ("MAX_REPEAT", "MIN_REPEAT"):  # laziness changes what is captured, not what matches
            low, high, body = value
            high = _INFINITE if str(high) == "MAXREPEAT" else int(high)
            if high > 0:
                out.append(_Repeat(int(low), high, _terms(body.data)))
        elif name == "BRANCH":
            out.append(_Either(tuple(_terms(branch.data) for branch in value[1])))
        else:  # anchors inside, word boundaries, possessive or atomic groups ...
            raise _Unprovable(f"{name} is not modelled")
    return tuple(out)


_CATEGORIES: dict[str, Ranges] = {
    "CATEGORY_DIGIT": ((0x30, 0x39),),
    "CATEGORY_WORD": ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)),
    "CATEGORY_SPACE": ((0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
                       (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000),
                       (0xFEFF, 0xFEFF)),
}  # fmt: skip
_LINE_TERMINATORS: Ranges = ((0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029))


def _chars(name: str, value: Any) -> Ranges:
    if name == "LITERAL":
        return ((value, value),)
    if name == "NOT_LITERAL":
        return _complement(((value, value),))
    if name == "ANY":  # ECMA-262's `.`: no line terminator
        return _complement(_LINE_TERMINATORS)
    negate = False
    ranges: list[tuple[int, int]] = []
    for op, item in value:
        kind = str(op)
        if kind == "NEGATE":
            negate = True
        elif kind == "LITERAL":
            ranges.append((item, item))
        elif kind == "RANGE":
            ranges.append((item[0], item[1]))
        elif kind == "CATEGORY" and str(item) in _CATEGORIES:
            ranges.extend(_CATEGORIES[str(item)])
        elif kind == "CATEGORY" and str(item).startswith("CATEGORY_NOT_"):
            ranges.extend(_complement(_CATEGORIES[str(item).replace("NOT_", "")]))
        else:
            raise _Unprovable(f"{kind} {item} in a class")
    merged = _merge(ranges)
    return _complement(merged) if negate else merged


def _merge(ranges: Iterable[tuple[int, int]]) -> Ranges:
    out: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if out and low <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], high))
        else:
            out.append((low, high))
    return tuple(out)


def _complement(ranges: Ranges) -> Ranges:
    out: list[tuple[int, int]] = []
    start = 0
    for low, high in _merge(ranges):
        if low > start:
            out.append((start, low - 1))
        start = high + 1
    if start <= _MAX_CODE:
        out.append((start, _MAX_CODE))
    return tuple(out)


def _within(inner: Ranges, outer: Ranges) -> bool:
    return all(any(o_low <= low and high <= o_high for o_low, o_high in outer) for low, high in inner)


def _nullable(seq: _Seq) -> bool:
    """Whether `seq` accepts the empty string."""
    return all(_empty_ok(term) for term in seq)


def _empty_ok(term: _Term) -> bool:
    if isinstance(term, _Chars):
        return False
    if isinstance(term, _Repeat):
        return term.low == 0 or _nullable(term.body)
    if isinstance(term, _Either):
        return any(_nullable(choice) for choice in term.choices)
    return True


def _counted(term: _Term) -> tuple[int, int, _Seq]:
    """`term` as a repeat: a term that is not one is its body once."""
    return (term.low, term.high, term.body) if isinstance(term, _Repeat) else (1, 1, (term,))


def _rest(low: int, high: int, body: _Seq, tail: _Seq) -> _Seq:
    """`body{low,high}` followed by `tail`, leaving out a repeat that can only be empty."""
    return ((_Repeat(low, high, body),) if high > 0 else ()) + tail


def _less(high: int, taken: int) -> int:
    return high if high >= _INFINITE else high - taken


class _Proof:
    """A sound, incomplete proof that one sequence of terms accepts no string the other does not."""

    def __init__(self) -> None:
        self.steps = 0
        self.known: dict[tuple[_Seq, _Seq], bool] = {}

    def subset(self, a: _Seq, b: _Seq) -> bool:
        """Whether every string `a` accepts, `b` accepts (True only when proven)."""
        key = (a, b)
        if key in self.known:
            return self.known[key]
        self.steps += 1
        if self.steps > _BUDGET:
            raise _Unprovable("too many proof steps")
        self.known[key] = False  # a pair met again on its own path proves nothing
        self.known[key] = result = self._subset(a, b)
        return result

    def _subset(self, a: _Seq, b: _Seq) -> bool:
        if not a:
            return _nullable(b)
        if not b:
            return False
        x, y = a[0], b[0]
        if isinstance(x, _Either):
            return all(self.subset(choice + a[1:], b) for choice in x.choices)
        if isinstance(y, _Anything):  # it takes nothing more, or all of x
            return self.subset(a, b[1:]) or self.subset(a[1:], b)
        if isinstance(y, _Either) and any(self.subset(a, choice + b[1:]) for choice in y.choices):
            return True
        if _empty_ok(y) and self.subset(a, b[1:]):
            return True
        if isinstance(x, _Anything) or isinstance(y, _Either):
            return False
        return self._repeats(a, b)

    def _repeats(self, a: _Seq, b: _Seq) -> bool:
        """`a[0]` and `b[0]` as repeats: when each copy of the one is a copy of the other, the one with fewer copies
        is used up against the other, which goes on with the copies it has left."""
        low_a, high_a, body_a = _counted(a[0])
        low_b, high_b, body_b = _counted(b[0])
        if not self._body_within(body_a, body_b):
            return False
        if high_b >= high_a:  # b[0] takes all of a[0]'s copies, and may need more
            return self.subset(a[1:], _rest(max(0, low_b - low_a), _less(high_b, high_a), body_b, b[1:]))
        if low_a >= low_b:  # a[0] has more copies than b[0] can take: b[0] takes what it can, the rest go on
            taken = min(low_a, high_b)
            return self.subset(_rest(low_a - taken, _less(high_a, taken), body_a, a[1:]), b[1:])
        return False

    def _body_within(self, a: _Seq, b: _Seq) -> bool:
        if len(a) == 1 and len(b) == 1 and isinstance(a[0], _Chars) and isinstance(b[0], _Chars):
            return _within(a[0].ranges, b[0].ranges)
        return self.subset(a, b)


# -- values to try -------------------------------------------------------------------------------------------------
_PADDING = ("", "#")  # what an unanchored end may hold: nothing, or a character few patterns name
_TYPICAL = "a0-_ .A"


def _samples(seq: _Seq, cap: int) -> list[str]:
    """Up to `cap` values `seq` accepts, varied where a change is likely to tell (each class's ends, each
    alternative, each quantifier's bounds)."""
    values = [""]
    for term in seq:
        values = list(dict.fromkeys(v + s for v in values for s in _term_samples(term, cap)
                                    if len(v) + len(s) <= _LONGEST))[:cap]  # fmt: skip
    return values


def _term_samples(term: _Term, cap: int) -> list[str]:
    if isinstance(term, _Anything):
        return list(_PADDING)
    if isinstance(term, _Chars):
        return _char_samples(term.ranges)
    if isinstance(term, _Either):
        return [v for choice in term.choices for v in _samples(choice, cap)][:cap]
    body = _samples(term.body, cap)
    counts = sorted({term.low, term.low + 1, min(term.high, term.low + 2)} - {term.high + 1})
    counts = [n for n in counts if n <= term.high and n * max(map(len, body), default=0) <= _LONGEST]
    values = [s * n for n in counts for s in body]
    values += [body[0] + s * (n - 1) for n in counts if n > 1 for s in body[1:]]
    return values[:cap]


def _char_samples(ranges: Ranges) -> list[str]:
    chosen = [c for c in map(ord, _TYPICAL) if _within(((c, c),), ranges)]
    for low, high in ranges[:6]:
        chosen += [low, high]
    usable = [c for c in dict.fromkeys(chosen) if not 0xD800 <= c <= 0xDFFF]
    return [chr(c) for c in usable[:6]]
