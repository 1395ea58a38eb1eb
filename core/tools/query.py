"""query_graph: a small declarative, read-only pattern language over the graph index.

A pattern is a list of terms. Node terms constrain a variable (`type`, `id`, `where`); edge terms require an
edge of a type between two variables (and may constrain its properties). The engine binds variables one at a
time, starting from the most selective node term and growing along edge terms through the index, so a
connected pattern costs work proportional to what it matches. Every query is bounded: at most 8 terms and 4
edge terms (schema), `MAX_WORK` candidate bindings examined, `MAX_RESULTS` distinct results counted, and the
call's wall time. Going past the work or time bound is a `LimitExceededError`, never a silent cut.

See docs/surfaces/query-language.md for the language with examples.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from core.dispatch.access import sees_in_graph
from core.dispatch.dispatcher import CallContext, handler
from core.lang.conditions import Condition, all_match, conditions_of, parse_where
from core.store import NodeQuery
from core.store.past_graph import PastGraph
from core.values.errors import InvalidArgumentsError, LimitExceededError, Problem
from core.values.paging import decode_cursor, encode_cursor, page

if TYPE_CHECKING:  # only annotations: the graph index imports networkx on first use (core.index.graph)
    import networkx as nx

MAX_WORK = 100_000
MAX_RESULTS = 1_000
MAX_EDGE_TERMS = 4


@dataclass
class _Var:
    name: str
    type: str | None = None
    id: str | None = None
    conditions: tuple[Condition, ...] = ()


@dataclass(frozen=True)
class _EdgeTerm:
    type: str
    source: str
    target: str
    conditions: tuple[Condition, ...]


@dataclass
class _Run:
    ctx: CallContext
    graph: nx.MultiDiGraph[str] | PastGraph
    variables: dict[str, _Var]
    edges: list[_EdgeTerm]
    work: int = 0
    properties: dict[str, dict[str, Any]] = field(default_factory=dict[str, dict[str, Any]])
    edge_properties: dict[tuple[str, str, str], dict[str, Any]] = field(
        default_factory=dict[tuple[str, str, str], dict[str, Any]]
    )

    def tick(self) -> None:
        self.work += 1
        if self.work > MAX_WORK:
            raise LimitExceededError(
                f"query_graph examined more than {MAX_WORK:,} candidate bindings; add a type, an id or "
                "conditions to the most selective terms, or connect the pattern with edge terms.",
                limit="work", value=self.work,
            )  # fmt: skip
        if self.work % 1024 == 0:
            self.ctx.check_time()

    def node_ok(self, var: _Var, node: str) -> bool:
        if var.id is not None and node != var.id:
            return False
        if not sees_in_graph(self.ctx.sight, self.graph, node):
            return False
        if var.type is not None and self.graph.nodes[node]["type"] != var.type:
            return False
        if var.conditions:
            props = self.properties.get(node)
            if props is None:
                held = self.graph.nodes[node].get("then")  # the state then, which a past topology holds already
                record = held if held is not None else self.ctx.view.node(node)
                props = dict(record.properties) if record is not None else {}
                self.properties[node] = props
            return all_match(var.conditions, props)
        return True

    def edge_ok(self, term: _EdgeTerm, source: str, target: str) -> bool:
        if not self.graph.has_edge(source, target, key=term.type):
            return False
        if term.conditions:
            ref = (term.type, source, target)
            props = self.edge_properties.get(ref)
            if props is None:
                held = self.graph.edge_then(*ref) if isinstance(self.graph, PastGraph) else None
                record = held if held is not None else self.ctx.view.edge(*ref)
                props = dict(record.properties) if record is not None else {}
                self.edge_properties[ref] = props
            return all_match(term.conditions, props)
        return True


def _parse(ctx: CallContext, match: list[dict[str, Any]]) -> tuple[dict[str, _Var], list[_EdgeTerm]]:
    variables: dict[str, _Var] = {}
    edges: list[_EdgeTerm] = []
    problems: list[Problem] = []
    wheres: list[tuple[int, _Var, dict[str, Any]]] = []  # checked once every term has been read
    for i, term in enumerate(match):
        if "node" in term:
            var = variables.setdefault(term["node"], _Var(term["node"]))
            if "type" in term:
                if var.type not in (None, term["type"]):
                    problems.append(Problem(f"/match/{i}/type", f"{var.name} is already a {var.type}"))
                var.type = term["type"]
            if "id" in term:
                var.id = term["id"]
            if "where" in term:
                wheres.append((i, var, term["where"]))
        else:
            for end in ("from", "to"):
                variables.setdefault(term[end], _Var(term[end]))
            edge_type, meaning = ctx.model.edge_named(term["edge"])  # an incoming name: from and to swap
            source, target = (term["from"], term["to"]) if meaning == "out" else (term["to"], term["from"])
            conditions: tuple[Condition, ...] = ()
            for name, spec in term.get("where", {}).items():
                if name not in edge_type.schema["properties"]:
                    problems.append(Problem(f"/match/{i}/where/{name}", f"{edge_type.name} has no property {name!r}"))
                    continue
                conditions += conditions_of(name, spec)
            edges.append(_EdgeTerm(edge_type.name, source, target, conditions))
    for var in variables.values():
        var.type = var.type or _implied_type(ctx, var.name, edges)
    for i, var, where in wheres:
        node_type = ctx.model.node_types.get(var.type) if var.type else None
        var.conditions += parse_where(where, node_type, tool="query_graph", at=f"/match/{i}/where")
    disconnected = _components(variables, edges)
    if len(disconnected) > 1:
        groups = " and ".join("{" + ", ".join(sorted(c)) + "}" for c in disconnected)
        problems.append(Problem("/match", f"the pattern is not connected: {groups} share no edge term; "
                                "a cross product of them would explode, so query them separately"))  # fmt: skip
    if len(edges) > MAX_EDGE_TERMS:
        problems.append(Problem("/match", f"at most {MAX_EDGE_TERMS} edge terms are allowed, got {len(edges)}"))
    if problems:
        raise InvalidArgumentsError("query_graph", problems)
    return variables, edges


def _named_then(
    ctx: CallContext, variables: dict[str, _Var], edges: list[_EdgeTerm]
) -> tuple[dict[str, _Var], list[_EdgeTerm]]:
    """The parsed pattern (in the names of the model now, which validated it) in the names of the model at the
    view's revision: the same terms and conditions, their types and properties renamed back where a model change
    since renamed them."""
    view = ctx.view

    def conditions(kind: str, type_: str, given: tuple[Condition, ...]) -> tuple[str, tuple[Condition, ...]]:
        name, names = view.named_then(kind, type_, [c.property for c in given])
        return name, tuple(replace(c, property=n) for c, n in zip(given, names, strict=True))

    for var in variables.values():
        if var.type is not None:
            var.type, var.conditions = conditions("node type", var.type, var.conditions)
    renamed: list[_EdgeTerm] = []
    for t in edges:
        type_, given = conditions("edge type", t.type, t.conditions)
        renamed.append(_EdgeTerm(type_, t.source, t.target, given))
    return variables, renamed


def _implied_type(ctx: CallContext, name: str, edges: list[_EdgeTerm]) -> str | None:
    """The one node type a variable can have, given the edge terms it is an end of (None if several)."""
    allowed: set[str] | None = None
    for term in edges:
        edge_type = ctx.model.edge_types[term.type]
        for end, types in ((term.source, edge_type.sources), (term.target, edge_type.targets)):
            if end == name:
                allowed = set(types) if allowed is None else allowed & types
    return next(iter(allowed)) if allowed is not None and len(allowed) == 1 else None


def _components(variables: dict[str, _Var], edges: list[_EdgeTerm]) -> list[set[str]]:
    """The groups of variables connected by edge terms."""
    groups: list[set[str]] = [{name} for name in variables]
    for term in edges:
        joined = [g for g in groups if term.source in g or term.target in g]
        groups = [g for g in groups if g not in joined] + [set().union(*joined)]
    return sorted(groups, key=lambda g: sorted(g))


def _candidates(run: _Run, var: _Var) -> list[str]:
    if var.id is not None:
        return [var.id] if var.id in run.graph and run.node_ok(var, var.id) else []
    if var.type is not None or var.conditions:
        query = NodeQuery(var.type, var.conditions, sight=run.ctx.sight)
        nodes, _ = run.ctx.view.find(query, after=None, limit=MAX_WORK + 1)
        if isinstance(run.graph, PastGraph):  # read their states then in batches, not one by one below
            run.graph.nodes.load(n.id for n in nodes)
        ids = [n.id for n in nodes if n.id in run.graph]
        for n in nodes:
            run.properties[n.id] = dict(n.properties)
        return ids
    return sorted(n for n in run.graph.nodes if sees_in_graph(run.ctx.sight, run.graph, n))


def _selectivity(run: _Run, var: _Var) -> tuple[int, int, str]:
    if var.id is not None:
        return (0, 1, var.name)
    if var.type is not None or var.conditions:
        _, total = run.ctx.view.find(NodeQuery(var.type, var.conditions, sight=run.ctx.sight), after=None,
                                     limit=0)  # fmt: skip
        return (1, total, var.name)
    return (2, 0, var.name)  # every node: the same count for each such variable, so only the name orders them


def _bindings(run: _Run, order: list[str], binding: dict[str, str]) -> Iterator[dict[str, str]]:
    """Depth-first over variables in `order`; each new variable is bound through an edge term when possible."""
    if len(binding) == len(order):
        yield dict(binding)
        return
    var = run.variables[order[len(binding)]]
    for node in _extensions(run, var, binding):
        if not sees_in_graph(run.ctx.sight, run.graph, node):
            continue  # before counting it: `work` must not reveal how many hidden candidates there are
        run.tick()
        if not run.node_ok(var, node):
            continue
        binding[var.name] = node
        if all(run.edge_ok(t, binding[t.source], binding[t.target]) for t in run.edges
               if t.source in binding and t.target in binding and var.name in (t.source, t.target)):  # fmt: skip
            yield from _bindings(run, order, binding)
        del binding[var.name]


def _extensions(run: _Run, var: _Var, binding: dict[str, str]) -> list[str]:
    for term in run.edges:
        if term.source == var.name and term.target in binding:
            return sorted({s for s, _, k in run.graph.in_edges(binding[term.target], keys=True) if k == term.type})
        if term.target == var.name and term.source in binding:
            return sorted({t for _, t, k in run.graph.out_edges(binding[term.source], keys=True) if k == term.type})
    return _candidates(run, var)  # the first variable: patterns are connected, so every later one has an edge


def _order(run: _Run) -> list[str]:
    """Start with the most selective variable, then always take one connected to what is bound."""
    remaining = set(run.variables)
    order: list[str] = []
    while remaining:
        connected = {v for t in run.edges for v in (t.source, t.target)
                     if {t.source, t.target} & set(order) and v in remaining}  # fmt: skip
        pool = connected or remaining
        best = min(pool, key=lambda name: _selectivity(run, run.variables[name]))
        order.append(best)
        remaining.discard(best)
    return order


@handler("query_graph")
def query_graph(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    variables, edges = _parse(ctx, args["match"])
    if "at" in args:  # the pattern over the graph then (`View.walk`), in the names of the model then
        variables, edges = _named_then(ctx, variables, edges)
    returned = args.get("return") or list(variables)
    unknown = [name for name in returned if name not in variables]
    if unknown:
        raise InvalidArgumentsError("query_graph", [Problem("/return", f"unknown variable(s): {', '.join(unknown)}")])
    limit = args["limit"]
    with ctx.view.walk() as held:
        ctx.check_time()  # the call may have waited its time out already (for a worker thread, a sync)
        revision = held.revision
        run = _Run(ctx, held.graph, variables, edges)
        results: set[tuple[str, ...]] = set()
        for binding in _bindings(run, _order(run), {}):
            results.add(tuple(binding[name] for name in returned))
            if len(results) >= MAX_RESULTS:
                break
    ordered = sorted(results)
    offset = decode_cursor("query_graph", args, int) or 0
    chosen = ordered[offset : offset + limit]
    bound = sorted({n for row in chosen for n in row})
    records = ctx.view.nodes(bound)
    items = [{name: n for name, n in zip(returned, row, strict=True) if n in records} for row in chosen]
    more = offset + limit < len(ordered)
    cursor = encode_cursor("query_graph", args, offset + limit) if more else None
    result = page(items, total=len(ordered), limit=limit, revision=revision, next_cursor=cursor,
                  cut=len(results) >= MAX_RESULTS)  # fmt: skip
    nodes = [records[n].to_json() for n in bound if n in records]  # each bound node once, however many rows bind it
    return result | {"nodes": nodes, "work": run.work}
