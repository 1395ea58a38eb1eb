"""Other names of a thing, from the model's own data: a glossary term's expansion and synonyms (`x-canon-search`
names) stand for its term, so an abbreviation finds what its expansion names and a synonym what the term names,
both ways; and the issue's named queries answer the right node first, on both backends."""

from __future__ import annotations

import copy

import pytest

from core.index.search import parse_query, search
from core.lang.model import Model, parse_model, property_text
from core.store import Store

pytestmark = pytest.mark.both_backends


def ids(store: Store, model: Model, text: str, types: list[str] | None = None) -> list[str]:
    return [h.node.id for h in search(store, model, None, parse_query("search", text), types).hits]


def text_of(store: Store, model: Model, id_: str) -> str:
    node = store.node(id_)
    assert node is not None
    return " ".join(property_text(node.properties.get(p)) for p in model.node_types[node.type].text).lower()


def test_the_sample_glossary_says_its_expansion_and_synonyms_are_names(model: Model) -> None:
    assert model.node_types["GlossaryTerm"].names == ("expansion", "synonyms")


def test_an_abbreviation_finds_what_only_its_expansion_names(seeded_store: Store, model: Model) -> None:
    assert "cdc" not in text_of(seeded_store, model, "sys-data-platform")
    assert "change data capture" in text_of(seeded_store, model, "sys-data-platform")
    assert "sys-data-platform" in ids(seeded_store, model, "CDC")[:10]


def test_an_expansion_finds_what_only_the_abbreviation_names(seeded_store: Store, model: Model) -> None:
    found = ids(seeded_store, model, "Change Data Capture")
    assert set(found[:2]) == {"term-cdc", "svc-cdc-connector"}


def test_a_synonym_finds_what_only_the_term_names(seeded_store: Store, model: Model) -> None:
    assert "dispute" not in text_of(seeded_store, model, "svc-refund-service")
    assert ids(seeded_store, model, "dispute")[:2] == ["term-chargeback", "svc-refund-service"]


def test_without_names_in_the_model_a_synonym_finds_only_the_term(seeded_store: Store, model: Model) -> None:
    document = copy.deepcopy(dict(model.document))
    for name in ("expansion", "synonyms"):
        del document["$defs"]["GlossaryTerm"]["properties"][name]["x-canon-search"]
    assert ids(seeded_store, parse_model(document), "dispute") == ["term-chargeback"]


@pytest.mark.parametrize(
    ("query", "types", "first"),
    [
        ("fraud rules", None, {"svc-fraud-scoring", "doc-report-fraud-rules"}),
        ("refund webhook", None, {"doc-guide-payment-webhooks"}),
        ("double entry", None, {"term-double-entry-bookkeeping"}),
        ("payments", ["System"], {"sys-payments"}),
        ("Ledger", None, {"term-ledger"}),
    ],
)
def test_the_issues_named_queries_answer_the_right_node_first(
    seeded_store: Store, model: Model, query: str, types: list[str] | None, first: set[str]
) -> None:
    found = ids(seeded_store, model, query, types)
    assert found[0] in first, found[:5]
    assert first <= set(found[: len(first)]), found[:5]
