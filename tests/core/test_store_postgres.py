"""What only the PostgreSQL store does: the database refuses to change the audit log, the URL's password stays out
of messages, a database of a newer schema is refused. What both backends share: tests/core/test_store.py."""

from __future__ import annotations

import psycopg
import pytest

from core.audit import AuditRecord
from core.errors import StoreError
from core.model import Model
from core.store import open_store
from core.store.postgres import SCHEMA_VERSION
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
        db.execute(statement)  # pyright: ignore[reportArgumentType]


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
