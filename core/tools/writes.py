"""The write tools: upsert_node, patch_node, delete_node, upsert_edge, delete_edge and write_batch.

Each builds `core.values.operations` and hands them to `ctx.commit` (`Store.commit`, the one write path imports also
take), so a write is validated exactly as an import is, inside the transaction, with
`core.dispatch.access.write_guard` checking that the caller may touch every record involved. After the commit the
index is synced at once, which also hands the changes to the change listeners (subscriptions, the change feed).

A write that touches a type waiting for review, by a caller who may not write it directly (`core.dispatch.review`),
writes nothing: the same operations become a proposal (`core.dispatch.proposals`, checked as `propose_changes`
checks them), and the answer is `proposed`'s: `proposal` (its id, state, base revision and touched records),
`changed` false and `revision` the one it was checked on. Over MCP 2026-07-28, a client that can ask its person is
asked first whether to submit it, with a title and a rationale (`core.dispatch.confirm`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from core.dispatch.confirm import confirmed
from core.dispatch.dispatcher import CallContext, handler
from core.dispatch.proposals import Proposal
from core.store import CommitResult
from core.values.errors import NotFoundError, Problem, ReviewRequiredError, ValidationError
from core.values.operations import DeleteNode, Operation, PatchNode, PutEdge, PutNode
from core.values.operations import operation_of as _operation
from core.values.records import Change, Edge, Node, edge_key

__all__ = [
    "batch_error", "delete_edge", "delete_node", "patch_node", "proposed", "upsert_edge", "upsert_node", "write_batch",
]  # fmt: skip
NODE_OPS = ("upsert_node", "patch_node", "delete_node")


def batch_error(exc: ValidationError, operations: Sequence[Operation], at: str) -> ValidationError:
    """A commit's `ValidationError` with its problems pointing into the tool's arguments (`at` + the operation's own
    pointer, `{i}` the operation's index)."""
    problems = [_relocate(p, at) for p in exc.problems]
    what = "The batch" if len(operations) > 1 or at else _subject(operations[0])
    return ValidationError(f"{what} has {len(problems)} problem(s); nothing was written.", problems)


def _commit(ctx: CallContext, operations: Sequence[Operation], requested: Sequence[dict[str, Any]], *, at: str,
            dry_run: bool = False) -> CommitResult | Proposal:  # fmt: skip
    """Commit for the caller, or, where a type waits for review, propose `requested` (the same operations) in its
    name, over MCP 2026-07-28 once the person at the client confirmed it (`core.dispatch.confirm`); the write's
    problems point into the tool's arguments (`at` + the operation's own pointer)."""
    try:
        try:
            return ctx.commit(operations, dry_run=dry_run)  # the index is synced at once: the next read sees it
        except ReviewRequiredError as refused:  # nothing was written
            needs = refused
            if ctx.asking is not None:
                ctx.proposals.check(ctx.principal, requested)  # what it would refuse, it refuses before asking
    except ValidationError as exc:
        raise batch_error(exc, operations, at) from None
    tool = requested[0]["op"] if at == "" else "write_batch"
    title = f"{tool}: {_title(operations)}"
    rationale = (f"Made by {tool}: {', '.join(needs.types)} wait(s) for review, and {ctx.principal.name} "
                 "may not write it directly.")  # fmt: skip
    if ctx.asking is not None:  # an MCP 2026-07-28 client that can ask its person first (ADR 0062)
        title, rationale = confirmed(ctx.asking, needs, ctx.principal.name, tool, [_subject(op) for op in operations],
                                     title, rationale)  # fmt: skip
    try:
        return ctx.proposals.propose(ctx.principal, requested, title, rationale, surface=ctx.surface)
    except ValidationError as exc:
        raise batch_error(exc, operations, at) from None


def proposed(ctx: CallContext, p: Proposal, **answer: Any) -> dict[str, Any]:
    """A write tool's answer when its write became the proposal `p`: nothing written (`changed` false, where the
    tool answers it), `revision` the one it was checked on, and `answer`'s fields the tool answers whatever it
    wrote."""
    return {"proposal": ctx.proposals.opened(p, ctx.principal), **answer, "revision": p.base_revision}


def _title(operations: Sequence[Operation]) -> str:
    return _subject(operations[0]) + (f" and {len(operations) - 1} more" if len(operations) > 1 else "")


def _subject(op: Operation) -> str:
    if isinstance(op, PutNode):
        return f"Node {op.node.id!r}"
    if isinstance(op, PatchNode):
        return f"Node {op.id!r}"
    if isinstance(op, DeleteNode):
        return f"Deleting node {op.id!r}"
    if isinstance(op, PutEdge):
        return f"Edge {op.edge.key!r}"
    return f"Deleting edge {edge_key(op.type, op.source, op.target)!r}"


def _relocate(problem: Problem, at: str) -> Problem:
    index, _, rest = problem.pointer.lstrip("/").partition("/")
    where = at.replace("{i}", index) + ("/" + rest if rest else "")
    return Problem(where, problem.message)


def _upserted(ctx: CallContext, op: str, args: dict[str, Any], field: str, kind: str, key: str,
              current: Callable[[], Node | Edge | None]) -> dict[str, Any]:  # fmt: skip
    """Commit one upsert; answer with the record as written (or as it already was: nothing changed)."""
    result = _commit(ctx, [_operation(op, args)], [{"op": op, **args}], at="")
    if isinstance(result, Proposal):
        return proposed(ctx, result, changed=False)
    if result.changes:
        change = result.changes[-1]
        assert change.after is not None
        record, created = dict(change.after), change.before is None
    else:  # already exactly like this
        found = current()
        if found is None:  # deleted by someone else since the commit
            raise NotFoundError(kind, key)
        record, created = found.to_json(), False
    return {field: record, "created": created, "changed": bool(result.changes), "revision": result.revision}


@handler("upsert_node")
def upsert_node(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    return _upserted(ctx, "upsert_node", args, "node", "node", args["id"], lambda: ctx.view.node(args["id"]))


@handler("patch_node")
def patch_node(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    """Apply a merge patch inside the write transaction; answer with the node as it is after it."""
    result = _commit(ctx, [_operation("patch_node", args)], [{"op": "patch_node", **args}], at="")
    if isinstance(result, Proposal):
        return proposed(ctx, result, changed=False)
    if result.changes:
        record = dict(result.changes[-1].after or {})
    else:  # the patch changed nothing
        found = ctx.view.node(args["id"])
        if found is None:  # deleted by someone else since the commit
            raise NotFoundError("node", args["id"])
        record = found.to_json()
    return {"node": record, "changed": bool(result.changes), "revision": result.revision}


@handler("delete_node")
def delete_node(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    result = _commit(ctx, [_operation("delete_node", args)], [{"op": "delete_node", **args}], at="")
    if isinstance(result, Proposal):
        return proposed(ctx, result, id=args["id"])
    edges = sum(1 for c in result.changes if c.kind == "edge")
    return {"id": args["id"], "deleted_edges": edges, "revision": result.revision}


@handler("upsert_edge")
def upsert_edge(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    ref = (args["type"], args["source"], args["target"])
    return _upserted(ctx, "upsert_edge", args, "edge", "edge", edge_key(*ref), lambda: ctx.view.edge(*ref))


@handler("delete_edge")
def delete_edge(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    result = _commit(ctx, [_operation("delete_edge", args)], [{"op": "delete_edge", **args}], at="")
    key = edge_key(args["type"], args["source"], args["target"])
    if isinstance(result, Proposal):
        return proposed(ctx, result, key=key)
    return {"key": key, "revision": result.revision}


@handler("write_batch")
def write_batch(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    requested: list[dict[str, Any]] = args["operations"]
    operations = [_operation(r["op"], r) for r in requested]
    dry_run = bool(args.get("dry_run", False))
    result = _commit(ctx, operations, requested, at="/operations/{i}", dry_run=dry_run)
    if isinstance(result, Proposal):
        return proposed(ctx, result, results=[{"op": r["op"], "key": _key_of(r), "changed": False} for r in requested],
                        changes=0, dry_run=False)  # fmt: skip
    last: dict[int, Change] = {}  # operation index -> the last change it made
    for change, index in zip(result.changes, result.operations, strict=True):
        last[index] = change
    results: list[dict[str, Any]] = []
    for index, r in enumerate(requested):
        entry: dict[str, Any] = {"op": r["op"], "key": _key_of(r), "changed": index in last}
        if index in last:
            entry["revision"] = last[index].revision
        results.append(entry)
    return {"results": results, "changes": len(result.changes), "revision": result.revision, "dry_run": dry_run}


def _key_of(requested: dict[str, Any]) -> str:
    return requested["id"] if requested["op"] in NODE_OPS else edge_key(
        requested["type"], requested["source"], requested["target"])  # fmt: skip
