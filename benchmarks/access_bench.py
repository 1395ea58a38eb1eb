"""What authorisation and audit cost: each read tool as an admin (sees everything: no filter) against the same
call as a reader, a reader in a group, and the anonymous principal, in one run, on one store.

    python benchmarks/access_bench.py --store big.db --repeat 20       # an existing store (copied first)
    python benchmarks/access_bench.py --nodes 100000 --repeat 20        # builds a synthetic store first

The admin figure is the baseline: it is the code path with no visibility filter. A second baseline measures
the audit log: `get_node` through a dispatcher with the audit log against one without. Calls go through
`Dispatcher.call_tool` in-process (transport costs are measured by stdio_latency.py). Prints one JSON object
with the median milliseconds per call and the ratio to the admin's median.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from core.ops.config import Config
from core.seam.instance import open_instance
from core.store import NodeQuery
from core.values.principal import ANONYMOUS, Principal

ADMIN = Principal("bench-admin", frozenset({"admin"}))
READER = Principal("bench-reader", frozenset({"reader"}))
GROUPED = Principal("bench-grouped", frozenset({"reader"}), frozenset({"team-03", "team-07"}))


def _median_ms(call: Any, repeat: int) -> float:
    call()  # warm up
    times: list[float] = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 3)


def _scenarios(instance: Any) -> dict[str, tuple[str, dict[str, Any]]]:
    """Tool calls on public nodes, so every principal gets an answer (not a forbidden error)."""
    store = instance.store
    nodes, _ = store.find_nodes(NodeQuery(), after=None, limit=2000)
    public = [n for n in nodes if n.visibility == "public"]
    graph = instance.index.graph
    hub = max(public, key=lambda n: graph.degree(n.id)).id  # a public node with many edges
    far = next(n.id for n in reversed(public) if n.id != hub)
    return {
        "get_node": ("get_node", {"id": hub}),
        "find_nodes (type)": ("find_nodes", {"type": "Service", "limit": 20}),
        "find_nodes (text)": ("find_nodes", {"text": "api", "limit": 20}),
        "get_neighbors depth 2": ("get_neighbors", {"id": hub, "depth": 2, "limit": 50}),
        "find_paths": ("find_paths", {"source": hub, "target": far, "max_depth": 4}),
        "query_graph": (
            "query_graph",
            {"match": [{"node": "t", "type": "Team"}, {"edge": "owns", "from": "t", "to": "s"}], "limit": 20},
        ),
        "describe_model": ("describe_model", {}),
        "get_changes (first page)": ("get_changes", {"limit": 100}),
    }


def run(store: Path, repeat: int) -> dict[str, Any]:
    instance = open_instance(Config(store=store))
    try:
        dispatcher = instance.dispatcher
        results: dict[str, Any] = {}
        for label, (tool, arguments) in _scenarios(instance).items():
            row: dict[str, Any] = {}
            for name, principal in (("admin", ADMIN), ("reader", READER), ("grouped", GROUPED),
                                    ("anonymous", ANONYMOUS)):  # fmt: skip

                def call(
                    principal: Principal = principal, tool: str = tool, arguments: dict[str, Any] = arguments
                ) -> None:
                    result = dispatcher.call_tool(principal, "bench", tool, arguments)
                    assert not result.is_error, result.as_json()

                row[f"{name}_ms"] = _median_ms(call, repeat)
            for name in ("reader", "grouped", "anonymous"):
                row[f"{name}_ratio"] = round(row[f"{name}_ms"] / max(row["admin_ms"], 1e-6), 2)
            results[label] = row
        tool, arguments = _scenarios(instance)["get_node"]
        audited = _median_ms(lambda: dispatcher.call_tool(READER, "bench", tool, arguments), repeat * 50)
        silent = dataclasses.replace(dispatcher, audit=None)
        unaudited = _median_ms(lambda: silent.call_tool(READER, "bench", tool, arguments), repeat * 50)
        results["get_node audit"] = {"with_audit_ms": audited, "without_audit_ms": unaudited,
                                     "ratio": round(audited / max(unaudited, 1e-6), 2)}  # fmt: skip
        stats = instance.store.stats()
        return {"store": {"nodes": stats.nodes, "edges": stats.edges, "changes": stats.changes},
                "repeat": repeat, "results": results}  # fmt: skip
    finally:
        instance.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, help="an existing store to copy and measure")
    parser.add_argument("--nodes", type=int, default=10_000, help="synthetic graph size when no --store")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store = Path(folder) / "canon.db"
        if args.store is not None:
            shutil.copyfile(args.store, store)
        else:
            data = Path(folder) / "graph.jsonl"
            canon = [sys.executable, "-m", "core.app.cli", "--store", str(store)]
            subprocess.run([sys.executable, "-m", "core.app.cli", "synth", str(data), "--nodes", str(args.nodes)],
                           check=True, capture_output=True)  # fmt: skip
            subprocess.run([*canon, "--model", str(_default_model()), "import", str(data), "--no-progress"],
                           check=True, capture_output=True)  # fmt: skip
        print(json.dumps(run(store, args.repeat), indent=1))


def _default_model() -> Path:
    from core.lang.model import default_model_path

    return default_model_path()


if __name__ == "__main__":
    main()
