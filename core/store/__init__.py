"""The store: durable nodes, edges, change log and model, behind one small interface.

`Store` is what every caller uses; `open_store` picks the backend from the location's URL scheme, looked up in the
`canon.stores` entry-point group (`core.ops.plugins`; `backend_for`): a `postgresql://` (or `postgres://`) URL is a
PostgreSQL database (`core.store.postgres`, shared by many processes and machines), a location without a scheme
(or `file://`) a SQLite file (`core.store.sqlite`, the embedded default), and a distribution outside canon adds a
scheme with one entry point whose value is a `Backend` (docs/development/plugins.md). A backend must give these
guarantees, which the tests check against every backend:

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
from typing import Any, Protocol, runtime_checkable

from core.lang.conditions import Condition
from core.lang.model import Model, property_text
from core.lang.ordering import Sort
from core.lang.validation import StateView
from core.ops import plugins
from core.ops.config import FILE_SCHEME, scheme_of, without_password
from core.store.common import Bulk, ModelVersion
from core.store.retention import Compaction, Retention
from core.store.view import DiffPage, DiffPosition, View
from core.values.audit import AuditQuery, AuditRecord
from core.values.errors import StoreError
from core.values.operations import Operation
from core.values.records import Change, Edge, Node, Sight

__all__ = [
    "HISTORY_FIELDS", "Backend", "Bulk", "CommitResult", "ModelVersion", "NodeQuery", "Store", "StoreDump",
    "StoreStats", "UnitOfWork", "backend_for", "copy_store", "is_database_url", "open_existing_store", "open_store",
    "scheme_of", "store_exists",
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
    order: tuple[Sort, ...] = ()  # the page's order (`core.lang.ordering`); () for id order
    position: tuple[Any, ...] = ()  # with `order` and an `after` id: that node's sort values (a keyset position)

    def matches(self, node: Node) -> bool:
        """Whether `node` is one of the query's, who sees it aside (the caller's rule: `Sight.sees`, or for a state
        at a past revision `core.store.view.sees_then`): the reference meaning the stores' SQL agrees with
        (`core.store.sql.node_filter`), which a past view applies to the states the change log holds. Its type,
        its id's prefix, every condition (`Condition.matches`) and the text: a case-insensitive substring of one
        of its type's text properties (`core.lang.model.property_text`, lowered as the text index lowers it)."""
        if (self.type is not None and node.type != self.type) or (
            self.id_prefix and not node.id.startswith(self.id_prefix)
        ):
            return False
        if not all(c.matches(node.properties) for c in self.conditions):
            return False
        if self.text:
            needle = self.text.lower()
            fields = self.text_fields.get(node.type, ())
            return any(needle in property_text(node.properties.get(f)).lower() for f in fields)
        return True


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
        proposal: str | None = None,
    ) -> CommitResult:
        """Validate and commit a batch in one write transaction (the module docstring). `guard` runs first in it, on
        the state the batch is planned on; `then` runs last in it (not on a dry run), given the transaction and the
        revision after the batch: what it raises rolls the batch back. `proposal`: the id of the proposal this batch
        merges, logged on each of its change-log entries (`Change.proposal`)."""
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


@runtime_checkable
class Backend(Protocol):
    """A store backend: what the `canon.stores` entry point of each URL scheme it serves names.

    Each method gets the location as it was given (a path, or the URL with its scheme); `open_store` and the
    others below call the one for the location's scheme (`scheme_of`)."""

    def open(self, location: str | Path, model: Model, *, principal: str) -> Store:
        """Open (creating if needed) the store at `location` for `model` (`open_store`)."""
        ...

    def open_existing(self, location: str | Path, *, read_only: bool) -> Store:
        """Open an existing store on its recorded model, changing nothing (`open_existing_store`)."""
        ...

    def open_empty(self, location: str | Path, model: Model) -> Store:
        """Open (creating) a store that must hold nothing yet, for `Store.restore` (`copy_store`)."""
        ...

    def exists(self, location: str | Path) -> bool:
        """Whether a store is already at `location` (`store_exists`)."""
        ...

    def discard(self, location: str | Path) -> None:
        """Remove what a store created at `location` left, when it could not be made ready (its first seeding
        failed); a backend whose stores are not files it made may do nothing."""
        ...


def backend_for(location: str | Path) -> Backend:
    """The backend the `canon.stores` entry point of `location`'s scheme names (imported now, and only it)."""
    scheme = scheme_of(location)
    found = plugins.named(plugins.STORES, scheme, lambda obj: isinstance(obj, Backend), "a core.store.Backend")
    if found is None:
        shown = without_password(location) if isinstance(location, str) else str(location)
        raise StoreError(f"No store backend serves {scheme}:// locations ({shown}); installed "
                         f"({plugins.STORES} entry points): {', '.join(plugins.names(plugins.STORES)) or 'none'}.",
                         path=shown)  # fmt: skip
    return found.obj


def open_store(location: str | Path, model: Model, *, principal: str = "system") -> Store:
    """Open (creating if needed) the store at `location` for `model`.

    A new store records the model. An existing store recorded with another model opens on its own if `model` is
    an older one of its history (`Store.superseded`, with a warning), and is otherwise a `ModelError` that names
        both fixes (`canon model apply`, `canon model show`): opening a store never changes its model.
    """
    return backend_for(location).open(location, model, principal=principal)


def open_existing_store(location: str | Path, *, read_only: bool = False) -> Store:
    """Open an existing store on the model recorded in it, changing nothing (`StoreError` if there is none).

    With `read_only`, the backend itself refuses writes (SQLite `mode=ro`, PostgreSQL read-only transactions):
    what read-only commands use, so they cannot change a store whatever model file they were given."""
    return backend_for(location).open_existing(location, read_only=read_only)


def copy_store(source: str | Path, target: str | Path) -> StoreStats:
    """Copy the store at `source` into a new (or empty) store at `target`, of either backend, losslessly: the
    model, nodes, edges, every revision of the change log and the audit log. Returns the target's stats."""
    to_backend = backend_for(target)  # an unknown scheme is refused before the source is opened
    from_store = open_existing_store(source)
    try:
        to_store = to_backend.open_empty(target, from_store.model)
        try:
            to_store.restore(from_store.dump())
            return to_store.stats()
        finally:
            to_store.close()
    finally:
        from_store.close()


def store_exists(location: str | Path) -> bool:
    """Whether a store is already at `location` (a file, or a database with canon's tables and a model)."""
    return backend_for(location).exists(location)


def is_database_url(location: str | Path) -> bool:
    """Whether `location` names a store by a URL scheme (a database server's, say), rather than a file path."""
    return scheme_of(location) != FILE_SCHEME
