"""The review policy over the wire, on both backends: every write tool, called over MCP (the official SDK client, which
checks the answer against the tool's output schema) and over REST by a writer who may not write Teams directly,
answers the proposal it made and writes nothing; then the agent's flow: it listens to its proposal's resource over
MCP, a reviewer approves the proposal over REST, and the agent hears of the merge and reads the merged node."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client.subscriptions import ResourceUpdated

from core.ops.config import Config
from core.seam.instance import open_instance
from core.values.uris import proposal_uri
from tests.conftest import FASTPATH
from tests.generators.conftest import live, token
from tests.mcp.conftest import DEADLINE_S, connect
from tests.test_review_policy import TEAM, WRITES

pytestmark = [pytest.mark.anyio, pytest.mark.both_backends]


def _rest(tool: str, args: dict[str, Any]) -> tuple[str, str, dict[str, Any] | None, dict[str, Any] | None]:
    """The method, path, JSON body and query of `tool`'s REST route for `args`."""
    args = copy.deepcopy(args)
    if tool in ("upsert_node", "patch_node", "delete_node"):
        path = f"/api/nodes/{args.pop('id')}"
    elif tool in ("upsert_edge", "delete_edge"):
        path = f"/api/edges/{args.pop('type')}/{args.pop('source')}/{args.pop('target')}"
    else:
        path = "/api/batch"
    method = {"upsert_node": "PUT", "patch_node": "PATCH", "delete_node": "DELETE", "upsert_edge": "PUT",
              "delete_edge": "DELETE", "write_batch": "POST"}[tool]  # fmt: skip
    if method == "DELETE":
        return method, path, None, {k: str(v).lower() for k, v in args.items()}
    return method, path, args, None


async def test_every_write_tool_over_mcp_and_rest_answers_a_proposal_and_the_agent_hears_it_merged(
    seeded_location: str | Path, tmp_path: Path
) -> None:
    config = Config(store=seeded_location, review_types=("Team", "owns"), mcp_fastpath=FASTPATH,
                    tokens=tmp_path / "tokens.json")  # fmt: skip
    instance = open_instance(config)
    agent, reviewer = token(instance, "agent-7", "writer"), token(instance, "rita", "writer", "reviewers")
    try:
        before = instance.store.revision()
        with live(instance) as base:
            async with (
                connect(f"{base}/mcp", "auto", agent) as mcp_client,
                httpx2.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {agent}"}) as as_agent,
                httpx2.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {reviewer}"}) as as_reviewer,
            ):
                await mcp_client.list_tools()  # the SDK checks each answer against its tool's output schema
                made: dict[str, str] = {}
                for tool, args in WRITES.items():
                    over_mcp = await mcp_client.call_tool(tool, copy.deepcopy(args))
                    assert not over_mcp.is_error, (tool, over_mcp.content)
                    assert over_mcp.structured_content is not None
                    assert over_mcp.structured_content["proposal"]["state"] == "open"
                    method, path, body, query = _rest(tool, args)
                    over_rest = await as_agent.request(method, path, json=body, params=query)
                    assert over_rest.status_code == 200, (tool, over_rest.text)
                    assert over_rest.json()["proposal"]["state"] == "open"
                    assert over_rest.json()["proposal"]["id"] != over_mcp.structured_content["proposal"]["id"]
                    made[tool] = over_mcp.structured_content["proposal"]["id"]
                assert instance.store.revision() == before  # twelve writes, nothing written
                listed = (await as_reviewer.get("/api/proposals", params={"state": "open", "author": "agent-7"})).json()
                assert listed["total"] == 2 * len(WRITES)

                id_ = made["patch_node"]
                async with mcp_client.listen(resource_subscriptions=[proposal_uri(id_)]) as subscription:
                    merged = await as_reviewer.post(f"/api/proposals/{id_}/review",
                                                     json={"decision": "approve", "comment": "Yes."})  # fmt: skip
                    assert merged.status_code == 200, merged.text
                    with anyio.fail_after(DEADLINE_S):
                        event = await anext(subscription)
                    assert isinstance(event, ResourceUpdated)
                    assert event.uri == proposal_uri(id_)
                read = await mcp_client.call_tool("get_proposal", {"id": id_})
                assert read.structured_content is not None
                assert read.structured_content["proposal"]["state"] == "merged"
                node = await mcp_client.call_tool("get_node", {"id": TEAM})
                assert node.structured_content is not None
                assert node.structured_content["node"]["properties"]["mission"] == "Proposed."
    finally:
        instance.close()
