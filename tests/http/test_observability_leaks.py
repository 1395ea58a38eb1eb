"""Nothing that must stay private reaches the metrics, the spans or the logs (JSON and access log): not a bearer
token, not an argument's value, not a hidden node's id, not a misspelt tool name a client sent."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import httpx2
import mcp
import pytest
from mcp.client.streamable_http import streamable_http_client

from core.ops.config import Config
from core.ops.logs import ACCESS, JsonFormatter, SessionIdFilter
from core.seam.instance import open_instance
from core.values.uris import node_uri
from tests.conftest import copy_store
from tests.generators.conftest import token
from tests.http.test_metrics import served
from tests.mcp.conftest import modern_request, serving, until
from tests.otel import exported

NEEDLE = "zebra-needle-4711"  # an argument value
MISSPELT = "get_node_needle_0815"  # a tool name no registry has


@pytest.mark.anyio
async def test_metrics_spans_and_logs_hold_no_token_argument_or_hidden_id(
    seed_template: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    folder = tmp_path / "store"
    folder.mkdir()
    config = Config(store=copy_store(seed_template, folder / "canon.db"), tokens=folder / "tokens.json")
    exporter = exported()
    instance = open_instance(dataclasses.replace(config, tracing=True, access_log=True, log_format="json"))
    caplog.set_level(logging.INFO, logger=ACCESS)
    caplog.set_level(logging.DEBUG, logger="canon")
    try:
        hidden = next(n for n in instance.store.iter_nodes() if n.visibility == "restricted")
        secret = token(instance, "root", "admin")
        bad = "canon_not_a_token_9f3e"
        admin = {"Authorization": f"Bearer {secret}"}
        exporter.clear()
        async with served(instance) as http:
            for arguments in ({"id": hidden.id}, {"text": NEEDLE, "limit": 3}):
                name = "get_node" if "id" in arguments else "find_nodes"
                for extra in (admin, {}):
                    headers, body = modern_request("tools/call", {"name": name, "arguments": arguments})
                    assert (await http.post("/mcp", headers={**headers, **extra}, json=body)).status_code == 200
            headers, body = modern_request("tools/call", {"name": MISSPELT, "arguments": {"id": hidden.id}})
            await http.post("/mcp", headers=headers, json=body)
            headers, body = modern_request("resources/read", {"uri": node_uri(hidden.type, hidden.id)})
            await http.post("/mcp", headers={**headers, **admin}, json=body)
            assert (await http.get(f"/api/nodes/{hidden.id}", headers=admin)).status_code == 200
            assert (await http.get(f"/api/nodes/{hidden.id}")).status_code in (403, 404)
            assert (await http.get(f"/api/nodes?text={NEEDLE}")).status_code in (200, 404)
            assert (await http.get("/api/nodes", headers={"Authorization": f"Bearer {bad}"})).status_code == 401
            query = {"query": f'{{ get_node(id: "{hidden.id}") {{ id }} }}'}
            await http.post("/graphql", json=query, headers=admin)
            metrics = (await http.get("/metrics")).text
    finally:
        instance.close()
    spans = json.dumps([{"name": s.name, **dict(s.attributes or {})} for s in exporter.get_finished_spans()])
    lines = [JsonFormatter().format(r) for r in caplog.records]
    access = [line for line in lines if '"logger": "canon.access"' in line]
    assert len(access) >= 10, "every request has its access line"
    assert 'tool="get_node"' in metrics, "the calls were counted"
    assert "tools/call get_node" in spans, "the calls were traced"
    for text, what in ((metrics, "metrics"), (spans, "spans"), ("\n".join(lines), "logs")):
        for needle in (secret, bad, NEEDLE, hidden.id, MISSPELT):
            assert needle not in text, f"the {what} hold {needle!r}"


@pytest.mark.anyio
async def test_the_json_log_of_a_served_mcp_session_holds_no_session_id(seed_template: Path, tmp_path: Path) -> None:
    store = copy_store(seed_template, tmp_path / "canon.db")
    (tmp_path / "canon.toml").write_text('[logging]\nformat = "json"\n', encoding="utf-8")
    sent: set[str] = set()

    async def remember(response: httpx2.Response) -> None:
        if session := response.headers.get("mcp-session-id"):
            sent.add(session)

    with serving(store, "--log-level", "info", cwd=tmp_path) as process:
        async with (
            httpx2.AsyncClient(event_hooks={"response": [remember]}, timeout=30) as http,
            mcp.Client(streamable_http_client(process.url, http_client=http), mode="legacy") as client,  # pyright: ignore[reportArgumentType]
        ):
            assert (await client.call_tool("describe_model", {})).is_error is False
        # the client's DELETE ends the session; the SDK logs that after answering it
        await until(lambda: any("Terminating session" in line for line in process.stderr))
        text = process.output()
    assert len(sent) == 1, "a 2025-11-25 client over HTTP had a session"
    records = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    mcp_lines = [r for r in records if r["logger"].startswith("mcp.")]
    assert any(SessionIdFilter.HIDDEN in r["message"] for r in mcp_lines), "the SDK logged the session, blanked"
    assert sent.pop() not in text
