"""One definition, one dispatch: every surface carries exactly the registry, and the same call gives the same answer.

Every tool and resource of the registry is on MCP, REST, GraphQL and llms.txt, and nothing else is; the REST
document carries the registry's schemas exactly; the same reads (and writes, each surface on a fresh store of its
own) give equal results on MCP, REST and GraphQL for the same principal, and the same error class for an unknown
id, invalid input, a record the caller may not read, and a stale revision. A tool definition added to a test-only
registry appears on every surface with no other change.

Everything runs against the real app under uvicorn, through the official MCP SDK client and plain HTTP.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from llms_txt import parse_llms_file

from core.lang.schemas import DIALECT
from core.seam.instance import Instance
from core.seam.surfaces import discover
from core.tools import Toolset
from core.values.principal import ANONYMOUS, Principal
from tests.conftest import tool_names
from tests.generators.conftest import live, open_copy, token
from tests.mcp.conftest import connect

pytestmark = pytest.mark.anyio

PUBLIC_SERVICE = "svc-checkout-api"
RESTRICTED = "svc-card-vault"  # readable by group:payments and group:security
WRITE_TOOLS = set(tool_names("write"))
TIMESTAMPS = {"created_at", "updated_at", "time"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def graphql_name(name: str) -> str:
    return "resource_" + re.sub(r"[^_0-9A-Za-z]", "_", name)


# -- a running server with every surface, and a caller on each surface --------------------------------------------
class Callers:
    """The same principal on MCP (the SDK client), REST and GraphQL of one running server."""

    def __init__(self, base: str, secret: str | None, mcp_client: Any, http: httpx2.AsyncClient) -> None:
        self.base = base
        self.secret = secret
        self.mcp = mcp_client
        self.http = http
        self.openapi: dict[str, Any] = {}
        self.schema: dict[str, Any] = {}

    async def load(self) -> None:
        self.openapi = (await self.http.get("/openapi.json")).json()
        self.schema = (await self.graphql(INTROSPECTION))["data"]["__schema"]

    async def graphql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        answer = await self.http.post("/graphql", json={"query": query, "variables": variables or {}})
        assert answer.status_code in (200, 400), answer.text
        body: dict[str, Any] = answer.json()
        return body

    # each returns ("ok", result) or ("error", canon error code)
    async def on_mcp(self, tool: str, arguments: dict[str, Any]) -> tuple[str, Any]:
        result = await self.mcp.call_tool(tool, arguments)
        if result.is_error:
            return "error", json.loads(result.content[0].text)["error"]["code"]
        return "ok", result.structured_content

    async def on_rest(self, tool: str, arguments: dict[str, Any]) -> tuple[str, Any]:
        method, url, params, body = rest_request(self.openapi, tool, arguments)
        answer = await self.http.request(method, url, params=params, json=body)
        if answer.status_code >= 400:
            assert answer.headers["content-type"].startswith("application/problem+json"), answer.text
            return "error", answer.json()["code"]
        assert answer.status_code == 200, answer.text
        return "ok", answer.json()

    async def on_graphql(self, tool: str, arguments: dict[str, Any]) -> tuple[str, Any]:
        root = "Mutation" if tool in self.mutation_fields() else "Query"
        field = self.root_field(root, tool)
        declared = {a["name"]: a for a in field["args"]}
        variables = dict(arguments)
        signature = ", ".join(f"${n}: {type_ref(declared[n]['type'])}" for n in variables)
        passing = ", ".join(f"{n}: ${n}" for n in variables)
        selection = select(self.schema, field["type"])
        operation = "mutation" if root == "Mutation" else "query"
        query = (f"{operation} Call{'(' + signature + ')' if signature else ''} "
                 f"{{ {tool}{'(' + passing + ')' if passing else ''} {selection} }}")  # fmt: skip
        answer = await self.graphql(query, variables)
        if answer.get("errors"):
            return "error", answer["errors"][0]["extensions"]["code"].lower()
        return "ok", strip_typenames(answer["data"][tool])

    def root_field(self, root: str, name: str) -> dict[str, Any]:
        type_name = self.schema[{"Query": "queryType", "Mutation": "mutationType"}[root]]["name"]
        fields = next(t for t in self.schema["types"] if t["name"] == type_name)["fields"]
        return next(f for f in fields if f["name"] == name)

    def root_names(self, key: str) -> set[str]:
        if self.schema.get(key) is None:
            return set()
        type_name = self.schema[key]["name"]
        return {f["name"] for f in next(t for t in self.schema["types"] if t["name"] == type_name)["fields"]}

    def mutation_fields(self) -> set[str]:
        return self.root_names("mutationType")


@contextlib.asynccontextmanager
async def callers(instance: Instance, secret: str | None) -> AsyncIterator[Callers]:
    headers = {"Authorization": f"Bearer {secret}"} if secret else {}
    with live(instance, surfaces=discover()) as base:
        async with (
            connect(f"{base}/mcp", "auto", secret) as mcp_client,
            httpx2.AsyncClient(base_url=base, headers=headers, timeout=60) as http,
        ):
            found = Callers(base, secret, mcp_client, http)
            await found.load()
            yield found


# -- REST requests from the document (the test reads the generated mapping; it does not know it) -----------------
def operation_of(openapi: dict[str, Any], key: str, value: str) -> tuple[str, str, dict[str, Any]]:
    for path, item in openapi["paths"].items():
        for method, operation in item.items():
            if isinstance(operation, dict) and operation.get(key) == value:
                return method, path, operation
    raise AssertionError(f"no operation with {key} = {value}")


def rest_request(openapi: dict[str, Any], tool: str, arguments: dict[str, Any]) -> tuple[str, str, Any, Any]:
    method, path, operation = operation_of(openapi, "x-canon-tool", tool)
    params: dict[str, Any] = {}
    rest = dict(arguments)
    for parameter in operation.get("parameters", []):
        name = parameter["name"]
        if name not in rest:
            continue
        value = rest.pop(name)
        if parameter["in"] == "path":
            path = path.replace("{" + name + "}", str(value))
        elif "content" in parameter:
            params[name] = json.dumps(value)
        elif isinstance(value, bool):
            params[name] = "true" if value else "false"
        else:
            params[name] = value
    body = rest if "requestBody" in operation else None
    assert body is None or method in ("post", "put", "patch", "delete")
    assert body is not None or not rest, f"{tool}: arguments {sorted(rest)} have no place in the REST operation"
    return method.upper(), path, params, body


# -- GraphQL: a full selection from introspection ------------------------------------------------------------------
INTROSPECTION = """
query { __schema { queryType { name } mutationType { name } subscriptionType { name }
  types { name kind possibleTypes { name }
    fields { name args { name defaultValue type { ...T } } type { ...T } } } } }
fragment T on __Type { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name } } } } }
"""


def type_ref(ref: dict[str, Any]) -> str:
    if ref["kind"] == "NON_NULL":
        return type_ref(ref["ofType"]) + "!"
    if ref["kind"] == "LIST":
        return "[" + type_ref(ref["ofType"]) + "]"
    return str(ref["name"])


def named(ref: dict[str, Any]) -> str:
    while ref.get("ofType"):
        ref = ref["ofType"]
    return str(ref["name"])


def select(schema: dict[str, Any], ref: dict[str, Any], depth: int = 0) -> str:
    """Every field the result carries (fields that take arguments, i.e. edge traversals, are not part of it)."""
    types = {t["name"]: t for t in schema["types"]}
    found = types[named(ref)]
    if found["kind"] in ("SCALAR", "ENUM"):
        return ""
    assert depth < 12, f"selection too deep at {found['name']}"
    if found["kind"] in ("INTERFACE", "UNION"):
        parts = [f"... on {p['name']} {select(schema, {'kind': 'OBJECT', 'name': p['name']}, depth + 1)}"
                 for p in sorted(found["possibleTypes"], key=lambda p: p["name"])]  # fmt: skip
        return "{ __typename " + " ".join(parts) + " }"
    fields = [f for f in found["fields"] if not f["args"]]
    return "{ __typename " + " ".join(f"{f['name']} {select(schema, f['type'], depth + 1)}" for f in fields) + " }"


def strip_typenames(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: strip_typenames(v) for k, v in value.items() if k != "__typename"}
    if isinstance(value, list):
        return [strip_typenames(v) for v in value]
    return value


def comparable(value: Any) -> Any:
    """A result with absent-or-null fields made alike (GraphQL selects every field, so absent ones come back
    null), and timestamps removed (writes on separate stores happen at different times)."""
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items() if v is not None and k not in TIMESTAMPS}
    if isinstance(value, list | tuple):
        return [comparable(v) for v in value]
    return value


# -- what each surface carries ------------------------------------------------------------------------------------
async def test_every_registry_entry_is_on_every_surface_and_nothing_else(seed_template: Path, tmp_path: Path) -> None:
    instance = open_copy(seed_template, tmp_path)
    try:
        registry = instance.registry
        tools = {t.name for t in registry.tools}
        reads = {t.name for t in registry.tools if t.annotations.get("readOnlyHint")}
        resources = {r.name for r in [*registry.resources, *registry.templates]}
        subscribable = {r.name for r in [*registry.resources, *registry.templates] if r.subscribable}
        secret = token(instance, "root", "admin")
        async with callers(instance, secret) as on:
            mcp_tools = {t.name for t in (await on.mcp.list_tools()).tools}
            mcp_resources = {r.name for r in (await on.mcp.list_resources()).resources}
            mcp_templates = {t.name for t in (await on.mcp.list_resource_templates()).resource_templates}
            llms = (await on.http.get("/llms.txt")).text
            operations = [op for item in on.openapi["paths"].values() for op in item.values() if isinstance(op, dict)]
            query, mutation = on.root_names("queryType"), on.root_names("mutationType")
            subscription = on.root_names("subscriptionType")
    finally:
        instance.close()

    assert mcp_tools == tools
    assert registry.resources[0].name in mcp_resources
    assert mcp_templates == {t.name for t in registry.templates}

    rest_tools = [op["x-canon-tool"] for op in operations if "x-canon-tool" in op]
    rest_resources = [op["x-canon-resource"] for op in operations if "x-canon-resource" in op]
    assert sorted(rest_tools) == sorted(tools), "each tool is exactly one REST operation"
    assert sorted(rest_resources) == sorted(resources), "each resource is exactly one REST operation"
    others = [op for op in operations if "x-canon-tool" not in op and "x-canon-resource" not in op]
    assert [op.get("x-canon-action") for op in others] == ["resources/list"]

    assert query == reads | {graphql_name(r) for r in resources}
    assert mutation == tools - reads
    assert subscription == {graphql_name(r) for r in subscribable}

    parsed = parse_llms_file(llms)
    sections = parsed["sections"]
    assert {link["title"] for link in sections["Tools"]} == tools
    assert {link["title"] for link in sections["Resources"]} == resources


async def test_rest_carries_the_registry_schemas_exactly(seed_template: Path, tmp_path: Path) -> None:
    from generators.rest.openapi import unhoist

    instance = open_copy(seed_template, tmp_path)
    try:
        async with callers(instance, None) as on:
            mcp_tools = {t.name: t for t in (await on.mcp.list_tools()).tools}
            document = on.openapi
        for tool in instance.registry.tools:
            _, _, operation = operation_of(document, "x-canon-tool", tool.name)
            input_schema, output_schema = unhoist(document, operation)
            assert input_schema == tool.input_schema, tool.name
            assert output_schema == tool.output_schema, tool.name
            required = set(tool.input_schema.get("required", ()))
            for parameter in operation.get("parameters", []):  # each parameter says itself whether it is required
                assert parameter.get("required", False) == (parameter["name"] in required), (tool.name, parameter)
            if "requestBody" in operation:
                body = operation["requestBody"]["content"]["application/json"]["schema"]
                in_path = {p["name"] for p in operation.get("parameters", []) if p["in"] == "path"}
                assert set(body.get("required", ())) == required - in_path, tool.name
            if tool.name in mcp_tools:  # anonymous lists the tools it may call (with no dialect: MCP assumes 2020-12)
                assert {**mcp_tools[tool.name].input_schema, "$schema": DIALECT} == tool.input_schema
    finally:
        instance.close()


# -- the same calls, the same answers -----------------------------------------------------------------------------
READS: list[tuple[str, dict[str, Any]]] = [
    ("describe_model", {}),
    ("get_node", {"id": PUBLIC_SERVICE}),
    ("find_nodes", {"type": "Service", "limit": 5}),
    ("find_nodes", {"type": "Team", "where": {"area": "product", "founded": {"gte": "2016"}}, "limit": 3}),
    ("find_nodes", {"text": "payment", "limit": 4}),
    ("find_nodes", {"type": "Service", "facets": ["tier", "lifecycle", "handles_pii"], "limit": 3}),
    ("get_neighbors", {"id": PUBLIC_SERVICE, "depth": 2, "limit": 10}),
    ("get_neighbors", {"id": PUBLIC_SERVICE, "direction": "in", "edge_types": ["owns"]}),
    ("find_paths", {"source": PUBLIC_SERVICE, "target": "team-payments", "max_depth": 3, "limit": 3}),
    (
        "query_graph",
        {
            "match": [
                {"node": "s", "type": "Service"},
                {"edge": "owns", "from": "t", "to": "s"},
                {"node": "t", "type": "Team"},
            ],
            "limit": 5,
        },
    ),
    ("get_changes", {"since": 0, "limit": 5}),
]


@pytest.mark.parametrize("role", ["admin", "reader", "grouped", "anonymous"])
async def test_the_same_reads_give_the_same_results_on_mcp_rest_and_graphql(
    role: str,
    seed_template: Path,
    tmp_path: Path,
) -> None:
    instance = open_copy(seed_template, tmp_path)
    principal = {"admin": Principal("root", frozenset({"admin"})), "reader": Principal("rita", frozenset({"reader"})),
                 "grouped": Principal("gus", frozenset({"reader"}), frozenset({"payments"})),
                 "anonymous": ANONYMOUS}[role]  # fmt: skip
    secret = None if role == "anonymous" else token(instance, principal.name, next(iter(principal.roles)),
                                                    *principal.groups)  # fmt: skip
    try:
        async with callers(instance, secret) as on:
            for tool, arguments in READS:
                if tool in ("find_paths", "query_graph") and role == "anonymous":
                    pass  # advanced tools are callable by every reader
                direct = instance.dispatcher.call_tool(principal, "test", tool, arguments)
                expected = ("ok", direct.value) if direct.error is None else ("error", direct.error.code)
                got = {"mcp": await on.on_mcp(tool, arguments), "rest": await on.on_rest(tool, arguments),
                       "graphql": await on.on_graphql(tool, arguments)}  # fmt: skip
                for surface, answer in got.items():
                    assert comparable(answer) == comparable(expected), f"{tool} {arguments} on {surface} as {role}"
    finally:
        instance.close()


ERRORS: list[tuple[str, str, dict[str, Any], str]] = [
    ("unknown id", "get_node", {"id": "no-such-node"}, "not_found"),
    ("invalid input", "find_nodes", {"type": "Service", "limit": 100000}, "invalid_arguments"),
    ("a facet that cannot be one", "find_nodes", {"type": "Service", "facets": ["description"]}, "invalid_arguments"),
    ("record the caller may not read", "get_node", {"id": RESTRICTED}, "forbidden"),
    (
        "stale revision",
        "delete_edge",
        {"type": "owns", "source": "team-payments", "target": PUBLIC_SERVICE, "expected_revision": 1},
        "conflict",
    ),
]


@pytest.mark.parametrize(("what", "tool", "arguments", "code"), ERRORS, ids=[e[0] for e in ERRORS])
async def test_the_same_failure_is_the_same_error_class_everywhere(
    what: str,
    tool: str,
    arguments: dict[str, Any],
    code: str,
    seed_template: Path,
    tmp_path: Path,
) -> None:
    instance = open_copy(seed_template, tmp_path)
    secret = token(instance, "wendy", "writer")  # a writer without groups: may write, may not read restricted nodes
    try:
        async with callers(instance, secret) as on:
            got = {"mcp": await on.on_mcp(tool, arguments), "rest": await on.on_rest(tool, arguments),
                   "graphql": await on.on_graphql(tool, arguments)}  # fmt: skip
    finally:
        instance.close()
    assert got == {"mcp": ("error", code), "rest": ("error", code), "graphql": ("error", code)}, what


INVERSE_NAMES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("get_neighbors", {"id": PUBLIC_SERVICE, "direction": "out", "edge_types": ["owned_by"]},
     {"id": PUBLIC_SERVICE, "direction": "in", "edge_types": ["owns"]}),
    ("find_paths", {"source": PUBLIC_SERVICE, "target": "team-payments", "direction": "out",
                    "edge_types": ["owned_by"]},
     {"source": PUBLIC_SERVICE, "target": "team-payments", "direction": "in", "edge_types": ["owns"]}),
    ("query_graph", {"match": [{"node": "s", "id": PUBLIC_SERVICE}, {"edge": "owned_by", "from": "s", "to": "t"}]},
     {"match": [{"node": "s", "id": PUBLIC_SERVICE}, {"edge": "owns", "from": "t", "to": "s"}]}),
]  # fmt: skip


async def test_an_inverse_edge_name_is_its_type_the_other_way_on_mcp_rest_and_graphql(
    seed_template: Path, tmp_path: Path
) -> None:
    instance = open_copy(seed_template, tmp_path)
    try:
        async with callers(instance, token(instance, "rita", "reader")) as on:
            for tool, inverse, forward in INVERSE_NAMES:
                for surface in (on.on_mcp, on.on_rest, on.on_graphql):
                    got, expected = await surface(tool, inverse), await surface(tool, forward)
                    assert got[0] == "ok", (tool, surface.__name__, got)
                    assert comparable(got) == comparable(expected), (tool, surface.__name__)
                    assert got[1]["items"], (tool, surface.__name__)
    finally:
        instance.close()


async def test_changes_from_before_the_compacted_log_are_gone_on_every_surface(
    seed_template: Path, tmp_path: Path
) -> None:
    """After `canon store compact`, a feed read from before the change log's floor is the same `gone` error on MCP,
    REST (410) and GraphQL, naming the oldest revision still kept; reading from just below the floor works."""
    from core.store.retention import Retention

    instance = open_copy(seed_template, tmp_path)
    secret = token(instance, "ada", "admin")
    done = instance.store.compact(Retention(changes_keep_revisions=3))
    try:
        async with callers(instance, secret) as on:
            before = {"since": done.oldest - 2}
            got = {"mcp": await on.on_mcp("get_changes", before), "rest": await on.on_rest("get_changes", before),
                   "graphql": await on.on_graphql("get_changes", before)}  # fmt: skip
            method, url, params, body = rest_request(on.openapi, "get_changes", before)
            problem = await on.http.request(method, url, params=params, json=body)
            kept = await on.on_rest("get_changes", {"since": done.oldest - 1})
    finally:
        instance.close()
    assert got == {"mcp": ("error", "gone"), "rest": ("error", "gone"), "graphql": ("error", "gone")}
    assert (problem.status_code, problem.json()["oldest"]) == (410, done.oldest)
    assert kept[0] == "ok"
    assert kept[1]["items"][0]["revision"] == done.oldest


async def test_the_past_reads_the_same_on_mcp_rest_and_graphql(seed_template: Path, tmp_path: Path) -> None:
    """A node updated since and one deleted since read at the old revision (`at`), and what changed since
    (`diff_revisions`), give the dispatcher's answer on MCP, REST and GraphQL; a future revision is not_found on
    each, and a revision compacted away is gone."""
    from core.store.retention import Retention
    from core.values.principal import LOCAL

    instance = open_copy(seed_template, tmp_path)
    principal = Principal("gus", frozenset({"reader"}), frozenset({"payments"}))
    before = instance.store.revision()
    logged = instance.store.changes(before - 1, 1)[0].at  # the time of revision `before`: as_of reads at it
    for tool, arguments in (("patch_node", {"id": "team-payments", "properties": {"name": "Payments Later"}}),
                            ("delete_node", {"id": "person-ada-okafor", "cascade": True})):  # fmt: skip
        assert not instance.dispatcher.call_tool(LOCAL, "test", tool, arguments).is_error
    head = instance.store.revision()
    reads: list[tuple[str, dict[str, Any]]] = [
        ("get_node", {"id": "team-payments", "at": before}),
        ("get_node", {"id": "person-ada-okafor", "at": before}),
        ("find_nodes", {"type": "Team", "at": before, "limit": 3}),
        ("get_neighbors", {"id": "person-ada-okafor", "at": before, "limit": 5}),
        ("diff_revisions", {"from": before, "limit": 5}),
        ("get_node", {"id": "team-payments", "at": head + 1}),
        ("get_node", {"id": "team-payments", "as_of": logged}),
        ("find_nodes", {"type": "Team", "as_of": logged, "limit": 3}),
        ("get_node", {"id": "team-payments", "at": before, "as_of": logged}),
        ("find_nodes", {"type": "Team", "where": {"name": {"contains": "payments"}}, "at": before}),
        ("find_nodes", {"text": "ada", "as_of": logged, "limit": 3}),
        ("find_paths", {"source": "person-ada-okafor", "target": "team-payments", "at": before, "max_depth": 2}),
        ("find_paths", {"source": "person-ada-okafor", "target": "team-payments", "as_of": logged}),
        (
            "query_graph",
            {
                "match": [
                    {"node": "p", "type": "Person"},
                    {"edge": "member_of", "from": "p", "to": "t"},
                    {"node": "t", "id": "team-payments"},
                ],
                "at": before,
                "limit": 5,
            },
        ),
        ("query_graph", {"match": [{"node": "t", "id": "team-payments"}], "at": head + 1}),
    ]
    paths = instance.dispatcher.call_tool(principal, "test", *reads[-3]).value
    assert paths is not None
    assert paths["items"]  # the deleted person's paths, as they were
    try:
        async with callers(instance, token(instance, "gus", "reader", "payments")) as on:
            for tool, arguments in reads:
                direct = instance.dispatcher.call_tool(principal, "test", tool, arguments)
                expected = ("ok", direct.value) if direct.error is None else ("error", direct.error.code)
                got = {"mcp": await on.on_mcp(tool, arguments), "rest": await on.on_rest(tool, arguments),
                       "graphql": await on.on_graphql(tool, arguments)}  # fmt: skip
                for surface, answer in got.items():
                    assert comparable(answer) == comparable(expected), f"{tool} {arguments} on {surface}"
            old = (await on.http.get(f"/api/nodes/team-payments?at={before}")).json()
            future = await on.http.get(f"/api/nodes/team-payments?at={head + 1}")
            as_of = (await on.http.get("/api/nodes/team-payments", params={"as_of": logged})).json()
            done = instance.store.compact(Retention(changes_keep_revisions=3))
            gone = {"mcp": await on.on_mcp("get_node", {"id": "team-payments", "at": before}),
                    "rest": await on.on_rest("get_node", {"id": "team-payments", "at": before}),
                    "graphql": await on.on_graphql("get_node", {"id": "team-payments", "at": before})}  # fmt: skip
    finally:
        instance.close()
    assert (old["node"]["properties"]["name"], old["revision"]) == ("Payments", before)
    assert future.status_code == 404
    assert (as_of["node"]["properties"]["name"], as_of["revision"]) == ("Payments", before)
    assert before < done.oldest - 1
    assert gone == {"mcp": ("error", "gone"), "rest": ("error", "gone"), "graphql": ("error", "gone")}


TEAM = {"slug": "cross", "name": "Cross Surface", "mission": "Proves the surfaces agree.", "area": "platform"}
WRITES: list[tuple[str, dict[str, Any]]] = [
    ("upsert_node", {"id": "team-cross", "type": "Team", "properties": TEAM}),
    (
        "upsert_edge",
        {"type": "decided_by", "source": "adr-0001", "target": "team-cross"},
    ),
    (
        "upsert_node",
        {"id": "team-cross", "type": "Team", "expected_revision": 999, "properties": TEAM | {"name": "Stale"}},
    ),
    ("patch_node", {"id": "team-cross", "properties": {"name": "Crossed", "slack_channel": "#cross"}}),
    ("patch_node", {"id": "team-cross", "properties": {"area": None}}),  # required: invalid
    ("patch_node", {"id": "team-cross", "properties": {"name": "Stale"}, "expected_revision": 999}),
    ("patch_node", {"id": "team-nobody", "properties": {"name": "Nobody"}}),
    ("patch_node", {"id": "team-cross", "properties": {"slack_channel": None}, "visibility": "public"}),
    (
        "write_batch",
        {
            "operations": [
                {"op": "upsert_node", "id": "team-cross-2", "type": "Team", "properties": TEAM | {"slug": "second"}},
                {"op": "patch_node", "id": "team-cross-2", "properties": {"name": "Second"}, "readers": None},
                {"op": "delete_edge", "type": "decided_by", "source": "adr-0001", "target": "team-cross"},
            ]
        },
    ),
    ("delete_node", {"id": "team-cross-2"}),
    ("get_node", {"id": "team-cross"}),
]


async def test_the_same_writes_on_fresh_stores_give_the_same_results(seed_template: Path, tmp_path: Path) -> None:
    transcripts: dict[str, list[tuple[str, Any]]] = {}
    for surface in ("mcp", "rest", "graphql", "direct"):
        instance = open_copy(seed_template, tmp_path / surface)
        secret = token(instance, "wendy", "writer")
        try:
            if surface == "direct":
                writer = Principal("wendy", frozenset({"writer"}))
                results = [instance.dispatcher.call_tool(writer, "test", t, a) for t, a in WRITES]
                transcripts[surface] = [("ok", r.value) if r.error is None else ("error", r.error.code)
                                        for r in results]  # fmt: skip
                continue
            async with callers(instance, secret) as on:
                call = {"mcp": on.on_mcp, "rest": on.on_rest, "graphql": on.on_graphql}[surface]
                transcripts[surface] = [await call(t, a) for t, a in WRITES]
        finally:
            instance.close()
    kinds = ["ok", "ok", ("error", "conflict"), "ok", ("error", "invalid"), ("error", "conflict"),
             ("error", "not_found"), "ok", "ok", "ok", "ok"]  # fmt: skip
    assert [kind if kind == "ok" else (kind, value) for kind, value in transcripts["direct"]] == kinds
    expected = comparable(transcripts["direct"])
    for surface in ("mcp", "rest", "graphql"):
        assert comparable(transcripts[surface]) == expected, surface


# -- a new tool, added as docs/development/adding-a-tool.md says, reaches every surface -----------------------------
GUIDE = Path(__file__).resolve().parent.parent / "docs" / "development" / "adding-a-tool.md"


def guide_block(language: str) -> str:
    """The one ```language block of the adding-a-tool guide."""
    blocks = re.findall(rf"^```{language}\n(.*?)^```$", GUIDE.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL)
    assert len(blocks) == 1, language
    return blocks[0]


async def test_a_tool_added_as_adding_a_tool_md_says_appears_and_works_on_every_surface(
    seed_template: Path,
    tmp_path: Path,
) -> None:
    folder = tmp_path / "tools"
    folder.mkdir()
    (folder / "echo_words.json").write_text(guide_block("json"), encoding="utf-8")
    (folder / "echo_words.py").write_text(guide_block("python"), encoding="utf-8")
    definition = json.loads(guide_block("json"))
    instance = open_copy(seed_template, tmp_path / "store", Toolset.from_folder(folder))
    arguments = {"words": "one definition", "times": 2}
    try:
        async with callers(instance, None) as on:
            listed = {t.name: t for t in (await on.mcp.list_tools()).tools}
            answers = [await on.on_mcp("echo_words", arguments), await on.on_rest("echo_words", arguments),
                       await on.on_graphql("echo_words", arguments)]  # fmt: skip
            wrong = [await on.on_rest("echo_words", {"words": ""}),
                     await on.on_graphql("echo_words", {"words": ""})]  # fmt: skip
            llms = parse_llms_file((await on.http.get("/llms.txt")).text)
            page = await on.http.get("/tools/echo_words.md")
            operation = operation_of(on.openapi, "x-canon-tool", "echo_words")
            in_query = "echo_words" in on.root_names("queryType")
    finally:
        instance.close()
    assert sorted(p.name for p in folder.iterdir() if p.is_file()) == ["echo_words.json", "echo_words.py"]
    assert list(listed)[-1] == "echo_words"  # listed after the tools schema/tool-order.json places
    assert listed["echo_words"].input_schema == definition["inputSchema"]  # as written (MCP assumes 2020-12)
    assert answers == [("ok", {"echo": "one definition one definition", "count": 2})] * 3
    assert wrong == [("error", "invalid_arguments")] * 2
    assert operation[:2] == ("get", "/api/echo")
    assert in_query
    assert "echo_words" in {link["title"] for link in llms["sections"]["Tools"]}
    assert page.status_code == 200
    assert "Repeat the given words back" in page.text
