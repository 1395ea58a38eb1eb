"""The proposal tools: propose_changes, revise_proposal, withdraw_proposal, comment_on_proposal, review_proposal,
get_proposal and find_proposals.

Thin on purpose: each handler shapes its arguments and answer; what a proposal is, who may review it, the conflict
rule and what a reader is shown are `core.dispatch.proposals`' (one rule, one place, the same on every surface). A
merge syncs the index at once (`ctx.proposals`, `core.dispatch.proposals.ProposalBook`), as a write does, so the
caller's next read sees it and change listeners hear of it.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from contextlib import contextmanager
from typing import Any

from core.dispatch.dispatcher import CallContext, handler
from core.dispatch.proposals import Proposal
from core.tools.writes import batch_error
from core.values.errors import InvalidArgumentsError, Problem, ValidationError
from core.values.operations import operations_of
from core.values.paging import decode_cursor, encode_cursor, page

__all__ = [
    "comment_on_proposal", "find_proposals", "get_proposal", "propose_changes", "review_proposal", "revise_proposal",
    "withdraw_proposal",
]  # fmt: skip

OPERATIONS = "/operations/{i}"


@contextmanager
def _pointing(requested: Sequence[Any]) -> Generator[None]:
    """A check's problems point into the tool's `operations`, as write_batch's do."""
    try:
        yield
    except ValidationError as exc:
        if not exc.problems:
            raise
        raise batch_error(exc, operations_of(requested), OPERATIONS) from None


def _opened(ctx: CallContext, p: Proposal) -> dict[str, Any]:
    return ctx.proposals.opened(p, ctx.principal)


@handler("propose_changes")
def propose_changes(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    with _pointing(args["operations"]):
        p = ctx.proposals.propose(ctx.principal, args["operations"], args["title"], args["rationale"],
                                  surface=ctx.surface)  # fmt: skip
    return _opened(ctx, p)


@handler("revise_proposal")
def revise_proposal(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    if not {"operations", "title", "rationale"} & args.keys():
        raise InvalidArgumentsError("revise_proposal", [Problem("", "give operations, a title or a rationale")])
    with _pointing(args.get("operations", ())):
        p = ctx.proposals.revise(ctx.principal, args["id"], requested=args.get("operations"),
                                 title=args.get("title"), rationale=args.get("rationale"))  # fmt: skip
    return _opened(ctx, p)


@handler("withdraw_proposal")
def withdraw_proposal(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    p = ctx.proposals.withdraw(ctx.principal, args["id"], args["comment"])
    return {"id": p.id, "state": p.state}


@handler("comment_on_proposal")
def comment_on_proposal(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    p = ctx.proposals.comment(ctx.principal, args["id"], args["text"])
    return {"id": p.id, "state": p.state, "comments": len(p.comments)}


@handler("review_proposal")
def review_proposal(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    # a merge syncs the index, as a write does: the caller's next read sees it, and listeners hear of it
    p = ctx.proposals.review(ctx.principal, args["id"], args["decision"], args["comment"], ctx.reviewers,
                             surface=ctx.surface)  # fmt: skip
    return {"id": p.id, "state": p.state, "reviewer": p.reviewer or ctx.principal.name,
            "merge_revision": p.merge_revision, "revision": ctx.view.latest()}  # fmt: skip


@handler("get_proposal")
def get_proposal(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    return ctx.proposals.answer(args["id"], ctx.principal)


@handler("find_proposals")
def find_proposals(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    after: str | None = decode_cursor("find_proposals", args, str)
    limit = args["limit"]
    revision = ctx.view.latest()
    found, total = ctx.proposals.find(ctx.principal, state=args.get("state"), author=args.get("author"),
                                      node=args.get("node"), after=after, limit=limit + 1)  # fmt: skip
    more = len(found) > limit
    items = found[:limit]
    cursor = encode_cursor("find_proposals", args, items[-1].id) if more and items else None
    shown = [ctx.proposals.summary(p, ctx.principal, comments=False) for p in items]
    return page(shown, total=total, limit=limit, revision=revision, next_cursor=cursor)
