"""Stores put back into the shape of an older schema, for the tests of the migrations that upgrade them.

A migration test needs a store as an older canon left it: each helper here undoes one later migration's change to
a seeded store's tables (keeping the rows), and `set_schema_version` records the version reached before it. A test
of an older migration undoes every later one too, so the migrations after it run on the shape they were written
for, as they would on a real store of that age."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg

from core.store import Store, is_database_url

__all__ = ["drop_change_proposals", "set_schema_version", "words_keyed_by_id"]


def words_keyed_by_id(store: Store, location: str | Path) -> None:
    """The word index as before ADR 0065 (SQLite schema 9, PostgreSQL 7): rows under the node's id, not its
    number (PostgreSQL's `nodes.number` dropped). Closes `store`."""
    with store.unit_of_work() as work:
        work.execute("CREATE TABLE old_words AS SELECT * FROM node_words")
        work.execute("DROP TABLE node_words")
    store.close()
    if not is_database_url(location):
        with sqlite3.connect(location) as db:
            db.execute("CREATE TABLE node_words (word TEXT NOT NULL, id TEXT NOT NULL, type TEXT NOT NULL, "
                       "impact INTEGER NOT NULL, PRIMARY KEY (id, word)) WITHOUT ROWID")  # fmt: skip
            db.execute("CREATE INDEX node_words_rank ON node_words (word, impact DESC, id, type)")
            db.execute("INSERT INTO node_words SELECT o.word, k.id, o.type, o.impact FROM old_words o "
                       "JOIN node_text_ids k ON k.docid = o.node")  # fmt: skip
            db.execute("DROP TABLE old_words")
        db.close()
        return
    with psycopg.connect(str(location), autocommit=True) as db:
        db.execute(
            'CREATE TABLE node_words (word text COLLATE "C" NOT NULL, id text COLLATE "C" NOT NULL, '
            'type text COLLATE "C" NOT NULL, impact smallint NOT NULL, PRIMARY KEY (id, word))'
        )
        db.execute("CREATE INDEX node_words_rank ON node_words (word, impact DESC, id) INCLUDE (type)")
        db.execute("INSERT INTO node_words SELECT o.word, n.id, o.type, o.impact FROM old_words o "
                   "JOIN nodes n ON n.number = o.node")  # fmt: skip
        db.execute("DROP TABLE old_words")
        db.execute("ALTER TABLE nodes DROP COLUMN number")


def drop_change_proposals(location: str | Path) -> None:
    """The change log as before ADR 0062 (SQLite schema 8, PostgreSQL 6): no `proposal` column."""
    if is_database_url(location):
        with psycopg.connect(str(location), autocommit=True) as db:
            db.execute("ALTER TABLE changes DROP COLUMN proposal")
        return
    with sqlite3.connect(location) as db:
        db.execute("ALTER TABLE changes DROP COLUMN proposal")
    db.close()


def set_schema_version(location: str | Path, *, sqlite: int, postgresql: int) -> None:
    """Record that the store at `location` reached schema `sqlite` (or `postgresql`) and no later one."""
    if is_database_url(location):
        with psycopg.connect(str(location), autocommit=True) as db:
            db.execute("DELETE FROM canon_schema WHERE version > %s", (postgresql,))
        return
    with sqlite3.connect(location) as db:
        db.execute(f"PRAGMA user_version = {sqlite}")
    db.close()
