"""Whether a changed `pattern` accepts every value the old one did (`core.lang.pattern_order`): proven looser, shown
tighter by a value it now refuses, or honestly unknown. Each answer is checked against what canon's matcher does
with a fixed set of probe values, so a wrong proof fails here."""

from __future__ import annotations

import pytest

from core.lang.pattern_order import LOOSER, SAME, TIGHTER, UNKNOWN, compare_patterns
from core.values.dialect import ecma_regex

PROBES = ["", "S", "S1", "S12345", "S123456", "S1234567", "S12345678", "S123456789", "xS123456", "S123456x", "T1234",
          "a", "b", "c", "ab", "a0", "a-b", "abc", "z", "Z", "-", "_", " ", "\n", "foo", "foo-bar", "x", "xy", "S\n",
          "1", "12", "é", "#S123456"]  # fmt: skip

LOOSENINGS = [
    ("^S[0-9]{6}$", "^S[0-9]{6,8}$"),  # a widened quantifier (issue 25)
    ("^S[0-9]{6}$", "^S[0-9]{6,}$"),
    ("^a+$", "^a*$"),
    ("^S[0-9]{6}$", "^S[0-9]{6}[A-Z]?$"),  # an optional part added
    ("^(a|b)$", "^(a|b|c)$"),  # an added alternative
    ("^S[0-9]{6}$", "^S[0-9]{6}$|^T[0-9]{4}$"),
    ("^S[0-9]{6}$", "^S"),  # the anchored prefix kept, the rest dropped
    ("^S[0-9]{6}$", "S[0-9]{6}"),  # the anchors dropped
    ("^x.*$", "^x"),
    ("^[a-z]+$", "^[a-z0-9-]+$"),  # a wider class
    ("^[a-z]+$", "^[^0-9]+$"),
    ("^[0-9]{3}$", "^\\d+$"),
    ("abc", "b"),
    ("^[a-z]+$", "^[a-z]+$|^x\\b"),  # an alternative the proof cannot read only adds values
]


@pytest.mark.parametrize(("old", "new"), LOOSENINGS, ids=[f"{o} -> {n}" for o, n in LOOSENINGS])
def test_a_common_loosening_is_proven_looser(old: str, new: str) -> None:
    assert compare_patterns(old, new).order == LOOSER
    assert all(ecma_regex(new).search(p) for p in PROBES if ecma_regex(old).search(p))


@pytest.mark.parametrize(("old", "new"), [("^[0-9]$", "^\\d$"), ("^\\w+$", "^[A-Za-z0-9_]+$"), ("a(b|c)d", "a[bc]d"),
                                          ("^[a-z]{3}$", "^[a-z][a-z][a-z]$"), ("^(?<id>a)$", "^a$")])  # fmt: skip
def test_a_pattern_spelt_otherwise_accepting_the_same_values_is_the_same(old: str, new: str) -> None:
    assert compare_patterns(old, new).order == SAME


TIGHTENINGS = [
    ("^S[0-9]{6,8}$", "^S[0-9]{6}$"),
    ("^[a-z][a-z0-9-]*$", "^[a-z]+$"),
    ("S", "^S"),  # an anchor added
    ("^S", "^S$"),
    ("^.{1,3}$", "^\\w{1,3}$"),
    ("^(a|b|c)$", "^(a|b)$"),  # an alternative removed
    ("^S[0-9]{6}$", "^T[0-9]{6}$"),
]


@pytest.mark.parametrize(("old", "new"), TIGHTENINGS, ids=[f"{o} -> {n}" for o, n in TIGHTENINGS])
def test_a_tightening_names_a_value_the_old_pattern_accepts_and_the_new_one_refuses(old: str, new: str) -> None:
    change = compare_patterns(old, new)
    assert change.order == TIGHTER
    assert change.refused is not None
    assert ecma_regex(old).search(change.refused) is not None
    assert ecma_regex(new).search(change.refused) is None


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("^(ab)+$", "^[a-z]+$"),  # looser, but not by a rule the proof knows
        ("^a\\b", "^a"),  # a word boundary is not modelled
        ("^\\cA$", "^\\u0001$"),  # syntax Python's parser does not read
        ("^a{,3}$", "^a{0,3}$"),  # ECMA-262 reads `{,3}` literally, Python as a quantifier: not read at all
        ("^[a-z]+$", "^(?!x)[a-z]+$"),  # a lookahead: canon does not match it at all
    ],
)
def test_a_change_neither_proven_looser_nor_shown_tighter_is_unknown(old: str, new: str) -> None:
    assert compare_patterns(old, new).order == UNKNOWN


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("^" + "ab" * 1500 + "$", "^" + "ab" * 1500 + "c?$"),  # more terms than the proof reads
        ("^(a{1000}){1000}$", "^b"),  # values too long to build and try
    ],
    ids=["3000 literals", "a million characters"],
)
def test_a_pattern_past_the_bounds_of_the_proof_is_unknown_rather_than_an_error(old: str, new: str) -> None:
    assert compare_patterns(old, new).order == UNKNOWN
