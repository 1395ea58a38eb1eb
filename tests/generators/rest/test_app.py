"""The REST surface: its OpenAPI document against the registry, then every behaviour over real HTTP (uvicorn).

Each answer is compared with what the dispatcher gives the same principal directly, so REST can only be a
translation of the one dispatch path, never a second implementation.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx2
import pytest
from openapi_spec_validator import validate

from core.dispatch.registry import Registry, build_registry
from core.dispatch.resources import read_resource
from core.ops.config import Config
from core.seam.instance import Instance, open_instance
from core.seam.surfaces import host_for, principal_of_request
from core.values.audit import AuditQuery
from core.values.principal import ANONYMOUS, Principal
from generators.rest.app import coerce, document_text, surface
from generators.rest.openapi import openapi_document, route_of, unhoist
from tests.generators.conftest import live, token

RESTRICTED = "svc-card-vault"  # readers: group:payments, group:security
PUBLIC_TEAM = "team-payments"
ROLES = {"rita": ("reader",), "sam": ("reader", "security"), "walt": ("writer",), "ada": ("admin",)}


@dataclass
class Server:
    instance: Instance
    http: httpx2.Client
    secrets: dict[str, str]

    def headers(self, who: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.secrets[who]}"} if who else {}

    def get(self, path: str, who: str | None = "rita", **kwargs: Any) -> httpx2.Response:
        return self.http.get(path, headers=self.headers(who) | kwargs.pop("headers", {}), **kwargs)

    def send(self, method: str, path: str, who: str | None = "walt", **kwargs: Any) -> httpx2.Response:
        return self.http.request(method, path, headers=self.headers(who) | kwargs.pop("headers", {}), **kwargs)

    def direct(self, who: str | None, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """What the dispatcher answers the same principal (None: anonymous), without HTTP."""
        principal = ANONYMOUS
        if who is not None:
            role, *groups = ROLES[who]
            principal = Principal(who, frozenset({role}), frozenset(groups))
        result = self.instance.dispatcher.call_tool(principal, "test", tool, arguments)
        assert result.value is not None, result.error
        return result.value

    def audit(self, target: str | None = None) -> list[dict[str, Any]]:
        self.instance.audit.flush()
        records, _ = self.instance.store.audit_records(AuditQuery(surface="rest", target=target), before=None,
                                                       limit=1000)  # fmt: skip
        return records


def serve(instance: Instance) -> Iterator[Server]:
    secrets = {name: token(instance, name, *roles) for name, roles in ROLES.items()}
    with live(instance, surfaces=[surface]) as url, httpx2.Client(base_url=url, timeout=30) as http:
        yield Server(instance, http, secrets)


@pytest.fixture(scope="module")
def server(gen_instance: Instance) -> Iterator[Server]:
    yield from serve(gen_instance)


@pytest.fixture
def writable(fresh_instance: Instance) -> Iterator[Server]:
    yield from serve(fresh_instance)


def operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            yield path, method, operation


def assert_problem(response: httpx2.Response, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert body["title"]
    assert body["type"]
    assert body["instance"] == response.request.url.path
    if code is not None:
        assert body["code"] == code
        assert body["type"] == f"urn:canon:problem:{code}"
    return body


# -- the document ------------------------------------------------------------------------------------------------------
def test_document_is_valid_openapi_3_1(gen_instance: Instance) -> None:
    doc = openapi_document(gen_instance.registry)
    validate(doc)  # type: ignore[no-untyped-call]
    assert doc["openapi"].startswith("3.1.")
    assert "jsonSchemaDialect" not in doc  # the 3.1 default fits; Swagger UI warns about any other value
    assert doc["info"]["version"] == gen_instance.model.version
    bearer = doc["components"]["securitySchemes"]["bearer"]
    assert (bearer["type"], bearer["scheme"]) == ("http", "bearer")
    assert {} in doc["security"]  # anonymous callers are allowed


def test_every_tool_and_resource_is_exactly_one_operation_and_nothing_else(gen_instance: Instance) -> None:
    registry = gen_instance.registry
    doc = openapi_document(registry)
    tools: Counter[str] = Counter()
    resources: Counter[str] = Counter()
    lists = 0
    for _, _, op in operations(doc):
        marks = [k for k in ("x-canon-tool", "x-canon-resource", "x-canon-action") if k in op]
        assert len(marks) == 1, op["operationId"]
        tools.update([op["x-canon-tool"]] if "x-canon-tool" in op else [])
        resources.update([op["x-canon-resource"]] if "x-canon-resource" in op else [])
        lists += op.get("x-canon-action") == "resources/list"
    assert tools == Counter(t.name for t in registry.tools)
    assert resources == Counter(r.name for r in (*registry.resources, *registry.templates))
    assert lists == 1


def test_unhoisting_gives_back_each_tools_exact_input_and_output_schema(gen_instance: Instance) -> None:
    registry = gen_instance.registry
    doc = openapi_document(registry)
    seen = set()
    for _, _, op in operations(doc):
        if "x-canon-tool" in op:
            tool = registry.tool(op["x-canon-tool"])
            assert unhoist(doc, op) == (tool.input_schema, tool.output_schema)
            assert op["x-canon-annotations"] == tool.annotations
            assert op["x-canon-permission"] == tool.permission
            assert (op["operationId"], op["summary"], op["description"]) == (tool.name, tool.title, tool.description)
            seen.add(tool.name)
    assert seen == {t.name for t in registry.tools}
    assert "$defs" not in json.dumps(doc["paths"])  # hoisted: every ref resolves against the document


def test_get_is_only_for_read_only_tools_and_query_styles_follow_the_property_shape(gen_instance: Instance) -> None:
    doc = openapi_document(gen_instance.registry)
    for _, method, op in operations(doc):
        if "x-canon-tool" in op and method == "get":
            assert op["x-canon-annotations"]["readOnlyHint"] is True
    params = {p["name"]: p for p in doc["paths"]["/api/nodes"]["get"]["parameters"]}
    assert params["where"]["content"]["application/json"]["schema"]["type"] == "object"
    assert "schema" not in params["where"]
    neighbors = {p["name"]: p for p in doc["paths"]["/api/nodes/{id}/neighbors"]["get"]["parameters"]}
    assert (neighbors["edge_types"]["style"], neighbors["edge_types"]["explode"]) == ("form", True)
    assert neighbors["id"]["in"] == "path"
    assert neighbors["id"]["required"] is True
    put = doc["paths"]["/api/nodes/{id}"]["put"]
    body = put["requestBody"]["content"]["application/json"]["schema"]
    assert "id" not in body["properties"]
    assert body["required"] == ["type", "properties"]
    assert {"409", "412", "413"} <= set(put["responses"])
    assert "304" in doc["paths"]["/api/nodes/{id}"]["get"]["responses"]
    # 410 gone is documented exactly where a tool's input names a point in the change log (ToolDefinition.reads_the_log)
    by_tool = {op["x-canon-tool"]: op for path in doc["paths"].values() for op in path.values() if "x-canon-tool" in op}
    assert {name for name, op in by_tool.items() if "410" in op["responses"]} == {
        t.name for t in gen_instance.registry.tools if t.reads_the_log and t.name in by_tool
    }
    assert {"get_node", "find_nodes", "get_neighbors", "get_changes", "diff_revisions"} <= {
        t.name for t in gen_instance.registry.tools if t.reads_the_log
    }
    assert "410" in doc["paths"]["/api/resources/nodes/{type}/{id}/at/{revision}"]["get"]["responses"]


def test_the_document_is_deterministic_and_served_as_the_artifact(server: Server) -> None:
    model, examples = server.instance.model, server.instance.registry.examples  # the served data's ids
    first = document_text(build_registry(model, examples=examples))
    second = document_text(build_registry(model, examples=examples))
    assert first == second
    served = server.get("/openapi.json", who=None)
    assert served.status_code == 200
    assert served.text == first
    host = host_for(server.instance, "rest", principal_of=principal_of_request, watch=contextlib.nullcontext)  # type: ignore[arg-type]
    assert dict(surface.artifacts(host)) == {"openapi.json": first}


def test_clashing_definition_names_get_their_own_component_and_shared_ones_are_stored_once(
    gen_instance: Instance,
) -> None:
    slug = {"type": "integer"}  # the model's Slug is a string
    defs = json.loads(json.dumps(gen_instance.registry.tool("find_nodes").input_schema["$defs"]))
    extra = {
        "name": "count_slugs", "title": "Count", "description": "A test tool.", "execution": "worker",
        "annotations": {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True,
                        "openWorldHint": False},
        "permission": "read", "advanced": False, "surface": {"rest": {"method": "POST", "path": "/count"}},
        "inputSchema": {"type": "object", "properties": {"s": {"$ref": "#/$defs/Slug"}}, "$defs": {"Slug": slug}},
        "outputSchema": {"type": "object", "properties": {"n": {"$ref": "#/$defs/condition"}},
                         "$defs": defs},
    }  # fmt: skip
    registry: Registry = build_registry(gen_instance.model, [extra])
    doc = openapi_document(registry)
    validate(doc)  # type: ignore[no-untyped-call]
    schemas = doc["components"]["schemas"]
    assert schemas["Slug_2"] == slug
    assert schemas["Slug"]["type"] == "string"
    shared = ("condition_", "bound_", "scalar_", "value_")
    assert not any(name.startswith(shared) for name in schemas)  # identical definitions: stored once
    op = doc["paths"]["/api/count"]["post"]
    tool = registry.tool("count_slugs")
    assert unhoist(doc, op) == (tool.input_schema, tool.output_schema)
    assert op["requestBody"]["content"]["application/json"]["schema"]["properties"]["s"] == {
        "$ref": "#/components/schemas/Slug_2"
    }


def test_a_rest_hint_that_cannot_be_served_fails_when_the_routes_are_built(gen_instance: Instance) -> None:
    tool = gen_instance.registry.tool("upsert_node")
    with pytest.raises(ValueError, match="GET is only for read-only tools"):
        route_of(replace(tool, surface={"rest": {"method": "GET", "path": "/nodes/{id}"}}))
    with pytest.raises(ValueError, match="not an input property"):
        route_of(replace(tool, surface={"rest": {"method": "PUT", "path": "/nodes/{nope}"}}))
    with pytest.raises(ValueError, match="no body to take application/merge-patch"):
        route_of(replace(tool, surface={"rest": {"method": "DELETE", "path": "/nodes/{id}",
                                                 "media": ["application/merge-patch+json"]}}))  # fmt: skip


def test_patch_node_is_a_patch_operation_taking_merge_patch_or_plain_json(gen_instance: Instance) -> None:
    patch = openapi_document(gen_instance.registry)["paths"]["/api/nodes/{id}"]["patch"]

    content = patch["requestBody"]["content"]
    assert list(content) == ["application/merge-patch+json", "application/json"]
    assert content["application/merge-patch+json"] == content["application/json"]
    assert set(content["application/json"]["schema"]["properties"]) == {
        "properties", "visibility", "readers", "expected_revision"}  # fmt: skip
    assert {"404", "409", "412", "413", "415"} <= set(patch["responses"])
    assert "415" not in openapi_document(gen_instance.registry)["paths"]["/api/nodes/{id}"]["put"]["responses"]


def test_query_text_is_converted_by_the_declared_type_and_left_alone_when_it_is_no_such_value() -> None:
    assert coerce({"type": "integer"}, "12") == 12
    assert coerce({"type": "integer"}, "1e3") == "1e3"  # the schema will say no, with a pointer
    assert coerce({"type": "integer"}, "١٢") == "١٢"  # int() would take other scripts' digits
    assert coerce({"type": "number"}, "2.5") == 2.5
    assert coerce({"type": "number"}, "1e999") == "1e999"
    assert coerce({"type": "boolean"}, "true") is True
    assert coerce({"type": "boolean"}, "yes") == "yes"
    assert coerce({"type": ["integer", "null"]}, "null") is None
    assert coerce({"enum": ["out", 3]}, "3") == 3
    assert coerce({"enum": ["out", 3]}, "out") == "out"
    assert coerce({"type": "string"}, "12") == "12"


# -- reads over HTTP ---------------------------------------------------------------------------------------------------
def test_get_node_answers_what_the_dispatcher_answers_with_an_etag_and_304(server: Server) -> None:
    response = server.get(f"/api/nodes/{PUBLIC_TEAM}")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    value = response.json()
    assert value == server.direct("rita", "get_node", {"id": PUBLIC_TEAM})
    assert response.headers["etag"] == f'"{PUBLIC_TEAM}@{value["node"]["revision"]}"'
    assert response.headers["cache-control"] == "private, no-cache"
    assert response.headers["vary"] == "Authorization"
    before = len(server.audit("get_node"))
    again = server.get(f"/api/nodes/{PUBLIC_TEAM}", headers={"If-None-Match": response.headers["etag"]})
    assert again.status_code == 304
    assert again.content == b""
    assert again.headers["etag"] == response.headers["etag"]
    assert len(server.audit("get_node")) == before + 1  # a 304 still went through dispatch (and audit)
    weak_in_a_list = f'"other", W/{response.headers["etag"]}'
    listed = server.get(f"/api/nodes/{PUBLIC_TEAM}", headers={"If-None-Match": weak_in_a_list})
    assert listed.status_code == 304
    stale = server.get(f"/api/nodes/{PUBLIC_TEAM}", headers={"If-None-Match": '"team-payments@0"'})
    assert stale.status_code == 200


def test_find_nodes_pages_with_where_type_and_text_until_done_and_totals_are_honest(server: Server) -> None:
    where = json.dumps({"lifecycle": "production", "tier": {"lte": 2}})
    params: dict[str, Any] = {"type": "Service", "where": where, "limit": 7}
    ids: list[str] = []
    pages = 0
    url = "/api/nodes"
    while True:
        response = server.get(url, params=params if pages == 0 else None)
        assert response.status_code == 200, response.text
        page = response.json()
        assert page["limit"] == 7
        assert len(page["items"]) <= 7
        ids += [n["id"] for n in page["items"]]
        pages += 1
        if page["next_cursor"] is None:
            assert "link" not in response.headers
            assert page["truncated"] is False
            break
        link = response.headers["link"]
        assert link.endswith('>; rel="next"')
        assert page["truncated"] is True
        url = link[1 : link.index(">")]
    everything = server.direct("rita", "find_nodes", {"type": "Service", "where": json.loads(where), "limit": 100})
    assert ids == [n["id"] for n in everything["items"]]
    assert len(set(ids)) == len(ids)
    assert page["total"] == everything["total"] == len(ids)
    assert pages == -(-len(ids) // 7)
    assert pages > 1
    assert all(n["properties"]["lifecycle"] == "production" for n in everything["items"])
    text = server.get("/api/nodes", params={"text": "checkout", "limit": 3})
    assert text.json() == server.direct("rita", "find_nodes", {"text": "checkout", "limit": 3})


def test_get_neighbors_takes_edge_types_as_repeated_parameters(server: Server) -> None:
    response = server.get(f"/api/nodes/{PUBLIC_TEAM}/neighbors", params=[("edge_types", "owns"),
                          ("edge_types", "member_of"), ("direction", "both"), ("limit", "100")])  # fmt: skip
    assert response.status_code == 200, response.text
    value = response.json()
    arguments = {"id": PUBLIC_TEAM, "edge_types": ["owns", "member_of"], "direction": "both", "limit": 100}
    assert value == server.direct("rita", "get_neighbors", arguments)
    assert {item["edge"]["type"] for item in value["items"]} == {"owns", "member_of"}


def test_describe_model_and_query_graph_answer_what_the_dispatcher_answers(server: Server) -> None:
    model = server.get("/api/model", params={"include_schemas": "true"})
    assert model.json() == server.direct("rita", "describe_model", {"include_schemas": True})
    assert model.headers["etag"].startswith(f'"r{model.json()["revision"]}-')
    query = {"match": [{"node": "t", "type": "Team", "id": PUBLIC_TEAM}, {"edge": "owns", "from": "t", "to": "s"},
                       {"node": "s", "type": "Service"}], "return": ["s"], "limit": 50}  # fmt: skip
    response = server.send("POST", "/api/query", who="rita", json=query)
    assert response.status_code == 200, response.text
    assert response.json() == server.direct("rita", "query_graph", query)
    assert response.json()["total"] > 0
    assert "etag" not in response.headers


def test_resources_are_served_with_their_media_type_and_listed_a_page_at_a_time(server: Server) -> None:
    model = server.get("/api/resources/model")
    assert model.status_code == 200
    assert model.headers["content-type"] == "application/schema+json"
    assert model.json() == server.instance.model.document
    team = server.get("/api/resources/types/Team")
    assert team.json()["$ref"] == "#/$defs/Team"
    node = server.get(f"/api/resources/nodes/Team/{PUBLIC_TEAM}")
    assert node.headers["content-type"] == "application/json"
    assert node.json() == server.direct("rita", "get_node", {"id": PUBLIC_TEAM})["node"]
    uris: list[str] = []
    response = server.get("/api/resources", who=None)
    while True:
        assert response.status_code == 200, response.text
        page = response.json()
        uris += [r["uri"] for r in page["resources"]]
        if page["next_cursor"] is None:
            break
        link = response.headers["link"]
        response = server.get(link[1 : link.index(">")], who=None)
    registry = server.instance.registry
    public = server.direct(None, "find_nodes", {"limit": 100})["total"]
    assert uris[: len(registry.resources)] == [r.uri for r in registry.resources]
    assert len(uris) == len(set(uris))
    assert len(uris) == len(registry.resources) + public > 100
    assert_problem(server.get("/api/resources/nodes/Team/no-such-team"), 404, "not_found")
    assert_problem(server.get(f"/api/resources/nodes/Service/{RESTRICTED}"), 403, "forbidden")
    assert server.get(f"/api/resources/nodes/Service/{RESTRICTED}", who="sam").status_code == 200
    assert_problem(server.get("/api/resources", params={"cursor": "junk"}), 400, "invalid_arguments")


# -- errors ------------------------------------------------------------------------------------------------------------
def test_invalid_input_is_a_400_problem_with_pointers(server: Server) -> None:
    body = assert_problem(server.get("/api/nodes", params={"limit": "0"}), 400, "invalid_arguments")
    assert [e["pointer"] for e in body["errors"]] == ["/limit"]
    assert body["tool"] == "find_nodes"
    body = assert_problem(server.get("/api/nodes", params={"colour": "red"}), 400, "invalid_arguments")
    assert "colour" in body["detail"]  # the schema's additionalProperties: false refuses an unknown parameter
    body = assert_problem(server.get("/api/nodes", params={"limit": "many"}), 400, "invalid_arguments")
    assert body["errors"][0]["pointer"] == "/limit"
    body = assert_problem(server.get("/api/nodes", params={"where": "{not json"}), 400, "invalid_arguments")
    assert body["errors"][0]["pointer"] == "/where"


def test_a_since_that_is_no_date_time_is_a_400_problem_pointing_at_it(server: Server) -> None:
    body = assert_problem(server.get("/api/audit", who="ada", params={"since": "yesterday"}), 400, "invalid_arguments")
    assert [e["pointer"] for e in body["errors"]] == ["/since"]
    assert server.get("/api/audit", who="ada", params={"since": "2026-11-30T00:00:00Z"}).status_code == 200


def test_unknown_ids_are_404_and_records_the_caller_may_not_see_are_403(server: Server) -> None:
    body = assert_problem(server.get("/api/nodes/no-such-node"), 404, "not_found")
    assert body["key"] == "no-such-node"
    assert_problem(server.get(f"/api/nodes/{RESTRICTED}"), 403, "forbidden")
    assert_problem(server.get(f"/api/nodes/{RESTRICTED}", who=None), 403, "forbidden")
    assert server.get(f"/api/nodes/{RESTRICTED}", who="sam").json() == server.direct(
        "sam", "get_node", {"id": RESTRICTED}
    )


def test_bad_tokens_anonymous_writes_and_admin_tools_are_refused(server: Server) -> None:
    bad = server.http.get("/api/nodes", headers={"Authorization": "Bearer nope"})
    assert bad.status_code == 401
    assert bad.headers["content-type"] == "application/problem+json"
    assert bad.headers["www-authenticate"].startswith("Bearer")
    anonymous = server.send("PUT", "/api/nodes/x-1", who=None, json={"type": "Team", "properties": {}})
    assert_problem(anonymous, 403, "forbidden")
    assert_problem(server.get("/api/audit"), 403, "forbidden")
    assert server.get("/api/audit", who="ada").status_code == 200


def test_unknown_paths_and_methods_are_problems_with_a_code(server: Server) -> None:
    assert_problem(server.get("/api/nope"), 404, "no_route")
    assert_problem(server.get("/api/nodes/"), 404, "no_route")  # no redirect to /api/nodes
    wrong = server.send("POST", f"/api/nodes/{PUBLIC_TEAM}", json={})
    assert_problem(wrong, 405, "method_not_allowed")
    assert set(wrong.headers["allow"].replace(" ", "").split(",")) == {"GET", "PUT", "PATCH", "DELETE"}


def test_malformed_bodies_are_400_and_oversize_bodies_413(server: Server) -> None:
    for content in (b"{not json", b"\xff\xfe{}", b"[1, 2]", b'{"match": NaN}'):
        assert_problem(server.send("POST", "/api/query", content=content), 400, "invalid_arguments")
    assert_problem(server.send("POST", "/api/query", json={"match": []}, params={"limit": 3}), 400)
    big = b'{"match": "' + b"x" * server.instance.config.max_body_bytes + b'"}'
    body = assert_problem(server.send("POST", "/api/query", content=big), 413, "too_large")
    assert body["limit"] == "max_body_bytes"


# -- writes ------------------------------------------------------------------------------------------------------------
def test_writes_take_effect_and_conflicts_are_409_or_412_with_if_match(writable: Server) -> None:
    properties = {"name": "Pricing", "slug": "pricing", "mission": "Prices.", "area": "product"}
    team = {"type": "Team", "properties": properties, "visibility": "public"}
    created = writable.send("PUT", "/api/nodes/team-pricing", json=team)
    assert created.status_code == 200, created.text
    assert created.json()["created"] is True
    assert "etag" not in created.headers
    read = writable.get("/api/nodes/team-pricing")
    assert read.json()["node"]["properties"] == team["properties"]
    revision = read.json()["node"]["revision"]
    stale = writable.send("PUT", "/api/nodes/team-pricing", json=team | {"expected_revision": revision + 5})
    assert assert_problem(stale, 409, "conflict")["actual"] == revision
    precondition = writable.send("PUT", "/api/nodes/team-pricing", json=team, headers={"If-Match": '"999"'})
    assert_problem(precondition, 412, "conflict")
    renamed = team | {"properties": properties | {"name": "Pricing & Offers"}}
    matched = writable.send("PUT", "/api/nodes/team-pricing", json=renamed, headers={"If-Match": read.headers["etag"]})
    assert matched.status_code == 200
    assert matched.json()["changed"] is True
    assert_problem(writable.send("PUT", "/api/nodes/team-pricing", json=team | {"id": "other"}), 400)
    assert_problem(writable.send("PUT", "/api/nodes/team-pricing", json=team, headers={"If-Match": "*"}), 400)
    assert_problem(writable.send("POST", "/api/batch", json={"operations": []}, headers={"If-Match": '"1"'}), 400)
    assert writable.get("/api/nodes/team-pricing", headers={"If-Match": '"1"'}).status_code == 200  # reads ignore it

    edge = writable.send("PUT", "/api/edges/documents/doc-runbook-checkout-api/team-pricing", json={})
    assert edge.status_code == 200, edge.text
    assert edge.json()["edge"]["source"] == "doc-runbook-checkout-api"
    assert edge.json()["created"] is True
    refused = assert_problem(writable.send("DELETE", "/api/nodes/team-pricing"), 400, "invalid")  # it has an edge
    assert refused["errors"][0]["pointer"] == "/id"
    other = "/api/edges/documents/doc-runbook-payment-gateway-failover/team-pricing"
    assert writable.send("PUT", other, json={}).status_code == 200
    removed = writable.send("DELETE", other)
    assert removed.json()["key"] == "documents:doc-runbook-payment-gateway-failover->team-pricing"
    gone = writable.send("DELETE", "/api/nodes/team-pricing", params={"cascade": "true"})
    assert gone.status_code == 200
    assert gone.json()["deleted_edges"] == 1
    assert_problem(writable.get("/api/nodes/team-pricing"), 404, "not_found")

    batch = {"operations": [{"op": "upsert_node", "id": "team-growth", "type": "Team",
                             "properties": properties | {"name": "Growth", "slug": "growth"}}]}  # fmt: skip
    done = writable.send("POST", "/api/batch", json=batch)
    assert done.status_code == 200
    assert done.json()["dry_run"] is False
    assert writable.get("/api/nodes/team-growth", who="walt").json()["node"]["type"] == "Team"

    outcomes = {(r["target"], r["outcome"]) for r in writable.audit()}
    assert {("upsert_node", "ok"), ("upsert_node", "conflict"), ("upsert_edge", "ok"), ("delete_edge", "ok"),
            ("delete_node", "ok"), ("write_batch", "ok"), ("get_node", "not_found")} <= outcomes  # fmt: skip


def test_patch_changes_only_what_the_merge_patch_names_and_takes_if_match_like_put(writable: Server) -> None:
    path, merge = f"/api/nodes/{PUBLIC_TEAM}", {"Content-Type": "application/merge-patch+json"}
    read = writable.get(path)
    before = read.json()["node"]
    stale = writable.send("PATCH", path, content=b'{"properties": {"name": "Late"}}', headers=merge | {
        "If-Match": f'"{before["revision"] - 1}"'})  # fmt: skip
    assert_problem(stale, 412, "conflict")

    patched = writable.send("PATCH", path, content=json.dumps({"properties": {"name": "Money", "tags": None}}),
                            headers=merge | {"If-Match": read.headers["etag"]})  # fmt: skip

    assert patched.status_code == 200, patched.text
    node = patched.json()["node"]
    assert node["properties"] == {k: v for k, v in before["properties"].items() if k != "tags"} | {"name": "Money"}
    assert patched.json() == {"node": node, "changed": True, "revision": node["revision"]}
    assert writable.get(path).json()["node"] == node
    plain = writable.send("PATCH", path, json={"visibility": "internal"})  # application/json is taken too
    assert plain.json()["node"]["visibility"] == "internal"
    removed = assert_problem(writable.send("PATCH", path, json={"properties": {"mission": None}}), 400, "invalid")
    assert [e["pointer"] for e in removed["errors"]] == ["/properties/mission"]
    assert_problem(writable.send("PATCH", "/api/nodes/team-nobody", json={"properties": {}}), 404, "not_found")
    assert writable.get(path, who="walt").json()["node"]["properties"] == node["properties"]


@pytest.mark.parametrize("content_type", ["application/merge-patch+json", "application/json"])
@pytest.mark.parametrize("body", [b"", b"  \r\n"])
def test_an_empty_body_declared_json_is_a_400_not_json_and_changes_nothing(
    server: Server, content_type: str, body: bytes
) -> None:
    before = server.instance.store.revision()
    refused = server.send("PATCH", f"/api/nodes/{PUBLIC_TEAM}", content=body, headers={"Content-Type": content_type})
    problem = assert_problem(refused, 400, "invalid_arguments")
    assert [e["message"] for e in problem["errors"]] == ["not JSON"]
    assert server.instance.store.revision() == before


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "application/json-patch+json", None]
)
def test_a_patch_body_of_another_media_type_is_a_415_naming_the_ones_it_takes(
    server: Server, content_type: str | None
) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    patch = b'{"properties": {"name": "X"}}'
    before = server.instance.store.revision()

    refused = server.send("PATCH", f"/api/nodes/{PUBLIC_TEAM}", content=patch, headers=headers)

    body = assert_problem(refused, 415, "unsupported_media_type")

    assert body["errors"] == [{"pointer": "", "message": "Content-Type must be one of "
                                                         "application/merge-patch+json, application/json"}]  # fmt: skip
    assert refused.headers["accept-patch"] == "application/merge-patch+json, application/json"
    assert server.instance.store.revision() == before


def test_rest_calls_are_audited_as_the_rest_surface(server: Server) -> None:
    server.get(f"/api/nodes/{PUBLIC_TEAM}", who="sam")
    server.get("/api/resources/model", who="sam")
    records = server.audit()
    assert {"get_node", "canon://model"} <= {r["target"] for r in records if r["principal"] == "sam"}
    assert {r["surface"] for r in records} == {"rest"}


# -- the docs page -----------------------------------------------------------------------------------------------------
def test_docs_page_loads_its_assets_from_the_server_by_default(server: Server) -> None:
    page = server.get("/docs", who=None)
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "/openapi.json" in page.text
    assert "/ui-assets/swagger-ui-dist@5/swagger-ui-bundle.js" in page.text
    assert "https://" not in page.text  # nothing from a CDN: the page works with no internet
    script = server.get("/ui-assets/swagger-ui-dist@5/swagger-ui-bundle.js", who=None)
    assert script.status_code == 200
    assert len(script.content) > 100_000


def test_docs_page_loads_the_configured_ui_assets_instead(fresh_instance: Instance, tmp_path: Path) -> None:
    (tmp_path / "swagger-ui-dist@5").mkdir()
    (tmp_path / "swagger-ui-dist@5" / "swagger-ui-bundle.js").write_text("/* the operator's copy */")
    config: Config = replace(fresh_instance.config, ui_assets=tmp_path)
    instance = open_instance(config)
    try:
        with live(instance, surfaces=[surface]) as url:
            page = httpx2.get(f"{url}/docs")
            script = httpx2.get(f"{url}/ui-assets/swagger-ui-dist@5/swagger-ui-bundle.js")
    finally:
        instance.close()
    assert script.text == "/* the operator's copy */"
    assert page.status_code == 200
    assert "/openapi.json" in page.text
    assert "/ui-assets/swagger-ui-dist@5/swagger-ui-bundle.js" in page.text
    assert "/ui-assets/swagger-ui-dist@5/swagger-ui.css" in page.text
    assert 'type: "http"' not in page.text  # nothing else changed: still Swagger UI over our document


def test_resource_read_matches_core(server: Server) -> None:
    ctx = server.instance.dispatcher.context(Principal("rita", frozenset({"reader"})), "test")
    assert server.get("/api/resources/changes").json() == json.loads(read_resource(ctx, "canon://changes").text)


def test_the_openapi_components_hold_every_types_exact_schema(gen_instance: Instance) -> None:
    schemas = openapi_document(gen_instance.registry)["components"]["schemas"]

    for name in (*gen_instance.model.node_types, *gen_instance.model.edge_types):
        assert schemas[name]["properties"].keys() == gen_instance.model.document["$defs"][name]["properties"].keys()
