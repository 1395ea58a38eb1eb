"""Import and export: the file formats that carry a graph in and out of a store.

Formats, chosen by file extension:

* JSON (`.json`) and YAML (`.yaml`, `.yml`): a document `{"nodes": [...], "edges": [...]}`;
* JSON Lines (`.jsonl`, `.ndjson`): one record per line, each with `"kind": "node"` or `"kind": "edge"`.

A node record is `{"id", "type", "visibility"?, "readers"?, "properties"?, "created_at"?, "updated_at"?,
"updated_by"?}` (without visibility and readers, an existing node keeps its own and a new one takes its type's
default); an edge record is `{"type", "source", "target", "properties"?, ...}`. Revisions are local to a
store and are neither exported nor imported. A directory imports every such file in it, recursively, in
path order.

An import is one transaction: every problem in every file is listed (file, line or JSON pointer, message)
and nothing is written unless there are none. Nodes are applied before edges, so files may reference each
other. Export writes records in a fixed order with a fixed key order, so export → import into an empty store
→ export gives the same bytes.
"""

from __future__ import annotations

import itertools
import json
import os
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

from core.store import Bulk, Store
from core.values.documents import load_document, parse_json
from core.values.errors import ConfigError, ImportFileError, Problem
from core.values.json_values import json_text_holdable, value_problems
from core.values.operations import Operation, PutEdge, PutNode, put_node
from core.values.records import Edge

__all__ = [
    "ImportReport",
    "export_graph",
    "import_path",
    "output_format",
    "read_records",
    "write_file",
    "write_records",
]

SUFFIXES = {".json": "json", ".yaml": "yaml", ".yml": "yaml", ".jsonl": "jsonl", ".ndjson": "jsonl"}
NODE_FIELDS = {"kind", "id", "type", "visibility", "readers", "properties", "created_at", "updated_at", "updated_by"}
EDGE_FIELDS = {"kind", "type", "source", "target", "properties", "created_at", "updated_at", "updated_by"}
Progress = Callable[[str, int, int], None]
BATCH = 5000  # records checked and written together: what an import holds in memory at once
T = TypeVar("T")


@dataclass(frozen=True)
class Located:
    """An operation read from an input, with where it came from."""

    op: Operation
    file: str
    pointer: str
    line: int | None = None
    order: int = 0  # its place among every record read, in file order


@dataclass(frozen=True)
class ImportReport:
    files: int
    nodes: int
    edges: int
    changed: int  # changes made (0 on a dry run)
    revision: int | None  # the store's revision after the import (None on a dry run)


def import_path(
    store: Store,
    path: Path,
    *,
    principal: str,
    dry_run: bool = False,
    progress: Progress | None = None,
    batch: int = BATCH,
) -> ImportReport:
    """Import a file or directory into the store, all or nothing; raise `ImportFileError` listing every problem.

    Streamed in one write transaction (`Store.bulk`): a first pass over the files reads every record and writes
    the nodes, a second writes the edges, each in batches of `batch` records checked on the state the batches
    before them left. Memory holds one batch, the problems, and a 64-bit digest per record (to find duplicates);
    a JSON or YAML document is read whole, a JSON Lines file line by line.
    """
    files = _input_files(path)
    found: list[tuple[int, Problem]] = []
    seen = _Seen()
    tick = _Ticker(progress, sum(_count_records(f) for f in files) if progress is not None else 0)
    tick(0)  # the bar from the start: the first batch is written after a while
    with store.bulk(principal=principal, dry_run=dry_run) as bulk:
        nodes = _write(bulk, _pass(files, "nodes", found, seen), found, batch, tick)
        edges = _write(bulk, _pass(files, "edges", None, seen), found, batch, tick)
        tick.finish()
        found += seen.duplicates
        if found:  # raised inside the transaction, which rolls it back
            problems = [problem for _, problem in sorted(found, key=lambda item: item[0])]  # file order
            raise ImportFileError(f"The import has {len(problems)} problem(s); nothing was written.", problems)
    if dry_run:
        return ImportReport(len(files), nodes, edges, 0, None)
    return ImportReport(len(files), nodes, edges, bulk.changed, bulk.revision)


def _write(bulk: Bulk, records: Iterator[Located], found: list[tuple[int, Problem]], size: int,
           tick: _Ticker) -> int:  # fmt: skip
    """Write records batch by batch, adding the problems each batch has; return how many records there were."""
    count = 0
    for batch in _batches(records, size):
        count += len(batch)
        for p in bulk.write([r.op for r in batch]):
            r = batch[p.index]
            found.append((r.order, Problem(r.pointer + p.problem.pointer, p.problem.message, r.file, r.line)))
        tick(len(batch))
    return count


def _batches(items: Iterator[Located], size: int) -> Iterator[list[Located]]:
    while batch := list(itertools.islice(items, size)):
        yield batch


def _pass(
    files: list[Path],
    kind: str,
    found: list[tuple[int, Problem]] | None,
    seen: _Seen,
) -> Iterator[Located]:
    """The records of one kind ("nodes" or "edges"), in file order, reading every file. The first pass (`found`
    given) collects what is wrong with a record itself and notes every record in `seen`; the second only
    confirms the duplicates `seen` suspects."""
    want = PutNode if kind == "nodes" else PutEdge
    skip = None if found is not None else seen.settled_node
    for r, problems in read_records(files, skip):
        if found is not None:
            found += problems
            if r is not None:
                seen.note(r)
        elif r is not None:
            seen.confirm(r)
        if r is not None and isinstance(r.op, want):
            yield r


class _Ticker:
    """Reports progress as "writing": the records written (each once, nodes in the first pass, edges in the
    second), of about `total` (the records counted in the files before the import)."""

    def __init__(self, progress: Progress | None, total: int) -> None:
        self._progress, self._total, self._done = progress, total, 0

    def __call__(self, written: int) -> None:
        self._done += written
        if self._progress is not None:
            self._progress("writing", self._done, max(self._total, self._done))

    def finish(self) -> None:
        """Draw the end: every record written, of as many (a file's count was its lines, blank ones too)."""
        if self._progress is not None and self._done != self._total:
            self._progress("writing", self._done, self._done)


class _Seen:
    """Finds records with the same id (a node's id, an edge's type, source and target) in bounded memory: the
    first pass keeps a 64-bit digest of each, the second confirms a digest seen twice by comparing the ids (so a
    collision is no duplicate) and names where the first one was."""

    def __init__(self) -> None:
        self._digests: set[int] = set()
        self._suspects: set[int] = set()
        self._first: dict[tuple[str, ...], Located] = {}
        self.duplicates: list[tuple[int, Problem]] = []

    def note(self, r: Located) -> None:
        digest = hash(_identity(r.op))
        if digest in self._digests:
            self._suspects.add(digest)
        self._digests.add(digest)

    def settled_node(self, raw: Any) -> bool:
        """Whether a parsed record is a node no other record may share an id with (the second pass skips it)."""
        if not isinstance(raw, dict):
            return False
        record: dict[str, Any] = raw  # pyright: ignore[reportUnknownVariableType]
        id_ = record.get("id")
        return record.get("kind") == "node" and isinstance(id_, str) and hash(("node", id_)) not in self._suspects

    def confirm(self, r: Located) -> None:
        key = _identity(r.op)
        if hash(key) not in self._suspects:
            return
        first = self._first.setdefault(key, r)
        if first is not r:
            where = f"{first.file}:{first.line}" if first.line is not None else f"{first.file}#{first.pointer}"
            message = f"duplicate {key[0]} {' '.join(key[1:])!r} (first at {where})"
            self.duplicates.append((r.order, Problem(r.pointer, message, r.file, r.line)))


def _input_files(path: Path) -> list[Path]:
    if path.is_dir():
        found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)
        if not found:
            raise ImportFileError(
                f"No importable files in {path}.",
                [Problem("", f"no {', '.join(sorted(SUFFIXES))} files in this directory", file=str(path))],
            )
        return found
    if not path.exists():
        raise ImportFileError(f"No such file: {path}.", [Problem("", "file not found", file=str(path))])
    if path.suffix.lower() not in SUFFIXES:
        raise ImportFileError(
            f"Unknown import format {path.suffix!r}.",
            [Problem("", f"expected one of {', '.join(sorted(SUFFIXES))}", file=str(path))],
        )
    return [path]


def read_records(
    files: list[Path], skip: Callable[[Any], bool] | None = None
) -> Iterator[tuple[Located | None, list[tuple[int, Problem]]]]:
    """Each record of the files in order, as an operation (None if it has problems, or if `skip` says of the parsed
    record that it is not needed), with the problems found before it; each problem comes with the place in file
    order it belongs at (that of the record it is about, or of the record after it for a line that is no record),
    so problems found later sort in among them. A last `(None, problems)` carries what was found after the last
    record."""
    order = 0
    for file in files:
        name = str(file)
        pending: list[Problem] = []  # what the reader found before the record it yields next
        for raw, pointer, line, text in _raw_records(file, pending):
            found = [(order, p) for p in pending]
            pending.clear()
            if skip is not None and skip(raw):
                yield None, found
                order += 1
                continue
            op, record_problems = _to_operation(raw, text)
            found += [(order, Problem(pointer + p.pointer, p.message, name, line)) for p in record_problems]
            yield (Located(op, name, pointer, line, order) if op is not None else None), found
            order += 1
        if pending:
            yield None, [(order, p) for p in pending]


def _count_records(file: Path) -> int:
    """About how many records a file holds (for the progress bar): its lines, or its document's array items."""
    if SUFFIXES[file.suffix.lower()] == "jsonl":
        with file.open("rb") as handle:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))
    return sum(1 for _ in _raw_records(file, []))


def _raw_records(file: Path, problems: list[Problem]) -> Iterator[tuple[Any, str, int | None, str | None]]:
    """(record, JSON pointer within the file, line, the JSON text it was parsed from if it has a line of its own)
    for every record of a file."""
    if SUFFIXES[file.suffix.lower()] == "jsonl":
        yield from _jsonl_records(file, problems)
        return
    document, parse_problems = load_document(file)
    problems += parse_problems
    if parse_problems:
        return
    if not isinstance(document, dict) or not set(document) <= {"nodes", "edges"}:
        problems.append(
            Problem("", 'expected an object with "nodes" and/or "edges" arrays and nothing else', str(file))
        )
        return
    for section in ("nodes", "edges"):
        items = document.get(section, [])
        if not isinstance(items, list):
            problems.append(Problem(f"/{section}", "expected an array", str(file)))
            continue
        for i, item in enumerate(items):
            record = {"kind": section[:-1], **item} if isinstance(item, dict) else item
            yield record, f"/{section}/{i}", None, None


def _jsonl_records(file: Path, problems: list[Problem]) -> Iterator[tuple[Any, str, int | None, str | None]]:
    try:
        handle = file.open(encoding="utf-8")
    except OSError as exc:
        problems.append(Problem("", f"cannot read file: {exc.strerror}", str(file)))
        return
    with handle:
        try:
            for number, text in enumerate(handle, start=1):
                if not text.strip():
                    continue
                line = text.rstrip("\r\n")  # so a line cut short is faulted just past its last character
                try:
                    record = parse_json(line)
                except json.JSONDecodeError as exc:
                    problems.append(Problem("", f"invalid JSON: {exc.msg} (column {exc.colno})", str(file), number))
                    continue
                yield record, "", number, line
        except UnicodeDecodeError as exc:
            problems.append(Problem("", f"not UTF-8 text: {exc.reason}", str(file)))


def _to_operation(raw: Any, text: str | None = None) -> tuple[Operation | None, list[Problem]]:
    """The operation a parsed record asks for, or its problems (`text`: the JSON it was parsed from, if known: when
    it shows there is nothing `value_problems` would find, the value is not walked)."""
    if not isinstance(raw, dict):
        return None, [Problem("", "a record must be an object")]
    record: Mapping[str, Any] = raw
    holdable = text is not None and json_text_holdable(text)
    unfit = [] if holdable else value_problems(record)  # e.g. YAML's .nan, a lone surrogate, an integer past 64 bits
    if unfit:
        return None, unfit
    kind = record.get("kind")
    if kind not in ("node", "edge"):
        return None, [Problem("/kind", 'expected "node" or "edge"')]
    allowed = NODE_FIELDS if kind == "node" else EDGE_FIELDS
    required = ("id", "type") if kind == "node" else ("type", "source", "target")
    problems = [Problem(f"/{k}", f"unknown field {k!r} in a {kind} record") for k in record if k not in allowed]
    problems += [Problem(f"/{k}", f"missing required field {k!r}") for k in required if k not in record]
    for k in (*required, "visibility", "created_at", "updated_at", "updated_by"):
        if k in record and not isinstance(record[k], str):
            problems.append(Problem(f"/{k}", f"{k} must be a string"))
    properties = record.get("properties", {})
    if not isinstance(properties, dict):
        problems.append(Problem("/properties", "properties must be an object"))
    readers = record.get("readers", [])
    if not isinstance(readers, list) or not all(isinstance(r, str) for r in readers):
        problems.append(Problem("/readers", "readers must be an array of strings"))
    if problems:
        return None, problems
    created, updated, by = record.get("created_at"), record.get("updated_at"), record.get("updated_by")
    if kind == "node":
        op = put_node(record["id"], record["type"], properties, visibility=record.get("visibility"),
                      readers=record.get("readers"), created_at=created, updated_at=updated, updated_by=by)  # fmt: skip
        return op, []
    edge = Edge(record["type"], record["source"], record["target"], properties, 0, created, updated, by)
    return PutEdge(edge), []


def _identity(op: Operation) -> tuple[str, ...]:
    return ("node", op.node.id) if isinstance(op, PutNode) else ("edge", *_edge_id(op))


def _edge_id(op: Operation) -> tuple[str, str, str]:
    assert isinstance(op, PutEdge)
    return op.edge.type, op.edge.source, op.edge.target


# -- export ------------------------------------------------------------------------------------------------------
def output_format(path: Path, format: str | None = None) -> str:
    """The format to write `path` in: `format` when given, else the one its extension names (never a guess)."""
    if format is not None:
        return format
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise ConfigError(f"Cannot tell which format to write {str(path)!r} in from its extension: name it .json, "
                          ".jsonl, .ndjson, .yaml or .yml.", source=str(path))  # fmt: skip
    return kind


def write_file(path: Path, write: Callable[[IO[str]], T]) -> T:
    """Run `write` on a new file that then replaces `path` at once (a reader never sees half a file).

    The file gets the mode the umask gives any new file (as `>` in a shell would); a folder that does not exist is
    refused, never created: a typo in it should not scatter files.
    """
    if not path.parent.is_dir():
        raise ConfigError(f"Cannot write {str(path)!r}: the folder {str(path.parent)!r} does not exist.",
                          source=str(path))  # fmt: skip
    tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # 0o666 less the umask, as open(2) does
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            result = write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return result


def export_graph(
    store: Store, path: Path | None, *, format: str | None = None, out: IO[str] | None = None
) -> tuple[int, int]:
    """Write every node and edge to `path` (atomically) or to `out`; return (nodes, edges) written."""
    nodes = ({"kind": "node", **n.to_json(revision=False)} for n in store.iter_nodes())
    edges = ({"kind": "edge", **e.to_json(revision=False)} for e in store.iter_edges())
    records = itertools.chain(nodes, edges)
    if path is None:
        assert out is not None
        return write_records(out, format or "json", records)
    kind = output_format(path, format)
    return write_file(path, lambda handle: write_records(handle, kind, records))


def write_records(out: IO[str], kind: str, records: Iterable[Mapping[str, Any]]) -> tuple[int, int]:
    """Write import records (nodes first, each with its `kind`) in format `kind`; return (nodes, edges).

    JSON Lines keeps `kind` on every line and streams; JSON and YAML write `{"nodes": [...], "edges": [...]}`.
    """
    counts = [0, 0]
    if kind == "jsonl":
        for record in records:
            counts[record["kind"] == "edge"] += 1
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
        return counts[0], counts[1]
    document: dict[str, list[dict[str, Any]]] = {"nodes": [], "edges": []}
    for record in records:
        document["edges" if record["kind"] == "edge" else "nodes"].append(
            {k: v for k, v in record.items() if k != "kind"}
        )
    if kind == "yaml":
        import yaml  # only here: a start that writes no YAML never imports it

        yaml.safe_dump(document, out, sort_keys=False, allow_unicode=True, width=120)
    else:
        json.dump(document, out, ensure_ascii=False, indent=1)
        out.write("\n")
    return len(document["nodes"]), len(document["edges"])
