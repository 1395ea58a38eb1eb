"""What the word index holds for a node (`word_impacts`) is the rule ADR 0059 wrote, however it is counted (ADR 0065).

The reference below is that rule as it was first written, word by word: each word of each searched property adds
the property's weight, the node's length adds the weight per word, and the impact is BM25's saturated term weight
in thousandths. A faster count must give exactly the same integers, for any text, arrays of strings, words longer
than the index keeps, and weights whole or not (a weight added n times is not always n times the weight).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from core.lang.model import WORD_AVERAGE, WORD_B, WORD_K1, WORD_LENGTH, property_text, text_words, word_impacts


def reference(weights: tuple[tuple[str, float], ...], properties: dict[str, Any]) -> dict[str, int]:
    counts: dict[str, float] = {}
    length = 0.0
    for name, weight in weights:
        tokens = text_words(property_text(properties.get(name)))
        length += weight * len(tokens)
        for token in tokens:
            word = token[:WORD_LENGTH]
            counts[word] = counts.get(word, 0.0) + weight
    norm = WORD_K1 * (1 - WORD_B + WORD_B * length / WORD_AVERAGE)
    return {w: round(1000 * tf * (WORD_K1 + 1) / (tf + norm)) for w, tf in counts.items()}


WORDS = st.sampled_from(["pay", "payments", "ledger", "Ledger", "é", "straße", "x" * 60, "x" * 49 + "y", "42", "_"])
TEXT = st.lists(WORDS, max_size=12).map(" ".join) | st.text(max_size=40)
VALUE = TEXT | st.lists(TEXT | st.integers(), max_size=4) | st.integers() | st.none()
WEIGHT = st.sampled_from([1.0, 2.0, 3.0, 0.7, 1.5, 0.1, 2.25])
NAMES = ("name", "title", "tags", "summary")


@settings(max_examples=300, deadline=None)
@given(st.lists(WEIGHT, min_size=1, max_size=4), st.fixed_dictionaries({}, optional=dict.fromkeys(NAMES, VALUE)))
def test_word_impacts_are_the_rule_word_by_word(weights: list[float], properties: dict[str, Any]) -> None:
    weighed = tuple(zip(NAMES, weights, strict=False))
    assert word_impacts(weighed, properties) == reference(weighed, properties)


def test_a_word_repeated_under_a_weight_that_is_not_whole_is_added_one_at_a_time() -> None:
    """0.1 added six times is not 0.1 times 6 in floating point: the count must not multiply such a weight."""
    assert sum([0.1] * 6) != 0.1 * 6
    weighed = (("name", 0.18),)  # six of 40 words: 1237 added one at a time, 1238 multiplied
    for n in range(1, 40):
        properties = {"name": " ".join(["pay"] * n + ["x"] * (40 - n))}
        assert word_impacts(weighed, properties) == reference(weighed, properties)
