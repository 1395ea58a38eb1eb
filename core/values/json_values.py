"""The JSON values canon can hold and answer with, whoever decoded them.

JSON text canon parses itself goes through `core.values.documents.parse_json`, which refuses `NaN` and the infinities.
A value can still arrive decoded by a library in front of canon (an SDK, a GraphQL executor, a YAML file), and
valid JSON can hold what canon cannot store or send back: `value_problems` finds a non-finite number, an integer
outside the signed 64-bit range (SQLite's, and what most clients can represent exactly), a string that is not
valid Unicode (a lone surrogate: `"\\ud800"` is valid JSON but cannot be encoded as UTF-8), a string holding the
NUL character (PostgreSQL's text cannot hold it, so no store keeps it and no read could match it), and nesting
past `MAX_DEPTH`. Dispatch refuses tool arguments that have any (`invalid_arguments`, with pointers); an import
refuses such records.
"""

from __future__ import annotations

import math
import re
from typing import Any

from core.values.documents import pointer_join
from core.values.errors import Problem

__all__ = ["INT64_MAX", "INT64_MIN", "MAX_DEPTH", "json_text_holdable", "storable_text", "value_problems"]

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_DEPTH = 64  # levels of arrays and objects; tool arguments and model data are far shallower
MAX_PROBLEMS = 20  # a hostile value can hold millions; a caller fixes the first few and tries again
_SURROGATE = re.compile("[\ud800-\udfff]")  # json.loads joins every valid pair, so any left is lone


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable_text(text: str) -> str:
    """`text` as a store can keep it, for what canon records rather than refuses (an audit record's target: a URI
    or tool name as a client sent it): the NUL character and lone surrogates, which PostgreSQL's text and UTF-8
    cannot hold, become U+FFFD. Any other text is returned as it is."""
    if "\x00" not in text and text.isascii():
        return text
    return _UNSTORABLE.sub("\ufffd", text)


# In JSON text, what could decode to something `value_problems` refuses: an escape (the one way JSON text holds a lone
# surrogate or NUL), 19 digits in a row (an integer past 64 bits needs them; so does a float past the largest
# finite one written without an exponent), an exponent of 3 digits (a float past it, or so small it is 0 anyway),
# the non-finite constants, and NUL or a surrogate itself. Each may also turn up where nothing is wrong (digits in
# a string): that only means the value is checked in full. Digits are found as zeros after `_DIGITS` (quicker
# than a regular expression, which tries each position of the text).
_DIGITS = str.maketrans("123456789E", "000000000e")


def json_text_holdable(text: str) -> bool:
    """Whether the value JSON `text` decodes to is sure to have nothing `value_problems` finds, from the text alone:
    no escape, no long run of digits or exponent, no non-finite constant, no NUL or lone surrogate, and at most
    `MAX_DEPTH` brackets opening an array or object in all. False means "not sure": call `value_problems`."""
    if "\\u" in text or "NaN" in text or "Infinity" in text or "\x00" in text:  # spelled out: any() costs more
        return False
    if (not text.isascii() and _SURROGATE.search(text)) or text.count("[") + text.count("{") > MAX_DEPTH:
        return False
    digits = text.translate(_DIGITS)
    return not ("0" * 19 in digits or "e000" in digits or "e+000" in digits or "e-000" in digits)


def value_problems(value: Any, at: str = "") -> list[Problem]:
    """What in `value` (decoded JSON) canon cannot hold, each with its JSON pointer under `at`; [] when nothing."""
    problems: list[Problem] = []
    stack: list[tuple[Any, str, int]] = [(value, at, 0)]
    while stack and len(problems) < MAX_PROBLEMS:
        item, where, depth = stack.pop()
        message = _scalar_problem(item)
        if message is not None:
            problems.append(Problem(where, message))
        elif isinstance(item, dict | list) and depth >= MAX_DEPTH:
            problems.append(Problem(where, f"nested deeper than {MAX_DEPTH} levels"))
        elif isinstance(item, dict):
            members: dict[Any, Any] = item
            for key, member in reversed(list(members.items())):
                if isinstance(key, str) and _SURROGATE.search(key):
                    problems.append(Problem(where, "a member name is not valid Unicode (it holds a lone surrogate)"))
                elif isinstance(key, str) and "\x00" in key:
                    problems.append(Problem(where, "a member name holds the NUL character (U+0000)"))
                else:
                    stack.append((member, pointer_join(where, [key]), depth + 1))
        elif isinstance(item, list):
            elements: list[Any] = item
            stack.extend((v, f"{where}/{i}", depth + 1) for i, v in reversed(list(enumerate(elements))))
    return sorted(problems)


def _scalar_problem(value: Any) -> str | None:
    if isinstance(value, str):
        if not value.isascii() and _SURROGATE.search(value):
            return "not valid Unicode: the text holds a lone surrogate (U+D800 to U+DFFF)"
        if "\x00" in value:
            return "the text holds the NUL character (U+0000), which canon does not store"
    elif isinstance(value, float):
        if not math.isfinite(value):
            name = "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
            return f"{name} is not a JSON number (a number must be finite)"
    elif isinstance(value, int) and not isinstance(value, bool) and not INT64_MIN <= value <= INT64_MAX:
        return "an integer must be within the signed 64-bit range (-2**63 to 2**63-1)"
    return None
