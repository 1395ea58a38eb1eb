"""The registry: tool definitions as data, derived from the model once, deterministic and self-contained."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from importlib import resources
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from referencing import Registry as RefRegistry
from referencing import Resource
from referencing.jsonschema import DRAFT202012

from core.app.synthetic import synthetic_model
from core.dispatch.registry import PINS, QuickCheck, Registry, build_registry, type_schema
from core.lang.model import Model, default_seed_path, load_model, parse_model
from core.store.interchange import import_path
from core.store.sqlite import SQLiteStore
from core.values.errors import UnknownToolError

DOCUMENT_URI = "urn:canon:test:tool-schema"


@pytest.fixture(scope="module")
def registry(model: Model) -> Registry:
    return build_registry(model)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory, model: Model) -> Iterator[SQLiteStore]:
    """The seeded store, shared by this module's tests: they only read it."""
    opened = SQLiteStore.open(tmp_path_factory.mktemp("registry") / "canon.db", model)
    import_path(opened, default_seed_path(), principal="test:seed")
    yield opened
    opened.close()


def _schemas(registry: Registry) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for tool in registry.tools:
        yield f"{tool.name}.inputSchema", tool.input_schema
        yield f"{tool.name}.outputSchema", tool.output_schema
        yield f"{tool.name}.typedOutputSchema", tool.typed_output_schema


SCHEMAS = [pytest.param(name, schema, id=name) for name, schema in _schemas(build_registry(load_model()))]


def _walk(node: Any) -> Iterator[Any]:
    yield node
    if isinstance(node, dict):
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _refs(node: Any) -> list[str]:
    return [n["$ref"] for n in _walk(node) if isinstance(n, dict) and isinstance(n.get("$ref"), str)]


def _markers(document: Any) -> list[Any]:
    return [n for n in _walk(document) if isinstance(n, dict) and "x-canon-derive" in n]


def _static_tool_files() -> list[dict[str, Any]]:
    folder = resources.files("schema").joinpath("tools")
    return [json.loads(f.read_text(encoding="utf-8")) for f in folder.iterdir() if f.name.endswith(".json")]


def _validator(schema: Mapping[str, Any]) -> Draft202012Validator:
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def test_every_tool_schema_is_a_valid_draft_2020_12_schema(registry: Registry) -> None:
    schemas = list(_schemas(registry))

    assert len(schemas) == 3 * len(registry.tools) > 0
    for name, schema in schemas:
        Draft202012Validator.check_schema(schema)  # raises SchemaError, naming the schema via the traceback
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema", name


def test_two_builds_give_the_same_manifest_json(model: Model) -> None:
    first = json.dumps(build_registry(model).manifest(), ensure_ascii=False)
    second = json.dumps(build_registry(model).manifest(), ensure_ascii=False)

    assert first == second


def test_tools_are_listed_in_the_order_of_the_order_file_then_by_name(registry: Registry, model: Model) -> None:
    listed = json.loads(resources.files("schema").joinpath("tool-order.json").read_text(encoding="utf-8"))["tools"]
    extra = {**_static_tool_files()[0], "name": "aaa_unlisted"}  # first by name, still after every listed tool

    assert [t.name for t in registry.tools] == listed
    assert [t["name"] for t in registry.manifest()["tools"]] == listed
    assert [t.name for t in build_registry(model, [extra]).tools] == [*listed, "aaa_unlisted"]


def test_a_tool_defined_twice_is_refused_at_start_up(model: Model) -> None:
    with pytest.raises(ValueError, match="get_node"):
        build_registry(model, [next(d for d in _static_tool_files() if d["name"] == "get_node")])


def test_a_definition_the_tool_meta_schema_rejects_is_refused_naming_the_field(model: Model) -> None:
    stale = {**_static_tool_files()[0], "name": "numbered", "order": 8}  # positions are no longer integers
    unknown_kind = {**_static_tool_files()[0], "name": "sprinting", "execution": "fast"}

    with pytest.raises(ValueError, match="order"):
        build_registry(model, [stale])
    with pytest.raises(ValueError, match="/execution"):
        build_registry(model, [unknown_kind])


def test_every_static_definition_says_how_it_runs(registry: Registry) -> None:
    kinds = {d["name"]: d["execution"] for d in _static_tool_files()}

    assert {t.name: t.execution for t in registry.tools} == kinds
    assert {kinds["get_node"], kinds["find_nodes"], kinds["query_graph"], kinds["upsert_node"]} == {
        "point", "indexed", "walk", "worker"}  # fmt: skip


def test_no_derive_marker_survives_derivation(registry: Registry) -> None:
    assert _markers(_static_tool_files()), "the static files use markers, so this test checks something"

    assert _markers(registry.manifest()) == []


def test_derived_type_enums_list_the_models_types(registry: Registry, model: Model) -> None:
    find_nodes_type = registry.tool("find_nodes").input_schema["properties"]["type"]
    edge_type = registry.tool("upsert_edge").input_schema["properties"]["type"]
    edge_names = registry.tool("get_neighbors").input_schema["properties"]["edge_types"]["items"]

    assert find_nodes_type["enum"] == list(model.node_types)
    assert find_nodes_type["type"] == "string"
    assert edge_type["enum"] == list(model.edge_types)
    assert edge_names["enum"] == [*model.edge_types, *(e.incoming_name for e in model.edge_types.values())]
    assert {"members", "owned_by", "related_to_incoming"} <= set(edge_names["enum"])


@pytest.mark.parametrize(("name", "schema"), SCHEMAS)
def test_every_ref_in_a_tool_schema_resolves_inside_the_schema_itself(name: str, schema: Mapping[str, Any]) -> None:
    resource = Resource.from_contents(dict(schema), default_specification=DRAFT202012)
    resolver = RefRegistry().with_resource(DOCUMENT_URI, resource).resolver(base_uri=DOCUMENT_URI)

    for ref in _refs(schema):
        assert ref.startswith("#/"), f"{name}: {ref} points outside the document"
        resolved = resolver.lookup(ref)  # Unresolvable if it names a $defs entry the document lacks
        assert isinstance(resolved.contents, dict | bool), f"{name}: {ref}"


def test_node_envelopes_ref_the_models_own_type_definitions_verbatim(registry: Registry, model: Model) -> None:
    defs = registry.tool("get_node").typed_output_schema["$defs"]

    for type_name in model.node_types:
        assert defs[type_name] == model.document["$defs"][type_name]
        assert defs[f"canon.node.{type_name}"]["properties"]["properties"] == {"$ref": f"#/$defs/{type_name}"}
        assert defs[f"canon.node.{type_name}"]["properties"]["type"] == {"const": type_name}
    # the model's local refs (Slug, Tags, ...) come along, unchanged
    assert defs["Slug"] == model.document["$defs"]["Slug"]
    assert defs["Tags"] == model.document["$defs"]["Tags"]


def test_edge_envelopes_ref_the_models_own_edge_definitions_verbatim(registry: Registry, model: Model) -> None:
    defs = registry.tool("find_paths").typed_output_schema["$defs"]

    for type_name in model.edge_types:
        assert defs[type_name] == model.document["$defs"][type_name]
        assert defs[f"canon.edge.{type_name}"]["properties"]["properties"] == {"$ref": f"#/$defs/{type_name}"}


def _reachable_defs(schema: Mapping[str, Any]) -> set[str]:
    defs = schema.get("$defs", {})
    found: set[str] = set()
    pending = _refs({k: v for k, v in schema.items() if k != "$defs"})
    while pending:
        name = pending.pop().removeprefix("#/$defs/").split("/")[0]
        if name in defs and name not in found:
            found.add(name)
            pending += _refs(defs[name])
    return found


@pytest.mark.parametrize(("name", "schema"), SCHEMAS)
def test_a_tool_schema_defines_only_what_it_reaches(name: str, schema: Mapping[str, Any]) -> None:
    assert set(schema.get("$defs", {})) == _reachable_defs(schema), name


def test_get_node_output_holds_no_edge_type_definitions(registry: Registry, model: Model) -> None:
    defs = registry.tool("get_node").typed_output_schema["$defs"]

    assert not set(model.edge_types) & set(defs)
    assert not [name for name in defs if name.startswith("canon.edge.") or name == "canon.Edge"]


def test_find_paths_output_holds_no_node_type_definitions(registry: Registry, model: Model) -> None:
    defs = registry.tool("find_paths").typed_output_schema["$defs"]  # its items carry node ids and edges only

    assert not set(model.node_types) & set(defs)


def test_a_stored_node_validates_against_get_nodes_output_schema(registry: Registry, seeded: SQLiteStore) -> None:
    validator = _validator(registry.tool("get_node").typed_output_schema)
    revision = seeded.revision()

    checked = 0
    for type_name in registry.model.node_types:
        node = next(seeded.iter_nodes(type_name))
        errors = list(validator.iter_errors({"node": node.to_json(), "revision": revision}))
        assert errors == [], (node.id, [e.message for e in errors])
        checked += 1
    assert checked == len(registry.model.node_types)


@pytest.mark.parametrize(
    ("change", "value"),
    [
        ("level", "senior"),  # integer property given a string
        ("active", "yes"),  # boolean property given a string
        ("skills", "kafka"),  # array property given a string
        ("role", "wizard"),  # not in the enum
        ("shoe_size", 44),  # not a Person property
    ],
)
def test_a_node_with_a_wrong_property_does_not_validate_against_get_nodes_output_schema(
    registry: Registry, seeded: SQLiteStore, change: str, value: object
) -> None:
    validator = _validator(registry.tool("get_node").typed_output_schema)
    node = next(seeded.iter_nodes("Person")).to_json()
    assert validator.is_valid({"node": node, "revision": 1})

    node["properties"][change] = value

    assert not validator.is_valid({"node": node, "revision": 1})


def test_a_node_whose_type_does_not_fit_its_properties_does_not_validate(
    registry: Registry, seeded: SQLiteStore
) -> None:
    validator = _validator(registry.tool("get_node").typed_output_schema)
    node = next(seeded.iter_nodes("Person")).to_json()

    node["type"] = "Team"  # Person properties in a Team envelope

    assert not validator.is_valid({"node": node, "revision": 1})


def test_an_unknown_tool_is_refused_with_the_closest_names(registry: Registry) -> None:
    with pytest.raises(UnknownToolError) as caught:
        registry.tool("get_nod")

    assert caught.value.code == "unknown_tool"
    assert caught.value.tool == "get_nod"
    assert "get_node" in caught.value.suggestions
    assert set(caught.value.suggestions) <= {t.name for t in registry.tools}


def test_every_tool_description_is_long_enough_and_has_an_example(registry: Registry) -> None:
    for tool in registry.tools:  # within the context budget (docs/benchmarks.md), yet a full sentence and a call
        assert 140 <= len(tool.description) <= 1000, tool.name
        assert "Example" in tool.description, tool.name


def test_no_tool_description_names_the_sample_organisation_when_another_model_is_served() -> None:
    model = parse_model(synthetic_model(3))
    other = build_registry(model)

    for tool in other.tools:
        text = json.dumps([tool.description, tool.input_schema])
        assert all(word not in text for word in ("team-payments", "svc-checkout-api", "northwind")), tool.name
        assert "Example" in tool.description
    assert all(name not in other.instructions() for name in ("Team", "Service", "northwind"))
    assert next(iter(model.node_types)) in other.instructions()
    assert len(other.instructions().encode()) <= 1024


def test_generic_output_schemas_do_not_grow_with_the_model(registry: Registry) -> None:
    # 48 types, five times the sample's: one type's schema embedded in an output schema would add hundreds of bytes
    # (200 types said the same in 4x the time: the registry's schema checks grow with the model)
    bigger = build_registry(parse_model(synthetic_model(48)))

    for tool in registry.tools:
        small, large = json.dumps(tool.output_schema), json.dumps(bigger.tool(tool.name).output_schema)
        assert abs(len(large) - len(small)) < 64, tool.name  # a few enum names at most, never the types' schemas


def test_read_tools_are_annotated_read_only(registry: Registry) -> None:
    read_tools = [t for t in registry.tools if t.permission == "read"]

    assert read_tools
    for tool in read_tools:
        assert tool.annotations["readOnlyHint"] is True, tool.name
        assert tool.annotations["destructiveHint"] is False, tool.name


def test_type_schema_validates_a_persons_properties(model: Model, seeded: SQLiteStore) -> None:
    validator = _validator(type_schema(model, "Person"))
    people = list(seeded.iter_nodes("Person"))

    assert people
    for person in people:
        assert validator.is_valid(dict(person.properties)), person.id
    broken = {**people[0].properties, "level": "senior"}
    assert not validator.is_valid(broken)
    missing = {k: v for k, v in people[0].properties.items() if k != "email"}
    assert not validator.is_valid(missing)


def test_type_schema_validates_an_edges_properties(model: Model) -> None:
    validator = _validator(type_schema(model, "member_of"))

    assert validator.is_valid({"role": "lead"})
    assert not validator.is_valid({"role": "captain"})
    assert not validator.is_valid({})


def test_node_and_edge_unions_are_tagged_so_a_validator_checks_one_branch(model: Model) -> None:
    """`oneOf` over the seven node envelopes made an SDK client validate every branch of every node it received
    (5.2 ms per get_node, 39 ms per page of 20 people); the tagged form checks the one branch the type names."""
    from jsonschema import Draft202012Validator

    registry = build_registry(model)
    schema = registry.tool("get_node").typed_output_schema
    union = schema["$defs"]["canon.Node"]
    assert "oneOf" not in union
    assert union["properties"]["type"]["enum"] == list(model.node_types)
    assert [b["then"]["$ref"] for b in union["allOf"]] == [f"#/$defs/canon.node.{t}" for t in model.node_types]
    validator = Draft202012Validator(schema)
    team = {"id": "team-x", "type": "Team", "visibility": "public", "revision": 1,
            "properties": {"slug": "x", "name": "X", "mission": "M", "area": "platform"}}  # fmt: skip
    assert validator.is_valid({"node": team, "revision": 1})
    assert not validator.is_valid({"node": {**team, "type": "Nope"}, "revision": 1})  # not a node type
    assert not validator.is_valid({"node": {**team, "type": "Person"}, "revision": 1})  # a Team's properties
    missing = {k: v for k, v in team["properties"].items() if k != "mission"}
    assert not validator.is_valid({"node": {**team, "properties": missing}, "revision": 1})


# -- the quick check: accepts only what the input schema accepts -----------------------------------------------------
_PLAIN_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 300), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "a", "svc-checkout-api", "Person", "out", "both", "sideways", "x" * 129, "x" * 201,
                     "ok", "2026-11-30T00:00:00Z", "not-a-date", "a b", "ß", "-1", "a\n", "1.0"]),
    st.text(max_size=12), st.lists(st.text(max_size=3), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(),
                                                                                        max_size=2),
)  # fmt: skip
_QUICK_TOOLS = [  # the tools whose quick check can accept a call: it covers every required property
    t.name
    for t in build_registry(load_model()).tools
    if (q := QuickCheck.of(t.input_schema)) is not None and q.required <= q.checks.keys()
]


def _near(schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """Values at and just past the edges of one property's schema: most of them valid, some one step out."""
    if "enum" in schema:
        return st.sampled_from([*schema["enum"], "Sideways"])
    kind = schema.get("type")
    if kind in ("integer", "number"):
        low, high = schema.get("minimum", -5), schema.get("maximum", 10_000)
        edges = st.integers(low - 1, high + 1)
        return st.one_of(edges, edges.map(float)) if kind == "number" else st.one_of(edges, st.just(float(low)))
    if kind == "boolean":
        return st.booleans()
    if kind == "string":
        shortest, longest = schema.get("minLength", 0), min(schema.get("maxLength", 40), 300)
        pattern = schema.get("pattern")
        fitting = st.from_regex(pattern, fullmatch=True) if pattern else st.text(min_size=shortest, max_size=longest)
        past = st.one_of(st.text(min_size=longest + 1, max_size=longest + 1), st.just(""))
        return st.integers(0, 4).flatmap(lambda i: past if i == 4 else fitting)  # hypothesis favours 0
    return _PLAIN_VALUES


def _arguments(schema: Mapping[str, Any], quick: QuickCheck) -> st.SearchStrategy[dict[str, Any]]:
    """Argument objects for one tool: its required properties, some of the optional ones the quick check covers,
    each value near its schema; then, about one time in three, one value swapped for any JSON value, and about one
    time in ten a property the quick check does not cover (or a stranger) added."""
    properties: Mapping[str, Any] = schema.get("properties", {})
    required = [n for n in properties if n in quick.required]
    optional = [n for n in properties if n not in quick.required and n in quick.checks]
    others = [n for n in properties if n not in quick.checks] + ["stranger"]
    near = st.fixed_dictionaries({n: _near(properties[n]) for n in required},
                                 optional={n: _near(properties[n]) for n in optional})  # fmt: skip

    def spoil(arguments: dict[str, Any], dice: int, pick: int, value: Any) -> dict[str, Any]:
        names = list(arguments)
        if dice >= 7 and names:  # hypothesis favours 0: most examples stay near the schema
            return arguments | {names[pick % len(names)]: value}
        return arguments | {others[pick % len(others)]: value} if dice == 6 else arguments

    return st.builds(spoil, near, st.integers(0, 9), st.integers(0, 50), _PLAIN_VALUES)


@pytest.mark.parametrize("tool", _QUICK_TOOLS)
def test_the_quick_check_accepts_only_arguments_the_input_schema_accepts(registry: Registry, tool: str) -> None:
    quick = registry.quick_check(tool)
    assert quick is not None
    validator = registry.input_validator(tool)
    accepted = refused = 0

    @settings(max_examples=150, deadline=None, derandomize=True, database=None)
    @given(arguments=_arguments(registry.tool(tool).input_schema, quick))
    def check(arguments: dict[str, Any]) -> None:
        nonlocal accepted, refused
        if quick(arguments):
            accepted += 1
            assert validator.is_valid(arguments), arguments
        else:
            refused += 1

    check()
    # the examples reach the assertion, and the check is not one that accepts everything
    assert accepted >= 40, f"{tool}: only {accepted} of {accepted + refused} examples passed the quick check"
    assert refused >= 15, f"{tool}: only {refused} examples were left to the validator"


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("get_node", {"id": "svc-checkout-api"}),
        ("find_nodes", {"type": "Person", "text": "ada", "limit": 5}),
        ("get_neighbors", {"id": "team-payments", "depth": 2, "direction": "out"}),
        ("delete_node", {"id": "svc-checkout-api", "cascade": True}),
    ],
)
def test_the_quick_check_accepts_plain_calls_without_the_validator(
    registry: Registry, tool: str, arguments: dict[str, Any]
) -> None:
    quick = registry.quick_check(tool)
    assert quick is not None
    assert quick(arguments)
    assert not quick({**arguments, "stranger": 1})  # unsure: the validator decides (and refuses it)


def test_an_edge_type_resource_takes_the_models_edge_icon_and_a_default_otherwise(model: Model) -> None:
    document = json.loads(json.dumps(model.document))
    document["$defs"]["member_of"]["x-canon-edge"]["icon"] = "🤝"
    registry = build_registry(parse_model(document))

    icons = {r.uri: r.icon for r in registry.resources}
    assert icons["canon://types/member_of"] == "🤝"
    assert icons["canon://types/owns"]  # no icon in the model: canon's edge icon
    assert icons["canon://model"]
    assert icons["canon://changes"]
    assert all(t.icon for t in registry.templates)


def test_a_model_without_edge_types_builds_a_registry_and_every_surface(model: Model) -> None:
    """`canon.Edge` of a model with no edge types accepts no edge instead of being an invalid empty `allOf`."""
    from core.seam.rendering import render_model
    from core.seam.surfaces import discover

    document: dict[str, Any] = json.loads(json.dumps(model.document))
    document["$defs"] = {name: d for name, d in document["$defs"].items() if "x-canon-edge" not in d}
    nodes_only = parse_model(document, source="nodes-only.json")
    assert not nodes_only.edge_types

    built = build_registry(nodes_only)
    artifacts = render_model(nodes_only, discover())

    schemas = [s for t in built.tools for s in (t.input_schema, t.typed_output_schema) if s]
    edges = [s["$defs"]["canon.Edge"] for s in schemas if "canon.Edge" in s.get("$defs", {})]
    assert edges  # the union some schema refers to, even with no edge types
    for edge in edges:
        assert not Draft202012Validator(edge).is_valid({"type": "member_of", "source": "a", "target": "b"})
    assert {"mcp", "rest", "graphql", "llms"} <= set(artifacts)


def test_a_tool_that_reads_the_past_takes_both_pins_and_no_tool_takes_only_one(model: Model) -> None:
    """`ToolDefinition.pins` is the one rule dispatch, GraphQL and the pages ask: a tool with only one of `at` and
    `as_of` would have it ignored by all three."""
    tools = build_registry(model).tools
    for tool in tools:
        taken = set(PINS) & set(tool.input_schema.get("properties", {}))
        assert taken in (set(), set(PINS)), f"{tool.name} takes {sorted(taken)} of {PINS}"
        assert tool.pins == (PINS if taken else ())
    assert {"get_node", "find_nodes", "get_neighbors"} <= {t.name for t in tools if t.pins}
    assert not {"upsert_node", "get_changes", "apply_model"} & {t.name for t in tools if t.pins}
