"""The graph index mirrors the store and follows its change log, in this process and across processes."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import IO, Any

import pytest

from core.index.graph import GraphIndex
from core.lang.model import Model
from core.store.sqlite import SQLiteStore
from core.values.operations import DeleteEdge, DeleteNode, PutEdge, PutNode
from core.values.records import Change, Edge, Node, Sight
from tests.core._write_loop import batch_ids

HERE = Path(__file__).resolve().parent
TEAM = "team-leadership"  # a team in the seed data
LOOPED = [batch_ids("child", n)[0] for n in range(4)]  # a Person of each of _write_loop.py's first batches
PERSON = "person-lena-fischer"  # a person with many edges in the seed data


def _person(id_: str, n: int, **extra: object) -> Node:
    properties = {
        "email": f"graph{n}@northwind.example",
        "name": f"Graph Person {n}",
        "handle": f"graph-{n}",
        "title": "Engineer",
        "role": "engineer",
    }
    return Node(id_, "Person", properties, **extra)  # type: ignore[arg-type]


def test_build_mirrors_every_node_and_edge_of_the_store(seeded_store: SQLiteStore) -> None:
    index = GraphIndex.build(seeded_store)
    stats = seeded_store.stats()

    assert index.graph.number_of_nodes() == stats.nodes
    assert index.graph.number_of_edges() == stats.edges
    assert len(index) == stats.nodes
    assert index.revision == stats.revision
    for node in seeded_store.iter_nodes():
        attributes = index.graph.nodes[node.id]
        assert (attributes["type"], attributes["visibility"], tuple(attributes["readers"])) == (
            node.type,
            node.visibility,
            node.readers,
        )
    stored = {(e.source, e.target, e.type) for e in seeded_store.iter_edges()}
    assert set(index.graph.edges(keys=True)) == stored


def test_the_bulk_load_builds_exactly_what_add_node_and_add_edge_build(seeded_store: SQLiteStore) -> None:
    """The build writes networkx's adjacency dicts directly (for speed); it must be the same graph, down to the
    key dict that the successor and predecessor maps share, and the same counts a change-by-change build keeps."""
    import networkx as nx

    built = GraphIndex.build(seeded_store)
    reference: nx.MultiDiGraph[str] = nx.MultiDiGraph()
    for id_, type_, visibility, readers in seeded_store.iter_node_heads():
        reference.add_node(id_, type=type_, visibility=visibility, readers=readers or ())
    for type_, source, target in seeded_store.iter_topology():
        reference.add_edge(source, target, key=type_)
    assert nx.utils.graphs_equal(built.graph, reference)
    assert sorted(built.graph.edges(keys=True, data=True)) == sorted(reference.edges(keys=True, data=True))
    assert sorted(built.graph.in_edges(keys=True)) == sorted(reference.in_edges(keys=True))
    graph: Any = built.graph
    for source, target, _ in list(graph.edges(keys=True))[:50]:
        assert graph._succ[source][target] is graph._pred[target][source]  # one key dict, as networkx makes it
    replayed = GraphIndex(seeded_store)
    replayed.apply(seeded_store.changes(0, 1_000_000))
    assert built.visible_counts(None) == replayed.visible_counts(None)
    for levels in ({"public"}, {"public", "internal"}):
        sight = Sight(frozenset(levels))
        assert built.visible_counts(sight) == replayed.visible_counts(sight)
    built.graph.add_edge("team-payments", "svc-checkout-api", key="depends_on")  # and it stays a working graph
    assert built.graph.has_edge("team-payments", "svc-checkout-api", key="depends_on")


def test_build_keeps_readers_of_restricted_nodes(store: SQLiteStore) -> None:
    node = _person("person-secret", 1, visibility="restricted", readers=("group:team-payments", "user:ada"))
    store.commit([PutNode(node)], principal="test")

    index = GraphIndex.build(store)

    assert index.graph.nodes["person-secret"]["visibility"] == "restricted"
    assert tuple(index.graph.nodes["person-secret"]["readers"]) == ("group:team-payments", "user:ada")


def test_sync_returns_the_changes_committed_in_this_process_and_applies_them(seeded_store: SQLiteStore) -> None:
    index = GraphIndex.build(seeded_store)
    node = _person("person-new", 1)
    edge = Edge("member_of", "person-new", TEAM, {"role": "member"})

    result = seeded_store.commit([PutNode(node), PutEdge(edge)], principal="test")
    applied = index.sync()

    assert applied == list(result.changes)
    assert index.revision == result.revision
    assert index.graph.nodes["person-new"]["type"] == "Person"
    assert index.graph.nodes["person-new"]["visibility"] == "internal"
    assert index.graph.has_edge("person-new", TEAM, key="member_of")


def test_sync_with_nothing_new_returns_an_empty_list(seeded_store: SQLiteStore) -> None:
    index = GraphIndex.build(seeded_store)

    assert index.sync() == []
    seeded_store.commit([PutNode(_person("person-new", 1))], principal="test")
    assert len(index.sync()) == 1
    assert index.sync() == []


def test_sync_applies_an_updated_visibility(seeded_store: SQLiteStore) -> None:
    seeded_store.commit([PutNode(_person("person-new", 1))], principal="test")
    index = GraphIndex.build(seeded_store)

    seeded_store.commit(
        [PutNode(_person("person-new", 1, visibility="restricted", readers=("user:ada",)))], principal="test"
    )
    index.sync()

    assert index.graph.nodes["person-new"]["visibility"] == "restricted"
    assert tuple(index.graph.nodes["person-new"]["readers"]) == ("user:ada",)


def test_sync_removes_a_deleted_edge_and_keeps_its_nodes(seeded_store: SQLiteStore) -> None:
    seeded_store.commit(
        [PutNode(_person("person-new", 1)), PutEdge(Edge("member_of", "person-new", TEAM, {"role": "member"}))],
        principal="test",
    )
    index = GraphIndex.build(seeded_store)
    edges_before = index.graph.number_of_edges()

    seeded_store.commit([DeleteEdge("member_of", "person-new", TEAM)], principal="test")
    index.sync()

    assert not index.graph.has_edge("person-new", TEAM, key="member_of")
    assert index.graph.number_of_edges() == edges_before - 1
    assert "person-new" in index.graph
    assert TEAM in index.graph


def test_sync_removes_a_deleted_node_and_its_edges(seeded_store: SQLiteStore) -> None:
    seeded_store.commit(
        [PutNode(_person("person-new", 1)), PutEdge(Edge("member_of", "person-new", TEAM, {"role": "member"}))],
        principal="test",
    )
    index = GraphIndex.build(seeded_store)

    seeded_store.commit([DeleteNode("person-new", cascade=True)], principal="test")
    index.sync()

    assert "person-new" not in index.graph
    stats = seeded_store.stats()
    assert (index.graph.number_of_nodes(), index.graph.number_of_edges()) == (stats.nodes, stats.edges)


def test_a_listener_receives_every_batch_the_index_applies_until_removed(seeded_store: SQLiteStore) -> None:
    index = GraphIndex.build(seeded_store)
    received: list[list[Change]] = []
    remove = index.add_listener(received.append)

    first = seeded_store.commit([PutNode(_person("person-a", 1))], principal="test")
    index.sync()
    index.sync()  # nothing new: the listener is not called
    remove()
    seeded_store.commit([PutNode(_person("person-b", 2))], principal="test")
    index.sync()

    assert received == [list(first.changes)]


def test_reading_syncs_before_it_yields_the_graph(seeded_store: SQLiteStore) -> None:
    index = GraphIndex.build(seeded_store)
    seeded_store.commit([PutNode(_person("person-new", 1))], principal="test")

    with index.reading() as view:
        assert "person-new" in view.graph
        assert view.revision == seeded_store.revision()


def test_sync_applies_changes_committed_by_another_process(store_path: Path, model: Model) -> None:
    def write_loop(count: int) -> None:
        subprocess.run(
            [sys.executable, str(HERE / "_write_loop.py"), str(store_path), str(count)],
            capture_output=True, timeout=60, check=True,
        )  # fmt: skip

    write_loop(2)
    reader = SQLiteStore.open(store_path, model)
    try:
        index = GraphIndex.build(reader)
        assert {LOOPED[0], LOOPED[1]} <= set(index.graph)
        write_loop(4)  # re-puts the first two unchanged, then adds two more

        applied = index.sync()

        assert {c.key for c in applied} >= {LOOPED[2], LOOPED[3]}
        assert {LOOPED[2], LOOPED[3]} <= set(index.graph)
        assert index.revision == reader.revision()
    finally:
        reader.close()


def _line_reader(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    def run() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=run, daemon=True).start()


def _next_line(lines: queue.Queue[str | None], deadline: float) -> str:
    line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
    assert line is not None, "the follower exited early"
    return line.strip()


def test_a_follower_in_another_process_sees_a_commit_within_a_second(store_path: Path, store: SQLiteStore) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANON_")}
    follower = subprocess.Popen(
        [sys.executable, str(HERE / "_graph_follower.py"), str(store_path), "person-watched"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    try:
        assert follower.stdout is not None
        _line_reader(follower.stdout, lines)
        deadline = time.monotonic() + 10
        assert _next_line(lines, deadline) == "ready"

        store.commit([PutNode(_person("person-watched", 1))], principal="test")
        committed_at = time.monotonic()

        word, seen_at = _next_line(lines, time.monotonic() + 10).split()
        assert word == "seen"
        # CLOCK_MONOTONIC is system-wide on Linux, so the two processes' readings compare
        assert float(seen_at) - committed_at < 1.0
        assert follower.wait(timeout=10) == 0
    finally:
        if follower.poll() is None:
            follower.kill()
        follower.wait(timeout=10)
        for pipe in (follower.stdout, follower.stderr):
            if pipe is not None:
                pipe.close()


def _recount(index: GraphIndex) -> tuple[Counter[str], Counter[str]]:
    graph = index.graph
    return (
        Counter(data["type"] for _, data in graph.nodes(data=True)),
        Counter(key for _, _, key in graph.edges(keys=True)),
    )


def test_type_counts_follow_puts_deletes_and_cascades(seeded_store: SQLiteStore) -> None:
    index = GraphIndex.build(seeded_store)
    assert (+index.node_counts, +index.edge_counts) == _recount(index)
    seeded_store.commit(
        [PutNode(_person("person-count-a", 901)), PutNode(_person("person-count-b", 902)),
         PutEdge(Edge("reports_to", "person-count-a", "person-count-b")),
         PutEdge(Edge("member_of", "person-count-a", "team-payments", {"role": "member"}))],
        principal="test",
    )  # fmt: skip
    index.sync()
    renamed = _person("person-count-a", 901)
    renamed = Node(renamed.id, renamed.type, {**renamed.properties, "title": "Staff Engineer"})
    seeded_store.commit([PutNode(renamed)], principal="test")
    seeded_store.commit([DeleteNode("person-count-a", cascade=True)], principal="test")
    index.sync()

    assert (+index.node_counts, +index.edge_counts) == _recount(index)
    assert index.node_counts["Person"] == seeded_store.stats().nodes_by_type["Person"]
    assert index.edge_counts["member_of"] == seeded_store.stats().edges_by_type["member_of"]


def _seen_by_walking(index: GraphIndex, sight: Sight | None) -> tuple[Counter[str], Counter[str]]:
    """What `sight` sees, counted the slow way: every node and edge of the graph."""
    graph = index.graph
    seen = {n for n, a in graph.nodes(data=True) if sight is None or sight.sees(a["visibility"], a["readers"])}
    nodes = Counter(graph.nodes[n]["type"] for n in seen)
    edges = Counter(k for s, t, k in graph.edges(keys=True) if s in seen and t in seen)
    return +nodes, +edges


SIGHTS = [
    None,  # an admin
    Sight(frozenset({"public"})),  # anonymous
    Sight(frozenset({"public", "internal"})),  # a principal in no reader list
    Sight(frozenset({"public", "internal"}), ("user:graph-reader", "group:graph-group")),
]


def test_visible_counts_follow_visibility_changes_of_nodes_with_edges(seeded_store: SQLiteStore) -> None:
    """The per-visibility counters agree with a full walk, for every kind of caller, through changes that move
    nodes (and so their edges) between visibility levels, and with a freshly built index."""
    index = GraphIndex.build(seeded_store)
    for sight in SIGHTS:
        assert tuple(+c for c in index.visible_counts(sight)) == _seen_by_walking(index, sight)

    a, b = _person("person-vis-a", 911), _person("person-vis-b", 912, visibility="public")
    membership = Edge("member_of", a.id, "team-payments", {"role": "member"})
    seeded_store.commit([PutNode(a), PutNode(b), PutEdge(Edge("reports_to", a.id, b.id)), PutEdge(membership)],
                        principal="test")  # fmt: skip
    steps = [
        Node(a.id, "Person", a.properties, "restricted", ("group:graph-group",)),
        Node(b.id, "Person", b.properties, "restricted", ("user:graph-reader",)),
        Node(a.id, "Person", a.properties, "restricted", ("user:someone-else",)),
        Node(b.id, "Person", b.properties, "public"),
        Node(a.id, "Person", a.properties, "internal"),
    ]
    for step in steps:
        seeded_store.commit([PutNode(step)], principal="test")
        index.sync()
        for sight in SIGHTS:
            assert tuple(+c for c in index.visible_counts(sight)) == _seen_by_walking(index, sight), (step, sight)
    seeded_store.commit([DeleteNode(b.id, cascade=True)], principal="test")
    index.sync()
    rebuilt = GraphIndex.build(seeded_store)
    for sight in SIGHTS:
        counted = tuple(+c for c in index.visible_counts(sight))
        assert counted == _seen_by_walking(index, sight) == tuple(+c for c in rebuilt.visible_counts(sight))


def _assert_mirrors(index: GraphIndex, store: SQLiteStore) -> None:
    """The index's published graph and counts are what a fresh build of the store gives."""
    import networkx as nx

    rebuilt = GraphIndex.build(store)
    assert index.revision == rebuilt.revision
    assert nx.utils.graphs_equal(index.graph, rebuilt.graph)
    assert sorted(index.graph.edges(keys=True)) == sorted(rebuilt.graph.edges(keys=True))
    assert sorted(index.graph.in_edges(keys=True)) == sorted(rebuilt.graph.in_edges(keys=True))
    assert len(index) == len(rebuilt)
    for sight in SIGHTS:
        counted = tuple(+c for c in index.visible_counts(sight))
        assert counted == _seen_by_walking(index, sight) == tuple(+c for c in rebuilt.visible_counts(sight))


def _hold_a_view(index: GraphIndex) -> tuple[threading.Thread, threading.Event, threading.Event, dict[str, Any]]:
    """A reader in another thread that takes a view, signals `inside`, and walks it again once `finish` is set."""
    inside, finish, seen = threading.Event(), threading.Event(), dict[str, Any]()

    def walk() -> None:
        with index.reading() as view:
            graph = view.graph
            seen["before"] = (view.revision, sorted(graph.edges(keys=True)), {n: graph.nodes[n] for n in graph})
            inside.set()
            finish.wait(10)
            seen["after"] = (view.revision, sorted(graph.edges(keys=True)), {n: graph.nodes[n] for n in graph})

    reader = threading.Thread(target=walk)
    reader.start()
    assert inside.wait(10)
    return reader, finish, inside, seen


def test_a_sync_of_another_process_write_completes_while_a_reader_is_mid_walk(store_path: Path, model: Model) -> None:
    """The reader holds its view (no lock); the sync applies the other process's writes without waiting for it and
    publishes them to later readers; the reader's view stays exactly as it was, at its revision."""
    write = [sys.executable, str(HERE / "_write_loop.py"), str(store_path)]
    subprocess.run([*write, "2"], capture_output=True, timeout=60, check=True)
    store = SQLiteStore.open(store_path, model)
    try:
        index = GraphIndex.build(store)
        reader, finish, _, seen = _hold_a_view(index)
        try:
            subprocess.run([*write, "4"], capture_output=True, timeout=60, check=True)  # another process writes
            syncing = threading.Thread(target=index.sync)
            syncing.start()
            syncing.join(10)
            assert not syncing.is_alive()  # the sync did not wait for the reader
            assert {LOOPED[2], LOOPED[3]} <= set(index.graph)
            assert index.revision == store.revision()
            with index.reading() as later:
                assert LOOPED[3] in later.graph
        finally:
            finish.set()
            reader.join(10)
        assert seen["after"] == seen["before"]
        assert LOOPED[3] not in seen["before"][2]
        assert seen["before"][0] < index.revision
        _assert_mirrors(index, store)
    finally:
        store.close()


def test_changes_applied_under_a_reader_then_folded_or_rebased_give_the_graph_a_build_gives(
    seeded_store: SQLiteStore, monkeypatch: Any
) -> None:
    """Copy-on-write while a reader holds the base (puts, edges, visibility moves, a cascading delete), a new base
    once the copies pass the bound, then changes in place again once the readers are gone: every step mirrors the
    store."""
    import core.index.graph

    monkeypatch.setattr(core.index.graph, "_REBASE_MIN", 6)
    index = GraphIndex.build(seeded_store)
    reader, finish, _, seen = _hold_a_view(index)
    try:
        a, b = _person("person-cow-a", 921), _person("person-cow-b", 922, visibility="public")
        seeded_store.commit([PutNode(a), PutNode(b), PutEdge(Edge("reports_to", a.id, b.id)),
                             PutEdge(Edge("member_of", a.id, TEAM, {"role": "member"}))], principal="test")  # fmt: skip
        index.sync()
        _assert_mirrors(index, seeded_store)
        seeded_store.commit([PutNode(Node(a.id, "Person", a.properties, "restricted", ("user:graph-reader",)))],
                            principal="test")  # fmt: skip
        seeded_store.commit([DeleteEdge("reports_to", a.id, b.id)], principal="test")
        index.sync()
        _assert_mirrors(index, seeded_store)
        for n in range(8):  # past the bound: a new base
            seeded_store.commit([PutNode(_person(f"person-cow-{n}", 930 + n))], principal="test")
            index.sync()
        seeded_store.commit([DeleteNode(TEAM, cascade=True)], principal="test")
        index.sync()
        _assert_mirrors(index, seeded_store)
    finally:
        finish.set()
        reader.join(10)
    assert seen["after"] == seen["before"]
    assert TEAM in seen["before"][2]
    seeded_store.commit([DeleteNode(b.id, cascade=True)], principal="test")
    index.sync()  # nobody reads now: in place
    _assert_mirrors(index, seeded_store)


def test_an_index_behind_a_compacted_change_log_reloads_from_the_store(
    seeded_store: SQLiteStore, caplog: pytest.LogCaptureFixture
) -> None:
    """A process whose index had not applied changes that `canon store compact` then removed does not apply the
    rest of the log as if it were whole: it reloads from the store, says so, and follows the log again after."""
    from core.store.retention import Retention

    index = GraphIndex.build(seeded_store)
    behind = index.revision
    seeded_store.commit([PutNode(_person("person-gone-1", 1))], principal="test")
    seeded_store.commit([DeleteNode(PERSON, cascade=True)], principal="test")  # with its edges: a replay misses it
    seeded_store.commit([PutNode(_person("person-gone-2", 2))], principal="test")
    done = seeded_store.compact(Retention(changes_keep_revisions=1))
    assert done.oldest > behind + 1  # the log no longer holds what the index misses

    with caplog.at_level("WARNING", logger="core.index.graph"):
        index.sync()

    assert "compacted past this process's graph index" in caplog.text
    assert PERSON not in index.graph
    assert "person-gone-1" in index.graph
    _assert_mirrors(index, seeded_store)
    seeded_store.commit([PutNode(_person("person-after", 3))], principal="test")
    index.sync()
    assert "person-after" in index.graph
    _assert_mirrors(index, seeded_store)


def test_the_follower_thread_outlives_a_failed_sync_and_catches_up(
    seeded_store: SQLiteStore, caplog: pytest.LogCaptureFixture
) -> None:
    index = GraphIndex.build(seeded_store)
    failures = [RuntimeError("the store went away for a moment")]
    sync = index.sync

    def flaky() -> list[Change]:
        if failures:
            raise failures.pop()
        return sync()

    index.sync = flaky  # type: ignore[method-assign]
    team = Node("team-followed", "Team", {"name": "Followed", "slug": "followed", "mission": "Be followed.",
                                          "area": "platform"})  # fmt: skip
    seeded_store.commit([PutNode(team)], principal="test")
    halt = index.follow(0.01)
    try:
        deadline = time.monotonic() + 60
        while "team-followed" not in index.graph:  # polling with a deadline
            assert time.monotonic() < deadline, "the follower did not catch up after a failed sync"
            time.sleep(0.01)
    finally:
        halt()
    assert failures == []
    assert [r.getMessage() for r in caplog.records if r.name == "core.index.graph"] == [
        f"following the change log of {seeded_store.location} failed; trying again"
    ]
