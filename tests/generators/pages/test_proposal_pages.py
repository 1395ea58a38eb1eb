"""The proposals' pages: a reviewer lists the open proposals, reads one with its diff and discussion, and approves
it from its form (a double-submit CSRF token, as the edit form's); the merge is what REST then reads. A form without
the cookie's token is refused before any tool runs; the author's own approval is the core's refusal, shown as a
page; a reader who may not read a touched record does not see it in the diff."""

from __future__ import annotations

import httpx2
import pytest

from core.dispatch import proposals
from core.seam.instance import Instance
from core.values.principal import Principal
from tests.generators.conftest import token
from tests.generators.pages.conftest import hidden

pytestmark = pytest.mark.anyio
AUTHOR = Principal("agent-7", frozenset({"writer"}), frozenset({"reviewers"}))
TEAM, VAULT = "team-payments", "svc-card-vault"
OPERATIONS = [
    {"op": "patch_node", "id": TEAM, "properties": {"mission": "Proposed on a page."}},
    {"op": "patch_node", "id": VAULT, "properties": {"description": "Vaulted secret."}},
]


def _proposal(instance: Instance) -> str:
    return proposals.propose(instance.store, Principal("ada", frozenset({"admin"})), OPERATIONS, "Mission and vault",
                             "Both changed.").id  # fmt: skip


async def test_a_reviewer_lists_reads_and_approves_a_proposal_from_its_page(
    http: httpx2.AsyncClient, fresh_instance: Instance
) -> None:
    id_ = _proposal(fresh_instance)
    http.headers["Authorization"] = "Bearer " + token(fresh_instance, "rita", "writer", "payments", "reviewers")
    listing = await http.get("/browse/proposals")
    assert listing.status_code == 200, listing.text
    assert f'href="/browse/proposals/{id_}"' in listing.text
    page = await http.get(f"/browse/proposals/{id_}")
    assert page.status_code == 200, page.text
    assert "Proposed on a page." in page.text
    assert "Vaulted secret." in page.text
    assert 'value="approve"' in page.text
    form = {"_csrf": hidden(page.text, "_csrf"), "_action": "approve", "comment": "Looks right."}
    approved = await http.post(f"/browse/proposals/{id_}/review", data=form)
    assert approved.status_code == 303, approved.text
    assert approved.headers["location"].endswith(f"/browse/proposals/{id_}")
    after = await http.get(f"/api/nodes/{TEAM}")
    assert after.json()["node"]["properties"]["mission"] == "Proposed on a page."
    shown = await http.get(f"/browse/proposals/{id_}")
    assert "merged" in shown.text
    assert "Looks right." in shown.text
    assert 'value="approve"' not in shown.text


async def test_a_review_form_without_the_cookie_s_token_is_refused_and_nothing_is_merged(
    http: httpx2.AsyncClient, fresh_instance: Instance
) -> None:
    id_ = _proposal(fresh_instance)
    http.headers["Authorization"] = "Bearer " + token(fresh_instance, "rita", "writer", "payments", "reviewers")
    page = await http.get(f"/browse/proposals/{id_}")
    forged = await http.post(f"/browse/proposals/{id_}/review",
                             data={"_csrf": hidden(page.text, "_csrf") + "x", "_action": "approve"})  # fmt: skip
    assert forged.status_code == 403
    assert proposals.get(fresh_instance.store, id_).state == "open"


async def test_the_author_s_approval_is_refused_as_a_page_and_a_reader_does_not_see_a_hidden_record(
    http: httpx2.AsyncClient, fresh_instance: Instance
) -> None:
    id_ = proposals.propose(fresh_instance.store, AUTHOR, OPERATIONS[:1], "Mission", "Changed.").id
    http.headers["Authorization"] = "Bearer " + token(fresh_instance, "agent-7", "writer", "reviewers")
    page = await http.get(f"/browse/proposals/{id_}")
    form = {"_csrf": hidden(page.text, "_csrf"), "_action": "approve"}
    refused = await http.post(f"/browse/proposals/{id_}/review", data=form)
    assert refused.status_code == 403
    assert "its author may not review it" in refused.text
    assert proposals.get(fresh_instance.store, id_).state == "open"

    both = _proposal(fresh_instance)
    http.headers["Authorization"] = "Bearer " + token(fresh_instance, "rob", "reader")
    shown = await http.get(f"/browse/proposals/{both}")
    assert shown.status_code == 200, shown.text
    assert "Proposed on a page." in shown.text
    assert VAULT not in shown.text
    assert "Vaulted secret." not in shown.text
