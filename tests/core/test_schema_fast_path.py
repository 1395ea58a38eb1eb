"""The quick check of a type's schema never accepts what canon's validator refuses, and every refusal, message and
pointer still comes from the validator (`Model.property_errors`)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.app.synthetic import synthetic_records
from core.lang.model import Model, load_model
from core.values.dialect import schema_validator
from core.values.schema_fast_path import accepts

MODEL = load_model()
TYPES = sorted(MODEL.document["$defs"])
RECORDS = list(synthetic_records(300, 0))

# values every keyword of the fast path has an opinion on, valid and not
POOL = (None, True, False, 0, 1, -1, 1.0, 2.5, 8, 9, 2**40, "", "a", "abc", "user-1", "Upper", "a b", "x" * 300,
        "2024-01-02", "2024-13-45", "2024-01-02T03:04:05Z", "not an email", "a@b.example", "https://x.example/a",
        "http://x.example", "https://", "engineer", "production", "ADR-0001", "team-01", "é", [], ["a"],
        ["a", "a"], ["a", 1], [1, 2], ["Upper"], ["x" * 40], ["a"] * 13, {}, {"a": 1}, {"role": "lead"})  # fmt: skip
VALUES = st.sampled_from(POOL)


def errors(model: Model, type_name: str, value: Any, *, quick: bool) -> list[tuple[list[Any], str]]:
    found = model.property_errors(type_name, value) if quick else model.validator(type_name).iter_errors(value)
    return [(list(e.absolute_path), e.message) for e in found]


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, Any]:
    """A record's properties from the synthetic graph with a few members replaced, removed or added."""
    record = draw(st.sampled_from(RECORDS))
    properties: dict[str, Any] = dict(record.get("properties", {}))
    schema_names = list(MODEL.document["$defs"][record["type"]].get("properties", {}))
    for _ in range(draw(st.integers(0, 3))):
        name = draw(st.sampled_from([*schema_names, "unknown"]))
        if draw(st.booleans()):
            properties[name] = draw(VALUES)
        else:
            properties.pop(name, None)
    return record["type"], properties


def test_every_type_of_the_default_model_has_a_quick_check_that_accepts_the_synthetic_graph() -> None:
    for type_name in TYPES:
        assert accepts(MODEL.document["$defs"][type_name], MODEL.document["$defs"]) is not None, type_name
    for record in RECORDS:
        quick = accepts(MODEL.document["$defs"][record["type"]], MODEL.document["$defs"])
        assert quick is not None
        assert quick(record.get("properties", {})), record


@settings(max_examples=1500, deadline=None, derandomize=True, database=None)
@given(mutated())
def test_a_mutated_record_gets_exactly_the_validators_errors(case: tuple[str, Any]) -> None:
    type_name, properties = case
    assert errors(MODEL, type_name, properties, quick=True) == errors(MODEL, type_name, properties, quick=False)


# a schema for each keyword the fast path decides, and what it decides about
SCHEMAS: list[dict[str, Any]] = [
    {"type": "integer"}, {"type": ["string", "null"]}, {"type": "number"}, {"type": "boolean"}, {"type": "array"},
    {"type": "object"}, {"enum": ["a", 1, None]}, {"const": "abc"}, {"const": 1}, {"minLength": 2},
    {"maxLength": 2}, {"pattern": "^[a-z]+$"}, {"pattern": "b$"}, {"format": "date"}, {"format": "email"},
    {"format": "uri"}, {"format": "date-time"}, {"minimum": 1}, {"maximum": 8}, {"exclusiveMinimum": 1},
    {"exclusiveMaximum": 8}, {"required": ["a"]}, {"minProperties": 1}, {"maxProperties": 0},
    {"properties": {"a": {"type": "string"}}, "additionalProperties": False},
    {"properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "integer"}},
    {"patternProperties": {"^r": {"const": "lead"}}, "additionalProperties": False},
    {"items": {"type": "string"}}, {"items": False}, {"minItems": 1}, {"maxItems": 1}, {"uniqueItems": True},
    {"$ref": "#/$defs/Tags"}, {"$ref": "#/$defs/Slug"}, {"allOf": [{"type": "string"}, {"maxLength": 3}]},
    {"anyOf": [{"type": "integer"}, {"format": "date"}]}, {"description": "annotations only", "x-canon-hint": 1},
]  # fmt: skip


@pytest.mark.parametrize("schema", SCHEMAS, ids=[str(s) for s in SCHEMAS])
def test_a_quick_check_never_accepts_a_value_its_schema_refuses(schema: dict[str, Any]) -> None:
    defs = MODEL.document["$defs"]
    quick = accepts(schema, defs)
    assert quick is not None
    validator = schema_validator({**schema, "$defs": defs})
    accepted = [v for v in POOL if quick(v)]
    assert all(validator.is_valid(v) for v in accepted), [v for v in accepted if not validator.is_valid(v)]
    assert accepted or not any(validator.is_valid(v) for v in POOL)  # it says yes to something it may


@pytest.mark.parametrize(
    "schema",
    [{"oneOf": [{"type": "string"}]}, {"not": {"type": "string"}}, {"prefixItems": [{}], "items": False},
     {"$ref": "https://elsewhere.example/schema"}, {"$ref": "#/$defs/Missing"}, {"multipleOf": 2},
     {"type": "date"}, {"enum": [{"a": 1}]}, {"pattern": "(a)\\1"}, {"unevaluatedProperties": False}],
)  # fmt: skip
def test_a_schema_with_a_keyword_the_fast_path_does_not_decide_has_no_quick_check(schema: dict[str, Any]) -> None:
    assert accepts(schema, MODEL.document["$defs"]) is None
