"""What the pages for people (`/browse/`) cost, against the tool calls they are made of, on one real `canon serve`.

From the repository root:

    .venv/bin/python benchmarks/pages_bench.py                        # 10,000-node synthetic store
    .venv/bin/python benchmarks/pages_bench.py --nodes 100000 --calls 100
    .venv/bin/python benchmarks/pages_bench.py --store big.db          # a copy of a store made by canon synth

It builds the store as `benchmarks/mcp_bench.py` does (`canon synth`, seed 0, imported into the default model),
starts one `canon serve --port 0` with an admin token, and times, one request at a time over one kept-alive
connection, from sending the request to having read the whole answer:

* a type page of 50 rows: `GET /browse/types/Service?_size=50` (its facets make one `find_nodes` count per
  value: lifecycle, tier, language, public_api, handles_pii), and its JSON download;
* the baseline in the same run: `GET /api/nodes?type=Service&limit=50`, the table's own call on REST;
* a node page with 100 edges, against the baseline of its calls on REST in the same run: `get_node`, then
  `get_neighbors` per edge end. The synthetic graph gives no node 100 edges (54 at most at 100,000 nodes), so
  the benchmark adds one before the server starts (`hundred_edges`): a public Service that depends on 60 services
  and that 40 others depend on (its `depends_on` and `dependents` lists), written through the store.

Prints one JSON object: p50/p90/p99 in ms per scenario, and each page's p50 as a ratio of its baseline's.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx2

from benchmarks.mcp_bench import LEGACY, admin_token, peer, prepare_store, store_arguments, timed
from core.lang.model import load_model
from core.store import open_store
from core.values.operations import PutEdge, PutNode
from core.values.records import Edge, Node

HUB = "svc-bench-hundred-edges"
OUT, IN = 60, 40  # its depends_on edges, and the dependents' edges into it


def hundred_edges(store: Path) -> tuple[str, str, int]:
    """Add a public Service with `OUT` + `IN` = 100 edges to the store (before the server opens it): (id, type,
    edges), the edges counted back from the store."""
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        others = [r[0] for r in db.execute("SELECT id FROM nodes WHERE type = 'Service' ORDER BY id LIMIT ?",
                                           (OUT + IN,))]  # fmt: skip
    finally:
        db.close()
    assert len(others) == OUT + IN, len(others)
    hub = Node(HUB, "Service", {"name": "bench-hundred-edges", "description": "A service with 100 edges.",
                                "lifecycle": "production", "tier": 2}, visibility="public")  # fmt: skip
    edges = [Edge("depends_on", HUB, t, {"criticality": "soft"}) for t in others[:OUT]]
    edges += [Edge("depends_on", s, HUB, {"criticality": "hard"}) for s in others[OUT:]]
    opened = open_store(store, load_model())
    try:
        opened.commit([PutNode(hub), *(PutEdge(e) for e in edges)], principal="bench")
    finally:
        opened.close()
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        count = db.execute("SELECT count(*) FROM edges WHERE source = ? OR target = ?", (HUB, HUB)).fetchone()[0]
    finally:
        db.close()
    return HUB, "Service", int(count)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    store_arguments(parser)
    parser.add_argument("--calls", type=int, default=200, help="timed requests per scenario")
    parser.add_argument("--warmup", type=int, default=20, help="untimed requests per scenario first")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store, nodes = prepare_store(Path(folder), args.store, args.nodes)
        token = admin_token(store, "bench")
        node, node_type, edges = hundred_edges(store)
        assert edges == OUT + IN, edges
        command = [sys.executable, "-m", "core.app.cli", "--store", str(store), "serve", "--log-level", "warning"]
        with peer(command, "http", LEGACY, Path(folder), token) as server:
            result = measure(server.url.removesuffix("/mcp"), token, node, node_type, args.calls, args.warmup)
    print(json.dumps({"nodes": nodes, "node": node, "node_edges": edges, **result}, indent=2))


def measure(base: str, token: str, node: str, node_type: str, calls: int, warmup: int) -> dict[str, Any]:
    http = httpx2.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=60)
    model = load_model()

    def get(path: str, params: dict[str, Any] | None = None) -> httpx2.Response:
        answer = http.get(path, params=params)
        assert answer.status_code == 200, (path, answer.status_code, answer.text[:300])
        return answer

    def node_calls() -> None:
        get(f"/api/nodes/{node}")
        for end in model.edge_ends(node_type):
            get(f"/api/nodes/{node}/neighbors", {"direction": end.direction, "edge_types": end.edge.name,
                                                 "limit": 200, "summary": "true"})  # fmt: skip

    rows = get("/browse/types/Service.json", {"_size": 50}).json()["items"]
    assert len(rows) == 50, len(rows)
    scenarios = {
        "type page, 50 rows": lambda: get("/browse/types/Service", {"_size": 50}),
        "type page JSON download, 50 rows": lambda: get("/browse/types/Service.json", {"_size": 50}),
        "baseline: REST find_nodes, 50 rows": lambda: get("/api/nodes", {"type": "Service", "limit": 50}),
        "node page, 100 edges": lambda: get(f"/browse/nodes/{node}"),
        "baseline: REST get_node and get_neighbors per edge end": node_calls,
    }
    found = {name: timed(call, calls, warmup) for name, call in scenarios.items()}
    http.close()
    ratio = {
        "type page / REST find_nodes": round(
            found["type page, 50 rows"]["p50_ms"] / found["baseline: REST find_nodes, 50 rows"]["p50_ms"], 2
        ),
        "node page / REST calls": round(
            found["node page, 100 edges"]["p50_ms"]
            / found["baseline: REST get_node and get_neighbors per edge end"]["p50_ms"],
            2,
        ),
    }
    return {"scenarios": found, "p50_ratio": ratio}


if __name__ == "__main__":
    main()
