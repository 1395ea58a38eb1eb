"""MCP Inspector 2.12 (its CLI, on TypeScript SDK v2) against canon over stdio, in the 2026-07-28 ("modern") era.

The Inspector launches exactly what `.mcp.json` tells an MCP client to launch (its command and args, from the
repository root), as an editor or desktop client would. The store is a temporary one, passed to the server
through the Inspector's `-e`, so the repository root gets no canon.db. In the modern era there is no
`initialize`: each request carries its protocol version in `_meta`, and results carry the server's identity
in `_meta` and caching hints; the tests assert those, which a 2025-11-25 session would not have.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.clients._processes import run
from tests.clients.conftest import CLIENTS, REPO, TOOLS, client_env

INSPECTOR = CLIENTS / "node_modules" / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" / "build"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
NODE_URI = "canon://nodes/Team/team-payments"


def _mcp_json_server() -> list[str]:
    """The command and arguments `.mcp.json` gives MCP clients for canon."""
    server = json.loads((REPO / ".mcp.json").read_text())["mcpServers"]["canon"]
    return [server["command"], *server["args"]]


def _inspect(node22: Path, tmp_path: Path, *method: str, strict: bool = False, admin: bool = False) -> dict[str, Any]:
    """Run one Inspector CLI method against canon as `.mcp.json` launches it; its JSON envelope: `result`, and with
    `strict` on tools/list, `schemaFindings` when the tool schemas have portability findings of any severity.
    `admin`: the local principal is made an admin by a configuration, as an operator would decide (the default is
    a writer)."""
    store = tmp_path / "canon.db"
    config: list[str | Path] = []
    if admin:
        (tmp_path / "canon.toml").write_text('[local]\nrole = "admin"\n', encoding="utf-8")
        config = ["-e", f"CANON_CONFIG={tmp_path / 'canon.toml'}"]
    repo_store_existed = (REPO / "canon.db").exists()
    command = [node22, INSPECTOR / "index.js", "--cli", "--protocol-era", "modern", "--format", "json", "-q",
               *(["--strict"] if strict else []), "--cwd", REPO, "-e", f"CANON_STORE={store}",
               *config, *method, "--", *_mcp_json_server()]  # fmt: skip
    finished = run(command, cwd=REPO, env=client_env(tmp_path / "home"), timeout=120)

    assert finished.returncode == 0, f"inspector exited {finished.returncode}: {finished.stdout}{finished.stderr}"
    assert store.exists(), "the server did not use the store CANON_STORE names"
    assert (REPO / "canon.db").exists() == repo_store_existed, "the server wrote a store into the repository root"
    envelope: dict[str, Any] = json.loads(finished.stdout)  # --format json: {"result": ...} or {"error": ...}
    assert "result" in envelope, f"inspector answered {envelope}"
    return envelope


@pytest.mark.slow
def test_inspector_lists_every_tool_with_portable_schemas_and_no_warning(node22: Path, tmp_path: Path) -> None:
    # --strict: exit 6 on an error-severity portability problem, and every finding (warnings too) in the envelope
    envelope = _inspect(node22, tmp_path, "--method", "tools/list", strict=True, admin=True)
    listed = envelope["result"]

    assert [tool["name"] for tool in listed["tools"]] == list(TOOLS)  # an admin by configuration sees them all
    assert all(tool["inputSchema"]["type"] == "object" and tool["outputSchema"] for tool in listed["tools"])
    assert envelope.get("schemaFindings", []) == []  # no type unions, untyped schemas or remote $refs


@pytest.mark.slow
def test_inspector_calls_get_node_in_the_modern_era(node22: Path, tmp_path: Path) -> None:
    called = _inspect(node22, tmp_path, "--method", "tools/call", "--tool-name", "get_node",
                      "--tool-arg", "id=team-payments")["result"]  # fmt: skip

    assert called["isError"] is False
    assert called["structuredContent"]["node"]["id"] == "team-payments"
    assert json.loads(called["content"][0]["text"]) == called["structuredContent"]
    assert called["_meta"][SERVER_INFO]["name"] == "canon"  # stamped on results only in the modern era


@pytest.mark.slow
def test_inspector_reads_a_node_resource_in_the_modern_era(node22: Path, tmp_path: Path) -> None:
    read = _inspect(node22, tmp_path, "--method", "resources/read", "--uri", NODE_URI)["result"]

    [content] = read["contents"]
    assert content["uri"] == NODE_URI
    assert content["mimeType"] == "application/json"
    assert json.loads(content["text"])["id"] == "team-payments"
    assert (read["cacheScope"], read["ttlMs"]) == ("private", 0)  # SEP-2549 caching hints: 2026-07-28 only
    assert read["_meta"][SERVER_INFO]["name"] == "canon"
