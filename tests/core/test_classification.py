"""The classes of a model change (`core.lang.schema_diff.CLASSES`: none < compatible < needs-data-check < breaking),
held
to small model pairs written here: every rule sees through `$ref`s (a shared helper narrowed is breaking wherever it
is used), a pattern change is classified as far as canon can prove it, and a surface nothing changed on reads none.
`test_classification_wire.py` holds the same answers to MCP, REST and the data check on both backends."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from core.lang.model import Model, parse_model
from core.lang.schema_diff import BREAKING, CLASSES, COMPATIBLE, NEEDS_DATA_CHECK, NONE, diff_schema, worst
from core.seam.model_diff import WRITES, ModelDiff, diff_models
from tests.conftest import REPO

Document = dict[str, Any]
ROWS = ("mcp", "rest", "graphql", "llms", WRITES)

HOSTED: Document = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "urn:canon:model:hosted",
    "title": "Hosted",
    "description": "Services and where they keep their data.",
    "x-canon-model": {"name": "hosted", "version": "1.0.0", "summary": "Services and storage."},
    "$defs": {
        "Storage": {"type": "string", "enum": ["ssd", "hdd", "tape"], "description": "A storage class."},
        "Service": {
            "type": "object",
            "description": "A service.",
            "x-canon-node": {"key": "code", "display": "code", "plural": "services"},
            "properties": {
                "code": {"type": "string", "pattern": "^S[0-9]{6}$", "description": "Service code."},
                "storage": {"$ref": "#/$defs/Storage"},
            },
            "required": ["code"],
            "additionalProperties": False,
        },
        "depends_on": {
            "type": "object",
            "description": "A service depends on another.",
            "x-canon-edge": {"source": ["Service"], "target": ["Service"], "cardinality": "many-to-many"},
            "properties": {},
            "additionalProperties": False,
        },
    },
}


def hosted(change: Callable[[Document], None] = lambda d: None, version: str = "1.0.0") -> Model:
    document = copy.deepcopy(HOSTED)
    change(document)
    document["x-canon-model"]["version"] = version
    return parse_model(document, source=f"hosted-{version}.json")


def rows(report: ModelDiff) -> dict[str, str]:
    return {row: report.classification(row) for row in ROWS}


def without_tape(document: Document) -> None:
    document["$defs"]["Storage"]["enum"] = ["ssd", "hdd"]


# -- the classes ------------------------------------------------------------------------------------------------------
def test_the_classes_are_one_ordered_list_and_the_apply_model_tool_declares_exactly_them() -> None:
    assert CLASSES == ("none", "compatible", "needs-data-check", "breaking")
    assert worst([]) == NONE
    assert worst([COMPATIBLE, BREAKING, NEEDS_DATA_CHECK]) == BREAKING
    tool = json.loads((REPO / "schema" / "tools" / "apply_model.json").read_text(encoding="utf-8"))
    plan = tool["outputSchema"]["properties"]["plan"]["properties"]
    assert plan["classification"]["enum"] == list(CLASSES)
    assert plan["surfaces"]["additionalProperties"]["enum"] == list(CLASSES)


def test_a_version_only_bump_reads_none_on_every_surface_and_on_writes() -> None:
    report = diff_models(hosted(), hosted(version="1.0.1"))
    assert rows(report) == dict.fromkeys(ROWS, NONE)
    assert report.classification() == NONE
    assert report.findings == ()


def test_a_reorder_reads_none_everywhere() -> None:
    def reordered(document: Document) -> None:
        service = document["$defs"]["Service"]
        service["properties"] = dict(reversed(service["properties"].items()))
        document["$defs"] = dict(reversed(document["$defs"].items()))

    assert rows(diff_models(hosted(), hosted(reordered, "1.0.1"))) == dict.fromkeys(ROWS, NONE)


def test_a_description_change_is_compatible_where_it_shows_and_none_on_writes() -> None:
    def described(document: Document) -> None:
        document["$defs"]["Storage"]["description"] = "Where the bytes live."

    got = rows(diff_models(hosted(), hosted(described, "1.0.1")))
    assert (got["mcp"], got["rest"], got[WRITES]) == (COMPATIBLE, COMPATIBLE, NONE)


def test_a_write_rule_no_artifact_shows_is_on_writes_only() -> None:
    def acyclic(document: Document) -> None:
        document["$defs"]["depends_on"]["x-canon-edge"]["acyclic"] = True

    got = rows(diff_models(hosted(), hosted(acyclic, "2.0.0")))
    assert (got[WRITES], got["graphql"], got["llms"]) == (BREAKING, NONE, NONE)


# -- item 1: every rule sees through $ref -----------------------------------------------------------------------------
def _wrapped_in_all_of(document: Document) -> None:
    document["$defs"]["Service"]["properties"]["storage"] = {"allOf": [{"$ref": "#/$defs/Storage"}],
                                                             "description": "Where the data is."}  # fmt: skip


def _through_a_chain(document: Document) -> None:
    document["$defs"]["Kind"] = document["$defs"].pop("Storage")
    document["$defs"]["Storage"] = {"$ref": "#/$defs/Kind"}


def _nullable(document: Document) -> None:
    document["$defs"]["Service"]["properties"]["storage"] = {"anyOf": [{"$ref": "#/$defs/Storage"}, {"type": "null"}]}


def _helper_narrowed(document: Document) -> None:
    defs = document["$defs"]
    (defs["Kind"] if "Kind" in defs else defs["Storage"])["enum"] = ["ssd", "hdd"]


def _as_is(document: Document) -> None:
    """The helper used as it is: `{"$ref": "#/$defs/Storage"}`."""


SHAPES = {"a $ref": _as_is, "an allOf of a $ref": _wrapped_in_all_of, "a $ref to a $ref": _through_a_chain,
          "an anyOf of a $ref and null": _nullable}  # fmt: skip


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_an_enum_narrowed_in_a_shared_helper_is_breaking_for_callers_and_writers(
    shape: Callable[[Document], None],
) -> None:
    def narrowed(document: Document) -> None:
        shape(document)
        _helper_narrowed(document)

    report = diff_models(hosted(shape), hosted(narrowed, "1.1.0"))
    got = rows(report)
    assert (got["mcp"], got["rest"], got[WRITES]) == (BREAKING, BREAKING, BREAKING), report.findings
    assert any("'tape' no longer allowed" in f.change and "storage" in f.where for f in report.findings
               if f.surface == WRITES)  # fmt: skip


def test_a_referenced_alternative_removed_from_an_any_of_is_breaking_and_one_added_compatible_for_writers() -> None:
    def either(document: Document) -> None:
        document["$defs"]["Tier"] = {"type": "integer", "minimum": 1, "maximum": 3}
        document["$defs"]["Service"]["properties"]["storage"] = {"anyOf": [{"$ref": "#/$defs/Storage"},
                                                                           {"$ref": "#/$defs/Tier"}]}  # fmt: skip

    def storage_only(document: Document) -> None:
        either(document)
        document["$defs"]["Service"]["properties"]["storage"]["anyOf"].pop()

    assert rows(diff_models(hosted(either), hosted(storage_only, "2.0.0")))[WRITES] == BREAKING
    assert rows(diff_models(hosted(storage_only), hosted(either, "1.1.0")))[WRITES] == COMPATIBLE


def test_a_recursive_helper_is_compared_through_once_and_the_walk_ends() -> None:
    def tree(labels: list[str]) -> Document:
        return {"$defs": {"Tree": {"type": "object", "properties": {
            "label": {"type": "string", "enum": labels},
            "children": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}}}}}  # fmt: skip

    old, new = tree(["a", "b"]), tree(["a"])
    found = diff_schema(WRITES, "tree", {"$ref": "#/$defs/Tree"}, {"$ref": "#/$defs/Tree"}, "input", (old, new))
    assert [(f.where, f.classification) for f in found] == [("tree/properties/label", BREAKING)]
    loop: Document = {"$defs": {"Loop": {"$ref": "#/$defs/Loop"}}}
    assert diff_schema(WRITES, "loop", {"$ref": "#/$defs/Loop"}, {"$ref": "#/$defs/Loop"}, "input", (loop, loop)) == []


def test_a_helper_unchanged_on_both_sides_is_no_change() -> None:
    def also_in_a_tier(document: Document) -> None:
        document["$defs"]["Service"]["properties"]["backup"] = {"$ref": "#/$defs/Storage"}

    report = diff_models(hosted(also_in_a_tier), hosted(also_in_a_tier, "1.0.1"))
    assert report.findings == ()


# -- item 3: patterns -------------------------------------------------------------------------------------------------
def code_pattern(pattern: str) -> Callable[[Document], None]:
    def change(document: Document) -> None:
        document["$defs"]["Service"]["properties"]["code"]["pattern"] = pattern

    return change


def test_a_widened_quantifier_in_a_pattern_is_compatible_for_callers_and_writers() -> None:
    report = diff_models(hosted(), hosted(code_pattern("^S[0-9]{6,8}$"), "1.1.0"))
    got = rows(report)
    assert (got["mcp"], got["rest"], got[WRITES]) == (COMPATIBLE, COMPATIBLE, COMPATIBLE), report.findings


def test_a_tightened_pattern_is_breaking_and_names_a_value_it_now_refuses() -> None:
    report = diff_models(hosted(), hosted(code_pattern("^S[0-9]{6}[A-Z]$"), "2.0.0"))
    got = rows(report)
    assert (got["mcp"], got["rest"], got[WRITES]) == (BREAKING, BREAKING, BREAKING)
    assert any("no longer allowed" in f.change for f in report.findings if f.surface == WRITES)


def test_a_pattern_change_canon_cannot_prove_either_way_needs_a_data_check_on_every_row_it_shows_on() -> None:
    # looser in fact (three pairs of digits, then any more), but by no rule the proof knows
    report = diff_models(hosted(), hosted(code_pattern("^S([0-9][0-9]){3}[0-9]*$"), "1.1.0"))
    got = rows(report)
    assert (got["mcp"], got["rest"], got[WRITES]) == (NEEDS_DATA_CHECK,) * 3, report.findings
    assert report.classification() == NEEDS_DATA_CHECK
