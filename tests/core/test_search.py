"""search ranks nodes by words, the same on both backends, and never counts what the caller may not see."""

from __future__ import annotations

import pytest

from core.index.search import parse_query, search
from core.lang.model import Model
from core.store import Store
from core.values.errors import InvalidArgumentsError
from core.values.records import Sight

pytestmark = pytest.mark.both_backends


def ids(store: Store, model: Model, text: str, sight: Sight | None = None, types: list[str] | None = None) -> list[str]:
    return [h.node.id for h in search(store, model, sight, parse_query("search", text), types).hits]


def test_a_node_named_exactly_as_the_query_comes_first(seeded_store: Store, model: Model) -> None:
    assert ids(seeded_store, model, "SLO")[0] == "term-slo"
    assert ids(seeded_store, model, "payments")[:2] == ["team-payments", "sys-payments"]


def test_a_misspelt_word_finds_what_the_word_finds(seeded_store: Store, model: Model) -> None:
    assert ids(seeded_store, model, "paymnts")[0] == "team-payments"


def test_other_forms_of_a_word_match_by_stem(seeded_store: Store, model: Model) -> None:
    assert "svc-payment-webhooks" in ids(seeded_store, model, "payments")


def test_types_keep_only_nodes_of_those_types(seeded_store: Store, model: Model) -> None:
    found = search(seeded_store, model, None, parse_query("search", "payments"), ["Service"])
    assert found.hits
    assert {h.node.type for h in found.hits} == {"Service"}
    assert found.facets == {"Service": len(found.hits)}


def test_a_node_the_caller_may_not_see_is_neither_a_hit_nor_counted(seeded_store: Store, model: Model) -> None:
    everything = search(seeded_store, model, None, parse_query("search", "payments"), None)
    public = search(seeded_store, model, Sight(frozenset({"public"})), parse_query("search", "payments"), None)
    hidden = {h.node.id for h in everything.hits if h.node.visibility != "public"}
    assert hidden, "the sample data should hold non-public payment nodes"
    assert not hidden & {h.node.id for h in public.hits}
    assert sum(public.facets.values()) == len(public.hits) < len(everything.hits)


@pytest.mark.parametrize("text", ["the of what", "?!", "a " * 3])
def test_a_query_of_no_words_or_only_stop_words_is_invalid_at_query(text: str) -> None:
    with pytest.raises(InvalidArgumentsError) as caught:
        parse_query("search", text)
    assert caught.value.problems[0].pointer == "/query"


def test_engine_syntax_in_a_query_is_only_words(seeded_store: Store, model: Model) -> None:
    assert ids(seeded_store, model, 'payments" OR NEAR(x) name:*') == ids(
        seeded_store, model, "payments or near x name"
    )
