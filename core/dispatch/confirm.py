"""Asking the person at an MCP client before a write that waits for review becomes a proposal (ADR 0062).

MCP 2026-07-28 lets a server answer `tools/call` with an input-required result (multi round-trip requests,
SEP-2322): requests for the client to fulfil, after which the client retries the same call with its answers
(`inputResponses`) under a new JSON-RPC id. canon uses it for one thing: a write tool's write that the review
policy (`core.dispatch.review`) would turn into a proposal, called over MCP 2026-07-28 by a client that declared
form elicitation on that request, first asks the person at the client, with an `elicitation/create` request under
`KEY`, whether to submit it for review, with a title and a rationale (prefilled with the ones canon would write).

- No `inputResponses[KEY]` (a first call, or a retry that left it out): the call answers the input-required result
  again (the spec's SHOULD for a missing answer). Nothing is written, nothing proposed.
- `accept`: the proposal is made, with the title and rationale the person gave, and the tool answers as it answers
  any write that became a proposal (ADR 0058).
- `decline` or `cancel`: nothing is written or proposed; the call answers the refusal the write met
  (`forbidden`, naming the types that wait for review), saying the person declined.
- Other keys of `inputResponses` are ignored (the spec's SHOULD); a malformed answer under `KEY` is
  `invalid_arguments` pointing into it.

canon mints no `requestState`: every round is decided anew from the request alone (its arguments, the caller's
token, the store as it is then), so there is nothing to carry between rounds, and a `requestState` a client sends
is ignored. The confirmation is the person's say at the client, not an authorisation: the caller may call
`propose_changes` itself, and a reviewer still decides; a client that answers `accept` without asking anyone gets
what it could have had anyway.

Where the client cannot be asked (MCP 2025-11-25, a client without form elicitation, REST, GraphQL, the pages), a
call has no `Asking` and the write becomes a proposal at once, as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.values.errors import ForbiddenError, InvalidArgumentsError, Problem, ReviewRequiredError
from core.values.json_values import value_problems

__all__ = ["KEY", "Asking", "InputRequired", "confirmed", "elicits_forms"]

KEY = "canon_review"
TITLE_MAX, RATIONALE_MAX = 200, 4000  # propose_changes' bounds


@dataclass(frozen=True)
class Asking:
    """A call whose client can be asked (MCP 2026-07-28, form elicitation declared on this request), with the answers
    this request carries to earlier asks (`inputResponses`; empty on a first call)."""

    responses: Mapping[str, Any] = field(default_factory=dict[str, Any])


class InputRequired(Exception):
    """What a call answers instead of its result when it needs the person's answer first: `requests`, the
    `inputRequests` map of MCP's input-required result."""

    def __init__(self, requests: Mapping[str, Any]) -> None:
        super().__init__("input required")
        self.requests = dict(requests)


def elicits_forms(capabilities: Any) -> bool:
    """Whether a request's client capabilities (`_meta`'s `io.modelcontextprotocol/clientCapabilities`) declare form
    elicitation: `elicitation` with `form`, or empty (which means form, for clients of 2025-06-18's shape)."""
    if not isinstance(capabilities, Mapping):
        return False
    elicitation = capabilities.get("elicitation")  # pyright: ignore[reportUnknownMemberType]
    if not isinstance(elicitation, Mapping):
        return False
    return "form" in elicitation or not elicitation


def _request(message: str, title: str, rationale: str) -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": {
            "title": {"type": "string", "title": "Title", "description": "What the reviewer reads first.",
                      "minLength": 1, "maxLength": TITLE_MAX, "default": title[:TITLE_MAX]},
            "rationale": {"type": "string", "title": "Rationale", "description": "Why the change is needed.",
                          "minLength": 1, "maxLength": RATIONALE_MAX, "default": rationale[:RATIONALE_MAX]},
        },
        "required": ["title", "rationale"],
    }  # fmt: skip
    return {"method": "elicitation/create", "params": {"mode": "form", "message": message, "requestedSchema": schema}}


def _text(content: Mapping[str, Any], name: str, bound: int) -> str:
    """The person's `name` answer: text canon can hold (as every argument is checked, `value_problems`), not blank,
    at most `bound` characters; else `InvalidArgumentsError` pointing at it."""
    where, value = f"/inputResponses/{KEY}/content/{name}", content.get(name)
    problems = value_problems(value, where)
    if not problems and (not isinstance(value, str) or not value.strip() or len(value) > bound):
        problems = [Problem(where, f"must be text of 1 to {bound} characters, not blank")]
    if problems:
        raise InvalidArgumentsError("tools/call", problems)
    assert isinstance(value, str)
    return value


def confirmed(asking: Asking, needs: ReviewRequiredError, principal: str, what: str, subjects: Sequence[str],
              title: str, rationale: str) -> tuple[str, str]:  # fmt: skip
    """The title and rationale to propose with, as the person confirmed them; `InputRequired` until this request
    carries their answer; `needs` (the write's refusal, saying they declined) when they declined or cancelled."""
    answer = asking.responses.get(KEY)
    if answer is None:
        listed = "; ".join(subjects[:5]) + (f"; and {len(subjects) - 5} more" if len(subjects) > 5 else "")
        message = (f"{what} by {principal} touches {', '.join(needs.types)}, which wait(s) for review: {principal} "
                   f"may not write it directly. Submit it as a proposal for a reviewer to approve? Nothing is written "
                   f"until a reviewer approves it. It writes: {listed}.")  # fmt: skip
        raise InputRequired({KEY: _request(message, title, rationale)})
    if not isinstance(answer, Mapping) or answer.get("action") not in ("accept", "decline", "cancel"):  # pyright: ignore[reportUnknownMemberType]
        raise InvalidArgumentsError("tools/call", [Problem(
            f"/inputResponses/{KEY}", "must be an elicitation result: action accept, decline or cancel")])  # fmt: skip
    action = answer["action"]
    if action != "accept":
        told = {"decline": "declined", "cancel": "cancelled"}[action]
        raise ForbiddenError("type", needs.types[0], f"{principal} may not write {', '.join(needs.types)} directly "
                             f"(a change to it is reviewed), and the person at the client {told} submitting it for "
                             "review: nothing was written or proposed.")  # fmt: skip
    content = answer.get("content")  # pyright: ignore[reportUnknownMemberType]
    if not isinstance(content, Mapping):
        content = {}
    return _text(content, "title", TITLE_MAX), _text(content, "rationale", RATIONALE_MAX)  # pyright: ignore[reportUnknownArgumentType]
