"""Import time, store size and index memory, each next to a baseline measured in the same run.

    python benchmarks/store_bench.py --nodes 100000          # the synthetic graph (about 3 edges per node)
    python benchmarks/store_bench.py --default               # the embedded model's seed data

Baselines:
* import: the same records inserted by plain `sqlite3.executemany` into the same tables, with no validation,
  no change log and one transaction (the floor any SQLite-backed import pays);
* index memory: the same graph as a `networkx.MultiDiGraph` that also holds every node's properties (what
  keeping payloads in the graph would cost), against canon's topology-only index.

Each phase runs in a fresh child process so resident-memory figures are not polluted by earlier phases.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _child(code: str) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def phase_import(data: str, store: str, default: bool) -> str:
    model = "None" if default else "default_model_path()"
    return f"""
import json, time
from pathlib import Path
from core.lang.model import load_model, default_model_path
from core.store.sqlite import SQLiteStore
from core.store.interchange import import_path
store = SQLiteStore.open(Path({store!r}), load_model({model}))
t = time.perf_counter()
report = import_path(store, Path({data!r}), principal="bench")
elapsed = time.perf_counter() - t
store.close()
print(json.dumps({{"seconds": elapsed, "nodes": report.nodes, "edges": report.edges}}))
"""


def phase_floor(data: str, store: str) -> str:
    return f"""
import json, sqlite3, time
from core.store.sqlite import _CREATE
records = []
with open({data!r}, encoding="utf-8") as f:
    if {data!r}.endswith(".json"):
        doc = json.load(f)
        records = [dict(kind="node", **n) for n in doc["nodes"]] + [dict(kind="edge", **e) for e in doc["edges"]]
    else:
        records = [json.loads(line) for line in f]
db = sqlite3.connect({store!r}, isolation_level=None)
db.execute("PRAGMA journal_mode=WAL"); db.execute("PRAGMA synchronous=FULL")
for statement in _CREATE.split(";"):
    if statement.strip():
        db.execute(statement)
t = time.perf_counter()
db.execute("BEGIN")
db.executemany("INSERT INTO nodes VALUES (?,?,?,?,?,?,0,'t','t','b')", [
    (r["id"], r["type"], r["id"], r.get("visibility", "internal"), json.dumps(r.get("readers")),
     json.dumps(r["properties"])) for r in records if r["kind"] == "node"])
db.executemany("INSERT INTO edges VALUES (?,?,?,?,0,'t','t','b')", [
    (r["source"], r["type"], r["target"], json.dumps(r["properties"])) for r in records if r["kind"] == "edge"])
db.execute("COMMIT")
print(json.dumps({{"seconds": time.perf_counter() - t}}))
"""


def phase_index(store: str, with_properties: bool) -> str:
    return f"""
import gc, json, time
from pathlib import Path
from benchmarks.store_bench import _rss_mib
from core.lang.model import load_model, default_model_path
from core.store.sqlite import SQLiteStore
import networkx as nx
from core.index.graph import GraphIndex
store = SQLiteStore.open(Path({store!r}), load_model(default_model_path()))
list(store.iter_topology())[:0]  # warm the read path before measuring
gc.collect(); before = _rss_mib(); t = time.perf_counter()
if {with_properties!r}:
    graph = nx.MultiDiGraph()
    for n in store.iter_nodes():
        graph.add_node(n.id, type=n.type, visibility=n.visibility, readers=n.readers, properties=n.properties)
    for e in store.iter_edges():
        graph.add_edge(e.source, e.target, key=e.type, properties=e.properties)
else:
    graph = GraphIndex.build(store).graph
elapsed = time.perf_counter() - t; gc.collect()
print(json.dumps({{"seconds": elapsed, "rss_delta_mib": _rss_mib() - before, "nodes": graph.number_of_nodes(),
                   "edges": graph.number_of_edges()}}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=100_000, help="synthetic graph size (default: 100000)")
    parser.add_argument("--default", action="store_true", help="measure the embedded seed data instead")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    os.environ["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])
    with tempfile.TemporaryDirectory(prefix="canon-bench-") as tmp:
        if args.default:
            from core.lang.model import default_seed_path

            data = str(default_seed_path())
        else:
            from core.app.synthetic import write_synthetic

            data = str(Path(tmp) / "graph.jsonl")
            write_synthetic(Path(data), args.nodes, args.seed)
        store, floor_store = str(Path(tmp) / "canon.db"), str(Path(tmp) / "floor.db")
        imported = _child(phase_import(data, store, args.default))
        floor = _child(phase_floor(data, floor_store))
        size = Path(store).stat().st_size + sum(
            Path(store + s).stat().st_size for s in ("-wal",) if Path(store + s).exists()
        )
        with sqlite3.connect(store) as db:
            has_stat = _has_dbstat(db)
            tables = (
                dict(db.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall()) if has_stat else {}
            )
        index = _child(phase_index(store, False))
        fat = _child(phase_index(store, True))
    print(json.dumps({
        "input": "seed" if args.default else f"synthetic n={args.nodes} seed={args.seed}",
        "nodes": imported["nodes"], "edges": imported["edges"],
        "import_seconds": round(imported["seconds"], 2), "floor_import_seconds": round(floor["seconds"], 2),
        "import_vs_floor": round(imported["seconds"] / floor["seconds"], 1),
        "records_per_second": round((imported["nodes"] + imported["edges"]) / imported["seconds"]),
        "store_mib": round(size / 2**20, 1),
        "store_tables_mib": {k: round(v / 2**20, 1) for k, v in sorted(tables.items()) if v > 2**20},
        "index_build_seconds": round(index["seconds"], 2), "index_rss_mib": round(index["rss_delta_mib"], 1),
        "index_with_properties_rss_mib": round(fat["rss_delta_mib"], 1),
    }, indent=1))  # fmt: skip


def _has_dbstat(db: sqlite3.Connection) -> bool:
    try:
        db.execute("SELECT 1 FROM dbstat LIMIT 1")
    except sqlite3.OperationalError:
        return False
    return True


if __name__ == "__main__":
    main()
