"""get_neighbors and find_paths: walks over the graph index, bounded in depth, work and time."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.dispatch.access import sees_in_graph
from core.dispatch.dispatcher import CallContext, handler
from core.lang.model import Model
from core.store.past_graph import PastGraph
from core.store.view import Step, View
from core.values.errors import ForbiddenError, InvalidArgumentsError, LimitExceededError, NotFoundError, Problem
from core.values.paging import decode_cursor, encode_cursor, page
from core.values.records import Edge, Sight

if TYPE_CHECKING:  # only annotations: the graph index imports networkx on first use (core.index.graph)
    import networkx as nx

EdgeRef = tuple[str, str, str]  # (type, source, target)
MAX_WORK = 200_000  # edges examined by one call
MAX_PATHS = 1_000  # paths counted by find_paths; total stops there and truncated says so


@dataclass(frozen=True)
class Follow:
    """The edges a walk follows from a node: the types it follows leaving (`out`) and arriving (`into`), None for
    every type that way, empty for none."""

    out: frozenset[str] | None
    into: frozenset[str] | None

    def backwards(self) -> Follow:
        return Follow(self.into, self.out)

    def then(self, view: View) -> Follow:
        """The same edges in the names of the model at `view`'s revision (a model change since may have renamed
        their types): a walk at a past revision follows the edges as they were named then."""

        def named(types: frozenset[str] | None) -> frozenset[str] | None:
            return None if types is None else frozenset(view.named_then("edge type", t)[0] for t in types)

        return Follow(named(self.out), named(self.into))


def follow(model: Model, direction: str, names: Iterable[str]) -> Follow:
    """What `direction` (out, in, both) and the edge names `names` (none: every type) ask a walk to follow. A name
    is read by `Model.edge_named`: an incoming name (`owned_by`) is its edge type the other way, so `out` along
    `owned_by` follows `owns` edges arriving."""
    ways = ("out", "in") if direction == "both" else (direction,)
    chosen = list(names)
    if not chosen:
        return Follow(None if "out" in ways else frozenset(), None if "in" in ways else frozenset())
    out: set[str] = set()
    into: set[str] = set()
    for name in chosen:
        edge, meaning = model.edge_named(name)
        for way in ways:
            (out if (way == "out") == (meaning == "out") else into).add(edge.name)
    return Follow(frozenset(out), frozenset(into))


def steps(
    graph: nx.MultiDiGraph[str], node: str, way: Follow, sight: Sight | None = None
) -> Iterator[tuple[str, EdgeRef]]:
    """(neighbour, edge) pairs one hop from `node` along the edges `way` follows, in a stable order, to neighbours
    `sight` sees.

    Read from networkx's adjacency dicts (neighbour -> {edge type: data}), what `out_edges`/`in_edges` iterate
    with a view object and a generator per call: a walk calls this once per node it reaches."""
    adjacency: Any = graph  # its adjacency dicts are not in the type stubs
    found: list[tuple[str, EdgeRef]] = []
    out, into = way.out, way.into
    if out != frozenset():
        found += [
            (t, (k, node, t)) for t, keys in adjacency._succ[node].items() for k in keys if out is None or k in out
        ]
    if into != frozenset():
        found += [
            (s, (k, s, node)) for s, keys in adjacency._pred[node].items() for k in keys if into is None or k in into
        ]
    if sight is not None:
        found = [(n, ref) for n, ref in found if sees_in_graph(sight, graph, n)]
    found.sort()
    return iter(found)


def _require_visible(ctx: CallContext, graph: nx.MultiDiGraph[str], id: str) -> None:
    if id not in graph:
        raise NotFoundError("node", id)
    if not sees_in_graph(ctx.sight, graph, id):
        if "then" in graph.nodes[id]:  # the topology at a past revision (`core.store.past_graph`): tell nothing then
            raise ForbiddenError("node", id, f"{ctx.principal.name} may not read node {id!r} as it was at revision "
                                 f"{ctx.view.revision}, or may not read it now.")  # fmt: skip
        visibility = graph.nodes[id]["visibility"]
        raise ForbiddenError("node", id, f"{ctx.principal.name} may not read node {id!r}: it is {visibility}.")


def _edges_json(ctx: CallContext, refs: list[EdgeRef]) -> list[dict[str, Any]]:
    """The stored edges `refs` name, in their order, read in one go; an edge removed since the index was read is
    reported as the index saw it."""
    stored = ctx.view.edges(refs)
    return [(stored.get(ref) or Edge(*ref)).to_json() for ref in refs]


@handler("get_neighbors")
def get_neighbors(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    origin, depth = args["id"], args["depth"]
    way = follow(ctx.model, args["direction"], args.get("edge_types", []))
    limit = args["limit"]
    if "proposal" in args:  # a proposal: depth 1 from its view (`core.dispatch.proposal_view`), not a walk
        return _neighbors_at_proposal(ctx, args, way)
    if "at" in args:  # the topology then (`View.walk`: a `PastGraph`), its edge types as they were named then
        way = way.then(ctx.view)
    with ctx.view.walk() as held:
        ctx.check_time()  # the call may have waited its time out already (for a worker thread, a sync)
        graph: nx.MultiDiGraph[str] = held.graph  # or the topology then, a `PastGraph` read as a walk reaches it
        revision = held.revision
        _require_visible(ctx, graph, origin)
        reached: list[tuple[int, str, EdgeRef]] = []
        seen, frontier, work = {origin}, [origin], 0
        for level in range(1, depth + 1):
            if isinstance(graph, PastGraph):  # the topology then is read from the store: the whole frontier at once
                graph.expand(frontier)
            following: list[str] = []
            for current in frontier:
                for neighbour, ref in steps(graph, current, way, ctx.sight):
                    work += 1
                    if neighbour not in seen:
                        seen.add(neighbour)
                        following.append(neighbour)
                        reached.append((level, neighbour, ref))
                if work > MAX_WORK:
                    raise LimitExceededError(
                        f"get_neighbors examined more than {MAX_WORK:,} edges; use a smaller depth or edge_types.",
                        limit="work", value=work,
                    )  # fmt: skip
                ctx.check_time()
            frontier = sorted(following)
    reached.sort()  # by (depth, id): each id is reached once, so the edge never decides
    offset = decode_cursor("get_neighbors", args, int) or 0
    chosen = reached[offset : offset + limit]
    records = ctx.view.nodes([n for _, n, _ in chosen])
    chosen = [(d, n, ref) for d, n, ref in chosen if n in records]
    edges = _edges_json(ctx, [ref for _, _, ref in chosen])
    items = [
        {"node": records[n].to_json(), "depth": d, "edge": edge} for (d, n, _), edge in zip(chosen, edges, strict=True)
    ]
    more = offset + limit < len(reached)
    cursor = encode_cursor("get_neighbors", args, offset + limit) if more else None
    return page(items, total=len(reached), limit=limit, revision=revision, next_cursor=cursor)


def _neighbors_at_proposal(ctx: CallContext, args: dict[str, Any], way: Follow) -> dict[str, Any]:
    """get_neighbors at a proposal: depth 1, from the proposal's view (the store's view with its operations over
    it), not the graph index. The tool is a walk, so this runs where walks run: in a walk worker or in the serving
    process; either reads the store, not its index."""
    origin, limit = args["id"], args["limit"]
    if args["depth"] != 1:
        raise InvalidArgumentsError(
            "get_neighbors", [Problem("/depth", "only 1 is supported with proposal (a read at a proposal)")]
        )
    view = ctx.view  # the proposal's view (dispatch made it)
    if view.node(origin, sight=ctx.sight) is None:  # ForbiddenError if the caller may not see it then
        raise NotFoundError("node", origin)
    ctx.check_time()
    reached: list[Step] = []
    seen = {origin}
    for s in view.neighbours(origin, sight=ctx.sight):  # by (neighbour, edge type): each neighbour once, as walks do
        out = s.edge.source == origin and (way.out is None or s.edge.type in way.out)
        into = s.edge.target == origin and (way.into is None or s.edge.type in way.into)
        if (out or into) and s.node.id not in seen:
            seen.add(s.node.id)
            reached.append(s)
    offset = decode_cursor("get_neighbors", args, int) or 0
    items = [{"node": s.node.to_json(), "depth": 1, "edge": s.edge.to_json()} for s in reached[offset : offset + limit]]
    more = offset + limit < len(reached)
    cursor = encode_cursor("get_neighbors", args, offset + limit) if more else None
    return page(items, total=len(reached), limit=limit, revision=view.revision, next_cursor=cursor)


def _distances(ctx: CallContext, graph: nx.MultiDiGraph[str], target: str, way: Follow, cap: int) -> dict[str, int]:
    """Hops from every node within `cap` hops to `target`, walking edges backwards."""
    backwards = way.backwards()
    distance, frontier = {target: 0}, [target]
    for hop in range(1, cap + 1):
        if isinstance(graph, PastGraph):  # the topology then is read from the store: the whole frontier at once
            graph.expand(frontier)
        following: list[str] = []
        for node in frontier:
            for neighbour, _ in steps(graph, node, backwards, ctx.sight):
                if neighbour not in distance:
                    distance[neighbour] = hop
                    following.append(neighbour)
            ctx.check_time()
        frontier = following
    return distance


@handler("find_paths")
def find_paths(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    source, target = args["source"], args["target"]
    way = follow(ctx.model, args["direction"], args.get("edge_types", []))
    if "at" in args:  # the topology then (`View.walk`), its edge types as they were named then
        way = way.then(ctx.view)
    max_depth, limit = args["max_depth"], args["limit"]
    with ctx.view.walk() as held:
        ctx.check_time()  # the call may have waited its time out already (for a worker thread, a sync)
        graph, revision = held.graph, held.revision
        for end in (source, target):
            _require_visible(ctx, graph, end)
        distance = _distances(ctx, graph, target, way, max_depth)
        paths: list[list[EdgeRef]] = []
        budget = [MAX_WORK]
        shortest = distance[source] if source in distance else max_depth + 1
        for length in range(shortest, max_depth + 1):
            _walk(ctx, graph, source, target, length, way, distance, [source], [], paths, budget)
            if len(paths) >= MAX_PATHS or budget[0] <= 0:
                break
    cut = len(paths) >= MAX_PATHS or budget[0] <= 0
    offset = decode_cursor("find_paths", args, int) or 0
    chosen = paths[offset : offset + limit]
    edges = iter(_edges_json(ctx, [ref for p in chosen for ref in p]))
    items = [{"nodes": [source, *[_other(ref, n) for ref, n in _hops(p, source)]],
              "edges": [next(edges) for _ in p]} for p in chosen]  # fmt: skip
    more = offset + limit < len(paths)
    cursor = encode_cursor("find_paths", args, offset + limit) if more else None
    return page(items, total=len(paths), limit=limit, revision=revision, next_cursor=cursor, cut=cut)


def _hops(path: list[EdgeRef], start: str) -> Iterator[tuple[EdgeRef, str]]:
    current = start
    for ref in path:
        yield ref, current
        current = _other(ref, current)


def _other(ref: EdgeRef, node: str) -> str:
    return ref[2] if ref[1] == node else ref[1]


def _walk(ctx: CallContext, graph: nx.MultiDiGraph[str], node: str, target: str, remaining: int, way: Follow,
          distance: dict[str, int], trail: list[str], edges: list[EdgeRef], paths: list[list[EdgeRef]],
          budget: list[int]) -> None:  # fmt: skip
    """Collect the simple paths of exactly `remaining` more hops to `target`, pruned by distance."""
    if remaining == 0:
        if node == target:
            paths.append(list(edges))
        return
    chosen: dict[str, EdgeRef] = {}
    for neighbour, ref in steps(graph, node, way, ctx.sight):
        chosen.setdefault(neighbour, ref)  # one edge per neighbour: the first by type name
    for neighbour, ref in chosen.items():
        budget[0] -= 1
        if budget[0] <= 0 or len(paths) >= MAX_PATHS:
            return
        if neighbour in trail or distance.get(neighbour, remaining + 1) > remaining - 1:
            continue
        if budget[0] % 1024 == 0:
            ctx.check_time()
        trail.append(neighbour)
        edges.append(ref)
        _walk(ctx, graph, neighbour, target, remaining - 1, way, distance, trail, edges, paths, budget)
        trail.pop()
        edges.pop()
