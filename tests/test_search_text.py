"""What search sees: tags, synonyms and aliases (arrays of strings) are searched text on both backends, and a
model weighs or leaves out a property with `x-canon-search` (checked at model check)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from core.index.search import parse_query, search
from core.lang.model import Model, check_model, parse_model
from core.store import NodeQuery, Store
from core.values.errors import ModelError

pytestmark = pytest.mark.both_backends


def ids(store: Store, model: Model, text: str) -> list[str]:
    return [h.node.id for h in search(store, model, None, parse_query("search", text), None).hits]


def test_a_glossary_term_is_found_by_a_synonym_it_holds_nowhere_else(seeded_store: Store, model: Model) -> None:
    # "disbursement" and "2FA" are only in the synonyms of term-payout and term-mfa
    assert ids(seeded_store, model, "disbursement")[0] == "term-payout"
    assert ids(seeded_store, model, "2FA")[0] == "term-mfa"


def test_a_node_is_found_by_one_of_its_tags(seeded_store: Store, model: Model) -> None:
    assert ids(seeded_store, model, "personalisation") == ["svc-recommendation-service"]


def test_a_hit_on_a_synonym_quotes_the_synonym(seeded_store: Store, model: Model) -> None:
    hit = search(seeded_store, model, None, parse_query("search", "disbursement"), None).hits[0]
    assert (hit.property, hit.snippet) == ("synonyms", "**disbursement**")


@pytest.mark.parametrize("indexed", [True, False])
def test_find_nodes_text_matches_inside_an_array_of_strings_but_not_its_json(
    seeded_store: Store, model: Model, indexed: bool
) -> None:
    fields = {n: t.text for n, t in model.node_types.items()} if indexed else {"GlossaryTerm": ("synonyms",)}

    def found(text: str) -> list[str]:
        nodes, _ = seeded_store.find_nodes(NodeQuery(text=text, text_fields=fields), after=None, limit=50)
        return [n.id for n in nodes]

    assert found("disburse") == ["term-payout"]
    assert found('["') == []
    assert found('", "') == []


def _document(model: Model) -> dict[str, Any]:
    return copy.deepcopy(dict(model.document))


def test_a_search_weight_in_the_model_lifts_matches_in_that_property(seeded_store: Store, model: Model) -> None:
    document = _document(model)
    document["$defs"]["Service"]["properties"]["tags"]["x-canon-search"] = {"weight": 10}
    weighted = parse_model(document)
    assert dict(weighted.node_types["Service"].weights)["tags"] == 10.0
    assert dict(model.node_types["Service"].weights)["tags"] == 2.0

    def services(m: Model) -> list[str]:
        return [h.node.id for h in search(seeded_store, m, None, parse_query("search", "search"), ["Service"]).hits]

    # svc-query-suggest is tagged search; its name and description say it less often than svc-search-api's
    assert services(weighted).index("svc-query-suggest") < services(model).index("svc-query-suggest")


def test_a_property_excluded_from_search_is_neither_searched_nor_in_the_default_text(model: Model) -> None:
    document = _document(model)
    team = document["$defs"]["Team"]
    del team["x-canon-node"]["text"]
    team["properties"]["tags"]["x-canon-search"] = {"exclude": True}
    parsed = parse_model(document).node_types["Team"]
    assert "tags" not in parsed.text
    assert "tags" not in dict(parsed.weights)
    assert "mission" in parsed.text


@pytest.mark.parametrize(
    ("change", "pointer"),
    [
        (lambda d: d["Team"]["properties"]["oncall"].update({"x-canon-search": {"weight": 2}}),
         "/$defs/Team/properties/oncall/x-canon-search"),
        (lambda d: d["Team"]["properties"]["tags"].update({"x-canon-search": {"exclude": True}}),
         "/$defs/Team/x-canon-node/text/3"),
        (lambda d: d["Team"]["x-canon-node"]["text"].append("oncall"), "/$defs/Team/x-canon-node/text/4"),
        (lambda d: d["Team"]["properties"]["area"].update({"x-canon-search": {"weight": 2}}),
         "/$defs/Team/properties/area/x-canon-search"),
        (lambda d: d["Team"]["properties"]["tags"].update({"x-canon-search": {"weight": 0}}),
         "/$defs/Team/properties/tags/x-canon-search"),
        (lambda d: d["Team"]["properties"]["tags"].update({"x-canon-search": {"weight": 2, "exclude": True}}),
         "/$defs/Team/properties/tags/x-canon-search"),
    ],
    ids=["weight-on-a-boolean", "excluded-but-listed", "non-text-listed", "weight-not-listed", "weight-zero", "both"],
)  # fmt: skip
def test_a_bad_search_annotation_is_a_problem_at_its_place(model: Model, change: Any, pointer: str) -> None:
    document = _document(model)
    change(document["$defs"])
    problems = check_model(document)
    assert pointer in [p.pointer for p in problems], problems
    with pytest.raises(ModelError):
        parse_model(document)
