"""The authorisation matrix over the MCP wire, on both protocol revisions.

Principals (bearer tokens on a real `canon serve`, and the anonymous caller) × every read path: tools/list, get_node
on nodes of every visibility, find_nodes, get_neighbors, find_paths, query_graph, get_changes, describe_model,
resources/list, resources/read and completion. Two oracles:

* the seed data and the visibility rules, written out here: public → everyone; internal → any token holder;
  restricted → its readers (`user:NAME`, `group:G`) and admins. No answer may name a node (or an edge to a node)
  the caller may not see, and every visible one must be there;
* the reference path: the same call through `Dispatcher` in this process, for the same principal, on a copy of the
  same store. The wire must answer exactly what it answers.

Then stdio, which serves the configured local principal, and the subscription filters of both revisions.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
from collections import Counter
from collections.abc import AsyncGenerator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp
import mcp_types as types
import pytest
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.subscriptions import ResourceUpdated

from core.dispatch.dispatcher import CallContext
from core.dispatch.resources import complete, list_resources, read_resource
from core.lang.model import default_seed_path, load_model
from core.seam.instance import Instance
from core.store.sqlite import SQLiteStore
from core.values.operations import PutNode
from core.values.principal import ANONYMOUS, Principal
from core.values.records import parse_edge_key
from core.values.uris import CHANGES_URI, NODE_TEMPLATE, node_uri
from tests.conftest import run_canon
from tests.mcp.conftest import (
    DEADLINE_S,
    LEGACY,
    MODE_IDS,
    MODERN,
    MODES,
    Process,
    connect,
    copy_store,
    create_token,
    open_copy,
    serving,
)
from tests.mcp.test_mcp_tools import READ_TOOLS, TOOL_NAMES, WRITER_TOOLS, structured, tool_error
from tests.mcp.test_subscriptions import Notifications

pytestmark = pytest.mark.anyio
mode_parameters = pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)

SEED: dict[str, Any] = json.loads(default_seed_path().read_text(encoding="utf-8"))
NODES: dict[str, dict[str, Any]] = {n["id"]: n for n in SEED["nodes"]}
PUBLIC, INTERNAL = "team-payments", "person-ada-okafor"
BY_GROUP = "svc-card-vault"  # restricted: group:payments, group:security
BY_NAME = "doc-report-pentest-2024"  # restricted: group:security, group:leadership, user:ada-okafor, ...
HIDDEN = "doc-report-pentest-2025"  # restricted: group:security, group:leadership
PROBED = [PUBLIC, INTERNAL, BY_GROUP, BY_NAME, HIDDEN]

PRINCIPALS: dict[str, Principal] = {
    "anonymous": ANONYMOUS,
    "reader": Principal("rita", frozenset({"reader"})),
    "reader-in-group": Principal("pat", frozenset({"reader"}), frozenset({"payments"})),
    "reader-by-name": Principal("ada-okafor", frozenset({"reader"})),
    "writer": Principal("wendy", frozenset({"writer"})),
    "admin": Principal("alice", frozenset({"admin"})),
}
who_parameters = pytest.mark.parametrize("who", list(PRINCIPALS))


def sees(principal: Principal, node_id: str) -> bool:
    """The visibility rules, as documented, over the seed data."""
    node = NODES[node_id]
    if node["visibility"] == "public":
        return True
    if not principal.authenticated:
        return False
    if node["visibility"] == "internal" or "admin" in principal.roles:
        return True
    tags = {f"user:{principal.name}", *(f"group:{g}" for g in principal.groups)}
    return bool(tags & set(node.get("readers", ())))


def visible(principal: Principal) -> list[str]:
    return sorted(n for n in NODES if sees(principal, n))


def edge_visible(principal: Principal, source: str, target: str) -> bool:
    return sees(principal, source) and sees(principal, target)


def tools_of(principal: Principal) -> list[str]:
    if "admin" in principal.roles:
        return TOOL_NAMES
    return WRITER_TOOLS if "writer" in principal.roles else READ_TOOLS


def uri_of(node_id: str) -> str:
    return node_uri(NODES[node_id]["type"], node_id)


def test_the_matrix_tells_the_principals_apart() -> None:
    seen = {who: set(visible(p)) for who, p in PRINCIPALS.items()}

    assert seen["admin"] == set(NODES)
    assert seen["anonymous"] < seen["reader"] == seen["writer"] < seen["reader-in-group"] < seen["admin"]
    assert seen["reader"] < seen["reader-by-name"] < seen["admin"]
    assert BY_GROUP in seen["reader-in-group"] - seen["reader-by-name"]
    assert BY_NAME in seen["reader-by-name"] - seen["reader-in-group"]
    assert HIDDEN not in seen["reader-in-group"] | seen["reader-by-name"]


# -- the served instance and the reference ----------------------------------------------------------------------------
@dataclass
class Matrix:
    process: Process
    tokens: dict[str, str]  # principal name -> token
    reference: Instance  # the same store, read in-process through the dispatcher

    @contextlib.asynccontextmanager
    async def client(self, who: str, mode: str) -> AsyncGenerator[mcp.Client]:
        principal = PRINCIPALS[who]
        token = self.tokens[principal.name] if principal.authenticated else None
        async with connect(self.process.url, mode, token) as client:
            yield client

    def call(self, who: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The reference answer: the tool's JSON (its value, or {"error": ...}) for that principal."""
        return self.reference.dispatcher.call_tool(PRINCIPALS[who], "reference", name, arguments).as_json()

    def run(self, who: str, work: Callable[[CallContext], Any]) -> Any:
        return self.reference.dispatcher.run(PRINCIPALS[who], "reference", "reference", "", {}, work)


def tokens_for(folder: Path) -> dict[str, str]:
    made: dict[str, str] = {}
    for principal in PRINCIPALS.values():
        if principal.authenticated:
            [role] = principal.roles
            made[principal.name] = create_token(folder, principal.name, role, *sorted(principal.groups))
    return made


@pytest.fixture(scope="module")
def matrix(seed_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Matrix]:
    """A server nobody writes to, and a reference copy of its store."""
    folder = tmp_path_factory.mktemp("matrix")
    store = copy_store(seed_template, folder / "canon.db")
    tokens = tokens_for(folder)
    reference = open_copy(seed_template, folder / "reference")
    try:
        with serving(store, cwd=folder) as process:
            yield Matrix(process, tokens, reference)
            assert "Traceback" not in process.output(), process.output()
    finally:
        reference.close()


async def answer(client: mcp.Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A tool's JSON over the wire, in the reference's shape: the structured result, or {"error": ...}."""
    result = await client.call_tool(name, arguments)
    if result.is_error:
        return {"error": tool_error(result)}
    return structured(result)


async def pages(client: mcp.Client, name: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    """Every page of a paginated tool, following next_cursor."""
    found = [await answer(client, name, arguments)]
    while (cursor := found[-1].get("next_cursor")) is not None:
        found.append(await answer(client, name, arguments | {"cursor": cursor}))
        assert len(found) <= 50, "the cursor never ends"
    return found


# -- tools ------------------------------------------------------------------------------------------------------------
@mode_parameters
@who_parameters
async def test_tools_list_shows_the_tools_of_the_role(matrix: Matrix, who: str, mode: str) -> None:
    async with matrix.client(who, mode) as client:
        listed = [t.name for t in (await client.list_tools()).tools]

    assert listed == tools_of(PRINCIPALS[who])


@mode_parameters
@who_parameters
async def test_get_node_reads_exactly_the_nodes_the_principal_may_see(matrix: Matrix, who: str, mode: str) -> None:
    async with matrix.client(who, mode) as client:
        got = {node_id: await answer(client, "get_node", {"id": node_id}) for node_id in PROBED}

    principal = PRINCIPALS[who]
    for node_id, value in got.items():
        assert value == matrix.call(who, "get_node", {"id": node_id})
        if sees(principal, node_id):
            assert value["node"]["id"] == node_id
        else:
            assert (value["error"]["code"], value["error"]["key"]) == ("forbidden", node_id)
            assert set(value) == {"error"}  # nothing of the node itself


@mode_parameters
@who_parameters
async def test_find_nodes_finds_every_visible_node_and_counts_only_those(matrix: Matrix, who: str, mode: str) -> None:
    queries: list[dict[str, Any]] = [{"type": "Document", "limit": 100}, {"text": "security", "limit": 100},
                                     {"type": "Service", "where": {"tier": 1}, "limit": 100}]  # fmt: skip
    async with matrix.client(who, mode) as client:
        everything = await pages(client, "find_nodes", {"limit": 100})
        narrowed = [await answer(client, "find_nodes", query) for query in queries]

    expected = visible(PRINCIPALS[who])
    assert [item["id"] for page in everything for item in page["items"]] == expected
    assert {page["total"] for page in everything} == {len(expected)}
    assert everything[0] == matrix.call(who, "find_nodes", {"limit": 100})
    for query, value in zip(queries, narrowed, strict=True):
        assert value == matrix.call(who, "find_nodes", query)
        assert all(sees(PRINCIPALS[who], item["id"]) for item in value["items"])
        assert value["total"] == len(value["items"])
    documents = [n for n in expected if NODES[n]["type"] == "Document"]
    assert narrowed[0]["total"] == len(documents)


@mode_parameters
@who_parameters
async def test_get_neighbors_walks_only_through_visible_nodes(matrix: Matrix, who: str, mode: str) -> None:
    calls: list[dict[str, Any]] = [
        {"id": "team-security", "depth": 1, "limit": 200},
        {"id": PUBLIC, "depth": 2, "limit": 200},
        {"id": BY_GROUP, "depth": 1, "limit": 200},
    ]
    async with matrix.client(who, mode) as client:
        got = [await answer(client, "get_neighbors", arguments) for arguments in calls]

    principal = PRINCIPALS[who]
    for arguments, value in zip(calls, got, strict=True):
        assert value == matrix.call(who, "get_neighbors", arguments)
        if not sees(principal, arguments["id"]):
            assert value["error"]["code"] == "forbidden"
            continue
        ids = [item["node"]["id"] for item in value["items"]]
        assert all(sees(principal, n) for n in ids)
        assert all(edge_visible(principal, item["edge"]["source"], item["edge"]["target"]) for item in value["items"])
        assert value["total"] == len(ids)
    first = {e["target"] if e["source"] == "team-security" else e["source"]
             for e in SEED["edges"] if "team-security" in (e["source"], e["target"])}  # fmt: skip
    assert {item["node"]["id"] for item in got[0]["items"]} == {n for n in first if sees(principal, n)}


@mode_parameters
@who_parameters
async def test_find_paths_never_passes_through_an_invisible_node(matrix: Matrix, who: str, mode: str) -> None:
    calls: list[dict[str, Any]] = [
        {"source": PUBLIC, "target": "team-security", "max_depth": 3, "limit": 50},
        {"source": "svc-checkout-api", "target": BY_GROUP, "max_depth": 3, "limit": 50},
    ]
    async with matrix.client(who, mode) as client:
        got = [await answer(client, "find_paths", arguments) for arguments in calls]

    principal = PRINCIPALS[who]
    for arguments, value in zip(calls, got, strict=True):
        assert value == matrix.call(who, "find_paths", arguments)
        if not sees(principal, arguments["target"]):
            assert value["error"]["code"] == "forbidden"
            continue
        assert value["items"]
        for path in value["items"]:
            assert all(sees(principal, n) for n in path["nodes"])
    admin = matrix.call("admin", "find_paths", calls[0])
    if who != "admin":  # the admin's paths include some through nodes this principal may not see
        assert got[0]["total"] < admin["total"]


@mode_parameters
@who_parameters
async def test_query_graph_binds_only_visible_nodes(matrix: Matrix, who: str, mode: str) -> None:
    pattern = {"match": [{"node": "t", "type": "Team"}, {"edge": "owns", "from": "t", "to": "s"},
                         {"node": "s", "type": "Service"}], "return": ["t", "s"], "limit": 100}  # fmt: skip
    async with matrix.client(who, mode) as client:
        value = await answer(client, "query_graph", pattern)

    principal = PRINCIPALS[who]
    assert value == matrix.call(who, "query_graph", pattern)
    owned = sorted((e["source"], e["target"]) for e in SEED["edges"] if e["type"] == "owns"
                   and NODES[e["source"]]["type"] == "Team" and NODES[e["target"]]["type"] == "Service")  # fmt: skip
    expected = [pair for pair in owned if edge_visible(principal, *pair)]
    assert sorted((item["t"], item["s"]) for item in value["items"]) == expected
    assert value["total"] == len(expected)


@mode_parameters
@who_parameters
async def test_get_changes_shows_only_changes_of_visible_records(matrix: Matrix, who: str, mode: str) -> None:
    async with matrix.client(who, mode) as client:
        feed = await pages(client, "get_changes", {"since": 0, "limit": 500})

    principal = PRINCIPALS[who]
    items = [item for page in feed for item in page["items"]]
    assert feed[0] == matrix.call(who, "get_changes", {"since": 0, "limit": 500})
    assert {page["total"] for page in feed} == {len(items)}
    revisions = [item["revision"] for item in items]
    assert revisions == sorted(set(revisions))
    keys: Counter[str] = Counter()
    for item in items:
        keys[item["kind"]] += 1
        if item["kind"] == "node":
            assert sees(principal, item["key"]), item["key"]
            assert item["after"] is not None
            assert item.get("redacted") is None  # the seed only creates: nothing was ever hidden afterwards
        elif item["kind"] == "edge":
            _, source, target = parse_edge_key(item["key"])
            assert edge_visible(principal, source, target), item["key"]
    assert keys["node"] == len(visible(principal))
    assert keys["edge"] == sum(1 for e in SEED["edges"] if edge_visible(principal, e["source"], e["target"]))


@mode_parameters
@who_parameters
async def test_describe_model_counts_only_what_the_principal_may_see(matrix: Matrix, who: str, mode: str) -> None:
    async with matrix.client(who, mode) as client:
        value = await answer(client, "describe_model", {})

    principal = PRINCIPALS[who]
    assert value == matrix.call(who, "describe_model", {})
    nodes = Counter(NODES[n]["type"] for n in visible(principal))
    edges = Counter(e["type"] for e in SEED["edges"] if edge_visible(principal, e["source"], e["target"]))
    assert {t["name"]: t["count"] for t in value["node_types"] if t["count"]} == dict(nodes)
    assert {t["name"]: t["count"] for t in value["edge_types"] if t["count"]} == dict(edges)


# -- resources and completion -----------------------------------------------------------------------------------------
@mode_parameters
@who_parameters
async def test_resources_list_lists_every_visible_node_and_no_other(matrix: Matrix, who: str, mode: str) -> None:
    listed: list[str] = []
    async with matrix.client(who, mode) as client:
        cursor: str | None = None
        while True:
            page = await client.list_resources(cursor=cursor)
            listed += [str(r.uri) for r in page.resources]
            if (cursor := page.next_cursor) is None:
                break
            assert len(listed) < 10_000

    def everything(ctx: CallContext) -> list[str]:
        uris: list[str] = []
        cursor: str | None = None
        while True:
            entries, cursor = list_resources(ctx, cursor)
            uris += [e.uri or "" for e in entries]
            if cursor is None:
                return uris

    nodes = [uri.rsplit("/", 1)[1] for uri in listed if uri.startswith("canon://nodes/")]
    assert nodes == visible(PRINCIPALS[who])
    assert listed == matrix.run(who, everything)
    assert [uri for uri in listed if uri == uri_of(PUBLIC)]


@mode_parameters
@who_parameters
async def test_resources_read_of_a_node_needs_sight_of_it(matrix: Matrix, who: str, mode: str) -> None:
    read: dict[str, str] = {}
    refused: dict[str, mcp.MCPError] = {}
    async with matrix.client(who, mode) as client:
        for node_id in PROBED:
            try:
                result = await client.read_resource(uri_of(node_id))
            except mcp.MCPError as exc:
                refused[node_id] = exc
                continue
            content = result.contents[0]
            assert isinstance(content, types.TextResourceContents)
            read[node_id] = content.text

    principal = PRINCIPALS[who]
    assert sorted(read) == sorted(n for n in PROBED if sees(principal, n))
    for node_id, text in read.items():
        assert json.loads(text) == matrix.call(who, "get_node", {"id": node_id})["node"]
    for node_id, error in refused.items():
        assert error.code == types.INVALID_PARAMS
        assert error.error.data == {"code": "forbidden", "target": uri_of(node_id)}


@mode_parameters
@who_parameters
async def test_the_changes_resource_shows_only_visible_changes(matrix: Matrix, who: str, mode: str) -> None:
    async with matrix.client(who, mode) as client:
        result = await client.read_resource(CHANGES_URI)

    content = result.contents[0]
    assert isinstance(content, types.TextResourceContents)
    value = json.loads(content.text)
    assert value == json.loads(matrix.run(who, lambda ctx: read_resource(ctx, CHANGES_URI)).text)
    principal = PRINCIPALS[who]
    for item in value["items"]:
        if item["kind"] == "node":
            assert sees(principal, item["key"])
        elif item["kind"] == "edge":
            assert edge_visible(principal, *parse_edge_key(item["key"])[1:])


COMPLETIONS = [("Service", "svc-"), ("Document", "doc-report"), ("Decision", "adr-00"), ("", "doc-")]


@mode_parameters
@who_parameters
async def test_completion_of_node_ids_offers_only_visible_ids(matrix: Matrix, who: str, mode: str) -> None:
    ref = types.ResourceTemplateReference(type="ref/resource", uri=NODE_TEMPLATE)
    async with matrix.client(who, mode) as client:
        got = [
            (await client.complete(ref, {"name": "id", "value": prefix}, {"type": node_type} if node_type else None))
            .completion for node_type, prefix in COMPLETIONS
        ]  # fmt: skip

    principal = PRINCIPALS[who]
    for (node_type, prefix), completion in zip(COMPLETIONS, got, strict=True):
        context = {"type": node_type} if node_type else {}
        values, total, more = matrix.run(who, lambda ctx, p=prefix, c=context: complete(ctx, NODE_TEMPLATE, "id", p, c))
        expected = [n for n in visible(principal) if n.startswith(prefix) and node_type in ("", NODES[n]["type"])]
        assert (completion.values, completion.total, bool(completion.has_more)) == (values, total, more)
        assert completion.total == len(expected)
        assert completion.values == expected[:100]


# -- stdio: the configured local principal ----------------------------------------------------------------------------
LOCAL_READER = Principal("pat-local", frozenset({"reader"}), frozenset({"payments"}))


@contextlib.asynccontextmanager
async def stdio(folder: Path, mode: str) -> AsyncGenerator[mcp.Client]:
    """`canon serve --stdio` launched by the SDK client in `folder`, as an MCP host launches it."""
    parameters = StdioServerParameters(command=sys.executable, args=["-m", "core.app.cli", "serve", "--stdio",
                                       "--log-level", "warning"], cwd=folder)  # fmt: skip
    with (folder / "stdio.log").open("a", encoding="utf-8") as errors:
        async with mcp.Client(stdio_client(parameters, errlog=errors), mode=mode) as client:  # pyright: ignore[reportArgumentType]
            assert client.protocol_version == (LEGACY if mode == "legacy" else MODERN)
            yield client


@pytest.fixture
def local_reader(seed_template: Path, tmp_path: Path) -> Path:
    """A folder with a store and a canon.toml naming a reader in group payments as the local principal."""
    copy_store(seed_template, tmp_path / "canon.db")
    (tmp_path / "canon.toml").write_text('[local]\nname = "pat-local"\nrole = "reader"\ngroups = ["payments"]\n',
                                         encoding="utf-8")  # fmt: skip
    return tmp_path


@mode_parameters
async def test_stdio_serves_the_configured_local_principal(local_reader: Path, mode: str) -> None:
    async with stdio(local_reader, mode) as client:
        listed = [t.name for t in (await client.list_tools()).tools]
        got = {node_id: await answer(client, "get_node", {"id": node_id}) for node_id in PROBED}
        found = await pages(client, "find_nodes", {"limit": 100})
        write = await answer(client, "upsert_node", {"id": "x", "type": "Team", "properties": {}})
        with pytest.raises(mcp.MCPError) as refused:
            await client.read_resource(uri_of(HIDDEN))
    done = run_canon("audit", "--json", "--limit", "500", cwd=local_reader)  # the server has exited: all written

    assert listed == READ_TOOLS
    for node_id, value in got.items():
        if sees(LOCAL_READER, node_id):
            assert value["node"]["id"] == node_id
        else:
            assert value["error"]["code"] == "forbidden"
            assert "pat-local may not read" in value["error"]["message"]
    assert [item["id"] for page in found for item in page["items"]] == visible(LOCAL_READER)
    assert write["error"]["code"] == "forbidden"
    assert refused.value.error.data == {"code": "forbidden", "target": uri_of(HIDDEN)}
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert {(r["principal"], r["surface"]) for r in records} == {("pat-local", "mcp-stdio")}
    calls = [(r["target"], r["outcome"]) for r in records[::-1] if r["action"] == "tools/call"]
    assert calls[: len(PROBED)] == [("get_node", "ok" if sees(LOCAL_READER, n) else "forbidden") for n in PROBED]
    assert ("upsert_node", "forbidden") in calls
    assert [(r["target"], r["outcome"]) for r in records if r["action"] == "resources/read"] == [
        (uri_of(HIDDEN), "forbidden")
    ]


@mode_parameters
async def test_stdio_without_configuration_serves_a_local_writer_not_an_admin(seed_template: Path, tmp_path: Path,
                                                                            mode: str) -> None:  # fmt: skip
    """What the committed .mcp.json gives an agent: reads and writes, not apply_model or the audit log."""
    copy_store(seed_template, tmp_path / "canon.db")
    async with stdio(tmp_path, mode) as client:
        listed = [t.name for t in (await client.list_tools()).tools]
        hidden = await answer(client, "get_node", {"id": HIDDEN})
        log = await client.call_tool("get_audit_log", {"limit": 5})

    assert listed == WRITER_TOOLS
    assert "apply_model" not in listed
    assert hidden["error"]["code"] == "forbidden"  # restricted: a writer is no admin
    assert log.is_error


@mode_parameters
async def test_stdio_serves_the_local_admin_when_the_configuration_says_so(seed_template: Path, tmp_path: Path,
                                                                         mode: str) -> None:  # fmt: skip
    copy_store(seed_template, tmp_path / "canon.db")
    (tmp_path / "canon.toml").write_text('[local]\nrole = "admin"\n', encoding="utf-8")
    async with stdio(tmp_path, mode) as client:
        listed = [t.name for t in (await client.list_tools()).tools]
        hidden = await answer(client, "get_node", {"id": HIDDEN})
        log = await answer(client, "get_audit_log", {"limit": 5})

    assert listed == TOOL_NAMES
    assert hidden["node"]["id"] == HIDDEN
    assert {(r["principal"], r["surface"]) for r in log["items"]} == {("local", "mcp-stdio")}


# -- subscriptions: 2026-07-28 listen and 2025-11-25 subscribe --------------------------------------------------------
HIDDEN_SERVICE = "svc-secrets-broker"  # restricted: group:security, group:platform, group:sre
A, IN, R, H = uri_of(PUBLIC), uri_of(INTERNAL), uri_of(BY_GROUP), uri_of(HIDDEN_SERVICE)
UNKNOWN = node_uri("Team", "team-nowhere")


@dataclass
class Watched:
    process: Process
    store: Path
    tokens: dict[str, str]

    def client(self, who: str, mode: str, **options: Any) -> contextlib.AbstractAsyncContextManager[mcp.Client]:
        principal = PRINCIPALS[who]
        return connect(self.process.url, mode, self.tokens[principal.name] if principal.authenticated else None,
                       **options)  # fmt: skip

    async def touch(self, uri: str) -> None:
        """Change a node as another process would: open the store file, commit, close."""

        def change() -> None:
            store = SQLiteStore.open(self.store, load_model())
            try:
                node = store.node(uri.rsplit("/", 1)[1])
                assert node is not None
                text = "description" if "description" in node.properties else "mission"  # free text, any value
                properties = dict(node.properties) | {text: f"{node.properties[text]} ({store.revision() + 1})"}
                result = store.commit([PutNode(dataclasses.replace(node, properties=properties))], principal="test")
                assert len(result.changes) == 1
            finally:
                store.close()

        await anyio.to_thread.run_sync(change)


@pytest.fixture(scope="module")
def watched(seed_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Watched]:
    """A server whose nodes the tests change (so not the matrix's)."""
    folder = tmp_path_factory.mktemp("watched")
    store = copy_store(seed_template, folder / "canon.db")
    tokens = tokens_for(folder)
    with serving(store, cwd=folder) as process:
        yield Watched(process, store, tokens)
        assert "Traceback" not in process.output(), process.output()


@who_parameters
async def test_listen_honours_only_the_subscriptions_the_caller_may_read(watched: Watched, who: str) -> None:
    requested = [A, IN, R, H, UNKNOWN, CHANGES_URI]
    async with watched.client(who, "auto") as client, client.listen(resource_subscriptions=requested) as listening:
        honored = listening.honored.resource_subscriptions

    principal = PRINCIPALS[who]
    readable = [uri for uri in requested[:4] if sees(principal, uri.rsplit("/", 1)[1])]
    assert honored == [*readable, CHANGES_URI]


async def _next_node_update(listening: Any) -> str:
    """The URI of the next node update on a listen stream (canon://changes updates come with every change)."""
    with anyio.fail_after(DEADLINE_S):
        while True:
            event = await anext(listening)
            if isinstance(event, ResourceUpdated) and event.uri != CHANGES_URI:
                return event.uri


@pytest.mark.parametrize(("who", "hears"), [("reader", A), ("reader-in-group", R)])
async def test_a_listener_hears_only_of_nodes_it_may_read(watched: Watched, who: str, hears: str) -> None:
    async with (
        watched.client(who, "auto") as client,
        client.listen(resource_subscriptions=[A, R, H]) as listening,
    ):
        await watched.touch(H)  # readable by neither
        await watched.touch(R)  # readable by the reader in group payments only
        await watched.touch(A)
        first = await _next_node_update(listening)

    assert first == hears  # updates of one stream arrive in order: anything changed before would be here first


async def subscribe(client: mcp.Client, uri: str) -> mcp.MCPError | None:
    """A 2025-11-25 resources/subscribe; the error refusing it, if it was refused."""
    try:
        await client.subscribe_resource(uri)  # pyright: ignore[reportDeprecated]
    except mcp.MCPError as exc:
        return exc
    return None


@pytest.mark.parametrize(
    ("who", "allowed"),
    [("anonymous", [A]), ("reader", [A, IN]), ("reader-in-group", [A, IN, R]), ("admin", [A, IN, R, H])],
)
async def test_legacy_subscribe_to_a_node_the_caller_may_not_read_is_refused(
    watched: Watched, who: str, allowed: list[str]
) -> None:
    refused: dict[str, mcp.MCPError | None] = {}
    async with watched.client(who, "legacy") as client:
        for uri in (A, IN, R, H):
            with pytest.warns(mcp.MCPDeprecationWarning):
                refused[uri] = await subscribe(client, uri)

    assert [uri for uri, error in refused.items() if error is None] == allowed
    for uri, error in refused.items():
        if error is not None:
            assert error.code == types.INVALID_PARAMS
            assert error.error.data == {"code": "forbidden", "target": uri}


@pytest.mark.parametrize(("who", "hears"), [("reader", A), ("reader-in-group", R)])
async def test_a_legacy_subscriber_hears_only_of_nodes_it_was_allowed_to_subscribe_to(
    watched: Watched, who: str, hears: str
) -> None:
    notifications = Notifications()
    try:
        async with watched.client(who, "legacy", message_handler=notifications) as client:
            for uri in (A, R):
                with pytest.warns(mcp.MCPDeprecationWarning):
                    await subscribe(client, uri)
            await watched.touch(H)
            await watched.touch(R)
            await watched.touch(A)
            first = await notifications.next_update()
    finally:
        notifications.close()

    assert first == hears
