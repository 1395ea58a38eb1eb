"""Cold start to the first answer with the graph index saved beside the store, against rebuilding it, in one run.

    .venv/bin/canon synth graph.jsonl --nodes 100000
    .venv/bin/canon --store s100k.db --model schema/default/model.schema.json import graph.jsonl
    .venv/bin/python benchmarks/index_start_bench.py --store s100k.db --runs 3
    .venv/bin/python benchmarks/index_start_bench.py --store big.db --runs 1      # 1,000,000 nodes: one run each

Each run spawns `canon --store STORE serve --stdio` twice, interleaved: `rebuild` with the index file removed first
(the start before the file existed: it builds the index from the store, and saves the file while it serves; the
run waits for the file, `saved_s` from spawn), then
`load` with the file the rebuild left (`core.index.persisted`). Each sends `initialize`, then `tools/call get_node`
(the first answer: it needs the opened instance, index included), then `get_neighbors` at depth 2 (the first walk),
as raw newline-delimited JSON-RPC, and times each answer from spawn; then it closes stdin and waits for the process
to end (a `rebuild` start ends once its file is saved). It also reports each process's peak resident memory
(VmHWM, the serving process only), its CPU time when it gave the first answer and in all, and the file's size and
header. The store is only read (the file
beside it is written). The load average before and after goes with the figures: this is a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.peer_memory import StdioPeer, _canon_env, _canon_revision
from benchmarks.startup_bench import cpu_so_far
from core.index.persisted import index_file, read_header
from core.store import open_existing_store

PROTOCOL = "2025-11-25"


def one_start(store: Path, log: Path, first_id: str, saves: Path | None = None) -> dict[str, float]:
    """Milliseconds from spawn to `initialize`, to the first answer (`get_node`) and to the first walk's answer
    (`get_neighbors` depth 2); the peak RSS (MiB); the CPU seconds of the whole process, and of its exit. `saves`:
    the index file this start writes in the background; it waits for it (`saved_s`, from spawn) before closing."""
    env = {**_canon_env(), "CANON_CACHE": str(log.parent / "cache")}
    command = [sys.executable, "-m", "core.app.cli", "--store", str(store), "serve", "--stdio", "--log-level", "info"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    peer = StdioPeer(command, env, log)
    out: dict[str, float] = {}
    try:
        peer.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                    "clientInfo": {"name": "index-start-bench", "version": "1"}})  # fmt: skip
        out["initialize_ms"] = (time.perf_counter() - peer.started) * 1000
        peer.notify("notifications/initialized")
        answer, _ = peer.request("tools/call", {"name": "get_node", "arguments": {"id": first_id}})
        assert not answer.get("isError"), answer
        out["first_answer_ms"] = (time.perf_counter() - peer.started) * 1000
        out["first_answer_cpu_s"] = cpu_so_far(peer.proc.pid) / 1000  # what load on the machine inflates least
        answer, _ = peer.request("tools/call", {"name": "get_neighbors",
                                                "arguments": {"id": first_id, "depth": 2, "limit": 50}})  # fmt: skip
        assert not answer.get("isError"), answer
        out["first_walk_ms"] = (time.perf_counter() - peer.started) * 1000
        if saves is not None:
            while not saves.exists():
                if peer.proc.poll() is not None or time.perf_counter() - peer.started > 1800:
                    raise SystemExit(f"index_start_bench: {saves} was not saved; see {log}")
                time.sleep(0.2)
            out["saved_s"] = time.perf_counter() - peer.started
        out["peak_rss_mib"] = peer.peak_rss_kib() / 1024
        ending = time.perf_counter()
    finally:
        peer.close()
    out["exit_s"] = time.perf_counter() - ending  # closing: the walk worker stopped, a file saved if it moved on
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out["process_cpu_s"] = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return out


def summary(samples: list[dict[str, float]]) -> dict[str, Any]:
    keys = samples[0].keys()  # the same in every sample of a case
    return {k: {"median": round(statistics.median(s[k] for s in samples), 1),
                "min": round(min(s[k] for s in samples), 1), "max": round(max(s[k] for s in samples), 1)}
            for k in keys}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", type=Path, required=True, help="an existing SQLite store (it is only read)")
    parser.add_argument("--runs", type=int, default=3, help="starts of each kind, interleaved (default: 3)")
    args = parser.parse_args()
    path = index_file(args.store, None)
    assert path is not None
    opened = open_existing_store(args.store, read_only=True)
    try:
        first_id = next(h[0] for h in opened.iter_node_heads() if h[2] == "public")  # any caller reads it
        stats = opened.stats()
    finally:
        opened.close()
    load_before = os.getloadavg()[0]
    samples: dict[str, list[dict[str, float]]] = {"rebuild": [], "load": []}
    headers = []
    with tempfile.TemporaryDirectory(prefix="canon-index-start-") as tmp:
        for run in range(args.runs):
            path.unlink(missing_ok=True)
            samples["rebuild"].append(one_start(args.store, Path(tmp) / f"rebuild-{run}.log", first_id, path))
            header = read_header(path)  # saved by the rebuild, before it ended
            headers.append({**header.__dict__, "file_bytes": path.stat().st_size})
            samples["load"].append(one_start(args.store, Path(tmp) / f"load-{run}.log", first_id))
            loaded = Path(tmp, f"load-{run}.log").read_text()
            if "graph index loaded from" not in loaded:
                raise SystemExit(f"index_start_bench: the load start did not load the file:\n{loaded[-2000:]}")
    print(json.dumps({
        "canon": _canon_revision(), "store": {"nodes": stats.nodes, "edges": stats.edges, "revision": stats.revision},
        "cores": os.cpu_count(), "runs": args.runs,
        "load_average_1min": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)},
        **{case: summary(s) for case, s in samples.items()},
        "file": headers[-1],
    }, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
