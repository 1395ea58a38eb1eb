"""The proposals' pages: a reviewer lists the open proposals, reads one with its diff and discussion, and approves
it from its form (a double-submit CSRF token, as the edit form's); the merge is what REST then reads. A form without
the cookie's token is refused before any tool runs; the author's own approval is the core's refusal, shown as a
page; a reader who may not read a touched record does not see it in the diff. A write from a page to a type that
waits for review is sent to the proposal it made."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import httpx2
import pytest

from core.dispatch import proposals
from core.ops.config import Config
from core.seam.instance import Instance, open_instance
from core.values.principal import Principal
from tests.conftest import copy_store
from tests.generators.conftest import asgi, token
from tests.generators.pages.conftest import hidden

pytestmark = pytest.mark.anyio
AUTHOR = Principal("agent-7", frozenset({"writer"}), frozenset({"reviewers"}))
TEAM, VAULT = "team-payments", "svc-card-vault"
OPEN_SERVICE = "svc-checkout-api"  # public, tier 1
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


async def test_a_write_from_a_page_to_a_type_that_waits_for_review_goes_to_the_proposal_it_made(
    seed_template: Path, tmp_path: Path
) -> None:
    """With Service reviewed, the New form and the edit form write nothing: the tool made a proposal of the same
    write in the person's name, and the browser is sent to its page (not to a node that does not exist, or exists
    unchanged)."""
    config = Config(store=copy_store(seed_template, tmp_path / "canon.db"), tokens=tmp_path / "tokens.json",
                    review_types=("Service",))  # fmt: skip
    instance = open_instance(config)
    try:
        async with asgi(instance) as http:
            http.headers["Authorization"] = "Bearer " + token(instance, "editor", "writer")
            form = (await http.get("/browse/types/Service/new")).text
            sent = {
                "_csrf": hidden(form, "_csrf"),
                "_id": "svc-reviewed",
                "name": "reviewed",
                "description": "Waits.",
                "lifecycle": "production",
                "tier": "2",
                "_visibility": "restricted",
                "_readers": "group:payments",
            }
            made = await http.post("/browse/types/Service/new", data=sent)
            assert made.status_code == 303, made.text[:800]
            assert made.headers["location"].startswith("/browse/proposals/")
            assert instance.store.node("svc-reviewed") is None
            page = await http.get(made.headers["location"])
            assert page.status_code == 200, page.text[:500]
            assert "svc-reviewed" in page.text
            proposal = proposals.get(instance.store, made.headers["location"].rsplit("/", 1)[1])
            assert (proposal.author, proposal.operations[0]["visibility"]) == ("editor", "restricted")  # all of it

            edit = (await http.get(f"/browse/nodes/{OPEN_SERVICE}/edit")).text
            changed = await http.post(f"/browse/nodes/{OPEN_SERVICE}/edit", data={
                "_csrf": hidden(edit, "_csrf"), "_revision": hidden(edit, "_revision"), "tier": "3"})  # fmt: skip
            assert changed.status_code == 303, changed.text[:800]
            assert changed.headers["location"].startswith("/browse/proposals/")
            assert changed.headers["location"] != made.headers["location"]
            stored = instance.store.node(OPEN_SERVICE)
            assert stored is not None
            assert stored.properties["tier"] == 1
    finally:
        instance.close()


async def test_the_proposals_list_downloads_as_csv_and_json_with_its_state_as_rest_lists_it(
    http: httpx2.AsyncClient, fresh_instance: Instance
) -> None:
    first, second = _proposal(fresh_instance), _proposal(fresh_instance)
    proposals.withdraw(fresh_instance.store, Principal("ada", frozenset({"admin"})), second)
    http.headers["Authorization"] = "Bearer " + token(fresh_instance, "rob", "reader")
    page = (await http.get("/browse/proposals")).text
    assert 'href="/browse/proposals.csv?state=open">CSV</a>' in page
    for state, expected in (("open", first), ("withdrawn", second)):
        rest = (await http.get("/api/proposals", params={"state": state})).json()
        as_json = (await http.get("/browse/proposals.json", params={"state": state})).json()
        assert as_json["items"] == rest["items"]
        assert [p["id"] for p in as_json["items"]] == [expected]
        answer = await http.get("/browse/proposals.csv", params={"state": state})
        assert answer.headers["content-type"].startswith("text/csv")
        [row] = list(csv.DictReader(io.StringIO(answer.text)))
        assert (row["id"], row["state"], row["touches"]) == (expected, state, "1")  # rob may not read the vault
    bad = await http.get("/browse/proposals.json", params={"state": "nope"})
    assert bad.status_code == 400
    assert bad.headers["content-type"].startswith("application/problem+json")
