"""What a POST to `/mcp` must carry for the revision it speaks: canon serves 2025-11-25 and 2026-07-28 and no
other, refuses batches, and tells a request missing a piece what to send; the documented curl exchanges work."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from core.mcp.revisions import SUPPORTED_VERSIONS
from core.seam.instance import Instance
from tests.mcp.conftest import (
    DEADLINE_S,
    LEGACY,
    LEGACY_HEADERS,
    MODERN,
    asgi_http,
    envelope,
    initialize_body,
    modern_request,
)

pytestmark = pytest.mark.anyio
DOC = Path(__file__).parents[2] / "docs" / "surfaces" / "mcp.md"


async def _session(http: httpx2.AsyncClient, version: str = LEGACY) -> tuple[str, dict[str, Any]]:
    body = initialize_body()
    body["params"]["protocolVersion"] = version
    answer = await http.post("/mcp", json=body, headers=LEGACY_HEADERS)
    assert answer.status_code == 200, answer.text
    return answer.headers["mcp-session-id"], answer.json()["result"]


def _legacy(session: str, version: str = LEGACY) -> dict[str, str]:
    return LEGACY_HEADERS | {"Mcp-Session-Id": session, "MCP-Protocol-Version": version}


async def test_initialize_in_an_older_revision_is_answered_with_2025_11_25_and_its_session_speaks_it(
    shared_instance: Instance,
) -> None:
    async with asgi_http(shared_instance) as http:
        for requested in ("2024-11-05", "2025-03-26", "2025-06-18", "2099-01-01"):
            session, result = await _session(http, requested)
            listed = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                                     headers=_legacy(session))  # fmt: skip

            assert result["protocolVersion"] == LEGACY, requested
            assert listed.json()["result"]["tools"], requested


async def test_a_request_in_an_unserved_revision_is_refused_with_both_revisions_listed(
    shared_instance: Instance,
) -> None:
    answers: dict[str, httpx2.Response] = {}
    async with asgi_http(shared_instance) as http:
        session, _ = await _session(http)
        for older in ("2024-11-05", "2025-03-26", "2025-06-18"):  # a session request naming an older revision
            answers[older] = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                                             headers=_legacy(session, older))  # fmt: skip
        headers, body = modern_request("tools/list")
        body["params"]["_meta"] = envelope("1900-01-01")
        answers["1900-01-01"] = await http.post("/mcp", json=body, headers=headers | {"MCP-Protocol-Version":
                                                                                     "1900-01-01"})  # fmt: skip
        body["params"]["_meta"] = envelope(LEGACY)  # 2025-11-25 is negotiated by initialize, never per request
        answers[LEGACY] = await http.post("/mcp", json=body, headers=headers | {"MCP-Protocol-Version": LEGACY})
        stream = _legacy(session, "2025-06-18") | {"Accept": "text/event-stream"}
        with anyio.fail_after(DEADLINE_S):  # served as a stream, it would never end
            streams = [await http.get("/mcp", headers=stream), await http.delete("/mcp", headers=stream)]
        ended = await http.delete("/mcp", headers=_legacy(session))

    for requested, answer in answers.items():
        assert answer.status_code == 400, requested
        error = answer.json()["error"]
        assert error["code"] == -32022, requested
        assert error["data"] == {"supported": SUPPORTED_VERSIONS, "requested": requested}
    for refused in streams:  # a GET stream or a DELETE of the session, naming an older revision
        assert refused.status_code == 400
        assert refused.json()["error"]["data"] == {"supported": SUPPORTED_VERSIONS, "requested": "2025-06-18"}
    assert ended.status_code == 200  # the refused DELETE ended nothing


async def test_a_batch_is_an_invalid_request_in_either_revision(shared_instance: Instance) -> None:
    headers, modern = modern_request("tools/list")
    async with asgi_http(shared_instance) as http:
        answers = [await http.post("/mcp", json=[initialize_body()], headers=LEGACY_HEADERS),
                   await http.post("/mcp", json=[modern, modern], headers=headers)]  # fmt: skip

    for answer in answers:
        assert answer.status_code == 400
        assert answer.json() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": (
            "JSON-RPC batches are not part of MCP 2025-11-25 or 2026-07-28: send each request as a message of its "
            "own.")}}  # fmt: skip


async def test_a_2026_07_28_request_missing_a_header_is_told_which_one_to_send(shared_instance: Instance) -> None:
    headers, body = modern_request("tools/call", {"name": "describe_model", "arguments": {}})
    cases = {
        "MCP-Protocol-Version": ({k: v for k, v in headers.items() if k != "MCP-Protocol-Version"},
                                 "Missing the MCP-Protocol-Version header"),
        "Mcp-Method": ({k: v for k, v in headers.items() if k != "Mcp-Method"},
                       "Missing the Mcp-Method header: send Mcp-Method: tools/call"),
        "Mcp-Name": ({k: v for k, v in headers.items() if k != "Mcp-Name"},
                     "Missing the Mcp-Name header: send Mcp-Name: describe_model"),
        "a wrong Mcp-Name": (headers | {"Mcp-Name": "get_node"},
                             "The Mcp-Name header says 'get_node' but the body says 'describe_model'"),
    }  # fmt: skip
    disagreeing = {**body, "params": {**body["params"], "_meta": envelope("1900-01-01")}}
    async with asgi_http(shared_instance) as http:
        answers = {case: await http.post("/mcp", json=body, headers=sent) for case, (sent, _) in cases.items()}
        # the header and params._meta disagree: a mismatch first, as the specification's ladder orders it
        mismatch = await http.post("/mcp", json=disagreeing, headers=headers)

    for case, (_, told) in cases.items():
        assert answers[case].status_code == 400, case
        error = answers[case].json()["error"]
        assert (error["code"], error["message"][: len(told)]) == (-32020, told), case
    assert (mismatch.status_code, mismatch.json()["error"]["code"]) == (400, -32020)
    assert "MCP-Protocol-Version: 2026-07-28, Mcp-Method: tools/call and Mcp-Name" in answers[
        "MCP-Protocol-Version"].json()["error"]["message"]  # fmt: skip


async def test_a_request_of_neither_revision_is_told_how_each_starts(shared_instance: Instance) -> None:
    async with asgi_http(shared_instance) as http:
        answer = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 7, "method": "tools/list"},
                                 headers=LEGACY_HEADERS)  # fmt: skip

    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == -32600
    assert all(part in error["message"] for part in ("initialize", "Mcp-Session-Id", "params._meta", MODERN))
    assert answer.json()["id"] == 7


async def test_the_documented_curl_exchanges_work_as_written(shared_instance: Instance) -> None:
    section = DOC.read_text(encoding="utf-8").split("### The exchange over HTTP", 1)[1].split("\n## ", 1)[0]
    scripts = re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)
    assert len(scripts) == 2  # one per revision
    async with asgi_http(shared_instance) as http:
        for script in scripts:
            session = ""
            for command in script.replace("\\\n", " ").strip().splitlines():
                words = shlex.split(command.replace("$SESSION", session))
                assert words[:2] in (["curl", "-s"], ["curl", "-si"])
                assert words[2] == "http://127.0.0.1:8000/mcp"
                sent = dict(words[i + 1].split(": ", 1) for i, word in enumerate(words) if word == "-H")
                assert words[-2] == "-d"
                answer = await http.post("/mcp", content=words[-1].encode(), headers=sent)
                assert answer.status_code in (200, 202), (command, answer.text)
                session = answer.headers.get("mcp-session-id", session)
                if answer.status_code == 200:
                    assert "result" in answer.json(), (command, answer.text)
