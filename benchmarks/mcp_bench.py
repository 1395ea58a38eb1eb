"""canon over its real transports, as a client drives it, against the SDK floor measured in the same run.

    .venv/bin/python benchmarks/mcp_bench.py --nodes 10000                       # stdio and HTTP, both revisions
    .venv/bin/python benchmarks/mcp_bench.py --store big.db --calls 300          # an existing store (copied)
    .venv/bin/python benchmarks/mcp_bench.py --nodes 10000 --transports http --revisions 2026-07-28

For every transport (stdio, Streamable HTTP on 127.0.0.1) and protocol revision (2025-11-25 with initialize and
a session, 2026-07-28 with the per-request `_meta` envelope), it starts fresh server processes and speaks raw
JSON-RPC to them, one request at a time (HTTP: one kept-alive connection), timing each call from sending the
request to reading its response:

* the floor: `benchmarks/echo_server.py`, a one-tool server on the same SDK, `tools/call echo`;
* canon, on the store: `get_node`, `find_nodes` with a selective property filter and with a text match,
  `get_neighbors` at depth 1 and 2, `find_paths`, a typical `query_graph` pattern, and `tools/list`.

Reports p50/p90/p99 per scenario, each p50 as a ratio of the floor's `tools/call` p50 from the same run, the
server's start-up time (spawn to first answer) and peak resident memory (VmHWM). With `--throughput`, it
measures `get_node` calls per second over HTTP (2026-07-28, stateless) with 1 and then 2 worker processes
(`canon serve --workers`), driven by 2 client processes of 4 kept-alive connections each, for `--seconds`;
the 1-worker figure is the baseline. Prints one JSON object. The
synthetic graph (`canon synth`, seed 0) is typed like the default model, about three edges per node.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
MODERN, LEGACY = "2026-07-28", "2025-11-25"
SERVING = re.compile(r"serving MCP at (http://127\.0\.0\.1:\d+/mcp)")


def _meta() -> dict[str, Any]:
    return {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}


def peak_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def admin_token(store: Path, name: str) -> str:
    """`canon token create NAME --role admin` in the store's folder (where a server started there reads it)."""
    command = [sys.executable, "-m", "core.cli", "--store", str(store), "token", "create", name, "--role", "admin"]
    return subprocess.run(command, cwd=store.parent, capture_output=True, check=True, text=True).stdout.strip()


def _served_url(proc: subprocess.Popen[str]) -> str:
    """The URL a starting server announces on stderr."""
    assert proc.stderr is not None
    while not (found := SERVING.search(proc.stderr.readline() or "EOF")):
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited before serving")
    return found[1]


class Peer:
    """A server process and a raw JSON-RPC client of one revision over one transport."""

    def __init__(self, command: list[str], transport: str, revision: str, cwd: Path, token: str | None = None) -> None:
        self.transport, self.revision, self.next_id, self.token = transport, revision, 0, token
        self.started = time.perf_counter()
        stdout = subprocess.PIPE if transport == "stdio" else subprocess.DEVNULL
        self.proc = subprocess.Popen([*command, "--port", "0"] if transport == "http" else command, cwd=cwd,
                                     stdin=subprocess.PIPE, stdout=stdout, stderr=subprocess.PIPE, text=True,
                                     bufsize=1)  # fmt: skip
        self.session: str | None = None
        if transport == "http":
            self.url = _served_url(self.proc)
            self.http = httpx2.Client(timeout=60)
        if revision == LEGACY:
            self.request("initialize", {"protocolVersion": LEGACY, "capabilities": {},
                                        "clientInfo": {"name": "bench", "version": "1"}})  # fmt: skip
            self.notify("notifications/initialized")
        else:
            self.request("tools/list", {})
        self.start_up_ms = round((time.perf_counter() - self.started) * 1000, 1)

    def _headers(self, method: str, params: dict[str, Any]) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        if self.revision == MODERN:
            headers |= {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
            if method == "tools/call":
                headers["Mcp-Name"] = str(params["name"])
        elif self.session is not None:
            headers |= {"Mcp-Session-Id": self.session, "MCP-Protocol-Version": LEGACY}
        return headers

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        if self.revision == MODERN:
            params = {**params, "_meta": _meta()}
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        if self.transport == "http":
            response = self.http.post(self.url, json=message, headers=self._headers(method, params))
            self.session = response.headers.get("mcp-session-id", self.session)
            answer = response.json()
        else:
            assert self.proc.stdin is not None
            assert self.proc.stdout is not None
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
            while (answer := json.loads(self.proc.stdout.readline() or "null")) is not None:
                if answer.get("id") == self.next_id:
                    break
            if answer is None:
                raise RuntimeError(f"the server closed while answering {method}")
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        result: dict[str, Any] = answer["result"]
        if result.get("isError"):
            raise RuntimeError(f"{method} {params.get('name')}: {result['content'][0]['text'][:300]}")
        return result

    def notify(self, method: str) -> None:
        message = {"jsonrpc": "2.0", "method": method}
        if self.transport == "http":
            self.http.post(self.url, json=message, headers=self._headers(method, {}))
        else:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()

    def close(self) -> float:
        """Stop the server; return its peak resident memory in MiB."""
        peak = peak_rss_mib(self.proc.pid)
        if self.transport == "http":
            self.http.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        return peak


@contextmanager
def peer(command: list[str], transport: str, revision: str, cwd: Path, token: str | None = None) -> Iterator[Peer]:
    started = Peer(command, transport, revision, cwd, token)
    try:
        yield started
    finally:
        started.close()


def timed(call: Callable[[], Any], calls: int, warmup: int | None = None) -> dict[str, float]:
    """p50/p90/p99 in ms of `calls` sequential calls, after `warmup` untimed ones (default: a tenth, at least 10)."""
    for _ in range(max(10, calls // 10) if warmup is None else warmup):
        call()
    samples: list[float] = []
    for _ in range(calls):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    q = statistics.quantiles(samples, n=100)
    return {"p50_ms": round(statistics.median(samples), 3), "p90_ms": round(q[89], 3), "p99_ms": round(q[98], 3)}


def scenarios(nodes: int) -> dict[str, tuple[str, dict[str, Any]]]:
    """Calls on the synthetic graph (ids from core.synthetic); each answers a small, non-empty result."""
    team, person = "team-0000003", f"person-{nodes // 5:07d}"
    return {
        "get_node": ("tools/call", {"name": "get_node", "arguments": {"id": person}}),
        "find_nodes (property filter)": (
            "tools/call",
            {
                "name": "find_nodes",
                "arguments": {"type": "Person", "where": {"email": f"user{nodes // 5}@northwind.example"}},
            },
        ),
        "find_nodes (text)": ("tools/call", {"name": "find_nodes", "arguments": {"text": f"person {nodes // 5} "}}),
        "get_neighbors depth 1": ("tools/call", {"name": "get_neighbors", "arguments": {"id": team, "depth": 1}}),
        "get_neighbors depth 2": ("tools/call", {"name": "get_neighbors", "arguments": {"id": team, "depth": 2}}),
        "find_paths": (
            "tools/call",
            {"name": "find_paths", "arguments": {"source": person, "target": "person-0000000", "max_depth": 4}},
        ),
        "query_graph": (
            "tools/call",
            {
                "name": "query_graph",
                "arguments": {
                    "match": [
                        {"node": "t", "id": team},
                        {"edge": "owns", "from": "t", "to": "s"},
                        {"edge": "part_of", "from": "s", "to": "y"},
                    ]
                },
            },
        ),
        "tools/list": ("tools/list", {}),
    }


def run(store: Path, nodes: int, transports: list[str], revisions: list[str], calls: int) -> dict[str, Any]:
    work = store.parent
    canon = [sys.executable, "-m", "core.cli", "--store", str(store), "serve", "--log-level", "warning"]
    echo = [sys.executable, str(HERE / "echo_server.py")]
    token = admin_token(store, "bench")
    results: dict[str, Any] = {}
    for transport in transports:
        for revision in revisions:
            echo_command = [*echo, "--http"] if transport == "http" else echo
            with peer(echo_command, transport, revision, work) as floor:
                base = timed(lambda f=floor: f.request("tools/call", {"name": "echo", "arguments": {"id": "x"}}),
                             calls)  # fmt: skip
                floor_start = floor.start_up_ms
            canon_command = canon if transport == "http" else [*canon, "--stdio"]
            row: dict[str, Any] = {"echo tools/call": base, "echo start_up_ms": floor_start}
            with peer(canon_command, transport, revision, work, token if transport == "http" else None) as server:
                row["canon start_up_ms"] = server.start_up_ms
                for label, (method, params) in scenarios(nodes).items():
                    figures = timed(lambda s=server, m=method, p=params: s.request(m, p), calls)
                    row[label] = figures | {"p50_ratio": round(figures["p50_ms"] / base["p50_ms"], 2)}
                row["canon peak_rss_mib"] = peak_rss_mib(server.proc.pid)
            results[f"{transport} {revision}"] = row
    return results


def _hammer(url: str, token: str, seconds: float, connections: int, start_at: float) -> int:
    """One client process: `connections` kept-alive connections calling get_node until the time is up."""
    import threading

    counts = [0] * connections
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "get_node", "arguments": {"id": "team-0000003"}, "_meta": _meta()}}  # fmt: skip
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "get_node",
               "Authorization": f"Bearer {token}"}  # fmt: skip

    def loop(i: int) -> None:
        with httpx2.Client(timeout=60) as http:
            http.post(url, json=body, headers=headers)  # connect before the clock starts
            while time.time() < start_at:
                time.sleep(0.001)
            while time.time() < start_at + seconds:
                assert http.post(url, json=body, headers=headers).status_code == 200
                counts[i] += 1

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts)


def throughput(store: Path, worker_counts: list[int], seconds: float, clients: int, connections: int) -> dict[str, Any]:
    """Calls/s of `get_node` on 2026-07-28 (stateless) with 1 and more worker processes, same clients."""
    import multiprocessing

    work = store.parent
    token = admin_token(store, "hammer")
    results: dict[str, Any] = {}
    for workers in worker_counts:
        command = [sys.executable, "-m", "core.cli", "--store", str(store), "serve", "--log-level", "warning",
                   "--workers", str(workers), "--port", "0"]  # fmt: skip
        proc = subprocess.Popen(command, cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
        try:
            url = _served_url(proc)
            time.sleep(3.0 * workers)  # spawned workers open the store and build their index after the line
            start_at = time.time() + 2.0
            with multiprocessing.get_context("spawn").Pool(clients) as pool:
                done = pool.starmap(_hammer, [(url, token, seconds, connections, start_at)] * clients)
            results[f"{workers} worker(s)"] = {"calls": sum(done), "calls_per_s": round(sum(done) / seconds, 1)}
        finally:
            proc.terminate()
            proc.wait(timeout=60)
            if proc.stderr is not None:
                proc.stderr.close()
    first = results[f"{worker_counts[0]} worker(s)"]["calls_per_s"]
    for workers in worker_counts[1:]:
        results[f"{workers} worker(s)"][f"ratio_to_{worker_counts[0]}"] = round(
            results[f"{workers} worker(s)"]["calls_per_s"] / first, 2
        )
    return {"clients": clients, "connections_per_client": connections, "seconds": seconds} | results


def prepare_store(folder: Path, source: Path | None, nodes: int) -> tuple[Path, int]:
    """`folder/canon.db` to measure, and its node count: a copy of `source` (made by canon synth), or else a
    synthetic graph of `nodes` nodes (`canon synth`, seed 0) imported into the default model."""
    store = folder / "canon.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANON_")}
    if source is not None:
        shutil.copyfile(source, store)
        stats = subprocess.run([sys.executable, "-m", "core.cli", "--store", str(store), "stats"], cwd=REPO, env=env,
                               capture_output=True, check=True, text=True).stdout  # fmt: skip
        return store, int(json.loads(stats)["nodes"])
    data = folder / "graph.jsonl"
    subprocess.run([sys.executable, "-m", "core.cli", "synth", str(data), "--nodes", str(nodes)], cwd=REPO,
                   env=env, check=True, capture_output=True)  # fmt: skip
    subprocess.run([sys.executable, "-m", "core.cli", "--store", str(store), "--model",
                    str(REPO / "schema" / "default" / "model.schema.json"), "import", str(data),
                    "--no-progress"], cwd=REPO, env=env, check=True, capture_output=True)  # fmt: skip
    return store, nodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=10_000, help="synthetic graph size (default 10,000)")
    parser.add_argument("--store", type=Path, help="measure a copy of this store instead (made by canon synth)")
    parser.add_argument("--calls", type=int, default=500, help="timed calls per scenario (default 500)")
    parser.add_argument("--transports", default="stdio,http")
    parser.add_argument("--revisions", default=f"{LEGACY},{MODERN}")
    parser.add_argument("--throughput", action="store_true",
                        help="measure HTTP calls/s with 1 and 2 worker processes instead of latency")  # fmt: skip
    parser.add_argument("--seconds", type=float, default=10.0, help="throughput: how long each run lasts")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="canon-bench-") as folder:
        store, nodes = prepare_store(Path(folder), args.store, args.nodes)
        if args.throughput:
            report = throughput(store, [1, 2], args.seconds, clients=2, connections=4)
            print(json.dumps({"nodes": nodes, "cpus": os.cpu_count(), "throughput": report}, indent=1))
            return
        results = run(store, nodes, args.transports.split(","), args.revisions.split(","), args.calls)
    print(json.dumps({"nodes": nodes, "calls": args.calls, "cpus": os.cpu_count(), "results": results}, indent=1))


if __name__ == "__main__":
    main()
