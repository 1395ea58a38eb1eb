"""canon's MCP fast path against the plain SDK path, piece by piece, in one run. From the repository root:

    .venv/bin/python benchmarks/fastpath_ab.py                       # 10,000 nodes, 2 rounds, 1,000 listeners
    .venv/bin/python benchmarks/fastpath_ab.py --rounds 3 --calls 1000 --listeners 1000 --writes 30

`core/mcp/fastpath/` answers four kinds of request itself, each in front of the SDK (ADRs 0013, 0015, 0016, 0036);
`CANON_MCP_FASTPATH=0` hands every one to the SDK. Each piece is measured where a user feels it, with it (`on`)
and without it (`off`), the two interleaved round by round (the order alternating) so that a change of load
weighs on both:

* the 2026-07-28 `tools/call` answer (`calls.py`): `get_node` (a small answer) and `get_neighbors` depth 2 (a
  page of 50 nodes) over HTTP 2026-07-28, p50 / p99 and the server's CPU per call (one kept-alive connection,
  sequential calls, after a warm-up);
* the 2025-11-25 HTTP path, where canon answers nothing of a call: the same calls over HTTP 2025-11-25 (a
  control: both sides should match);
* the listen streams (`listen.py`, `listen_streams.py`): a write heard by 1,000 `subscriptions/listen` streams,
  commit → last p50 / p99 and the server's CPU per write (`benchmarks/fanout_bench.py --client raw`);
* the 2025-11-25 GET streams (`legacy_streams.py`): the same with 1,000 sessions on their GET streams;
* stdio's early `initialize` answer (`core/mcp/stdio.py`, ADR 0036): spawn → `initialize` answered, and `get_node`
  over stdio (a control).

The verdict per piece: kept when some figure is at least `KEEP_AT` (1.5×) better with it (issue: "keep a piece only
where it is at least 1.5× better on a figure users feel"). Prints one JSON object; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks.fanout_bench import cpu_seconds  # noqa: E402
from benchmarks.mcp_bench import LEGACY, MODERN, Peer, admin_token, percentiles, prepare_store, sampled  # noqa: E402

KEEP_AT = 1.5
MODES = ("on", "off")


def _env(mode: str) -> None:
    os.environ["CANON_MCP_FASTPATH"] = "1" if mode == "on" else "0"  # Peer passes this process's environment on


def calls(store: Path, token: str, transport: str, revision: str, mode: str, count: int,
          call: dict[str, Any]) -> dict[str, float]:  # fmt: skip
    """A tool call's p50/p99 (ms), the server's CPU per call (ms) and its start to the first answer (ms)."""
    _env(mode)
    command = [sys.executable, "-m", "core.app.cli", "--store", str(store), "serve", "--log-level", "warning"]
    if transport == "stdio":
        command.append("--stdio")
    peer = Peer(command, transport, revision, store.parent, token if transport == "http" else None)
    try:
        sampled(lambda: peer.request("tools/call", call), 300)  # warm-up
        before = cpu_seconds(peer.proc.pid)
        samples = sampled(lambda: peer.request("tools/call", call), count, warmup=0)
        cpu = (cpu_seconds(peer.proc.pid) - before) * 1000 / count
    finally:
        peer.close()
    figures = percentiles(samples)
    return {"p50_ms": figures["p50_ms"], "p99_ms": figures["p99_ms"], "cpu_ms_per_call": round(cpu, 3),
            "start_up_ms": peer.start_up_ms}  # fmt: skip


def first_answer(store: Path, mode: str) -> float:
    """stdio: spawn → the answer to `initialize` (ms)."""
    _env(mode)
    command = [sys.executable, "-m", "core.app.cli", "--store", str(store), "serve", "--stdio", "--log-level",
               "warning"]  # fmt: skip
    started = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    proc = subprocess.Popen(command, cwd=store.parent, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env)  # fmt: skip
    assert proc.stdin is not None
    assert proc.stdout is not None
    params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "ab", "version": "1"}}
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}) + "\n")
    proc.stdin.flush()
    proc.stdout.readline()
    elapsed = (time.perf_counter() - started) * 1000
    proc.stdin.close()
    proc.wait(timeout=30)
    proc.stdout.close()
    return round(elapsed, 1)


def fanout(mode: str, revision: str, listeners: int, writes: int) -> dict[str, float]:
    """commit → last p50/p99 (ms) and the server's CPU per write (ms), `benchmarks/fanout_bench.py --client raw`."""
    command = [sys.executable, str(HERE / "fanout_bench.py"), "--revision", revision, "--client", "raw",
               "--listeners", str(listeners), "--writes", str(writes), "--fastpath", mode]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=True, cwd=HERE.parent)
    row = json.loads(done.stdout)["results"][revision]["raw"][str(listeners)]
    latency = row["latency_ms"]["commit_to_last"]
    return {"p50_ms": latency["p50"], "p99_ms": latency["p99"], "cpu_ms_per_write": row["cpu_ms_per_write"]["server"]}


def median_rows(rows: list[dict[str, float]]) -> dict[str, Any]:
    return {key: round(statistics.median(r[key] for r in rows), 3) for key in rows[0]} | {
        "range": {key: [min(r[key] for r in rows), max(r[key] for r in rows)] for key in rows[0]}
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=10_000, help="synthetic graph size (default 10,000)")
    parser.add_argument("--rounds", type=int, default=2, help="on/off pairs per figure (default 2)")
    parser.add_argument("--calls", type=int, default=1000, help="timed get_node calls per cell (default 1,000)")
    parser.add_argument("--listeners", type=int, default=1000, help="listeners of the fan-out (default 1,000)")
    parser.add_argument("--writes", type=int, default=30, help="measured writes per fan-out run (default 30)")
    parser.add_argument("--pieces", default="calls,streams,stdio",
                        help="what to measure, comma-separated: calls, streams, stdio (default all)")  # fmt: skip
    args = parser.parse_args()
    pieces_measured = set(args.pieces.split(","))
    cells = [("http", MODERN), ("http", LEGACY), ("stdio", LEGACY)]
    raw: dict[str, dict[str, list[Any]]] = {}

    def add(figure: str, mode: str, value: Any) -> None:
        raw.setdefault(figure, {m: [] for m in MODES})[mode].append(value)

    with tempfile.TemporaryDirectory(prefix="canon-fastpath-ab-") as folder:
        store, nodes = prepare_store(Path(folder), None, args.nodes)
        tool_calls = {  # as benchmarks/mcp_bench.py's scenarios: a small answer, and a page of 50 nodes (about 60 KB)
            "get_node": {"name": "get_node", "arguments": {"id": f"person-{nodes // 5:07d}"}},
            "get_neighbors depth 2": {"name": "get_neighbors", "arguments": {"id": "team-0000003", "depth": 2}},
        }
        token = admin_token(store, "bench")
        for round_ in range(args.rounds):
            order = MODES if round_ % 2 == 0 else MODES[::-1]
            for mode in order:
                print(f"fastpath_ab: round {round_ + 1}, fast path {mode}", file=sys.stderr)
                for transport, revision in cells:
                    if {"http": "calls", "stdio": "stdio"}[transport] not in pieces_measured:
                        continue
                    for label, call in tool_calls.items():
                        if transport == "http" or label == "get_node":
                            add(f"{label} {transport} {revision}", mode,
                                calls(store, token, transport, revision, mode, args.calls, call))  # fmt: skip
                if "stdio" in pieces_measured:
                    add("stdio initialize answered", mode, {"ms": first_answer(store, mode)})
                for revision in ("modern", "legacy") if "streams" in pieces_measured else ():
                    add(f"fan-out {args.listeners} {revision}", mode,
                        fanout(mode, revision, args.listeners, args.writes))  # fmt: skip
    figures = {name: {mode: median_rows(rows) for mode, rows in by_mode.items()} for name, by_mode in raw.items()}
    for row in figures.values():  # off / on: how many times better each figure is with the fast path
        row["off_over_on"] = {key: round(row["off"][key] / row["on"][key], 2) for key in row["on"] if key != "range"
                              and isinstance(row["on"][key], float) and row["on"][key] > 0}  # fmt: skip
    pieces = {
        "calls.py (2026-07-28 tools/call), a small answer": f"get_node http {MODERN}",
        "calls.py (2026-07-28 tools/call), a large answer": f"get_neighbors depth 2 http {MODERN}",
        "listen streams (2026-07-28)": f"fan-out {args.listeners} modern",
        "legacy GET streams (2025-11-25)": f"fan-out {args.listeners} legacy",
        "stdio early initialize": "stdio initialize answered",
    }
    verdicts = {}
    for piece, figure in pieces.items():
        if figure not in figures:
            continue
        best = max(figures[figure]["off_over_on"].values(), default=0.0)
        verdicts[piece] = {"figure": figure, "best_ratio": best, "keep": best >= KEEP_AT}
    print(json.dumps({"nodes": args.nodes, "rounds": args.rounds, "cpus": os.cpu_count(), "figures": figures,
                      "verdicts": verdicts}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
