"""core.index.persisted: the graph index saved beside the store, loaded at start and brought up to date from the change
log, and rebuilt whenever the file cannot be trusted (missing, cut short, changed, of another format, of another
store's history, behind a compacted log or a model change), on both backends; walks answer the same either way."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

from core.dispatch.dispatcher import Dispatcher
from core.dispatch.registry import build_registry
from core.index.graph import GraphIndex
from core.index.persisted import (
    FORMAT,
    HEADER_BYTES,
    MAGIC,
    index_file,
    load_index,
    open_index,
    read_header,
    save_index,
)
from core.lang.model import Model
from core.ops.config import Config
from core.seam.instance import CLOSE_SAVE_LAG, open_instance
from core.store import Store, open_existing_store
from core.store.retention import Retention
from core.tools import Toolset
from core.values.operations import DeleteEdge, DeleteNode, PutEdge, PutNode
from core.values.principal import LOCAL
from core.values.records import Edge, Node, Sight

pytestmark = pytest.mark.both_backends

REPO = Path(__file__).resolve().parents[2]
PERSON, TEAM, SERVICE = "person-lena-fischer", "team-payments", "svc-checkout-api"
SIGHTS = [None, Sight(frozenset({"public"})), Sight(frozenset({"public", "internal"}), ("user:idx-reader",))]
WALKS = [
    ("get_neighbors", {"id": SERVICE, "depth": 2, "limit": 50}),
    ("get_neighbors", {"id": PERSON, "depth": 3, "direction": "in", "limit": 50}),
    ("find_paths", {"source": SERVICE, "target": "team-leadership", "max_depth": 5, "limit": 20}),
    ("query_graph", {"match": [{"node": "p", "type": "Person"}, {"edge": "member_of", "from": "p", "to": "t"}],
                     "limit": 50}),
]  # fmt: skip


def _person(id_: str, n: int, **extra: Any) -> Node:
    properties = {"email": f"idx{n}@northwind.example", "name": f"Index Person {n}", "handle": f"idx-{n}",
                  "title": "Engineer", "role": "engineer"}  # fmt: skip
    return Node(id_, "Person", properties, **extra)


def _assert_same(index: GraphIndex, store: Store) -> None:
    """`index` holds exactly what a build of `store` holds: maps, counts, and each sight's visible counts."""
    built = GraphIndex.build(store)
    assert index.revision == built.revision == store.revision()
    assert nx.utils.graphs_equal(index.graph, built.graph)
    assert {n: index.graph.nodes[n] for n in index.graph} == {n: built.graph.nodes[n] for n in built.graph}
    assert sorted(index.graph.in_edges(keys=True)) == sorted(built.graph.in_edges(keys=True))
    assert (index.node_counts, index.edge_counts) == (built.node_counts, built.edge_counts)
    for sight in SIGHTS:
        assert index.visible_counts(sight) == built.visible_counts(sight)


def _write_some(store: Store, start: int) -> None:
    """Puts, edges, a visibility move to restricted, an edge delete and a cascading delete."""
    a, b = _person(f"person-idx-{start}", start), _person(f"person-idx-{start + 1}", start + 1)
    store.commit([PutNode(a), PutNode(b), PutEdge(Edge("reports_to", a.id, b.id)),
                  PutEdge(Edge("member_of", a.id, TEAM, {"role": "member"}))], principal="test")  # fmt: skip
    store.commit([PutNode(Node(b.id, "Person", b.properties, "restricted", ("user:idx-reader",)))], principal="test")
    store.commit([DeleteEdge("reports_to", a.id, b.id)], principal="test")
    store.commit([DeleteNode(a.id, cascade=True)], principal="test")


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "canon.db.graph-index"


def test_a_saved_index_loads_as_the_build_it_was_saved_from(seeded_store: Store, path: Path) -> None:
    built = GraphIndex.build(seeded_store)
    header = save_index(built, path)
    assert (header.revision, header.nodes) == (seeded_store.revision(), len(built))
    assert path.stat().st_size == HEADER_BYTES + header.payload_bytes
    loaded, was_loaded = open_index(seeded_store, path)
    assert was_loaded
    assert loaded.loaded_at == seeded_store.revision()
    _assert_same(loaded, seeded_store)
    # the loaded index follows the log as a built one does, in place and copy-on-write
    with loaded.reading():
        _write_some(seeded_store, 100)
        loaded.sync()
    _write_some(seeded_store, 200)
    loaded.sync()
    _assert_same(loaded, seeded_store)


def test_a_stale_file_is_brought_up_to_date_from_the_change_log(seeded_store: Store, path: Path) -> None:
    save_index(GraphIndex.build(seeded_store), path)
    saved_at = seeded_store.revision()
    _write_some(seeded_store, 300)
    loaded, was_loaded = open_index(seeded_store, path)
    assert was_loaded
    assert loaded.loaded_at == saved_at < loaded.revision == seeded_store.revision()
    assert "person-idx-301" in loaded.graph
    assert "person-idx-300" not in loaded.graph  # deleted after the file was written
    _assert_same(loaded, seeded_store)


def test_a_file_saved_while_writes_land_holds_one_revision(seeded_store: Store, path: Path) -> None:
    """Saving holds a view: writes applied meanwhile go copy-on-write, and the file is the revision it names."""
    index = GraphIndex.build(seeded_store)
    with index.snapshot() as (_, revision):
        _write_some(seeded_store, 400)
        index.sync()  # applied copy-on-write under the snapshot's hold
        assert index.revision > revision
    header = save_index(index, path)
    assert header.revision == index.revision
    _assert_same(load_index(seeded_store, path), seeded_store)


def _damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "truncated":
        data = data[: len(data) - 100]
    elif how == "header cut":
        data = data[: HEADER_BYTES // 2]
    elif how == "flipped byte":
        data[HEADER_BYTES + (len(data) - HEADER_BYTES) // 2] ^= 0xFF
    elif how == "empty":
        data = bytearray()
    elif how == "not ours":
        data = bytearray(b"SQLite format 3\x00" + bytes(HEADER_BYTES))
    elif how in ("wrong format", "garbled header"):
        fields = json.loads(bytes(data[len(MAGIC) : HEADER_BYTES]).split(b"\n", 1)[0])
        fields["format"] = FORMAT + 1
        text = MAGIC + (json.dumps(fields).encode() if how == "wrong format" else b"{not json") + b"\n"
        data[:HEADER_BYTES] = text.ljust(HEADER_BYTES, b" ")
    elif how == "payload with a global":  # a payload that checks out but would build an object: refused anyway
        import hashlib
        import pickle

        payload = pickle.dumps(Path("x"), protocol=5)
        fields = json.loads(bytes(data[len(MAGIC) : HEADER_BYTES]).split(b"\n", 1)[0])
        fields.update(payload_bytes=len(payload), sha256=hashlib.sha256(payload).hexdigest())
        data = bytearray((MAGIC + json.dumps(fields).encode() + b"\n").ljust(HEADER_BYTES, b" ") + payload)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["truncated", "header cut", "flipped byte", "empty", "not ours", "wrong format",
                                 "garbled header", "payload with a global"])  # fmt: skip
def test_a_damaged_or_foreign_file_is_rebuilt_never_trusted(
    seeded_store: Store, path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    save_index(GraphIndex.build(seeded_store), path)
    _write_some(seeded_store, 500)
    _damage(path, how)
    with caplog.at_level("INFO", logger="canon.index"):
        index, was_loaded = open_index(seeded_store, path)
    assert not was_loaded
    assert index.loaded_at is None
    assert "building it from the store" in caplog.text
    _assert_same(index, seeded_store)


def test_a_missing_file_is_built_from_the_store(seeded_store: Store, path: Path) -> None:
    index, was_loaded = open_index(seeded_store, path)
    assert not was_loaded
    _assert_same(index, seeded_store)


def test_a_file_of_another_history_is_refused(seeded_store: Store, path: Path, tmp_path: Path, model: Model) -> None:
    """A file newer than the store (a store restored from an older backup), and one whose revision the store has
    reached by other changes (another store at the same place), are rebuilt."""
    from core.store import open_store

    _write_some(seeded_store, 600)
    save_index(GraphIndex.build(seeded_store), path)
    other = open_store(tmp_path / "other.db", model)
    try:
        assert other.revision() < seeded_store.revision()
        assert not open_index(other, path)[1]  # newer than the store
        while other.revision() < seeded_store.revision():
            other.commit([PutNode(_person(f"person-other-{other.revision()}", other.revision()))], principal="test")
        assert other.revision() == seeded_store.revision()
        index, was_loaded = open_index(other, path)  # same revision, another change at it
        assert not was_loaded
        _assert_same(index, other)
    finally:
        other.close()


def test_a_file_behind_a_compacted_change_log_is_rebuilt(seeded_store: Store, path: Path) -> None:
    save_index(GraphIndex.build(seeded_store), path)
    _write_some(seeded_store, 700)
    done = seeded_store.compact(Retention(changes_keep_revisions=1))
    assert done.oldest > load_header_revision(path) + 1
    index, was_loaded = open_index(seeded_store, path)
    assert not was_loaded
    assert "person-idx-701" in index.graph
    _assert_same(index, seeded_store)


def load_header_revision(path: Path) -> int:
    return read_header(path).revision


def test_a_file_older_than_a_model_change_is_rebuilt(seeded_store: Store, path: Path, model: Model,
                                                     store_location: str | Path) -> None:  # fmt: skip
    """A type rename moves the records without a change each: the file's types would be the old ones."""
    from tests.core.test_model_migration import evolved, team_to_squad

    save_index(GraphIndex.build(seeded_store), path)
    renamed = open_existing_store(store_location)
    try:
        renamed.apply_model(evolved(model, "2.0.0", team_to_squad), principal="user:admin")
        index, was_loaded = open_index(renamed, path)
        assert not was_loaded
        assert index.graph.nodes[TEAM]["type"] == "Squad"
        _assert_same(index, renamed)
        save_index(index, path)  # saved after the change: loaded again
        assert open_index(renamed, path)[1]
    finally:
        renamed.close()


def _walk_answers(store: Store, model: Model, index: GraphIndex) -> list[Any]:
    dispatcher = Dispatcher(build_registry(model), store, index, Toolset().all_handlers())
    answers = []
    for tool, arguments in WALKS:
        result = dispatcher.call_tool(LOCAL, "test", tool, arguments)
        assert not result.is_error, result.error
        answers.append(result.value)
    return answers


def test_walks_answer_the_same_on_a_loaded_index_and_a_rebuilt_one(seeded_store: Store, path: Path,
                                                                   model: Model) -> None:  # fmt: skip
    save_index(GraphIndex.build(seeded_store), path)
    _write_some(seeded_store, 800)  # the loaded one catches these up from the log
    loaded, was_loaded = open_index(seeded_store, path)
    assert was_loaded
    rebuilt = GraphIndex.build(seeded_store)
    answers = _walk_answers(seeded_store, model, loaded)
    assert answers == _walk_answers(seeded_store, model, rebuilt)
    assert all(answer["items"] for answer in answers)  # walks that find something


def test_an_instance_saves_its_index_and_the_next_start_and_its_walk_worker_load_it(
    seeded_location: str | Path, tmp_path: Path
) -> None:
    """The first start builds the index and saves it meanwhile; closing after a few changes leaves the file (they
    are replayed), after many saves it; the next start and its walk worker load the file (PostgreSQL: in the cache
    folder)."""
    config = Config(store=seeded_location, walk_workers=1, cache=tmp_path / "cache")
    path = index_file(seeded_location, config.cache)
    assert path is not None
    first = open_instance(config)
    try:
        assert first.index is not None
        assert first.index.loaded_at is None
        assert first.walkers is not None
        assert first.walkers.ready(60)
        first.save_index()  # waits for the save started at open
        assert path.is_file()
        first.store.commit([PutNode(_person("person-idx-instance", 900))], principal="test")
        first.index.sync()
        saved_at = read_header(path).revision
        assert first.index.revision == saved_at + 1
    finally:
        first.close()
    assert read_header(path).revision == saved_at  # one change behind: not rewritten at close
    second = open_instance(config)
    try:
        assert second.index is not None
        assert second.index.loaded_at == saved_at  # loaded, and the write replayed from the change log
        assert second.index.revision == saved_at + 1
        assert "person-idx-instance" in second.index.graph
        assert second.walkers is not None
        assert second.walkers.ready(60)
        assert second.walkers.loaded == 1
        result = second.snapshot.dispatcher.call_tool(LOCAL, "test", *WALKS[0])
        assert not result.is_error, result.error
        assert second.walkers.answered == 1
        many = [PutNode(_person(f"person-idx-many-{n}", 1000 + n)) for n in range(CLOSE_SAVE_LAG)]
        second.store.commit(many, principal="test")  # a revision each: far enough past the file to save it at close
        second.index.sync()
    finally:
        second.close()
    assert read_header(path).revision == saved_at + 1 + CLOSE_SAVE_LAG


@pytest.mark.sqlite_only("the crash is of the writing process; the file is the same on both backends")
def test_a_process_killed_while_writing_leaves_a_file_that_is_refused(seeded_store: Store, path: Path) -> None:
    """A process saving in a loop is killed while a temporary file is being written: the index file is a whole one
    or none, the temporary one is refused, and the next save removes it."""
    script = ("import sys\nfrom pathlib import Path\nfrom core.store import open_existing_store\n"
              "from core.index.graph import GraphIndex\nimport core.index.persisted as p\n"
              "index = GraphIndex.build(open_existing_store(sys.argv[1], read_only=True))\n"
              "while True:\n    p.save_index(index, Path(sys.argv[2]))\n")  # fmt: skip
    orphans: list[Path] = []
    for _ in range(5):  # killed just after a rename there is no temporary file: again
        writer = subprocess.Popen([sys.executable, "-c", script, seeded_store.location, str(path)], cwd=REPO)
        try:
            deadline = time.monotonic() + 60
            while not list(path.parent.glob(f"{path.name}.*.tmp")):
                assert writer.poll() is None, "the writer ended"
                assert time.monotonic() < deadline, "the writer never wrote"
                time.sleep(0.001)
            os.kill(writer.pid, signal.SIGKILL)
        finally:
            writer.kill()
            writer.wait()
        orphans = list(path.parent.glob(f"{path.name}.*.tmp"))
        if orphans:
            break
    assert orphans, "the writer was never killed while writing"
    assert not open_index(seeded_store, orphans[0])[1]  # half written: refused
    if path.exists():  # a whole file from an earlier round of the loop
        _assert_same(load_index(seeded_store, path), seeded_store)
    save_index(GraphIndex.build(seeded_store), path)
    assert not list(path.parent.glob(f"{path.name}.*.tmp"))  # its writer is dead: removed
    assert open_index(seeded_store, path)[1]
