"""JSON Merge Patch (RFC 7396): the examples of its Appendix A, and that neither input is changed."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from core.values.merge_patch import merge_patch, removed_members

RFC_7396_APPENDIX_A: list[tuple[Any, Any, Any]] = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("target", "patch", "result"), RFC_7396_APPENDIX_A)
def test_merge_patch_gives_every_result_of_the_rfcs_examples_and_changes_neither_input(
    target: Any, patch: Any, result: Any
) -> None:
    target_before, patch_before = copy.deepcopy(target), copy.deepcopy(patch)

    assert merge_patch(target, patch) == result
    assert (target, patch) == (target_before, patch_before)


def test_removed_members_are_the_members_a_patch_nulls_that_the_target_has() -> None:
    assert removed_members({"a": 1, "b": 2, "c": {"d": 3}}, {"a": None, "x": None, "b": 5, "c": {"d": None}}) == ["a"]
