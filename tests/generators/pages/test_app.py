"""The pages surface in-process: each page shows what the tools answer its caller, as REST answers that caller.

A type page's rows, its facet counts and its CSV and JSON downloads, a node page's edges and its edges download,
and the search page's hits are compared with the REST surface's answers to the same tool calls, for an anonymous
caller, a reader in the payments group (who sees a restricted service) and an admin; a node the caller may not
read is the same 404 page as a missing one; links start with the server's base under `root_path` and
`public_url`; and every read is audited under the surface name `pages`.
"""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from core.ops.config import Config
from core.seam.instance import Instance, open_instance
from core.values.audit import AuditQuery
from core.values.principal import Principal
from generators.pages.values import shown
from tests.conftest import copy_store
from tests.generators.conftest import asgi, token
from tests.generators.pages.conftest import node_ids, parse
from tests.test_cross_surface import rest_request

pytestmark = pytest.mark.anyio

RESTRICTED = "svc-card-vault"  # readable by group:payments and group:security
WHO = ("anonymous", "payments-reader", "admin")


_SECRETS: dict[tuple[int, str], str] = {}  # (the token file's path, hashed; who) -> its bearer token


def _headers(instance: Instance, who: str) -> dict[str, str]:
    if who == "anonymous":
        return {}
    key = (hash(str(instance.config.tokens)), who)
    if key not in _SECRETS:
        _SECRETS[key] = token(instance, f"pages-{who}", "admin" if who == "admin" else "reader",
                              *(("payments",) if who == "payments-reader" else ()))  # fmt: skip
    return {"Authorization": f"Bearer {_SECRETS[key]}"}


class Both:
    """The pages and REST of one in-process app, as one caller."""

    def __init__(self, http: httpx2.AsyncClient, headers: dict[str, str], openapi: dict[str, Any]) -> None:
        self.http = http
        self.headers = headers
        self.openapi = openapi

    async def page(self, path: str, status: int = 200) -> httpx2.Response:
        answer = await self.http.get(path, headers=self.headers)
        assert answer.status_code == status, answer.text[:2000]
        return answer

    async def rest(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        method, url, params, body = rest_request(self.openapi, tool, arguments)
        answer = await self.http.request(method, url, params=params, json=body, headers=self.headers)
        assert answer.status_code == 200, answer.text
        found: dict[str, Any] = answer.json()
        return found


@pytest.fixture
async def both(gen_instance: Instance, request: pytest.FixtureRequest) -> AsyncIterator[Both]:
    who: str = request.param
    async with asgi(gen_instance) as http:
        openapi = (await http.get("/openapi.json")).json()
        yield Both(http, _headers(gen_instance, who), openapi)


def _without_revision(answer: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in answer.items() if k != "revision"}


# -- equality with REST --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("both", WHO, indirect=True)
@pytest.mark.parametrize("query", ["", "tier=1", "tier=1&handles_pii=true", "lifecycle=production&_text=pay",
                                   "slo_availability__gte=99.9", "tags__contains=payments", "tier__gte=2&tier__lte=3",
                                   "tier=1&slo_availability__gte=99.9&slo_availability__lt=99.99"])  # fmt: skip
async def test_a_type_page_and_its_downloads_show_the_nodes_rest_finds_for_the_same_caller(
    both: Both, query: str
) -> None:
    where: dict[str, Any] = {}
    arguments: dict[str, Any] = {"type": "Service", "limit": 50}
    for pair in filter(None, query.split("&")):
        key, _, raw = pair.partition("=")
        if key == "_text":
            arguments["text"] = raw
            continue
        name, _, op = key.partition("__")
        value: Any = {"true": True}.get(raw, int(raw) if raw.isdigit() else raw)
        value = float(value) if name == "slo_availability" else value
        if op:
            where.setdefault(name, {})[op] = value  # several operators on one property: all hold (a range)
        else:
            where[name] = value
    if where:
        arguments["where"] = where
    expected = await both.rest("find_nodes", arguments)
    assert expected["total"] > 0 or query == "lifecycle=production&_text=pay"

    page = parse((await both.page(f"/browse/types/Service?{query}")).text)
    assert page.row_headers == [n["id"] for n in expected["items"]]
    assert f"{expected['total']} node" in "".join(page.text)

    as_json = (await both.page(f"/browse/types/Service.json?{query}")).json()
    assert _without_revision(as_json) == _without_revision(expected)
    answer = await both.page(f"/browse/types/Service.csv?{query}")
    assert answer.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(answer.text)))
    assert [r["id"] for r in rows] == [n["id"] for n in expected["items"]]
    assert [r["name"] for r in rows] == [n["properties"]["name"] for n in expected["items"]]


@pytest.mark.parametrize("both", WHO, indirect=True)
async def test_each_facet_count_is_what_find_nodes_counts_for_the_caller(both: Both) -> None:
    page = parse((await both.page("/browse/types/Service?handles_pii=true")).text)
    counted = {(h.split("?", 1)[1], t) for h, t in page.links if h.startswith("/browse/types/Service?")}
    checked = 0
    for language in ("go", "java", "kotlin", "python"):
        expected = await both.rest("find_nodes", {"type": "Service", "limit": 1,
                                                  "where": {"handles_pii": True, "language": language}})  # fmt: skip
        shown_text = next((t for q, t in counted if q == f"handles_pii=true&language={language}"), None)
        if expected["total"]:
            assert shown_text is not None, counted
            assert shown_text.split()[-1] == str(expected["total"])
            checked += 1
        else:
            assert shown_text is None  # a value no node has is not offered
    assert checked > 0


@pytest.mark.parametrize("both", WHO, indirect=True)
async def test_a_node_page_shows_the_neighbours_rest_walks_for_the_same_caller(both: Both) -> None:
    expected: list[dict[str, Any]] = []
    for direction in ("out", "in"):
        answer = await both.rest("get_neighbors", {"id": "team-payments", "direction": direction, "limit": 200})
        expected += answer["items"]
    page = parse((await both.page("/browse/nodes/team-payments")).text)
    shown_ids = [i for i in node_ids(page) if i != "team-payments"]
    assert sorted(shown_ids) == sorted(item["node"]["id"] for item in expected)
    download = (await both.page("/browse/nodes/team-payments/edges.json")).json()["items"]
    assert sorted((i["edge"]["type"], i["edge"]["source"], i["edge"]["target"]) for i in download) == sorted(
        (i["edge"]["type"], i["edge"]["source"], i["edge"]["target"]) for i in expected
    )


@pytest.mark.parametrize("both", WHO, indirect=True)
async def test_the_search_page_shows_the_hits_and_type_facets_rest_gives_the_caller(both: Both) -> None:
    expected = await both.rest("search", {"query": "payments", "limit": 20, "facets": True})
    page = parse((await both.page("/browse/search?q=payments")).text)
    hits = list(node_ids(page))
    assert hits == [h["id"] for h in expected["items"]]
    for name, count in expected["facets"].items():
        assert (f"/browse/search?q=payments&type={name}", f"{name} {count}") in page.links
    as_json = (await both.page("/browse/search.json?q=payments")).json()
    assert [h["id"] for h in as_json["items"]] == [h["id"] for h in expected["items"]]


@pytest.mark.parametrize("both", WHO, indirect=True)
async def test_the_search_and_change_log_downloads_keep_the_page_s_filters_as_rest_answers_them(both: Both) -> None:
    """Every list downloads with the same filters (issue 28): the search restricted to a type, as JSON and CSV,
    and the change log since a revision, as JSON and CSV, hold what REST's calls with those arguments answer."""
    expected = await both.rest("search", {"query": "payments", "types": ["Service"], "limit": 20, "facets": True})
    as_json = (await both.page("/browse/search.json?q=payments&type=Service")).json()

    def hits(answer: dict[str, Any]) -> list[tuple[Any, ...]]:  # (the page asks for no node fields: `fields: []`)
        return [(h["id"], h["type"], h["name"], h["score"], h["match"]) for h in answer["items"]]

    assert hits(as_json) == hits(expected)
    assert (as_json["total"], as_json["facets"], as_json["next_cursor"]) == (expected["total"], expected["facets"],
                                                                            expected["next_cursor"])  # fmt: skip
    rows = list(csv.DictReader(io.StringIO((await both.page("/browse/search.csv?q=payments&type=Service")).text)))
    assert [(r["id"], r["type"]) for r in rows] == [(h["id"], h["type"]) for h in expected["items"]]
    latest = (await both.rest("get_changes", {"since": 0, "limit": 1}))["revision"]
    since = max(0, latest - 30)
    changes = await both.rest("get_changes", {"since": since, "limit": 100})
    as_json = (await both.page(f"/browse/changes.json?since={since}")).json()
    assert _without_revision(as_json) == _without_revision(changes)
    rows = list(csv.DictReader(io.StringIO((await both.page(f"/browse/changes.csv?since={since}")).text)))
    assert [(int(r["revision"]), r["key"]) for r in rows] == [(c["revision"], c["key"]) for c in changes["items"]]


@pytest.mark.parametrize("both", ["payments-reader"], indirect=True)
async def test_a_type_page_offers_the_ranked_search_restricted_to_its_type(both: Both) -> None:
    page = parse((await both.page("/browse/types/Service")).text)
    forms = [a for t, a in page.tags if t == "form" and a.get("action") == "/browse/search"]
    hidden = [a for t, a in page.tags if t == "input" and a.get("name") == "type"]
    assert len(forms) == 2  # the site's search, and this type's
    assert [h["value"] for h in hidden] == ["Service"]
    expected = await both.rest("search", {"query": "payments", "types": ["Service"], "limit": 20})
    hits = node_ids(parse((await both.page("/browse/search?q=payments&type=Service")).text))
    assert hits == [h["id"] for h in expected["items"]]
    assert {h["type"] for h in expected["items"]} == {"Service"}


@pytest.mark.parametrize("both", WHO, indirect=True)
async def test_the_home_page_counts_the_types_as_describe_model_does_for_the_caller(both: Both) -> None:
    expected = await both.rest("describe_model", {})
    page = parse((await both.page("/browse/")).text)
    text = " ".join(" ".join(page.text).split())
    for node_type in expected["node_types"]:
        assert (f"/browse/types/{node_type['name']}", node_type["name"]) in page.links
        assert f"{node_type['name']} {node_type['count']} " in text


# -- who sees what -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("both", "sees"), [("anonymous", False), ("payments-reader", True), ("admin", True)],
                         indirect=["both"])  # fmt: skip
async def test_a_restricted_node_shows_only_to_those_who_may_read_it_with_the_status_rest_gives(
    both: Both, sees: bool
) -> None:
    hidden = await both.http.get(f"/browse/nodes/{RESTRICTED}", headers=both.headers)
    rest = await both.http.get(f"/api/nodes/{RESTRICTED}", headers=both.headers)
    missing = await both.http.get("/browse/nodes/svc-no-such-service", headers=both.headers)
    assert missing.status_code == 404
    assert missing.headers["content-type"].startswith("text/html")
    assert hidden.status_code == rest.status_code == (200 if sees else 403)
    assert ("card-vault" in hidden.text.replace(RESTRICTED, "")) is sees  # its name, beyond the id asked for
    listed = (await both.page("/browse/types/Service.json?_size=100")).json()
    assert (RESTRICTED in [n["id"] for n in listed["items"]]) is sees


async def test_a_type_page_without_filters_is_one_find_nodes_call_counting_every_facet(
    fresh_instance: Instance,
) -> None:
    headers = _headers(fresh_instance, "admin")
    async with asgi(fresh_instance) as http:
        assert (await http.get("/browse/types/Service", headers=headers)).status_code == 200
    audit = fresh_instance.snapshot.dispatcher.audit
    assert audit is not None
    audit.flush()
    records, total = fresh_instance.store.audit_records(AuditQuery(surface="pages"), before=None, limit=200)
    assert total == len(records) == 1
    assert records[0]["target"] == "find_nodes"


async def test_every_read_of_a_page_is_audited_as_the_pages_surface(fresh_instance: Instance) -> None:
    headers = _headers(fresh_instance, "admin")
    async with asgi(fresh_instance) as http:
        assert (await http.get("/browse/types/Team?oncall=true", headers=headers)).status_code == 200
    audit = fresh_instance.snapshot.dispatcher.audit
    assert audit is not None
    audit.flush()
    records, total = fresh_instance.store.audit_records(AuditQuery(surface="pages"), before=None, limit=200)
    # the table's read, which counts the area facet too (find_nodes' facets), and one read counting oncall
    # without the page's own oncall filter: not one call per facet value
    assert total == len(records) == 2
    assert {r["target"] for r in records} == {"find_nodes"}
    assert {r["principal"] for r in records} == {"pages-admin"}


# -- bad input -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("query", "pointer"),
    [("no_such_property=1", "/query/no_such_property"), ("tier__gte=1&tier__gte=2", "/query/tier__gte"),
     ("tier__between=1", "/query/tier__between"), ("_size=1000", "/query/_size"), ("_sort=nope", "/query/_sort"),
     ("_sort=--tier", "/query/_sort")],
)  # fmt: skip
async def test_a_bad_filter_is_a_400_page_naming_the_parameter(gen_instance: Instance, query: str,
                                                               pointer: str) -> None:  # fmt: skip
    async with asgi(gen_instance) as http:
        answer = await http.get(f"/browse/types/Service?{query}")
        download = await http.get(f"/browse/types/Service.json?{query}")
    assert answer.status_code == 400
    assert answer.headers["content-type"].startswith("text/html")
    assert pointer in answer.text
    assert download.status_code == 400
    assert download.json()["errors"][0]["pointer"] == pointer


async def test_a_value_the_tool_refuses_is_its_error_on_the_page(gen_instance: Instance) -> None:
    async with asgi(gen_instance) as http:
        answer = await http.get("/browse/types/Service?_cursor=not-a-cursor")
        unknown = await http.get("/browse/types/NoSuchType")
    assert answer.status_code == 400
    assert "/cursor" in answer.text
    assert unknown.status_code == 404


# -- where links point ---------------------------------------------------------------------------------------------
@pytest.fixture
def prefixed(seed_template: Path, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Instance]:
    settings: dict[str, Any] = request.param
    config = Config(store=copy_store(seed_template, tmp_path / "canon.db"), tokens=tmp_path / "tokens.json",
                    **settings)  # fmt: skip
    instance = open_instance(config)
    yield instance
    instance.close()


@pytest.mark.parametrize(
    ("prefixed", "asked", "base"),
    [({"root_path": "/kb"}, "/kb/browse/types/Team", "/kb"),
     ({"public_url": "https://canon.example/kb", "root_path": "/kb"}, "/kb/browse/types/Team",
      "https://canon.example/kb")],
    indirect=["prefixed"],
)  # fmt: skip
async def test_every_link_of_a_page_starts_with_the_servers_base(prefixed: Instance, asked: str, base: str) -> None:
    async with asgi(prefixed) as http:
        answer = await http.get(asked)
        assert answer.status_code == 200, answer.text
        redirect = await http.get(asked.replace("/browse/types/Team", "/browse"))
    page = parse(answer.text)
    hrefs = [h for h, _ in page.links if not h.startswith("#")] + [a["href"] for t, a in page.tags if t == "link"]
    hrefs += [a["action"] for t, a in page.tags if t == "form"]
    assert len(hrefs) > 10
    assert [h for h in hrefs if not h.startswith(base + "/browse/")] == []
    assert redirect.status_code == 308
    assert redirect.headers["location"] == base + "/browse/"


# -- values --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("uri", ["javascript:alert(1)", "data:text/html,<b>x</b>", "//evil.example/x", "https:x"])
def test_a_uri_that_is_not_an_absolute_http_url_is_shown_as_text_never_as_a_link(uri: str) -> None:
    assert shown(uri, {"type": "string", "format": "uri"}).kind == "text"


def test_values_show_as_their_schema_says() -> None:
    assert shown("https://x.example/a", {"format": "uri"}).href == "https://x.example/a"
    assert shown("2026-01-02", {"format": "date"}).kind == "date"
    assert shown("production", {"enum": ["production"]}).kind == "enum"
    assert [i.kind for i in shown(["a", "https://b.example"], {"items": {"format": "uri"}}).items] == ["text", "link"]
    assert shown(True, {}).text == "yes"


async def test_a_csv_cell_that_a_spreadsheet_would_run_is_defused(fresh_instance: Instance) -> None:
    admin = Principal("erin", frozenset({"admin"}))
    result = fresh_instance.snapshot.dispatcher.call_tool(admin, "test", "patch_node", {
        "id": "svc-checkout-api", "properties": {"description": "=HYPERLINK(\"https://evil.example\")"}})  # fmt: skip
    assert result.error is None
    async with asgi(fresh_instance) as http:
        answer = await http.get("/browse/types/Service.csv?name=checkout-api")
    row = next(csv.DictReader(io.StringIO(answer.text)))
    assert row["description"] == '\'=HYPERLINK("https://evil.example")'


async def test_a_two_sided_range_is_both_bounds_and_its_inputs_keep_them(gen_instance: Instance) -> None:
    async with asgi(gen_instance) as http:
        page = (await http.get("/browse/types/Decision?date__gte=2023-01-01&date__lte=2024-06-30")).text
        rows = parse(page).row_headers
        everything = (await http.get("/browse/types/Decision.json?_size=100")).json()["items"]  # what it may see
    assert 'id="f-date-gte" name="date__gte" type="date" value="2023-01-01"' in page
    assert 'id="f-date-lte" name="date__lte" type="date" value="2024-06-30"' in page
    dates = {n["id"]: n["properties"]["date"] for n in everything}
    assert rows == sorted(i for i, d in dates.items() if "2023-01-01" <= d <= "2024-06-30")
    assert 0 < len(rows) < len(everything)


# -- sorting -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("both", WHO, indirect=True)
@pytest.mark.parametrize("sort", ["tier", "-tier", "-slo_availability", "name"])
async def test_a_sorted_type_page_and_its_pages_show_rest_s_order_for_the_same_caller(both: Both, sort: str) -> None:
    arguments: dict[str, Any] = {"type": "Service", "limit": 7, "order_by": [sort]}
    expected: list[str] = []
    while True:
        got = await both.rest("find_nodes", arguments)
        expected += [n["id"] for n in got["items"]]
        if got["next_cursor"] is None:
            break
        arguments["cursor"] = got["next_cursor"]
    shown: list[str] = []
    url: str | None = f"/browse/types/Service?_sort={sort}&_size=7"
    while url is not None:
        page = parse((await both.page(url)).text)
        shown += page.row_headers
        url = next((h for h, t in page.links if t == "Next page"), None)
    assert shown == expected
    assert expected != sorted(expected) or sort == "name"  # the order is not the id order
    json_rows = (await both.page(f"/browse/types/Service.json?_sort={sort}&_size=7")).json()["items"]
    assert [n["id"] for n in json_rows] == expected[:7]


async def test_a_sortable_column_heading_is_a_sort_link_with_aria_sort(gen_instance: Instance) -> None:
    async with asgi(gen_instance) as http:
        plain = (await http.get("/browse/types/Service?lifecycle=production")).text
        up = (await http.get("/browse/types/Service?lifecycle=production&_sort=tier")).text
        down = (await http.get("/browse/types/Service?lifecycle=production&_sort=-tier")).text
    link = '<a class="sort" href="/browse/types/Service?lifecycle=production&amp;_sort='
    assert '<th scope="col" aria-sort="ascending">id</th>' in plain
    assert f'<th scope="col">{link}tier">tier<span class="visually-hidden"> (sort ascending)' in plain
    assert f'<th scope="col" aria-sort="ascending">{link}-tier">tier<span class="visually-hidden"> (sort desc' in up
    assert f'<th scope="col" aria-sort="descending">{link}tier">tier<span class="visually-hidden"> (sort asc' in down
    assert '<th scope="col"><a href="/browse/types/Service?lifecycle=production" class="sort">id</a></th>' in up
    assert 'name="_sort" value="-tier"' in down  # the filter form keeps the order
    assert "Ordered by tier, descending" in down
    assert '<th scope="col">public_api</th>' in plain  # a boolean column is no sort link
    tiers = [row.split("<td>")[2].split("<")[0] for row in down.split('<tr><th scope="row">')[1:]]
    assert tiers == sorted(tiers, reverse=True)
    assert len(set(tiers)) > 1


async def test_a_sort_the_tool_refuses_is_its_error_on_the_page(gen_instance: Instance) -> None:
    async with asgi(gen_instance) as http:
        answer = await http.get("/browse/types/Service?_sort=tags")
    assert answer.status_code == 400
    assert "/order_by/0" in answer.text
    assert "cannot be sorted by" in answer.text
