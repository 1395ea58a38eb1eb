"""HTTP throughput of `canon serve` with 1 and with 2 worker processes, driven by a client that costs little.

    .venv/bin/python benchmarks/http_throughput.py                      # 10,000-node graph, 10 s per run
    .venv/bin/python benchmarks/http_throughput.py --connections 16 --seconds 20 --repeat 3

The 2026-07-28 revision is stateless, so any worker can answer any request. This starts `canon serve --workers N`
on a synthetic store (or a copy of `--store`) for each N, and drives `tools/call get_node` over `--connections`
kept-alive connections from one client process for `--seconds`. The 1-worker figure is the baseline.

The client shares the machine's cores with the server, so whatever CPU it burns is taken from the workers. It is
written to burn as little as it can: asyncio streams, the request's bytes built once, and a response read by its
`Content-Length` and checked only for its status and that it is a JSON-RPC result (not an error). The report says
how much CPU the client and each server process used during the timed window (from /proc), so an unbalanced split
between workers, or a client that ate a core, shows in the figures rather than hiding behind them.

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks.mcp_bench import MODERN, admin_token, meta_envelope, prepare_store, served_url, store_arguments  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14 and 15 of stat(5))


def children_of(pid: int) -> list[int]:
    """The worker processes `canon serve --workers` (process `pid`) spawned."""
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                worker = b"spawn_main" in cmdline.read()  # not multiprocessing's resource tracker
            if parent == pid and worker:
                found.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    return sorted(found)


def request_bytes(host: str, port: int, path: str, token: str, node_id: str) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "get_node", "arguments": {"id": node_id}, "_meta": meta_envelope()}},
                      separators=(",", ":")).encode()  # fmt: skip
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {MODERN}\r\n"
            f"Mcp-Method: tools/call\r\nMcp-Name: get_node\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n")  # fmt: skip
    return head.encode() + body


async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> None:
    """One request on a kept-alive connection; raises unless it is a 200 carrying a JSON-RPC result."""
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"unexpected response: {head[:200]!r}")
    length = None
    for line in head.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    if length is None:
        raise RuntimeError("a response without Content-Length (this client reads JSON responses only)")
    body = await reader.readexactly(length)
    if b'"result"' not in body[:64] or b'"isError":true' in body:
        raise RuntimeError(f"not a successful result: {body[:200]!r}")


async def drive(url: str, token: str, node_id: str, connections: int, seconds: float,
                watched: list[int]) -> dict[str, Any]:  # fmt: skip
    """`connections` loops of back-to-back calls for `seconds`, after one unmeasured call each."""
    rest = url.removeprefix("http://")
    address, path = rest.split("/", 1)
    host, port = address.rsplit(":", 1)
    request = request_bytes(host, int(port), "/" + path, token, node_id)
    streams = [await asyncio.open_connection(host, int(port)) for _ in range(connections)]
    for reader, writer in streams:
        await exchange(reader, writer, request)  # connected and warm before the clock starts
    counts = [0] * connections
    stop_at = 0.0

    async def loop(i: int) -> None:
        reader, writer = streams[i]
        while time.perf_counter() < stop_at:
            await exchange(reader, writer, request)
            counts[i] += 1

    before = {pid: cpu_seconds(pid) for pid in watched}
    client_before = time.process_time()
    started = time.perf_counter()
    stop_at = started + seconds
    await asyncio.gather(*(loop(i) for i in range(connections)))
    elapsed = time.perf_counter() - started
    client_cpu = time.process_time() - client_before
    server_cpu = {pid: round(cpu_seconds(pid) - before[pid], 2) for pid in watched}
    for _, writer in streams:
        writer.close()
    calls = sum(counts)
    return {"calls": calls, "calls_per_s": round(calls / elapsed, 1), "client_cpu_s": round(client_cpu, 2),
            "server_cpu_s": list(server_cpu.values()), "elapsed_s": round(elapsed, 2)}  # fmt: skip


def ready(url: str, workers: int, proc: subprocess.Popen[str], timeout: float = 600.0) -> list[int]:
    """Wait until every worker answers /healthz (each builds its own index after the start line); their pids."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = children_of(proc.pid) if workers > 1 else [proc.pid]
        if len(pids) == workers and all(_listening(pid) for pid in pids):
            return pids
        if proc.poll() is not None:
            raise RuntimeError("canon serve exited while starting")
        time.sleep(0.2)
    raise TimeoutError("the workers did not all start")


def _listening(pid: int) -> bool:
    """Whether a worker has finished starting: uvicorn has created its event loop's sockets (an eventpoll fd)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:[eventpoll]" for fd in fds)
    except OSError:
        return False


def run_once(store: Path, workers: int, token: str, node_id: str, connections: int, seconds: float) -> dict[str, Any]:
    command = [sys.executable, "-m", "core.app.cli", "--store", str(store), "serve", "--log-level", "warning",
               "--workers", str(workers), "--port", "0"]  # fmt: skip
    proc = subprocess.Popen(command, cwd=store.parent, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        url = served_url(proc)
        pids = ready(url, workers, proc)
        asyncio.run(drive(url, token, node_id, connections, 1.0, pids))  # warm every worker's caches
        return asyncio.run(drive(url, token, node_id, connections, seconds, pids))
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        if proc.stderr is not None:
            proc.stderr.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    store_arguments(parser)
    parser.add_argument("--connections", type=int, default=16, help="kept-alive client connections (default 16)")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each timed run (default 10)")
    parser.add_argument("--repeat", type=int, default=2, help="runs per worker count, alternating (default 2)")
    parser.add_argument("--node", default="team-0000003", help="the node get_node reads")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # stop the servers on the way out
    with tempfile.TemporaryDirectory(prefix="canon-bench-") as folder:
        store, nodes = prepare_store(Path(folder), args.store, args.nodes)
        token = admin_token(store, "throughput")
        runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
        for _ in range(args.repeat):  # alternate, so drift in the machine's load hits both alike
            for workers in (1, 2):
                runs[workers].append(run_once(store, workers, token, args.node, args.connections, args.seconds))
    best = {w: max(r["calls_per_s"] for r in rs) for w, rs in runs.items()}
    report = {"nodes": nodes, "cpus": os.cpu_count(), "connections": args.connections, "seconds": args.seconds,
              "runs": {f"{w} worker(s)": rs for w, rs in runs.items()},
              "ratio_2_to_1": round(best[2] / best[1], 2),
              "ratios_per_round": [round(b["calls_per_s"] / a["calls_per_s"], 2)
                                   for a, b in zip(runs[1], runs[2], strict=True)]}  # fmt: skip
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
