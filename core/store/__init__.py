"""The store: durable nodes, edges, change log and model, behind one small interface.

`Store` is what every caller uses; `open_store` picks the backend from the location: a `postgresql://` URL is a
PostgreSQL database (`core.store.postgres`, shared by many processes and machines), anything else a SQLite file
(`core.store.sqlite`, the embedded default). A backend must give these guarantees, which the tests check against
every backend:

* `commit` validates a batch with `core.lang.validation.plan` inside one write transaction and commits all of
  it or nothing (with `dry_run`, it stops after validating); each change gets the next revision, and the
  change log and the records move together;
* revisions are strictly increasing across every process sharing the store;
* once `commit` returns, the change survives a crash of the process or the machine;
* `revision()` is cheap (the graph index compares it before every read to follow the change log), and
  `changed()` says whether another process committed since the last call, for a follower that wants to
  skip even that lookup; `notices(wake)` calls `wake` (from any thread) soon after any process commits, so a
  follower need not poll often, and returns the function that stops it, or None where the backend sends no
  notices (SQLite: a follower reads the revision on a short tick, a local read); a notice is a hint, the log the
  truth;
* `uncontended()` lets a caller that must not wait (an event loop) read by key without waiting: True only if
  the block's reads wait for no other thread (SQLite: on the connection if it is free, else on a read-only
  connection in one read transaction for the block), every read in the block seeing one state no older than the
  last commit before it (a backend whose every read waits on the network always declines);
* `bulk` is one write transaction fed batch by batch (an import), each batch checked as `commit` checks one
  on the state the batches before it left, committed when its block ends and rolled back if the block raises;
* the audit log is append-only: `append_audit` adds records, nothing updates or deletes them but `compact`;
* `compact(retention)` removes what `core.store.retention.Retention` lets go of the audit and change logs (the only
  deletion from the audit log), and `changes_floor()` says through which revision the change log was removed, so
  a read from before it is `gone`; `backup(path)` writes a consistent copy while the store serves (SQLite; a
  PostgreSQL store is backed up with pg_dump, and refuses both with a `StoreError` that says so);
* the model changes only through `apply_model`, in one write transaction: the version must rise
  (`core.lang.model_version`), every stored record is re-validated under the new model (refused: nothing changes), and
  the change is recorded in the change log (a `model` change, with the principal) and in the model history
  (`model_history`, `model_at`); `commit` and `bulk` validate under the model recorded in the store at their
  transaction, re-reading it if another process applied one, so no write is validated against a stale model;
  opening a store with a model file that differs from its recorded one is a `ModelError`, not a change, unless
  the file is an older entry of the history (`superseded`: the file a server started from before a model was
  applied), when the store opens on its own model and logs one warning that says how to update the file;
* `view(revision)` is the graph at a revision, read from the change log and the model history (`core.store.view`), and
  `diff_revisions` what differs between two; both answer `gone` from before the change log's floor;
* `unit_of_work()` is a write transaction for the tables canon keeps beside the graph (the proposals of
  `core.dispatch.proposals`): one at a time across every process with `commit`'s, committed when its block ends
  and rolled back if it raises; `commit(then=...)` hands its own transaction to `then` as the same `UnitOfWork`,
  so such a row moves together with a batch; `rows(sql, params)` reads those tables outside a transaction. Their
  statements are written once, with `?` parameter markers, in the SQL both backends speak; the graph's own
  tables change only through `commit`, `bulk` and `apply_model`;
* `dump()` reads everything a store holds (model, nodes, edges, change log, audit log, proposals) as it is, and
  `restore` writes such a dump into an empty store (of either backend), so `copy_store` moves a store losslessly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from core.lang.conditions import Condition
from core.lang.model import Model
from core.lang.validation import StateView
from core.store.common import Bulk, ModelVersion
from core.store.retention import Compaction, Retention
from core.store.view import DiffPage, DiffPosition, View
from core.values.audit import AuditQuery, AuditRecord
from core.values.operations import Operation
from core.values.records import Change, Edge, Node, Sight

__all__ = [
    "HISTORY_FIELDS", "Bulk", "CommitResult", "ModelVersion", "NodeQuery", "Store", "StoreDump", "StoreStats",
    "UnitOfWork", "copy_store", "is_database_url", "open_existing_store", "open_store", "store_exists",
]  # fmt: skip


@dataclass(frozen=True)
class NodeQuery:
    """Which nodes `Store.find_nodes` returns: all of these that are given must hold."""

    type: str | None = None
    conditions: tuple[Condition, ...] = ()
    text: str | None = None  # case-insensitive substring of any of the node type's text properties
    text_fields: Mapping[str, tuple[str, ...]] = field(default_factory=dict[str, tuple[str, ...]])
    id_prefix: str | None = None
    sight: Sight | None = None  # only nodes the caller may see (None: all)


@dataclass(frozen=True)
class CommitResult:
    """What a commit changed; `revision` is the store's revision after it (unchanged when nothing changed).

    `operations[i]` is the index (in the committed batch) of the operation that made `changes[i]`; a dry run's
    `planned` holds the writes it would have made (`core.lang.validation.Write`: each record before and after).
    """

    revision: int
    changes: tuple[Change, ...]
    operations: tuple[int, ...] = ()
    planned: tuple[Any, ...] = ()


@dataclass(frozen=True)
class StoreStats:
    revision: int
    nodes: int
    edges: int
    changes: int
    nodes_by_type: dict[str, int]
    edges_by_type: dict[str, int]
    size_bytes: int


@dataclass(frozen=True)
class StoreDump:
    """Everything a store holds, read in order: the model (its canonical JSON), the records, the change log (by
    revision), the audit log (by id; each record a tuple of `AUDIT_FIELDS`), the model history (by revision;
    each entry a tuple of `HISTORY_FIELDS`), the revision through which the change log was compacted
    (`changes_floor`: 0 when it holds every revision), so a copy answers `gone` as its source does, and the
    proposals (by id; each a row of `core.store.proposals_sql.PROPOSAL_COLUMNS`)."""

    model: str
    nodes: Iterable[Node]
    edges: Iterable[Edge]
    changes: Iterable[Change]
    audit: Iterable[Sequence[Any]]
    models: Iterable[Sequence[Any]] = ()
    changes_floor: int = 0
    proposals: Iterable[Sequence[Any]] = ()


class UnitOfWork(Protocol):
    """The statements of one write transaction (`Store.unit_of_work`, `Store.commit`'s `then`), in SQL both backends
    speak with `?` parameter markers (the store writes its own marker)."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; returns how many rows it changed."""
        ...

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Every row of one query, read inside the transaction (what it wrote so far included)."""
        ...


AUDIT_FIELDS = ("id", "at", "principal", "surface", "action", "target", "arguments_digest", "outcome", "revision",
                "duration_ms")  # fmt: skip
HISTORY_FIELDS = ("revision", "at", "principal", "version", "document", "summary")


class Store(Protocol):
    """The durable state of one canon instance. Safe to share between threads."""

    @property
    def location(self) -> str: ...
    @property
    def model(self) -> Model: ...
    def stored_model(self) -> Model: ...
    def follow_model(self) -> Model: ...
    def apply_model(
        self,
        model: Model,
        *,
        principal: str,
        replaces: str | None = None,
        summary: Mapping[str, Any] | None = None,
        check: Callable[[], None] | None = None,
    ) -> int:
        """Make `model` the store's model (see the module docstring); `replaces`: the digest of the model the
        caller planned against (refused if another process applied one since); `summary`: what to record of the
        change in the history; `check`: called in the transaction once everything is written, just before it
        commits (a call's deadline, `CallContext.check_time`): what it raises rolls the whole change back. Returns
        the revision that records it."""
        ...

    def model_history(self) -> list[ModelVersion]: ...
    def superseded(self, model: Model) -> bool:
        """Whether `model` is an older entry of the model history (applied once, replaced since): a store opened
        with it opens on its own model, with a warning, instead of refusing it."""
        ...

    def model_at(self, revision: int) -> Model: ...
    def revision(self) -> int: ...
    def changed(self) -> bool: ...
    def notices(self, wake: Callable[[], None]) -> Callable[[], None] | None: ...
    def uncontended(self) -> AbstractContextManager[bool]: ...
    def node(self, id: str) -> Node | None: ...
    def nodes(self, ids: Sequence[str]) -> dict[str, Node]: ...
    def edge(self, type: str, source: str, target: str) -> Edge | None: ...
    def edges(self, refs: Sequence[tuple[str, str, str]]) -> dict[tuple[str, str, str], Edge]: ...
    def iter_nodes(self, type: str | None = None) -> Iterator[Node]: ...
    def iter_edges(self) -> Iterator[Edge]: ...
    def iter_node_heads(self) -> Iterator[tuple[str, str, str, tuple[str, ...]]]: ...
    def iter_topology(self) -> Iterator[tuple[str, str, str]]: ...
    def find_nodes(self, query: NodeQuery, *, after: str | None, limit: int) -> tuple[list[Node], int]: ...
    def facet_counts(
        self, query: NodeQuery, names: Sequence[str], *, limit: int
    ) -> dict[str, tuple[dict[str, int], bool]]: ...
    def prefix_postings(
        self, prefixes: Sequence[str], types: Sequence[str] | None, sight: Sight | None, limit: int
    ) -> list[tuple[list[tuple[str, str, float]], bool]]:
        """For each prefix, `word_postings` of the index's words beginning with it, and whether any was cut."""
        ...

    def words_beginning(self, prefix: str, limit: int) -> list[str]: ...
    def words_ending(self, suffix: str, limit: int) -> list[str]: ...
    def word_postings(
        self, words: Sequence[str], types: Sequence[str] | None, sight: Sight | None, limit: int
    ) -> tuple[list[tuple[str, str, float]], bool]:
        """The word index's (word, node id, impact) rows of `words`, at most `limit` of the visible nodes per word,
        the most about it first, and whether a word had more (`core.store.sql.SQLStore.word_postings`)."""
        ...

    def count_changes(self, since: int, *, sight: Sight | None = None, until: int | None = None) -> int: ...
    def changes(
        self, since: int, limit: int, *, sight: Sight | None = None, until: int | None = None
    ) -> list[Change]: ...
    def view(self, revision: int | None = None) -> View:
        """The graph at `revision` (None: the store's revision now), pinned to it (`core.store.view`): `GoneError`
        before the oldest revision the change log keeps, `FutureRevisionError` beyond the store's."""
        ...

    def revision_at(self, moment: str) -> int:
        """The last revision logged at or before `moment` (UTC, milliseconds, Z); `GoneError` when the change log
        keeps none."""
        ...

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
        """One page of the nodes and edges added, removed and changed between revisions `since` and `until`
        (None: now), of `types` (named as the model at `until` names them) or at `ids` (a node, or an end of an
        edge), as `sight` may see them (`core.store.view.sees_then`), from `after` (the `next` of the page before)."""
        ...

    def commit(
        self,
        operations: Sequence[Operation],
        *,
        principal: str,
        dry_run: bool = False,
        progress: Callable[[str, int, int], None] | None = None,
        guard: Callable[[StateView, Sequence[Operation]], None] | None = None,
        then: Callable[[UnitOfWork, int], None] | None = None,
    ) -> CommitResult:
        """Validate and commit a batch in one write transaction (the module docstring). `guard` runs first in it, on
        the state the batch is planned on; `then` runs last in it (not on a dry run), given the transaction and the
        revision after the batch: what it raises rolls the batch back."""
        ...

    def unit_of_work(self) -> AbstractContextManager[UnitOfWork]:
        """A write transaction for the tables beside the graph (the module docstring)."""
        ...

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Every row of one query on the tables beside the graph (`?` markers), outside any transaction but this
        thread's own."""
        ...

    def bulk(self, *, principal: str, dry_run: bool = False) -> AbstractContextManager[Bulk]: ...
    def append_audit(self, records: Sequence[AuditRecord]) -> None: ...
    def audit_records(
        self, query: AuditQuery, *, before: int | None, limit: int
    ) -> tuple[list[dict[str, Any]], int]: ...
    def stats(self) -> StoreStats: ...
    def dump(self) -> StoreDump: ...
    def restore(self, dump: StoreDump) -> None: ...
    def changes_floor(self) -> int: ...
    def compact(self, retention: Retention, now: datetime | None = None) -> Compaction: ...
    def backup(self, target: Path) -> None: ...
    def close(self) -> None: ...


def open_store(location: str | Path, model: Model, *, principal: str = "system") -> Store:
    """Open (creating if needed) the store at `location` for `model`.

    A new store records the model. An existing store recorded with another model opens on its own if `model` is
    an older one of its history (`Store.superseded`, with a warning), and is otherwise a `ModelError` that names
        both fixes (`canon model apply`, `canon model show`): opening a store never changes its model.
    """
    if is_database_url(location):
        from core.store.postgres import PostgresStore

        return PostgresStore.open(str(location), model, principal=principal)
    from core.store.sqlite import SQLiteStore

    return SQLiteStore.open(Path(location), model, principal=principal)


def open_existing_store(location: str | Path, *, read_only: bool = False) -> Store:
    """Open an existing store on the model recorded in it, changing nothing (`StoreError` if there is none).

    With `read_only`, the backend itself refuses writes (SQLite `mode=ro`, PostgreSQL read-only transactions):
    what read-only commands use, so they cannot change a store whatever model file they were given."""
    if is_database_url(location):
        from core.store.postgres import PostgresStore

        return PostgresStore.open_existing(str(location), read_only=read_only)
    from core.store.sqlite import SQLiteStore

    return SQLiteStore.open_existing(Path(location), read_only=read_only)


def copy_store(source: str | Path, target: str | Path) -> StoreStats:
    """Copy the store at `source` into a new (or empty) store at `target`, of either backend, losslessly: the
    model, nodes, edges, every revision of the change log and the audit log. Returns the target's stats."""
    from_store = open_existing_store(source)
    try:
        if is_database_url(target):
            from core.store.postgres import PostgresStore

            to_store: Store = PostgresStore.open_empty(str(target), from_store.model)
        else:
            from core.store.sqlite import SQLiteStore

            to_store = SQLiteStore.open_empty(Path(target), from_store.model)
        try:
            to_store.restore(from_store.dump())
            return to_store.stats()
        finally:
            to_store.close()
    finally:
        from_store.close()


def store_exists(location: str | Path) -> bool:
    """Whether a store is already at `location` (a file, or a database with canon's tables and a model)."""
    if is_database_url(location):
        from core.store.postgres import PostgresStore

        return PostgresStore.exists(str(location))
    return Path(location).exists()


def is_database_url(location: str | Path) -> bool:
    """Whether `location` names a PostgreSQL database (a `postgresql://` or `postgres://` URL)."""
    return isinstance(location, str) and location.startswith(("postgresql://", "postgres://"))
