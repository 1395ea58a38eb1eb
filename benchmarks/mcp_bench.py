"""canon over its real transports, as a client drives it, against the SDK floor measured in the same run.

    .venv/bin/python benchmarks/mcp_bench.py --nodes 10000                       # stdio and HTTP, both revisions
    .venv/bin/python benchmarks/mcp_bench.py --store big.db --calls 300          # an existing store (copied)
    .venv/bin/python benchmarks/mcp_bench.py --nodes 10000 --transports http --revisions 2026-07-28 --rounds 3

For every transport (stdio, Streamable HTTP on 127.0.0.1) and protocol revision (2025-11-25 with initialize and
a session, 2026-07-28 with the per-request `_meta` envelope), it starts fresh server processes and speaks raw
JSON-RPC to them, one request at a time (HTTP: one kept-alive connection), timing each call from sending the
request to reading its response:

* the floor: `benchmarks/echo_server.py`, a one-tool server on the same SDK, `tools/call echo`;
* canon, on the store: `get_node`, `find_nodes` with a selective property filter and with a text match,
  `get_neighbors` at depth 1 and 2, `find_paths`, a typical `query_graph` pattern, and `tools/list`.

Both servers run side by side and are warmed before anything is timed (`WARMUP` calls of every scenario); the
floor is timed in two halves, before and after canon's scenarios, and its p50 is that of both halves together.

Reports p50/p90/p99 per scenario, each p50 as a ratio of the floor's `tools/call` p50 from the same run, the
server's start-up time (spawn to first answer) and peak resident memory (VmHWM). With `--rounds N` all of it
(floor included) is measured N times over the same servers and each figure is the median of the rounds, each ratio
with its range: a single round's ratio moves by ±0.15 from run to run on these machines. Prints one JSON object.
(Throughput with 1 and 2 worker processes: `benchmarks/http_throughput.py`.) The
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
from collections.abc import Callable, Generator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
MODERN, LEGACY = "2026-07-28", "2025-11-25"
WARMUP = 30  # calls of every scenario (and of the floor) before any is timed
SERVING = re.compile(r"serving MCP at (http://127\.0\.0\.1:\d+/mcp)")


def meta_envelope() -> dict[str, Any]:
    return {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}


def peak_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def admin_token(store: Path, name: str) -> str:
    """`canon token create NAME --role admin` in the store's folder (where a server started there reads it)."""
    command = [sys.executable, "-m", "core.app.cli", "--store", str(store), "token", "create", name, "--role", "admin"]
    return subprocess.run(command, cwd=store.parent, capture_output=True, check=True, text=True).stdout.strip()


def served_url(proc: subprocess.Popen[str]) -> str:
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
        # the code of this checkout, not whichever canon the interpreter has installed (`cwd` is not the checkout)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        self.proc = subprocess.Popen([*command, "--port", "0"] if transport == "http" else command, cwd=cwd,
                                     stdin=subprocess.PIPE, stdout=stdout, stderr=subprocess.PIPE, text=True,
                                     bufsize=1, env=env)  # fmt: skip
        self.session: str | None = None
        if transport == "http":
            self.url = served_url(self.proc)
            self.http = httpx2.Client(timeout=60)
        if revision == LEGACY:
            self.request("initialize", {"protocolVersion": LEGACY, "capabilities": {},
                                        "clientInfo": {"name": "bench", "version": "1"}})  # fmt: skip
            self.notify("notifications/initialized")
        else:
            self.request("tools/list", {})
        self.start_up_ms = round((time.perf_counter() - self.started) * 1000, 1)

    @classmethod
    @contextmanager
    def attached(cls, url: str, revision: str, token: str | None = None) -> Generator[Peer]:
        """Another client of a server already running at `url`, on a connection of its own (no process to stop)."""
        client = cls.__new__(cls)
        client.transport, client.revision, client.next_id, client.token = "http", revision, 0, token
        client.url, client.session, client.http = url, None, httpx2.Client(timeout=120)
        try:
            if revision == LEGACY:
                client.request("initialize", {"protocolVersion": LEGACY, "capabilities": {},
                                              "clientInfo": {"name": "bench", "version": "1"}})  # fmt: skip
                client.notify("notifications/initialized")
            yield client
        finally:
            client.http.close()

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
            params = {**params, "_meta": meta_envelope()}
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
def peer(command: list[str], transport: str, revision: str, cwd: Path, token: str | None = None) -> Generator[Peer]:
    started = Peer(command, transport, revision, cwd, token)
    try:
        yield started
    finally:
        started.close()


def sampled(call: Callable[[], Any], calls: int, warmup: int | None = None) -> list[float]:
    """The ms each of `calls` sequential calls took, after `warmup` untimed ones (default: a tenth, at least 10)."""
    for _ in range(max(10, calls // 10) if warmup is None else warmup):
        call()
    samples: list[float] = []
    for _ in range(calls):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def percentiles(samples: list[float]) -> dict[str, float]:
    q = statistics.quantiles(samples, n=100)
    return {"p50_ms": round(statistics.median(samples), 3), "p90_ms": round(q[89], 3), "p99_ms": round(q[98], 3)}


def timed(call: Callable[[], Any], calls: int, warmup: int | None = None) -> dict[str, float]:
    """p50/p90/p99 in ms of `calls` sequential calls, after `warmup` untimed ones (default: a tenth, at least 10)."""
    return percentiles(sampled(call, calls, warmup))


def scenarios(nodes: int) -> dict[str, tuple[str, dict[str, Any]]]:
    """Calls on the synthetic graph (ids from core.app.synthetic); each answers a small, non-empty result."""
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


def run(store: Path, nodes: int, transports: list[str], revisions: list[str], calls: int,
        rounds: int = 1) -> dict[str, Any]:  # fmt: skip
    work = store.parent
    canon = [sys.executable, "-m", "core.app.cli", "--store", str(store), "serve", "--log-level", "warning"]
    echo = [sys.executable, str(HERE / "echo_server.py")]
    token = admin_token(store, "bench")
    results: dict[str, Any] = {}
    for transport in transports:
        for revision in revisions:
            echo_command = [*echo, "--http"] if transport == "http" else echo
            canon_command = canon if transport == "http" else [*canon, "--stdio"]
            with (
                peer(echo_command, transport, revision, work) as floor,
                peer(canon_command, transport, revision, work, token if transport == "http" else None) as server,
            ):
                row = combined([measure(floor, server, scenarios(nodes), calls) for _ in range(rounds)])
                row["canon peak_rss_mib"] = peak_rss_mib(server.proc.pid)
            results[f"{transport} {revision}"] = row
    return results


def measure(floor: Peer, server: Peer, plan: dict[str, tuple[str, dict[str, Any]]], calls: int) -> dict[str, Any]:
    """Both servers warmed first (a process just started answers slower for its first few hundred calls); the
    floor timed in two halves, before and after canon's scenarios, so a change of load during the run weighs on
    both sides of each ratio."""
    echo = {"name": "echo", "arguments": {"id": "x"}}
    for _ in range(WARMUP):
        floor.request("tools/call", echo)
        for method, params in plan.values():
            server.request(method, params)
    first_half = sampled(lambda: floor.request("tools/call", echo), calls // 2)
    figures = {label: timed(lambda m=method, p=params: server.request(m, p), calls)
               for label, (method, params) in plan.items()}  # fmt: skip
    base = percentiles(first_half + sampled(lambda: floor.request("tools/call", echo), calls - calls // 2))
    row: dict[str, Any] = {"echo tools/call": base, "echo start_up_ms": floor.start_up_ms,
                           "canon start_up_ms": server.start_up_ms}  # fmt: skip
    for label, figure in figures.items():
        row[label] = figure | {"p50_ratio": round(figure["p50_ms"] / base["p50_ms"], 2)}
    return row


def combined(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Rounds of `measure` over the same servers as one row: each figure the median of the rounds, and each
    ratio's range across them (one round: that round as it was)."""
    if len(rows) == 1:
        return rows[0]
    row: dict[str, Any] = {}
    for label, first in rows[0].items():
        values = [r[label] for r in rows]
        if isinstance(first, dict):
            row[label] = {key: round(statistics.median(v[key] for v in values), 3) for key in first}
            if "p50_ratio" in first:
                row[label]["p50_ratio_range"] = [min(v["p50_ratio"] for v in values),
                                                 max(v["p50_ratio"] for v in values)]  # fmt: skip
        else:
            row[label] = first
    row["rounds"] = len(rows)
    return row


def store_arguments(parser: argparse.ArgumentParser) -> None:
    """`--nodes` and `--store`, which `prepare_store` takes: what every harness on a synthetic graph accepts."""
    parser.add_argument("--nodes", type=int, default=10_000, help="synthetic graph size (default 10,000)")
    parser.add_argument("--store", type=Path, help="measure a copy of this store instead (made by canon synth)")


def prepare_store(folder: Path, source: Path | None, nodes: int) -> tuple[Path, int]:
    """`folder/canon.db` to measure, and its node count: a copy of `source` (made by canon synth), or else a
    synthetic graph of `nodes` nodes (`canon synth`, seed 0) imported into the default model."""
    store = folder / "canon.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANON_")}
    if source is not None:
        shutil.copyfile(source, store)
        stats = subprocess.run([sys.executable, "-m", "core.app.cli", "--store", str(store), "stats"], cwd=REPO,
        env=env,
                               capture_output=True, check=True, text=True).stdout  # fmt: skip
        return store, int(json.loads(stats)["nodes"])
    data = folder / "graph.jsonl"
    subprocess.run([sys.executable, "-m", "core.app.cli", "synth", str(data), "--nodes", str(nodes)], cwd=REPO,
                   env=env, check=True, capture_output=True)  # fmt: skip
    subprocess.run([sys.executable, "-m", "core.app.cli", "--store", str(store), "--model",
                    str(REPO / "schema" / "default" / "model.schema.json"), "import", str(data),
                    "--no-progress"], cwd=REPO, env=env, check=True, capture_output=True)  # fmt: skip
    return store, nodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    store_arguments(parser)
    parser.add_argument("--calls", type=int, default=500, help="timed calls per scenario (default 500)")
    parser.add_argument("--transports", default="stdio,http")
    parser.add_argument("--revisions", default=f"{LEGACY},{MODERN}")
    parser.add_argument("--rounds", type=int, default=1,
                        help="measure every scenario and the floor this many times over the same servers and report "
                             "the medians, with each ratio's range (default 1)")  # fmt: skip
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="canon-bench-") as folder:
        store, nodes = prepare_store(Path(folder), args.store, args.nodes)
        results = run(store, nodes, args.transports.split(","), args.revisions.split(","), args.calls, args.rounds)
    print(json.dumps({"nodes": nodes, "calls": args.calls, "cpus": os.cpu_count(), "results": results}, indent=1))


if __name__ == "__main__":
    main()
