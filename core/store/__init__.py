"""The store: durable nodes, edges, change log and model, behind one small interface.

`Store` is what every caller uses; `open_store` picks the backend from the location (today: a SQLite file, the
embedded default). A backend must give these guarantees, which the tests check against every backend:

* `commit` validates a batch with `core.validation.plan` inside one write transaction and commits all of
  it or nothing (with `dry_run`, it stops after validating); each change gets the next revision, and the
  change log and the records move together;
* revisions are strictly increasing across every process sharing the store;
* once `commit` returns, the change survives a crash of the process or the machine;
* `revision()` is cheap (the graph index compares it before every read to follow the change log), and
  `changed()` says whether another process committed since the last call, for a follower that wants to
  skip even that lookup;
* `uncontended()` lets a caller that must not wait (an event loop) read by key without waiting: True only if
  the block's reads wait for no other thread (SQLite: on the connection if it is free, else on a read-only
  connection in one read transaction for the block), every read in the block seeing one state no older than the
  last commit before it (a backend whose every read waits on the network always declines);
* the audit log is append-only: `append_audit` adds records, nothing updates or deletes them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from core.audit import AuditQuery, AuditRecord
from core.conditions import Condition
from core.model import Model
from core.operations import Operation
from core.records import Change, Edge, Node, Sight
from core.validation import StateView

__all__ = ["CommitResult", "NodeQuery", "Store", "StoreStats", "open_store"]


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

    `operations[i]` is the index (in the committed batch) of the operation that made `changes[i]`.
    """

    revision: int
    changes: tuple[Change, ...]
    operations: tuple[int, ...] = ()


@dataclass(frozen=True)
class StoreStats:
    revision: int
    nodes: int
    edges: int
    changes: int
    nodes_by_type: dict[str, int]
    edges_by_type: dict[str, int]
    size_bytes: int


class Store(Protocol):
    """The durable state of one canon instance. Safe to share between threads."""

    @property
    def location(self) -> str: ...
    @property
    def model(self) -> Model: ...
    def stored_model(self) -> Model: ...
    def use_model(self, model: Model) -> None: ...
    def revision(self) -> int: ...
    def changed(self) -> bool: ...
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
    def count_changes(self, since: int, *, sight: Sight | None = None, until: int | None = None) -> int: ...
    def changes(
        self, since: int, limit: int, *, sight: Sight | None = None, until: int | None = None
    ) -> list[Change]: ...
    def commit(
        self,
        operations: Sequence[Operation],
        *,
        principal: str,
        dry_run: bool = False,
        progress: Callable[[str, int, int], None] | None = None,
        guard: Callable[[StateView, Sequence[Operation]], None] | None = None,
    ) -> CommitResult: ...
    def append_audit(self, records: Sequence[AuditRecord]) -> None: ...
    def audit_records(
        self, query: AuditQuery, *, before: int | None, limit: int
    ) -> tuple[list[dict[str, Any]], int]: ...
    def stats(self) -> StoreStats: ...
    def close(self) -> None: ...


def open_store(location: str | Path, model: Model, *, principal: str = "system") -> Store:
    """Open (creating if needed) the store at `location` for `model`.

    A new store records the model. An existing store recorded with another model adopts the new one only if
    every stored record is valid under it (a `model` change in the log); otherwise `ModelError` lists why.
    """
    from core.store.sqlite import SQLiteStore

    return SQLiteStore.open(Path(location), model, principal=principal)
