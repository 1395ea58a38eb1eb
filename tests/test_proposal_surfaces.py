"""Proposals over the wire: an agent proposes over MCP, its own approval is refused over MCP, REST and GraphQL (the
rule is the core's, not a surface's), a reviewer approves over REST, and the agent reads the merge over MCP. A real
uvicorn server, the official MCP SDK client and plain HTTP, with bearer tokens."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import mcp_types as types
import pytest

from core.values.uris import path_of, proposal_uri
from tests.generators.conftest import live, open_copy, token
from tests.mcp.conftest import connect

pytestmark = pytest.mark.anyio
TEAM = "team-leadership"


async def test_the_author_cannot_approve_on_any_surface_and_a_reviewer_merges_over_rest(
    seed_template: Path, tmp_path: Path
) -> None:
    instance = open_copy(seed_template, tmp_path)
    # the author is in the reviewers group too: only the author rule stands between it and its own merge
    author = token(instance, "agent-7", "writer", "reviewers")
    reviewer = token(instance, "rita", "writer", "reviewers")
    try:
        with live(instance) as base:
            async with (
                connect(f"{base}/mcp", "auto", author) as mcp_client,
                httpx2.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {author}"}) as as_author,
                httpx2.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {reviewer}"}) as as_reviewer,
            ):
                operations = [{"op": "patch_node", "id": TEAM, "properties": {"mission": "Proposed."}}]
                arguments = {"title": "Mission", "rationale": "It changed.", "operations": operations}
                proposed = await mcp_client.call_tool("propose_changes", arguments)
                assert not proposed.is_error
                assert proposed.structured_content is not None
                id_ = proposed.structured_content["id"]

                own = await mcp_client.call_tool("review_proposal", {"id": id_, "decision": "approve"})
                assert own.is_error
                assert isinstance(own.content[0], types.TextContent)
                assert json.loads(own.content[0].text)["error"]["code"] == "forbidden"
                refused = await as_author.post(f"/api/proposals/{id_}/review", json={"decision": "approve"})
                assert refused.status_code == 403
                assert refused.headers["content-type"].startswith("application/problem+json")
                assert refused.json()["code"] == "forbidden"
                mutation = ('mutation($id: String!) { review_proposal(id: $id, decision: approve) '
                            '{ state } }')  # fmt: skip
                graphql = (await as_author.post("/graphql", json={"query": mutation, "variables": {"id": id_}})).json()
                assert graphql["errors"][0]["extensions"]["code"] == "FORBIDDEN"

                listed = (await as_reviewer.get("/api/proposals", params={"state": "open"})).json()
                assert [p["id"] for p in listed["items"]] == [id_]
                shown = (await as_reviewer.get(f"/api/resources/{path_of(proposal_uri(id_))}")).json()
                assert shown["diff"][0]["properties"]["mission"]["after"] == "Proposed."
                merged = await as_reviewer.post(f"/api/proposals/{id_}/review",
                                                 json={"decision": "approve", "comment": "Yes."})  # fmt: skip
                assert merged.status_code == 200, merged.text
                assert merged.json()["state"] == "merged"

                node = await mcp_client.call_tool("get_node", {"id": TEAM})
                assert node.structured_content is not None
                assert node.structured_content["node"]["properties"]["mission"] == "Proposed."
                assert node.structured_content["node"]["updated_by"] == "agent-7"
    finally:
        instance.close()
