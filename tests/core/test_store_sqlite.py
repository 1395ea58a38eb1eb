"""What only the SQLite store does: its file (WAL, full sync, schema version, bad files), reads beside its one
connection, its query plans. The behaviour every backend shares is tested in tests/core/test_store.py."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from core.lang.model import Model
from core.store import NodeQuery
from core.store.sqlite import SCHEMA_VERSION, SQLiteStore
from core.values.errors import StoreError
from core.values.operations import PutNode
from tests.core.test_store import (
    team,
)


def stored_model_json(path: Path) -> str:
    db = sqlite3.connect(path)
    try:
        return str(db.execute("SELECT value FROM meta WHERE key = 'model'").fetchone()[0])
    finally:
        db.close()


# -- revisions and the change log ----------------------------------------------------------------------------------
# -- durability settings -------------------------------------------------------------------------------------------
def test_the_store_is_in_wal_mode(store: SQLiteStore, store_path: Path) -> None:
    db = sqlite3.connect(store_path)
    try:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        db.close()


def test_the_store_connection_syncs_fully(store: SQLiteStore) -> None:
    full = 2
    db = store._db  # pyright: ignore[reportPrivateUsage]
    assert db.execute("PRAGMA synchronous").fetchone()[0] == full


# -- opening -------------------------------------------------------------------------------------------------------
def test_opening_a_file_that_is_not_sqlite_is_a_store_error(tmp_path: Path, model: Model) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not a database\n" * 200)
    with pytest.raises(StoreError) as caught:
        SQLiteStore.open(path, model)
    assert caught.value.path == str(path)
    assert path.read_bytes() == b"these are my notes, not a database\n" * 200


def test_opening_a_directory_is_a_store_error(tmp_path: Path, model: Model) -> None:
    with pytest.raises(StoreError) as caught:
        SQLiteStore.open(tmp_path, model)
    assert caught.value.path == str(tmp_path)


def test_opening_a_store_of_a_newer_schema_version_is_a_store_error(store_path: Path, model: Model) -> None:
    SQLiteStore.open(store_path, model).close()
    db = sqlite3.connect(store_path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(StoreError) as caught:
        SQLiteStore.open(store_path, model)
    assert caught.value.path == str(store_path)


def test_opening_creates_missing_parent_directories(tmp_path: Path, model: Model) -> None:
    path = tmp_path / "a" / "b" / "canon.db"
    opened = SQLiteStore.open(path, model)
    opened.close()
    assert path.is_file()


# -- model changes -------------------------------------------------------------------------------------------------
T = TypeVar("T")


# -- reads beside the connection ----------------------------------------------------------------------------------
def in_another_thread(read: Callable[[], T]) -> T:
    """`read()` run in another thread, which must finish within 5 s (the caller may hold the store's connection)."""
    results: list[T] = []
    thread = threading.Thread(target=lambda: results.append(read()))
    thread.start()
    thread.join(5)
    assert not thread.is_alive(), "the read waited for the connection another thread holds"
    return results[0]


def test_a_read_proceeds_while_another_thread_holds_the_connection_and_sees_what_it_committed(
    store: SQLiteStore,
) -> None:
    text = NodeQuery("Team", text="ship", text_fields={"Team": ("mission",)})
    with store.uncontended() as free:  # this thread holds the connection, as a walk's read or a commit would
        assert free
        assert in_another_thread(lambda: store.node("team-a")) is None  # on a read connection, kept open after
        revision = store.commit([PutNode(team("team-a"))], principal="test").revision  # on the main connection
        assert in_another_thread(lambda: store.node("team-a")) is not None  # no snapshot left from the first read
        assert in_another_thread(store.revision) == revision
        assert in_another_thread(lambda: store.edge("member_of", "person-a", "team-a")) is None
        found, total = in_another_thread(lambda: store.find_nodes(text, after=None, limit=5))
        assert ([n.id for n in found], total) == (["team-a"], 1)


def test_an_uncontended_block_beside_a_held_connection_reads_one_state_until_it_ends(store: SQLiteStore) -> None:
    seen: list[object] = []
    reading, committed = threading.Event(), threading.Event()

    def read() -> None:
        with store.uncontended() as free:
            seen.append(free)
            seen.append(store.revision())
            reading.set()
            assert committed.wait(5)
            seen.append((store.revision(), store.node("team-a")))  # the block's state, not the later commit
        seen.append(store.revision())

    with store.uncontended():
        thread = threading.Thread(target=read)
        thread.start()
        assert reading.wait(5)
        revision = store.commit([PutNode(team("team-a"))], principal="test").revision
        committed.set()
        thread.join(5)
        assert not thread.is_alive()
    assert seen == [True, revision - 1, (revision - 1, None), revision]


# -- change detection, integrity, stats ----------------------------------------------------------------------------
def test_integrity_check_is_ok(seeded_store: SQLiteStore) -> None:
    assert seeded_store.integrity_check() == "ok"


def test_an_equality_on_the_key_property_is_found_through_the_key_index(seeded_store: SQLiteStore) -> None:
    from core.lang.conditions import Condition
    from core.store import NodeQuery
    from core.store.sql import node_filter
    from core.store.sqlite_sql import DIALECT

    email = "ingrid.halvorsen@northwind.example"

    def ids(*conditions: Condition) -> list[str]:
        nodes, total = seeded_store.find_nodes(NodeQuery("Person", conditions), after=None, limit=500)
        assert total == len(nodes)
        return [n.id for n in nodes]

    assert ids(Condition("email", "eq", email)) == ["person-ingrid-halvorsen"]
    assert ids(Condition("email", "eq", email.upper())) == []  # still exact: no case folding
    assert ids(Condition("email", "in", [email, "nobody@example.org"])) == ["person-ingrid-halvorsen"]
    assert ids(Condition("email", "in", [])) == []
    assert ids(Condition("email", "ne", email))[:1] != ["person-ingrid-halvorsen"]

    query = NodeQuery("Person", (Condition("email", "eq", email),))
    where, params = node_filter(DIALECT, query, "email", indexed=False)
    plan = seeded_store._read(f"EXPLAIN QUERY PLAN SELECT id FROM nodes WHERE {where}", params)
    assert "nodes_type_key" in " ".join(str(row) for row in plan)
    query = NodeQuery("Person", (Condition("name", "eq", "Ingrid Halvorsen"),))
    where, params = node_filter(DIALECT, query, "email", indexed=False)
    assert "key IN" not in where  # other properties are not the key
