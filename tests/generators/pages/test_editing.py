"""Editing a node from its page: a form generated from the type's schema, written through `patch_node` with the
revision the form was opened at, protected by a double-submit CSRF token.

A writer's edit is what REST then reads; a form opened before someone else's change is a 409 page that shows
what changed and writes nothing; the tool's problems are shown next to the fields they concern; a POST without
the cookie's token, or with another, is refused before any tool runs; a reader's edit is the tool's refusal.
"""

from __future__ import annotations

import re
from typing import Any

import httpx2
import pytest

from core.seam.instance import Instance
from core.values.principal import Principal
from tests.generators.conftest import asgi, token
from tests.generators.pages.conftest import hidden

pytestmark = pytest.mark.anyio

NODE = "svc-checkout-api"
EDIT = f"/browse/nodes/{NODE}/edit"
DOC = "doc-runbook-ledger-reconciliation"


async def _open(http: httpx2.AsyncClient) -> tuple[str, str]:
    form = await http.get(EDIT)
    assert form.status_code == 200, form.text
    return hidden(form.text, "_csrf"), hidden(form.text, "_revision")


async def _tier(http: httpx2.AsyncClient) -> Any:
    return (await http.get(f"/api/nodes/{NODE}")).json()["node"]["properties"]["tier"]


async def test_the_form_holds_every_editable_property_labelled_with_its_current_value(
    http: httpx2.AsyncClient, fresh_instance: Instance
) -> None:
    form = (await http.get(EDIT)).text
    node = fresh_instance.store.node(NODE)
    assert node is not None
    for name in ("name", "description", "tier", "lifecycle", "handles_pii", "tags", "slo_availability"):
        assert f'<label for="p-{name}">' in form
        assert f'id="p-{name}" name="{name}"' in form
    assert '<option value="production" selected>' in form
    assert re.search(r'<textarea id="p-tags"[^>]*>checkout\npayments\ncustomer-facing</textarea>', form)
    assert hidden(form, "_revision") == str(node.revision)


async def test_a_writer_s_edit_is_written_through_patch_node_and_read_back_by_rest(http: httpx2.AsyncClient) -> None:
    csrf, revision = await _open(http)
    answer = await http.post(EDIT, data={"_csrf": csrf, "_revision": revision, "tier": "3", "tags": "a\nb",
                                         "dashboard": ""})  # fmt: skip
    assert answer.status_code == 303
    assert answer.headers["location"] == f"/browse/nodes/{NODE}"
    properties = (await http.get(f"/api/nodes/{NODE}")).json()["node"]["properties"]
    assert (properties["tier"], properties["tags"], "dashboard" in properties) == (3, ["a", "b"], False)
    assert properties["name"] == "checkout-api"  # a field the form did not send is left as it was


async def test_a_form_opened_before_another_change_is_a_conflict_that_writes_nothing(
    http: httpx2.AsyncClient, fresh_instance: Instance
) -> None:
    csrf, revision = await _open(http)
    pat = Principal("pat", frozenset({"writer"}))
    other = fresh_instance.snapshot.dispatcher.call_tool(
        pat, "test", "patch_node", {"id": NODE, "properties": {"tier": 2}}
    )
    assert other.error is None
    changed = fresh_instance.store.node(NODE)
    assert changed is not None
    answer = await http.post(EDIT, data={"_csrf": csrf, "_revision": revision, "tier": "3"})
    assert answer.status_code == 409
    assert answer.headers["content-type"].startswith("text/html")
    assert "Someone changed this node while you were editing it" in answer.text
    assert (
        f"You opened it at revision {revision}; it is now at revision {changed.revision}, changed by pat" in answer.text
    )
    assert await _tier(http) == 2  # theirs stands
    assert hidden(answer.text, "_revision") == str(changed.revision)  # saving again is a deliberate overwrite
    assert re.search(r'id="p-tier" name="tier" value="3"', answer.text)  # what this person sent, kept


async def test_the_tool_s_problems_are_shown_next_to_the_fields_they_concern(http: httpx2.AsyncClient) -> None:
    csrf, revision = await _open(http)
    answer = await http.post(EDIT, data={"_csrf": csrf, "_revision": revision, "tier": "9", "lifecycle": "nope"})
    assert answer.status_code == 400
    fields = re.findall(r'<div class="field invalid">\s*<label for="p-(\w+)">', answer.text)
    assert fields == ["lifecycle", "tier"]
    assert 'id="e-tier-1">9 is greater than the maximum of 3</p>' in answer.text
    assert await _tier(http) == 1


# -- who may read it: visibility and readers, patch_node's own arguments --------------------------------------------
VAULT = "svc-card-vault"  # restricted to group:payments and group:security


async def test_the_form_holds_the_node_s_visibility_and_readers(
    http: httpx2.AsyncClient, fresh_instance: Instance
) -> None:
    form = (await http.get(EDIT)).text
    assert re.search(r'<select id="p-_visibility" name="_visibility"[^>]*>\s*'
                     r'<option value="public" selected>public</option><option value="internal">', form)  # fmt: skip
    assert "the type&#39;s default" not in form  # only a New form leaves it to the type
    http.headers["Authorization"] = "Bearer " + token(fresh_instance, "vera", "writer", "payments")
    vault = (await http.get(f"/browse/nodes/{VAULT}/edit")).text
    assert '<option value="restricted" selected>' in vault
    assert re.search(r'<textarea id="p-_readers"[^>]*>group:payments\ngroup:security</textarea>', vault)


async def test_a_writer_restricts_a_node_from_its_form_and_an_outsider_no_longer_reads_it(
    http: httpx2.AsyncClient, fresh_instance: Instance
) -> None:
    http.headers["Authorization"] = "Bearer " + token(fresh_instance, "vera", "writer", "payments")
    csrf, revision = await _open(http)
    answer = await http.post(EDIT, data={"_csrf": csrf, "_revision": revision, "_visibility": "restricted",
                                         "_readers": "group:payments"})  # fmt: skip
    assert answer.status_code == 303, answer.text[:800]
    node = (await http.get(f"/api/nodes/{NODE}")).json()["node"]
    assert (node["visibility"], node["readers"], node["properties"]["tier"]) == ("restricted", ["group:payments"], 1)
    http.headers["Authorization"] = "Bearer " + token(fresh_instance, "otto", "reader", "platform")
    assert (await http.get(f"/api/nodes/{NODE}")).status_code == 403
    assert (await http.get(f"/browse/nodes/{NODE}")).status_code == 403
    assert NODE not in (await http.get("/browse/types/Service?_size=100")).text


async def test_leaving_restricted_with_its_readers_kept_is_the_tool_s_problem_next_to_the_readers(
    http: httpx2.AsyncClient, fresh_instance: Instance
) -> None:
    http.headers["Authorization"] = "Bearer " + token(fresh_instance, "vera", "writer", "payments")
    form = (await http.get(f"/browse/nodes/{VAULT}/edit")).text
    sent = {"_csrf": hidden(form, "_csrf"), "_revision": hidden(form, "_revision"), "_visibility": "internal",
            "_readers": "group:payments\ngroup:security"}  # fmt: skip
    refused = await http.post(f"/browse/nodes/{VAULT}/edit", data=sent)
    assert refused.status_code == 400, refused.text[:800]
    assert re.search(r'<div class="field invalid">\s*<label for="p-_readers">', refused.text)
    assert 'id="e-_readers-1">readers are only allowed on restricted nodes</p>' in refused.text
    assert '<option value="internal" selected>' in refused.text  # what was chosen, kept
    stored = fresh_instance.store.node(VAULT)
    assert stored is not None
    assert stored.visibility == "restricted"
    answer = await http.post(f"/browse/nodes/{VAULT}/edit", data={**sent, "_readers": ""})  # emptied: removed
    assert answer.status_code == 303, answer.text[:800]
    stored = fresh_instance.store.node(VAULT)
    assert stored is not None
    assert (stored.visibility, stored.readers) == ("internal", ())


async def test_a_conflict_keeps_the_visibility_and_readers_this_person_chose(
    http: httpx2.AsyncClient, fresh_instance: Instance
) -> None:
    csrf, revision = await _open(http)
    pat = Principal("pat", frozenset({"writer"}))
    assert fresh_instance.snapshot.dispatcher.call_tool(pat, "test", "patch_node", {
        "id": NODE, "properties": {"tier": 2}}).error is None  # fmt: skip
    answer = await http.post(EDIT, data={"_csrf": csrf, "_revision": revision, "_visibility": "restricted",
                                         "_readers": "user:editor"})  # fmt: skip
    assert answer.status_code == 409
    assert '<option value="restricted" selected>' in answer.text
    assert re.search(r'<textarea id="p-_readers"[^>]*>user:editor</textarea>', answer.text)
    assert re.search(r'<th scope="row">visibility</th><td class="theirs">public</td>', answer.text)
    stored = fresh_instance.store.node(NODE)
    assert stored is not None
    assert stored.visibility == "public"


@pytest.mark.parametrize("csrf", [None, "", "forged", "wrong-but-long-enough-to-look-real-0123456789", "²é"])
async def test_a_post_without_the_cookies_token_is_refused_before_any_tool_runs(
    http: httpx2.AsyncClient, fresh_instance: Instance, csrf: str | None
) -> None:
    _, revision = await _open(http)
    data = {"_revision": revision, "tier": "3"} | ({"_csrf": csrf} if csrf is not None else {})
    audited: list[str] = []
    fresh_instance.snapshot.dispatcher.audit_hooks.append(lambda record: audited.append(record.target))
    answer = await http.post(EDIT, data=data)
    assert answer.status_code == 403
    assert "anti-forgery token" in answer.text
    assert "patch_node" not in audited
    assert await _tier(http) == 1


async def test_a_post_from_a_browser_without_the_cookie_is_refused_even_with_a_token(
    http: httpx2.AsyncClient,
) -> None:
    csrf, revision = await _open(http)
    http.cookies.clear()  # another site's form: the browser does not send a SameSite=Strict cookie with it
    answer = await http.post(EDIT, data={"_csrf": csrf, "_revision": revision, "tier": "3"})
    assert answer.status_code == 403
    assert await _tier(http) == 1


async def test_the_token_cookie_is_httponly_samesite_strict_and_under_the_pages_path(
    http: httpx2.AsyncClient,
) -> None:
    answer = await http.get(EDIT)
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith("canon_pages_csrf=")
    assert {"HttpOnly", "Path=/browse/", "SameSite=strict"} <= {p.strip() for p in cookie.split(";")}
    again = await http.get(EDIT)  # the cookie is there now: the same token, not a new one
    assert "set-cookie" not in again.headers
    assert hidden(again.text, "_csrf") == hidden(answer.text, "_csrf")


async def test_a_reader_s_edit_is_the_tool_s_refusal(fresh_instance: Instance) -> None:
    async with asgi(fresh_instance) as http:
        http.headers["Authorization"] = "Bearer " + token(fresh_instance, "looker", "reader")
        csrf, revision = await _open(http)
        answer = await http.post(EDIT, data={"_csrf": csrf, "_revision": revision, "tier": "3"})
        assert answer.status_code == 403
        assert "patch_node" in answer.text
        assert await _tier(http) == 1


# -- edges -----------------------------------------------------------------------------------------------------------
async def _edge_form(http: httpx2.AsyncClient) -> str:
    return (await http.get(EDIT)).text


async def test_an_edge_is_added_under_one_of_the_nodes_edge_names_and_removed_at_its_revision(
    http: httpx2.AsyncClient, fresh_instance: Instance
) -> None:
    page = await _edge_form(http)
    csrf = hidden(page, "_csrf")
    assert '<option value="documented_by">' in page  # documents, seen from its target
    add = {"_csrf": csrf, "_action": "add", "name": "documented_by", "other": DOC}
    added = await http.post(f"/browse/nodes/{NODE}/edges", data=add)
    assert added.status_code == 303, added.text[:500]
    edge = fresh_instance.store.edge("documents", DOC, NODE)
    assert edge is not None
    again = await http.post(f"/browse/nodes/{NODE}/edges", data=add)
    assert again.status_code == 409  # it exists: expected_revision 0 refuses a second add
    page = await _edge_form(http)
    assert f'aria-label="Remove documented_by {DOC}"' in page
    removed = await http.post(f"/browse/nodes/{NODE}/edges", data={
        "_csrf": csrf, "_action": "remove", "type": "documents", "source": DOC, "target": NODE,
        "_revision": str(edge.revision)})  # fmt: skip
    assert removed.status_code == 303
    assert fresh_instance.store.edge("documents", DOC, NODE) is None


async def test_removing_an_edge_someone_changed_since_is_a_conflict(
    http: httpx2.AsyncClient, fresh_instance: Instance
) -> None:
    csrf = hidden(await _edge_form(http), "_csrf")
    edge = fresh_instance.store.edge("owns", "team-payments", NODE)
    assert edge is not None
    answer = await http.post(f"/browse/nodes/{NODE}/edges", data={
        "_csrf": csrf, "_action": "remove", "type": "owns", "source": "team-payments", "target": NODE,
        "_revision": str(edge.revision - 1)})  # fmt: skip
    assert answer.status_code == 409
    assert "read it again" in answer.text
    assert fresh_instance.store.edge("owns", "team-payments", NODE) is not None


@pytest.mark.parametrize(
    "form",
    [{"_action": "add", "name": "no_such_edge", "other": "team-payments"}, {"_action": "add", "name": "owned_by"},
     {"_action": "drop"}, {"_action": "remove", "type": "owns", "source": "team-payments", "target": "team-x",
                            "_revision": "1"}],
)  # fmt: skip
async def test_an_edge_form_that_names_no_edge_of_this_node_is_a_400(
    http: httpx2.AsyncClient, form: dict[str, str]
) -> None:
    csrf = hidden(await _edge_form(http), "_csrf")
    answer = await http.post(f"/browse/nodes/{NODE}/edges", data={"_csrf": csrf, **form})
    assert answer.status_code == 400, answer.text[:300]


async def test_an_edge_form_without_the_token_is_refused(http: httpx2.AsyncClient, fresh_instance: Instance) -> None:
    await _edge_form(http)
    answer = await http.post(f"/browse/nodes/{NODE}/edges", data={"_action": "add", "name": "documented_by",
                                                                  "other": DOC})  # fmt: skip
    assert answer.status_code == 403
    assert fresh_instance.store.edge("documents", DOC, NODE) is None
