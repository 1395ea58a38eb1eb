"""canon replicas on one PostgreSQL database: cross-replica change notification, and HTTP throughput with 1, 2 and
3 replicas behind HAProxy. From the repository root:

    .venv/bin/python benchmarks/replicas_bench.py                          # both parts, a throwaway PostgreSQL
    .venv/bin/python benchmarks/replicas_bench.py --part notify --listeners 1,100 --writes 50
    .venv/bin/python benchmarks/replicas_bench.py --part throughput --seconds 10 --repeat 2
    .venv/bin/python benchmarks/replicas_bench.py --database postgresql://canon@db.example/canon_bench

The database is `--database` (it must be empty: the first replica seeds it), else a new one on a throwaway
PostgreSQL server this script starts and stops (tests/postgres_server.py: Debian's PostgreSQL programs, durability
settings off). Every replica is a real `canon serve --port 0` on 127.0.0.1, with a writer token in a shared folder.

notify: replicas A and B. N raw listeners (benchmarks/fanout_bench.py's, in a child process) watch
`canon://nodes/Team/team-payments` on B; a writer `upsert_node`s it through A, one write at a time, and waits for
all N to hear of it. The change reaches B through the database only: B's listening connection hears A's NOTIFY,
B's change feed syncs its index from the change log and fans the event out. The baseline, in the same run, writes
through B itself (what one server does). Latency is from the commit (the node's `updated_at`) to the last
listener, in ms, p50/p90/p99 over the writes; target: p99 <= 200 ms with 100 listeners. Server CPU is B's.

throughput: for 1, 2 and 3 replicas (A, B, C, already running), HAProxy with docs/operations/examples/haproxy.cfg
(the first N `server` lines) in front; `tools/call get_node` on 2026-07-28 over `--connections` kept-alive
connections (benchmarks/http_throughput.py's client) for `--seconds`, after a 1 s warm-up. CPU per call is the
replicas' and HAProxy's CPU in the timed window over the calls (from /proc). The machine's cores are the ceiling:
the client, HAProxy, PostgreSQL and the replicas all share them.

Prints one JSON object on stdout, progress on stderr. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks.fanout_bench import (  # noqa: E402
    Server,
    compact_json,
    interruptible,
    make_token,
    measure,
    process_tree,
    raise_fd_limit,
    serving,
)
from benchmarks.http_throughput import drive  # noqa: E402
from tests.load_balancer import balancing  # noqa: E402
from tests.postgres_server import Server as PostgresServer  # noqa: E402

NODE_ID = "team-payments"


@contextlib.contextmanager
def database(url: str | None) -> Iterator[tuple[str, int | None]]:
    """`url`, or a new database on a throwaway PostgreSQL server (stopped at the end); and the server's postmaster
    pid when it is the throwaway one (its CPU is measured too)."""
    if url is not None:
        yield url, None
        return
    server = PostgresServer.start()
    try:
        assert server.directory is not None
        postmaster = int((server.directory / "data" / "postmaster.pid").read_text().split()[0])
        yield server.new_database(), postmaster
    finally:
        server.stop()


@contextlib.contextmanager
def replicas(folder: Path, url: str, count: int) -> Iterator[list[Server]]:
    """`count` replicas on `url`, started one after another (the first seeds an empty database)."""
    with contextlib.ExitStack() as running:
        started: list[Server] = []
        for _ in range(count):
            started.append(running.enter_context(serving(folder, url, [])))  # type: ignore[arg-type]
            print(f"replicas: {len(started)} serving at {started[-1].url}", file=sys.stderr)
        yield started


def notify(servers: list[Server], token: str, args: argparse.Namespace) -> dict[str, Any]:
    """Listeners on B; writes through A (across replicas) and through B (the baseline), per listener count."""
    a, b = servers[0], servers[1]
    rows: dict[str, Any] = {}
    for n in (int(v) for v in args.listeners.split(",")):
        for label, writer in (("across", a), ("same", b)):
            result = anyio.run(interruptible, measure, b, token, "modern", "raw", n, args, writer)
            rows[f"{n} listeners, written {label}"] = result
            latency = result["latency_ms"]["commit_to_last"]
            print(f"replicas: notify N={n} {label}: commit->last {json.dumps(latency)}", file=sys.stderr)
    return rows


def throughput(servers: list[Server], token: str, postmaster: int | None, args: argparse.Namespace) -> dict[str, Any]:
    """get_node calls/s through HAProxy with 1, 2, 3 replicas; alternating rounds, so drift hits each alike."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for _ in range(args.repeat):
        for count in range(1, len(servers) + 1):
            chosen = servers[:count]
            with balancing([s.url.removeprefix("http://").removesuffix("/mcp") for s in chosen]) as balancer:
                url = f"{balancer.base}/mcp"
                asyncio.run(drive(url, token, NODE_ID, args.connections, 1.0, []))  # warm up
                database = process_tree(postmaster) if postmaster is not None else []  # its sessions, by then
                watched = [s.pid for s in chosen] + [balancer.pid] + database
                run = asyncio.run(drive(url, token, NODE_ID, args.connections, args.seconds, watched))
            cpu = run.pop("server_cpu_s")
            replica_cpu, haproxy_cpu, database_cpu = cpu[:count], cpu[count], sum(cpu[count + 1 :])
            calls = max(run["calls"], 1)
            run |= {"replica_cpu_s": replica_cpu, "haproxy_cpu_s": haproxy_cpu,
                    "postgresql_cpu_s": round(database_cpu, 2),
                    "replica_cpu_ms_per_call": round(sum(replica_cpu) * 1000 / calls, 3),
                    "haproxy_cpu_ms_per_call": round(haproxy_cpu * 1000 / calls, 3),
                    "postgresql_cpu_ms_per_call": round(database_cpu * 1000 / calls, 3)}  # fmt: skip
            runs.setdefault(f"{count} replica(s)", []).append(run)
            print(f"replicas: throughput {count} replica(s): {run['calls_per_s']} calls/s", file=sys.stderr)
    best = {label: max(r["calls_per_s"] for r in rs) for label, rs in runs.items()}
    return {"runs": runs, "best_calls_per_s": best}


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    raise_fd_limit(max(int(v) for v in args.listeners.split(",")) * 4 + 256)
    report: dict[str, Any] = {
        "benchmark": "canon replicas on one PostgreSQL database",
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0], "load_1m_at_start": os.getloadavg()[0]},
        "settings": {k: v for k, v in vars(args).items() if k != "database"},
    }
    with tempfile.TemporaryDirectory(prefix="canon-replicas-") as name, database(args.database) as (url, postmaster):
        folder = Path(name)
        token = make_token(folder, url)  # type: ignore[arg-type]
        with replicas(folder, url, 3) as servers:
            if args.part in ("notify", "both"):
                report["notify"] = notify(servers, token, args)
            if args.part in ("throughput", "both"):
                report["throughput"] = throughput(servers, token, postmaster, args)
    report["machine"]["load_1m_at_end"] = os.getloadavg()[0]
    report["wall_s"] = round(time.monotonic() - started, 1)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("notify", "throughput", "both"), default="both")
    parser.add_argument("--database", help="an empty PostgreSQL database (default: a throwaway server's)")
    parser.add_argument("--listeners", default="1,100", help="listener counts on B, comma-separated")
    parser.add_argument("--writes", type=int, default=50, help="measured writes per listener count (default 50)")
    parser.add_argument("--warmup", type=int, default=3, help="unmeasured writes first (default 3)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for every listener, per write")
    parser.add_argument("--pause", type=float, default=0.1, help="seconds: the most to pause before each write")
    parser.add_argument("--seed", type=int, default=1, help="seed of the random pauses")
    parser.add_argument("--client-processes", type=int, default=1, help="listener processes (default 1)")
    parser.add_argument("--connections", type=int, default=16, help="kept-alive connections to HAProxy")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each timed throughput run")
    parser.add_argument("--repeat", type=int, default=2, help="throughput rounds (1, 2, 3 replicas each)")
    args = parser.parse_args()
    try:
        print(compact_json(run(args)))
    except KeyboardInterrupt:
        print("replicas: interrupted; the servers are stopped and the temporary files removed", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
