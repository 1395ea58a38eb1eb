"""What the generated surfaces (REST, GraphQL, llms.txt) cost over native MCP, on one real `canon serve`.

From the repository root:

    .venv/bin/python benchmarks/surfaces_bench.py                          # 10,000-node synthetic store
    .venv/bin/python benchmarks/surfaces_bench.py --nodes 50000 --calls 500 --warmup 100
    .venv/bin/python benchmarks/surfaces_bench.py --store big.db            # a copy of a store made by canon synth

It builds the store as `benchmarks/mcp_bench.py` does (`canon synth`, seed 0, imported into the default model),
starts ONE `canon serve --port 0` on 127.0.0.1 with an admin token, and drives it over one kept-alive HTTP
connection (httpx2), one call at a time, timing each from sending the request to having parsed the answer
(JSON bodies are decoded, as a client would). Every scenario gets `--warmup` untimed calls first.

* the floor: `GET /healthz` (a plain Starlette route, no dispatch), measured first and again last (drift);
* the same calls on each surface, as the same admin caller: MCP `tools/call` (2026-07-28, stateless, `_meta`),
  REST (`/api/...`) and GraphQL (`POST /graphql`, a selection of a few fields): `get_node`, `find_nodes` by
  type with limit 20, `find_nodes` with text, `get_neighbors` at depth 2;
* REST `get_node` with `If-None-Match` (the 304 path: the call still runs, the body is not sent);
* a typed traversal: GraphQL `get_node` of a team with `members(limit: 10)` (member_of's inverse), against the same two
  calls made one after the other on MCP and REST (`get_node`, then `get_neighbors` in, member_of, depth 1);
* llms.txt (anonymous, rendered once per store revision): `GET /llms.txt` and one node page
  `/nodes/<Type>/<id>.md` (the first Person the index links to).

Before timing, one call per surface checks that the surfaces agree (same node, same totals). Reports p50/p90/p99
(ms) per scenario and surface, every p50 as a ratio of the floor's p50 (`floor_ratio`) and, for REST and
GraphQL, of MCP's p50 for the same call (`mcp_ratio`: what the generated surface costs over native MCP), and
the server's peak resident memory (VmHWM). Prints one JSON object. On a shared or busy machine, compare ratios
from one run, not absolute figures across runs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2

from benchmarks.mcp_bench import (
    MODERN,
    Peer,
    admin_token,
    peak_rss_mib,
    prepare_store,
    scenarios,
    store_arguments,
    timed,
)

NODE_PAGE = re.compile(r"\]\((/nodes/Person/[^)\s]+\.md)\)")
ANY_NODE_PAGE = re.compile(r"\]\((/nodes/[^)\s]+\.md)\)")
PERSON_FIELDS = "... on Person { properties { name email role } }"
TEAM = "team-0000003"

Call = Callable[[], Any]
"""One timed request; returns what `_agree` compares between surfaces (a node id, or a page's total and size)."""


class Surfaces:
    """Requests on every surface of one server, over the one connection of its MCP `Peer`."""

    def __init__(self, server: Peer, token: str) -> None:
        self.server, self.http = server, server.http
        self.base = server.url.removesuffix("/mcp")
        self.auth = {"Authorization": f"Bearer {token}"}

    def mcp(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = self.server.request("tools/call", {"name": tool, "arguments": arguments})
        value: dict[str, Any] = result["structuredContent"]
        return value

    def get(self, path: str, params: dict[str, Any] | None = None, headers: dict[str, str] | None = None,
            status: int = 200, auth: bool = True) -> httpx2.Response:  # fmt: skip
        response = self.http.get(self.base + path, params=params, headers=(self.auth if auth else {}) | (headers or {}))
        if response.status_code != status:
            raise RuntimeError(f"GET {path}: {response.status_code} {response.text[:300]}")
        return response

    def rest(self, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        value: dict[str, Any] = self.get(path, params).json()
        return value

    def graphql(self, query: str) -> dict[str, Any]:
        response = self.http.post(self.base + "/graphql", json={"query": query}, headers=self.auth)
        answer = response.json()
        if response.status_code != 200 or answer.get("errors"):
            raise RuntimeError(f"GraphQL {query[:60]}: {response.status_code} {str(answer)[:300]}")
        data: dict[str, Any] = answer["data"]
        return data


def _page(value: dict[str, Any]) -> tuple[int, int]:
    return value["total"], len(value["items"])


def _literal(text: str) -> str:
    return json.dumps(text)  # a JSON string is a GraphQL string literal


def cases(s: Surfaces, nodes: int) -> dict[str, dict[str, Call]]:
    """Per scenario, the same call on each surface (MCP first: the others are compared with it)."""
    mcp_calls = scenarios(nodes)  # mcp_bench's ids and text, so the two benchmarks ask for the same things
    person = mcp_calls["get_node"][1]["arguments"]["id"]
    text = mcp_calls["find_nodes (text)"][1]["arguments"]["text"]
    depth2 = mcp_calls["get_neighbors depth 2"][1]["arguments"]
    team = depth2["id"]
    by_type = {"type": "Person", "limit": 20}
    along = {"direction": "in", "edge_types": ["member_of"], "depth": 1, "limit": 10}  # what the edge field asks
    etag = s.get(f"/api/nodes/{person}").headers["etag"]
    node_query = f"{{ get_node(id: {_literal(person)}) {{ revision node {{ id type revision {PERSON_FIELDS} }} }} }}"
    type_query = (f"{{ find_nodes(type: Person, limit: 20) {{ total next_cursor items {{ id type revision "
                  f"{PERSON_FIELDS} }} }} }}")  # fmt: skip
    text_query = f"{{ find_nodes(text: {_literal(text)}) {{ total items {{ id type revision {PERSON_FIELDS} }} }} }}"
    depth2_query = (f"{{ get_neighbors(id: {_literal(team)}, depth: 2) {{ total items {{ depth "
                    "node { id type revision } edge { type source target } } } }")  # fmt: skip
    typed_query = (f"{{ get_node(id: {_literal(team)}) {{ node {{ id ... on Team {{ properties {{ name mission }} "
                   "members(limit: 10) { items { node { id properties { name role } } } } "
                   "} } } }")  # fmt: skip

    def not_modified() -> str:
        s.get(f"/api/nodes/{person}", headers={"If-None-Match": etag}, status=304)
        return person

    def typed_mcp() -> tuple[str, int]:
        return s.mcp("get_node", {"id": team})["node"]["id"], len(s.mcp("get_neighbors", {"id": team} | along)["items"])

    def typed_rest() -> tuple[str, int]:
        return s.rest(f"/api/nodes/{team}")["node"]["id"], len(s.rest(f"/api/nodes/{team}/neighbors", along)["items"])

    def typed_graphql() -> tuple[str, int]:
        node = s.graphql(typed_query)["get_node"]["node"]
        return node["id"], len(node["members"]["items"])

    return {
        "get_node": {
            "mcp": lambda: s.mcp("get_node", {"id": person})["node"]["id"],
            "rest": lambda: s.rest(f"/api/nodes/{person}")["node"]["id"],
            "graphql": lambda: s.graphql(node_query)["get_node"]["node"]["id"],
            "rest If-None-Match (304)": not_modified,
        },
        "find_nodes (type Person, limit 20)": {
            "mcp": lambda: _page(s.mcp("find_nodes", by_type)),
            "rest": lambda: _page(s.rest("/api/nodes", by_type)),
            "graphql": lambda: _page(s.graphql(type_query)["find_nodes"]),
        },
        "find_nodes (text)": {
            "mcp": lambda: _page(s.mcp("find_nodes", {"text": text})),
            "rest": lambda: _page(s.rest("/api/nodes", {"text": text})),
            "graphql": lambda: _page(s.graphql(text_query)["find_nodes"]),
        },
        "get_neighbors depth 2": {
            "mcp": lambda: _page(s.mcp("get_neighbors", depth2)),
            "rest": lambda: _page(s.rest(f"/api/nodes/{team}/neighbors", {"depth": 2})),
            "graphql": lambda: _page(s.graphql(depth2_query)["get_neighbors"]),
        },
        "typed traversal (team + members, 10)": {
            "mcp": typed_mcp,
            "rest": typed_rest,
            "graphql": typed_graphql,
        },
    }


def llms_cases(s: Surfaces) -> dict[str, Call]:
    """The crawler pages (anonymous: no token), the node page being the first Person the index links to."""
    index = s.get("/llms.txt", auth=False).text
    found = NODE_PAGE.search(index) or ANY_NODE_PAGE.search(index)
    if found is None:
        raise RuntimeError("/llms.txt links no node page (does the store have public nodes?)")
    page = found[1]
    return {
        "GET /llms.txt": lambda: len(s.get("/llms.txt", auth=False).text),
        f"GET {page}": lambda: len(s.get(page, auth=False).text),
    }


def _agree(label: str, calls: dict[str, Call]) -> None:
    """One untimed call per surface: each must answer what MCP answers (same node, same total and page size)."""
    answers = {surface: call() for surface, call in calls.items()}
    expected = answers["mcp"]
    for surface, answer in answers.items():
        if answer != expected:
            raise RuntimeError(f"{label}: {surface} answered {answer!r}, MCP {expected!r}")


def run(store: Path, nodes: int, calls: int, warmup: int) -> dict[str, Any]:
    token = admin_token(store, "bench")
    command = [sys.executable, "-m", "core.app.cli", "--store", str(store), "serve", "--log-level", "warning"]
    results: dict[str, Any] = {}
    server = Peer(command, "http", MODERN, store.parent, token)
    try:
        s = Surfaces(server, token)

        def health() -> str:
            return str(s.get("/healthz").json()["status"])

        floor = timed(health, calls, warmup)
        base = floor["p50_ms"]
        for label, surfaces in cases(s, nodes).items():
            _agree(label, surfaces)
            row: dict[str, Any] = {}
            for surface, call in surfaces.items():
                figures = timed(call, calls, warmup)
                row[surface] = figures | {"floor_ratio": round(figures["p50_ms"] / base, 2)}
                if surface != "mcp":
                    row[surface]["mcp_ratio"] = round(figures["p50_ms"] / row["mcp"]["p50_ms"], 2)
            results[label] = row
        llms: dict[str, Any] = {}
        for label, call in llms_cases(s).items():
            figures = timed(call, calls, warmup)
            llms[label] = figures | {"floor_ratio": round(figures["p50_ms"] / base, 2)}
        results["llms (anonymous, cached)"] = llms
        again = timed(health, calls, warmup)
        peak = peak_rss_mib(server.proc.pid)
    finally:
        server.close()
    return {"floor GET /healthz": floor, "floor GET /healthz (again, last)": again,
            "start_up_ms": server.start_up_ms, "results": results, "peak_rss_mib": peak}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    store_arguments(parser)
    parser.add_argument("--calls", type=int, default=300, help="timed calls per scenario and surface (default 300)")
    parser.add_argument("--warmup", type=int, default=30, help="untimed calls before each timing (default 30)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="canon-bench-") as folder:
        store, nodes = prepare_store(Path(folder), args.store, args.nodes)
        report = run(store, nodes, args.calls, args.warmup)
    print(json.dumps({"nodes": nodes, "calls": args.calls, "warmup": args.warmup, "cpus": os.cpu_count()} | report,
                     indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
