"""Checking, loading and reading a canon model: problems with pointers, JSON and YAML files, digests and types."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from core.lang.model import Model, check_model, load_model, parse_model
from core.lang.model_limits import MAX_DEFINITIONS, MAX_DEPTH, MAX_PROPERTIES
from core.values.errors import ModelError, Problem


def _default_document(model: Model) -> dict[str, Any]:
    return copy.deepcopy(dict(model.document))


def _broken_document(model: Model) -> dict[str, Any]:
    """The default model with six independent breaks, each in a definition of its own."""
    document = _default_document(model)
    defs = document["$defs"]
    defs["Team"]["x-canon-node"]["key"] = "nonexistent"
    defs["owns"]["x-canon-edge"]["target"].append("Widget")
    defs["Service"]["properties"]["repository"]["$ref"] = "#/$defs/Nope"
    defs["Document"]["properties"]["incident_severity"]["type"] = "integr"
    defs["gadget"] = copy.deepcopy(defs["GlossaryTerm"])
    defs["System"]["properties"]["id"] = {"description": "A shadowed system field.", "type": "string"}
    return document


EXPECTED_POINTERS = {
    "/$defs/Team/x-canon-node/key",  # key property that does not exist
    "/$defs/owns/x-canon-edge/target/3",  # edge target type that does not exist
    "/$defs/Service/properties/repository/$ref",  # unresolvable $ref
    "/$defs/Document/properties/incident_severity/type",  # "integr" is not a JSON Schema type
    "/$defs/gadget",  # node type name in lowercase
    # a reserved property name: JSON Schema reports propertyNames at the object that holds the names
    "/$defs/System/properties",
}


def test_check_model_reports_one_problem_per_break_with_its_pointer(model: Model) -> None:
    problems = check_model(_broken_document(model), source="bad.json")
    assert {p.pointer for p in problems} == EXPECTED_POINTERS
    assert len(problems) == len(EXPECTED_POINTERS)
    assert all(p.file == "bad.json" for p in problems)


def test_check_model_names_the_reserved_property(model: Model) -> None:
    problems = check_model(_broken_document(model))
    (reserved,) = [p for p in problems if p.pointer == "/$defs/System/properties"]
    assert "'id'" in reserved.message  # the pointer stops at the object, so the message must name the key


def eight_problems_in_one_type(model: Model) -> dict[str, Any]:
    """Team with a wrong `type` keyword and seven more problems: the meta-schema's and canon's own checks."""
    document = _default_document(model)
    team = document["$defs"]["Team"]
    team["type"] = "objekt"
    team["additionalProperties"] = True
    team["properties"]["id"] = {"description": "A shadowed system field.", "type": "string"}
    team["properties"]["mission"]["type"] = "int"
    team["x-canon-node"] |= {"key": "nonexistent", "display": "nope", "text": ["missing"]}
    team["required"].append("ghost")
    return document


EIGHT = {
    "/$defs/Team/type": 'a node or edge type is "type": "object", not "objekt"',
    "/$defs/Team/additionalProperties": "additionalProperties must be false",
    "/$defs/Team/properties": "property 'id' shadows a system field",
    "/$defs/Team/properties/mission/type": "'int' is not a JSON Schema type; did you mean 'integer'?",
    "/$defs/Team/x-canon-node/key": "'nonexistent' is not a property of Team",
    "/$defs/Team/x-canon-node/display": "'nope' is not a property of Team",
    "/$defs/Team/x-canon-node/text/0": "'missing' is not a property of Team",
    "/$defs/Team/required/4": "required property 'ghost' is not declared in properties",
}


def test_check_model_lists_every_problem_of_a_type_even_when_its_type_keyword_is_wrong(model: Model) -> None:
    problems = check_model(eight_problems_in_one_type(model))
    assert len(problems) == 8
    assert {p.pointer for p in problems} == set(EIGHT)
    for problem in problems:  # the messages a model author reads say what to change
        assert EIGHT[problem.pointer] in problem.message


def test_check_model_refuses_a_pattern_that_is_not_an_ecma_262_regular_expression(model: Model) -> None:
    document = _default_document(model)
    document["$defs"]["Team"]["properties"]["name"]["pattern"] = "(?P<python>only)"
    assert {p.pointer for p in check_model(document)} == {"/$defs/Team/properties/name/pattern"}


def test_a_model_pattern_anchored_with_dollar_refuses_a_trailing_newline(model: Model) -> None:
    document = _default_document(model)
    document["$defs"]["Team"]["properties"]["name"]["pattern"] = "^a$"
    validator = parse_model(document).validator("Team")
    team = {"slug": "a", "name": "a", "mission": "m", "area": "platform"}
    assert validator.is_valid(team)
    assert [e.absolute_path[-1] for e in validator.iter_errors(team | {"name": "a\n"})] == ["name"]


def test_check_model_of_the_default_model_is_empty(model: Model) -> None:
    assert check_model(_default_document(model)) == []


def test_check_model_of_a_non_object_reports_the_root() -> None:
    problems = check_model(["not", "a", "model"])
    assert problems
    assert {p.pointer for p in problems} == {""}


def test_check_model_requires_a_key_property_to_be_a_required_string(model: Model) -> None:
    document = _default_document(model)
    document["$defs"]["Person"]["required"].remove("email")
    document["$defs"]["Team"]["x-canon-node"]["key"] = "founded"
    document["$defs"]["Team"]["required"].append("founded")
    document["$defs"]["Team"]["properties"]["founded"] = {"description": "Year.", "type": "integer"}
    pointers = {p.pointer for p in check_model(document)}
    assert pointers == {"/$defs/Person/x-canon-node/key", "/$defs/Team/properties/founded"}


def test_check_model_rejects_an_inverse_name_used_twice(model: Model) -> None:
    document = _default_document(model)
    document["$defs"]["part_of"]["x-canon-edge"]["inverse"] = "members"
    pointers = {p.pointer for p in check_model(document)}
    assert pointers == {"/$defs/part_of/x-canon-edge/inverse"}


def test_check_model_rejects_an_edge_end_name_that_another_edge_or_a_property_already_has(model: Model) -> None:
    document = _default_document(model)
    document["$defs"]["supersedes"]["x-canon-edge"]["inverse"] = "owns"  # an edge type's name
    document["$defs"]["related_to"]["x-canon-edge"]["inverse"] = "term"  # a property of GlossaryTerm
    document["$defs"]["Team"]["properties"]["owns"] = {"description": "Shadowed by the edge.", "type": "string"}
    document["$defs"]["authored"] = {**document["$defs"]["authored"], "description": "Named as a system field."}
    document["$defs"]["revision"] = document["$defs"].pop("authored")
    document["$defs"]["decided_by_incoming"] = copy.deepcopy(document["$defs"]["related_to"])
    document["$defs"]["decided_by_incoming"]["x-canon-edge"].pop("inverse")
    del document["$defs"]["decided_by"]["x-canon-edge"]["inverse"]
    problems = {p.pointer: p.message for p in check_model(document)}
    assert set(problems) == {"/$defs/supersedes/x-canon-edge/inverse", "/$defs/related_to/x-canon-edge/inverse",
                             "/$defs/owns", "/$defs/revision", "/$defs/decided_by"}  # fmt: skip
    assert "already used by owns" in problems["/$defs/supersedes/x-canon-edge/inverse"]
    assert "property of GlossaryTerm" in problems["/$defs/related_to/x-canon-edge/inverse"]
    assert "property of Team" in problems["/$defs/owns"]
    assert "system field" in problems["/$defs/revision"]
    assert "'decided_by_incoming'" in problems["/$defs/decided_by"]


def test_parse_model_raises_model_error_carrying_every_problem(model: Model) -> None:
    document = _broken_document(model)
    with pytest.raises(ModelError) as caught:
        parse_model(document, source="bad.json")
    assert caught.value.problems == tuple(check_model(document, source="bad.json"))
    assert {p.pointer for p in caught.value.problems} == EXPECTED_POINTERS


def test_load_model_of_invalid_json_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "model.schema.json"
    path.write_text('{\n  "$schema": "https://json-schema.org/draft/2020-12/schema",\n  "$id": oops\n}\n')
    with pytest.raises(ModelError) as caught:
        load_model(path)
    (problem,) = caught.value.problems
    assert problem.file == str(path)
    assert problem.line == 3


def test_load_model_of_invalid_yaml_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "model.yaml"
    path.write_text("title: ok\n$defs:\n  Person: [unclosed\n")
    with pytest.raises(ModelError) as caught:
        load_model(path)
    (problem,) = caught.value.problems
    assert problem.file == str(path)
    assert problem.line is not None
    assert problem.line >= 3


def test_load_model_of_a_missing_file_is_a_model_error(tmp_path: Path) -> None:
    path = tmp_path / "absent.schema.json"
    with pytest.raises(ModelError) as caught:
        load_model(path)
    assert [p.file for p in caught.value.problems] == [str(path)]


def test_load_model_of_a_file_with_model_problems_names_the_file(tmp_path: Path, model: Model) -> None:
    path = tmp_path / "bad.schema.json"
    path.write_text(json.dumps(_broken_document(model)))
    with pytest.raises(ModelError) as caught:
        load_model(path)
    assert {p.pointer for p in caught.value.problems} == EXPECTED_POINTERS
    assert {p.file for p in caught.value.problems} == {str(path)}


def test_a_yaml_model_loads_equal_to_the_json_model(tmp_path: Path, model: Model) -> None:
    path = tmp_path / "model.yaml"
    path.write_text(yaml.safe_dump(_default_document(model), allow_unicode=True), encoding="utf-8")
    loaded = load_model(path)
    assert loaded.document == model.document
    assert loaded.digest == model.digest
    assert loaded.source == str(path)
    assert set(loaded.node_types) == set(model.node_types)


def test_load_model_without_a_path_loads_the_default_model() -> None:
    model = load_model()
    assert (model.id, model.name, model.version) == ("urn:canon:model:northwind", "northwind", "1.0.0")


def test_model_digest_is_stable_across_loads_and_key_order(model: Model) -> None:
    reordered = dict(reversed(list(_default_document(model).items())))
    assert load_model().digest == model.digest
    assert parse_model(reordered).digest == model.digest
    assert len(model.digest) == 64


def test_model_digest_changes_when_the_document_changes(model: Model) -> None:
    document = _default_document(model)
    document["$defs"]["Team"]["description"] += " Changed."
    assert parse_model(document).digest != model.digest


def test_node_types_know_their_key_display_and_text_properties(model: Model) -> None:
    person = model.node_types["Person"]
    assert (person.key, person.display) == ("email", "name")
    assert person.text == ("name", "email", "handle", "title", "location", "skills")
    assert (person.icon, person.plural) == ("👤", "people")
    decision = model.node_types["Decision"]
    assert (decision.key, decision.display) == ("number", "title")
    assert "email" in person.properties


def test_node_type_text_defaults_to_every_string_property_and_array_of_strings(model: Model) -> None:
    document = _default_document(model)
    del document["$defs"]["Team"]["x-canon-node"]["text"]
    team = parse_model(document).node_types["Team"]
    # slug is a $ref to the Slug string schema; oncall (boolean) is not text; tags is an array of strings
    assert team.text == ("slug", "name", "mission", "area", "slack_channel", "founded", "tags")


def test_a_node_type_without_defaults_gives_new_nodes_internal_visibility_and_no_readers(model: Model) -> None:
    assert {(t.visibility, t.readers) for t in model.node_types.values()} == {("internal", ())}


def test_node_types_know_their_declared_default_visibility_and_readers(model: Model) -> None:
    document = _default_document(model)
    document["$defs"]["Team"]["x-canon-node"]["defaults"] = {"visibility": "public"}
    document["$defs"]["Service"]["x-canon-node"]["defaults"] = {"visibility": "restricted", "readers": ["group:ops"]}

    types = parse_model(document).node_types

    assert (types["Team"].visibility, types["Team"].readers) == ("public", ())
    assert (types["Service"].visibility, types["Service"].readers) == ("restricted", ("group:ops",))
    assert (types["Person"].visibility, types["Person"].readers) == ("internal", ())


@pytest.mark.parametrize(
    ("defaults", "pointer"),
    [
        ({"visibility": "secret"}, "/$defs/Team/x-canon-node/defaults/visibility"),
        ({"visibility": "restricted", "readers": ["ops"]}, "/$defs/Team/x-canon-node/defaults/readers/0"),
        ({"visibility": "public", "readers": ["group:ops"]}, "/$defs/Team/x-canon-node/defaults/readers"),
        ({"readers": ["group:ops"]}, "/$defs/Team/x-canon-node/defaults/readers"),
        ({"visiblity": "public"}, "/$defs/Team/x-canon-node/defaults"),
    ],
    ids=["unknown-visibility", "malformed-reader", "readers-on-public", "readers-without-visibility", "misspelt"],
)
def test_a_bad_default_visibility_is_a_model_problem_at_its_pointer(
    model: Model, defaults: dict[str, Any], pointer: str
) -> None:
    document = _default_document(model)
    document["$defs"]["Team"]["x-canon-node"]["defaults"] = defaults

    assert [p.pointer for p in check_model(document)] == [pointer]


@pytest.mark.parametrize(
    ("name", "one_per_source", "one_per_target"),
    [
        ("member_of", True, False),  # many-to-one
        ("owns", False, True),  # one-to-many
        ("supersedes", True, True),  # one-to-one
        ("depends_on", False, False),  # many-to-many
    ],
)
def test_edge_types_know_their_cardinality(model: Model, name: str, one_per_source: bool, one_per_target: bool) -> None:
    edge_type = model.edge_types[name]
    assert (edge_type.one_per_source, edge_type.one_per_target) == (one_per_source, one_per_target)


def test_edge_types_know_their_ends_inverse_and_acyclicity(model: Model) -> None:
    owns = model.edge_types["owns"]
    assert owns.sources == {"Team"}
    assert owns.targets == {"Service", "System", "Document"}
    assert owns.inverse == "owned_by"
    assert model.edge_types["reports_to"].acyclic
    assert model.edge_types["supersedes"].acyclic
    assert not model.edge_types["member_of"].acyclic
    assert model.edge_types["related_to"].inverse is None
    assert owns.incoming_name == "owned_by"
    assert model.edge_types["related_to"].incoming_name == "related_to_incoming"
    ends = {(end.name, end.direction): (end.edge.name, end.far) for end in model.edge_ends("Team")}
    assert ends[("owns", "out")] == ("owns", ("Document", "Service", "System"))
    assert ends[("members", "in")] == ("member_of", ("Person",))


def test_model_validator_checks_a_type_against_its_schema(model: Model) -> None:
    validator = model.validator("depends_on")
    assert validator.is_valid({"criticality": "hard"})
    assert not validator.is_valid({"criticality": "maybe"})
    assert not validator.is_valid({})
    assert model.validator("depends_on") is validator


def test_problem_renders_file_line_pointer_and_message() -> None:
    problem = Problem("/nodes/0", "bad", file="a.json", line=3)
    assert str(problem) == "a.json:3: /nodes/0: bad"
    assert problem.as_dict() == {"pointer": "/nodes/0", "message": "bad", "file": "a.json", "line": 3}


# -- $ref cycles and the bounds of a model ---------------------------------------------------------------------------
def _with_loop(defs: dict[str, Any]) -> None:
    defs["Loop"] = {"$ref": "#/$defs/Loop"}
    defs["Team"]["properties"]["loop"] = {"$ref": "#/$defs/Loop"}


def _with_pair(defs: dict[str, Any]) -> None:
    defs["A"] = {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}}
    defs["B"] = {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}}
    defs["Team"]["properties"]["a"] = {"$ref": "#/$defs/A"}


def _with_team_parent(defs: dict[str, Any]) -> None:
    defs["Team"]["properties"]["parent"] = {"$ref": "#/$defs/Team"}


CYCLES = {  # how a model is made cyclic -> the $ref that closes the cycle, and the cycle's names
    "self": (_with_loop, "/$defs/Loop/$ref", "Loop -> Loop"),
    "pair": (_with_pair, "/$defs/B/properties/a/$ref", "A.properties.b -> B.properties.a -> A"),
    "type": (_with_team_parent, "/$defs/Team/properties/parent/$ref", "Team.properties.parent -> Team"),
}


@pytest.mark.parametrize("case", list(CYCLES))
def test_a_ref_cycle_is_one_model_problem_naming_the_cycle(model: Model, case: str) -> None:
    make, at, names = CYCLES[case]
    document = _default_document(model)
    make(document["$defs"])
    problems = check_model(document)
    assert [p.pointer for p in problems] == [at]
    assert names in problems[0].message  # the message is the feature: it names the cycle
    with pytest.raises(ModelError):
        parse_model(document)


def test_a_helper_shared_by_many_properties_is_no_cycle(model: Model) -> None:
    document = _default_document(model)
    document["$defs"]["Pair"] = {"type": "array", "items": [{"$ref": "#/$defs/Slug"}], "prefixItems": [
        {"$ref": "#/$defs/Slug"}, {"$ref": "#/$defs/Tags"}]}  # fmt: skip
    document["$defs"]["Team"]["properties"]["pair"] = {"$ref": "#/$defs/Pair", "description": "Two slugs."}
    document["$defs"]["Team"]["properties"]["enum"] = {"enum": [{"$ref": "#/$defs/Team"}]}  # data, not a schema
    assert not [p for p in check_model(document) if "cycle" in p.message]


def _many_types(model: Model, count: int) -> dict[str, Any]:
    document = _default_document(model)
    for i in range(count):
        document["$defs"][f"Extra{i}"] = copy.deepcopy(document["$defs"]["GlossaryTerm"])
    return document


def _many_properties(model: Model, count: int) -> dict[str, Any]:
    document = _default_document(model)
    document["$defs"]["Team"]["properties"] |= {f"p{i}": {"type": "string"} for i in range(count)}
    return document


def _deep(model: Model, levels: int) -> dict[str, Any]:
    """The default model with a Team property `levels` objects deep: its innermost schema sits under
    4 + 2 * levels members of the document."""
    document = _default_document(model)
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    document["$defs"]["Team"]["properties"]["deep"] = schema
    return document


DEEPEST = (MAX_DEPTH - 1 - 4) // 2  # the most levels `_deep` nests within MAX_DEPTH


def test_a_model_over_each_bound_is_refused_naming_the_bound_and_its_value(model: Model) -> None:
    defs = len(model.document["$defs"])
    over = {
        "/$defs": (_many_types(model, MAX_DEFINITIONS + 1 - defs), f"{MAX_DEFINITIONS + 1:,} definitions"),
        "/$defs/Team/properties": (_many_properties(model, MAX_PROPERTIES), f"at most {MAX_PROPERTIES:,}"),
        "/$defs/Team/properties/deep" + "/properties/a" * (DEEPEST + 1): (_deep(model, DEEPEST + 1),
                                                                  f"more than {MAX_DEPTH} levels"),
    }  # fmt: skip
    for at, (document, words) in over.items():
        problems = check_model(document, source="big.json")
        assert [(p.pointer, p.file) for p in problems] == [(at, "big.json")]
        assert words in problems[0].message


def test_a_model_at_the_property_and_depth_bounds_is_accepted(model: Model) -> None:
    assert check_model(_many_properties(model, MAX_PROPERTIES - len(model.node_types["Team"].properties))) == []
    assert check_model(_deep(model, DEEPEST)) == []
