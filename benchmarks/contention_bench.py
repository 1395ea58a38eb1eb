"""One client's cheap reads while other clients run heavy walks: do readers wait for readers?

    .venv/bin/python benchmarks/contention_bench.py --nodes 20000            # 4 heavy clients, 300 get_node calls
    .venv/bin/python benchmarks/contention_bench.py --store big.db --heavy 8 --calls 500

It starts `canon serve` on 127.0.0.1 (one process, Streamable HTTP, 2026-07-28) over a synthetic store and times
one client's `get_node`, one call at a time on a kept-alive connection, twice: quiet, then while `--heavy` other
clients (threads of another process, each with its own connection) loop heavy patterns: `get_neighbors` at depth 3,
`find_paths` up to 6 hops, and `query_graph` patterns of two and three edge terms over every person. The heavy
clients keep running until the loaded sample is taken. A server with walk worker processes (core.dispatch.walkers) is
timed once they have loaded their graph (its /metrics say so). Reports get_node p50/p90/p99 quiet and loaded with the
loaded/quiet ratios (the target: within 2x), and the heavy calls' count, rate (calls answered per second while
they ran: what the walks get), outcomes and slowest wall time (the bound: the call's 10 s time limit, whatever the
load). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import re
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.mcp_bench import MODERN, Peer, admin_token, peer, percentiles, prepare_store, sampled, store_arguments


def heavy_patterns(nodes: int) -> list[dict[str, Any]]:
    """Walks that each examine a large part of a synthetic graph (ids from core.app.synthetic)."""
    person, team = f"person-{nodes // 5:07d}", "team-0000003"
    return [
        {"name": "get_neighbors", "arguments": {"id": team, "depth": 3, "limit": 10}},
        {"name": "find_paths", "arguments": {"source": person, "target": "person-0000000", "max_depth": 6}},
        {"name": "query_graph", "arguments": {"match": [
            {"node": "p", "type": "Person"}, {"edge": "member_of", "from": "p", "to": "t"},
            {"edge": "owns", "from": "t", "to": "s"}], "limit": 5}},
        {"name": "get_neighbors", "arguments": {"id": person, "depth": 3, "limit": 10}},
        {"name": "query_graph", "arguments": {"match": [
            {"node": "p", "type": "Person"}, {"edge": "member_of", "from": "p", "to": "t"}], "limit": 5}},
    ]  # fmt: skip


class Heavy(threading.Thread):
    """A client looping the heavy patterns until stopped; records each call's wall time and outcome."""

    def __init__(self, url: str, token: str, patterns: list[dict[str, Any]], offset: int,
                 stop: threading.Event) -> None:  # fmt: skip
        super().__init__(daemon=True)
        self.url, self.token, self.patterns, self.offset, self.stop = url, token, patterns, offset, stop
        self.times: list[float] = []
        self.outcomes: dict[str, int] = {}

    def run(self) -> None:
        with Peer.attached(self.url, MODERN, self.token) as client:
            i = self.offset
            while not self.stop.is_set():
                call = self.patterns[i % len(self.patterns)]
                i += 1
                started = time.perf_counter()
                try:
                    client.request("tools/call", call)
                    outcome = "ok"
                except RuntimeError as exc:  # a tool error (a bound was hit) is an answer too
                    found = re.search(r'"code": ?"(\w+)"', str(exc))
                    outcome = f"{call['name']} {found[1] if found else exc}"
                self.times.append((time.perf_counter() - started) * 1000)
                self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1


def heavy_clients(url: str, token: str, nodes: int, heavy: int, stop: Any, started: Any, results: Any) -> None:
    """In a process of its own: `heavy` clients (threads) looping the heavy patterns until `stop` is set; then their
    wall times and outcomes into `results`. A process apart from the timed client, so the timed client never waits
    for this interpreter's lock (5 ms at a time by default) while these parse their answers: the figure is the
    server's, not the benchmark's."""
    done = threading.Event()
    threads = [Heavy(url, token, heavy_patterns(nodes), i, done) for i in range(heavy)]
    for thread in threads:
        thread.start()
    started.set()
    stop.wait()
    done.set()
    for thread in threads:
        thread.join(timeout=60)
    outcomes: dict[str, int] = {}
    for thread in threads:
        for key, n in thread.outcomes.items():
            outcomes[key] = outcomes.get(key, 0) + n
    results.put(([t for thread in threads for t in thread.times], outcomes))


def walk_workers_ready(mcp_url: str, timeout: float = 300) -> int | None:
    """Wait until the server's walk workers (core.dispatch.walkers) have loaded their graph, as its metrics say; how
    many
    there are (None: a server without walk workers, such as one from before them)."""
    metrics = mcp_url.removesuffix("/mcp") + "/metrics"
    deadline = time.monotonic() + timeout
    while True:
        found = re.search(r"^canon_walk_workers_ready (\d+)", httpx2.get(metrics, timeout=30).text, re.MULTILINE)
        if found is None:
            return None
        if int(found[1]) > 0 or time.monotonic() > deadline:
            return int(found[1])
        time.sleep(0.2)


def run(store: Path, nodes: int, heavy: int, calls: int) -> dict[str, Any]:
    token = admin_token(store, "bench")
    canon = [sys.executable, "-m", "core.app.cli", "--store", str(store), "serve", "--log-level", "warning"]
    get_node = {"name": "get_node", "arguments": {"id": f"person-{nodes // 3:07d}"}}
    with peer(canon, "http", MODERN, store.parent, token) as server:
        for call in heavy_patterns(nodes):  # warm every path once (and start the walk workers, if any)
            with contextlib.suppress(RuntimeError):
                server.request("tools/call", call)
        workers = walk_workers_ready(server.url)
        quiet = percentiles(sampled(lambda: server.request("tools/call", get_node), calls))
        context = multiprocessing.get_context("spawn")
        stop, started, results = context.Event(), context.Event(), context.Queue()
        clients = context.Process(target=heavy_clients, args=(server.url, token, nodes, heavy, stop, started, results))
        clients.start()
        try:
            started.wait(timeout=60)
            began = time.perf_counter()
            time.sleep(1.0)  # the heavy clients under way
            loaded = percentiles(sampled(lambda: server.request("tools/call", get_node), calls, warmup=0))
        finally:
            stop.set()
        times, outcomes = results.get(timeout=120)
        heavy_s = time.perf_counter() - began  # until the last heavy call answered
        clients.join(timeout=60)
    walls = sorted(times)
    heavy_calls = {"count": len(walls), "per_s": round(len(walls) / heavy_s, 1), "outcomes": outcomes,
                   "p50_ms": round(walls[len(walls) // 2], 1),
                   "max_ms": round(walls[-1], 1)} if walls else {}  # fmt: skip
    ratios = {f"{k.removesuffix('_ms')}_ratio": round(loaded[k] / quiet[k], 2) for k in quiet}
    return {
        "walk_workers": workers,
        "get_node quiet": quiet,
        f"get_node under {heavy} heavy clients": loaded | ratios,
        "heavy calls": heavy_calls,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    store_arguments(parser)
    parser.set_defaults(nodes=20_000)
    parser.add_argument("--heavy", type=int, default=4, help="clients looping heavy patterns (default 4)")
    parser.add_argument("--calls", type=int, default=300, help="timed get_node calls, quiet and loaded (default 300)")
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="canon-bench-") as folder:
        store, nodes = prepare_store(Path(folder), args.store, args.nodes)
        prepared = time.perf_counter()
        results = run(store, nodes, args.heavy, args.calls)
    print(json.dumps({"nodes": nodes, "heavy_clients": args.heavy, "calls": args.calls, "cpus": os.cpu_count(),
                      "prepare_s": round(prepared - started, 1), "measure_s": round(time.perf_counter() - prepared, 1),
                      "results": results}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
