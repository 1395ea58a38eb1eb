"""The empty graph of a model: a `Store` that holds nothing, in memory, and takes no write.

What a registry's artifacts are rendered over (`core.seam.rendering`): a surface that reads the graph while it
generates (llms.txt lists the public nodes of each type) reads a graph with no record yet, as it would on a new
store, without a file, a database or a second instance. Its revision is 0 forever; every read answers nothing,
every write and every administrative action is a `StoreError` naming it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from core.lang.model import Model
from core.store.view import DiffPage, DiffPosition, View
from core.values.audit import AuditQuery, AuditRecord
from core.values.errors import FutureRevisionError, GoneError, NotFoundError, StoreError
from core.values.records import Change, Edge, Node, Sight

if TYPE_CHECKING:
    from core.lang.validation import StateView
    from core.store import CommitResult, NodeQuery, StoreDump, StoreStats, UnitOfWork
    from core.store.common import Bulk, ModelVersion
    from core.store.retention import Compaction, Retention
    from core.values.operations import Operation

__all__ = ["EmptyStore"]

LOCATION = "(empty)"


class EmptyStore:
    """The graph of `model` before anything is written (see the module docstring)."""

    def __init__(self, model: Model) -> None:
        self._model = model

    def _refuse(self, action: str) -> NoReturn:
        raise StoreError(f"The empty graph of {self._model.name} {self._model.version} stores nothing: it cannot "
                         f"{action}.", path=LOCATION)  # fmt: skip

    @property
    def location(self) -> str:
        return LOCATION

    @property
    def model(self) -> Model:
        return self._model

    def stored_model(self) -> Model:
        return self._model

    def follow_model(self) -> Model:
        return self._model

    def apply_model(self, model: Model, *, principal: str, replaces: str | None = None,
                    summary: Mapping[str, Any] | None = None,
                    check: Callable[[], None] | None = None) -> int:  # fmt: skip
        self._refuse("apply a model")

    def model_history(self) -> list[ModelVersion]:
        return []

    def superseded(self, model: Model) -> bool:
        return False

    def model_at(self, revision: int) -> Model:
        if revision != 0:
            raise NotFoundError("model revision", str(revision))
        return self._model

    def revision(self) -> int:
        return 0

    def changed(self) -> bool:
        return False

    def notices(self, wake: Callable[[], None]) -> Callable[[], None] | None:
        return None

    @contextlib.contextmanager
    def uncontended(self) -> Generator[bool]:
        yield True  # nothing to wait for

    def node(self, id: str) -> Node | None:
        return None

    def nodes(self, ids: Sequence[str]) -> dict[str, Node]:
        return {}

    def edge(self, type: str, source: str, target: str) -> Edge | None:
        return None

    def edges(self, refs: Sequence[tuple[str, str, str]]) -> dict[tuple[str, str, str], Edge]:
        return {}

    def iter_nodes(self, type: str | None = None) -> Iterator[Node]:
        return iter(())

    def iter_edges(self) -> Iterator[Edge]:
        return iter(())

    def iter_node_heads(self) -> Iterator[tuple[str, str, str, tuple[str, ...]]]:
        return iter(())

    def iter_topology(self) -> Iterator[tuple[str, str, str]]:
        return iter(())

    def find_nodes(self, query: NodeQuery, *, after: str | None, limit: int) -> tuple[list[Node], int]:
        return [], 0

    def facet_counts(
        self, query: NodeQuery, names: Sequence[str], *, limit: int
    ) -> dict[str, tuple[dict[str, int], bool]]:
        return {name: ({}, False) for name in names}

    def prefix_postings(
        self, prefixes: Sequence[str], types: Sequence[str] | None, sight: Sight | None, limit: int
    ) -> list[tuple[list[tuple[str, str, float]], bool]]:
        return [([], False) for _ in prefixes]

    def words_beginning(self, prefix: str, limit: int) -> list[str]:
        return []

    def words_ending(self, suffix: str, limit: int) -> list[str]:
        return []

    def word_postings(
        self, words: Sequence[str], types: Sequence[str] | None, sight: Sight | None, limit: int
    ) -> tuple[list[tuple[str, str, float]], bool]:
        return [], False

    def count_changes(self, since: int, *, sight: Sight | None = None, until: int | None = None) -> int:
        return 0

    def changes(self, since: int, limit: int, *, sight: Sight | None = None, until: int | None = None) -> list[Change]:
        return []

    def view(self, revision: int | None = None) -> View:
        if revision not in (None, 0):
            raise FutureRevisionError(revision=revision, current=0)
        self._refuse("read a past revision")

    def revision_at(self, moment: str) -> int:
        raise GoneError(since=0, oldest=0, as_of=moment)

    def diff_revisions(self, since: int, until: int | None = None, *, types: Sequence[str] | None = None,
                       ids: Sequence[str] | None = None, sight: Sight | None = None, limit: int = 100,
                       after: DiffPosition | None = None) -> DiffPage:  # fmt: skip
        if since != 0 or until not in (None, 0):
            raise FutureRevisionError(revision=max(since, until or 0), current=0)
        return DiffPage(0, 0, (), None)

    def commit(self, operations: Sequence[Operation], *, principal: str, dry_run: bool = False,
               progress: Callable[[str, int, int], None] | None = None,
               guard: Callable[[StateView, Sequence[Operation]], None] | None = None,
               then: Callable[[Any, int], None] | None = None,
               proposal: str | None = None) -> CommitResult:  # fmt: skip
        self._refuse("commit a write")

    def bulk(self, *, principal: str, dry_run: bool = False) -> contextlib.AbstractContextManager[Bulk]:
        self._refuse("import")

    def unit_of_work(self) -> contextlib.AbstractContextManager[UnitOfWork]:
        self._refuse("write beside the graph (a proposal)")

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return []  # no table beside the graph holds a row (no proposal)

    def append_audit(self, records: Sequence[AuditRecord]) -> None:
        return None  # nothing is kept: rendering is not a call anyone audits

    def audit_records(self, query: AuditQuery, *, before: int | None, limit: int) -> tuple[list[dict[str, Any]], int]:
        return [], 0

    def stats(self) -> StoreStats:
        from core.store import StoreStats

        return StoreStats(revision=0, nodes=0, edges=0, changes=0, nodes_by_type={}, edges_by_type={}, size_bytes=0)

    def dump(self) -> StoreDump:
        self._refuse("be dumped")

    def restore(self, dump: StoreDump) -> None:
        self._refuse("restore a dump")

    def changes_floor(self) -> int:
        return 0

    def compact(self, retention: Retention, now: datetime | None = None) -> Compaction:
        self._refuse("be compacted")

    def backup(self, target: Path) -> None:
        self._refuse("be backed up")

    def close(self) -> None:
        return None
