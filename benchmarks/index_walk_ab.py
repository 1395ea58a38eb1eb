"""The walks over the dict index against the mapped one (ADR 0061), in one process, interleaved call by call.

    .venv/bin/python benchmarks/index_walk_ab.py --store s100k.db --calls 40 --rounds 3

Builds the index from the store (dicts), saves it to a file in a temporary folder and loads that (the mapped
arrays), then runs `get_neighbors` at depth 2 and `find_paths` through a dispatcher over each, in process (no
worker, no HTTP), alternating which goes first, `--rounds` times over the same `--calls` public nodes. Round 1 is
the cold one (the mapped index has decoded no id yet); the later rounds are warm. The walks' answers are compared:
a difference stops the run. Prints the p50 of each walk per index, cold and warm, with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    from core.dispatch.dispatcher import Dispatcher
    from core.dispatch.registry import build_registry
    from core.index.graph import GraphIndex
    from core.index.persisted import load_index, save_index
    from core.store import open_existing_store
    from core.tools import Toolset
    from core.values.principal import LOCAL

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", required=True, help="an existing store (opened read-only)")
    parser.add_argument("--calls", type=int, default=40, help="nodes walked from (default: 40)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds over them, the first cold (default: 3)")
    args = parser.parse_args()
    store = open_existing_store(args.store, read_only=True)
    built = GraphIndex.build(store)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "ab.graph-index"
        save_index(built, path)
        mapped = load_index(store, path)
    assert mapped.mapped
    assert not built.mapped
    public = sorted(n for n in built.graph if built.graph.nodes[n]["visibility"] == "public")
    ids = public[:: max(1, len(public) // args.calls)][: args.calls]
    registry = build_registry(store.model)
    dispatchers = {name: Dispatcher(registry, store, index, Toolset().all_handlers())
                   for name, index in (("dict", built), ("mapped", mapped))}  # fmt: skip
    timings: dict[str, list[float]] = {}
    for round_ in range(args.rounds):
        phase = "cold" if round_ == 0 else "warm"
        for i, id_ in enumerate(ids):
            walks = (("get_neighbors_depth_2", "get_neighbors", {"id": id_, "depth": 2, "limit": 50}),
                     ("find_paths", "find_paths", {"source": id_, "target": ids[(i + 1) % len(ids)], "max_depth": 4,
                                                   "limit": 20}))  # fmt: skip
            for label, tool, arguments in walks:
                order = list(dispatchers) if (i + round_) % 2 == 0 else list(reversed(dispatchers))
                answers: dict[str, Any] = {}
                for name in order:
                    started = time.perf_counter()
                    result = dispatchers[name].call_tool(LOCAL, "bench", tool, arguments)
                    timings.setdefault(f"{phase} {label} {name}", []).append((time.perf_counter() - started) * 1000)
                    answers[name] = result.value if not result.is_error else result.as_json()
                if answers["dict"] != answers["mapped"]:
                    raise SystemExit(f"index_walk_ab: {tool} {arguments} answers differently over the mapped index")
    p50 = {key: round(statistics.median(values), 2) for key, values in sorted(timings.items())}
    print(json.dumps({"load_average_1min": round(os.getloadavg()[0], 2), "nodes": len(built), "calls": len(ids),
                      "p50_ms": p50}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
