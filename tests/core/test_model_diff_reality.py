"""`canon model diff`'s classifications held to reality: what a client of the old model sends still works against a
server on the new model exactly when the diff says the change is compatible for that client's surface.

For each change of the corpus (`tests/core/test_model_diff.py`), a server runs on the new model, its store holding
what clients of the new model may write (`_new_clients_write`: one record per type, with values only the new model
allows wherever there are some). Then a client of the old model replays a fixed set of requests recorded against
the old surfaces (`RECORDED`: writes, reads and the type resources; REST requests made from the old OpenAPI
document, GraphQL selections from the old schema's introspection, MCP `tools/call` and `resources/read`) and follows
every link of the old llms.txt. A request fails when the server refuses it or answers what the old contract does
not describe: a node whose properties do not fit the old type's shape (types, required properties, items; value
rules such as enums, formats, patterns and bounds are the server's to enforce on input, and an output value of a
widened rule is compatible by the diff's documented policy).

Expected: on MCP, REST and GraphQL some recorded request fails exactly when the surface's row, or the write rules'
row (enforced on every surface), is breaking; for llms.txt, some old link is gone exactly when its row is breaking.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from typing import Any

import httpx2
import jsonschema
import pytest

from core.dispatch.registry import type_schema
from core.http.app import build_app
from core.index.graph import GraphIndex
from core.lang.model import Model
from core.ops.config import Config
from core.ops.tokens import TokenFile
from core.seam.instance import Instance
from core.seam.surfaces import discover
from core.store import open_store
from core.values.operations import PutEdge, PutNode
from core.values.records import Edge, Node
from core.values.uris import type_uri
from tests.core.test_model_diff import CORPUS, Change, corpus_model
from tests.mcp.conftest import modern_request
from tests.test_cross_surface import INTROSPECTION, named, rest_request, select, type_ref

pytestmark = pytest.mark.anyio

TEAM = {"slug": "alpha", "name": "Alpha", "area": "data", "size": 10, "founded": "2020-01-02"}
# what a client of the old model sends: each a tool call; every surface sends the same ones its own way
RECORDED: list[tuple[str, dict[str, Any]]] = [
    ("upsert_node", {"id": "team-alpha", "type": "Team", "properties": TEAM}),
    (
        "upsert_node",
        {"id": "team-beta", "type": "Team", "properties": {"slug": "beta", "name": "Beta"}},
    ),  # optional left out
    ("upsert_node", {"id": "team-gamma", "type": "Team", "properties": {"slug": "gamma-3", "name": "G", "size": 1}}),
    (
        "upsert_node",
        {"id": "team-delta", "type": "Team", "properties": {"slug": "delta", "name": "D" * 80, "size": 50}},
    ),
    ("upsert_node", {"id": "svc-billing", "type": "Service", "properties": {"name": "Billing API", "tier": 2}}),
    ("upsert_node", {"id": "svc-ledger", "type": "Service", "properties": {"name": "Ledger", "tier": 1}}),
    (
        "upsert_edge",
        {"type": "owns", "source": "team-alpha", "target": "svc-billing", "properties": {"since": "2021-01-01"}},
    ),
    ("upsert_edge", {"type": "depends_on", "source": "svc-billing", "target": "svc-ledger", "properties": {}}),
    ("upsert_edge", {"type": "depends_on", "source": "svc-billing", "target": "team-alpha", "properties": {}}),
    ("upsert_edge", {"type": "depends_on", "source": "svc-ledger", "target": "svc-billing", "properties": {}}),
    ("get_node", {"id": "team-alpha"}),
    ("get_node", {"id": "svc-billing"}),
    ("find_nodes", {"type": "Team"}),
    ("find_nodes", {"type": "Service"}),
    ("get_neighbors", {"id": "team-alpha"}),
]
OLD_TYPES = ("Team", "Service", "owns", "depends_on")
# candidate values for what new clients write, tried in order (enum members of the new schema come first)
CANDIDATES: tuple[Any, ...] = (2.5, "ab", "abc-1", "2020-01-02", "2020-01-02T03:04:05Z", "api", "new value", 7, 1,
                               True)  # fmt: skip
VALUE_RULES = frozenset({"enum", "const", "format", "pattern", "minimum", "maximum", "exclusiveMinimum",
                         "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "minItems", "maxItems",
                         "uniqueItems", "additionalProperties"})  # fmt: skip


# -- the old model's contract, recorded once -----------------------------------------------------------------------
def shape(schema: Any) -> Any:
    """`schema` without value rules: the shape a client of it relies on (types, required properties, items)."""
    if isinstance(schema, dict):
        return {k: shape(v) for k, v in schema.items() if k not in VALUE_RULES}
    if isinstance(schema, list):
        return [shape(v) for v in schema]
    return schema


class Contract:
    """What a client of the old model knows: the OpenAPI document, the GraphQL schema, llms.txt's links and the
    shape of each type's properties."""

    def __init__(self, openapi: dict[str, Any], graphql: dict[str, Any], links: list[str], model: Model) -> None:
        self.openapi, self.graphql, self.links = openapi, graphql, links
        self.shapes = {name: shape(type_schema(model, name)["$defs"][name]) for name in OLD_TYPES}

    def misfits(self, answer: Any, *, null_is_absent: bool = False) -> list[str]:
        """Every node or edge in `answer` of an old type whose properties do not fit that type's old shape (on
        GraphQL, which selects every property, a null one is one the record does not have)."""
        found: list[str] = []
        for record in _records(answer):
            known = self.shapes.get(str(record.get("type")))
            properties = record.get("properties")
            if known is not None and isinstance(properties, dict):
                if null_is_absent:
                    properties = {k: v for k, v in properties.items() if v is not None}
                errors = list(jsonschema.Draft202012Validator(known).iter_errors(properties))
                found += [f"{record.get('id') or record.get('type')}: {e.message}" for e in errors]
        return found


def _records(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        if "type" in value and "properties" in value:
            yield value
        for item in value.values():
            yield from _records(item)
    elif isinstance(value, list):
        for item in value:
            yield from _records(item)


# -- a server on a model --------------------------------------------------------------------------------------------
@contextlib.asynccontextmanager
async def server(model: Model, folder: Path) -> AsyncGenerator[tuple[Instance, httpx2.AsyncClient]]:
    """An unseeded store on `model`, every surface on it in-process, and an admin's client."""
    folder.mkdir()
    config = Config(store=folder / "canon.db", tokens=folder / "tokens.json")
    store = open_store(config.store, model)
    instance = Instance(config, model, store, GraphIndex.build(store))
    secret = TokenFile(config.tokens).create("ada", "admin")
    app = build_app(instance, surfaces=discover())
    try:
        async with app.router.lifespan_context(app):
            transport = httpx2.ASGITransport(app=app)
            async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000",
                                          headers={"Authorization": f"Bearer {secret}"}) as http:  # fmt: skip
                yield instance, http
    finally:
        instance.close()


async def record_contract(model: Model, folder: Path) -> Contract:
    async with server(model, folder) as (_, http):
        openapi = (await http.get("/openapi.json")).json()
        graphql = (await http.post("/graphql", json={"query": INTROSPECTION})).json()["data"]["__schema"]
        llms = (await http.get("/llms.txt")).text
    links = sorted(set(re.findall(r"\]\((http://127\.0\.0\.1:8000/[^)\s]*|/[^)\s]*)\)", llms)))
    return Contract(openapi, graphql, links, model)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def contract(tmp_path_factory: pytest.TempPathFactory) -> Contract:
    return await record_contract(corpus_model(lambda d: None, "1.0.0"), tmp_path_factory.mktemp("old") / "server")


# -- what clients of the new model write --------------------------------------------------------------------------
def _value(schema: dict[str, Any], old: dict[str, Any] | None) -> tuple[Any, bool] | None:
    """A value `schema` accepts, preferring one that does not fit `old`'s shape (then True), or None."""
    options = [*schema.get("enum", ()), *CANDIDATES]
    valid = [v for v in options if jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER).is_valid(v)]  # fmt: skip
    if not valid:
        return None
    if old is not None:
        for v in valid:
            if not jsonschema.Draft202012Validator(shape(old)).is_valid(v):
                return v, True
    return valid[0], False


def _properties(model: Model, name: str, contract_model: Model) -> dict[str, Any]:
    schema = type_schema(model, name)["$defs"][name]
    old_schema = type_schema(contract_model, name)["$defs"][name] if name in OLD_TYPES else {}
    required = set(schema.get("required", ()))
    chosen: dict[str, Any] = {}
    for prop, rule in schema.get("properties", {}).items():
        picked = _value(rule, old_schema.get("properties", {}).get(prop))
        if picked is not None and (prop in required or picked[1]):
            chosen[prop] = picked[0]
    return chosen


def _new_clients_write(instance: Instance, model: Model, old: Model) -> None:
    """One node per node type and one edge per edge type, as a client of `model` may write them."""
    ids = {name: f"new-{name.lower()}" for name in model.node_types}
    nodes = [PutNode(Node(ids[name], name, _properties(model, name, old))) for name in model.node_types]
    edges = [PutEdge(Edge(name, ids[source], ids[_other(source, t.targets)], _properties(model, name, old)))
             for name, t in model.edge_types.items() for source in sorted(t.sources)[:1]]  # fmt: skip
    instance.store.commit([*nodes, *edges], principal="new-client")


def _other(source: str, targets: frozenset[str]) -> str:
    """A target type other than the source's where there is one (no loop, which an acyclic type refuses)."""
    return next((t for t in sorted(targets) if t != source), sorted(targets)[0])


# -- the old client on each surface ---------------------------------------------------------------------------------
async def on_mcp(http: httpx2.AsyncClient, contract: Contract) -> list[str]:
    failures: list[str] = []
    for i, (tool, arguments) in enumerate(RECORDED):
        headers, body = modern_request("tools/call", {"name": tool, "arguments": arguments}, id_=i)
        answer = (await http.post("/mcp", headers=headers, json=body)).json()
        result = answer.get("result")
        if result is None or result.get("isError"):
            failures.append(f"{tool} {arguments.get('id', arguments.get('type'))}: {json.dumps(answer)[:300]}")
            continue
        value = result.get("structuredContent") or json.loads(result["content"][0]["text"])
        failures += contract.misfits(value)
    for name in OLD_TYPES:
        headers, body = modern_request("resources/read", {"uri": type_uri(name)})
        if "result" not in (await http.post("/mcp", headers=headers, json=body)).json():
            failures.append(f"resource {name}")
    return failures


async def on_rest(http: httpx2.AsyncClient, contract: Contract) -> list[str]:
    failures: list[str] = []
    for tool, arguments in RECORDED:
        method, url, params, body = rest_request(contract.openapi, tool, arguments)
        answer = await http.request(method, url, params=params, json=body)
        if answer.status_code >= 400:
            failures.append(f"{method} {url}: {answer.status_code} {answer.text[:300]}")
            continue
        failures += contract.misfits(answer.json())
    for name in OLD_TYPES:
        if (await http.get(f"/api/resources/types/{name}")).status_code != 200:
            failures.append(f"GET /api/resources/types/{name}")
    return failures


async def on_graphql(http: httpx2.AsyncClient, contract: Contract) -> list[str]:
    failures: list[str] = []
    schema = contract.graphql
    for tool, arguments in RECORDED:
        query, variables = _graphql_call(schema, tool, arguments)
        answer = (await http.post("/graphql", json={"query": query, "variables": variables})).json()
        if answer.get("errors"):
            failures.append(f"{tool}: {answer['errors'][0]['message'][:300]}")
            continue
        failures += contract.misfits(answer["data"], null_is_absent=True)
    for name in OLD_TYPES:
        field = _root_field(schema, "queryType", f"resource_type_{name}")
        answer = (await http.post("/graphql", json={"query": f"{{ {field['name']} {select(schema, field['type'])} }}"})
                  ).json()  # fmt: skip
        if answer.get("errors") or not answer["data"][field["name"]]:
            failures.append(f"resource_type_{name}")
    return failures


async def on_llms(http: httpx2.AsyncClient, contract: Contract) -> list[str]:
    return [link for link in contract.links if (await http.get(link)).status_code != 200]


def _root_field(schema: dict[str, Any], root: str, name: str) -> dict[str, Any]:
    type_name = schema[root]["name"]
    fields = next(t for t in schema["types"] if t["name"] == type_name)["fields"]
    return next(f for f in fields if f["name"] == name)


def _graphql_call(schema: dict[str, Any], tool: str, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The GraphQL operation a client of the old schema sends for a tool call: every field of the result, and on a
    node every edge it has, one level deep."""
    mutation = tool.startswith(("upsert_", "patch_", "delete_", "write_"))
    field = _root_field(schema, "mutationType" if mutation else "queryType", tool)
    declared = {a["name"]: a for a in field["args"]}
    signature = ", ".join(f"${n}: {type_ref(declared[n]['type'])}" for n in arguments)
    passing = ", ".join(f"{n}: ${n}" for n in arguments)
    selection = select(schema, field["type"])
    if tool == "get_node":  # the old client also walks the node's edges, as the old schema offers them
        selection = "{ __typename node " + _with_edges(schema) + " revision }"
    operation = "mutation" if mutation else "query"
    return f"{operation} Call({signature}) {{ {tool}({passing}) {selection} }}", dict(arguments)


def _with_edges(schema: dict[str, Any]) -> str:
    """A selection on the `Node` interface: every field of each node type, and its edge fields with their items."""
    types = {t["name"]: t for t in schema["types"]}
    parts: list[str] = []
    for possible in sorted(types["Node"]["possibleTypes"], key=lambda p: p["name"]):
        found = types[possible["name"]]
        plain = select(schema, {"kind": "OBJECT", "name": found["name"]})
        walks = " ".join(f"{f['name']} {{ items {select(schema, _items_ref(types, f))} }}"
                         for f in found["fields"] if f["args"])  # fmt: skip
        parts.append(f"... on {found['name']} {plain[:-1]} {walks} }}")
    return "{ __typename " + " ".join(parts) + " }"


def _items_ref(types: dict[str, Any], field: dict[str, Any]) -> dict[str, Any]:
    page = types[named(field["type"])]
    return next(f for f in page["fields"] if f["name"] == "items")["type"]


# Where the diff is stricter than any request can show, and why it stays so (case -> surface -> reason).
STRICTER = {
    "enum removed": {
        "graphql": "the TeamArea enum type is gone (String now): every old query still runs, but "
        "clients generated from the old schema's types no longer match it"
    },
}
SURFACE_CLIENTS = {"mcp": on_mcp, "rest": on_rest, "graphql": on_graphql, "llms": on_llms}


# -- the check --------------------------------------------------------------------------------------------------------
def _expected(name: str, row: str) -> dict[str, bool]:
    """Whether some old request must fail on each surface, from the corpus row (mcp rest graphql llms writes)."""
    mcp, rest, graphql, llms, writes = row.split()
    breaks_writes = writes == "B"
    expected = {"mcp": mcp == "B" or breaks_writes, "rest": rest == "B" or breaks_writes,
                "graphql": graphql == "B" or breaks_writes, "llms": llms == "B"}  # fmt: skip
    return expected | dict.fromkeys(STRICTER.get(name, {}), False)


@pytest.mark.parametrize(("name", "change", "row"), CORPUS, ids=[n for n, _, _ in CORPUS])
async def test_old_clients_break_on_a_surface_exactly_when_the_diff_says_breaking(
    contract: Contract, name: str, change: Change, row: str, tmp_path: Path
) -> None:
    old, new = corpus_model(lambda d: None, "1.0.0"), corpus_model(change, "2.0.0")
    async with server(new, tmp_path / "new") as (instance, http):
        _new_clients_write(instance, new, old)
        failures = {name: await client(http, contract) for name, client in SURFACE_CLIENTS.items()}
    got = {name: bool(found) for name, found in failures.items()}
    assert got == _expected(name, row), json.dumps(failures, indent=1)[:3000]
