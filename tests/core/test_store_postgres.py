"""What only the PostgreSQL store does: the database refuses to change the audit log, the URL's password stays out
of messages, a database of a newer schema is refused, and a real `canon serve` runs on a database end to end. What
both backends share: tests/core/test_store.py (and every module marked `both_backends`)."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx2
import psycopg
import pytest

from core.lang.model import Model
from core.store import open_store
from core.store.postgres import SCHEMA_VERSION
from core.values.audit import AuditRecord
from core.values.errors import StoreError
from tests.conftest import run_canon
from tests.mcp.conftest import connect, serving
from tests.postgres_server import Server


@pytest.fixture
def database(postgres_server: Server) -> str:
    return postgres_server.new_database()


@pytest.mark.parametrize("statement", ["UPDATE audit SET outcome = 'ok'", "DELETE FROM audit", "TRUNCATE audit"])
def test_the_database_refuses_to_change_or_remove_audit_records(database: str, model: Model, statement: str) -> None:
    store = open_store(database, model)
    try:
        store.append_audit([AuditRecord("2026-12-01T00:00:00.000Z", "user:a", "rest", "tools/call", "get_node", "d",
                                        "denied", 1, 0.5)])  # fmt: skip
    finally:
        store.close()
    with psycopg.connect(database) as db, pytest.raises(psycopg.errors.RaiseException, match="append-only"):
        db.execute(statement)  # pyright: ignore[reportArgumentType, reportCallIssue]


def test_a_database_of_a_newer_schema_version_is_refused(database: str, model: Model) -> None:
    open_store(database, model).close()
    with psycopg.connect(database, autocommit=True) as db:
        db.execute("INSERT INTO canon_schema (version) VALUES (%s)", (SCHEMA_VERSION + 1,))
    with pytest.raises(StoreError, match="newer than this canon knows"):
        open_store(database, model)


def test_the_location_and_errors_never_show_the_password(model: Model, postgres_server: Server) -> None:
    url = "postgresql://canon:s3cret@127.0.0.1:1/nothing?connect_timeout=1"
    with pytest.raises(StoreError) as caught:
        open_store(url, model)
    assert "s3cret" not in str(caught.value)
    assert "***" in str(caught.value)


def test_canon_serve_on_a_database_writes_and_reads_over_mcp_and_rest(database: str, tmp_path: Path) -> None:
    """`canon --store postgresql://… serve`: a real uvicorn process on a free port seeds the new database, takes a
    write over MCP (the SDK client) and one over REST, and answers both on the other surface."""
    created = run_canon("--store", database, "token", "create", "op", "--role", "admin", cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip()
    team = {"slug": "pg", "name": "On PostgreSQL", "mission": "Serve from a database.", "area": "platform"}
    with serving(database, cwd=tmp_path) as process:

        async def over_mcp() -> tuple[dict[str, object], dict[str, object]]:
            async with connect(process.url, "auto", token) as client:
                written = await client.call_tool("upsert_node", {"id": "team-pg", "type": "Team", "properties": team})
                read = await client.call_tool("get_node", {"id": "team-rest"})
                assert written.structured_content is not None
                assert read.structured_content is not None
                return written.structured_content, read.structured_content

        with httpx2.Client(base_url=process.base, headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
            rest_team = {"type": "Team", "properties": {**team, "slug": "rest", "name": "Over REST"}}
            assert http.put("/api/nodes/team-rest", json=rest_team).status_code == 200
            written, read = anyio.run(over_mcp)
            over_rest = http.get("/api/nodes/team-pg")
        status = process.stop()
    assert written["created"] is True
    assert read["node"]["properties"]["name"] == "Over REST"  # pyright: ignore[reportIndexIssue]
    assert over_rest.status_code == 200
    assert over_rest.json()["node"]["properties"] == team
    assert status == 130  # stopped by SIGINT, as Ctrl-C stops it
    with psycopg.connect(database) as db:  # the writes are the database's
        rows = db.execute("SELECT id FROM nodes WHERE id IN ('team-pg', 'team-rest') ORDER BY id").fetchall()
    assert rows == [("team-pg",), ("team-rest",)]
