"""The agent-task scenario of issue 29: an agent proposes a change over MCP, a reviewer approves it over REST, and the
agent hears it merged through a notification; the calls and bytes of each side, against a direct write.

    .venv/bin/python benchmarks/proposal_flow.py            # one run, a Markdown table
    .venv/bin/python benchmarks/proposal_flow.py --json     # and the raw figures

A real `canon serve --port 0` on a fresh seeded store, with `[proposals] review_types = ["Team"]` in its
`canon.toml`, and two bearer tokens: `agent` (writer) and `rita` (writer, group `reviewers`). The agent is the
official MCP SDK client (2026-07-28, as clients negotiate: `auto`); the reviewer is plain HTTP. Bytes are the HTTP
bodies each side receives (`Content-Length` or the streamed body, counted by an httpx response hook), calls the
HTTP requests each side makes (`subscriptions/listen` included; the SDK's connection set-up and the `tools/list`
it reads before a first call are counted apart).

The flow: the agent calls `patch_node` on a Team, which answers a proposal instead of writing; it listens to
`canon://proposals/{id}`; the reviewer reads the proposal over REST (`GET /api/proposals/{id}`) and approves it
(`POST /api/proposals/{id}/review`); the agent hears `notifications/resources/updated` and reads the node. The
baseline, measured in the same run on the same server: the same agent's direct `patch_node` of a Service (not
reviewed) and the `get_node` that reads it back. Then the reviewed write alone, twice: as above (a client that
declared no elicitation: one call), and from a second client with an elicitation callback that accepts (MCP
2026-07-28's input-required round, ADR 0062: the first answer asks, the SDK retries with the answer).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp
import mcp_types
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ResourceUpdated

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks.fanout_bench import _canon, _clean_env, serving  # noqa: E402  # pyright: ignore[reportPrivateUsage]

TEAM, SERVICE = "team-payments", "svc-checkout-api"
DEADLINE_S = 10.0


class Meter(httpx2.AsyncBaseTransport):
    """A transport that counts the requests made and the body bytes received through it, as they stream (a
    long-lived `subscriptions/listen` stream included)."""

    def __init__(self) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.calls = 0
        self.received = 0

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.calls += 1
        response = await self.inner.handle_async_request(request)
        return httpx2.Response(response.status_code, headers=response.headers, stream=_Counted(self, response),
                               extensions=response.extensions)  # fmt: skip

    async def aclose(self) -> None:
        await self.inner.aclose()

    def reading(self) -> tuple[int, int]:
        return self.calls, self.received


class _Counted(httpx2.AsyncByteStream):
    def __init__(self, meter: Meter, response: httpx2.Response) -> None:
        self.meter, self.response = meter, response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.response.aiter_raw():
            self.meter.received += len(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self.response.aclose()


def _token(folder: Path, store: Path, name: str, *extra: str) -> str:
    done = subprocess.run(_canon("token", "create", name, "--role", "writer", *extra, store=store), cwd=folder,
                          env=_clean_env(), capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    return done.stdout.strip()


def _since(meter: Meter, start: tuple[int, int]) -> dict[str, int]:
    calls, received = meter.reading()
    return {"calls": calls - start[0], "bytes": received - start[1]}


async def flow(base: str, agent: str, reviewer: str) -> dict[str, Any]:
    agent_meter, reviewer_meter = Meter(), Meter()
    async with (
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {agent}"}, transport=agent_meter, timeout=httpx2.Timeout(30, read=300)
        ) as http,  # fmt: skip
        mcp.Client(streamable_http_client(f"{base}/mcp", http_client=http), mode="auto") as client,  # pyright: ignore[reportArgumentType]
        httpx2.AsyncClient(
            base_url=base, headers={"Authorization": f"Bearer {reviewer}"}, transport=reviewer_meter
        ) as review,  # fmt: skip
    ):
        start = agent_meter.reading()
        await client.list_tools()  # what the SDK fetches before a first call, to check answers by their schemas
        listing = _since(agent_meter, start)
        # the baseline: a direct write of a type nobody reviews, and its read-back
        start, started = agent_meter.reading(), time.perf_counter()
        direct = await client.call_tool("patch_node", {"id": SERVICE, "properties": {"description": "Direct."}})
        assert direct.structured_content is not None
        assert "proposal" not in direct.structured_content
        await client.call_tool("get_node", {"id": SERVICE})
        baseline = _since(agent_meter, start) | {"ms": round((time.perf_counter() - started) * 1000, 1)}

        start, review_start, started = agent_meter.reading(), reviewer_meter.reading(), time.perf_counter()
        answer = await client.call_tool("patch_node", {"id": TEAM, "properties": {"mission": "Proposed."}})
        proposing = _since(agent_meter, start) | {"ms": round((time.perf_counter() - started) * 1000, 1)}
        assert answer.structured_content is not None
        id_ = answer.structured_content["proposal"]["id"]
        async with client.listen(resource_subscriptions=[f"canon://proposals/{id_}"]) as subscription:
            shown = await review.get(f"/api/proposals/{id_}")
            assert shown.json()["applies_cleanly"], shown.text
            merged = await review.post(f"/api/proposals/{id_}/review", json={"decision": "approve", "comment": "Yes."})
            assert merged.json()["state"] == "merged", merged.text
            with anyio.fail_after(DEADLINE_S):
                event = await anext(subscription)
            assert isinstance(event, ResourceUpdated)
            heard_ms = round((time.perf_counter() - started) * 1000, 1)
        node = await client.call_tool("get_node", {"id": TEAM})
        assert node.structured_content is not None
        assert node.structured_content["node"]["properties"]["mission"] == "Proposed."
        agent_figures = _since(agent_meter, start) | {"ms_to_merge_heard": heard_ms}
    return {
        "tools_list": listing,
        "baseline_direct_write": baseline,
        "agent": agent_figures,
        "reviewer": _since(reviewer_meter, review_start),
        "reviewed_write": proposing,
        "reviewed_write_asked": await asked_write(base, agent),
    }


async def asked_write(base: str, agent: str) -> dict[str, Any]:
    """The reviewed write from a client that asks its person (who accepts): its calls, bytes and time."""

    async def person(context: Any, params: Any) -> mcp_types.ElicitResult:
        return mcp_types.ElicitResult(action="accept", content={"title": "Asked", "rationale": "The person agreed."})

    meter = Meter()
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {agent}"}, transport=meter) as http,
        mcp.Client(
            streamable_http_client(f"{base}/mcp", http_client=http),
            mode="auto",  # pyright: ignore[reportArgumentType]
            elicitation_callback=person,
        ) as client,  # fmt: skip
    ):
        await client.list_tools()
        start, started = meter.reading(), time.perf_counter()
        answer = await client.call_tool("patch_node", {"id": TEAM, "properties": {"mission": "Asked."}})
        assert answer.structured_content is not None
        assert answer.structured_content["proposal"]["state"] == "open"
        return _since(meter, start) | {"ms": round((time.perf_counter() - started) * 1000, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the raw figures too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="canon-proposal-flow-") as tmp:
        folder = Path(tmp)
        store = folder / "canon.db"
        (folder / "canon.toml").write_text('[proposals]\nreview_types = ["Team"]\n', encoding="utf-8")
        with serving(folder, store, []) as server:
            agent = _token(folder, store, "agent")
            reviewer = _token(folder, store, "rita", "--group", "reviewers")
            figures = anyio.run(flow, server.url.removesuffix("/mcp"), agent, reviewer)
    print("| side | calls | bytes received |\n|---|---:|---:|")
    for side in ("tools_list", "baseline_direct_write", "agent", "reviewer", "reviewed_write", "reviewed_write_asked"):
        print(f"| {side} | {figures[side]['calls']} | {figures[side]['bytes']:,} |")
    print(f"\nfrom the agent's write to the merge heard: {figures['agent']['ms_to_merge_heard']} ms")
    if args.json:
        print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
