"""Creating a node from a type's "New" form (upsert_node expected new) and editing an edge's properties
(upsert_edge at the revision shown), both CSRF-protected like the edit form.

A writer's new node is what REST then reads; a second person creating the same id gets a 409 page naming the
node that exists and nothing is overwritten; a key another node holds, a value the schema refuses and a missing
required property are shown next to their fields with what was sent kept; a POST without the cookie's token is
refused before any tool runs; a reader's create is the tool's refusal.
"""

from __future__ import annotations

import re

import httpx2
import pytest

from core.seam.instance import Instance
from core.values.principal import Principal
from tests.generators.conftest import asgi, token
from tests.generators.pages.conftest import hidden

pytestmark = pytest.mark.anyio

NEW = "/browse/types/Service/new"
GOOD = {"_id": "svc-ledger-exporter", "name": "ledger-exporter", "description": "Exports the ledger nightly.",
        "lifecycle": "production", "tier": "2", "tags": "ledger\nbatch", "handles_pii": "false"}  # fmt: skip
EDGE = ("depends_on", "svc-checkout-api", "svc-payment-gateway")
EDGE_PAGE = f"/browse/nodes/{EDGE[1]}/edge"


async def _csrf(http: httpx2.AsyncClient, path: str = NEW) -> str:
    form = await http.get(path)
    assert form.status_code == 200, form.text[:500]
    return hidden(form.text, "_csrf")


def _invalid(page: str) -> list[str]:
    return re.findall(r'<div class="field invalid">\s*<label for="p-(\w+)">', page)


async def test_the_type_page_links_its_new_form_which_marks_the_id_required_and_key_fields(
    http: httpx2.AsyncClient,
) -> None:
    assert 'href="/browse/types/Service/new">New Service</a>' in (await http.get("/browse/types/Service")).text
    form = (await http.get(NEW)).text
    assert '<label for="p-_id">id <span class="required">required</span></label>' in form
    assert re.search(r'<label for="p-name">name <span class="required">required</span> '
                     r'<span class="key">key, unique</span></label>', form)  # fmt: skip
    for name in ("description", "lifecycle", "tier"):
        assert f'<label for="p-{name}">{name} <span class="required">required</span>' in form
    assert '<label for="p-language">language</label>' in form  # optional: not marked
    assert 'action="/browse/types/Service/new"' in form


async def test_a_writer_s_new_node_is_created_through_upsert_node_and_read_back_by_rest(
    http: httpx2.AsyncClient,
) -> None:
    answer = await http.post(NEW, data={"_csrf": await _csrf(http), **GOOD})
    assert answer.status_code == 303, answer.text[:800]
    assert answer.headers["location"] == "/browse/nodes/svc-ledger-exporter"
    node = (await http.get("/api/nodes/svc-ledger-exporter")).json()["node"]
    assert node["type"] == "Service"
    assert node["properties"] == {"name": "ledger-exporter", "description": "Exports the ledger nightly.",
                                  "lifecycle": "production", "tier": 2, "tags": ["ledger", "batch"],
                                  "handles_pii": False}  # fmt: skip
    assert node["updated_by"] == "editor"
    assert "ledger-exporter" in (await http.get(answer.headers["location"])).text


async def test_a_second_person_creating_the_same_id_gets_a_conflict_and_nothing_is_overwritten(
    http: httpx2.AsyncClient, fresh_instance: Instance
) -> None:
    pat = Principal("pat", frozenset({"writer"}))
    first = fresh_instance.snapshot.dispatcher.call_tool(pat, "test", "upsert_node", {
        "id": GOOD["_id"], "type": "Service", "properties": {"name": "pats-exporter", "description": "Pat's.",
                                                             "lifecycle": "production", "tier": 3}})  # fmt: skip
    assert first.error is None
    answer = await http.post(NEW, data={"_csrf": await _csrf(http), **GOOD})
    assert answer.status_code == 409
    assert answer.headers["content-type"].startswith("text/html")
    assert "That id is taken" in answer.text
    assert "A node with the id &#39;svc-ledger-exporter&#39; exists already" in answer.text
    assert 'href="/browse/nodes/svc-ledger-exporter">Open svc-ledger-exporter</a>' in answer.text
    assert 'id="p-name" name="name" value="ledger-exporter"' in answer.text  # what this person sent, kept
    stored = fresh_instance.store.node(GOOD["_id"])
    assert stored is not None
    assert stored.properties["name"] == "pats-exporter"


async def test_a_key_another_node_holds_is_shown_next_to_the_key_field(
    http: httpx2.AsyncClient, fresh_instance: Instance
) -> None:
    answer = await http.post(NEW, data={"_csrf": await _csrf(http), **GOOD, "name": "checkout-api"})
    assert answer.status_code == 400
    assert _invalid(answer.text) == ["name"]
    assert "already has name &#39;checkout-api&#39;" in answer.text
    assert fresh_instance.store.node(GOOD["_id"]) is None


async def test_schema_problems_are_shown_next_to_their_fields_with_the_input_kept(
    http: httpx2.AsyncClient, fresh_instance: Instance
) -> None:
    sent = {**GOOD, "tier": "9", "lifecycle": "", "description": ""}  # out of range; two required left empty
    answer = await http.post(NEW, data={"_csrf": await _csrf(http), **sent})
    assert answer.status_code == 400
    assert _invalid(answer.text) == ["description", "lifecycle", "tier"]
    assert re.search(r'id="e-tier-1">9 is greater than the maximum of 3</p>', answer.text)
    assert 'id="e-lifecycle-1">required: give it a value</p>' in answer.text
    assert 'id="p-name" name="name" value="ledger-exporter"' in answer.text
    assert 'id="p-_id" name="_id" value="svc-ledger-exporter"' in answer.text
    assert re.search(r'<textarea id="p-tags"[^>]*>ledger\nbatch</textarea>', answer.text)
    assert fresh_instance.store.node(GOOD["_id"]) is None


@pytest.mark.parametrize("id", ["", "has space", "-leading-dash", "x" * 129, "<script>"])
async def test_an_id_the_tool_refuses_is_shown_next_to_the_id_field(http: httpx2.AsyncClient, id: str) -> None:
    answer = await http.post(NEW, data={"_csrf": await _csrf(http), **GOOD, "_id": id})
    assert answer.status_code == 400, answer.text[:500]
    assert _invalid(answer.text)[:1] == ["_id"]
    assert "<script>" not in answer.text


@pytest.mark.parametrize("csrf", [None, "", "forged"])
async def test_a_create_without_the_cookies_token_is_refused_before_any_tool_runs(
    http: httpx2.AsyncClient, fresh_instance: Instance, csrf: str | None
) -> None:
    await _csrf(http)
    audited: list[str] = []
    fresh_instance.snapshot.dispatcher.audit_hooks.append(lambda record: audited.append(record.target))
    answer = await http.post(NEW, data={**GOOD} | ({"_csrf": csrf} if csrf is not None else {}))
    assert answer.status_code == 403
    assert "upsert_node" not in audited
    assert fresh_instance.store.node(GOOD["_id"]) is None


async def test_a_reader_s_create_is_the_tool_s_refusal(fresh_instance: Instance) -> None:
    async with asgi(fresh_instance) as http:
        http.headers["Authorization"] = "Bearer " + token(fresh_instance, "looker", "reader")
        answer = await http.post(NEW, data={"_csrf": await _csrf(http), **GOOD})
        assert answer.status_code == 403
        assert "upsert_node" in answer.text
        assert fresh_instance.store.node(GOOD["_id"]) is None


async def test_a_new_form_for_no_type_is_a_404_page(http: httpx2.AsyncClient) -> None:
    answer = await http.get("/browse/types/NoSuchType/new")
    assert answer.status_code == 404
    assert answer.headers["content-type"].startswith("text/html")


# -- who may read the new node: its visibility and readers ---------------------------------------------------------
LEDGER = "Exports the ledger to the payments vault only."  # a value no other node holds, looked for by the crawl


def _access_errors(page: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for name, message in re.findall(r'<p class="error" id="e-(_visibility|_readers)-\d+">([^<]*)</p>', page):
        found.setdefault(name, []).append(message)
    return found


async def test_the_new_form_offers_visibility_first_at_the_type_s_default_and_readers_empty(
    http: httpx2.AsyncClient,
) -> None:
    form = (await http.get(NEW)).text
    assert "<legend>Who may read it</legend>" in form
    assert '<label for="p-_visibility">visibility</label>' in form
    assert re.search(r'<select id="p-_visibility" name="_visibility"[^>]*>\s*<option value="" selected>'
                     r'the type&#39;s default \(internal\)</option><option value="public">', form)  # fmt: skip
    assert '<label for="p-_readers">readers</label>' in form
    assert re.search(r'<textarea id="p-_readers" name="_readers"[^>]*></textarea>', form)


def test_a_type_s_default_readers_are_named_in_its_first_choice(fresh_instance: Instance) -> None:
    from dataclasses import replace

    from generators.pages.creating import Creating
    from generators.pages.views import Views

    model = fresh_instance.snapshot.registry.model
    service = replace(model.node_types["Service"], visibility="restricted", readers=("group:payments",))
    view = Creating(Views(model)).new_form(service, "t")
    assert view.context["access"].choices[0] == ("", "the type's default (restricted to group:payments)")


async def test_a_node_left_at_the_default_gets_the_type_s_default_as_from_the_tool(
    http: httpx2.AsyncClient, fresh_instance: Instance
) -> None:
    answer = await http.post(NEW, data={"_csrf": await _csrf(http), **GOOD, "_visibility": "", "_readers": ""})
    assert answer.status_code == 303, answer.text[:800]
    stored = fresh_instance.store.node(GOOD["_id"])
    assert stored is not None
    service = fresh_instance.snapshot.registry.model.node_types["Service"]
    assert (stored.visibility, stored.readers) == (service.visibility, service.readers) == ("internal", ())


async def test_a_node_created_restricted_to_a_group_is_not_seen_outside_it_on_the_pages_rest_or_the_crawl(
    fresh_instance: Instance,
) -> None:
    async with asgi(fresh_instance) as http:
        http.headers["Authorization"] = "Bearer " + token(fresh_instance, "paula", "writer", "payments")
        sent = {**GOOD, "description": LEDGER, "_visibility": "restricted", "_readers": "group:payments\n"}
        answer = await http.post(NEW, data={"_csrf": await _csrf(http), **sent})
        assert answer.status_code == 303, answer.text[:800]
        assert LEDGER in (await http.get(answer.headers["location"])).text  # its creator reads it: a reader
        node = (await http.get(f"/api/nodes/{GOOD['_id']}")).json()["node"]
        assert (node["visibility"], node["readers"]) == ("restricted", ["group:payments"])

        http.headers["Authorization"] = "Bearer " + token(fresh_instance, "otto", "reader", "platform")
        assert (await http.get(f"/api/nodes/{GOOD['_id']}")).status_code == 403
        listed = (await http.get("/api/nodes", params={"type": "Service", "limit": 100})).json()
        assert GOOD["_id"] not in str(listed)
        assert (await http.get(f"/browse/nodes/{GOOD['_id']}")).status_code == 403
        for page in ("/browse/types/Service?_size=100", "/browse/types/Service.csv?_size=100",
                     "/browse/search?q=ledger", "/browse/changes", "/browse/"):  # fmt: skip
            shown = await http.get(page)
            assert shown.status_code == 200, page
            assert GOOD["_id"] not in shown.text, page
            assert LEDGER not in shown.text, page

    # every page a caller reaches by links, for every caller: tests/core/test_access.py's
    # test_a_node_created_restricted_on_the_new_form_is_on_the_pages_of_its_readers_only


async def test_readers_alone_make_the_new_node_restricted_as_the_tool_does(
    http: httpx2.AsyncClient, fresh_instance: Instance
) -> None:
    answer = await http.post(NEW, data={"_csrf": await _csrf(http), **GOOD, "_readers": "user:editor, group:ops"})
    assert answer.status_code == 303, answer.text[:800]
    stored = fresh_instance.store.node(GOOD["_id"])
    assert stored is not None
    assert (stored.visibility, stored.readers) == ("restricted", ("user:editor", "group:ops"))


@pytest.mark.parametrize(("access", "field", "message"), [
    ({"_visibility": "secret"}, "_visibility", "is not one of"),
    ({"_visibility": "restricted", "_readers": "payments"}, "_readers", "does not match"),
    ({"_visibility": "public", "_readers": "group:payments"}, "_readers", "readers are only allowed on restricted"),
    ({"_readers": "group:ops\ngroup:ops"}, "_readers", "non-unique"),
])  # fmt: skip
async def test_visibility_and_readers_the_tool_refuses_are_shown_next_to_their_field_with_what_was_typed_kept(
    http: httpx2.AsyncClient, fresh_instance: Instance, access: dict[str, str], field: str, message: str
) -> None:
    answer = await http.post(NEW, data={"_csrf": await _csrf(http), **GOOD, **access})
    assert answer.status_code == 400, answer.text[:800]
    errors = _access_errors(answer.text)
    assert list(errors) == [field], answer.text[:3000]
    assert any(message in m for m in errors[field]), errors
    assert re.search(rf'<div class="field invalid">\s*<label for="p-{field}">', answer.text)
    if "_readers" in access:
        assert re.search(r'<textarea id="p-_readers"[^>]*>' + re.escape(access["_readers"]) + "</textarea>",
                         answer.text)  # fmt: skip
    if access.get("_visibility") in ("public", "restricted"):
        assert f'<option value="{access["_visibility"]}" selected>' in answer.text
    assert 'id="p-name" name="name" value="ledger-exporter"' in answer.text
    assert fresh_instance.store.node(GOOD["_id"]) is None


# -- an edge's properties ---------------------------------------------------------------------------------------------
def _ref() -> dict[str, str]:
    return dict(zip(("type", "source", "target"), EDGE, strict=True))


async def test_the_edit_page_links_the_properties_form_of_an_edge_that_has_properties(
    http: httpx2.AsyncClient,
) -> None:
    page = (await http.get(f"/browse/nodes/{EDGE[1]}/edit")).text
    assert 'aria-label="Edit properties of depends_on svc-payment-gateway">Edit properties</a>' in page
    assert "Edit properties of owned_by" not in page  # owns has no properties


async def test_an_edge_s_properties_are_written_through_upsert_edge_at_the_shown_revision(
    http: httpx2.AsyncClient, fresh_instance: Instance
) -> None:
    form = await http.get(EDGE_PAGE, params=_ref())
    assert form.status_code == 200, form.text[:500]
    assert '<option value="hard" selected>' in form.text
    edge = fresh_instance.store.edge(*EDGE)
    assert edge is not None
    assert hidden(form.text, "_revision") == str(edge.revision)
    answer = await http.post(EDGE_PAGE, data={"_csrf": hidden(form.text, "_csrf"), "_revision": str(edge.revision),
                                              "_type": EDGE[0], "_source": EDGE[1], "_target": EDGE[2],
                                              "criticality": "soft", "protocol": ""})  # fmt: skip
    assert answer.status_code == 303, answer.text[:800]
    edges = (
        await http.get(f"/api/nodes/{EDGE[1]}/neighbors", params={"direction": "out", "edge_types": "depends_on"})
    ).json()
    item = next(i for i in edges["items"] if i["node"]["id"] == EDGE[2])
    assert item["edge"]["properties"] == {"criticality": "soft"}


async def test_an_edge_changed_since_its_form_was_opened_is_a_conflict_that_writes_nothing(
    http: httpx2.AsyncClient, fresh_instance: Instance
) -> None:
    form = await http.get(EDGE_PAGE, params=_ref())
    revision = hidden(form.text, "_revision")
    pat = Principal("pat", frozenset({"writer"}))
    other = fresh_instance.snapshot.dispatcher.call_tool(pat, "test", "upsert_edge", {
        "type": EDGE[0], "source": EDGE[1], "target": EDGE[2], "properties": {"criticality": "hard",
                                                                              "protocol": "http"}})  # fmt: skip
    assert other.error is None
    answer = await http.post(EDGE_PAGE, data={"_csrf": hidden(form.text, "_csrf"), "_revision": revision,
                                              "_type": EDGE[0], "_source": EDGE[1], "_target": EDGE[2],
                                              "criticality": "soft"})  # fmt: skip
    assert answer.status_code == 409
    assert "Someone changed this edge while you were editing it" in answer.text
    edge = fresh_instance.store.edge(*EDGE)
    assert edge is not None
    assert dict(edge.properties) == {"criticality": "hard", "protocol": "http"}


async def test_an_edge_form_value_the_schema_refuses_is_shown_next_to_its_field(
    http: httpx2.AsyncClient, fresh_instance: Instance
) -> None:
    form = await http.get(EDGE_PAGE, params=_ref())
    answer = await http.post(EDGE_PAGE, data={"_csrf": hidden(form.text, "_csrf"),
                                              "_revision": hidden(form.text, "_revision"), "_type": EDGE[0],
                                              "_source": EDGE[1], "_target": EDGE[2],
                                              "criticality": "maybe"})  # fmt: skip
    assert answer.status_code == 400
    assert _invalid(answer.text) == ["criticality"]
    edge = fresh_instance.store.edge(*EDGE)
    assert edge is not None
    assert edge.properties["criticality"] == "hard"


@pytest.mark.parametrize("ref", [{"type": "depends_on", "source": "svc-x", "target": "svc-y"},
                                 {"type": "no_such", "source": EDGE[1], "target": EDGE[2]},
                                 {"type": "depends_on", "source": EDGE[1], "target": "svc-not-a-dependency"},
                                 {}])  # fmt: skip
async def test_an_edge_form_that_names_no_edge_of_this_node_is_refused(
    http: httpx2.AsyncClient, ref: dict[str, str]
) -> None:
    answer = await http.get(EDGE_PAGE, params=ref)
    assert answer.status_code in (400, 404), answer.text[:300]
    assert answer.headers["content-type"].startswith("text/html")


# -- a new edge with properties ---------------------------------------------------------------------------------------
PERSON = "person-new-hire"
TEAM = "team-payments"
ADD_MEMBER = f"/browse/nodes/{PERSON}/edge/new"


def _hire(instance: Instance) -> None:
    """A person in no team yet (`member_of` is many-to-one: a person is in at most one)."""
    pat = Principal("pat", frozenset({"writer"}))
    made = instance.snapshot.dispatcher.call_tool(pat, "test", "upsert_node", {
        "id": PERSON, "type": "Person", "properties": {"email": "new.hire@northwind.example", "name": "New Hire",
                                                       "handle": "newhire", "title": "Engineer",
                                                       "role": "engineer"}})  # fmt: skip
    assert made.error is None, made.error


async def _add_member(http: httpx2.AsyncClient, **fields: str) -> httpx2.Response:
    form = await http.get(ADD_MEMBER, params={"name": "member_of"})
    assert form.status_code == 200, form.text[:500]
    data = {"_csrf": hidden(form.text, "_csrf"), "_name": "member_of", "_other": TEAM, **fields}
    return await http.post(ADD_MEMBER, data=data)


async def test_the_edit_page_links_a_form_per_edge_name_whose_type_has_properties(
    http: httpx2.AsyncClient, fresh_instance: Instance
) -> None:
    _hire(fresh_instance)
    page = (await http.get(f"/browse/nodes/{PERSON}/edit")).text
    assert f'href="{ADD_MEMBER}?name=member_of">Add member_of (to Team)</a>' in page
    assert '<option value="member_of">' not in page  # the one-line form cannot give it a role
    assert '<option value="reports_to">' in page  # an edge type without properties is added there as before
    form = (await http.get(ADD_MEMBER, params={"name": "member_of"})).text
    assert "<h1>Add a member_of edge</h1>" in form
    assert '<label for="p-_other">Team id <span class="required">required</span></label>' in form
    assert '<label for="p-role">role <span class="required">required</span></label>' in form
    assert '<label for="p-since">since</label>' in form
    assert f'action="{ADD_MEMBER}"' in form


async def test_an_edge_with_a_required_property_is_added_through_upsert_edge_and_equals_rest_s_edge(
    http: httpx2.AsyncClient, fresh_instance: Instance
) -> None:
    _hire(fresh_instance)
    answer = await _add_member(http, role="lead", since="2026-12-01")
    assert answer.status_code == 303, answer.text[:800]
    assert answer.headers["location"] == f"/browse/nodes/{PERSON}/edit#edges-heading"
    edges = (await http.get(f"/api/nodes/{PERSON}/neighbors", params={"direction": "out",
                                                                    "edge_types": "member_of"})).json()  # fmt: skip
    [item] = edges["items"]
    assert item["node"]["id"] == TEAM
    assert item["edge"]["properties"] == {"role": "lead", "since": "2026-12-01"}
    assert item["edge"]["updated_by"] == "editor"
    stored = fresh_instance.store.edge("member_of", PERSON, TEAM)
    assert stored is not None
    assert (dict(stored.properties), stored.revision) == (item["edge"]["properties"], item["edge"]["revision"])
    page = (await http.get(f"/browse/nodes/{PERSON}/edit")).text
    assert f'aria-label="Edit properties of member_of {TEAM}">Edit properties</a>' in page


async def test_the_inverse_name_adds_the_edge_from_the_other_end(
    http: httpx2.AsyncClient, fresh_instance: Instance
) -> None:
    _hire(fresh_instance)
    path = f"/browse/nodes/{TEAM}/edge/new"
    form = await http.get(path, params={"name": "members"})
    assert '<label for="p-_other">Person id' in form.text
    answer = await http.post(path, data={"_csrf": hidden(form.text, "_csrf"), "_name": "members", "_other": PERSON,
                                         "role": "member"})  # fmt: skip
    assert answer.status_code == 303, answer.text[:800]
    stored = fresh_instance.store.edge("member_of", PERSON, TEAM)
    assert stored is not None
    assert dict(stored.properties) == {"role": "member"}


async def test_a_missing_required_property_is_named_next_to_its_field_and_nothing_is_written(
    http: httpx2.AsyncClient, fresh_instance: Instance
) -> None:
    _hire(fresh_instance)
    answer = await _add_member(http, role="", since="2026-12-01")
    assert answer.status_code == 400, answer.text[:800]
    assert _invalid(answer.text) == ["role"]
    assert 'id="e-role-1">required: give it a value</p>' in answer.text
    assert 'id="p-since" name="since" value="2026-12-01"' in answer.text  # what was sent, kept
    assert f'id="p-_other" name="_other" value="{TEAM}"' in answer.text
    assert fresh_instance.store.edge("member_of", PERSON, TEAM) is None


async def test_a_value_the_schema_refuses_and_an_unknown_other_node_are_shown_next_to_their_fields(
    http: httpx2.AsyncClient, fresh_instance: Instance
) -> None:
    _hire(fresh_instance)
    answer = await _add_member(http, role="boss")
    assert answer.status_code == 400
    assert _invalid(answer.text) == ["role"]
    assert "&#39;boss&#39; is not one of" in answer.text
    answer = await _add_member(http, role="lead", _other="team-nowhere")
    assert answer.status_code == 400
    assert re.search(r'<div class="field invalid">\s*<label for="p-_other">', answer.text)
    assert 'id="e-_other-1">No node with id &#39;team-nowhere&#39;.</p>' in answer.text
    assert 'value="team-nowhere"' in answer.text
    assert fresh_instance.store.edge("member_of", PERSON, TEAM) is None


async def test_adding_an_edge_that_exists_now_is_a_conflict_that_writes_nothing(
    http: httpx2.AsyncClient, fresh_instance: Instance
) -> None:
    _hire(fresh_instance)
    form = await http.get(ADD_MEMBER, params={"name": "member_of"})
    pat = Principal("pat", frozenset({"writer"}))
    first = fresh_instance.snapshot.dispatcher.call_tool(pat, "test", "upsert_edge", {
        "type": "member_of", "source": PERSON, "target": TEAM, "properties": {"role": "manager"}})  # fmt: skip
    assert first.error is None
    answer = await http.post(ADD_MEMBER, data={"_csrf": hidden(form.text, "_csrf"), "_name": "member_of",
                                               "_other": TEAM, "role": "lead"})  # fmt: skip
    assert answer.status_code == 409, answer.text[:800]
    assert "That edge exists already" in answer.text
    assert (f'href="/browse/nodes/{PERSON}/edge?type=member_of&amp;source={PERSON}&amp;target={TEAM}">'
            f"Edit the properties of member_of {TEAM}</a>") in answer.text  # fmt: skip
    assert '<option value="lead" selected>' in answer.text  # what this person sent, kept
    stored = fresh_instance.store.edge("member_of", PERSON, TEAM)
    assert stored is not None
    assert dict(stored.properties) == {"role": "manager"}


@pytest.mark.parametrize("csrf", [None, "", "forged"])
async def test_a_new_edge_without_the_cookies_token_is_refused_before_any_tool_runs(
    http: httpx2.AsyncClient, fresh_instance: Instance, csrf: str | None
) -> None:
    _hire(fresh_instance)
    await http.get(ADD_MEMBER, params={"name": "member_of"})
    audited: list[str] = []
    fresh_instance.snapshot.dispatcher.audit_hooks.append(lambda record: audited.append(record.target))
    sent = {"_name": "member_of", "_other": TEAM, "role": "lead"} | ({"_csrf": csrf} if csrf is not None else {})
    answer = await http.post(ADD_MEMBER, data=sent)
    assert answer.status_code == 403
    assert "upsert_edge" not in audited
    assert fresh_instance.store.edge("member_of", PERSON, TEAM) is None


@pytest.mark.parametrize("name", ["", "no_such", "reports_to_x", "owns"])
async def test_a_new_edge_form_for_no_edge_name_of_this_node_is_a_400_page(
    http: httpx2.AsyncClient, fresh_instance: Instance, name: str
) -> None:
    _hire(fresh_instance)
    answer = await http.get(ADD_MEMBER, params={"name": name})
    assert answer.status_code == 400, answer.text[:300]
    assert answer.headers["content-type"].startswith("text/html")
    assert "member_of" in answer.text  # the page names the edges this node has
