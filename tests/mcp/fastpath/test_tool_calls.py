"""canon's own answers to 2026-07-28 `tools/call` over HTTP (`core.mcp.fastpath.calls`), on real uvicorn, 127.0.0.1.

Every call goes to two apps over the same store: canon's (`mcp_app(...)`) and the same app with the calls left
to the SDK's runner (`mcp_app(..., calls=False)`), the reference. The answers must be the same JSON with the same
status and content type. A spy on the SDK's session manager proves which path answered: canon's answers a call
the SDK would have run without the SDK seeing it; everything else reaches the SDK untouched, byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette

from core.dispatch.dispatcher import ToolResult
from core.dispatch.registry import Registry, ToolDefinition
from core.mcp.fastpath.calls import CallRoute, response_body
from core.mcp.revision_gate import RevisionGate
from core.mcp.server import DEFAULT_OPTIONS, ServeOptions, ToolCalls
from core.ops.config import Config
from core.seam.instance import Instance, open_instance
from core.values.errors import ConflictError
from tests.mcp.conftest import MODERN, copy_store, create_token, envelope, mcp_app
from tests.mcp.raw_http import Raw, served

pytestmark = pytest.mark.anyio

HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream",
           "mcp-protocol-version": MODERN, "mcp-method": "tools/call"}  # fmt: skip
Answer = tuple[int, str | None, bytes]


@pytest.fixture
def folder(seed_template: Path, tmp_path: Path) -> Path:
    copy_store(seed_template, tmp_path / "canon.db")
    return tmp_path


@pytest.fixture
def instance(folder: Path) -> Iterator[Instance]:
    opened = open_instance(Config(store=folder / "canon.db", tokens=folder / "canon-tokens.json"))
    yield opened
    opened.close()


@pytest.fixture
def sdk_requests(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The `Mcp-Method` of every request that reached the SDK's `/mcp` endpoint, on any app: its entrance is
    canon's `RevisionGate`, which answers the errors whose SDK wording misleads (the same on both apps)."""
    seen: list[bytes] = []
    original = RevisionGate.__call__

    async def spy(self: RevisionGate, scope: Any, receive: Any, send: Any) -> None:
        seen.append(dict(scope["headers"]).get(b"mcp-method", b""))
        await original(self, scope, receive, send)

    monkeypatch.setattr(RevisionGate, "__call__", spy)
    return seen


def call_body(name: str, arguments: Any = None, *, id_: Any = 1, meta: Any = None, **params: Any) -> bytes:
    body: dict[str, Any] = {"name": name, "_meta": envelope() if meta is None else meta, **params}
    if arguments is not None:
        body["arguments"] = arguments
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": body}).encode()


async def ask(port: int, body: bytes | None, headers: dict[str, str], extra: list[tuple[str, str]] = []) -> Answer:  # noqa: B006
    raw = await Raw.connect(port)
    try:
        await raw.request(body, headers, extra=extra)
        status, head = await raw.head()
        return status, head.get("content-type"), await raw.body()
    finally:
        await raw.aclose()


def headers_for(name: str, token: str | None = None) -> dict[str, str]:
    auth = {"authorization": f"Bearer {token}"} if token is not None else {}
    return {**HEADERS, "mcp-name": name, **auth}


def apps(instance: Instance, options: ServeOptions = DEFAULT_OPTIONS) -> tuple[Starlette, Starlette]:
    """canon's app and the reference (tools/call through the SDK's runner)."""
    return mcp_app(instance, options), mcp_app(instance, options, calls=False)


# -- the same answers ------------------------------------------------------------------------------------------------
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "get_node": ("get_node", {"id": "team-payments"}),
    "get_node, an internal node": ("get_node", {"id": "person-ingrid-halvorsen"}),
    "get_node, a restricted node": ("get_node", {"id": "svc-fraud-scoring"}),
    "get_node, no such node (an error result)": ("get_node", {"id": "team-nope"}),
    "get_node, invalid arguments (an error result)": ("get_node", {"id": 7, "extra": True}),
    "get_neighbors, a lone surrogate in the id (an error result)": ("get_neighbors", {"id": "team-\ud800"}),
    "find_nodes, text": ("find_nodes", {"text": "payments"}),
    "find_nodes, a property filter and a page": ("find_nodes", {"type": "Person", "limit": 2}),
    "get_neighbors, depth 2": ("get_neighbors", {"id": "team-payments", "depth": 2}),
    "find_paths": ("find_paths", {"source": "team-payments", "target": "team-leadership", "max_depth": 4}),
    "query_graph": (
        "query_graph",
        {"match": [{"node": "t", "id": "team-payments"}, {"edge": "owns", "from": "t", "to": "s"}]},
    ),
    "describe_model": ("describe_model", {}),
    "get_changes": ("get_changes", {"since": 0, "limit": 3}),
    "upsert_node, a stale revision (a conflict, nothing written)": (
        "upsert_node",
        {
            "type": "Team",
            "id": "team-payments",
            "properties": {"name": "Payments", "slug": "payments"},
            "expected_revision": 1,
        },
    ),
}


@pytest.mark.parametrize("who", ["anonymous", "reader", "admin"])
async def test_every_kind_of_call_is_answered_as_the_sdk_answers_it_without_the_sdk(
    instance: Instance, folder: Path, sdk_requests: list[bytes], who: str
) -> None:
    token = None if who == "anonymous" else create_token(folder, f"t-{who}", who)
    ours, theirs = apps(instance)
    answers: dict[str, tuple[Answer, Answer]] = {}
    async with served(ours) as fast, served(theirs) as reference:
        for case, (name, arguments) in CALLS.items():
            body, headers = call_body(name, arguments, id_=case), headers_for(name, token)
            answers[case] = (await ask(fast.port, body, headers), await ask(reference.port, body, headers))
            assert sdk_requests == [b"tools/call"] * len(answers), f"{case}: canon's path let the SDK answer"

    for case, ((status, kind, mine), (sdk_status, sdk_kind, sdk)) in answers.items():
        assert (status, kind) == (sdk_status, sdk_kind) == (200, "application/json"), case
        assert json.loads(mine) == json.loads(sdk), case
    results = {case: json.loads(mine)["result"] for case, ((_, _, mine), _) in answers.items()}
    assert not results["get_node"]["isError"]
    refused = json.loads(results["get_neighbors, a lone surrogate in the id (an error result)"]["content"][0]["text"])
    assert (refused["error"]["code"], refused["error"]["problems"][0]["pointer"]) == ("invalid_arguments", "/id")
    assert results["get_node"]["structuredContent"]["node"]["id"] == "team-payments"
    assert results["get_node, no such node (an error result)"]["isError"]
    assert results["upsert_node, a stale revision (a conflict, nothing written)"]["isError"]
    hidden = results["get_node, a restricted node"]
    assert hidden["isError"] == (who != "admin")  # the caller's sight applies on canon's path too


async def test_a_successful_write_is_committed_and_answered_with_the_new_revision(
    instance: Instance, folder: Path, sdk_requests: list[bytes]
) -> None:
    token = create_token(folder, "writer", "writer")
    before = instance.store.revision()
    template = instance.store.node("team-payments")
    assert template is not None
    properties = {**template.properties, "name": "Calls", "slug": "calls"}
    node = {"type": "Team", "id": "team-calls", "properties": properties}
    async with served(apps(instance)[0]) as fast:
        status, kind, body = await ask(fast.port, call_body("upsert_node", node), headers_for("upsert_node", token))

    assert (status, kind, sdk_requests) == (200, "application/json", [])
    result = json.loads(body)["result"]
    assert not result["isError"], result
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    assert instance.store.revision() == before + 1
    stored = instance.store.node("team-calls")
    assert stored is not None
    assert stored.properties["name"] == "Calls"


async def test_a_prefixed_tool_name_is_answered_by_canon_as_by_the_sdk(instance: Instance,
                                                                       sdk_requests: list[bytes]) -> None:  # fmt: skip
    ours, theirs = apps(instance, ServeOptions(prefix="canon_"))
    body, headers = call_body("canon_get_node", {"id": "team-payments"}), headers_for("canon_get_node")
    async with served(ours) as fast, served(theirs) as reference:
        mine = await ask(fast.port, body, headers)
        assert sdk_requests == []
        sdk = await ask(reference.port, body, headers)

    assert mine[:2] == sdk[:2] == (200, "application/json")
    assert json.loads(mine[2]) == json.loads(sdk[2])
    assert not json.loads(mine[2])["result"]["isError"]


async def test_a_tool_that_raises_is_answered_as_the_sdk_answers_it(instance: Instance, monkeypatch: pytest.MonkeyPatch,
                                                                    sdk_requests: list[bytes]) -> None:  # fmt: skip
    def broken(ctx: Any, args: Any) -> Any:
        raise RuntimeError("a bug in a handler")

    monkeypatch.setitem(instance.dispatcher.handlers, "describe_model", broken)  # pyright: ignore[reportArgumentType]
    ours, theirs = apps(instance)
    body, headers = call_body("describe_model", {}), headers_for("describe_model")
    async with served(ours) as fast, served(theirs) as reference:
        mine = await ask(fast.port, body, headers)
        assert sdk_requests == []
        sdk = await ask(reference.port, body, headers)

    assert mine == sdk
    assert json.loads(mine[2])["error"] == {"code": -32603, "message": "Internal server error"}


def test_the_answer_is_compact_utf8_json_with_the_text_copy_equal_to_the_structured_content() -> None:
    result = ToolResult("get_node", {"node": {"id": "n", "name": "Zoë ⚙", "n": 1.5}})
    body = response_body("r-1", result, b'{"k":1}')
    assert "Zoë ⚙".encode() in body
    answer = json.loads(body)
    text = json.dumps(result.as_json(), separators=(",", ":"), ensure_ascii=False)
    assert answer == {"jsonrpc": "2.0", "id": "r-1", "result": {
        "content": [{"type": "text", "text": text}], "structuredContent": result.as_json(), "isError": False,
        "resultType": "complete", "_meta": {"k": 1}}}  # fmt: skip

    failed = response_body(7, ToolResult("get_node", None, ConflictError("n", expected=1, actual=2)), b"{}")
    error = json.loads(failed)["result"]
    assert error["isError"]
    assert "structuredContent" not in error
    assert json.loads(error["content"][0]["text"])["error"]["code"] == "conflict"


# -- everything else is the SDK's ------------------------------------------------------------------------------------
_GOOD = call_body("get_node", {"id": "team-payments"})
_NAMED = headers_for("get_node")
BAD_REQUESTS: dict[str, tuple[bytes | None, dict[str, str], list[tuple[str, str]]]] = {
    "an unknown tool": (call_body("no_such_tool", {}), headers_for("no_such_tool"), []),
    "arguments not an object": (call_body("get_node", [1]), _NAMED, []),
    "no name": (
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"_meta": envelope()}}).encode(),
        _NAMED,
        [],
    ),
    "Mcp-Name not the body's name": (_GOOD, headers_for("find_nodes"), []),
    "no Mcp-Name": (_GOOD, HEADERS, []),
    "accept event stream only": (_GOOD, {**_NAMED, "accept": "text/event-stream"}, []),
    "no id (a notification)": (
        json.dumps(
            {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "get_node", "_meta": envelope()}}
        ).encode(),
        _NAMED,
        [],
    ),
    "a null id": (call_body("get_node", {"id": "team-payments"}, id_=None), _NAMED, []),
    "no _meta": (call_body("get_node", {"id": "team-payments"}, meta={}), _NAMED, []),
    "an unsupported version": (
        call_body("get_node", {}, meta={**envelope(), "io.modelcontextprotocol/protocolVersion": "1900-01-01"}),
        {**_NAMED, "mcp-protocol-version": "1900-01-01"},
        [],
    ),
    "the body's method is not the header's": (_GOOD, {**_NAMED, "mcp-method": "tools/list"}, []),
    "Mcp-Method twice": (_GOOD, _NAMED, [("mcp-method", "tools/call")]),
    "a 2025-11-25 version header": (_GOOD, {**_NAMED, "mcp-protocol-version": "2025-11-25"}, []),
    "not JSON": (b"{nope", _NAMED, []),
    "NaN in the arguments (not JSON)": (_GOOD.replace(b'"team-payments"', b"NaN"), _NAMED, []),
    "a batch": (b"[" + _GOOD + b"]", _NAMED, []),
    "wrong content type": (_GOOD, {**_NAMED, "content-type": "text/plain"}, []),
    "a foreign Origin": (_GOOD, {**_NAMED, "origin": "http://evil.example"}, []),
    "a foreign Host": (_GOOD, {**_NAMED, "host": "evil.example"}, []),
    "a declared length over the limit": (None, {**_NAMED, "content-length": str(2 * 1024 * 1024)}, []),
    "a chunked body over the limit": (
        b'{"x":"' + b"x" * (1024 * 1024) + b'"}',
        {**_NAMED, "transfer-encoding": "chunked"},
        [],
    ),
}


@pytest.mark.parametrize("case", BAD_REQUESTS)
async def test_a_request_canon_does_not_answer_reaches_the_sdk_and_is_answered_byte_for_byte_as_before(
    instance: Instance, sdk_requests: list[bytes], case: str
) -> None:
    body, headers, extra = BAD_REQUESTS[case]
    ours, theirs = apps(instance)
    async with served(ours) as fast, served(theirs) as reference:
        mine = await ask(fast.port, body, headers, extra)
        reached = len(sdk_requests)
        sdk = await ask(reference.port, body, headers, extra)

    assert mine == sdk
    assert mine[0] != 200 or b'"error"' in mine[2] or b'"isError":true' in mine[2]
    refused_by_the_host = ("a foreign Origin", "a foreign Host", "a declared length over the limit",
                           "a chunked body over the limit")  # core.http.admission, before any route  # fmt: skip
    if case not in refused_by_the_host:
        assert reached == 1, "the request never reached the SDK"


def test_a_tool_whose_schema_declares_mcp_headers_is_left_to_the_sdk(instance: Instance) -> None:
    class Declaring(ToolCalls):
        def header_schema(self, tool: ToolDefinition, snapshot: Any = None) -> Any:
            return {"type": "object", "properties": {"id": {"type": "string", "x-mcp-header": "Id"}}}

    calls = ToolCalls(lambda: instance.snapshot, "mcp-http", "")
    declaring = Declaring(lambda: instance.snapshot, "mcp-http", "")
    route, left = (CallRoute(_refuse, c, server_info={}) for c in (calls, declaring))
    params = {"name": "get_node", "arguments": {"id": "team-payments"}}
    assert route.takes(params) is not None
    assert left.takes(params) is None


async def test_a_call_canon_answers_looks_its_tool_up_in_the_registry_once(
    instance: Instance, sdk_requests: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    looked_up: list[str] = []
    original = Registry.find

    def spy(self: Registry, name: str) -> ToolDefinition | None:
        looked_up.append(name)
        return original(self, name)

    async with served(mcp_app(instance)) as server:
        body, headers = call_body("get_node", {"id": "team-payments"}), headers_for("get_node")
        first = await ask(server.port, body, headers)  # builds the registry's caches (validators, defaults) once
        monkeypatch.setattr(Registry, "find", spy)
        again = await ask(server.port, body, headers)

    assert (again, looked_up, sdk_requests) == (first, ["get_node"], [])


async def _refuse(scope: Any, receive: Any, send: Any) -> None:
    raise AssertionError("not called")
