"""The pages for people (`/browse/`), in a real headless Chromium against a real `canon serve`.

A person finds the tier-1 services of the Payments team with the tier facet and the tags filter, opens one and
follows its `owned_by` edge to the team with a click; what the table lists is checked against REST's answer to
the same `find_nodes` call, and each page is checked with axe-core (from npm, tests/browser/package.json, run in the
same Chromium) for accessibility violations. The pages carry no script, so axe is injected by the test, in a
context that lets a test script past the pages' Content-Security-Policy.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import WAIT_MS, Site, Watched, public_node_id
from tests.conftest import copy_store
from tests.mcp.conftest import create_token, serving

AXE = Path(__file__).resolve().parent / "node_modules" / "axe-core" / "axe.min.js"
AXE_RULES = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]


def assert_clean(watched: Watched) -> None:
    problems = watched.problems()
    assert not problems, "\n".join(problems)


def test_a_person_finds_the_tier_1_payments_services_by_facets_and_follows_an_edge(
    site: Site, page: Watched, tmp_path: Path
) -> None:
    browser_page = page.page
    answer = browser_page.goto(f"{site.base}/browse/")
    assert answer is not None
    assert answer.status == 200
    browser_page.get_by_role("link", name="Service", exact=True).click()
    expect(browser_page.get_by_role("heading", level=1)).to_have_text("Service")

    tier = browser_page.locator("section.facet", has=browser_page.get_by_role("heading", name="tier", exact=True))
    tier.get_by_role("link", name=re.compile(r"^1 \d+$")).click()
    expect(browser_page).to_have_url(re.compile(r"/browse/types/Service\?tier=1$"))
    browser_page.get_by_label("tags contains").fill("payments")
    browser_page.get_by_role("button", name="Apply").click()
    expect(browser_page).to_have_url(re.compile(r"tier=1.*tags__contains=payments"))
    browser_page.screenshot(path=tmp_path / "tier-1-payments.png", full_page=True)

    where = json.dumps({"tier": 1, "tags": {"contains": "payments"}})
    rest = browser_page.request.get(f"{site.base}/api/nodes", params={"type": "Service", "where": where, "limit": "50"})
    assert rest.ok, rest.text()
    expected: list[dict[str, Any]] = rest.json()["items"]
    assert expected, "the sample data has tier-1 payments services"
    rows = browser_page.locator("section.results tbody th[scope=row]")
    expect(rows).to_have_count(len(expected))
    assert rows.all_inner_texts() == [n["id"] for n in expected]
    heading = browser_page.get_by_role("heading", name=re.compile(r"^\d+ nodes? matching$"))
    expect(heading).to_have_text(f"{len(expected)} node{'s' if len(expected) != 1 else ''} matching")

    first = expected[0]
    rows.first.get_by_role("link").click()
    expect(browser_page.get_by_role("heading", level=1)).to_have_text(first["properties"]["name"])
    owned_by = browser_page.locator(
        "section.edges", has=browser_page.get_by_role("heading", name=re.compile("^owned_by"))
    )
    owner = owned_by.get_by_role("link")
    expect(owner).to_have_count(1)
    owner_name = owner.inner_text()
    owner.click()
    expect(browser_page.get_by_role("heading", level=1)).to_have_text(owner_name)
    expect(browser_page).to_have_url(re.compile(r"/browse/nodes/team-payments$"))
    owns = browser_page.locator("section.edges", has=browser_page.get_by_role("heading", name=re.compile("^owns")))
    expect(owns.get_by_role("link", name=first["properties"]["name"], exact=True)).to_have_count(1)
    browser_page.screenshot(path=tmp_path / "team-payments.png", full_page=True)
    assert_clean(page)


def test_a_person_sorts_the_type_table_by_a_column_heading_both_ways(site: Site, page: Watched) -> None:
    browser_page = page.page
    browser_page.goto(f"{site.base}/browse/types/Service?lifecycle=production")
    headings = browser_page.locator("section.results thead th")
    tier = browser_page.locator(
        "section.results thead th", has=browser_page.get_by_role("link", name=re.compile("^tier"))
    )
    expect(headings.first).to_have_attribute("aria-sort", "ascending")  # by id, until a heading is chosen
    tier.get_by_role("link").click()
    expect(browser_page).to_have_url(re.compile(r"lifecycle=production&_sort=tier$"))
    expect(tier).to_have_attribute("aria-sort", "ascending")
    for order in ("tier", "-tier"):
        query: dict[str, str | float | bool] = {
            "type": "Service",
            "where": json.dumps({"lifecycle": "production"}),
            "order_by": order,
            "limit": "50",
        }
        rest = browser_page.request.get(f"{site.base}/api/nodes", params=query)
        assert rest.ok, rest.text()
        expected = [n["id"] for n in rest.json()["items"]]
        rows = browser_page.locator("section.results tbody th[scope=row]")
        expect(rows).to_have_count(len(expected))
        assert rows.all_inner_texts() == expected
        if order == "tier":
            tier.get_by_role("link").click()  # again: descending
            expect(tier).to_have_attribute("aria-sort", "descending")
    assert expected != sorted(expected)
    assert_clean(page)


# -- accessibility -------------------------------------------------------------------------------------------------
@pytest.fixture
def axe_page(browser: Browser, site: Site) -> Iterator[Page]:
    """A page where the test may inject axe-core despite the pages' CSP (`bypass_csp`), phone-sized."""
    context = browser.new_context(viewport={"width": 390, "height": 844}, bypass_csp=True)
    context.set_default_timeout(WAIT_MS)
    yield context.new_page()
    context.close()


def axe_findings(page: Page) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """axe-core's violations, and what it could not decide (`incomplete`), each rule with up to five targets."""
    page.add_script_tag(path=str(AXE))
    found: dict[str, list[dict[str, Any]]] = page.evaluate(
        "async (tags) => { const r = await axe.run(document, {runOnly: {type: 'tag', values: tags}});"
        " return {violations: r.violations, incomplete: r.incomplete}; }",
        AXE_RULES,
    )

    def brief(rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{"id": v["id"], "nodes": [n["target"] for n in v["nodes"]][:5]} for v in rules]

    return brief(found["violations"]), brief(found["incomplete"])


PAGES = ["/browse/", "/browse/types/Service?tier=1", "/browse/nodes/team-payments", "/browse/nodes/svc-checkout-api",
         "/browse/model", "/browse/search?q=payments", "/browse/changes", "/browse/nodes/no-such-node",
         "/browse/types/Service?tier=1&_sort=-name", "/browse/types/Decision?date__gte=2023-01-01&date__lte=2024-06-30",
         "/browse/types/Service/new"]  # fmt: skip


@pytest.mark.parametrize("path", PAGES)
def test_axe_core_finds_no_accessibility_violation_on_the_page(site: Site, axe_page: Page, path: str) -> None:
    assert AXE.is_file(), "axe-core is not installed: run npm ci in tests/browser (scripts/test does)"
    answer = axe_page.goto(site.base + path)
    assert answer is not None
    assert answer.status in (200, 404)
    violations, undecided = axe_findings(axe_page)
    assert violations == []
    # what axe could not decide, but for the facet's ✕ (aria-hidden; the link's text says "remove"): before the
    # stylesheet wrapped long cells, tables overflowing a phone's width left 1-99 contrast checks undecided here
    assert [u for u in undecided if u["nodes"] != [[".remove"]]] == []


# -- editing -------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Writers:
    base: str
    editor: str  # the person at the browser
    other: str  # someone else, writing over REST meanwhile
    payer: str  # a writer in group payments
    outsider: str  # a reader in group platform only


def _browser_of(browser: Browser, token: str) -> Page:
    """A new page in a context of its own, desktop-sized, sending `token` (and letting the test inject axe)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True,
                                  extra_http_headers={"Authorization": f"Bearer {token}"})  # fmt: skip
    context.set_default_timeout(WAIT_MS)
    return context.new_page()


@pytest.fixture(scope="module")
def writers(seed_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Writers]:
    """`canon serve` on a store of its own, with two writers' tokens (the pages' browser session is a token here:
    signing in from a browser is another piece of work)."""
    folder = tmp_path_factory.mktemp("writers")
    store = copy_store(seed_template, folder / "canon.db")
    assert public_node_id(store)
    editor, other = create_token(folder, "editor", "writer"), create_token(folder, "other", "writer")
    payer, outsider = create_token(folder, "payer", "writer", "payments"), create_token(folder, "otto", "reader",
                                                                                          "platform")  # fmt: skip
    with serving(store, cwd=folder) as process:
        yield Writers(process.base, editor, other, payer, outsider)
        assert process.popen.poll() is None, f"canon serve exited:\n{process.output()}"


def test_a_person_edits_a_property_then_meets_someone_elses_change_as_a_conflict(
    browser: Browser, writers: Writers, tmp_path: Path
) -> None:
    page = _browser_of(browser, writers.editor)
    context = page.context
    node = f"{writers.base}/browse/nodes/svc-checkout-api"
    page.goto(node)
    page.get_by_role("link", name="Edit", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Edit checkout-api")
    assert axe_findings(page)[0] == []
    page.get_by_label("tier").fill("2")
    page.get_by_role("button", name="Save").click()
    expect(page).to_have_url(node)
    tier_row = page.locator("table.properties tr", has=page.get_by_role("rowheader", name="tier", exact=True))
    expect(tier_row.locator("td")).to_have_text("2")

    page.get_by_role("link", name="Edit", exact=True).click()  # open the form ...
    page.get_by_label("description").fill("Edited in the browser.")
    other = context.request.patch(
        f"{writers.base}/api/nodes/svc-checkout-api",
        data={"properties": {"tier": 3}},
        headers={"Authorization": f"Bearer {writers.other}"},
    )  # ... someone else writes
    assert other.ok, other.text()
    page.get_by_role("button", name="Save").click()  # ... and this person saves

    conflict = page.get_by_role("alert")
    expect(conflict.get_by_role("heading")).to_have_text("Someone changed this node while you were editing it")
    expect(conflict).to_contain_text("changed by other")
    expect(conflict).to_contain_text("Nothing you sent was written.")
    changed = conflict.locator("tr", has=page.get_by_role("rowheader", name="tier", exact=True))
    expect(changed.locator("td.theirs")).to_have_text("3")
    expect(page.get_by_label("description")).to_have_value("Edited in the browser.")  # what this person sent, kept
    page.screenshot(path=tmp_path / "conflict.png", full_page=True)
    assert axe_findings(page)[0] == []
    stored = context.request.get(f"{writers.base}/api/nodes/svc-checkout-api").json()["node"]["properties"]
    assert stored["tier"] == 3
    assert stored["description"] != "Edited in the browser."
    context.close()


def _fill_service(page: Page, id: str, name: str, description: str, tier: str) -> None:
    """Fill a New Service form's id and required properties."""
    page.locator("#p-_id").fill(id)
    page.locator("#p-name").fill(name)
    page.locator("#p-description").fill(description)
    page.locator("#p-lifecycle").select_option("production")
    page.locator("#p-tier").fill(tier)


def test_a_person_creates_a_node_and_a_second_person_creating_the_same_id_meets_a_conflict(
    browser: Browser, writers: Writers, tmp_path: Path
) -> None:
    pages = [_browser_of(browser, who) for who in (writers.editor, writers.other)]
    for page in pages:  # both open the form before either saves
        page.goto(f"{writers.base}/browse/types/Service")
        page.get_by_role("link", name="New Service", exact=True).click()
        expect(page.get_by_role("heading", level=1)).to_have_text("New Service")
    first, second = pages
    assert axe_findings(first)[0] == []
    for page, name in ((first, "ledger-exporter"), (second, "ledger-export-two")):
        _fill_service(page, "svc-ledger-exporter", name, "Exports the ledger nightly.", "9")  # 9: out of range
    first.get_by_role("button", name="Create").click()
    expect(first.locator("#e-tier-1")).to_contain_text("maximum of 3")
    expect(first.locator("#p-name")).to_have_value("ledger-exporter")  # what was sent, kept
    assert axe_findings(first)[0] == []
    first.locator("#p-tier").fill("2")
    first.get_by_role("button", name="Create").click()
    expect(first).to_have_url(f"{writers.base}/browse/nodes/svc-ledger-exporter")
    expect(first.get_by_role("heading", level=1)).to_have_text("ledger-exporter")

    second.locator("#p-tier").fill("2")
    second.get_by_role("button", name="Create").click()
    alert = second.get_by_role("alert")
    expect(alert.get_by_role("heading")).to_have_text("That id is taken")
    expect(alert.get_by_role("link", name="Open svc-ledger-exporter")).to_have_count(1)
    expect(second.locator("#p-name")).to_have_value("ledger-export-two")
    second.screenshot(path=tmp_path / "create-conflict.png", full_page=True)
    assert axe_findings(second)[0] == []
    stored = second.request.get(f"{writers.base}/api/nodes/svc-ledger-exporter").json()["node"]
    assert (stored["properties"]["name"], stored["updated_by"]) == ("ledger-exporter", "editor")  # not overwritten
    for page in pages:
        page.context.close()


def test_a_person_edits_an_edge_s_properties(browser: Browser, writers: Writers) -> None:
    page = _browser_of(browser, writers.editor)
    context = page.context
    page.goto(f"{writers.base}/browse/nodes/svc-checkout-api/edit")
    page.get_by_role("link", name="Edit properties of depends_on svc-payment-gateway").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Edit the depends_on edge")
    assert axe_findings(page)[0] == []
    page.locator("#p-criticality").select_option("soft")
    page.get_by_role("button", name="Save").click()
    expect(page).to_have_url(re.compile(r"/browse/nodes/svc-checkout-api/edit#edges-heading$"))
    answer = context.request.get(f"{writers.base}/api/nodes/svc-checkout-api/neighbors",
                                 params={"direction": "out", "edge_types": "depends_on"})  # fmt: skip
    edge = next(i["edge"] for i in answer.json()["items"] if i["node"]["id"] == "svc-payment-gateway")
    assert edge["properties"]["criticality"] == "soft"
    context.close()


def test_a_person_adds_an_edge_with_a_required_property(browser: Browser, writers: Writers) -> None:
    page = _browser_of(browser, writers.editor)
    context = page.context
    hired = context.request.put(f"{writers.base}/api/nodes/person-browser-hire", data={
        "type": "Person", "properties": {"email": "hire@northwind.example", "name": "Browser Hire",
                                         "handle": "bhire", "title": "Engineer", "role": "engineer"}})  # fmt: skip
    assert hired.ok, hired.text()
    page.goto(f"{writers.base}/browse/nodes/person-browser-hire/edit")
    page.get_by_role("link", name="Add member_of (to Team)").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Add a member_of edge")
    assert axe_findings(page)[0] == []
    page.get_by_label("Team id").fill("team-payments")
    page.get_by_role("button", name="Add edge").click()  # no role: the schema's required property, named
    expect(page.locator("#e-role-1")).to_have_text("required: give it a value")
    expect(page.get_by_label("Team id")).to_have_value("team-payments")  # what was sent, kept
    assert axe_findings(page)[0] == []
    page.locator("#p-role").select_option("lead")
    page.get_by_role("button", name="Add edge").click()
    expect(page).to_have_url(re.compile(r"/browse/nodes/person-browser-hire/edit#edges-heading$"))
    expect(page.get_by_role("link", name="Edit properties of member_of team-payments")).to_have_count(1)
    answer = context.request.get(f"{writers.base}/api/nodes/person-browser-hire/neighbors",
                                 params={"direction": "out", "edge_types": "member_of"})  # fmt: skip
    [item] = answer.json()["items"]
    assert (item["node"]["id"], item["edge"]["properties"]) == ("team-payments", {"role": "lead"})
    context.close()


def test_a_person_creates_a_node_only_a_group_may_read_and_someone_outside_it_cannot(
    browser: Browser, writers: Writers, tmp_path: Path
) -> None:
    page = _browser_of(browser, writers.payer)
    page.goto(f"{writers.base}/browse/types/Service/new")
    expect(page.get_by_label("visibility")).to_have_value("")  # the type's default, until chosen
    _fill_service(page, "svc-payments-ledger", "payments-ledger", "The ledger only the payments team reads.", "1")
    page.get_by_label("visibility").select_option("restricted")
    page.get_by_label("readers").fill("payments")  # not a reader: the tool's problem, next to the field
    page.get_by_role("button", name="Create").click()
    expect(page.locator("#e-_readers-1")).to_contain_text("does not match")
    expect(page.get_by_label("visibility")).to_have_value("restricted")  # what was chosen, kept
    assert axe_findings(page)[0] == []
    page.get_by_label("readers").fill("group:payments")
    page.get_by_role("button", name="Create").click()
    expect(page).to_have_url(f"{writers.base}/browse/nodes/svc-payments-ledger")
    expect(page.locator("dl")).to_contain_text("restricted (group:payments)")
    page.screenshot(path=tmp_path / "restricted-node.png", full_page=True)
    assert axe_findings(page)[0] == []

    outsider = _browser_of(browser, writers.outsider)
    refused = outsider.goto(f"{writers.base}/browse/nodes/svc-payments-ledger")
    assert refused is not None
    assert refused.status == 403
    expect(outsider.get_by_role("heading", level=1)).to_contain_text("403")
    outsider.goto(f"{writers.base}/browse/types/Service?tier=1&_size=100")
    expect(outsider.locator("section.results tbody")).not_to_contain_text("svc-payments-ledger")
    rest = outsider.request.get(f"{writers.base}/api/nodes/svc-payments-ledger")
    assert rest.status == 403
    stored = page.request.get(f"{writers.base}/api/nodes/svc-payments-ledger").json()["node"]
    assert (stored["visibility"], stored["readers"], stored["updated_by"]) == ("restricted", ["group:payments"],
                                                                               "payer")  # fmt: skip
    for opened in (page, outsider):
        opened.context.close()


def test_a_person_creates_a_restricted_node_with_the_keyboard_alone(browser: Browser, writers: Writers) -> None:
    """No mouse: the skip link is the first stop, every field of the New form (who may read it included) is
    reached by Tab in order, choices are made by typing, and Enter on Create writes the node."""
    page = _browser_of(browser, writers.payer)
    page.goto(f"{writers.base}/browse/types/Service/new")
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/browse/types/Service/new#main$"))
    typed = {"p-_id": "svc-keyboard-made", "p-name": "keyboard-made", "p-description": "Made without a mouse.",
             "p-lifecycle": "production", "p-tier": "1", "p-_visibility": "restricted",
             "p-_readers": "group:payments"}  # fmt: skip
    visited: list[str] = []
    for _ in range(80):
        page.keyboard.press("Tab")
        focused = page.evaluate("[document.activeElement.id, document.activeElement.tagName, "
                                "document.activeElement.textContent.trim()]")  # fmt: skip
        if focused[1] == "BUTTON" and focused[2] == "Create":
            break
        if focused[0]:
            visited.append(focused[0])
        if focused[0] in typed:
            page.keyboard.type(typed[focused[0]])  # a select takes the typed option's text
    else:
        raise AssertionError(f"Create was not reached by Tab: {visited}")
    in_the_page = page.evaluate("[...document.querySelectorAll('form.edit [id^=p-]')].map(e => e.id)")
    assert [v for v in visited if v in typed] == [i for i in in_the_page if i in typed]  # each once, in order
    assert set(visited) >= set(in_the_page)  # every field of the form is reached
    for id, value in typed.items():
        expect(page.locator(f"#{id}")).to_have_value(value)
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{writers.base}/browse/nodes/svc-keyboard-made")
    stored = page.request.get(f"{writers.base}/api/nodes/svc-keyboard-made").json()["node"]
    assert (stored["visibility"], stored["readers"]) == ("restricted", ["group:payments"])
    page.context.close()
