"""The graph index saved beside the store, so a start loads it instead of rebuilding it from every row.

The file holds what the index holds (every node's type, visibility and readers, every edge's type and ends, and the
counts kept with them) at one revision, and what ties it to the store's history: the revision, the change recorded
at that revision, the last model change. `open_index` loads it when every check passes and brings it up to date
from the change log (`GraphIndex.sync`, the path the index follows changes by), and rebuilds the index from the
store otherwise: a file that is missing, written by another format, cut short, changed, newer than the store, of
another store's history, older than the change log keeps (`canon store compact`), or older than a model change is
never trusted. See docs/decisions/0054-the-graph-index-saved-beside-the-store.md.

Layout: a header of `HEADER_BYTES` (the magic line, then one JSON line, padded with spaces) and a payload of
page-aligned sections (`core.index.mapped`): node ids interned in sorted order with a hash table, node types,
visibility and readers as small numbers, and for each direction CSR adjacency arrays; the counts the index keeps as
JSON. The header carries the payload's length and SHA-256 and where each section is. A trusted file is mapped
read-only and its arrays become the index's base (ADR 0061): every process that loads the same file (the serving
process, its walk workers) shares its pages, and nothing in it is turned into Python objects until a walk reads it.

A file is written to a temporary name in the same folder, flushed to disk and renamed over the old one, so a
process killed while writing it leaves the old file or none, never half of one. Saving holds a view of the index
(`GraphIndex.snapshot`), so writes meanwhile go on copy-on-write, and lets the serving process's other threads have
the interpreter between stretches of work. A file is never written in place: a mapping of it never changes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import logging
import mmap
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from core.index.graph import GraphIndex, IndexState
from core.index.mapped import Mapped, MappedAdjacency, MappedNodes, SectionError, write_sections
from core.ops.config import without_password
from core.store import Store, is_database_url

__all__ = ["FORMAT", "IndexFile", "index_file", "open_index", "read_header", "remap_index", "save_index"]

FORMAT = 2  # the payload's layout (1: pickles of the dicts, ADR 0054; 2: mapped arrays, ADR 0061); another is rebuilt
MAGIC = b"canon graph index\n"
HEADER_BYTES = 4096
SUFFIX = ".graph-index"
log = logging.getLogger("canon.index")


def index_file(location: str | Path, cache: Path | None) -> Path | None:
    """Where the graph index of the store at `location` is saved: beside a SQLite file (`canon.db.graph-index`);
    for a PostgreSQL URL, in the cache folder (`[server]`'s `CANON_CACHE`), named by a hash of the URL without its
    password, or nowhere when there is no cache folder."""
    if not is_database_url(location):
        return Path(f"{location}{SUFFIX}")
    if cache is None:
        return None
    name = hashlib.sha256(without_password(str(location)).encode()).hexdigest()[:20]
    return cache / "graph-index" / f"postgresql-{name}{SUFFIX}"


@dataclasses.dataclass(frozen=True)
class IndexFile:
    """A file's header: what it was written from and how to check its payload."""

    format: int
    revision: int
    at_revision: list[Any] | None  # the change recorded at `revision`: [at, kind, key] (None at revision 0)
    model_revision: int  # the revision of the store's latest model change when it was written
    nodes: int
    edges: int
    payload_bytes: int
    sha256: str
    store: str  # where it was written from (a URL without its password), for a person reading the header
    sections: dict[str, list[int]]  # section -> [offset in the file, bytes] (`core.index.mapped`)

    def as_json(self) -> bytes:
        return json.dumps(self.__dict__, sort_keys=True).encode()


class Refused(Exception):
    """The file cannot be trusted; the message says why."""


# -- checking and loading ----------------------------------------------------------------------------------------
def open_index(store: Store, path: Path | None) -> tuple[GraphIndex, bool]:
    """The graph index of `store`: loaded from `path` and brought up to date when the file passes every check,
    else built from the store. The second value tells which (True: loaded)."""
    if path is not None:
        started = time.perf_counter()
        try:
            index = load_index(store, path)
        except Refused as refused:
            log.info("not loading the graph index from %s (%s): building it from the store", path, refused)
        else:
            log.info("graph index loaded from %s at revision %d, now at %d (%d nodes, %.1f s)", path,
                     index.loaded_at, index.revision, len(index), time.perf_counter() - started)  # fmt: skip
            return index, True
    return GraphIndex.build(store), False


def load_index(store: Store, path: Path) -> GraphIndex:
    """The index in `path`, brought up to the store's revision; `Refused` (saying why) when it cannot be trusted."""
    header, state = _load_state(store, path)
    index = GraphIndex.restore(store, header.revision, state)
    index.sync()  # the changes committed since the file was written, as any sync applies them
    return index


def remap_index(index: GraphIndex, path: Path) -> bool:
    """Move `index` onto the file at `path` if it is newer than the one `index` stands on (or `index` was built)
    and passes every check: the serving process after saving it, a walk worker when it sees it (`FileWatch`).
    False, leaving `index` as it was, otherwise (a refused file is logged)."""
    try:
        header = read_header(path)
        if index.loaded_at is not None and header.revision <= index.loaded_at:
            return False
        index.sync()  # at or past the file's revision: the file is then caught up to exactly this index's
        header, state = _load_state(index.store, path)
    except (Refused, OSError) as refused:
        log.info("not moving the graph index onto %s (%s)", path, refused)
        return False
    moved = index.remap(header.revision, state)
    if moved:
        log.info("graph index moved onto %s at revision %d (now at %d)", path, header.revision, index.revision)
    return moved


class FileWatch:
    """Tells when the index file at `path` was replaced since the last look (one `stat`), for a walk worker to
    `remap_index` at its next walk."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen = self._signature()

    def _signature(self) -> tuple[int, int, int] | None:
        try:
            found = self.path.stat()
        except OSError:
            return None
        return found.st_ino, found.st_mtime_ns, found.st_size

    def replaced(self) -> bool:
        now = self._signature()
        if now == self._seen:
            return False
        self._seen = now
        return now is not None


def _load_state(store: Store, path: Path) -> tuple[IndexFile, IndexState]:
    """The checked header of `path` and the index state it holds, mapped; `Refused` when it cannot be trusted."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise Refused("there is none") from None
    except OSError as exc:
        raise Refused(f"it cannot be read: {exc}") from None
    with handle:
        try:
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # an empty file
            raise Refused("it is empty") from None
    header = _header(mapped)
    _check_against(store, header)
    payload = memoryview(mapped)[HEADER_BYTES:]
    try:
        if len(payload) != header.payload_bytes:
            raise Refused(f"its payload is {len(payload)} bytes, its header says {header.payload_bytes}")
        if hashlib.sha256(payload).hexdigest() != header.sha256:
            raise Refused("its payload does not match its checksum")
    finally:
        payload.release()
    try:
        arrays = Mapped(mapped, header.sections)
    except (SectionError, ValueError, KeyError, TypeError) as exc:
        raise Refused(f"its sections are unreadable ({exc})") from None
    counts = arrays.counts
    readable = {tag: set(ids) for tag, ids in counts["readable"].items()}
    state = IndexState(MappedNodes(arrays), MappedAdjacency(arrays, "out"), MappedAdjacency(arrays, "in"),
                       counts["node_counts"], counts["edge_counts"], _pairs(counts["by_visibility"]),
                       _pairs(counts["by_level"]), readable)  # fmt: skip
    return header, state


def _pairs(rows: list[list[Any]]) -> dict[tuple[str, str], int]:
    return {(a, b): n for a, b, n in rows}


def read_header(path: Path) -> IndexFile:
    """The header of the index file at `path` (`Refused` when it has none of this format)."""
    with path.open("rb") as handle:
        return _header(handle.read(HEADER_BYTES))


def _header(data: bytes | mmap.mmap) -> IndexFile:
    head = bytes(data[:HEADER_BYTES])
    if not head.startswith(MAGIC):
        raise Refused("it is not a canon graph index file")
    if len(head) < HEADER_BYTES:
        raise Refused("it is cut short in its header")
    try:
        fields = json.loads(head[len(MAGIC) :].split(b"\n", 1)[0])
        if not isinstance(fields, dict) or fields.get("format") != FORMAT:
            found = fields.get("format") if isinstance(fields, dict) else None
            raise Refused(f"it is of format {found!r}, this canon reads format {FORMAT}")
        header = IndexFile(**fields)
    except (ValueError, TypeError) as exc:
        raise Refused(f"its header is unreadable ({exc})") from None
    if not isinstance(header.sections, dict):  # pyright: ignore[reportUnnecessaryIsInstance] - JSON may be anything
        raise Refused("its header names no sections")
    return header


def _check_against(store: Store, header: IndexFile) -> None:
    """Refuse a file that is not of this store's history or that the change log cannot bring up to date."""
    latest, floor = store.revision(), store.changes_floor()
    if header.revision > latest:
        raise Refused(f"it is at revision {header.revision}, newer than the store's {latest}")
    if header.revision < floor:
        raise Refused(f"it is at revision {header.revision} and the change log starts after {floor} (compacted)")
    if header.revision > 0:
        if header.revision == floor:
            raise Refused(f"the change at its revision {header.revision} was compacted: it cannot be checked")
        change = store.changes(header.revision - 1, 1)
        found = [change[0].at, change[0].kind, change[0].key] if change and change[0].revision == header.revision \
            else None  # fmt: skip
        if found != header.at_revision:
            raise Refused(f"the store's change at revision {header.revision} is not the one it was written after "
                          "(another store, or one restored from a backup)")  # fmt: skip
    model_revision = _model_revision(store)
    if model_revision != header.model_revision:
        raise Refused(f"the store's model changed at revision {model_revision} (it was written under the model of "
                      f"revision {header.model_revision})")  # fmt: skip


def _model_revision(store: Store) -> int:
    history = store.model_history()
    return history[-1].revision if history else 0


# -- saving ------------------------------------------------------------------------------------------------------
class _Hashing(io.RawIOBase):
    """A file that hashes and counts what is written through it."""

    def __init__(self, target: IO[bytes]) -> None:
        self.target, self.digest, self.written = target, hashlib.sha256(), 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.digest.update(data)
        self.target.write(data)
        size = memoryview(data).nbytes
        self.written += size
        return size


def save_index(index: GraphIndex, path: Path) -> IndexFile:
    """Write `index` at its current revision to `path`, atomically (a temporary file, flushed, renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_orphans(path)
    temporary = path.with_name(f"{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    try:
        with index.snapshot() as (state, revision), temporary.open("wb") as handle:
            store = index.store
            header = _header_for(store, state, revision)  # before the payload: the store's checks, at this revision
            handle.write(b" " * HEADER_BYTES)
            sink = _Hashing(handle)
            sections = write_sections(sink, HEADER_BYTES, state.nodes, state.succ, state.pred, _counts(state),
                                      pause=lambda: time.sleep(0))  # fmt: skip
            header = dataclasses.replace(header, payload_bytes=sink.written, sha256=sink.digest.hexdigest(),
                                         sections=sections)  # fmt: skip
            text = MAGIC + header.as_json() + b"\n"
            if len(text) > HEADER_BYTES:
                raise ValueError(f"a graph index header of {len(text)} bytes does not fit in {HEADER_BYTES}")
            handle.seek(0)
            handle.write(text.ljust(HEADER_BYTES, b" "))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _sync_folder(path.parent)
    return header


def _header_for(store: Store, state: IndexState, revision: int) -> IndexFile:
    at_revision = None
    if revision > 0:
        change = store.changes(revision - 1, 1)
        if change and change[0].revision == revision:
            at_revision = [change[0].at, change[0].kind, change[0].key]
    edges = sum(state.edge_counts.values())
    return IndexFile(FORMAT, revision, at_revision, _model_revision(store), len(state.nodes), edges, 0, "",
                     without_password(store.location), {})  # fmt: skip


def _counts(state: IndexState) -> dict[str, Any]:
    """The counts the index keeps with its maps, as JSON (`core.index.mapped` keeps them in its names)."""
    return {"edges": sum(state.edge_counts.values()), "node_counts": state.node_counts,
            "edge_counts": state.edge_counts, "by_visibility": [[*k, n] for k, n in state.by_visibility.items()],
            "by_level": [[*k, n] for k, n in state.by_level.items()],
            "readable": {tag: sorted(ids) for tag, ids in state.readable.items()}}  # fmt: skip


def _remove_orphans(path: Path) -> None:
    """Remove temporary files of this index left by processes that died while writing them."""
    for orphan in path.parent.glob(f"{path.name}.*.tmp"):
        pid = orphan.name.removeprefix(f"{path.name}.").split(".", 1)[0]
        if not pid.isdigit() or not _alive(int(pid)):
            orphan.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _sync_folder(folder: Path) -> None:
    """Make the rename durable: flush the folder's entry (POSIX; elsewhere there is no folder to open)."""
    if os.name != "posix":
        return
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def describe(header: IndexFile) -> Mapping[str, Any]:
    """The header as a person reads it (`canon store stats` and the logs)."""
    return {"revision": header.revision, "nodes": header.nodes, "edges": header.edges,
            "bytes": header.payload_bytes + HEADER_BYTES}  # fmt: skip
