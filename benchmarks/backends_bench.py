"""SQLite against PostgreSQL in one run: importing a synthetic graph, then reading it through the dispatcher.

    python benchmarks/backends_bench.py --nodes 100000                    # a throwaway PostgreSQL server
    CANON_TEST_DATABASE_URL=postgresql://canon@localhost/postgres python benchmarks/backends_bench.py
    python benchmarks/backends_bench.py --nodes 1000000 --no-reads         # the import only
    python benchmarks/backends_bench.py --nodes 1000000 --no-reads --backends postgresql   # one backend

The same `canon synth` file is imported into a new SQLite file and a new PostgreSQL database (`canon import`, in
a child process each: wall clock, canon's CPU time, records/s, peak resident memory of the canon process; the
PostgreSQL server's own CPU and memory are not in them). Then, in a fresh child process per backend, the same
tool calls go through `Dispatcher.call_tool` in-process on each: `get_node`, `find_nodes` with `text` (a needle
that matches nothing, one that matches thousands) and `get_neighbors` at depth 2, each on the same sampled
nodes; p50 and p99 in milliseconds, and the PostgreSQL/SQLite ratio of each, measured in the same run.

The PostgreSQL server is the tests' (tests/postgres_server.py): a throwaway cluster with fsync and synchronous commit
off (SQLite keeps its full sync), or the server `$CANON_TEST_DATABASE_URL` names, on which the benchmark creates
(and drops) its databases. Prints each import's figures to stderr as it ends, then one JSON object. Interrupted
(Ctrl-C or SIGTERM), it stops the import it is running and the throwaway server, and removes its files.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
READS = """
import json, random, statistics, sys, time
from core.ops.config import Config
from core.seam.instance import open_instance
from core.values.principal import Principal
store, calls = sys.argv[1], int(sys.argv[2])
instance = open_instance(Config(store=store, seed=False))
dispatcher = instance.dispatcher
admin = Principal("bench-admin", frozenset({"admin"}))
ids = sorted(head[0] for head in instance.store.iter_node_heads())
sample = random.Random(0).sample(ids, calls)
scenarios = {
    "get_node": [("get_node", {"id": i}) for i in sample],
    "find_nodes text (no match)": [("find_nodes", {"text": f"zq{n:03d}x", "limit": 20}) for n in range(calls)],
    "find_nodes text (payments)": [("find_nodes", {"text": "payments", "limit": 20})] * calls,
    "get_neighbors depth 2": [("get_neighbors", {"id": i, "depth": 2, "limit": 50}) for i in sample],
}
out = {}
for label, plan in scenarios.items():
    for tool, arguments in plan[:5]:
        dispatcher.call_tool(admin, "bench", tool, arguments)  # warm up
    times = []
    for tool, arguments in plan:
        started = time.perf_counter()
        result = dispatcher.call_tool(admin, "bench", tool, arguments)
        times.append((time.perf_counter() - started) * 1000)
        assert not result.is_error, result.as_json()
    times.sort()
    out[label] = {"p50_ms": round(statistics.median(times), 3), "p99_ms": round(times[int(len(times) * 0.99) - 1], 3)}
instance.close()
print(json.dumps(out))
"""


def _import(store: str, data: Path) -> dict[str, Any]:
    """`canon import` of `data` into `store` in a child process: its wall clock, CPU time and peak RSS."""
    from core.lang.model import default_model_path

    command = [sys.executable, "-m", "core.app.cli", "--store", store, "--model", str(default_model_path()), "import",
               str(data), "--no-progress"]  # fmt: skip
    started = time.perf_counter()
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except BaseException:  # interrupted: the import must not outlive the benchmark (nor hold the server open)
        proc.kill()
        proc.wait()
        raise
    seconds = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    errors = proc.stderr.read().decode(errors="replace") if proc.stderr is not None else ""
    if proc.returncode != 0:
        raise RuntimeError(f"the import into {store} failed ({proc.returncode}): {errors[-2000:]}")
    return {"seconds": round(seconds, 1), "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1),
            "peak_rss_mib": round(usage.ru_maxrss / 1024, 1)}  # fmt: skip


def _reads(store: str, calls: int) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", READS, store, str(calls)], cwd=ROOT, capture_output=True,
                          text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"the reads on {store} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _ratios(sqlite: dict[str, Any], postgres: dict[str, Any]) -> dict[str, Any]:
    """PostgreSQL's figure over SQLite's, for each read and percentile."""
    return {label: {key: round(postgres[label][key] / max(value, 1e-9), 2) for key, value in row.items()}
            for label, row in sqlite.items()}  # fmt: skip


def run(nodes: int, calls: int, reads: bool, backends: list[str], folder: Path) -> dict[str, Any]:
    from core.app.synthetic import write_synthetic
    from tests.postgres_server import Server

    data = folder / "graph.jsonl"
    node_count, edge_count = write_synthetic(data, nodes)
    server = Server.start()
    try:
        every = {"sqlite": lambda: str(folder / "canon.db"), "postgresql": server.new_database}
        stores = {backend: every[backend]() for backend in backends}
        result: dict[str, Any] = {"nodes": node_count, "edges": edge_count, "records": node_count + edge_count,
                                  "load_average_at_start": os.getloadavg(), "import": {}}  # fmt: skip
        for backend, store in stores.items():
            measured = _import(store, data)
            measured["records_per_s"] = round((node_count + edge_count) / measured["seconds"])
            result["import"][backend] = measured
            print(f"import into {backend}: {json.dumps(measured)}", file=sys.stderr, flush=True)
        if reads:
            measured = {backend: _reads(store, calls) for backend, store in stores.items()}
            result["reads"] = measured
            if len(measured) == 2:
                result["reads"]["postgresql_over_sqlite"] = _ratios(measured["sqlite"], measured["postgresql"])
        result["load_average_at_end"] = os.getloadavg()
        return result
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000, help="synthetic graph size (about 3 edges per node)")
    parser.add_argument("--calls", type=int, default=300, help="calls per read scenario")
    parser.add_argument("--no-reads", dest="reads", action="store_false", help="measure the imports only")
    parser.add_argument("--backends", default="sqlite,postgresql",
                        help="comma-separated, in order (default: sqlite,postgresql; ratios need both)")  # fmt: skip
    args = parser.parse_args()
    backends = [backend.strip() for backend in args.backends.split(",") if backend.strip()]
    unknown = sorted(set(backends) - {"sqlite", "postgresql"})
    if unknown or not backends:
        parser.error(f"--backends: unknown {', '.join(unknown) or '(none given)'}; choose from sqlite, postgresql")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))  # unwind: stop the server, remove files
    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory() as folder:
        print(json.dumps(run(args.nodes, args.calls, args.reads, backends, Path(folder)), indent=1))


if __name__ == "__main__":
    main()
