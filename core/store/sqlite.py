"""The SQLite backend: the embedded default store.

One file in WAL mode with `synchronous=FULL`: a commit is durable when it returns, readers never block the
writer, and several processes can share the file. Every commit is one `BEGIN IMMEDIATE` transaction, so
validation (`core.lang.validation.plan`) reads a state no other process can change until the commit lands, and
revisions are assigned without gaps or races.

Tables: `nodes`, `edges`, `changes` (the change log; its primary key is the revision), `audit`, `meta` (store
version, the current model, `changes_floor`: the revision through which `compact` removed the change log) and
`model_history` (every model the store has recorded, keyed by the revision that recorded it). `PRAGMA
user_version` is the store's schema version; `MIGRATIONS` upgrades older files.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from core.lang.model import Model, parse_model, searchable_text
from core.lang.model_migration import SQLITE
from core.lang.validation import Write
from core.store import StoreDump, StoreStats
from core.store.common import Bulk, Discard, dumps, utc_now
from core.store.proposals_sql import CHANGE_PROPOSAL, PROPOSAL_COLUMNS, PROPOSALS_TABLE
from core.store.sql import (
    AUDIT_COLUMNS,
    CHANGE_ALL,
    EDGE_COLUMNS,
    HISTORY_COLUMNS,
    NODE_COLUMNS,
    SQLStore,
    change_row,
    edge_row,
    numbered_word_rows,
    text_fields_json,
    vocabulary_rows,
)
from core.store.sqlite_sql import DIALECT
from core.values.audit import AuditRecord
from core.values.errors import StoreError
from core.values.records import Change, Edge, Node

__all__ = ["SCHEMA_VERSION", "SQLiteStore"]

SCHEMA_VERSION = 9
BUSY_TIMEOUT_S = 60.0
IDLE_READERS = 4  # read-only connections kept open between reads (more are opened while more threads read at once)
TEXT_COMPACT_MIN = 100  # node writes in one commit from which the text index may be compacted after it

_CREATE = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE nodes (
  id TEXT PRIMARY KEY, type TEXT NOT NULL, key TEXT, visibility TEXT NOT NULL, readers TEXT,
  properties TEXT NOT NULL, revision INTEGER NOT NULL,
  created_at TEXT NOT NULL, updated_at TEXT NOT NULL, updated_by TEXT NOT NULL
);
CREATE UNIQUE INDEX nodes_type_key ON nodes (type, key);
CREATE INDEX nodes_type_id ON nodes (type, id);
CREATE TABLE edges (
  source TEXT NOT NULL, type TEXT NOT NULL, target TEXT NOT NULL, properties TEXT NOT NULL,
  revision INTEGER NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, updated_by TEXT NOT NULL,
  PRIMARY KEY (source, type, target)
) WITHOUT ROWID;
CREATE INDEX edges_target ON edges (target, type, source);
CREATE TABLE changes (
  revision INTEGER PRIMARY KEY, at TEXT NOT NULL, principal TEXT NOT NULL, op TEXT NOT NULL,
  kind TEXT NOT NULL, key TEXT NOT NULL, type TEXT, before TEXT, after TEXT
);
"""

_ACCESS = (  # who may see a change, in columns the change feed filters on in SQL (see `core.store.sql.change_filter`)
    *(f"ALTER TABLE changes ADD COLUMN {column} TEXT" for column in (
        "source", "target", "before_visibility", "before_readers", "after_visibility", "after_readers")),
    "UPDATE changes SET before_visibility = json_extract(before, '$.visibility'), "
    "before_readers = json_extract(before, '$.readers'), after_visibility = json_extract(after, '$.visibility'), "
    "after_readers = json_extract(after, '$.readers') WHERE kind = 'node'",
    # an edge key is type:source->target; a type has no ':' and an id has no '>'
    "UPDATE changes SET source = substr(key, instr(key, ':') + 1, instr(key, '->') - instr(key, ':') - 1), "
    "target = substr(key, instr(key, '->') + 2) WHERE kind = 'edge'",
    "CREATE INDEX nodes_type_visibility ON nodes (type, visibility)",
)  # fmt: skip
_AUDIT_NO_DELETE = (
    "CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit "
    "BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END"
)
_AUDIT = (
    """CREATE TABLE audit (
  id INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL, principal TEXT NOT NULL, surface TEXT NOT NULL,
  action TEXT NOT NULL, target TEXT NOT NULL, arguments_digest TEXT NOT NULL, outcome TEXT NOT NULL,
  revision INTEGER NOT NULL, duration_ms REAL NOT NULL
)""",
    "CREATE INDEX audit_principal ON audit (principal, id)",
    "CREATE INDEX audit_at ON audit (at)",
    *(
        f"CREATE TRIGGER audit_no_{op.lower()} BEFORE {op} ON audit "
        "BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END"
        for op in ("UPDATE", "DELETE")
    ),
)

_TEXT = (
    # What `NodeQuery.text` searches, per node: its type's text properties, lowered by Python (`searchable_text`),
    # one per line. A trigram index answers "contains this substring" from the index for needles of 3 or more
    # characters; `detail=none` keeps it small (candidates are re-checked against the stored text).
    "CREATE VIRTUAL TABLE node_text USING fts5(text, tokenize = 'trigram case_sensitive 1', detail = 'none')",
    "CREATE TABLE node_text_ids (docid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE)",
)

WORDS_TABLE = (
    # The word index (`core.store.sql.word_rows`): each word of a node's searched properties and how much the node
    # is about it; a ranked search reads a word's nodes in impact order from `node_words_rank`, the first few only.
    "CREATE TABLE node_words (word TEXT NOT NULL, id TEXT NOT NULL, type TEXT NOT NULL, impact INTEGER NOT NULL, "
    "PRIMARY KEY (id, word)) WITHOUT ROWID",
    "CREATE INDEX node_words_rank ON node_words (word, impact DESC, id, type)",
    # every word a node has held since the index was built, and backwards: a prefix's words, a typo's neighbours
    "CREATE TABLE vocabulary (word TEXT PRIMARY KEY, reversed TEXT NOT NULL) WITHOUT ROWID",
    "CREATE INDEX vocabulary_reversed ON vocabulary (reversed)",
)

# The word index keyed by the node's number (ADR 0065): `node_text_ids`' docid, an integer of one to three bytes,
# where version 7 repeated the node's id in the table and its index.
_WORD_ROWS = ("CREATE TABLE node_words (word TEXT NOT NULL, node INTEGER NOT NULL, type TEXT NOT NULL, "
              "impact INTEGER NOT NULL, PRIMARY KEY (node, word)) WITHOUT ROWID")  # fmt: skip
_WORD_RANK = "CREATE INDEX node_words_rank ON node_words (word, impact DESC, node, type)"
_VOCABULARY_REVERSED = "CREATE INDEX vocabulary_reversed ON vocabulary (reversed)"
NUMBERED_WORDS = (
    "DROP INDEX node_words_rank",
    "ALTER TABLE node_words RENAME TO node_words_by_id",
    _WORD_ROWS,
    "INSERT INTO node_words SELECT o.word, k.docid, o.type, o.impact FROM node_words_by_id o "
    "JOIN node_text_ids k ON k.id = o.id ORDER BY k.docid, o.word",
    "DROP TABLE node_words_by_id",
    _WORD_RANK,
)
BUILD_CACHE_KIB = 262_144  # the page cache while the word index is built anew: its sort in memory, not on disk

_RECORDED_MODEL = (  # the model recorded in `meta`, as a history entry at the last model change (or revision 0)
    "INSERT INTO model_history SELECT coalesce(max(c.revision), 0), "
    "coalesce(max(c.at), strftime('%Y-%m-%dT%H:%M:%fZ', 'now')), "
    "coalesce((SELECT principal FROM changes WHERE kind = 'model' ORDER BY revision DESC LIMIT 1), 'unknown'), "
    "json_extract(m.value, '$.\"x-canon-model\".version'), m.value, NULL "
    "FROM meta AS m LEFT JOIN changes AS c ON c.kind = 'model' WHERE m.key = 'model' GROUP BY m.value"
)
_HISTORY = (
    """CREATE TABLE model_history (
  revision INTEGER PRIMARY KEY, at TEXT NOT NULL, principal TEXT NOT NULL, version TEXT NOT NULL,
  document TEXT NOT NULL, summary TEXT
)""",
    _RECORDED_MODEL,
)

_PAST = (
    "CREATE INDEX changes_key ON changes (key, revision)",
    "CREATE INDEX changes_source ON changes (source, revision)",
    "CREATE INDEX changes_target ON changes (target, revision)",
)

# version reached -> the SQL statements that upgrade the previous version to it
MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: tuple(statement for statement in _CREATE.split(";") if statement.strip()),
    2: (*_ACCESS, *_AUDIT),  # visibility columns on the change log; the append-only audit log
    3: _TEXT,  # the trigram index text search uses (filled by `_ensure_text_index`)
    4: _HISTORY,  # every recorded model, the one recorded so far first
    5: _PAST,  # a record's changes by id and by edge end, for reading a past revision (`core.store.past`)
    6: PROPOSALS_TABLE,  # pending change-sets (`core.dispatch.proposals`)
    7: WORDS_TABLE,  # the word index a ranked search reads (filled by `_ensure_text_index`)
    8: (CHANGE_PROPOSAL,),  # the proposal a change-log entry was merged from (null before, and for direct writes)
    9: NUMBERED_WORDS,  # the word index's rows under the node's number, not its id (the rows moved as they are)
}

_CHANGE_INSERT = f"INSERT INTO changes ({CHANGE_ALL}) VALUES ({', '.join('?' * 16)})"


def _lower(value: Any) -> Any:
    """Python's `str.lower`, so SQL and `Condition.matches` agree beyond ASCII (SQLite's lower() does not)."""
    return value.lower() if isinstance(value, str) else value


def _connect(target: str | Path, **options: Any) -> sqlite3.Connection:
    db = sqlite3.connect(target, isolation_level=None, **options)
    db.create_function("canon_lower", 1, _lower, deterministic=True)
    return db


def _node(row: sqlite3.Row | tuple[Any, ...]) -> Node:
    id_, type_, visibility, readers, properties, revision, created_at, updated_at, updated_by = row
    return Node(
        id_, type_, json.loads(properties), visibility, tuple(json.loads(readers)) if readers else (),
        revision, created_at, updated_at, updated_by,
    )  # fmt: skip


def _nodes(rows: Sequence[tuple[Any, ...]]) -> list[Node]:
    """`_node` of each row, their properties decoded in one parse (for a page of 50, under half the time)."""
    if len(rows) < 2:
        return [_node(r) for r in rows]
    properties: list[Any] = json.loads("[" + ",".join(r[4] for r in rows) + "]")
    return [
        Node(id_, type_, values, visibility, tuple(json.loads(readers)) if readers else (), revision, created_at,
             updated_at, updated_by)
        for (id_, type_, visibility, readers, _, revision, created_at, updated_at, updated_by), values
        in zip(rows, properties, strict=True)
    ]  # fmt: skip


def _edge(row: sqlite3.Row | tuple[Any, ...]) -> Edge:
    type_, source, target, properties, revision, created_at, updated_at, updated_by = row
    values = {} if properties == "{}" else json.loads(properties)  # most edges have no properties
    return Edge(type_, source, target, values, revision, created_at, updated_at, updated_by)


def _change(row: tuple[Any, ...]) -> Change:
    revision, at, principal, op, kind, key, type_, before, after, proposal = row
    return Change(
        revision, at, principal, op, kind, key, type_,
        json.loads(before) if before is not None else None, json.loads(after) if after is not None else None,
        proposal,
    )  # fmt: skip


class SQLiteStore(SQLStore):
    """A canon store in one SQLite file. Thread-safe: one connection for writes, serialised by a lock; a read
    takes it when it is free and otherwise a read-only connection of its own (ADR 0020), so no read waits for
    another thread's read or write.

    A read on a read-only connection runs in autocommit mode, a read transaction of its own that starts with it:
    in WAL mode it sees every commit that returned before it began (this process's or another's), as a read on
    the main connection would. A thread in a write transaction holds the main connection, so its reads see its
    own uncommitted writes.
    """

    DIALECT = DIALECT
    MOVES = SQLITE

    def __init__(self, path: Path, db: sqlite3.Connection, model: Model | None) -> None:
        self._path = path
        self._db = db
        self._model: Model = model  # type: ignore[assignment]  (None only until `open_existing` reads it)
        self._lock = threading.RLock()
        self._data_version = self._pragma("data_version")
        self._audit_lock = threading.Lock()
        self._audit_db: sqlite3.Connection | None = None
        self._readers_lock = threading.Lock()
        self._readers: list[sqlite3.Connection] | None = []  # idle read-only connections; None once closed
        self._pinned = threading.local()  # .db: this thread's read connection for an `uncontended` block
        self._model_revision: int | None = None  # the revision that recorded `_model` (`_model_in`)

    # -- opening -----------------------------------------------------------------------------------------------
    @classmethod
    def open(cls, path: Path, model: Model, *, principal: str = "system") -> SQLiteStore:
        def prepare(store: SQLiteStore) -> None:
            store._record_model(model, principal)
            store._ensure_text_index()

        return cls._open(path, model, prepare)

    @classmethod
    def open_existing(cls, path: Path, *, read_only: bool = False) -> SQLiteStore:
        """Open the store file at `path` on the model recorded in it, changing nothing; with `read_only`, on a
        read-only connection (SQLite `mode=ro`), so not even a schema migration can write to it."""
        if not path.is_file():
            raise StoreError(f"There is no store {path}; create one with 'canon init'.", path=str(path))

        def recorded(store: SQLiteStore) -> None:
            store._model = store.stored_model()
            store._model_revision = store._model_head()

        return cls._open(path, None, recorded, read_only=read_only)

    @classmethod
    def open_empty(cls, path: Path, model: Model) -> SQLiteStore:
        """Open (creating) a store that must hold nothing yet, for `restore`; it records no model until then."""

        def empty(store: SQLiteStore) -> None:
            if store.revision() != 0:
                raise StoreError(f"The store {path} is not empty; copy into a new store.", path=str(path))

        return cls._open(path, model, empty)

    @classmethod
    def _open(
        cls, path: Path, model: Model | None, prepare: Callable[[SQLiteStore], None], *, read_only: bool = False
    ) -> SQLiteStore:
        if path.exists() and path.is_dir():
            raise StoreError(f"The store path {path} is a directory; give a file path.", path=str(path))
        try:
            if read_only:
                db = _connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False,
                              timeout=BUSY_TIMEOUT_S)  # fmt: skip
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                db = _connect(path, check_same_thread=False, timeout=BUSY_TIMEOUT_S)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"Cannot open the store {path}: {exc}.", path=str(path)) from exc
        except OSError as exc:
            raise StoreError(f"Cannot create the store {path}: {exc.strerror}.", path=str(path)) from exc
        try:
            if read_only:
                cls._check_current(db, path)
            else:
                db.execute("PRAGMA journal_mode = WAL")
                db.execute("PRAGMA synchronous = FULL")
                cls._migrate(db, path)
            store = cls(path, db, model)
            prepare(store)
        except sqlite3.DatabaseError as exc:
            db.close()
            raise StoreError(f"Cannot open the store {path}: {exc}.", path=str(path)) from exc
        except BaseException:
            db.close()
            raise
        return store

    @staticmethod
    def _check_current(db: sqlite3.Connection, path: Path) -> None:
        """Refuse to read a store whose schema is not this canon's (a read-only open cannot migrate it)."""
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version != SCHEMA_VERSION:
            raise StoreError(
                f"The store {path} has schema version {version}, and this canon reads {SCHEMA_VERSION}; "
                + ("upgrade canon." if version > SCHEMA_VERSION else "run 'canon init' once to migrate it."),
                path=str(path),
            )

    @staticmethod
    def _migrate(db: sqlite3.Connection, path: Path) -> None:
        db.execute("BEGIN IMMEDIATE")
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"The store {path} has schema version {version}, newer than this canon knows ({SCHEMA_VERSION}); "
                    "upgrade canon.",
                    path=str(path),
                )
            for target in range(version + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[target]:
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {target}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    # -- reading -----------------------------------------------------------------------------------------------
    @property
    def location(self) -> str:
        return str(self._path)

    to_node = staticmethod(_node)
    to_edge = staticmethod(_edge)
    to_change = staticmethod(_change)

    def _to_nodes(self, rows: Sequence[Any]) -> list[Node]:
        return _nodes(rows)

    def _json(self, value: Any) -> str:
        return dumps(value)

    def _update_keys(self, db: sqlite3.Connection, model: Model) -> None:
        for name, node_type in model.node_types.items():
            db.execute(
                "UPDATE nodes SET key = json_extract(properties, ?) WHERE type = ?", (f"$.{node_type.key}", name)
            )

    def _announce(self, db: sqlite3.Connection, revision: int) -> None:
        """Nothing: SQLite sends no notices; a follower sees the file's `data_version` move (`changed`)."""

    def _committed(self, revision: int) -> None:
        """Nothing: `_transaction` notes the `data_version` our own commit leaves."""

    @contextmanager
    def _audit_writable(self, db: sqlite3.Connection) -> Generator[None]:
        db.execute("DROP TRIGGER audit_no_delete")
        yield
        db.execute(_AUDIT_NO_DELETE)

    @contextmanager
    def uncontended(self) -> Generator[bool]:
        """True: this thread's reads in the block wait for no other thread. On the main connection, held for the
        block, if no other thread is using it; otherwise on a read-only connection pinned to this thread for the
        block, in one read transaction, so the block's reads all see one state: the latest committed when its
        first read ran (never an older one: the transaction ends with the block). False if no read-only
        connection can be had."""
        if self._lock.acquire(blocking=False):
            try:
                yield True
            finally:
                self._lock.release()
            return
        try:
            db = self._borrow_reader()
        except sqlite3.Error:
            yield False
            return
        try:
            db.execute("BEGIN")
            self._pinned.db = db
            try:
                yield True
            finally:
                self._pinned.db = None
                db.execute("COMMIT")
        finally:
            self._return_reader(db)

    def changed(self) -> bool:
        with self._lock:
            version = self._pragma("data_version")
            if version == self._data_version:
                return False
            self._data_version = version
            return True

    def notices(self, wake: Callable[[], None]) -> Callable[[], None] | None:
        """None: SQLite sends no notices; a follower checks the revision on a short tick (a local read)."""
        return None

    def nodes(self, ids: Sequence[str]) -> dict[str, Node]:
        found: dict[str, Node] = {}
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            for node in _nodes(self._read(f"SELECT {NODE_COLUMNS} FROM nodes WHERE id IN ({marks})", chunk)):
                found[node.id] = node
        return found

    def node_types(self, ids: Sequence[str]) -> dict[str, str]:
        """The types of the stored nodes among `ids`, by id: one query per 500."""
        found: dict[str, str] = {}
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            found.update(self._read(f"SELECT id, type FROM nodes WHERE id IN ({','.join('?' * len(chunk))})", chunk))
        return found

    def key_owners(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """The ids of the nodes holding these (type, key) pairs, by pair: one query per 300 pairs."""
        found: dict[tuple[str, str], str] = {}
        for start in range(0, len(keys), 300):
            chunk = keys[start : start + 300]
            values = ", ".join("(?, ?)" for _ in chunk)
            sql = (f"WITH w (type, key) AS (VALUES {values}) "
                   "SELECT n.type, n.key, n.id FROM w JOIN nodes n ON n.type = w.type AND n.key = w.key")  # fmt: skip
            for type_, key, id_ in self._read(sql, [v for pair in chunk for v in pair]):
                found[(type_, key)] = id_
        return found

    def edges(self, refs: Sequence[tuple[str, str, str]]) -> dict[tuple[str, str, str], Edge]:
        """The stored edges among `refs` ((type, source, target) each), by ref: one primary-key lookup each, in
        one query per 300 refs."""
        found: dict[tuple[str, str, str], Edge] = {}
        columns = ", ".join(f"e.{c}" for c in EDGE_COLUMNS.split(", "))
        for start in range(0, len(refs), 300):
            chunk = refs[start : start + 300]
            wanted = ", ".join("(?, ?, ?)" for _ in chunk)
            sql = (f"WITH wanted (type, source, target) AS (VALUES {wanted}) SELECT {columns} FROM wanted JOIN edges e "
                   "ON e.source = wanted.source AND e.type = wanted.type AND e.target = wanted.target")  # fmt: skip
            for row in self._read(sql, [value for ref in chunk for value in ref]):
                edge = _edge(row)
                found[(edge.type, edge.source, edge.target)] = edge
        return found

    def far_ends(self, ends: Sequence[tuple[str, str]], outgoing: bool) -> dict[tuple[str, str], list[str]]:
        """For each (node id, edge type): the targets of the edges of that type leaving the node (`outgoing`), or
        the sources of those arriving at it; a pair without such edges is left out. One query per 300 pairs."""
        near, far = ("source", "target") if outgoing else ("target", "source")
        found: dict[tuple[str, str], list[str]] = {}
        for start in range(0, len(ends), 300):
            chunk = ends[start : start + 300]
            values = ", ".join("(?, ?)" for _ in chunk)
            sql = (f"WITH w (node, type) AS (VALUES {values}) SELECT w.node, w.type, e.{far} "
                   f"FROM w JOIN edges e ON e.{near} = w.node AND e.type = w.type")  # fmt: skip
            for node, type_, other in self._read(sql, [v for pair in chunk for v in pair]):
                found.setdefault((node, type_), []).append(other)
        return found

    def iter_node_heads(self) -> Iterator[tuple[str, str, str, tuple[str, ...]]]:
        """(id, type, visibility, readers) of every node."""
        yield from self._iterate(
            "SELECT id, type, visibility, readers FROM nodes",
            (),
            lambda r: (r[0], r[1], r[2], tuple(json.loads(r[3])) if r[3] else ()),
        )

    def stats(self) -> StoreStats:
        with self._lock:
            db = self._db
            by_type = dict(db.execute("SELECT type, count(*) FROM nodes GROUP BY type ORDER BY type").fetchall())
            edges_by_type = dict(db.execute("SELECT type, count(*) FROM edges GROUP BY type ORDER BY type").fetchall())
            changes = db.execute("SELECT count(*) FROM changes").fetchone()[0]
            size = self._pragma("page_count") * self._pragma("page_size")
            return StoreStats(
                self._max_revision(db), sum(by_type.values()), sum(edges_by_type.values()), changes,
                by_type, edges_by_type, size,
            )  # fmt: skip

    def integrity_check(self) -> str:
        return str(self._read("PRAGMA integrity_check", ())[0][0])

    # -- writing -----------------------------------------------------------------------------------------------
    @contextmanager
    def bulk(self, *, principal: str, dry_run: bool = False) -> Generator[Bulk]:
        """One write transaction fed batch by batch (an import; `Bulk`): committed when the block ends, rolled back
        if it raises or with `dry_run`. The text index is merged once, at the end."""
        try:
            with self._transaction() as db:
                apply = partial(self._apply, db, principal=principal, progress=None, compact=False, collect=False)
                bulk = self._bulk_in(db, apply, principal)
                yield bulk
                if dry_run:
                    raise Discard
                self._compact_text_index(db, bulk.nodes_written)
        except Discard:
            pass

    def _apply(
        self,
        db: sqlite3.Connection,
        writes: list[Write],
        principal: str,
        progress: Callable[[str, int, int], None] | None,
        *,
        compact: bool = True,
        collect: bool = True,
        proposal: str | None = None,
    ) -> list[Change]:
        """Write the changes: puts gathered and sent by `executemany` (nodes, their text, edges), a delete after
        the puts before it; the change log last, in one `executemany`. Returns them (none unless `collect`: a bulk
        import does not read them)."""
        changes: list[Change] = []
        change_rows: list[tuple[Any, ...]] = []
        puts = _Puts()
        at = utc_now()
        for done, w in enumerate(writes, start=1):
            before = w.before.to_json() if w.before is not None else None
            after = w.after.to_json() if w.after is not None else None
            if isinstance(w.after, Node):
                puts.nodes.append(self._node_row(w.after))
                puts.text.append((w.after, w.before is not None))
            elif isinstance(w.after, Edge):
                puts.edges.append(edge_row(w.after))
            else:  # a delete: the puts before it land first
                self._flush(db, puts)
                if isinstance(w.before, Node):
                    db.execute("DELETE FROM nodes WHERE id = ?", (w.before.id,))
                    self._unindex_text(db, w.before.id)
                elif isinstance(w.before, Edge):
                    e = w.before
                    db.execute(
                        "DELETE FROM edges WHERE source = ? AND type = ? AND target = ?", (e.source, e.type, e.target)
                    )
            op = "put" if w.after is not None else "delete"
            record = w.after if w.after is not None else w.before
            ends = (record.source, record.target) if isinstance(record, Edge) else (None, None)
            change_rows.append(
                (w.revision, at, principal, op, w.kind, w.key, w.type,
                 dumps(before) if before is not None else None, dumps(after) if after is not None else None,
                 proposal, *ends, *_access(w.before), *_access(w.after))
            )  # fmt: skip
            if collect:
                changes.append(Change(w.revision, at, principal, op, w.kind, w.key, w.type, before, after, proposal))  # type: ignore[arg-type]
            if progress is not None and (done % 1000 == 0 or done == len(writes)):
                progress("writing", done, len(writes))
        self._flush(db, puts)
        db.executemany(_CHANGE_INSERT, change_rows)
        if compact:
            self._compact_text_index(db, sum(w.kind == "node" for w in writes))
        return changes

    def _flush(self, db: sqlite3.Connection, puts: _Puts) -> None:
        """Write the pending puts: node rows (in order, so a node's last put wins), then each put node's text
        from its row, then edge rows."""
        if puts.nodes:
            db.executemany(
                "INSERT INTO nodes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
                "type = excluded.type, key = excluded.key, visibility = excluded.visibility, "
                "readers = excluded.readers, properties = excluded.properties, revision = excluded.revision, "
                "updated_at = excluded.updated_at, updated_by = excluded.updated_by",
                puts.nodes,
            )
            self._index_text(db, puts.text)
        if puts.edges:
            db.executemany(
                "INSERT INTO edges VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (source, type, target) DO UPDATE SET "
                "properties = excluded.properties, revision = excluded.revision, updated_at = excluded.updated_at, "
                "updated_by = excluded.updated_by",
                puts.edges,
            )
        puts.clear()

    def _node_row(self, n: Node) -> tuple[Any, ...]:
        key = n.properties.get(self._model.node_types[n.type].key)
        return (n.id, n.type, key if isinstance(key, str) else None, n.visibility,
                dumps(list(n.readers)) if n.readers else None, dumps(dict(n.properties)), n.revision,
                n.created_at, n.updated_at, n.updated_by)  # fmt: skip

    # -- the text index ----------------------------------------------------------------------------------------
    def _index_text(self, db: sqlite3.Connection, nodes: list[tuple[Node, bool]]) -> None:
        """Index the text (`searchable_text`) of the nodes just written, (node, whether it may be indexed already)
        each: an old entry is removed first, a new node gets its docid, and each node is indexed once, as its last
        put left it."""
        known = [(n.id,) for n, known in nodes if known]
        db.executemany("DELETE FROM node_text WHERE rowid = (SELECT docid FROM node_text_ids WHERE id = ?)", known)
        db.executemany("DELETE FROM node_words WHERE node = (SELECT docid FROM node_text_ids WHERE id = ?)", known)
        last = {n.id: n for n, _ in nodes}
        db.executemany("INSERT INTO node_text_ids (id) VALUES (?) ON CONFLICT (id) DO NOTHING", [(i,) for i in last])
        self._insert_text(db, self._docids(db, list(last)), last.values(), self._model)

    @staticmethod
    def _docids(db: sqlite3.Connection, ids: Sequence[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            sql = f"SELECT id, docid FROM node_text_ids WHERE id IN ({','.join('?' * len(chunk))})"
            found.update(db.execute(sql, chunk).fetchall())
        return found

    @staticmethod
    def _insert_text(db: sqlite3.Connection, docids: dict[str, int], nodes: Iterable[Node], model: Model) -> None:
        """Add the text index's and the word index's rows of `nodes` (docid: the node's number in both), and the
        words the vocabulary does not hold yet."""
        fields = {name: t.text for name, t in model.node_types.items()}
        nodes = list(nodes)
        rows = ((docids[n.id], searchable_text(n.properties, fields.get(n.type, ()))) for n in nodes)
        db.executemany("INSERT INTO node_text (rowid, text) VALUES (?, ?)", rows)
        words = list(numbered_word_rows(model, ((docids[n.id], n.type, n.properties) for n in nodes)))
        db.executemany("INSERT INTO node_words (word, node, type, impact) VALUES (?, ?, ?, ?)", words)
        db.executemany("INSERT INTO vocabulary (word, reversed) VALUES (?, ?) ON CONFLICT (word) DO NOTHING",
                       vocabulary_rows(w[0] for w in words))  # fmt: skip

    @staticmethod
    def _compact_text_index(db: sqlite3.Connection, written: int) -> None:
        """After a bulk write (an import), merge the text index into one segment.

        The index grows in segments, and a search reads every segment for each trigram it looks up: merged, the
        lookup of a search on 10,000 nodes took a third of the time (0.11 -> 0.03 ms; 1.7 s to merge 1,000,000
        nodes). Small writes leave it to FTS5's own merging, and a batch small against the index (under 1/20 of
        it) is not worth rewriting the whole index for.
        """
        if written < TEXT_COMPACT_MIN:
            return
        indexed = int(db.execute("SELECT coalesce(max(docid), 0) FROM node_text_ids").fetchone()[0])
        if written * 20 >= indexed:
            db.execute("INSERT INTO node_text (node_text) VALUES ('optimize')")

    @staticmethod
    def _unindex_text(db: sqlite3.Connection, id: str) -> None:
        row = db.execute("DELETE FROM node_text_ids WHERE id = ? RETURNING docid", (id,)).fetchone()
        if row is not None:
            db.execute("DELETE FROM node_text WHERE rowid = ?", (row[0],))
            db.execute("DELETE FROM node_words WHERE node = ?", (row[0],))

    def _rebuild_text_index(self, db: sqlite3.Connection, model: Model) -> None:
        """Fill the text and word indexes anew. A node keeps its number (docid): numbers are given in write order
        on both backends (PostgreSQL's `nodes.number` never changes), and a word's equally-about nodes are read
        in number order, so a rebuild must not renumber them (ADR 0065)."""
        db.execute("DELETE FROM node_text")
        db.execute("DELETE FROM node_text_ids WHERE id NOT IN (SELECT id FROM nodes)")
        db.execute(
            "INSERT INTO node_text_ids (id) SELECT id FROM nodes WHERE true ORDER BY id ON CONFLICT (id) DO NOTHING"
        )
        self._fill_words(db, model, text=True)
        db.execute("INSERT INTO node_text (node_text) VALUES ('optimize')")
        self._set_meta(db, "text_index", text_fields_json(model))

    def _index_words(self, db: sqlite3.Connection, model: Model) -> None:
        self._fill_words(db, model, text=False)

    @staticmethod
    def _numbered(sight: bool) -> tuple[str, str]:
        """A word index row's node number is its docid in `node_text_ids` (an integer primary key: a rowid)."""
        return " JOIN node_text_ids k ON k.docid = p.node" + (" JOIN nodes n ON n.id = k.id" if sight else ""), "k.id"

    @staticmethod
    def _fill_words(db: sqlite3.Connection, model: Model, *, text: bool) -> None:
        """Fill the word index anew (and the text index, with `text`) from every node, by its number.

        Built in bulk (ADR 0065): the nodes are read in number order, so each node's rows append to the table's
        primary key (node, word); the ranking index and the vocabulary's are made after the rows, by one sort
        each, in a page cache large enough to sort in memory; the vocabulary is written once, in word order."""
        fields = {name: t.text for name, t in model.node_types.items()}
        cache = db.execute("PRAGMA cache_size").fetchone()[0]
        db.execute(f"PRAGMA cache_size = -{BUILD_CACHE_KIB}")
        try:
            db.execute("DROP INDEX node_words_rank")
            db.execute("DROP INDEX vocabulary_reversed")
            db.execute("DELETE FROM node_words")
            db.execute("DELETE FROM vocabulary")
            vocabulary: set[str] = set()
            cursor = db.execute("SELECT m.docid, n.type, n.properties FROM node_text_ids m "
                                "JOIN nodes n ON n.id = m.id ORDER BY m.docid")  # fmt: skip
            while rows := cursor.fetchmany(5000):
                values = json.loads("[" + ",".join(r[2] for r in rows) + "]")  # one parse for the lot
                nodes = [(r[0], r[1], v) for r, v in zip(rows, values, strict=True)]
                if text:
                    db.executemany("INSERT INTO node_text (rowid, text) VALUES (?, ?)",
                                   [(d, searchable_text(v, fields.get(t, ()))) for d, t, v in nodes])  # fmt: skip
                words = list(numbered_word_rows(model, nodes))
                db.executemany("INSERT INTO node_words (word, node, type, impact) VALUES (?, ?, ?, ?)", words)
                vocabulary.update(w[0] for w in words)
            db.execute(_WORD_RANK)
            db.executemany("INSERT INTO vocabulary (word, reversed) VALUES (?, ?)", vocabulary_rows(vocabulary))
            db.execute(_VOCABULARY_REVERSED)
        finally:
            db.execute(f"PRAGMA cache_size = {int(cache)}")

    # -- the audit log ----------------------------------------------------------------------------------------
    def append_audit(self, records: Sequence[AuditRecord]) -> None:
        """Append audit records in one transaction, on a connection of the audit writer's own.

        That connection commits with `synchronous=NORMAL`: in WAL mode a record survives a crash of the process
        at once and a power loss from the next checkpoint or durable commit on.
        """
        with self._audit_lock:
            if self._audit_db is None:
                self._audit_db = _connect(self._path, check_same_thread=False, timeout=BUSY_TIMEOUT_S)
                self._audit_db.execute("PRAGMA synchronous = NORMAL")
            db = self._audit_db
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany(
                    "INSERT INTO audit (at, principal, surface, action, target, arguments_digest, outcome, revision, "
                    "duration_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(r.at, r.principal, r.surface, r.action, r.target, r.arguments_digest, r.outcome, r.revision,
                      r.duration_ms) for r in records],
                )  # fmt: skip
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    # -- moving between stores -------------------------------------------------------------------------------
    def restore(self, dump: StoreDump) -> None:
        """Load `dump` into this store, which must hold nothing yet, in one transaction."""
        model = parse_model(json.loads(dump.model), source=f"{self._path}#model")
        with self._transaction() as db:
            if self._max_revision(db) != 0:
                raise StoreError(f"The store {self._path} is not empty; copy into a new store.", path=str(self._path))
            self._model = model
            db.execute("INSERT INTO meta (key, value) VALUES ('model', ?)", (dump.model,))
            if dump.changes_floor:
                db.execute("INSERT INTO meta (key, value) VALUES ('changes_floor', ?)", (str(dump.changes_floor),))
            db.executemany(
                "INSERT INTO nodes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", (self._node_row(n) for n in dump.nodes)
            )
            db.executemany("INSERT INTO edges VALUES (?, ?, ?, ?, ?, ?, ?, ?)", map(edge_row, dump.edges))
            db.executemany(_CHANGE_INSERT, map(change_row, dump.changes))
            db.executemany(f"INSERT INTO audit ({AUDIT_COLUMNS}) VALUES ({', '.join('?' * 10)})", dump.audit)
            db.executemany(f"INSERT INTO model_history ({HISTORY_COLUMNS}) VALUES ({', '.join('?' * 6)})", dump.models)
            db.executemany(f"INSERT INTO proposals ({PROPOSAL_COLUMNS}) VALUES ({', '.join('?' * 13)})",
                           dump.proposals)  # fmt: skip
            if self._model_head(db) is None:  # a dump without history: the recorded model starts it
                db.execute(_RECORDED_MODEL)
            self._model_revision = self._model_head(db)
            self._rebuild_text_index(db, model)

    # -- day-two operations ------------------------------------------------------------------------------------
    def backup(self, target: Path) -> None:
        """Copy the store into the new file `target` with SQLite's online backup: one consistent state, while
        other connections read and write. Written beside `target` first, so `target` is whole or absent."""
        if target.exists():
            raise StoreError(f"{target} exists; back up into a new file.", path=str(target))
        partial = target.with_name(target.name + ".partial")
        source = _connect(self._path, timeout=BUSY_TIMEOUT_S)
        try:
            copy = sqlite3.connect(partial)
            try:
                source.backup(copy)
                copy.execute("PRAGMA journal_mode = DELETE")  # one self-contained file, no -wal beside it
            finally:
                copy.close()
        finally:
            source.close()
        partial.replace(target)

    def close(self) -> None:
        with self._audit_lock:
            if self._audit_db is not None:
                self._audit_db.close()
                self._audit_db = None
        with self._readers_lock:
            idle, self._readers = self._readers or [], None
        for db in idle:
            db.close()
        with self._lock:
            self._db.close()

    # -- plumbing ----------------------------------------------------------------------------------------------
    @contextmanager
    def _transaction(self) -> Generator[sqlite3.Connection]:
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                raise StoreError(f"The store {self._path} is busy or locked: {exc}.", path=str(self._path)) from exc
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
            # our own commit does not move data_version; remember it so `changed()` reports others only
            self._data_version = self._pragma("data_version")

    def _read(self, sql: str, params: Sequence[Any]) -> list[Any]:
        """Every row of one query (all fetched, so the statement is done and holds no snapshot afterwards): on
        this thread's pinned connection (`uncontended`), else on the main connection if no other thread is using
        it, else on an idle read-only connection."""
        pinned: sqlite3.Connection | None = getattr(self._pinned, "db", None)
        if pinned is not None:
            return pinned.execute(sql, params).fetchall()
        if self._lock.acquire(blocking=False):
            try:
                return self._db.execute(sql, params).fetchall()
            finally:
                self._lock.release()
        db = self._borrow_reader()
        try:
            return db.execute(sql, params).fetchall()
        finally:
            self._return_reader(db)

    def _borrow_reader(self) -> sqlite3.Connection:
        """An idle read-only connection, or a new one (with no other thread using it until it is returned)."""
        with self._readers_lock:
            if self._readers is None:
                raise StoreError(f"The store {self._path} is closed.", path=str(self._path))
            if self._readers:
                return self._readers.pop()
        uri = f"{self._path.resolve().as_uri()}?mode=ro"
        return _connect(uri, uri=True, check_same_thread=False, timeout=BUSY_TIMEOUT_S)

    def _return_reader(self, db: sqlite3.Connection) -> None:
        if db.in_transaction:  # a read that failed mid-transaction: end it, so no old snapshot stays open
            db.execute("ROLLBACK")
        with self._readers_lock:
            if self._readers is not None and len(self._readers) < IDLE_READERS:
                self._readers.append(db)
                return
        db.close()

    def _iterate(self, sql: str, params: Sequence[Any], convert: Callable[[Any], Any]) -> Iterator[Any]:
        """Stream rows from a snapshot on a connection of its own, so a long iteration blocks nobody."""
        db = _connect(f"{self._path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            db.execute("BEGIN")
            cursor = db.execute(sql, params)
            while rows := cursor.fetchmany(2000):
                for row in rows:
                    yield convert(row)
        finally:
            db.close()

    def _pragma(self, name: str) -> int:
        return int(self._db.execute(f"PRAGMA {name}").fetchone()[0])

    @staticmethod
    def _max_revision(db: sqlite3.Connection) -> int:
        return int(db.execute("SELECT coalesce(max(revision), 0) FROM changes").fetchone()[0])


class _Puts:
    """Rows of puts not yet written: nodes, (node, indexed before) for the text index, edges."""

    def __init__(self) -> None:
        self.nodes: list[tuple[Any, ...]] = []
        self.text: list[tuple[Node, bool]] = []
        self.edges: list[tuple[Any, ...]] = []

    def clear(self) -> None:
        self.nodes.clear()
        self.text.clear()
        self.edges.clear()


def _access(record: Node | Edge | None) -> tuple[str | None, str | None]:
    """A node state's (visibility, readers as JSON) for the change log's access columns."""
    if not isinstance(record, Node):
        return None, None
    return record.visibility, dumps(list(record.readers)) if record.readers else None


def _path(location: str | Path) -> Path:
    """A SQLite store's file: the path itself, or the path of a `file://` URL."""
    if isinstance(location, str) and location[:7].lower() == "file://":
        return Path(unquote(urlsplit(location).path))
    return Path(location)


class SQLiteBackend:
    """The `canon.stores` backend of paths and `file://` URLs: a SQLite file, the embedded default."""

    def open(self, location: str | Path, model: Model, *, principal: str) -> SQLiteStore:
        return SQLiteStore.open(_path(location), model, principal=principal)

    def open_existing(self, location: str | Path, *, read_only: bool) -> SQLiteStore:
        return SQLiteStore.open_existing(_path(location), read_only=read_only)

    def open_empty(self, location: str | Path, model: Model) -> SQLiteStore:
        return SQLiteStore.open_empty(_path(location), model)

    def exists(self, location: str | Path) -> bool:
        return _path(location).exists()

    def discard(self, location: str | Path) -> None:
        path = _path(location)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


backend = SQLiteBackend()
"""What the `file` entry point of `canon.stores` names."""
