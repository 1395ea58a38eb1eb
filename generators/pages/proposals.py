"""The proposals' pages: where people review what agents propose (issue 29).

    /browse/proposals?state=         the proposals (find_proposals; default: the open ones)
    /browse/proposals.csv|.json      the same list, same state, as CSV or as find_proposals' items
    /browse/proposals/<id>           one proposal: title, rationale, its diff against the current revision as you
                                     may see it, whether it applies cleanly, the discussion, and for an open one
                                     the approve / reject form
    /browse/proposals/<id>/review    POST: approve or reject with a comment (review_proposal), or comment
                                     (comment_on_proposal); the form's double-submit CSRF token checked first

Every read and write is a tool call as the request's caller (`generators.pages.reads.Reader`): who may review is
the core's rule (`core.dispatch.proposals`), so a form sent by someone who may not is refused with the tool's
error, shown as a page. Routes are added to the pages' own by `routes`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from core.values.errors import Problem, ValidationError
from generators.pages.reads import Reader
from generators.pages.render import PREFIX
from generators.pages.views import Download, View

if TYPE_CHECKING:
    from generators.pages.app import Pages

__all__ = ["routes"]

Endpoint = Callable[[Request], Awaitable[Response]]

STATES = ("open", "merged", "rejected", "withdrawn")
ACTIONS = ("approve", "reject", "comment")
COLUMNS = (
    "id",
    "title",
    "author",
    "state",
    "base_revision",
    "created_at",
    "updated_at",
    "reviewer",
    "merge_revision",
    "touches",
)  # a download's columns: find_proposals' items, how many records each touches that you may read


def routes(pages: Pages, guarded: Callable[[Endpoint], Endpoint]) -> list[Route]:
    """The proposals' routes, on `pages`' rendering, errors and forms (`Pages.show_form`, `Pages.submit_form`: the
    CSRF token), each behind `guarded` (the surface's outer boundary)."""
    get = ["GET", "HEAD"]

    async def listing(request: Request, suffix: str | None = None) -> Response:
        state = request.query_params.get("state", "open")
        return await pages.answer(request, lambda reader: _listing(reader, state), suffix)

    async def listing_csv(request: Request) -> Response:
        return await listing(request, "csv")

    async def listing_json(request: Request) -> Response:
        return await listing(request, "json")

    async def proposal(request: Request) -> Response:
        id = request.path_params["id"]
        return await pages.show_form(request, lambda reader, token: _proposal(reader, id, token))

    async def review(request: Request) -> Response:
        id = request.path_params["id"]

        def reviewed(_: None) -> str:
            return PREFIX + "/proposals/" + quote(id, safe="")

        return await pages.submit_form(request, lambda reader, form, token: _review(reader, id, dict(form)),
                                       reviewed)  # fmt: skip

    return [
        Route(PREFIX + "/proposals", guarded(listing), methods=get),
        Route(PREFIX + "/proposals.csv", guarded(listing_csv), methods=get),
        Route(PREFIX + "/proposals.json", guarded(listing_json), methods=get),
        Route(PREFIX + "/proposals/{id}", guarded(proposal), methods=get),
        Route(PREFIX + "/proposals/{id}/review", guarded(review), methods=["POST"]),
    ]


def _listing(reader: Reader, state: str) -> View:
    if state not in STATES:
        raise ValidationError("state must be one of " + ", ".join(STATES) + ".",
                              [Problem("/query/state", f"one of {', '.join(STATES)}")])  # fmt: skip
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:  # every page: a review queue is short, and a page of people reads it whole
        answer = reader.call("find_proposals", {"state": state, "limit": 100, **({"cursor": cursor} if cursor else {})})
        items += answer["items"]
        cursor = answer["next_cursor"]
        if cursor is None or len(items) >= 1000:
            break
    whole = {"items": items, "total": answer["total"], "next_cursor": cursor, "revision": answer["revision"]}
    rows = tuple({c: len(p["touches"]) if c == "touches" else p[c] for c in COLUMNS} for p in items)
    return View("proposals.html.j2", {"items": items, "state": state, "states": STATES},
                Download(f"proposals-{state}", COLUMNS, rows, whole), title=f"Proposals ({state})")  # fmt: skip


def _proposal(reader: Reader, id: str, token: str) -> View:
    answer = reader.call("get_proposal", {"id": id})
    return View("proposal.html.j2", {"answer": answer, "p": answer["proposal"], "token": token,
                                     "path": "/proposals/" + quote(id, safe="")},
                title=answer["proposal"]["title"])  # fmt: skip


def _review(reader: Reader, id: str, form: dict[str, str]) -> None:
    action, text = form.get("_action", ""), form.get("comment", "")
    if action not in ACTIONS:
        raise ValidationError("The form names no action.", [Problem("/form/_action", "approve, reject or comment")])
    if action == "comment":
        reader.call("comment_on_proposal", {"id": id, "text": text})
    else:
        reader.call("review_proposal", {"id": id, "decision": action, "comment": text})
