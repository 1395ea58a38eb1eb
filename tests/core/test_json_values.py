"""`json_text_holdable` vouches for JSON text only when `value_problems` finds nothing in what it decodes to."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.values.json_values import MAX_DEPTH, json_text_holdable, value_problems

# scalars canon holds, and each kind it does not: a lone surrogate, NUL, a non-finite number, an integer past 64 bits
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8),
    st.sampled_from(["\ud800", "a\x00b", "é\udfff", 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 1e308, 1e-320]),
)  # fmt: skip
KEYS = st.one_of(st.text(max_size=6), st.sampled_from(["\udc00", "k\x00"]))
VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4), max_leaves=30
)


def nested(depth: int) -> Any:
    value: Any = 1
    for level in range(depth):
        value = [value] if level % 2 else {"a": value}
    return value


@settings(max_examples=1000, deadline=None, derandomize=True, database=None)
@given(VALUES, st.booleans())
def test_text_it_vouches_for_decodes_to_a_value_without_problems(value: Any, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)  # NaN and the infinities as their constants
    if json_text_holdable(text):
        assert value_problems(json.loads(text)) == []


@pytest.mark.parametrize(
    "text",
    ['{"a": "\\u0000"}', '["\\ud800"]', '[1e999]', '[-1E+400]', '[9223372036854775808]', '[NaN]', '[-Infinity]',
     '{"a": "x\x00"}', '["\udc00"]', json.dumps(nested(MAX_DEPTH + 1))],
)  # fmt: skip
def test_text_that_may_decode_to_a_problem_is_not_vouched_for(text: str) -> None:
    assert not json_text_holdable(text)


def test_the_records_of_a_synthetic_graph_are_vouched_for() -> None:
    from core.app.synthetic import synthetic_records

    lines = [json.dumps(r, ensure_ascii=False) for r in synthetic_records(200, 0)]
    assert all(json_text_holdable(line) for line in lines)
    assert json_text_holdable(json.dumps(nested(MAX_DEPTH - 1)))
