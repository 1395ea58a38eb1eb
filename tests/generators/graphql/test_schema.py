"""The generated GraphQL surface: its schema is the registry's, and every call goes through the dispatcher.

Most tests talk to a real uvicorn over HTTP (and WebSocket for subscriptions) with bearer tokens. Full selection
sets are built from the served SDL: every field without arguments, with `... on T` for each type of an
interface; edge fields (the only non-root fields with arguments) are selected on purpose where tested.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import graphql
import httpx2
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from core.dispatch.registry import build_registry
from core.lang.model import load_model, parse_model
from core.seam.instance import Instance
from core.seam.surfaces import Surface, SurfaceHost, host_for, principal_of_request
from core.values.principal import LOCAL
from generators.graphql.bounds import MAX_SUBSCRIPTIONS
from generators.graphql.runtime import Runtime
from generators.graphql.schema import (
    MAX_COST,
    MAX_DEPTH,
    SELECTION_ARGUMENTS,
    Built,
    build_schema,
    local_assets,
    surface,
)
from tests.generators.conftest import live, open_copy, token

SURFACES: list[Surface] = [surface]


def host_of(instance: Instance) -> SurfaceHost:
    def no_watch(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("not watched here")

    return host_for(instance, "graphql", principal_of=principal_of_request, watch=no_watch)


# -- helpers ----------------------------------------------------------------------------------------------------------
def selection(schema: graphql.GraphQLSchema, type_: graphql.GraphQLNamedType, depth: int = 0) -> str:
    """Every field without arguments, recursively; interfaces get a fragment per implementation."""
    assert depth < 8
    if not isinstance(type_, graphql.GraphQLObjectType | graphql.GraphQLInterfaceType):
        return ""
    parts: list[str] = []
    for name, field in type_.fields.items():
        if field.args:
            continue
        inner = graphql.get_named_type(field.type)
        sub = selection(schema, inner, depth + 1)
        parts.append(f"{name} {{ {sub} }}" if sub else name)
    if isinstance(type_, graphql.GraphQLInterfaceType):
        for implementation in schema.get_possible_types(type_):
            parts.append(f"... on {implementation.name} {{ {selection(schema, implementation, depth + 1)} }}")
    return " ".join(parts)


def without_absent(got: Any, expected: Any) -> Any:
    """`got` with the nulls GraphQL gives for fields the JSON leaves out removed (what "equal" means here)."""
    if isinstance(got, dict) and isinstance(expected, dict):
        return {k: without_absent(v, expected.get(k)) for k, v in got.items() if v is not None or k in expected}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(got, list) and isinstance(expected, list) and len(got) == len(expected):  # pyright: ignore[reportUnknownArgumentType]
        return [without_absent(g, e) for g, e in zip(got, expected, strict=True)]  # pyright: ignore[reportUnknownArgumentType]
    return got


def literal(value: Any) -> str:
    """A GraphQL literal for a JSON value (enum-typed arguments are passed as variables instead)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {literal(v)}" for k, v in value.items()) + "}"  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"  # pyright: ignore[reportUnknownVariableType]
    return json.dumps(value)


class Client:
    def __init__(self, base: str, secret: str | None = None) -> None:
        headers = {"Authorization": f"Bearer {secret}"} if secret else {}
        self.http = httpx2.Client(base_url=base, headers=headers, timeout=30)
        self.schema = graphql.build_schema(self.http.get("/schema.graphql").text)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.http.close()

    def post(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        response = self.http.post("/graphql", json={"query": query, "variables": variables or {}})
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    def call(self, root: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call a root field with full selection; arguments are passed as variables of their declared types."""
        root_type = self.schema.get_root_type(graphql.OperationType(root))
        assert root_type is not None
        field = root_type.fields[name]
        declared = ", ".join(f"${k}: {field.args[k].type}" for k in arguments)
        passed = ", ".join(f"{k}: ${k}" for k in arguments)
        head = f"{root} ({declared})" if arguments else root
        call = f"{name}({passed})" if arguments else name
        sub = selection(self.schema, graphql.get_named_type(field.type))
        return self.post(f"{head} {{ {call} {{ {sub} }} }}", arguments)


def codes(body: dict[str, Any]) -> list[str]:
    return [e.get("extensions", {}).get("code") for e in body.get("errors", [])]


@pytest.fixture(scope="module")
def served(gen_instance: Instance) -> Iterator[str]:
    with live(gen_instance, SURFACES) as base:
        yield base


@pytest.fixture(scope="module")
def admin(gen_instance: Instance, served: str) -> Iterator[Client]:
    with Client(served, token(gen_instance, "gq-admin", "admin")) as client:
        yield client


# -- the schema -------------------------------------------------------------------------------------------------------
def test_the_schema_prints_the_same_every_time_and_is_served_as_the_artifact(gen_instance: Instance,
                                                                             served: str) -> None:  # fmt: skip
    host = host_of(gen_instance)
    first = surface.artifacts(host)["schema.graphql"]
    assert (
        first == surface.artifacts(host)["schema.graphql"] == build_schema(gen_instance.registry).schema.as_str() + "\n"
    )
    response = httpx2.get(f"{served}/schema.graphql")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text == first
    assert httpx2.post(f"{served}/schema.graphql").status_code == 405


def test_root_fields_are_the_tools_and_resources_and_nothing_else(gen_instance: Instance, admin: Client) -> None:
    registry, schema = gen_instance.registry, admin.schema
    assert schema.query_type
    assert schema.mutation_type
    assert schema.subscription_type
    reads = [t.name for t in registry.tools if t.annotations["readOnlyHint"]]
    writes = [t.name for t in registry.tools if not t.annotations["readOnlyHint"]]
    resources = ["resource_" + r.name.replace("-", "_") for r in (*registry.resources, *registry.templates)]
    assert list(schema.query_type.fields) == reads + resources
    assert "resource_type_Person" in resources
    assert "resource_node" in resources
    assert list(schema.mutation_type.fields) == writes
    subscribable = [r for r in (*registry.resources, *registry.templates) if r.subscribable]
    assert list(schema.subscription_type.fields) == ["resource_" + r.name for r in subscribable]
    assert list(schema.subscription_type.fields) == ["resource_changes", "resource_node", "resource_proposal"]


def test_arguments_are_the_input_properties_with_their_defaults(gen_instance: Instance, admin: Client) -> None:
    schema = admin.schema
    for tool in gen_instance.registry.tools:
        root = schema.query_type if tool.annotations["readOnlyHint"] else schema.mutation_type
        assert root is not None
        args = root.fields[tool.name].args
        properties = {k: v for k, v in tool.input_schema.get("properties", {}).items() if k not in SELECTION_ARGUMENTS}
        assert list(args) == list(properties), tool.name
        for name, prop in properties.items():
            required = name in tool.input_schema.get("required", ())
            assert isinstance(args[name].type, graphql.GraphQLNonNull) == required, (tool.name, name)
            if "default" in prop:
                node = args[name].ast_node
                assert node is not None, (tool.name, name)
                if str(args[name].type) == "JSON" and isinstance(prop["default"], dict | list):
                    assert node.default_value is None, "a JSON object default has no literal: introspection fails on it"
                    continue
                assert node.default_value is not None, (tool.name, name)
                assert graphql.value_from_ast(node.default_value, args[name].type) == prop["default"], (tool.name, name)
    limit = schema.query_type.fields["find_nodes"].args["limit"]  # type: ignore[union-attr]
    assert limit.ast_node is not None
    assert graphql.print_ast(limit.ast_node).endswith("limit: Int = 10")
    assert str(schema.query_type.fields["find_nodes"].args["type"].type) == "NodeTypeName"  # type: ignore[union-attr]
    assert str(schema.query_type.fields["get_neighbors"].args["edge_types"].type) == "[EdgeName!]"  # type: ignore[union-attr]
    assert str(schema.mutation_type.fields["upsert_edge"].args["type"].type) == "EdgeTypeName!"  # type: ignore[union-attr]


def test_every_node_type_implements_node_and_has_edge_fields_both_ways(gen_instance: Instance, admin: Client) -> None:
    schema, model = admin.schema, gen_instance.registry.model
    node = schema.get_type("Node")
    assert isinstance(node, graphql.GraphQLInterfaceType)
    assert sorted(t.name for t in schema.get_possible_types(node)) == sorted(model.node_types)
    person, team = schema.get_type("Person"), schema.get_type("Team")
    assert isinstance(person, graphql.GraphQLObjectType)
    assert isinstance(team, graphql.GraphQLObjectType)
    assert str(person.fields["member_of"].type) == "MemberOfPage!"
    assert str(team.fields["members"].type) == "MembersPage!"  # the model's inverse of member_of
    assert "member_of_incoming" not in team.fields
    assert list(person.fields["member_of"].args) == ["limit", "cursor"]
    item = schema.get_type("MembersItem")
    assert isinstance(item, graphql.GraphQLObjectType)
    assert {n: str(f.type) for n, f in item.fields.items()} == {"node": "Person!", "edge": "Edge!",
                                                                "properties": "MemberOfProperties!"}  # fmt: skip
    page = schema.get_type("MembersPage")
    assert isinstance(page, graphql.GraphQLObjectType)
    assert list(page.fields) == ["items", "total", "truncated", "next_cursor", "limit", "revision"]
    owns = schema.get_type("OwnsItem")
    assert isinstance(owns, graphql.GraphQLObjectType)
    assert str(owns.fields["node"].type) == "Node!"  # several target types
    assert "properties" not in owns.fields  # owns declares none
    assert str(person.fields["properties"].type) == "PersonProperties!"
    properties = schema.get_type("PersonProperties")
    assert isinstance(properties, graphql.GraphQLObjectType)
    assert list(properties.fields) == list(model.node_types["Person"].schema["properties"])
    assert model.edge_types["related_to"].inverse is None
    for name, edge in model.edge_types.items():
        for source in edge.sources:
            assert name in schema.get_type(source).fields  # type: ignore[union-attr]
        for target in edge.targets:
            assert (edge.inverse or f"{name}_incoming") in schema.get_type(target).fields  # type: ignore[union-attr]


def _json_places(schema: graphql.GraphQLSchema) -> set[str]:
    """Every field and argument of the printed schema whose type is the `JSON` scalar, as `Type.field` and
    `tool(argument:)`."""
    places: set[str] = set()
    roots = {t.name for t in (schema.query_type, schema.mutation_type, schema.subscription_type) if t is not None}
    for named in schema.type_map.values():
        if named.name.startswith("__") or not isinstance(
            named, graphql.GraphQLObjectType | graphql.GraphQLInputObjectType
        ):
            continue
        for name, field in named.fields.items():
            if graphql.get_named_type(field.type).name == "JSON":
                places.add(f"{named.name}.{name}")
            for argument, declared in getattr(field, "args", {}).items():
                if graphql.get_named_type(declared.type).name == "JSON":
                    places.add(f"{name}({argument}:)" if named.name in roots else f"{named.name}.{name}({argument}:)")
    return places


def test_every_json_fallback_is_recorded_with_its_reason_and_nothing_else_is_json(gen_instance: Instance) -> None:
    """What GraphQL cannot say is the `JSON` scalar (generators.graphql.types): the builder records each such
    place with its reason, and those are exactly the `JSON` places of the schema it prints (the SDL in
    docs/reference, kept current by `canon generate --check`), so no hand-kept list is needed."""
    built = build_schema(gen_instance.registry)
    recorded = {f.where.removesuffix("[]") for f in built.fallbacks}
    assert all(f.why for f in built.fallbacks)
    assert recorded == _json_places(graphql.build_schema(built.schema.as_str()))
    assert {"Edge.properties", "find_nodes(where:)", "write_batch(operations:)"} <= recorded


# -- same call, same result -------------------------------------------------------------------------------------------
READS = [
    ("describe_model", {}),
    ("describe_model", {"include_schemas": True}),
    ("get_node", {"id": "team-payments"}),
    ("find_nodes", {"type": "Person", "limit": 7}),
    ("find_nodes", {"text": "checkout"}),
    ("get_neighbors", {"id": "team-payments", "direction": "out", "edge_types": ["owns"], "depth": 2}),
    ("find_paths", {"source": "team-payments", "target": "svc-card-vault", "max_depth": 3}),
    ("query_graph", {"match": [{"node": "t", "type": "Team"}, {"edge": "owns", "from": "t", "to": "s"}], "limit": 5}),
    ("get_changes", {"since": 1500, "limit": 30}),
]


@pytest.mark.parametrize(("name", "arguments"), READS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(READS)])
def test_a_query_answers_what_the_dispatcher_answers(gen_instance: Instance, admin: Client, name: str,
                                                     arguments: dict[str, Any]) -> None:  # fmt: skip
    body = admin.call("query", name, arguments)
    assert "errors" not in body, body
    expected = gen_instance.dispatcher.call_tool(LOCAL, "test", name, arguments).value
    assert without_absent(body["data"][name], expected) == expected


def test_a_resource_field_answers_what_resources_read_answers(gen_instance: Instance, admin: Client) -> None:
    body = admin.post('{ resource_node(type: "Team", id: "team-payments") { uri mimeType text } '
                      "resource_type_Person { uri mimeType } }")  # fmt: skip
    node = body["data"]["resource_node"]
    assert node["uri"] == "canon://nodes/Team/team-payments"
    assert node["mimeType"] == "application/json"
    expected = gen_instance.dispatcher.call_tool(LOCAL, "test", "get_node", {"id": "team-payments"}).value
    assert expected is not None
    assert json.loads(node["text"]) == expected["node"]
    assert body["data"]["resource_type_Person"] == {
        "uri": "canon://types/Person",
        "mimeType": "application/schema+json",
    }


def test_typed_traversal_follows_edges_as_the_caller_may_see_them(gen_instance: Instance, admin: Client,
                                                                  served: str) -> None:  # fmt: skip
    query = ('{ get_node(id: "team-payments") { node { __typename id ... on Team { properties { name area } '
             "owns(limit: 100) { total items { node { id visibility } } } members(limit: 100) { total items { "
             "node { id properties { name } member_of { items { node { id } } } } } } } } } }")  # fmt: skip
    seen = admin.post(query)["data"]["get_node"]["node"]
    assert seen["__typename"] == "Team"
    assert seen["properties"]["area"] in ("product", "platform")
    owned = {i["node"]["id"]: i["node"]["visibility"] for i in seen["owns"]["items"]}
    assert owned["svc-card-vault"] == "restricted"
    members = seen["members"]["items"]
    assert members
    assert seen["members"]["total"] == len(members)
    assert all(m["node"]["member_of"]["items"] == [{"node": {"id": "team-payments"}}] for m in members)
    with Client(served) as client:
        anonymous = client.post(query)["data"]["get_node"]["node"]
    assert anonymous["owns"]["items"]
    assert all(i["node"]["visibility"] == "public" for i in anonymous["owns"]["items"])
    assert "svc-card-vault" not in {i["node"]["id"] for i in anonymous["owns"]["items"]}
    assert anonymous["owns"]["total"] == len(anonymous["owns"]["items"]) < seen["owns"]["total"]
    assert anonymous["members"] == {"total": 0, "items": []}  # people are internal


def test_a_query_at_a_past_revision_reads_its_edge_fields_and_other_root_fields_then(fresh_instance: Instance) -> None:
    """`at` (or `as_of`) on a root field pins the whole query: the edge fields under it and the other root fields
    that take `at` read the graph as it was then, not as it is (generators.graphql.pinning)."""
    before = fresh_instance.store.revision()
    for tool, arguments in (("patch_node", {"id": "team-payments", "properties": {"name": "Payments Later"}}),
                            ("delete_node", {"id": "person-ada-okafor", "cascade": True})):  # fmt: skip
        assert not fresh_instance.dispatcher.call_tool(LOCAL, "test", tool, arguments).is_error
    logged = fresh_instance.store.changes(before - 1, 1)[0].at  # the time of revision `before`
    person = ("node { id ... on Person { member_of { revision items { node { id ... on Team { properties { name } } "
              "} } } } }")  # fmt: skip
    then = (f"query Then($at: Int) {{ ada: get_node(id: \"person-ada-okafor\", at: $at) {{ revision {person} }} "
            "team: get_node(id: \"team-payments\") { revision node { ... on Team { properties { name } "
            "members(limit: 100) { items { node { id } } } } } } "
            "paths: find_paths(source: \"person-ada-okafor\", target: \"team-payments\") { revision total } "
            "pattern: query_graph(match: [{node: \"t\", id: \"team-payments\"}, "
            "{edge: \"member_of\", from: \"p\", to: \"t\"}], limit: 100) { revision items } }")  # fmt: skip
    with live(fresh_instance, SURFACES) as base, Client(base, token(fresh_instance, "gq-pin", "admin")) as admin:
        body = admin.post(then, {"at": before})
        by_time = admin.post(then.replace("$at: Int", "$at: String").replace("at: $at", "as_of: $at"),
                             {"at": logged})  # fmt: skip
        now = admin.post(then, {})
        split = admin.post(f'{{ a: get_node(id: "team-payments", at: {before}) {{ revision }} '
                           f'b: get_node(id: "team-payments", at: {before - 1}) {{ revision }} }}')  # fmt: skip
    for answer in (body, by_time):
        assert "errors" not in answer, answer
        ada, team = answer["data"]["ada"], answer["data"]["team"]
        assert ada["revision"] == team["revision"] == before
        assert ada["node"]["member_of"]["revision"] == before
        assert ada["node"]["member_of"]["items"] == [{"node": {"id": "team-payments",
                                                                "properties": {"name": "Payments"}}}]  # fmt: skip
        assert team["node"]["properties"]["name"] == "Payments"
        assert "person-ada-okafor" in {i["node"]["id"] for i in team["node"]["members"]["items"]}
        paths, pattern = answer["data"]["paths"], answer["data"]["pattern"]  # walks, pinned by the query too
        assert (paths["revision"], pattern["revision"]) == (before, before)
        assert paths["total"] > 0
        assert "person-ada-okafor" in {row["p"] for row in pattern["items"]}
    assert codes(now) == ["NOT_FOUND"] * 2  # today ada is gone, and the team is renamed and has no ada
    assert "person-ada-okafor" not in {row["p"] for row in now["data"]["pattern"]["items"]}
    assert now["data"]["team"]["node"]["properties"]["name"] == "Payments Later"
    assert "person-ada-okafor" not in {i["node"]["id"] for i in now["data"]["team"]["node"]["members"]["items"]}
    assert codes(split) == ["INVALID_ARGUMENTS"] * len(split["errors"])
    assert "a query reads at one revision" in split["errors"][0]["message"]


def test_an_edge_field_carries_each_edges_typed_properties_with_its_node(gen_instance: Instance,
                                                                        admin: Client) -> None:  # fmt: skip
    body = admin.post('{ get_node(id: "team-payments") { node { ... on Team { members(limit: 200) { items { '
                      "node { id } properties { role since } edge { type source target revision properties } } } } } }"
                      ' svc: get_node(id: "svc-payment-gateway") { node { ... on Service { dependents { items { '
                      "node { id } properties { criticality protocol } } } } } } }")  # fmt: skip
    assert "errors" not in body, body
    expected = gen_instance.dispatcher.call_tool(LOCAL, "test", "get_neighbors", {
        "id": "team-payments", "direction": "in", "edge_types": ["member_of"], "limit": 200}).value  # fmt: skip
    assert expected is not None
    items = body["data"]["get_node"]["node"]["members"]["items"]
    assert [i["node"]["id"] for i in items] == [i["node"]["id"] for i in expected["items"]]
    assert [i["edge"] for i in items] == [{k: i["edge"][k] for k in ("type", "source", "target", "revision",
                                          "properties")} for i in expected["items"]]  # fmt: skip
    assert [i["properties"] for i in items] == [{"since": None, **i["edge"]["properties"]} for i in expected["items"]]
    assert {i["properties"]["role"] for i in items} >= {"manager", "lead", "member"}
    dependents = {i["node"]["id"]: i["properties"] for i in body["data"]["svc"]["node"]["dependents"]["items"]}
    assert dependents["svc-checkout-api"] == {"criticality": "hard", "protocol": "grpc"}


def test_an_edge_field_pages_with_a_cursor_and_hides_what_the_caller_may_not_see(gen_instance: Instance,
                                                                                 served: str) -> None:  # fmt: skip
    query = ('query ($cursor: String) { get_node(id: "team-payments") { node { ... on Team { '
             "owns(limit: 6, cursor: $cursor) { items { node { id visibility } } total truncated next_cursor limit } "
             "} } } }")  # fmt: skip
    with Client(served) as anonymous:
        first = anonymous.post(query)["data"]["get_node"]["node"]["owns"]
        assert (len(first["items"]), first["limit"], first["truncated"]) == (6, 6, True)
        second = anonymous.post(query, {"cursor": first["next_cursor"]})["data"]["get_node"]["node"]["owns"]
        refused = anonymous.post(query.replace("team-payments", "team-platform"), {"cursor": first["next_cursor"]})
    assert first["total"] == second["total"] == len(first["items"]) + len(second["items"])
    assert (second["truncated"], second["next_cursor"]) == (False, None)
    ids = [i["node"]["id"] for i in first["items"] + second["items"]]
    assert ids == sorted(set(ids))
    assert {i["node"]["visibility"] for i in first["items"] + second["items"]} == {"public"}
    assert "svc-card-vault" not in ids  # restricted: the anonymous caller never reaches it
    assert codes(refused) == ["INVALID_ARGUMENTS"]  # a cursor is only good for the query that issued it
    gen_instance.audit.flush()
    wanted = {"principal": "anonymous", "target": "get_neighbors", "surface": "graphql", "limit": 200}
    log = gen_instance.dispatcher.call_tool(LOCAL, "test", "get_audit_log", wanted).value
    assert log is not None
    assert {"ok", "invalid"} <= {i["outcome"] for i in log["items"]}  # audited as the dispatcher's calls


def test_the_guides_edge_field_example_runs_and_its_cursor_gives_the_second_page(admin: Client) -> None:
    guide = (Path(__file__).parents[3] / "docs" / "surfaces" / "graphql.md").read_text(encoding="utf-8")
    query = next(b for b in guide.split("```graphql\n")[1:] if "cursor: $cursor" in b).split("```")[0]
    first = admin.post(query)
    assert "errors" not in first, first
    members = first["data"]["get_node"]["node"]["members"]
    assert members["truncated"]
    assert {i["properties"]["role"] for i in members["items"]} <= {"manager", "lead", "member"}
    second = admin.post(query, {"cursor": members["next_cursor"]})["data"]["get_node"]["node"]["members"]
    assert second["total"] == members["total"]
    assert not {i["node"]["id"] for i in second["items"]} & {i["node"]["id"] for i in members["items"]}


# -- errors -----------------------------------------------------------------------------------------------------------
def test_errors_carry_canon_codes_and_pointers_and_null_the_field(gen_instance: Instance, served: str) -> None:
    with Client(served, token(gen_instance, "gq-reader", "reader")) as reader, Client(served) as anonymous:
        _errors(reader, anonymous)


def _errors(reader: Client, anonymous: Client) -> None:
    body = reader.post('{ get_neighbors(id: "team-payments", depth: 9) { total } describe_model { revision } }')
    assert body["data"]["get_neighbors"] is None
    assert body["data"]["describe_model"]["revision"] > 0
    assert codes(body) == ["INVALID_ARGUMENTS"]
    assert body["errors"][0]["extensions"]["problems"][0]["pointer"] == "/depth"
    assert body["errors"][0]["path"] == ["get_neighbors"]
    body = reader.post('{ get_node(id: "no-such-node") { revision } }')
    assert codes(body) == ["NOT_FOUND"]
    assert body["data"] == {"get_node": None}
    assert codes(reader.post('{ get_node(id: "svc-card-vault") { revision } }')) == ["FORBIDDEN"]
    assert codes(reader.post("{ get_audit_log { total } }")) == ["FORBIDDEN"]
    body = anonymous.post('mutation { delete_node(id: "team-payments") { id } }')
    assert codes(body) == ["FORBIDDEN"]
    assert body["data"] == {"delete_node": None}


def test_an_unknown_fragment_spread_is_a_validation_error(served: str) -> None:
    with Client(served) as client:
        body = client.post('{ get_node(id: "team-payments") { node { ...Nope } } }')
    assert body.get("data") is None
    assert ["Nope" in e["message"] and "code" not in e.get("extensions", {}) for e in body["errors"]] == [True]


def test_a_request_graphql_cannot_read_is_a_request_error_with_a_code(served: str) -> None:
    deep = '{"query": "{ describe_model { revision } }", "variables": {"v": ' + "[" * 100_000 + "]" * 100_000 + "}}"
    with httpx2.Client(base_url=served, timeout=30) as http:
        answers = [
            http.post("/graphql", json="hello"),
            http.post("/graphql", content=deep, headers={"Content-Type": "application/json"}),
            http.post("/graphql", json={"query": "subscription { resource_changes { uri } }"}),
        ]
        assert [(r.status_code, codes(r.json())) for r in answers] == [(400, ["BAD_REQUEST"])] * 3
        two = "query A { describe_model { revision } } query B { get_changes { total } }"
        body = http.post("/graphql", json={"query": two}).json()
        assert (body.get("data"), codes(body)) == (None, ["BAD_REQUEST"])  # neither runs
        body = http.post("/graphql", json={"query": two, "operationName": "B"}).json()
        assert "errors" not in body
        assert list(body["data"]) == ["get_changes"]


def test_nan_in_variables_is_not_json_and_values_canon_cannot_hold_are_invalid_arguments(admin: Client) -> None:
    query = "query ($w: JSON) { find_nodes(type: Service, where: $w) { total } }"

    def post(where: Any) -> httpx2.Response:  # json.dumps writes NaN, and escapes lone surrogates as JSON may
        body = json.dumps({"query": query, "variables": {"w": where}})
        return admin.http.post("/graphql", content=body, headers={"content-type": "application/json"})

    for constant in (math.nan, -math.inf):
        response = post({"tier": constant})
        assert response.status_code == 400, response.text

    for where in ({"tier": 2**70}, {"tier": {"lt": -(2**64)}}, {"name": "\ud800"}):
        answer = post(where).json()
        assert codes(answer) == ["INVALID_ARGUMENTS"], answer
        assert answer["errors"][0]["extensions"]["problems"][0]["pointer"].startswith("/where/")
    literal = admin.post("{ find_nodes(type: Service, where: {tier: 1180591620717411303424}) { total } }")
    assert codes(literal) == ["INVALID_ARGUMENTS"], literal


def test_a_query_graphql_itself_rejects_is_a_validation_error(served: str) -> None:
    with Client(served) as client:
        body = client.post("{ get_node(id: 5) { revision } nope }")
    assert "data" not in body or body["data"] is None
    assert len(body["errors"]) >= 2
    assert all("code" not in e.get("extensions", {}) for e in body["errors"])


def test_deep_and_expensive_queries_are_refused_before_they_run(admin: Client) -> None:
    one = "reports_to(limit: 1) { items { node"
    deep = '{ get_node(id: "person-ada-okafor") { node { ... on Person { ' + " { ".join([one] * 3) + " { id" + " }" * 13
    body = admin.post(deep)
    assert codes(body) == ["LIMIT_EXCEEDED"]
    assert (body["errors"][0]["extensions"]["limit"], body["errors"][0]["extensions"]["value"]) == ("depth", MAX_DEPTH)
    costly = ("{ find_nodes(limit: 100) { items { ... on Person { reports_to(limit: 50) { items { node { reports("
              "limit: 50) { items { node { id } } } } } } } } } }")  # fmt: skip
    body = admin.post(costly)
    assert body.get("data") is None
    assert codes(body) == ["LIMIT_EXCEEDED"]
    assert str(MAX_COST) in body["errors"][0]["message"]
    per_node = "items { ... on Person { reports_to(limit: 60) { items { node { id properties { name } } } } } } }"
    variables = "query ($n: Int) { find_nodes(limit: $n) { " + per_node + " }"
    assert codes(admin.post(variables, {"n": 1})) == ["LIMIT_EXCEEDED"]  # a variable counts at its maximum
    assert "errors" not in admin.post("{ find_nodes(limit: 1) { " + per_node + " }")
    assert "errors" not in admin.post("{ find_nodes(limit: 100) { items { id } } }")


def test_a_repeated_query_is_validated_once(gen_instance: Instance) -> None:
    """Parsing and validating a get_node query is about three quarters of its time: a repeated document is
    checked once, and then answered from the schema's kept outcomes without a thread hop."""
    built = build_schema(gen_instance.dispatcher.registry)
    runtime = built.bind(host_of(gen_instance))
    query = '{ get_node(id: "team-payments") { revision node { id } } }'
    for _ in range(3):
        result = anyio.run(lambda: built.schema.execute(query, context_value=runtime.context(principal=LOCAL)))
        assert result.errors is None
    assert (runtime.documents.misses, runtime.documents.hits) == (1, 2)


def _name_of(built: Built, runtime: Runtime, id_: str) -> str:
    query = '{ get_node(id: "' + id_ + '") { node { ... on Team { properties { name } } } } }'
    result = anyio.run(lambda: built.schema.execute(query, context_value=runtime.context(principal=LOCAL)))
    assert result.errors is None, result.errors
    assert result.data is not None
    return result.data["get_node"]["node"]["properties"]["name"]


def test_one_schema_serves_every_app_of_a_registry_each_through_its_own_host(seed_template: Path,
                                                                            tmp_path: Path) -> None:  # fmt: skip
    """The schema is built once per registry (by content: another registry of the same model and tools is the
    same schema) and holds no host: two stores' apps share it, and each answers from its own store."""
    one, two = open_copy(seed_template, tmp_path / "one"), open_copy(seed_template, tmp_path / "two")
    try:
        assert one.registry is not two.registry
        built = build_schema(one.registry)
        assert build_schema(two.registry) is built
        assert build_schema(dataclasses.replace(two.registry)) is built  # built afresh, the same content
        patch = {"id": "team-payments", "properties": {"name": "Payments Two"}}
        assert not two.dispatcher.call_tool(LOCAL, "test", "patch_node", patch).is_error
        first, second = built.bind(host_of(one)), built.bind(host_of(two))
        assert _name_of(built, first, "team-payments") != "Payments Two"
        assert _name_of(built, second, "team-payments") == "Payments Two"
        assert first.documents is not second.documents  # each app's own (its event loop's) checked documents
    finally:
        one.close()
        two.close()


def test_another_model_or_description_is_another_schema(gen_instance: Instance) -> None:
    built = build_schema(gen_instance.registry)
    document = copy.deepcopy(dict(load_model().document))
    document["$defs"]["Team"]["description"] = "A group of people (changed)."
    changed = build_registry(parse_model(document))
    assert build_schema(changed) is not built
    assert "A group of people (changed)." in build_schema(changed).schema.as_str()
    described = dataclasses.replace(gen_instance.registry, tools=tuple(
        dataclasses.replace(t, description=t.description + " More.") if t.name == "get_node" else t
        for t in gen_instance.registry.tools))  # fmt: skip
    assert build_schema(described) is not built
    assert build_schema(gen_instance.registry) is built


def test_a_request_without_its_app_s_runtime_is_an_error_naming_it(gen_instance: Instance) -> None:
    built = build_schema(gen_instance.registry)
    query = '{ get_node(id: "team-payments") { revision } }'
    result = anyio.run(lambda: built.schema.execute(query, context_value={"principal": LOCAL}))
    assert result.data is None
    assert [e.message for e in result.errors or ()] == [
        "a GraphQL request's context carries no Documents: execute the schema with Runtime.context"
    ]


def test_each_app_holds_at_most_its_maximum_of_subscriptions(gen_instance: Instance) -> None:
    built = build_schema(gen_instance.registry)
    first, second = built.bind(host_of(gen_instance)), built.bind(host_of(gen_instance))
    first.subscriptions = MAX_SUBSCRIPTIONS - 1
    with first.subscription():
        assert first.subscriptions == MAX_SUBSCRIPTIONS
        with pytest.raises(graphql.GraphQLError, match="maximum of 1000 subscriptions") as no, first.subscription():
            pass
        assert (no.value.extensions or {})["code"] == "LIMIT_EXCEEDED"
        with second.subscription():  # another app counts its own
            assert second.subscriptions == 1
    assert (first.subscriptions, second.subscriptions) == (MAX_SUBSCRIPTIONS - 1, 0)


# -- writes -----------------------------------------------------------------------------------------------------------
def test_mutations_write_through_the_dispatcher_and_conflicts_say_so(fresh_instance: Instance) -> None:
    with live(fresh_instance, SURFACES) as base, Client(base, token(fresh_instance, "gq-writer", "writer")) as writer:
        _writes(fresh_instance, writer)


def _writes(fresh_instance: Instance, writer: Client) -> None:
    if True:
        properties = {"slug": "gq", "name": "Search", "mission": "Find things.", "area": "product"}
        body = writer.call("mutation", "upsert_node", {"id": "team-gq", "type": "Team", "properties": properties,
                                                        "visibility": "public"})  # fmt: skip
        created = body["data"]["upsert_node"]
        assert created["created"] is True
        assert created["node"]["properties"]["name"] == "Search"
        stored = fresh_instance.store.node("team-gq")
        assert stored is not None
        assert stored.revision == created["node"]["revision"]
        body = writer.call("mutation", "upsert_node", {"id": "team-gq", "type": "Team", "properties": properties,
                                                        "expected_revision": 1})  # fmt: skip
        assert codes(body) == ["CONFLICT"]
        assert body["errors"][0]["extensions"]["actual"] == stored.revision
        body = writer.call("mutation", "upsert_node", {"id": "team-x", "type": "Team", "properties": {"slug": 5}})
        assert codes(body) == ["INVALID"]
        assert body["errors"][0]["extensions"]["problems"]
        body = writer.call("mutation", "patch_node", {"id": "team-gq", "properties": {"name": "Finder", "area": None}})
        assert codes(body) == ["INVALID"]  # area is required: the null reaches the merge patch, and is refused
        assert [p["pointer"] for p in body["errors"][0]["extensions"]["problems"]] == ["/properties/area"]
        body = writer.call("mutation", "patch_node", {"id": "team-gq", "visibility": "restricted",
                                                       "readers": ["user:gq-writer"]})  # fmt: skip
        assert body["data"]["patch_node"]["node"]["readers"] == ["user:gq-writer"]
        patch = {"id": "team-gq", "properties": {"name": "Finder", "oncall": True}, "visibility": "public",
                 "readers": None}  # fmt: skip
        body = writer.call("mutation", "patch_node", patch)
        patched = body["data"]["patch_node"]
        assert (patched["changed"], patched["node"]["visibility"], patched["node"]["readers"]) == (True, "public", None)
        assert patched["node"]["properties"] | {"founded": None, "slack_channel": None, "tags": None} == (
            properties | {"name": "Finder", "oncall": True, "founded": None, "slack_channel": None, "tags": None}
        )
        assert codes(writer.call("mutation", "patch_node", {"id": "team-nobody", "properties": {}})) == ["NOT_FOUND"]
        body = writer.call("mutation", "upsert_edge", {"type": "member_of", "source": "person-ada-okafor",
                                                        "target": "team-gq",
                                                        "properties": {"role": "boss"}})  # fmt: skip
        assert codes(body) == ["INVALID"] or codes(body) == ["INVALID_ARGUMENTS"]
        fresh_instance.audit.flush()
        admin = LOCAL
        log = fresh_instance.dispatcher.call_tool(admin, "test", "get_audit_log", {"principal": "gq-writer"}).value
        assert log is not None
        assert log["items"]
        assert {i["surface"] for i in log["items"]} == {"graphql"}


# -- subscriptions ----------------------------------------------------------------------------------------------------
def _ws(base: str, payload: dict[str, Any] | None = None) -> Any:
    return connect(base.replace("http://", "ws://") + "/graphql", subprotocols=["graphql-transport-ws"],  # type: ignore[list-item]
                   open_timeout=10)  # fmt: skip


def _init(socket: Any, payload: dict[str, Any] | None = None) -> Any:
    socket.send(json.dumps({"type": "connection_init", "payload": payload or {}}))
    return json.loads(socket.recv(timeout=10))


def _touch(instance: Instance, node_id: str, n: int) -> int:
    node = instance.dispatcher.call_tool(LOCAL, "test", "get_node", {"id": node_id}).value
    assert node is not None
    properties = dict(node["node"]["properties"]) | {"name": f"Payments ({n})"}
    result = instance.dispatcher.call_tool(LOCAL, "test", "upsert_node",
                                           {"id": node_id, "type": "Team", "properties": properties})  # fmt: skip
    assert result.value is not None, result.error
    revision: int = result.value["revision"]
    return revision


def test_a_subscription_hears_a_write_made_through_the_dispatcher(fresh_instance: Instance) -> None:
    secret = token(fresh_instance, "gq-sub", "reader")
    with live(fresh_instance, SURFACES) as base, _ws(base) as socket:
        assert _init(socket, {"Authorization": f"Bearer {secret}"})["type"] == "connection_ack"
        socket.send(json.dumps({"id": "1", "type": "subscribe", "payload": {"query": (
            'subscription { resource_node(type: "Team", id: "team-payments") { uri revision change { kind key '
            "after } } }")}}))  # fmt: skip
        socket.send(json.dumps({"id": "2", "type": "subscribe", "payload": {
            "query": "subscription { resource_changes { uri revision change { key } } }"}}))  # fmt: skip
        # The subscriptions start listening at some point after `subscribe`; a write every 0.1 s until both
        # have heard one makes the test independent of when (no sleep decides the outcome).
        stop, written = threading.Event(), dict[int, int]()

        def write() -> None:
            for n in range(300):
                if stop.wait(0.1):
                    return
                written[_touch(fresh_instance, "team-payments", n)] = n

        writer = threading.Thread(target=write)
        writer.start()
        try:
            heard: dict[str, dict[str, Any]] = {}
            while len(heard) < 2:
                message = json.loads(socket.recv(timeout=30))
                assert message["type"] == "next", message
                heard.setdefault(message["id"], message["payload"]["data"])
        finally:
            stop.set()
            writer.join(30)
        node = heard["1"]["resource_node"]
        assert node["uri"] == "canon://nodes/Team/team-payments"
        assert node["revision"] in written
        assert node["change"]["after"]["properties"]["name"] == f"Payments ({written[node['revision']]})"
        changes = heard["2"]["resource_changes"]
        assert changes["uri"] == "canon://changes"
        assert changes["change"]["key"] == "team-payments"
        assert changes["revision"] in written


def _touch_any(instance: Instance, node_id: str, field: str, n: int) -> None:
    """A new revision of any node, as an admin: one text property changes."""
    node = instance.dispatcher.call_tool(LOCAL, "test", "get_node", {"id": node_id}).value
    assert node is not None
    properties = dict(node["node"]["properties"]) | {field: f"Touched ({n})."}
    arguments = {"id": node_id, "type": node["node"]["type"], "properties": properties,
                 "visibility": node["node"]["visibility"], "readers": node["node"].get("readers", [])}  # fmt: skip
    result = instance.dispatcher.call_tool(LOCAL, "test", "upsert_node", arguments)
    assert result.value is not None, result.error


def test_a_subscription_hears_only_the_changes_its_caller_may_see(fresh_instance: Instance) -> None:
    secret = token(fresh_instance, "gq-sub-reader", "reader")  # in no group: svc-card-vault is hidden from it
    with live(fresh_instance, SURFACES) as base, _ws(base) as socket:
        assert _init(socket, {"Authorization": f"Bearer {secret}"})["type"] == "connection_ack"
        socket.send(json.dumps({"id": "1", "type": "subscribe", "payload": {
            "query": "subscription { resource_changes { revision change { key } } }"}}))  # fmt: skip
        # A hidden change, then a visible one, every 0.1 s: whenever the subscription starts listening, a hidden
        # change is committed before each visible one it hears.
        stop = threading.Event()

        def write() -> None:
            for n in range(300):
                if stop.wait(0.1):
                    return
                _touch_any(fresh_instance, "svc-card-vault", "description", n)
                _touch_any(fresh_instance, "team-payments", "mission", n)

        writer = threading.Thread(target=write)
        writer.start()
        try:
            keys = []
            for _ in range(3):
                message = json.loads(socket.recv(timeout=30))
                assert message["type"] == "next", message
                keys.append(message["payload"]["data"]["resource_changes"]["change"]["key"])
        finally:
            stop.set()
            writer.join(30)
        assert keys == ["team-payments"] * 3


def test_subscribing_to_a_node_the_caller_may_not_read_is_an_error(gen_instance: Instance, served: str) -> None:
    with _ws(served) as socket:  # anonymous
        assert _init(socket)["type"] == "connection_ack"
        socket.send(json.dumps({"id": "1", "type": "subscribe", "payload": {
            "query": 'subscription { resource_node(type: "Service", id: "svc-card-vault") { uri } }'}}))  # fmt: skip
        message = json.loads(socket.recv(timeout=10))
        assert message["type"] == "next"
        assert message["payload"]["data"] is None
        assert [e["extensions"]["code"] for e in message["payload"]["errors"]] == ["FORBIDDEN"]
        assert json.loads(socket.recv(timeout=10)) == {"id": "1", "type": "complete"}


def test_a_bad_token_in_connection_init_closes_the_connection(served: str) -> None:
    with _ws(served) as socket, pytest.raises(ConnectionClosed) as closed:
        _init(socket, {"Authorization": "Bearer canon_nope"})
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 4403


# -- GraphiQL ---------------------------------------------------------------------------------------------------------
def test_a_browser_get_is_graphiql_loading_its_files_from_the_server(served: str) -> None:
    page = httpx2.get(f"{served}/graphql", headers={"Accept": "text/html"})
    assert page.status_code == 200
    assert "graphiql" in page.text.lower()
    assert page.text.count("integrity=") == 7
    assert 'src="https://' not in page.text  # nothing from a CDN: the page works with no internet
    assert 'href="https://' not in page.text
    script = httpx2.get(f"{served}/ui-assets/graphiql@3.8.3/graphiql.min.js")
    assert script.status_code == 200
    assert len(script.content) > 1_000_000


def test_with_ui_assets_graphiql_loads_its_files_from_the_server(fresh_instance: Instance, tmp_path: Path) -> None:
    fresh_instance.config = dataclasses.replace(fresh_instance.config, ui_assets=tmp_path)
    with live(fresh_instance, SURFACES) as base:
        page = httpx2.get(f"{base}/graphql", headers={"Accept": "text/html"}).text
    assert 'src="/ui-assets/graphiql@' in page
    assert 'href="/ui-assets/@graphiql/plugin-explorer@' in page
    assert 'src="https://' not in page
    assert 'href="https://' not in page
    assert page.count("integrity=") == 7
    assert local_assets('<script src="https://cdn.example/npm/a@1.0/x.js" integrity="sha384-x">') == \
        '<script src="/ui-assets/a@1.0/x.js" integrity="sha384-x">'  # fmt: skip


def test_graphql_offers_no_fields_or_summary_argument_since_its_selection_set_is_the_projection(
    admin: Client,
) -> None:
    schema = admin.schema
    assert schema.query_type is not None
    for name in ("get_node", "find_nodes", "get_neighbors"):
        assert not SELECTION_ARGUMENTS & set(schema.query_type.fields[name].args), name
