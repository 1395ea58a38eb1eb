"""core.index.mapped: the graph index as read-only arrays mapped from its file, under the layers of changes since.

A property test draws change sequences on the seeded store (people added, linked, unlinked, made restricted, deleted;
files saved and the index moved onto them; the log compacted; types renamed) and holds an index that stands on the
mapped file to exactly what a build of the store holds (maps, counts, what each sight sees) and to the same walk
answers, at every step. The other tests pin what a mapped base must never do: change, be copied, or be trusted when
its sections do not hold together.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import Any
from unittest import mock

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import core.index.graph as graph_module
from core.dispatch.dispatcher import Dispatcher
from core.dispatch.registry import build_registry
from core.index.graph import GraphIndex
from core.index.mapped import MappedAdjacency, MappedNodes
from core.index.persisted import load_index, open_index, remap_index, save_index
from core.lang.model import Model
from core.store import Store, open_existing_store
from core.store.retention import Retention
from core.tools import Toolset
from core.values.errors import ValidationError
from core.values.operations import DeleteEdge, DeleteNode, PutEdge, PutNode
from core.values.principal import LOCAL
from core.values.records import Edge, Node, Sight, Visibility
from tests.conftest import copy_store
from tests.core.test_model_migration import evolved, member_of_to_belongs_to, team_to_squad

TEAMS = ["team-payments", "team-platform", "team-leadership"]
SIGHTS = [None, Sight(frozenset({"public"})), Sight(frozenset({"public", "internal"}), ("user:map-reader",)),
          Sight(frozenset({"public", "internal"}), ("user:other",))]  # fmt: skip
LEVELS: list[Visibility] = ["public", "internal", "restricted"]


def _person(n: int, visibility: Visibility = "public", readers: tuple[str, ...] = ()) -> Node:
    properties = {"email": f"map{n}@northwind.example", "name": f"Mapped Person {n}", "handle": f"map-{n}",
                  "title": "Engineer", "role": "engineer"}  # fmt: skip
    return Node(f"person-map-{n}", "Person", properties, visibility, readers)


def _same(index: GraphIndex, store: Store) -> None:
    """`index` holds exactly what a build of `store` holds."""
    built = GraphIndex.build(store)
    assert index.revision == built.revision == store.revision()
    assert nx.utils.graphs_equal(index.graph, built.graph)
    assert {n: index.graph.nodes[n] for n in index.graph} == {n: built.graph.nodes[n] for n in built.graph}
    assert sorted(index.graph.in_edges(keys=True)) == sorted(built.graph.in_edges(keys=True))
    assert +index.node_counts == +built.node_counts
    assert +index.edge_counts == +built.edge_counts
    for sight in SIGHTS:
        assert index.visible_counts(sight) == built.visible_counts(sight)


def _walks(store: Store, index: GraphIndex, people: list[int]) -> list[Any]:
    """Walk answers (or error codes) from the seeded nodes and the people drawn."""
    dispatcher = Dispatcher(build_registry(store.model), store, index, Toolset().all_handlers())
    member = "belongs_to" if "belongs_to" in store.model.edge_types else "member_of"
    calls: list[tuple[str, dict[str, Any]]] = [
        ("get_neighbors", {"id": "svc-checkout-api", "depth": 2, "limit": 50}),
        ("find_paths", {"source": "svc-checkout-api", "target": "team-leadership", "max_depth": 4, "limit": 20}),
        ("query_graph", {"match": [{"node": "p", "type": "Person"}, {"edge": member, "from": "p", "to": "t"}],
                         "limit": 100}),
    ]  # fmt: skip
    for n in people[:3]:
        calls.append(("get_neighbors", {"id": f"person-map-{n}", "depth": 2, "direction": "both", "limit": 50}))
        calls.append(("find_paths", {"source": f"person-map-{n}", "target": "team-leadership", "max_depth": 4,
                                     "limit": 20}))  # fmt: skip
    answers = []
    for tool, arguments in calls:
        result = dispatcher.call_tool(LOCAL, "test", tool, arguments)
        answers.append(result.value if not result.is_error else result.as_json())
    return answers


STEP = st.one_of(
    st.tuples(st.just("person"), st.integers(0, 11), st.sampled_from(LEVELS), st.booleans()),
    st.tuples(st.just("reports"), st.integers(0, 11), st.integers(0, 11)),
    st.tuples(st.just("member"), st.integers(0, 11), st.integers(0, 2)),
    st.tuples(st.just("unlink"), st.integers(0, 40)),
    st.tuples(st.just("delete"), st.integers(0, 11)),
    st.tuples(
        st.just("save"),
    ),
    st.tuples(
        st.just("hold"),
    ),
    st.tuples(
        st.just("compact"),
    ),
    st.tuples(
        st.just("rename"),
    ),
)


@contextlib.contextmanager
def _copy_of(template: Path) -> Generator[Store]:
    with tempfile.TemporaryDirectory() as folder:
        store = open_existing_store(copy_store(template, Path(folder) / "canon.db"))
        try:
            yield store
        finally:
            store.close()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(STEP, min_size=1, max_size=25))
def test_a_mapped_index_answers_as_a_built_one_through_any_changes(seed_template: Path, model: Model,
                                                                   steps: list[tuple[Any, ...]]) -> None:  # fmt: skip
    with _copy_of(seed_template) as store, mock.patch.object(graph_module, "_REBASE_MIN", 6):
        path = Path(f"{store.location}.graph-index")
        save_index(GraphIndex.build(store), path)
        index = load_index(store, path)
        assert index.mapped
        grown: list[bool] = []
        index.on_grown = lambda: grown.append(True)
        people: dict[int, Node] = {}
        edges: list[tuple[str, str, str]] = []
        holding: contextlib.ExitStack | None = None
        renamed = False
        for step in steps:
            kind = step[0]
            if kind == "person":
                _, n, visibility, named = step
                people[n] = _person(n, visibility, ("user:map-reader",) if named and visibility == "restricted" else ())
                store.commit([PutNode(people[n])], principal="test")
            elif kind in ("reports", "member") and step[1] in people:
                member = "belongs_to" if renamed else "member_of"
                if kind == "reports" and step[2] in people:
                    edge = Edge("reports_to", people[step[1]].id, people[step[2]].id)
                else:
                    edge = Edge(member, people[step[1]].id, TEAMS[step[2] % 3], {"role": "member"})
                with contextlib.suppress(ValidationError):  # a second team for a person (many-to-one): refused
                    store.commit([PutEdge(edge)], principal="test")
                edges.append((edge.type, edge.source, edge.target))
            elif kind == "unlink" and edges:
                ref = edges.pop(step[1] % len(edges))
                if store.edge(*ref) is not None:
                    store.commit([DeleteEdge(*ref)], principal="test")
            elif kind == "delete" and step[1] in people:
                store.commit([DeleteNode(people.pop(step[1]).id, cascade=True)], principal="test")
            elif kind == "save" or grown:  # what the serving process does when told it grew
                grown.clear()
                save_index(index, path)
                remap_index(index, path)
                assert index.mapped
            elif kind == "hold":
                if holding is None:
                    holding = contextlib.ExitStack()
                    holding.enter_context(index.reading())
                else:
                    holding.close()
                    holding = None
            elif kind == "compact":
                store.compact(Retention(changes_keep_revisions=1))
            elif kind == "rename" and not renamed:
                store.apply_model(evolved(model, "2.0.0", team_to_squad, member_of_to_belongs_to),
                                  principal="user:admin")  # fmt: skip
                store.follow_model()
                edges = [("belongs_to", s, t) if k == "member_of" else (k, s, t) for k, s, t in edges]
                index.reload()  # what a process does when it hears of a rename (core.seam.instance, the workers)
                renamed = True
            index.sync()
            _same(index, store)
        if holding is not None:
            holding.close()
        assert _walks(store, index, list(people)) == _walks(store, GraphIndex.build(store), list(people))


def test_a_mapped_base_is_never_changed_folded_or_copied(seeded_store: Store, tmp_path: Path) -> None:
    """Changes over a mapped base go to the delta, even with no reader on the base (a dict base would take them in
    place); the file's arrays stay as they were, and a view taken before the changes still reads them."""
    path = tmp_path / "canon.db.graph-index"
    save_index(GraphIndex.build(seeded_store), path)
    index = load_index(seeded_store, path)
    before = index._view  # pyright: ignore[reportPrivateUsage]
    base = index._nodes.base  # pyright: ignore[reportPrivateUsage]
    assert isinstance(base, MappedNodes)
    assert isinstance(index._succ.base, MappedAdjacency)  # pyright: ignore[reportPrivateUsage]
    seeded_store.commit([PutNode(_person(1)), PutEdge(Edge("member_of", "person-map-1", TEAMS[0], {"role": "member"}))],
                        principal="test")  # fmt: skip
    seeded_store.commit([DeleteNode("person-lena-fischer", cascade=True)], principal="test")
    index.sync()
    assert index._nodes.base is base  # pyright: ignore[reportPrivateUsage]
    assert "person-map-1" in index.graph
    assert "person-map-1" not in base
    assert "person-lena-fischer" in base
    assert "person-lena-fischer" not in index.graph
    assert "person-lena-fischer" in before.nodes  # the view taken before still reads the file's arrays
    _same(index, seeded_store)


def test_a_file_whose_sections_do_not_hold_together_is_rebuilt(seeded_store: Store, tmp_path: Path) -> None:
    """A payload that matches its checksum but whose sections disagree (not written by this canon) is refused."""
    import hashlib
    import json

    from core.index.persisted import HEADER_BYTES, MAGIC

    path = tmp_path / "canon.db.graph-index"
    save_index(GraphIndex.build(seeded_store), path)
    data = bytearray(path.read_bytes())
    fields = json.loads(bytes(data[len(MAGIC) : HEADER_BYTES]).split(b"\n", 1)[0])
    offset, length = fields["sections"]["out"]
    data[offset : offset + 8] = bytes(8)  # two adjacency entries point at node 0 through edge type 0
    fields["sections"]["in_offsets"][1] -= 8  # and the in-offsets lose their last entry
    fields["sha256"] = hashlib.sha256(data[HEADER_BYTES:]).hexdigest()
    data[:HEADER_BYTES] = (MAGIC + json.dumps(fields).encode() + b"\n").ljust(HEADER_BYTES, b" ")
    path.write_bytes(bytes(data))
    index, loaded = open_index(seeded_store, path)
    assert not loaded
    _same(index, seeded_store)
    assert length > 0


@pytest.mark.parametrize("id", ["svc-checkout-api", "nobody", "", "ünïcode-ø", "svc-checkout-ap", "svc-checkout-apix"])
def test_mapped_lookups_find_exactly_the_ids_there_are(seeded_store: Store, tmp_path: Path, id: str) -> None:
    path = tmp_path / "canon.db.graph-index"
    built = GraphIndex.build(seeded_store)
    save_index(built, path)
    index = load_index(seeded_store, path)
    assert (id in index.graph) == (id in built.graph)
    assert index.graph.nodes.get(id) == built.graph.nodes.get(id)
    if id in built.graph:
        assert dict(index.graph.succ[id]) == dict(built.graph.succ[id])
        assert dict(index.graph.pred[id]) == dict(built.graph.pred[id])
    assert sorted(index.graph) == sorted(built.graph)


def _mapped_inodes(pid: int, path: Path) -> set[int]:
    """The inodes of `path` (any version of it) that process `pid` has mapped."""
    lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    return {int(line.split()[4]) for line in lines if line.endswith(str(path))}


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads the mappings from /proc")
def test_the_serving_process_and_its_walk_worker_map_one_file_and_move_onto_a_newer_one(
    seeded_location: str | Path, tmp_path: Path
) -> None:
    """The first start builds the index, saves the file and moves onto it; its walk worker maps the same file (the
    same pages); after the serving process saves a newer file, the worker's next walk maps that one and sees the
    change it holds."""
    import os

    from core.index.persisted import index_file
    from core.ops.config import Config
    from core.seam.instance import open_instance

    instance = open_instance(Config(store=seeded_location, walk_workers=1))
    try:
        assert instance.index is not None
        assert instance.walkers is not None
        path = index_file(seeded_location, None)
        assert path is not None
        instance.save_index()  # waits for the first start's save (and its move onto the file)
        assert instance.index.mapped
        assert instance.walkers.ready(60)
        walk = ("get_neighbors", {"id": "team-payments", "depth": 1, "direction": "in", "limit": 200})
        before = instance.snapshot.dispatcher.call_tool(LOCAL, "test", *walk)
        assert before.value is not None
        first = path.stat().st_ino
        (worker,) = instance.walkers.pids()
        assert first in _mapped_inodes(os.getpid(), path)
        assert first in _mapped_inodes(worker, path)  # loaded from the file saved before it started, or moved
        instance.store.commit([PutNode(_person(7)), PutEdge(Edge("member_of", "person-map-7", "team-payments",
                                                                  {"role": "member"}))], principal="test")  # fmt: skip
        instance.index.sync()
        instance.save_index()  # a newer file: the serving process moves onto it
        second = path.stat().st_ino
        assert second != first
        assert second in _mapped_inodes(os.getpid(), path)
        after = instance.snapshot.dispatcher.call_tool(LOCAL, "test", *walk)
        assert after.value is not None
        assert "person-map-7" in [item["node"]["id"] for item in after.value["items"]]
        assert after.value["total"] == before.value["total"] + 1
        assert second in _mapped_inodes(worker, path)  # moved onto it before that walk
        assert instance.walkers.answered == 2
    finally:
        instance.close()


def test_ids_decoded_at_once_are_the_ids_decoded_one_by_one(tmp_path: Path) -> None:
    """A walk worker decodes every id before it walks (`GraphIndex.warm`); ids with non-ASCII characters (a model
    may allow them) take the slow way, byte offsets not being character offsets then."""
    import io
    import mmap

    from core.index.mapped import Mapped, write_sections

    for ids in (["a", "b-2", "c"], ["a", "ünï-ø", "zz", "ß"]):
        nodes = {i: {"type": "T", "visibility": "public", "readers": ()} for i in ids}
        succ: dict[str, dict[str, Any]] = {i: {} for i in ids}
        pred: dict[str, dict[str, Any]] = {i: {} for i in ids}
        succ[ids[0]][ids[1]] = pred[ids[1]][ids[0]] = {"e": {}}
        sink = io.BytesIO()
        counts = {"edges": 1, "node_counts": {}, "edge_counts": {}, "by_visibility": [], "by_level": [],
                  "readable": {}}  # fmt: skip
        sections = write_sections(sink, 0, nodes, succ, pred, counts)
        path = tmp_path / "sections"
        path.write_bytes(sink.getvalue())
        with path.open("rb") as handle:
            arrays = Mapped(mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ), sections)
        one_by_one = [arrays.id_of(k) for k in range(arrays.nodes)]
        arrays.decoded = [None] * arrays.nodes
        arrays._decodes = 0  # pyright: ignore[reportPrivateUsage]
        arrays.decode_all()
        assert arrays.decoded == one_by_one == sorted(ids)
        assert MappedNodes(arrays).get(ids[1]) == nodes[ids[1]]
        assert dict(MappedAdjacency(arrays, "in")[ids[1]]) == {ids[0]: {"e": {}}}
