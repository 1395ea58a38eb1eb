"""What the SQLite and the PostgreSQL store do alike, written once over the SQL both speak (ADR 0040).

`SQLStore` is the base of both stores: the model history (recording, applying, following and reading back a
model), the reads and the change feed, a commit, the audit log's page and compaction. A backend gives it its
plumbing (connections, transactions, streaming), its row converters and its `Dialect`: the parameter marker and
the few pieces of SQL that differ (visibility, conditions on properties, the key shortcut, the text search).
`node_filter` and `change_filter` build the WHERE clause of `find_nodes` and of the change feed from those
pieces, so the shape of each rule (which clauses, in which order, with which parameters) is written here only.
"""

from __future__ import annotations

import json
import logging
import threading
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, LiteralString, TypeVar

from core.lang.conditions import Condition
from core.lang.model import Model, parse_model, word_impacts
from core.lang.model_migration import Moved, MoveSql, migrate
from core.lang.model_version import check_successor
from core.lang.ordering import Sort
from core.lang.validation import StateView, Write, plan
from core.store import AUDIT_FIELDS, HISTORY_FIELDS, CommitResult, NodeQuery, StoreDump, UnitOfWork
from core.store.common import (
    Bulk,
    ModelVersion,
    audit_page,
    check_replaced,
    dumps,
    edge_ends,
    model_differs,
    model_info,
    model_version,
    revalidate,
    state_access,
    superseded_file,
    utc_now,
)
from core.store.proposals_sql import PROPOSAL_COLUMNS
from core.store.retention import Compaction, Retention, compaction_floor, cutoff
from core.store.view import DiffPage, DiffPosition
from core.values.audit import AuditQuery
from core.values.errors import GoneError, NotFoundError, StoreError
from core.values.operations import Operation
from core.values.records import Change, Edge, Node, Sight

if TYPE_CHECKING:
    from core.store.past import StoredView

log = logging.getLogger("canon.store")

__all__ = [
    "PREFIX_WORDS",
    "Dialect",
    "SQLStore",
    "SQLView",
    "change_filter",
    "change_row",
    "edge_row",
    "node_filter",
    "numbered_word_rows",
    "text_fields_json",
    "vocabulary_rows",
    "word_rows",
]

NODE_COLUMNS = "id, type, visibility, readers, properties, revision, created_at, updated_at, updated_by"
EDGE_COLUMNS = "type, source, target, properties, revision, created_at, updated_at, updated_by"
CHANGE_COLUMNS = "revision, at, principal, op, kind, key, type, before, after, proposal"
CHANGE_ALL = (f"{CHANGE_COLUMNS}, source, target, before_visibility, before_readers, after_visibility, "
              "after_readers")  # fmt: skip
AUDIT_COLUMNS = ", ".join(AUDIT_FIELDS)
HISTORY_COLUMNS = ", ".join(HISTORY_FIELDS)
EDGE_ROW = "source, type, target, properties, revision, created_at, updated_at, updated_by"  # `edge_row`'s order

PREFIX_WORDS = 32  # the vocabulary's words a prefix stands for in a search, at most (the first in code point order)
JOINT_GROUPS = 2000  # `SQLStore.facet_counts` counts several properties in one scan while they form at most this
#                     many groups of values

Clause = tuple[str, list[Any]]  # a piece of SQL and its parameters, in order


@dataclass(frozen=True)
class Dialect:
    """The SQL that differs between the backends, for `node_filter`, `change_filter` and `SQLStore`."""

    mark: LiteralString  # the parameter placeholder: "?" or "%s"
    true: str  # a condition that always holds
    sight: Callable[[Sight, str, str], Clause]  # (sight, visibility column, readers column): the sight sees it
    condition: Callable[[Condition], Clause]  # a node's properties meet the condition (`Condition.matches`)
    key_in: Callable[[Sequence[str]], Clause]  # the node's `key` column is one of these
    type_is: Callable[[NodeQuery, bool], str]  # the node is of `query.type` (bool: a key condition finds it)
    text: Callable[[NodeQuery, bool], Clause]  # the node holds `query.text` (bool: the text index holds exactly
    #                                             `query.text_fields`)
    sort: Callable[[Sort], str]  # a property's sort value (`core.lang.ordering.Sort.value`): a number or a string
    #                               (compared by code point), NULL when absent or of another JSON type
    facet: Callable[[str], str]  # a property's value as its facet key (`core.lang.conditions.facet_key`), or NULL
    #                              when it is absent, an array or an object; read as its conditions read it
    binary: LiteralString = ""  # after the change log's `key` column: compare and order it by code point, on its
    #                             index (`core.store.past`)


def sorted_after(dialect: Dialect, order: Sequence[Sort], position: Sequence[Any], after: str | None) -> Clause:
    """The nodes strictly after the keyset position (`position`: the sort values of the node `after`, then its id)
    in `order` (`core.lang.ordering`: each property ascending or descending, absent last, ties by id); every node
    for a first page (`after` None)."""
    if after is None:
        return dialect.true, []
    m = dialect.mark
    alternatives: list[str] = []
    params: list[Any] = []
    equal: list[str] = []  # the sort values before this one are the position's
    equal_params: list[Any] = []
    for sort, value in zip(order, position, strict=True):
        expression = dialect.sort(sort)
        if value is not None:  # beyond a value: past it in its direction, or absent (absent sorts last)
            beyond = f"({expression} {'<' if sort.descending else '>'} {m} OR {expression} IS NULL)"
            alternatives.append(" AND ".join([*equal, beyond]))
            params += [*equal_params, value]
            equal.append(f"{expression} = {m}")
            equal_params.append(value)
        else:  # nothing sorts beyond an absent value but other absent ones, by the next sort value or the id
            equal.append(f"{expression} IS NULL")
    alternatives.append(" AND ".join([*equal, f"id > {m}"]))
    params += [*equal_params, after]
    return "(" + " OR ".join(f"({a})" for a in alternatives) + ")", params


def node_filter(dialect: Dialect, query: NodeQuery, key_property: str | None, *, indexed: bool) -> Clause:
    """The condition (and its parameters) selecting the nodes of `query`; agrees with `Condition.matches`,
    `Sight.sees` and the text search of `NodeQuery.text`.

    An equality (or `in`) on the type's key property with text values also says `key IN (...)`: the `key`
    column holds exactly that text, so the answer is the same, found through the unique (type, key) index
    instead of a scan of the type (`email = …` among 100,000 people)."""
    clauses, params = [dialect.true], list[Any]()
    if query.sight is not None:
        sql, values = dialect.sight(query.sight, "visibility", "readers")
        clauses.append(sql)
        params += values
    if query.id_prefix:
        clauses.append(f"id >= {dialect.mark} AND id < {dialect.mark}")
        params += [query.id_prefix, query.id_prefix + "\U0010ffff"]
    by_key = False
    for c in query.conditions:
        sql, values = dialect.condition(c)
        clauses.append(sql)
        params += values
        keys = [c.value] if c.op == "eq" else c.value if c.op == "in" else None
        if query.type is not None and c.property == key_property and keys and all(isinstance(k, str) for k in keys):
            sql, values = dialect.key_in(keys)
            clauses.append(sql)
            params += values
            by_key = True
    if query.type is not None:
        clauses.append(dialect.type_is(query, by_key))
        params.append(query.type)
    if query.text:
        sql, values = dialect.text(query, indexed)
        clauses.append(sql)
        params += values
    return " AND ".join(clauses), params


def change_filter(dialect: Dialect, since: int, sight: Sight | None, until: int | None) -> Clause:
    """The changes after `since` (up to `until`) that `sight` may see something of.

    A node change: its state before or after is visible (`core.dispatch.access.change_for` hides the other one). An edge
    change: both ends are visible now, by the nodes table. A model change: always. `core.dispatch.access.sees_change`
    decides the same for one change; a test holds the two to agreement."""
    clauses, params = [f"revision > {dialect.mark}"], list[Any]([since])
    if until is not None:
        clauses.append(f"revision <= {dialect.mark}")
        params.append(until)
    if sight is not None:
        before, before_params = dialect.sight(sight, "before_visibility", "before_readers")
        after, after_params = dialect.sight(sight, "after_visibility", "after_readers")
        end, end_params = dialect.sight(sight, "n.visibility", "n.readers")
        ends = " AND ".join(f"EXISTS (SELECT 1 FROM nodes n WHERE n.id = changes.{column} AND {end})"
                            for column in ("source", "target"))  # fmt: skip
        clauses.append(f"(kind = 'model' OR (kind = 'node' AND ({before} OR {after})) OR (kind = 'edge' AND {ends}))")
        params += [*before_params, *after_params, *end_params, *end_params]
    return " AND ".join(clauses), params


def text_fields_json(model: Model) -> str:
    """The text properties of each node type and the weighed ones of the word index, as the store records what its
    text indexes hold (a store whose record differs rebuilds them when it opens)."""
    fields = {name: list(t.text) for name, t in model.node_types.items()}
    weighed = {name: [list(w) for w in t.weights] for name, t in model.node_types.items()}
    return json.dumps({"arrays": "lines", "fields": fields, "words": weighed}, sort_keys=True)  # arrays: lines


def vocabulary_rows(words: Iterable[str]) -> list[tuple[str, str]]:
    """The vocabulary's rows of `words`: (word, reversed word), for finding a word by its end (`words_ending`)."""
    return [(w, w[::-1]) for w in sorted(set(words))]


_K = TypeVar("_K")


def word_rows(model: Model, nodes: Iterable[Node]) -> Iterator[tuple[str, str, str, int]]:
    """The word index's rows of `nodes`: (word, node id, node type, impact), from `core.lang.model.word_impacts`
    (in thousandths: a small integer is stored in two bytes, and only orders a word's nodes). A store holds each
    row under the node's number (`numbered_word_rows`) rather than its id."""
    return numbered_word_rows(model, ((n.id, n.type, n.properties) for n in nodes))


def numbered_word_rows(
    model: Model, nodes: Iterable[tuple[_K, str, Mapping[str, Any]]]
) -> Iterator[tuple[str, _K, str, int]]:
    """`word_rows` of (key, type, properties) triples, each row under the triple's key (the node's number in the
    word index, ADR 0065); a node's rows in its words' code point order, so rows of nodes taken in key order come
    in the order of the index's primary key (node, word)."""
    for key, type_, properties in nodes:
        node_type = model.node_types.get(type_)
        if node_type is not None:
            yield from [(word, key, type_, impact)
                        for word, impact in sorted(word_impacts(node_type.weights, properties).items())]  # fmt: skip


def edge_row(e: Edge) -> tuple[Any, ...]:
    """An edge in `EDGE_ROW`'s order, its properties as JSON text."""
    return (e.source, e.type, e.target, dumps(dict(e.properties)), e.revision, e.created_at, e.updated_at,
            e.updated_by)  # fmt: skip


def change_row(c: Change) -> tuple[Any, ...]:
    """A logged change in `CHANGE_ALL`'s order (its access columns derived as a commit writes them)."""
    ends = edge_ends(c.key) if c.kind == "edge" else (None, None)
    return (c.revision, c.at, c.principal, c.op, c.kind, c.key, c.type,
            dumps(c.before) if c.before is not None else None, dumps(c.after) if c.after is not None else None,
            c.proposal, *ends, *state_access(c.kind, c.before), *state_access(c.kind, c.after))  # fmt: skip


class SQLView:
    """`StateView` over a write transaction's connection (`SQLStore._view`): what validation reads, on the state
    the transaction commits on."""

    def __init__(self, db: Any, store: type[SQLStore]) -> None:
        self.db, self.mark, self.to_node, self.to_edge = db, store.DIALECT.mark, store.to_node, store.to_edge

    def node(self, id: str) -> Node | None:
        row = self.db.execute(f"SELECT {NODE_COLUMNS} FROM nodes WHERE id = {self.mark}", (id,)).fetchone()
        return self.to_node(row) if row else None

    def node_type(self, id: str) -> str | None:
        row = self.db.execute(f"SELECT type FROM nodes WHERE id = {self.mark}", (id,)).fetchone()
        return row[0] if row else None

    def node_id_by_key(self, type: str, key: str) -> str | None:
        m = self.mark
        row = self.db.execute(f"SELECT id FROM nodes WHERE type = {m} AND key = {m}", (type, key)).fetchone()
        return row[0] if row else None

    def edge(self, type: str, source: str, target: str) -> Edge | None:
        m = self.mark
        sql = f"SELECT {EDGE_COLUMNS} FROM edges WHERE source = {m} AND type = {m} AND target = {m}"
        row = self.db.execute(sql, (source, type, target)).fetchone()
        return self.to_edge(row) if row else None

    def out_targets(self, source: str, type: str) -> list[str]:
        m = self.mark
        rows = self.db.execute(f"SELECT target FROM edges WHERE source = {m} AND type = {m}", (source, type))
        return [r[0] for r in rows]

    def in_sources(self, target: str, type: str) -> list[str]:
        m = self.mark
        rows = self.db.execute(f"SELECT source FROM edges WHERE target = {m} AND type = {m}", (target, type))
        return [r[0] for r in rows]

    def incident_edges(self, id: str) -> list[Edge]:
        """Every edge at the node, each once (a loop from the node to itself too)."""
        m = self.mark
        rows = self.db.execute(
            f"SELECT {EDGE_COLUMNS} FROM edges WHERE source = {m} "
            f"UNION ALL SELECT {EDGE_COLUMNS} FROM edges WHERE target = {m} AND source <> {m}",
            (id, id, id),
        )
        return [self.to_edge(r) for r in rows]


def _marked(sql: str, mark: str) -> str:
    return sql if mark == "?" else sql.replace("?", mark)


class _Work:
    """A `UnitOfWork` over one write transaction's connection."""

    def __init__(self, db: Any, mark: str) -> None:
        self._db, self._mark = db, mark

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return int(self._db.execute(_marked(sql, self._mark), params).rowcount)

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return list(self._db.execute(_marked(sql, self._mark), params).fetchall())


class SQLStore(ABC):
    """The part of a canon store that is the same over SQLite and PostgreSQL (see the module's text).

    Each subclass sets `_model`, `_model_revision` and `_lock` in its constructor and provides the abstract
    methods; a write transaction's connection (`_transaction`) is used as `db.execute(sql, params)`."""

    DIALECT: ClassVar[Dialect]
    MOVES: ClassVar[MoveSql]  # how a declared rename moves stored records (`core.lang.model_migration`)

    _model: Model
    _model_revision: int | None  # the revision that recorded `_model` (`_model_in`)
    _lock: threading.Lock | threading.RLock
    _indexed_fields: tuple[Model | None, dict[str, tuple[str, ...]]] = (None, {})

    # -- what each backend provides ------------------------------------------------------------------------------
    @property
    @abstractmethod
    def location(self) -> str: ...

    @abstractmethod
    def _read(self, sql: str, params: Sequence[Any]) -> list[Any]:
        """Every row of one statement (inside this thread's write transaction, if it is in one)."""

    @abstractmethod
    def _iterate(self, sql: str, params: Sequence[Any], convert: Callable[[Any], Any]) -> Iterator[Any]:
        """Rows of one statement streamed from one snapshot, each through `convert`."""

    @abstractmethod
    def _transaction(self) -> AbstractContextManager[Any]:
        """A write transaction (one at a time across every process on the store): committed when the block
        ends, rolled back if it raises."""

    @staticmethod
    @abstractmethod
    def _max_revision(db: Any) -> int: ...

    @abstractmethod
    def nodes(self, ids: Sequence[str]) -> dict[str, Node]:
        """The stored nodes among `ids`, by id."""

    @abstractmethod
    def _rebuild_text_index(self, db: Any, model: Model) -> None: ...

    @abstractmethod
    def _index_words(self, db: Any, model: Model) -> None:
        """Fill the word index anew from every node (`word_rows`) and its vocabulary from their words."""

    @staticmethod
    @abstractmethod
    def _numbered(sight: bool) -> tuple[str, str]:
        """How a word index row `p` reaches its node: the joins after `node_words p` (with `nodes n` among them
        when `sight`, or always) and the expression of the node's id (ADR 0065: rows hold the node's number)."""

    def rebuild_word_index(self) -> None:
        """Build the word index anew from the stored nodes, in one write transaction (opening a store whose index
        was built for another model, and applying a model, rebuild it with the text index; the retrieval benchmark
        times this)."""
        with self._transaction() as db:
            self._index_words(db, self._model)

    @abstractmethod
    def _update_keys(self, db: Any, model: Model) -> None:
        """Set every node's `key` column from its type's key property under `model`."""

    @abstractmethod
    def _json(self, value: Any) -> Any:
        """`value` as a parameter of a JSON column."""

    @abstractmethod
    def _audit_writable(self, db: Any) -> AbstractContextManager[None]:
        """Lift the audit log's append-only rule inside this write transaction only (for `compact`)."""

    @abstractmethod
    def node_types(self, ids: Sequence[str]) -> dict[str, str]:
        """The stored types of the nodes among `ids`, by id."""

    @abstractmethod
    def edges(self, refs: Sequence[tuple[str, str, str]]) -> dict[tuple[str, str, str], Edge]:
        """The stored edges among `refs` ((type, source, target)), by ref."""

    @abstractmethod
    def key_owners(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """The id of the node holding each (type, key) among `keys`."""

    @abstractmethod
    def far_ends(self, ends: Sequence[tuple[str, str]], outgoing: bool) -> dict[tuple[str, str], list[str]]:
        """For each (edge type, node) among `ends`, the nodes its stored edges of that type reach (`outgoing`) or
        come from."""

    def _view(self, db: Any) -> StateView:
        return SQLView(db, type(self))

    def _bulk_in(self, db: Any, apply: Callable[[list[Write]], object], principal: str) -> Bulk:
        """An import's `Bulk` in the write transaction `db`: its batches' checks fetch on this thread, in it."""
        fetch = (self.nodes, self.node_types, self.edges, self.key_owners, self.far_ends)
        return Bulk(self._model_in(db), self._view(db), apply, self._max_revision(db), principal, fetch)

    @abstractmethod
    def _apply(
        self,
        db: Any,
        writes: list[Write],
        principal: str,
        progress: Callable[[str, int, int], None] | None,
        *,
        proposal: str | None = None,
    ) -> list[Change]:
        """Write the planned changes and log each (with `proposal`, the merged proposal's id, on every entry)."""

    @staticmethod
    @abstractmethod
    def to_node(row: Any) -> Node:
        """A node from a row of `NODE_COLUMNS`."""

    @staticmethod
    @abstractmethod
    def to_edge(row: Any) -> Edge:
        """An edge from a row of `EDGE_COLUMNS`."""

    @staticmethod
    @abstractmethod
    def to_change(row: Any) -> Change:
        """A change from a row of `CHANGE_COLUMNS`."""

    def _to_nodes(self, rows: Sequence[Any]) -> list[Node]:
        return [self.to_node(row) for row in rows]

    @abstractmethod
    def _announce(self, db: Any, revision: int) -> None:
        """Tell other processes, once this write transaction commits, that `revision` is in (if the backend
        can)."""

    @abstractmethod
    def _committed(self, revision: int) -> None:
        """This process's own commit reached `revision` (no news for `changed()`)."""

    # -- the model ---------------------------------------------------------------------------------------------
    @property
    def model(self) -> Model:
        return self._model

    def _record_model(self, model: Model, principal: str) -> None:
        """Record `model` in a store that has none. A store whose model differs opens on its own model if `model`
        is an older one of its history (the file a server started from, before a model was applied: one warning
        says how to update it), and is refused otherwise (`apply_model` is the one way a store's model
        changes)."""
        rows = self._read("SELECT value FROM meta WHERE key = 'model'", ())
        if not rows:
            self.apply_model(model, principal=principal)
        elif rows[0][0] != model.canonical_json:
            recorded = json.loads(rows[0][0])
            if not self.superseded(model):
                raise model_differs(self.location, recorded, model)
            log.warning("%s", superseded_file(self.location, recorded, model))
            self._model = parse_model(recorded, source=f"{self.location}#model")
        self._model_revision = self._model_head()

    def superseded(self, model: Model) -> bool:
        """Whether `model` is an older entry of the store's model history: applied once, replaced since."""
        m = self.DIALECT.mark
        rows = self._read(f"SELECT 1 FROM model_history WHERE document = {m} AND revision < "
                          "(SELECT max(revision) FROM model_history) LIMIT 1", (model.canonical_json,))  # fmt: skip
        return bool(rows)

    def apply_model(
        self,
        model: Model,
        *,
        principal: str,
        replaces: str | None = None,
        summary: Mapping[str, Any] | None = None,
        check: Callable[[], None] | None = None,
    ) -> int:
        """Make `model` the store's model in one write transaction, and return the revision that records it (the
        current one if it is the store's model already); see `core.store.Store.apply_model`."""
        m = self.DIALECT.mark
        with self._transaction() as db:
            row = db.execute("SELECT value FROM meta WHERE key = 'model'").fetchone()
            if row is not None and row[0] == model.canonical_json:
                return self._max_revision(db)
            previous = json.loads(row[0]) if row is not None else None
            moved: tuple[Moved, ...] = ()
            if row is not None and previous is not None:
                check_replaced(self.location, row[0], replaces)
                check_successor(previous, model)
                # rename migrations (core.lang.model_migration) move the data here: after the version check, before
                # every stored record is re-validated under the new model
                moved = migrate(previous, model, db.execute, self.MOVES)
                revalidate(
                    model,
                    map(self.to_node, db.execute(f"SELECT {NODE_COLUMNS} FROM nodes ORDER BY id")),
                    map(self.to_edge, db.execute(f"SELECT {EDGE_COLUMNS} FROM edges ORDER BY source, type, target")),
                    self.location,
                )
                self._update_keys(db, model)  # a type's key property may have changed
            self._set_meta(db, "model", model.canonical_json)
            self._rebuild_text_index(db, model)
            revision, at = self._max_revision(db) + 1, utc_now()
            db.execute(
                f"INSERT INTO changes ({CHANGE_COLUMNS}) "
                f"VALUES ({m}, {m}, {m}, 'model', 'model', {m}, NULL, {m}, {m}, NULL)",
                (revision, at, principal, model.id, self._json(model_info(previous)) if previous else None,
                 self._json(model_info(model.document, moved))),
            )  # fmt: skip
            self._announce(db, revision)
            db.execute(
                f"INSERT INTO model_history ({HISTORY_COLUMNS}) VALUES ({m}, {m}, {m}, {m}, {m}, {m})",
                (revision, at, principal, model.version, model.canonical_json,
                 self._json(summary) if summary else None),
            )  # fmt: skip
            if check is not None:  # last, before the commit: a caller told its call failed finds nothing applied
                check()
            self._model, self._model_revision = model, revision
        return revision

    def model_history(self) -> list[ModelVersion]:
        """Every model the store recorded, oldest first."""
        rows = self._read("SELECT revision, at, principal, version, summary FROM model_history ORDER BY revision", ())
        return [model_version(row) for row in rows]

    def model_at(self, revision: int) -> Model:
        """The store's model at `revision` (`NotFoundError` before the first one)."""
        rows = self._read(
            "SELECT revision, document FROM model_history "
            f"WHERE revision <= {self.DIALECT.mark} ORDER BY revision DESC LIMIT 1",
            (revision,),
        )
        if not rows:
            raise NotFoundError("model at revision", str(revision))
        return parse_model(json.loads(rows[0][1]), source=f"{self.location}#model@{rows[0][0]}")

    def _model_head(self, db: Any = None) -> int | None:
        """The revision that recorded the store's current model (None: no model yet)."""
        sql = "SELECT max(revision) FROM model_history"
        row = db.execute(sql).fetchone() if db is not None else self._read(sql, ())[0]
        return None if row is None or row[0] is None else int(row[0])

    def _model_in(self, db: Any) -> Model:
        """The model recorded in the store as of this write transaction, re-read if another process applied one
        since: a write is validated under exactly the model current at its revision, never a stale one."""
        head = self._model_head(db)
        if head is not None and head != self._model_revision:
            sql = f"SELECT document FROM model_history WHERE revision = {self.DIALECT.mark}"
            (document,) = db.execute(sql, (head,)).fetchone()
            self._model = parse_model(json.loads(document), source=f"{self.location}#model")
            self._model_revision = head
        return self._model

    def follow_model(self) -> Model:
        """Re-read the model recorded in the store (another process may have applied one since) and use it from
        now on for reads as well as writes (a write re-reads it in its transaction anyway); returns it."""
        rows = self._read("SELECT revision, document FROM model_history ORDER BY revision DESC LIMIT 1", ())
        if rows and rows[0][0] != self._model_revision:
            model = parse_model(json.loads(rows[0][1]), source=f"{self.location}#model")
            with self._lock:
                if self._model_revision is None or rows[0][0] > self._model_revision:  # never back to an older one
                    self._model, self._model_revision = model, int(rows[0][0])
        return self._model

    def stored_model(self) -> Model:
        """The model recorded in the store (another process may have changed it)."""
        rows = self._read("SELECT value FROM meta WHERE key = 'model'", ())
        if not rows:
            raise StoreError(f"The store {self.location} records no model.", path=self.location)
        return parse_model(json.loads(rows[0][0]), source=f"{self.location}#model")

    def _ensure_text_index(self) -> None:
        """Rebuild the text index if it was built for other text properties than the model's (or never)."""
        rows = self._read("SELECT value FROM meta WHERE key = 'text_index'", ())
        if rows and rows[0][0] == text_fields_json(self._model):
            return
        with self._transaction() as db:
            self._rebuild_text_index(db, self._model)

    def _set_meta(self, db: Any, key: str, value: str) -> None:
        m = self.DIALECT.mark
        db.execute(
            f"INSERT INTO meta (key, value) VALUES ({m}, {m}) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    # -- reading -----------------------------------------------------------------------------------------------
    def revision(self) -> int:
        return int(self._read("SELECT coalesce(max(revision), 0) FROM changes", ())[0][0])

    def node(self, id: str) -> Node | None:
        rows = self._read(f"SELECT {NODE_COLUMNS} FROM nodes WHERE id = {self.DIALECT.mark}", (id,))
        return self.to_node(rows[0]) if rows else None

    def edge(self, type: str, source: str, target: str) -> Edge | None:
        m = self.DIALECT.mark
        rows = self._read(
            f"SELECT {EDGE_COLUMNS} FROM edges WHERE source = {m} AND type = {m} AND target = {m}",
            (source, type, target),
        )
        return self.to_edge(rows[0]) if rows else None

    def iter_nodes(self, type: str | None = None) -> Iterator[Node]:
        if type is None:
            yield from self._iterate(f"SELECT {NODE_COLUMNS} FROM nodes ORDER BY id", (), self.to_node)
        else:
            sql = f"SELECT {NODE_COLUMNS} FROM nodes WHERE type = {self.DIALECT.mark} ORDER BY id"
            yield from self._iterate(sql, (type,), self.to_node)

    def iter_edges(self) -> Iterator[Edge]:
        yield from self._iterate(f"SELECT {EDGE_COLUMNS} FROM edges ORDER BY source, type, target", (), self.to_edge)

    def iter_topology(self) -> Iterator[tuple[str, str, str]]:
        """(type, source, target) of every edge, cheaper than `iter_edges` for building an index."""
        yield from self._iterate("SELECT type, source, target FROM edges", (), tuple)

    def find_nodes(self, query: NodeQuery, *, after: str | None, limit: int) -> tuple[list[Node], int]:
        """One page of matching nodes in id order (after the id `after`) and how many match in all."""
        m = self.DIALECT.mark
        node_type = self._model.node_types.get(query.type) if query.type is not None else None
        key_property = node_type.key if node_type is not None else None
        indexed = query.text_fields == self._text_fields()
        where, params = node_filter(self.DIALECT, query, key_property, indexed=indexed)
        if query.order:
            start, start_params = sorted_after(self.DIALECT, query.order, query.position, after)
            sorts = [(self.DIALECT.sort(o), " DESC" if o.descending else "") for o in query.order]
            order = ", ".join(f"({value} IS NULL), {value}{way}" for value, way in sorts)  # absent last
            rows = self._read(
                f"SELECT {NODE_COLUMNS} FROM nodes WHERE {where} AND {start} ORDER BY {order}, id LIMIT {m}",
                [*params, *start_params, limit],
            )
        else:
            rows = self._read(
                f"SELECT {NODE_COLUMNS} FROM nodes WHERE {where} AND id > {m} ORDER BY id LIMIT {m}",
                [*params, after or "", limit],
            )
        if after is None and len(rows) < limit:  # the first page holds every match: no need to count again
            total = len(rows)
        else:
            total = self._read(f"SELECT count(*) FROM nodes WHERE {where}", params)[0][0]
        return self._to_nodes(rows), int(total)

    def facet_counts(
        self, query: NodeQuery, names: Sequence[str], *, limit: int
    ) -> dict[str, tuple[dict[str, int], bool]]:
        """For each property of `names`, how many of `query`'s nodes (all of them, the ones `find_nodes`' total
        counts) hold each scalar value, by `facet_key`, most first (then by key, code point order), at most
        `limit` of them, and whether more were cut. A node without the property is not counted.

        Two or more properties are counted in one scan, grouped by all of them at once (a node's properties are
        read once for all), each property's counts summed from those groups; when the groups are more than
        `JOINT_GROUPS`, each property is grouped on its own instead."""
        node_type = self._model.node_types.get(query.type) if query.type is not None else None
        key_property = node_type.key if node_type is not None else None
        indexed = query.text_fields == self._text_fields()
        where, params = node_filter(self.DIALECT, query, key_property, indexed=indexed)
        keys = [f"{self.DIALECT.facet(name)}{self.DIALECT.binary}" for name in names]  # names: identifiers
        m = self.DIALECT.mark
        if len(names) > 1:
            groups = ", ".join(str(i + 1) for i in range(len(keys)))
            rows = self._read(f"SELECT {', '.join(keys)}, count(*) FROM nodes WHERE {where} GROUP BY {groups} "
                              f"LIMIT {m}", [*params, JOINT_GROUPS + 1])  # fmt: skip
            if len(rows) <= JOINT_GROUPS:
                found: dict[str, tuple[dict[str, int], bool]] = {}
                for i, name in enumerate(names):
                    summed = Counter[str]()
                    for row in rows:
                        if row[i] is not None:
                            summed[str(row[i])] += int(row[-1])
                    ranked = sorted(summed.items(), key=lambda kv: (-kv[1], kv[0]))
                    found[name] = (dict(ranked[:limit]), len(ranked) > limit)
                return found
        found = {}
        for name, key in zip(names, keys, strict=True):
            rows = self._read(
                f"SELECT {key} AS k, count(*) AS n FROM nodes WHERE {where} AND {key} IS NOT NULL "
                f"GROUP BY k ORDER BY n DESC, k LIMIT {m}",
                [*params, limit + 1],
            )
            found[name] = ({str(k): int(n) for k, n in rows[:limit]}, len(rows) > limit)
        return found

    def _text_fields(self) -> dict[str, tuple[str, ...]]:
        """The text properties of each node type that the text index holds (this store's model's)."""
        model = self._model
        if self._indexed_fields[0] is not model:
            self._indexed_fields = (model, {name: t.text for name, t in model.node_types.items()})
        return self._indexed_fields[1]

    def words_beginning(self, prefix: str, limit: int) -> list[str]:
        """The word index's words that begin with `prefix`, the first `limit` in code point order (from its
        vocabulary: every word a node has held since the index was last built)."""
        m = self.DIALECT.mark
        rows = self._read(f"SELECT word FROM vocabulary WHERE word >= {m} AND word < {m} ORDER BY word LIMIT {m}",
                          [prefix, prefix + "\U0010ffff", limit])  # fmt: skip
        return [str(r[0]) for r in rows]

    def words_ending(self, suffix: str, limit: int) -> list[str]:
        """The vocabulary's words that end with `suffix`, the first `limit` by their reversed spelling."""
        m = self.DIALECT.mark
        backwards = suffix[::-1]
        rows = self._read(f"SELECT word FROM vocabulary WHERE reversed >= {m} AND reversed < {m} ORDER BY reversed "
                          f"LIMIT {m}", [backwards, backwards + "\U0010ffff", limit])  # fmt: skip
        return [str(r[0]) for r in rows]

    def prefix_postings(
        self, prefixes: Sequence[str], types: Sequence[str] | None, sight: Sight | None, limit: int
    ) -> list[tuple[list[tuple[str, str, float]], bool]]:
        """For each of `prefixes`: `word_postings` of the vocabulary's first `PREFIX_WORDS` words that begin with
        it, and whether any was cut (more such words, or more nodes of a word). PostgreSQL answers it in one
        statement (`PostgresStore.prefix_postings`); this is the same, a statement or two a prefix."""
        out: list[tuple[list[tuple[str, str, float]], bool]] = []
        for prefix in prefixes:
            spelled = self.words_beginning(prefix, PREFIX_WORDS + 1)
            rows, more = self.word_postings(spelled[:PREFIX_WORDS], types, sight, limit)
            out.append((rows, more or len(spelled) > PREFIX_WORDS))
        return out

    def word_postings(
        self, words: Sequence[str], types: Sequence[str] | None, sight: Sight | None, limit: int
    ) -> tuple[list[tuple[str, str, float]], bool]:
        """For each of `words`, at most `limit` of the nodes the caller may see (of `types`, when given) that hold
        it, the most about it first, as (word, node id, impact) rows; and whether a word had more. Each word's rows
        come from its index in impact order, so the cost is bounded by `limit`, not by how many nodes hold it."""
        if not words:
            return [], False
        m = self.DIALECT.mark
        join, id_ = self._numbered(sight is not None)
        where, params = "", list[Any]()
        if types is not None:
            where += f" AND p.type IN ({', '.join([m] * len(types))})"
            params += list(types)
        if sight is not None:
            seen, seen_params = self.DIALECT.sight(sight, "n.visibility", "n.readers")
            where = f"{where} AND {seen}"
            params += seen_params
        one = (f"SELECT * FROM (SELECT p.word, {id_}, p.impact FROM node_words p{join} WHERE p.word = {m}{where} "
               f"ORDER BY p.impact DESC, p.node LIMIT {m}) AS w")  # fmt: skip
        rows = self._read(" UNION ALL ".join(f"{one}{i}" for i in range(len(words))),
                          [v for word in words for v in (word, *params, limit + 1)])  # fmt: skip
        out: list[tuple[str, str, float]] = []
        taken: Counter[str] = Counter()
        for word, id_, impact in rows:
            taken[word] += 1
            if taken[word] <= limit:
                out.append((str(word), str(id_), float(impact)))
        return out, any(n > limit for n in taken.values())

    def count_changes(self, since: int, *, sight: Sight | None = None, until: int | None = None) -> int:
        where, params = change_filter(self.DIALECT, since, sight, until)
        return int(self._read(f"SELECT count(*) FROM changes WHERE {where}", params)[0][0])

    def changes(self, since: int, limit: int, *, sight: Sight | None = None, until: int | None = None) -> list[Change]:
        where, params = change_filter(self.DIALECT, since, sight, until)
        sql = f"SELECT {CHANGE_COLUMNS} FROM changes WHERE {where} ORDER BY revision LIMIT {self.DIALECT.mark}"
        return [self.to_change(r) for r in self._read(sql, [*params, limit])]

    def view(self, revision: int | None = None) -> StoredView:
        """The graph at `revision` (None: now), read from the change log (`core.store.past`)."""
        from core.store.past import open_view

        return open_view(self, revision)

    def diff_revisions(
        self,
        since: int,
        until: int | None = None,
        *,
        types: Sequence[str] | None = None,
        ids: Sequence[str] | None = None,
        sight: Sight | None = None,
        limit: int = 100,
        after: DiffPosition | None = None,
    ) -> DiffPage:
        """What differs between revisions `since` and `until` (None: now), one page (`core.store.past`)."""
        from core.store.past import diff_revisions

        return diff_revisions(self, since, until, types=types, ids=ids, sight=sight, limit=limit, after=after)

    # -- writing -----------------------------------------------------------------------------------------------
    def commit(
        self,
        operations: Sequence[Operation],
        *,
        principal: str,
        dry_run: bool = False,
        progress: Callable[[str, int, int], None] | None = None,
        guard: Callable[[StateView, Sequence[Operation]], None] | None = None,
        then: Callable[[UnitOfWork, int], None] | None = None,
        proposal: str | None = None,
    ) -> CommitResult:
        """Validate and commit a batch in one write transaction; see `core.lang.validation.plan` for the rules.

        `guard` (authorisation) runs first, inside the same transaction, on the same state `plan` reads; `then`
        runs last in it, given the transaction (`UnitOfWork`) and the revision after the batch (a proposal's merge
        records itself so, all or nothing with the batch). `proposal` is logged on every change-log entry the batch
        writes (the merged proposal's id). A dry run answers the planned writes (`CommitResult.planned`).
        """
        with self._transaction() as db:
            if guard is not None:
                guard(self._view(db), operations)
            base = self._max_revision(db)
            writes = plan(
                self._model_in(db), operations, self._view(db), base_revision=base, principal=principal,
                now=utc_now(), progress=progress,
            )  # fmt: skip
            changes = [] if dry_run else self._apply(db, writes, principal, progress, proposal=proposal)
            if then is not None and not dry_run:
                then(_Work(db, self.DIALECT.mark), changes[-1].revision if changes else base)
        made_by = tuple(w.index for w in writes) if changes else ()
        revision = changes[-1].revision if changes else base
        self._committed(revision)
        return CommitResult(revision, tuple(changes), made_by, tuple(writes) if dry_run else ())

    @contextmanager
    def unit_of_work(self) -> Generator[UnitOfWork]:
        """A write transaction for the tables beside the graph (`core.store`'s docstring)."""
        with self._transaction() as db:
            yield _Work(db, self.DIALECT.mark)

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Every row of one query on the tables beside the graph, `?` markers (`core.store`'s docstring)."""
        return self._read(_marked(sql, self.DIALECT.mark), params)

    # -- the audit log ---------------------------------------------------------------------------------------
    def audit_records(self, query: AuditQuery, *, before: int | None, limit: int) -> tuple[list[dict[str, Any]], int]:
        """One page of audit records, newest first (ids below `before`), and how many match in all."""
        return audit_page(self._read, query, AUDIT_FIELDS, before=before, limit=limit, mark=self.DIALECT.mark)

    # -- moving between stores -------------------------------------------------------------------------------
    def dump(self) -> StoreDump:
        """Everything the store holds, streamed (`restore` loads it into another store, of either backend)."""
        return StoreDump(
            model=self._read("SELECT value FROM meta WHERE key = 'model'", ())[0][0],
            nodes=self.iter_nodes(),
            edges=self.iter_edges(),
            changes=self._iterate(f"SELECT {CHANGE_COLUMNS} FROM changes ORDER BY revision", (), self.to_change),
            audit=self._iterate(f"SELECT {AUDIT_COLUMNS} FROM audit ORDER BY id", (), tuple),
            models=self._iterate(f"SELECT {HISTORY_COLUMNS} FROM model_history ORDER BY revision", (), self.to_history),
            changes_floor=self.changes_floor(),
            proposals=self._iterate(f"SELECT {PROPOSAL_COLUMNS} FROM proposals ORDER BY id", (), tuple),
        )

    @staticmethod
    def to_history(row: Any) -> tuple[Any, ...]:
        """A row of `HISTORY_COLUMNS` as `StoreDump.models` holds it (the summary as JSON text)."""
        return tuple(row)

    # -- day-two operations ------------------------------------------------------------------------------------
    def revision_at(self, moment: str) -> int:
        """The revision a read `as_of` the time `moment` (UTC, milliseconds, Z: as the change log writes it) reads
        at: the last change logged at or before it; `GoneError` when the log keeps none (0 for a log never
        compacted and empty)."""
        m = self.DIALECT.mark
        rows = self._read(f"SELECT max(revision) FROM changes WHERE at <= {m}", (moment,))
        floor = self.changes_floor()
        if rows and rows[0][0] is not None:
            return int(rows[0][0])
        if floor == 0 and self.revision() == 0:
            return 0
        raise GoneError(since=floor, oldest=floor + 1, as_of=moment)

    def changes_floor(self) -> int:
        """The revision through which `compact` removed the change log (0: it holds every revision)."""
        rows = self._read("SELECT value FROM meta WHERE key = 'changes_floor'", ())
        return int(rows[0][0]) if rows else 0

    def compact(self, retention: Retention, now: datetime | None = None) -> Compaction:
        """Remove what `retention` lets go, in one write transaction; the audit log's append-only rule is lifted
        inside that transaction only (`_audit_writable`)."""
        m = self.DIALECT.mark
        with self._transaction() as db:
            row = db.execute("SELECT value FROM meta WHERE key = 'changes_floor'").fetchone()
            floor = int(row[0]) if row else 0

            def newest_before(at: str) -> int:
                found = db.execute(f"SELECT coalesce(max(revision), 0) FROM changes WHERE at < {m}", (at,)).fetchone()
                return int(found[0]) if found else 0

            target = compaction_floor(retention, self._max_revision(db), newest_before, now)
            removed = 0
            if target > floor:
                removed = db.execute(f"DELETE FROM changes WHERE revision <= {m}", (target,)).rowcount
                self._set_meta(db, "changes_floor", str(target))
                floor = target
            audit = 0
            if retention.audit_days is not None:
                with self._audit_writable(db):
                    audit = db.execute(
                        f"DELETE FROM audit WHERE at < {m}", (cutoff(retention.audit_days, now),)
                    ).rowcount
        return Compaction(removed, audit, floor + 1)
