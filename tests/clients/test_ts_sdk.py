"""The official TypeScript SDK client (1.32, protocol 2025-11-25) against canon, over stdio and over HTTP.

One run of ts_client.mjs per transport does the whole conversation (see the script); the tests below each
assert one thing a user of that client would notice. Over stdio the client launches `.mcp.json`'s command
from the repository root, with CANON_STORE naming a temporary store; over HTTP it talks to `canon serve`.

Subscriptions are proved without timing: the client subscribes to nodes A and B; the test changes A and the
client hears it; the client unsubscribes A; the test changes A, then B. Canon delivers updates in commit
order on one stream, so once B's update has arrived, an update of A would have arrived before it.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.clients._processes import outputs, start, stop
from tests.clients.conftest import CLIENTS, READ_TOOLS, REPO, WRITER_TOOLS, change_node, client_env, serving

SCRIPT = CLIENTS / "ts_client.mjs"
NODE_A, NODE_B = "canon://nodes/Team/team-payments", "canon://nodes/Team/team-billing"
UPDATED = "notifications/resources/updated"
INVALID_PARAMS = -32602


@dataclass(frozen=True)
class Conversation:
    """Everything ts_client.mjs printed, in order, and how it exited."""

    records: list[dict[str, Any]]
    returncode: int
    stderr: str
    transport: str = "stdio"

    def step(self, name: str) -> dict[str, Any]:
        [record] = [r for r in self.records if r.get("step") == name]
        return record

    def result(self, name: str) -> Any:
        record = self.step(name)
        assert record["ok"], f"{name} failed: {record['error']}"
        return record["result"]

    def updates_between(self, first_event: str, last_event: str | None) -> list[str]:
        """The URIs of resources/updated notifications heard after one event and before another."""
        events = [r.get("event") for r in self.records]
        start_at = events.index(first_event)
        end_at = events.index(last_event) if last_event else len(events)
        return [r["notification"]["params"]["uri"] for r in self.records[start_at:end_at]
                if r.get("notification", {}).get("method") == UPDATED]  # fmt: skip


def _converse(node22: Path, target: list[str], store: Path, home: Path) -> Conversation:
    """Run ts_client.mjs against `target`, committing to `store` when it says it is ready for a change."""
    env = client_env(home, CANON_STORE=str(store), TS_CLIENT_TIMEOUT_MS="60000")
    process = start([node22, SCRIPT, *target], cwd=REPO, env=env)
    stdout, stderr = outputs(process)
    records: list[dict[str, Any]] = []
    deadline = time.monotonic() + 90
    try:
        while (line := stdout.next(deadline)) is not None:
            record = json.loads(line)
            records.append(record)
            if record.get("event") == "subscribed":
                change_node(store, "team-payments", "Changed while subscribed.")
            elif record.get("event") == "unsubscribed":
                change_node(store, "team-payments", "Changed after unsubscribing.")
                change_node(store, "team-billing", "Changed to prove the stream still flows.")
        returncode = process.wait(timeout=max(0.0, deadline - time.monotonic()))
    finally:
        stop(process)
        stdout.close()
        stderr.close()
    return Conversation(records, returncode, stderr.text())


@pytest.fixture(scope="module", params=["stdio", "http"])
def conversation(
    request: pytest.FixtureRequest, node22: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Conversation]:
    workdir = tmp_path_factory.mktemp(f"ts-{request.param}")
    if request.param == "stdio":
        server = json.loads((REPO / ".mcp.json").read_text())["mcpServers"]["canon"]
        yield _converse(node22, ["stdio", server["command"], *server["args"]], workdir / "canon.db", workdir / "home")
    else:
        with serving(workdir) as served:
            yield dataclasses.replace(_converse(node22, ["http", served.url], served.store, workdir / "home"),
                                      transport="http")  # fmt: skip


@pytest.mark.slow
def test_ts_client_negotiates_2025_11_25_and_sees_canon(conversation: Conversation) -> None:
    initialized = conversation.result("initialize")

    assert initialized["protocolVersion"] == "2025-11-25"
    assert initialized["serverInfo"]["name"] == "canon"
    assert initialized["capabilities"]["resources"]["subscribe"] is True
    assert "completions" in initialized["capabilities"]


@pytest.mark.slow
def test_ts_client_lists_the_tools_its_principal_may_call(conversation: Conversation) -> None:
    # stdio runs as the local principal, a writer by default; HTTP without a token is the anonymous reader
    expected = WRITER_TOOLS if conversation.transport == "stdio" else READ_TOOLS
    assert [tool["name"] for tool in conversation.result("tools/list")["tools"]] == list(expected)


@pytest.mark.slow
def test_ts_client_gets_a_node_whose_structured_content_matches_the_output_schema(conversation: Conversation) -> None:
    # the SDK checks structuredContent against the tool's outputSchema and fails the call if it does not match
    called = conversation.result("tools/call get_node")

    assert not called.get("isError")
    assert called["structuredContent"]["node"]["id"] == "team-payments"
    assert json.loads(called["content"][0]["text"]) == called["structuredContent"]


@pytest.mark.slow
def test_ts_client_calling_an_unknown_tool_gets_a_json_rpc_invalid_params_error(conversation: Conversation) -> None:
    record = conversation.step("tools/call unknown tool")

    assert not record["ok"]
    assert record["error"]["code"] == INVALID_PARAMS


@pytest.mark.slow
def test_ts_client_lists_resources_and_reads_a_node(conversation: Conversation) -> None:
    listed = conversation.result("resources/list")
    [content] = conversation.result("resources/read")["contents"]

    uris = [resource["uri"] for resource in listed["resources"]]
    assert "canon://model" in uris
    assert any(uri.startswith("canon://nodes/") for uri in uris)
    assert listed["nextCursor"], "377 seeded nodes do not fit in one page"
    assert (content["uri"], content["mimeType"]) == (NODE_A, "application/json")
    assert json.loads(content["text"])["id"] == "team-payments"


@pytest.mark.slow
def test_ts_client_lists_the_node_template(conversation: Conversation) -> None:
    templates = conversation.result("resources/templates/list")["resourceTemplates"]

    assert "canon://nodes/{type}/{id}" in [t["uriTemplate"] for t in templates]


@pytest.mark.slow
def test_ts_client_completes_a_node_id_from_its_prefix(conversation: Conversation) -> None:
    completion = conversation.result("completion/complete id")["completion"]

    assert completion["values"] == ["team-payments"]
    assert completion["total"] == 1


@pytest.mark.slow
def test_ts_client_completing_an_argument_of_an_unknown_prompt_gets_invalid_params(conversation: Conversation) -> None:
    # The spec's error for an unknown prompt in completion/complete is -32602 (Invalid params);
    # -32002 is "resource not found", a resources/read error.
    record = conversation.step("completion/complete unknown prompt")

    assert not record["ok"]
    assert record["error"]["code"] == INVALID_PARAMS


@pytest.mark.slow
def test_ts_client_completion_error_for_an_unknown_prompt_names_the_prompt(conversation: Conversation) -> None:
    # The message is the feature here: one sentence naming the value the caller got wrong (STYLE "Errors").
    record = conversation.step("completion/complete unknown prompt")

    assert "no_such_prompt" in record["error"]["message"]


@pytest.mark.slow
def test_ts_client_hears_node_updates_until_it_unsubscribes(conversation: Conversation) -> None:
    assert conversation.returncode == 0, f"ts_client.mjs exited {conversation.returncode}: {conversation.stderr}"
    assert conversation.result("resources/subscribe A") == {}
    assert conversation.result("resources/unsubscribe A") == {}

    assert NODE_A in conversation.updates_between("subscribed", "unsubscribed")
    after = conversation.updates_between("unsubscribed", None)
    assert NODE_B in after, "the update of the node still subscribed never came"
    assert NODE_A not in after, "an update came for a node after unsubscribing from it"
