"""Reads at a past revision (`Store.view`, `core.store.past`) against the same reads now, in one run.

    python benchmarks/past_reads.py --nodes 100000                       # both backends
    python benchmarks/past_reads.py --nodes 100000 --backends sqlite     # one

On each backend: the `canon synth` graph of `--nodes` nodes is imported into a new store, then `--changes`
changes are committed (node patches, and edges removed and added again, in batches of 100), so the revision
R before them is that many changes back. Then, on the same sampled nodes (half changed after R, half not):

* `get_node` now: `Store.node` (the store read under the `get_node` tool), and the tool itself through the
  dispatcher (`Dispatcher.call_tool`, answered from the graph index);
* `get_node` at R: `Store.view(R).node`, the view made per call (as a tool would) and on a view held;
* neighbours at depth 1 now: the `get_neighbors` tool at depth 1; at R: `Store.view(R).neighbours`;
* the `get_neighbors` tool at depth 1 and 2, now and with `at` R (the walk over the topology then);
* `diff_revisions` over the last 1,000 changes: every entry in one page, and its first page of 100;
* the tools `find_nodes` by `where` (one page of 10 engineers) and by `text`, `find_paths` (a person to the
  manager of their manager, along `reports_to`, up to 3 hops) and `query_graph` (a person's team's services),
  each now and with `at` R, the two called in turn on each sampled node (A/B interleaved, one run); the views of
  R are kept between calls (the reads of a task pinned to R), so a second row for the finds and paths measures
  the first read at R (no view kept: `forget_views` before each, 40 calls).

p50 and p99 in milliseconds and each past figure's ratio to its current one, printed as one JSON object. The
PostgreSQL server is the tests' throwaway one (fsync off), or `$CANON_TEST_DATABASE_URL`'s.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.app.synthetic import write_synthetic  # noqa: E402
from core.lang.model import load_model  # noqa: E402
from core.ops.config import Config  # noqa: E402
from core.seam.instance import open_instance  # noqa: E402
from core.store import Store, open_store  # noqa: E402
from core.store.interchange import import_path  # noqa: E402
from core.store.past import forget_views  # noqa: E402
from core.values.operations import DeleteEdge, Operation, PatchNode, PutEdge  # noqa: E402
from core.values.principal import Principal  # noqa: E402

ADMIN = Principal("bench-admin", frozenset({"admin"}))


def _times(call: Callable[[Any], object], items: list[Any]) -> dict[str, float]:
    for item in items[:5]:
        call(item)  # warm up
    spent: list[float] = []
    for item in items:
        started = time.perf_counter()
        call(item)
        spent.append((time.perf_counter() - started) * 1000)
    spent.sort()
    return {"p50_ms": round(statistics.median(spent), 4), "p99_ms": round(spent[int(len(spent) * 0.99) - 1], 4)}


def _pair(now: Callable[[Any], object], then: Callable[[Any], object], items: list[Any]) -> dict[str, Any]:
    """The same read now and at R, called in turn on each item (so the machine's noise falls on both alike)."""
    for item in items[:5]:
        now(item)  # warm up
        then(item)
    spent: dict[str, list[float]] = {"now": [], "at R": []}
    for item in items:
        for side, call in (("now", now), ("at R", then)):
            started = time.perf_counter()
            call(item)
            spent[side].append((time.perf_counter() - started) * 1000)
    out: dict[str, Any] = {}
    for side, times in spent.items():
        times.sort()
        p99 = times[int(len(times) * 0.99) - 1]
        out[side] = {"p50_ms": round(statistics.median(times), 3), "p99_ms": round(p99, 3)}
    out["ratio (p50)"] = round(out["at R"]["p50_ms"] / out["now"]["p50_ms"], 2)
    return out


def _churn(store: Store, changes: int, rng: random.Random) -> list[str]:
    """Commit `changes` changes in batches of 100; return the ids of the nodes patched."""
    people = [n.id for n in store.view().find_nodes("Person", limit=20_000)[0]]
    edges = [e for e in store.iter_edges() if e.type == "depends_on"][:2_000]
    patched: list[str] = []
    done = 0
    while done < changes:
        batch: list[Operation] = []
        while len(batch) < min(100, changes - done):
            if rng.random() < 0.8 or not edges:
                id_ = rng.choice(people)
                patched.append(id_)
                batch.append(PatchNode(id_, {"title": f"Title {done + len(batch)}"}))
            else:
                edge = edges.pop()
                batch += [DeleteEdge(edge.type, edge.source, edge.target), PutEdge(edge)]
        done += len(store.commit(batch[: changes - done], principal="bench").changes)
    return patched


def run(location: str | Path, nodes: int, changes: int, calls: int, synth: Path) -> dict[str, Any]:
    store = open_store(location, load_model())
    started = time.perf_counter()
    import_path(store, synth, principal="bench")
    imported = time.perf_counter() - started
    rng = random.Random(0)
    before = store.revision()
    patched = _churn(store, changes, rng)
    head = store.revision()
    past = head - changes
    assert past >= before
    untouched = [n.id for n in store.view().find_nodes("Person", after="person-0030000", limit=calls // 2)[0]]
    sample = rng.sample(sorted(set(patched)), calls // 2) + untouched
    rng.shuffle(sample)
    instance = open_instance(Config(store=location, seed=False, walk_workers=0))
    try:
        dispatcher = instance.dispatcher

        def tool(name: str, **fixed: Any) -> Callable[[str], object]:
            return lambda id_: dispatcher.call_tool(ADMIN, "bench", name, {"id": id_, **fixed})

        held = store.view(past)
        out: dict[str, Any] = {
            "import_s": round(imported, 1),
            "revision_now": head,
            "revision_past": past,
            "get_node now (Store.node)": _times(store.node, sample),
            "get_node now (tool)": _times(tool("get_node"), sample),
            "get_node at R (view per call)": _times(lambda i: store.view(past).node(i), sample),
            "get_node at R (view held)": _times(held.node, sample),
            "neighbours depth 1 now (tool)": _times(tool("get_neighbors", depth=1, limit=50), sample),
            "neighbours depth 1 at R (view per call)": _times(lambda i: store.view(past).neighbours(i), sample),
        }
        diff_from = head - 1000
        out["diff 1,000 changes (all entries)"] = _times(
            lambda _: store.diff_revisions(diff_from, head, limit=10_000), list(range(20))
        )
        out["diff 1,000 changes (first page of 100)"] = _times(
            lambda _: store.diff_revisions(diff_from, head, limit=100), list(range(20))
        )
        out["diff entries"] = len(store.diff_revisions(diff_from, head, limit=10_000).entries)

        def both(name: str, arguments: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
            def call(id_: str, at: dict[str, Any]) -> object:
                answer = dispatcher.call_tool(ADMIN, "bench", name, {**arguments(id_), **at})
                assert answer.error is None, answer.error
                return answer

            return _pair(lambda i: call(i, {}), lambda i: call(i, {"at": past}), people)

        people = [i for i in sample if int(i.rsplit("-", 1)[1]) > 80]  # two managers above each
        out["find_nodes where (tool)"] = both("find_nodes", lambda i: {"type": "Person", "where": {"role": "engineer"},
                                                                        "limit": 10})  # fmt: skip
        out["find_nodes text (tool)"] = both("find_nodes", lambda i: {"type": "Person", "text": i[-4:], "limit": 10})
        out["get_neighbors depth 1 (tool)"] = both("get_neighbors", lambda i: {"id": i, "depth": 1, "limit": 50})
        out["get_neighbors depth 2 (tool)"] = both("get_neighbors", lambda i: {"id": i, "depth": 2, "limit": 50})
        out["find_paths 3 hops (tool)"] = both("find_paths", lambda i: {
            "source": i, "target": f"person-{((int(i.rsplit('-', 1)[1]) - 1) // 8 - 1) // 8:07d}",
            "edge_types": ["reports_to"], "direction": "out", "max_depth": 3})  # fmt: skip

        def cold(name: str, arguments: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
            """The first read at R of a task: no view of R kept (`core.store.past.forget_views` before each)."""

            def call(id_: str, at: dict[str, Any]) -> object:
                if at:
                    forget_views(instance.store)  # type: ignore[arg-type]
                return dispatcher.call_tool(ADMIN, "bench", name, {**arguments(id_), **at})

            return _pair(lambda i: call(i, {}), lambda i: call(i, {"at": past}), people[:40])

        out["find_nodes where, first read at R (tool)"] = cold("find_nodes", lambda i: {
            "type": "Person", "where": {"role": "engineer"}, "limit": 10})  # fmt: skip
        out["find_nodes text, first read at R (tool)"] = cold("find_nodes", lambda i: {
            "type": "Person", "text": i[-4:], "limit": 10})  # fmt: skip
        out["find_paths 3 hops, first read at R (tool)"] = cold("find_paths", lambda i: {
            "source": i, "target": f"person-{((int(i.rsplit('-', 1)[1]) - 1) // 8 - 1) // 8:07d}",
            "edge_types": ["reports_to"], "direction": "out", "max_depth": 3})  # fmt: skip
        out["query_graph person's team's services (tool)"] = both("query_graph", lambda i: {"match": [
            {"node": "p", "id": i}, {"edge": "member_of", "from": "p", "to": "t"},
            {"edge": "owns", "from": "t", "to": "s"}, {"node": "s", "type": "Service"}], "return": ["s"]})  # fmt: skip
    finally:
        instance.close()
        store.close()
    now, per_call = out["get_node now (Store.node)"]["p50_ms"], out["get_node at R (view per call)"]["p50_ms"]
    out["ratio get_node at R / Store.node (p50)"] = round(per_call / now, 2)
    out["ratio get_node at R / tool now (p50)"] = round(per_call / out["get_node now (tool)"]["p50_ms"], 2)
    out["ratio neighbours at R / tool now (p50)"] = round(
        out["neighbours depth 1 at R (view per call)"]["p50_ms"] / out["neighbours depth 1 now (tool)"]["p50_ms"], 2
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--changes", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgresql"])
    args = parser.parse_args()
    results: dict[str, Any] = {"nodes": args.nodes, "changes": args.changes, "calls": args.calls}
    with tempfile.TemporaryDirectory(prefix="canon-past-") as folder:
        synth = Path(folder) / "synth.jsonl"
        write_synthetic(synth, args.nodes)
        for backend in args.backends:
            if backend == "sqlite":
                results[backend] = run(Path(folder) / "canon.db", args.nodes, args.changes, args.calls, synth)
                print(json.dumps({backend: results[backend]}), file=sys.stderr)
                continue
            from tests.postgres_server import Server

            server = Server.start()
            try:
                url = server.new_database()
                results[backend] = run(url, args.nodes, args.changes, args.calls, synth)
                server.drop_database(url)
            finally:
                server.stop()
            print(json.dumps({backend: results[backend]}), file=sys.stderr)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
