"""`canon store copy`: SQLite to PostgreSQL and back, losslessly (records, revisions, change log, audit log, model)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from core.dispatch import proposals
from core.lang.model import Model, default_seed_path
from core.store import Store, copy_store, open_existing_store, open_store
from core.store.interchange import export_graph, import_path
from core.values.audit import AuditQuery, AuditRecord
from core.values.errors import StoreError
from core.values.operations import DeleteNode, PutNode
from core.values.principal import LOCAL
from core.values.records import Node
from tests.conftest import run_canon
from tests.postgres_server import Server


def everything(store: Store) -> tuple[str, list[object], list[dict[str, object]], str, list[object]]:
    """What a copy must keep: the export, the whole change feed, the audit log, the recorded model and the
    proposals."""
    out = io.StringIO()
    export_graph(store, None, format="jsonl", out=out)
    audit, _ = store.audit_records(AuditQuery(), before=None, limit=10_000)
    found, _ = proposals.find(store, LOCAL)
    return out.getvalue(), store.changes(0, 1_000_000), audit, store.stored_model().canonical_json, list(found)


@pytest.fixture
def database(postgres_server: Server) -> str:
    return postgres_server.new_database()


def test_a_copy_to_postgresql_and_back_keeps_records_revisions_change_log_audit_and_model(
    tmp_path: Path, model: Model, postgres_server: Server
) -> None:
    source = open_store(tmp_path / "source.db", model)
    try:
        import_path(source, default_seed_path(), principal="test:seed")
        source.commit([PutNode(Node("team-x", "Team", {"slug": "x", "name": "X", "mission": "Ünïcode: ß → SS",
                                                       "area": "product"}))], principal="user:a")  # fmt: skip
        source.commit([DeleteNode("team-x")], principal="user:b")
        proposed = proposals.propose(source, LOCAL, [{"op": "patch_node", "id": "team-payments", "properties": {}}],
                                     "Kept", "A copy keeps proposals.")  # fmt: skip
        proposals.comment(source, LOCAL, proposed.id, "Ünïcode too.")
        source.append_audit([AuditRecord("2026-12-01T00:00:00.000Z", "user:a", "mcp-http", "tools/call", "put_node",
                                         "d1", "ok", 3, 2.25)])  # fmt: skip
        original = everything(source)
        assert [p.id for p in original[4]] == [proposed.id]
    finally:
        source.close()

    database = postgres_server.new_database()
    copy_store(tmp_path / "source.db", database)
    on_postgres = open_existing_store(database)
    try:
        assert everything(on_postgres) == original
    finally:
        on_postgres.close()

    copy_store(database, tmp_path / "back.db")
    back = open_existing_store(tmp_path / "back.db")
    try:
        assert everything(back) == original
    finally:
        back.close()
    postgres_server.drop_database(database)


def test_copying_into_a_store_that_holds_anything_is_refused(tmp_path: Path, model: Model, database: str) -> None:
    open_store(tmp_path / "source.db", model).close()
    open_store(database, model).close()
    with pytest.raises(StoreError, match="not empty"):
        copy_store(tmp_path / "source.db", database)


def test_canon_store_copy_copies_a_store_file_into_a_database(tmp_path: Path, model: Model, database: str) -> None:
    open_store(tmp_path / "source.db", model).close()
    done = run_canon("store", "copy", str(tmp_path / "source.db"), database, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "1 changes (revision 1)" in done.stdout
    copied = open_existing_store(database)
    try:
        assert copied.stored_model().digest == model.digest
    finally:
        copied.close()
