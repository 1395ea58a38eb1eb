"""Start-up of the stdio server: from process start to the `initialize` answer, against server-memory in one run.

Agents spawn `canon serve --stdio` for every session, so the time until it answers `initialize` is paid every time.
The target (issue 17): at most 1.0 s on the default model on a quiet 2-core machine, measured cold (a new process
each time) next to `@modelcontextprotocol/server-memory` started the same way in the same run.

    .venv/bin/python benchmarks/startup_bench.py                # 10 runs of each server, importtime top 15
    .venv/bin/python benchmarks/startup_bench.py --runs 20 --top 25

Each run spawns the server, writes `initialize` (protocol 2025-11-25) as raw newline-delimited JSON-RPC on its
stdin at once (as an agent does), and times from spawn to the response line; then it sends
`notifications/initialized` and `tools/list` and times that answer too (ready for a first call), and closes stdin.
The servers are interleaved run by run, so load that comes and goes falls on each of them alike. Three canon cases:

* `canon` — the default model on a store that already exists and is seeded, with the schema-check cache of an
  earlier start (every start after the first on a machine); it answers `initialize` before importing the SDK
  (ADR 0036);
* `canon_sdk_answers` — the same, with `CANON_MCP_FASTPATH=0`: the SDK answers `initialize`, as every start did
  before ADR 0036 (the baseline, in the same run);
* `canon_discover`, `canon_discover_sdk_answers` — the same two, opened by a 2026-07-28 client: `server/discover`
  (its time given as `initialize`), then `tools/list` with the 2026-07-28 envelope;
* `canon_first_start` — a new store each run (created and seeded with the sample data) and an empty cache folder
  (`CANON_CACHE`): the first start ever on a machine;
* `sdk_floor` — benchmarks/echo_server.py, a one-tool server on the same MCP SDK: the start every server built on
  this SDK pays (Python, the SDK and its types);
* and server-memory (pinned by benchmarks/peers, installed there on first use) with an empty memory file, on Node 22.

It prints one JSON object: per case the median, min and max milliseconds to `initialize` and to `tools/list`, of
the CPU time the server had used when its `initialize` answer was read (`initialize_cpu`, from /proc, in clock
ticks of 10 ms) and of the process's CPU time (user + system, from spawn to exit): CPU times are what load on the
machine inflates least, so on a busy machine they tell what a quiet one would show better than the clock. It also
gives the load average (1 minute) before and after the run and the core count (compare ratios on a busy machine,
not absolute times), and the top `--top` modules of `python -X importtime` of one canon start, by cumulative and
by self time, and which of the HTTP-only modules it imported (none should be).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.peer_memory import NODE22, PACKAGE, StdioPeer, _canon_env, _canon_revision, install_peer

REPO = Path(__file__).resolve().parent.parent
PROTOCOL = "2025-11-25"
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
HTTP_ONLY = ("strawberry", "fastapi", "jinja2", "generators")  # stdio has no use for them


def start(command: list[str], env: dict[str, str], log: Path, *, modern: bool = False) -> dict[str, float]:
    """One cold start: milliseconds from spawn to the `initialize` answer and to the `tools/list` answer, the
    server's CPU time when the `initialize` answer arrived, and the CPU time (user + system) of the whole process,
    which load on the machine changes far less than the clock. `modern`: a 2026-07-28 client, which opens with
    `server/discover` (timed as `initialize`) and sends its `tools/list` in the envelope."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    peer = StdioPeer(command, env, log)
    try:
        if modern:
            peer.request("server/discover", {"_meta": ENVELOPE})
        else:
            peer.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                        "clientInfo": {"name": "startup-bench", "version": "1"}})  # fmt: skip
        initialized = (time.perf_counter() - peer.started) * 1000
        initialize_cpu = cpu_so_far(peer.proc.pid)
        if not modern:
            peer.notify("notifications/initialized")
        peer.request("tools/list", {"_meta": ENVELOPE} if modern else {})
        listed = (time.perf_counter() - peer.started) * 1000
    finally:
        peer.close()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return {"initialize": initialized, "initialize_cpu": initialize_cpu, "tools_list": listed, "process_cpu": cpu}


def cpu_so_far(pid: int) -> float:
    """The CPU time (user + system, all threads) process `pid` has used until now, in milliseconds (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def summary(samples: list[dict[str, float]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("initialize", "initialize_cpu", "tools_list", "process_cpu"):
        values = [s[key] for s in samples]
        out[f"{key}_ms"] = {"median": round(statistics.median(values), 1), "min": round(min(values), 1),
                            "max": round(max(values), 1)}  # fmt: skip
    return out


def canon_command(store: Path) -> list[str]:
    return [sys.executable, "-m", "core.app.cli", "--store", str(store), "serve", "--stdio", "--log-level", "warning"]


def importtime(store: Path, env: dict[str, str], top: int) -> dict[str, Any]:
    """`python -X importtime` of one canon start on `store` (answering `initialize`, then stdin closes)."""
    line = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "startup-bench", "version": "1"},
            },
        }
    )
    done = subprocess.run([sys.executable, "-X", "importtime", *canon_command(store)[1:]], input=line + "\n",
                          capture_output=True, text=True, cwd=REPO, env=env, check=True)  # fmt: skip
    rows: list[tuple[int, int, str]] = []
    for text in done.stderr.splitlines():
        if text.startswith("import time:") and "|" in text and "self [us]" not in text:
            self_us, cumulative_us, name = text.removeprefix("import time:").split("|")
            rows.append((int(self_us), int(cumulative_us), name.rstrip()))
    top_level = [r for r in rows if not r[2].startswith("   ")]  # imported by canon itself, not by a dependency
    loaded = {name.strip() for _, _, name in rows}
    by_cumulative, by_self = sorted(top_level, key=lambda r: -r[1])[:top], sorted(rows, key=lambda r: -r[0])[:top]
    return {
        "modules": len(rows),
        "total_ms": round(sum(r[0] for r in rows) / 1000, 1),
        "top_cumulative_ms": {n.strip(): round(c / 1000, 1) for _, c, n in by_cumulative},
        "top_self_ms": {n.strip(): round(s / 1000, 1) for s, _, n in by_self},
        "http_only_imported": sorted(m for m in loaded if m.split(".")[0] in HTTP_ONLY),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10, help="cold starts of each server (default: 10)")
    parser.add_argument("--top", type=int, default=15, help="importtime modules to list (default: 15)")
    parser.add_argument("--node", type=Path, default=NODE22, help="Node 22 binary (default: scripts/test's)")
    args = parser.parse_args()
    if not args.node.is_file():
        raise SystemExit(f"startup_bench: no Node binary at {args.node}; run scripts/test (it installs Node 22).")
    entry, version = install_peer(args.node)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="canon-startup-") as tmp_name:
        tmp = Path(tmp_name)
        cache = tmp / "cache"
        env = {**_canon_env(), "CANON_CACHE": str(cache)}
        seeded = tmp / "seeded.db"
        start(canon_command(seeded), env, tmp / "seed.log")  # creates and seeds the store, fills the cache
        cases = ("canon", "canon_sdk_answers", "canon_discover", "canon_discover_sdk_answers", "canon_first_start",
                 "sdk_floor", "server_memory")  # fmt: skip
        samples: dict[str, list[dict[str, float]]] = {case: [] for case in cases}
        memory_env = {**os.environ, "MEMORY_FILE_PATH": str(tmp / "memory.jsonl")}
        for run in range(args.runs):
            sdk_env = {**env, "CANON_MCP_FASTPATH": "0"}
            samples["canon"].append(start(canon_command(seeded), env, tmp / "canon.log"))
            samples["canon_sdk_answers"].append(start(canon_command(seeded), sdk_env, tmp / "sdk_answers.log"))
            samples["canon_discover"].append(start(canon_command(seeded), env, tmp / "discover.log", modern=True))
            samples["canon_discover_sdk_answers"].append(start(canon_command(seeded), sdk_env,
                                                               tmp / "discover_sdk.log", modern=True))  # fmt: skip
            fresh_env = {**env, "CANON_CACHE": str(tmp / f"cache-{run}")}
            samples["canon_first_start"].append(start(canon_command(tmp / f"fresh-{run}.db"), fresh_env,
                                                      tmp / "fresh.log"))  # fmt: skip
            samples["sdk_floor"].append(start([sys.executable, str(REPO / "benchmarks" / "echo_server.py")], env,
                                              tmp / "floor.log"))  # fmt: skip
            samples["server_memory"].append(start([str(args.node), str(entry)], memory_env, tmp / "memory.log"))
        imports = importtime(seeded, env, args.top)
    load_after = os.getloadavg()[0]
    result = {name: summary(s) for name, s in samples.items()}
    memory_median = result["server_memory"]["initialize_ms"]["median"]
    floor_median = result["sdk_floor"]["initialize_ms"]["median"]
    print(json.dumps({
        "runs": args.runs, "protocol": PROTOCOL, "cores": os.cpu_count(),
        "load_average_1min": {"before": round(load_before, 2), "after": round(load_after, 2)},
        "versions": {"canon": _canon_revision(), PACKAGE: version, "python": platform.python_version()},
        **result,
        "canon_over_memory_initialize": round(result["canon"]["initialize_ms"]["median"] / memory_median, 2),
        "canon_over_sdk_floor_initialize": round(result["canon"]["initialize_ms"]["median"] / floor_median, 2),
        "canon_sdk_answers_over_memory_initialize": round(
            result["canon_sdk_answers"]["initialize_ms"]["median"] / memory_median, 2),
        "target_1s_met": result["canon"]["initialize_ms"]["median"] <= 1000,
        "importtime": imports,
    }, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
