"""MCP 2026-07-28's input-required result for a write that waits for review (ADR 0062, `core.dispatch.confirm`), on
the wire: a real uvicorn server, on canon's own `tools/call` path and on the SDK's (`mcp_fastpath` on and off).

With the official SDK client (which runs the rounds itself, calling its elicitation callback): the person accepts,
and the proposal is made with their title and rationale; they decline, and nothing is written or proposed. A client
that declared no elicitation, and a 2025-11-25 client, get the proposal at once, as before. Raw JSON-RPC holds the
spec's details: the first answer's shape (no `requestState`, `serverInfo` stamped), a retry (a new id) without the
answer or with only keys canon did not ask is asked again, a `requestState` canon never minted is ignored, a
malformed answer is a named error, and what needs no person (a direct writer, an unreviewed type, an invalid write)
is answered at once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest

from core.dispatch.confirm import KEY
from core.ops.config import Config
from core.seam.instance import Instance, open_instance
from core.values.audit import AuditQuery
from tests.conftest import copy_store
from tests.generators.conftest import live, token
from tests.mcp.conftest import connect, modern_request
from tests.mcp.test_stdio import spawned

pytestmark = pytest.mark.anyio
TEAM = "team-payments"
PATCH = {"id": TEAM, "properties": {"mission": "Asked first."}}
ELICITING = {"elicitation": {"form": {}}}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=[True, False], ids=["canon-path", "sdk-path"])
def instance(request: pytest.FixtureRequest, seed_template: Path, tmp_path: Path) -> Iterator[Instance]:
    config = Config(store=copy_store(seed_template, tmp_path / "canon.db"), tokens=tmp_path / "tokens.json",
                    review_types=("Team",), mcp_fastpath=request.param)  # fmt: skip
    opened = open_instance(config)
    yield opened
    opened.close()


def _proposals(instance: Instance) -> list[tuple[str, str, str]]:
    rows = instance.store.rows("SELECT title, rationale, author FROM proposals ORDER BY created_at, id")
    return [(str(t), str(r), str(a)) for t, r, a in rows]


def _calls(instance: Instance, name: str) -> list[str]:
    audit = instance.snapshot.dispatcher.audit
    assert audit is not None
    audit.flush()
    records, _ = instance.store.audit_records(AuditQuery(principal=name), before=None, limit=100)
    return [r["outcome"] for r in reversed(records) if r["action"] == "tools/call"]


async def test_the_person_accepts_and_the_proposal_has_their_title_and_rationale(instance: Instance) -> None:
    asked: list[types.ElicitRequestParams] = []

    async def person(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"title": "Payments' mission", "rationale": "Rita said."})

    before = instance.store.revision()
    agent = token(instance, "agent-7", "writer")
    with live(instance) as base:
        async with connect(f"{base}/mcp", "auto", agent, elicitation_callback=person) as client:
            result = await client.call_tool("patch_node", PATCH)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    assert result.structured_content["proposal"]["state"] == "open"
    assert result.structured_content["changed"] is False
    (params,) = asked
    assert isinstance(params, types.ElicitRequestFormParams)
    assert all(part in params.message for part in ("Team", TEAM, "agent-7"))
    assert params.requested_schema["required"] == ["title", "rationale"]
    assert params.requested_schema["properties"]["title"]["default"] == f"patch_node: Node '{TEAM}'"
    assert _proposals(instance) == [("Payments' mission", "Rita said.", "agent-7")]
    assert instance.store.revision() == before
    assert _calls(instance, "agent-7") == ["asked", "ok"]  # two requests: the first asked, the retry proposed


async def test_the_person_declines_and_nothing_is_written_or_proposed(instance: Instance) -> None:
    async def person(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    before = instance.store.revision()
    with live(instance) as base:
        async with connect(f"{base}/mcp", "auto", token(instance, "agent-7", "writer"),
                           elicitation_callback=person) as client:  # fmt: skip
            result = await client.call_tool("write_batch", {"operations": [{"op": "patch_node", **PATCH}]})
    assert result.is_error
    assert isinstance(result.content[0], types.TextContent)
    assert '"code":"forbidden"' in result.content[0].text
    assert "declined submitting it for review: nothing was written or proposed" in result.content[0].text
    assert _proposals(instance) == []
    assert instance.store.revision() == before
    assert _calls(instance, "agent-7") == ["asked", "forbidden"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_client_that_cannot_ask_gets_the_proposal_at_once(instance: Instance, mode: str) -> None:
    """A 2026-07-28 client that declared no elicitation, and a 2025-11-25 client even with a callback."""
    called: list[object] = []

    async def person(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        called.append(params)
        return types.ElicitResult(action="decline")

    options = {"elicitation_callback": person} if mode == "legacy" else {}
    with live(instance) as base:
        async with connect(f"{base}/mcp", mode, token(instance, "agent-7", "writer"), **options) as client:
            result = await client.call_tool("patch_node", PATCH)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    assert result.structured_content["proposal"]["state"] == "open"
    assert called == []
    assert [title for title, _, _ in _proposals(instance)] == [f"patch_node: Node '{TEAM}'"]
    assert _calls(instance, "agent-7") == ["ok"]


# -- raw JSON-RPC: the spec's details --------------------------------------------------------------------------------
def _call(args: dict[str, Any], *, id_: int, tool: str = "patch_node", eliciting: bool = True,
          capabilities: dict[str, Any] | None = None,
          **extra: Any) -> tuple[dict[str, str], dict[str, Any]]:  # fmt: skip
    headers, body = modern_request("tools/call", {"name": tool, "arguments": args, **extra}, id_=id_)
    if eliciting or capabilities is not None:
        declared = ELICITING if capabilities is None else capabilities
        body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = declared
    return headers, body


async def _post(http: httpx2.AsyncClient, request: tuple[dict[str, str], dict[str, Any]]) -> dict[str, Any]:
    headers, body = request
    response = await http.post("/mcp", headers=headers, json=body)
    assert response.status_code in (200, 400), response.text
    answer: dict[str, Any] = response.json()
    assert answer["id"] == body["id"]
    return answer


async def test_on_the_wire_asked_again_until_answered_and_only_what_was_asked_counts(instance: Instance) -> None:
    agent = token(instance, "agent-7", "writer")
    accept = {"action": "accept", "content": {"title": "T", "rationale": "R"}}
    with live(instance) as base:
        async with httpx2.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {agent}"}) as http:
            first = (await _post(http, _call(PATCH, id_=1)))["result"]
            assert first["resultType"] == "input_required"
            assert set(first) == {"resultType", "inputRequests", "_meta"}  # no requestState: nothing to carry
            assert first["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "canon"
            (asked,) = first["inputRequests"].values()
            assert list(first["inputRequests"]) == [KEY]
            assert (asked["method"], asked["params"]["mode"]) == ("elicitation/create", "form")
            assert not {"ttlMs", "cacheScope", "isError", "requestState"} & set(first)

            for id_, responses in ((2, {}), (3, {"something_else": accept})):  # missing: asked again; extra: ignored
                again = (await _post(http, _call(PATCH, id_=id_, inputResponses=responses)))["result"]
                assert again["resultType"] == "input_required"
                assert again["inputRequests"] == first["inputRequests"]
            assert _proposals(instance) == []

            thin = {"action": "accept", "content": {"title": "T"}}
            named = (await _post(http, _call(PATCH, id_=4, inputResponses={KEY: thin})))["result"]
            assert named["isError"] is True
            assert "invalid_arguments" in named["content"][0]["text"]
            assert f"/inputResponses/{KEY}/content/rationale" in named["content"][0]["text"]
            malformed = await _post(http, _call(PATCH, id_=5, inputResponses={KEY: {"action": "maybe"}}))
            assert malformed["error"]["code"] == types.INVALID_PARAMS  # not an InputResponses object: a protocol error
            assert _proposals(instance) == []

            done = (await _post(http, _call(PATCH, id_=6, inputResponses={KEY: accept, "something_else": accept},
                                            requestState="not canon's")))["result"]  # fmt: skip
            assert done["resultType"] == "complete"
            assert done["isError"] is False
            assert done["structuredContent"]["proposal"]["state"] == "open"
            assert _proposals(instance) == [("T", "R", "agent-7")]


async def test_on_the_wire_what_needs_no_person_is_answered_at_once(instance: Instance) -> None:
    agent, admin = token(instance, "agent-7", "writer"), token(instance, "ada", "admin")
    service = {"id": "svc-refund-service", "properties": {"description": "Not reviewed."}}
    with live(instance) as base:
        async with (
            httpx2.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {agent}"}) as as_agent,
            httpx2.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {admin}"}) as as_admin,
        ):
            unreviewed = (await _post(as_agent, _call(service, id_=1)))["result"]
            assert (unreviewed["resultType"], unreviewed["structuredContent"]["changed"]) == ("complete", True)
            invalid = (await _post(as_agent, _call({"id": TEAM, "properties": {"mission": 7}}, id_=2)))["result"]
            assert (invalid["resultType"], invalid["isError"]) == ("complete", True)
            assert '"code":"invalid"' in invalid["content"][0]["text"]
            direct = (await _post(as_admin, _call(PATCH, id_=3)))["result"]
            assert (direct["resultType"], direct["structuredContent"]["changed"]) == ("complete", True)
            dry = (await _post(as_agent, _call({"operations": [{"op": "patch_node", **PATCH}], "dry_run": True},
                                               id_=4, tool="write_batch")))["result"]  # fmt: skip
            assert dry["resultType"] == "complete"
            unasked = (await _post(as_agent, _call(PATCH, id_=5, eliciting=False)))["result"]
            assert unasked["structuredContent"]["proposal"]["state"] == "open"
            url_only = (await _post(as_agent, _call(PATCH, id_=6, capabilities={"elicitation": {"url": {}}})))["result"]
            assert url_only["structuredContent"]["proposal"]["state"] == "open"  # no form: never sent a form
            empty = (await _post(as_agent, _call(PATCH, id_=7, capabilities={"elicitation": {}})))["result"]
            assert empty["resultType"] == "input_required"  # an empty elicitation means form
    assert [a for _, _, a in _proposals(instance)] == ["agent-7", "agent-7"]


@pytest.mark.parametrize("fastpath", ["1", "0"], ids=["canon-path", "sdk-path"])
def test_over_stdio_the_same_rounds(seed_template: Path, tmp_path: Path, fastpath: str) -> None:
    """`canon serve --stdio` (its principal a writer, not a direct one): asked, then the retry's accept proposes."""
    settings = tmp_path / "canon.toml"
    settings.write_text('[proposals]\nreview_types = ["Team"]\n', encoding="utf-8")
    store = copy_store(seed_template, tmp_path / "canon.db")
    command = ["-m", "core.app.cli", "--config", str(settings)]
    with spawned(command, store, tmp_path, {"CANON_MCP_FASTPATH": fastpath}) as stdio:
        first = stdio.ask(_call(PATCH, id_=1)[1])
        assert first["id"] == 1
        assert first["result"]["resultType"] == "input_required"
        assert list(first["result"]["inputRequests"]) == [KEY]
        accept = {"action": "accept", "content": {"title": "Over stdio", "rationale": "Asked."}}
        done = stdio.ask(_call(PATCH, id_=2, inputResponses={KEY: accept})[1])
        assert done["id"] == 2
        assert done["result"]["resultType"] == "complete"
        assert done["result"]["structuredContent"]["proposal"]["state"] == "open"
        unasked = stdio.ask(_call(PATCH, id_=3, eliciting=False)[1])
        assert unasked["result"]["structuredContent"]["proposal"]["state"] == "open"


HOSTILE_ANSWERS: list[Any] = [
    None, [], "accept", 7, {}, {"action": None}, {"action": "accept"}, {"action": "accept", "content": None},
    {"action": "accept", "content": {"title": 7, "rationale": "r"}},
    {"action": "accept", "content": {"title": "", "rationale": "r"}},
    {"action": "accept", "content": {"title": " ", "rationale": "r"}},
    {"action": "accept", "content": {"title": "t" * 201, "rationale": "r"}},
    {"action": "accept", "content": {"title": "t", "rationale": "r" * 4001}},
    {"action": "accept", "content": {"title": ["t"], "rationale": "r"}},
    {"action": "accept", "content": {"title": "nul\u0000", "rationale": "r"}},
    {"action": "decline", "content": {"title": "t", "rationale": "r"}},
    {"action": "accept", "content": {"title": "t", "rationale": "r", "extra": {"deep": [1, 2]}}},
]  # fmt: skip


async def test_hostile_answers_get_a_named_answer_never_a_server_error(instance: Instance) -> None:
    """Whatever a client puts under `canon_review`: a JSON-RPC -32602, a tool error naming it, a refusal, or (for an
    accepted answer whose title and rationale fit) the proposal; never an internal error, never a write."""
    agent = token(instance, "agent-7", "writer")
    before = instance.store.revision()
    with live(instance) as base:
        async with httpx2.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {agent}"}) as http:
            for id_, hostile in enumerate(HOSTILE_ANSWERS, start=1):
                answer = await _post(http, _call(PATCH, id_=id_, inputResponses={KEY: hostile}))
                if "error" in answer:
                    assert answer["error"]["code"] == types.INVALID_PARAMS, (hostile, answer)
                    continue
                result = answer["result"]
                assert result["resultType"] == "complete", (hostile, result)
                if result["isError"]:
                    code = json.loads(result["content"][0]["text"])["error"]["code"]
                    assert code in ("invalid_arguments", "forbidden"), (hostile, result)
                else:
                    assert result["structuredContent"]["proposal"]["state"] == "open", (hostile, result)
    assert instance.store.revision() == before
    assert _proposals(instance) == []  # none fit: a NUL is refused as in any argument
