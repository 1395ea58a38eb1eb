"""Day-two operations on a store: `compact` under a `Retention`, the `gone` answer it makes honest, and `backup`.

Both backends compact (one rule, `core.store.retention.compaction_floor`) and carry their floor into a copy;
SQLite backs up, and a PostgreSQL store refuses `backup` with a `StoreError` that names pg_dump instead.
"""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core.lang.model import Model
from core.ops.config import Config
from core.seam.instance import open_instance
from core.store import Store, open_existing_store, open_store
from core.store.retention import Retention
from core.store.sqlite import SQLiteStore
from core.values.errors import StoreError
from core.values.operations import PutNode
from core.values.principal import Principal
from core.values.records import Node
from tests.postgres_server import Server

pytestmark = pytest.mark.both_backends

ADMIN = Principal("ada", frozenset({"admin"}))


TEAM = {"area": "leadership", "mission": "Kept for a while.", "oncall": False, "founded": "2016-03-01", "tags": []}


def _team(i: int) -> PutNode:
    properties = {**TEAM, "name": f"Retained {i}", "slug": f"retained-{i}", "slack_channel": f"#retained-{i}"}
    return PutNode(Node(f"team-retained-{i}", "Team", properties, visibility="public"))


def _commit(store: Store, count: int) -> None:
    for i in range(count):
        store.commit([_team(i)], principal="test")


def test_compact_keeps_the_newest_revisions_and_records_the_floor(seeded_store: Store) -> None:
    newest = seeded_store.revision()
    done = seeded_store.compact(Retention(changes_keep_revisions=5))
    assert done.oldest == newest - 4
    assert done.changes_removed == newest - 5
    assert [c.revision for c in seeded_store.changes(0, 100)] == list(range(newest - 4, newest + 1))
    assert seeded_store.changes_floor() == newest - 5
    assert seeded_store.revision() == newest  # the store's revision did not move
    seeded_store.commit([_team(1)], principal="test")
    assert seeded_store.revision() == newest + 1  # and the next revision follows it, without a gap


def test_compact_by_age_spares_recent_changes_and_always_the_newest(seeded_store: Store) -> None:
    newest = seeded_store.revision()
    assert seeded_store.compact(Retention(changes_days=1)).changes_removed == 0  # everything is from today
    later = datetime.now(UTC) + timedelta(days=3)
    done = seeded_store.compact(Retention(changes_days=1), now=later)
    assert done.oldest == newest  # all older than a day by then, but the newest stays
    both = seeded_store.compact(Retention(changes_days=1, changes_keep_revisions=10), now=later)
    assert both.changes_removed == 0  # never brings back, never removes more than both allow


def test_get_changes_from_before_the_floor_is_gone_naming_the_oldest_revision(
    store_location: str | Path, tmp_path: Path
) -> None:
    instance = open_instance(Config(store=store_location, tokens=tmp_path / "tokens.json"))  # seeded
    try:
        done = instance.store.compact(Retention(changes_keep_revisions=3))
        gone = instance.dispatcher.call_tool(ADMIN, "test", "get_changes", {"since": done.oldest - 2})
        assert gone.is_error
        error = gone.as_json()["error"]
        assert (error["code"], error["oldest"], error["since"]) == ("gone", done.oldest, done.oldest - 2)
        whole = instance.dispatcher.call_tool(ADMIN, "test", "get_changes", {"since": done.oldest - 1})
        assert [c["revision"] for c in whole.as_json()["items"]] == [done.oldest, done.oldest + 1, done.oldest + 2]
    finally:
        instance.close()


def _delete_audit_directly(store: Store) -> None:
    """DELETE FROM audit on the store's own database, past canon (as a careless operator might)."""
    if isinstance(store, SQLiteStore):
        with sqlite3.connect(store.location) as db:
            db.execute("DELETE FROM audit")
        return
    import psycopg

    with psycopg.connect(store.location) as db:
        db.execute("DELETE FROM audit")


def test_audit_retention_removes_old_records_and_the_log_stays_append_only(store: Store) -> None:
    from core.values.audit import AuditQuery, AuditRecord

    old = (datetime.now(UTC) - timedelta(days=40)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    new = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    records = [AuditRecord(at, "ada", "rest", "get_node", "get_node", "d", "ok", 0, 1.0) for at in (old, old, new)]
    store.append_audit(records)
    done = store.compact(Retention(audit_days=30))
    assert (done.audit_removed, done.changes_removed) == (2, 0)
    kept, total = store.audit_records(AuditQuery(), before=None, limit=10)
    assert ([r["at"] for r in kept], total) == ([new], 1)
    with pytest.raises(Exception, match="append-only"):
        _delete_audit_directly(store)
    store.append_audit(records[2:])  # appending still works after the compaction
    assert store.audit_records(AuditQuery(), before=None, limit=10)[1] == 2


def test_a_copy_of_a_compacted_store_answers_gone_from_the_same_revision(seeded_store: Store, tmp_path: Path) -> None:
    from core.store import copy_store

    done = seeded_store.compact(Retention(changes_keep_revisions=4))
    copy_store(seeded_store.location, tmp_path / "copy.db")
    copy = open_existing_store(tmp_path / "copy.db")
    try:
        assert copy.changes_floor() == seeded_store.changes_floor() == done.oldest - 1
        assert [c.revision for c in copy.changes(0, 100)] == [c.revision for c in seeded_store.changes(0, 100)]
        assert copy.revision() == seeded_store.revision()
    finally:
        copy.close()


@pytest.mark.sqlite_only(reason="SQLite's online backup; PostgreSQL is backed up with pg_dump")
def test_a_backup_taken_while_another_thread_writes_is_one_committed_state(seeded_store: Store, tmp_path: Path) -> None:
    assert isinstance(seeded_store, SQLiteStore)
    stop = threading.Event()

    def write() -> None:
        i = 0
        while not stop.is_set():
            seeded_store.commit([_team(i)], principal="writer")
            i += 1

    writer = threading.Thread(target=write)
    writer.start()
    try:
        seeded_store.backup(tmp_path / "backup.db")
    finally:
        stop.set()
        writer.join(timeout=30)
    copy = open_existing_store(tmp_path / "backup.db")
    try:
        revision = copy.revision()
        assert [c.revision for c in copy.changes(0, 10**6)] == list(range(1, revision + 1))
        written = [c for c in copy.changes(0, 10**6) if c.principal == "writer"]
        assert {node.id for node in copy.iter_nodes("Team") if node.id.startswith("team-retained-")} == {
            c.key for c in written
        }  # every change in the copy, and no record without its change
    finally:
        copy.close()
    assert not (tmp_path / "backup.db-wal").exists()


@pytest.mark.sqlite_only(reason="SQLite's online backup")
def test_a_backup_never_overwrites_a_file(store: Store, tmp_path: Path) -> None:
    (tmp_path / "there.db").write_text("keep me")
    with pytest.raises(StoreError):
        store.backup(tmp_path / "there.db")
    assert (tmp_path / "there.db").read_text() == "keep me"


def test_a_postgresql_store_refuses_backup_saying_what_to_use(
    postgres_server: Server, model: Model, tmp_path: Path
) -> None:
    url = postgres_server.new_database()
    store = open_store(url, model)
    try:
        with pytest.raises(StoreError, match="pg_dump"):
            store.backup(tmp_path / "backup.db")
    finally:
        store.close()
        postgres_server.drop_database(url)
    assert not (tmp_path / "backup.db").exists()
