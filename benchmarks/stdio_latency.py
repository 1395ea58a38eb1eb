"""Latency of `tools/call` over stdio, canon's `get_node` against the SDK echo floor, in both revisions.

Drives each server as a client would: raw JSON-RPC lines over the child's stdin/stdout, one request at a time,
timing from writing the request to reading its response. For 2025-11-25 it does the initialize handshake
first; for 2026-07-28 every request carries the `_meta` envelope. Servers run in fresh processes; canon runs on
a fresh store seeded with the sample data.

    python benchmarks/stdio_latency.py --calls 2000

Prints JSON: p50/p90/p99 in milliseconds per (server, revision) and canon's p50 as a ratio of the echo p50.
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
MODERN, LEGACY = "2026-07-28", "2025-11-25"


def _meta() -> dict[str, Any]:
    return {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}


class StdioPeer:
    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, bufsize=1, env=env)  # fmt: skip
        self.next_id = 0

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.next_id += 1
        request = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"server closed while waiting for {method}")
            message = json.loads(line)
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def notify(self, method: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}) + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def measure(
    command: list[str], env: dict[str, str], era: str, tool: str, arguments: dict[str, Any], calls: int
) -> list[float]:
    peer = StdioPeer(command, env)
    try:
        if era == LEGACY:
            peer.request("initialize", {"protocolVersion": LEGACY, "capabilities": {},
                                        "clientInfo": {"name": "bench", "version": "1"}})  # fmt: skip
            peer.notify("notifications/initialized")
            params: dict[str, Any] = {"name": tool, "arguments": arguments}
        else:
            params = {"name": tool, "arguments": arguments, "_meta": _meta()}
        for _ in range(min(200, calls // 5)):  # warm-up
            peer.request("tools/call", params)
        samples = []
        for _ in range(calls):
            started = time.perf_counter()
            result = peer.request("tools/call", params)
            samples.append((time.perf_counter() - started) * 1000)
            assert not result.get("isError"), result
        return samples
    finally:
        peer.close()


def summary(samples: list[float]) -> dict[str, float]:
    q = statistics.quantiles(samples, n=100)
    return {"p50_ms": round(statistics.median(samples), 3), "p90_ms": round(q[89], 3), "p99_ms": round(q[98], 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="canon-bench-") as tmp:
        env = {**os.environ, "CANON_STORE": str(Path(tmp) / "canon.db")}
        canon = [sys.executable, "-m", "core.app.cli", "serve", "--stdio", "--log-level", "warning"]
        echo = [sys.executable, str(HERE / "echo_server.py")]
        subprocess.run([sys.executable, "-m", "core.app.cli", "init"], env=env, check=True, capture_output=True)
        results: dict[str, Any] = {}
        for era in (LEGACY, MODERN):
            floor = summary(measure(echo, env, era, "echo", {"id": "team-payments"}, args.calls))
            ours = summary(measure(canon, env, era, "get_node", {"id": "team-payments"}, args.calls))
            results[era] = {"echo": floor, "canon_get_node": ours,
                            "p50_ratio": round(ours["p50_ms"] / floor["p50_ms"], 2)}  # fmt: skip
    print(json.dumps({"calls": args.calls, "results": results}, indent=1))


if __name__ == "__main__":
    main()
