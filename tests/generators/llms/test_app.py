"""The llms.txt surface: the index parses, every link resolves, and nothing but the public graph ever shows."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import httpx2
import pytest
from llms_txt import parse_llms_file  # pyright: ignore[reportMissingTypeStubs]

from core.dispatch.prompts import PROMPTS
from core.seam.instance import Instance
from core.seam.surfaces import claims, host_for
from core.values.principal import ANONYMOUS, LOCAL
from core.values.records import Node
from generators.llms.app import LlmsSurface, share, surface
from tests.generators.conftest import asgi, live, token

SECTIONS = ["Tools", "Node types", "Resources", "Prompts", "Nodes", "Optional"]
OTHER_SURFACES = {"/openapi.json", "/schema.graphql"}  # linked from Optional, served by the REST and GraphQL surfaces
LINK = re.compile(r"\]\((/[^)\s]*)\)")


def _links(text: str) -> list[str]:
    return LINK.findall(text)


def _ours(url: str) -> bool:
    return any(claims(p, url) for p in surface.paths)


@dataclass
class Crawl:
    pages: dict[str, httpx2.Response]  # every page reached from /llms.txt by following links, plus llms-full.txt
    skipped: set[str]  # links to other surfaces


def _crawl(base: str, headers: dict[str, str]) -> Crawl:
    pages: dict[str, httpx2.Response] = {}
    skipped: set[str] = set()
    queue = ["/llms.txt", "/llms-full.txt"]
    with httpx2.Client(base_url=base, headers=headers, timeout=30) as http:
        while queue:
            url = queue.pop()
            if url in pages or url in skipped:
                continue
            if not _ours(url):
                skipped.add(url)
                continue
            response = http.get(url)
            pages[url] = response
            if response.status_code == 200 and url != "/llms-full.txt":
                queue += [u for u in _links(response.text) if u not in pages]
    return Crawl(pages, skipped)


@pytest.fixture(scope="module")
def crawls(gen_instance: Instance) -> Iterator[tuple[Crawl, Crawl]]:
    """The whole site walked twice over real uvicorn: anonymously, and with an admin token."""
    admin = token(gen_instance, "crawler-admin", "admin")
    with live(gen_instance, surfaces=[surface]) as base:
        yield _crawl(base, {}), _crawl(base, {"Authorization": f"Bearer {admin}"})


def _display(instance: Instance, node: Node) -> str:
    return str(node.properties.get(instance.model.node_types[node.type].display, node.id))


def _hidden_needles(instance: Instance) -> set[str]:
    """Ids and titles of every node that is not public, minus strings that public text also contains."""
    nodes = list(instance.store.iter_nodes())
    public_text = "\n".join(
        [json.dumps(instance.registry.manifest(), ensure_ascii=False),
         json.dumps(instance.model.document, ensure_ascii=False)]
        + [f"{n.id} {json.dumps(dict(n.properties), ensure_ascii=False)}" for n in nodes if n.visibility == "public"]
    )  # fmt: skip
    needles = {s for n in nodes if n.visibility != "public" for s in (n.id, _display(instance, n))}
    return {s for s in needles if s not in public_text}


def _public_ids(instance: Instance) -> set[str]:
    return {n.id for n in instance.store.iter_nodes() if n.visibility == "public"}


def _llms(crawl: Crawl) -> Any:
    return parse_llms_file(crawl.pages["/llms.txt"].text)


# -- llms.txt ------------------------------------------------------------------------------------------------------
def test_llms_txt_parses_with_the_reference_parser_and_has_every_section(crawls: tuple[Crawl, Crawl]) -> None:
    anonymous, _ = crawls
    response = anonymous.pages["/llms.txt"]
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/markdown; charset=utf-8"
    parsed = _llms(anonymous)

    assert parsed.title == "northwind"
    assert parsed.summary
    assert "canon" in parsed.summary
    assert "/mcp" in parsed.info
    assert "/api" in parsed.info
    assert "/graphql" in parsed.info
    assert not re.search(r"^#", parsed.info, re.MULTILINE)  # details carry no headings
    assert list(parsed.sections) == SECTIONS
    assert [link["url"] for link in parsed.sections["Optional"]] == ["/llms-full.txt", "/openapi.json",
                                                                     "/schema.graphql"]  # fmt: skip
    assert response.text.endswith("\n")


def test_every_registry_tool_and_resource_is_linked_and_nothing_else(
    crawls: tuple[Crawl, Crawl], gen_instance: Instance
) -> None:
    sections = _llms(crawls[0]).sections
    registry = gen_instance.registry

    tools = [(link["title"], link["url"]) for link in sections["Tools"]]
    assert tools == [(t.name, f"/tools/{t.name}.md") for t in registry.tools]
    resources = [(link["title"], link["url"]) for link in sections["Resources"]]
    everything = [*registry.resources, *registry.templates]
    assert resources == [(r.name, f"/resources/{r.name}.md") for r in everything]
    types = [link["url"] for link in sections["Node types"]]
    assert types == [f"/types/{name}.md" for name in gen_instance.model.node_types]
    prompts = [(link["title"], link["url"]) for link in sections["Prompts"]]
    assert prompts == [(p.name, f"/prompts/{p.name}.md") for p in PROMPTS]


def test_prompt_pages_name_the_arguments_and_how_to_get_the_prompt(crawls: tuple[Crawl, Crawl]) -> None:
    page = crawls[0].pages["/prompts/explain_node.md"].text

    assert page.startswith("# explain_node\n")
    assert "- `id` (required): The node's id. `completion/complete` offers node ids by prefix." in page
    assert '`{"name": "explain_node", "arguments": {"id": "<id>"}}`' in page


def test_the_nodes_section_lists_every_public_node_when_they_fit(
    crawls: tuple[Crawl, Crawl], gen_instance: Instance
) -> None:
    listed = {unquote(link["url"]).removesuffix(".md").rsplit("/", 1)[1] for link in _llms(crawls[0]).sections["Nodes"]}
    public = _public_ids(gen_instance)
    assert len(public) < surface.max_nodes  # the seed fits, so the list is complete
    assert listed == public


def test_every_link_resolves_to_a_page(crawls: tuple[Crawl, Crawl]) -> None:
    anonymous, _ = crawls
    failed = {url: r.status_code for url, r in anonymous.pages.items() if r.status_code != 200}
    assert failed == {}
    for link in (link for section in _llms(anonymous).sections.values() for link in section):
        assert link["url"] in anonymous.pages or link["url"] in OTHER_SURFACES
    assert anonymous.skipped == OTHER_SURFACES
    assert len(anonymous.pages) > 200  # tools, types, resources and every public node were reached


# -- nothing hidden ------------------------------------------------------------------------------------------------
def test_no_hidden_node_appears_in_any_output_even_for_an_admin(
    crawls: tuple[Crawl, Crawl], gen_instance: Instance
) -> None:
    needles = _hidden_needles(gen_instance)
    assert len(needles) > 300  # ids and titles of the seed's internal and restricted nodes
    for crawl in crawls:
        for url, response in crawl.pages.items():
            leaked = sorted(n for n in needles if n in response.text)
            assert leaked == [], f"{url} shows hidden nodes"


def test_a_token_does_not_change_any_page(crawls: tuple[Crawl, Crawl]) -> None:
    anonymous, admin = crawls
    assert set(admin.pages) == set(anonymous.pages)
    changed = [url for url in anonymous.pages if admin.pages[url].content != anonymous.pages[url].content]
    assert changed == []


@pytest.mark.anyio
async def test_a_hidden_nodes_page_is_the_same_404_as_a_missing_one(gen_instance: Instance) -> None:
    hidden = next(n for n in gen_instance.store.iter_nodes() if n.visibility == "restricted")
    admin = token(gen_instance, "probe-admin", "admin")
    async with asgi(gen_instance, surfaces=[surface]) as http:
        answers = [
            await http.get(f"/nodes/{hidden.type}/{hidden.id}.md"),
            await http.get(f"/nodes/{hidden.type}/{hidden.id}.md", headers={"Authorization": f"Bearer {admin}"}),
            await http.get(f"/nodes/{hidden.type}/no-such-node.md"),
            await http.get(f"/nodes/{hidden.type}/{'x' * 200}.md"),  # not even a valid id
        ]
    assert {r.status_code for r in answers} == {404}
    assert len({json.dumps({**r.json(), "instance": None}) for r in answers}) == 1  # the same but for the path
    assert {r.headers["content-type"] for r in answers} == {"application/problem+json"}
    assert hidden.id not in answers[0].json()["detail"]  # only its own path, which the caller sent


# -- the pages -----------------------------------------------------------------------------------------------------
def test_tool_pages_carry_the_exact_schemas_and_the_rest_route(
    crawls: tuple[Crawl, Crawl], gen_instance: Instance
) -> None:
    for tool in gen_instance.registry.tools:
        page = crawls[0].pages[f"/tools/{tool.name}.md"].text
        assert "```json\n" + json.dumps(tool.input_schema, indent=2, ensure_ascii=False) + "\n```" in page
        assert "```json\n" + json.dumps(tool.output_schema, indent=2, ensure_ascii=False) + "\n```" in page
        rest = tool.surface["rest"]
        assert f"`{rest['method']} /api{rest['path']}`" in page
        root = "Query" if tool.annotations["readOnlyHint"] else "Mutation"
        assert f"`{tool.name}` on `{root}`" in page


def test_the_get_node_page_relates_it_to_the_tools_returning_nodes_and_the_node_template(
    crawls: tuple[Crawl, Crawl],
) -> None:
    page = crawls[0].pages["/tools/get_node.md"].text
    related = page.split("## Related", 1)[1]
    assert "[find_nodes](/tools/find_nodes.md)" in related
    assert "[node](/resources/node.md)" in related
    assert "[delete_node]" not in related  # returns no node


def test_node_pages_link_exactly_the_public_neighbours_by_edge_type(
    crawls: tuple[Crawl, Crawl], gen_instance: Instance
) -> None:
    """Each public node's page lists, per direction and edge type, the public nodes the store's edges reach, and
    the set of neighbours is what get_neighbors gives the anonymous principal."""
    public = {n.id: n for n in gen_instance.store.iter_nodes() if n.visibility == "public"}
    expected: dict[str, set[tuple[str, str, str]]] = {id: set() for id in public}
    for edge in gen_instance.store.iter_edges():
        if edge.source in public and edge.target in public:
            inverse = gen_instance.model.edge_types[edge.type].inverse or f"{edge.type}_incoming"
            expected[edge.source].add(("Outgoing", edge.type, edge.target))
            expected[edge.target].add(("Incoming", f"{inverse} (`{edge.type}` edges)", edge.source))
    checked = 0
    for id, node in public.items():
        page = crawls[0].pages[f"/nodes/{node.type}/{id}.md"].text
        assert page.startswith(f"# {_display(gen_instance, node)}\n")
        assert _page_edges(page) == expected[id]
        answer = gen_instance.dispatcher.call_tool(ANONYMOUS, "test", "get_neighbors", {"id": id, "limit": 200})
        assert answer.value is not None
        assert {n for _, _, n in expected[id]} == {item["node"]["id"] for item in answer.value["items"]}
        checked += bool(expected[id])
    assert checked > 100


def _page_edges(page: str) -> set[tuple[str, str, str]]:
    found: set[tuple[str, str, str]] = set()
    direction = edge_type = ""
    for line in page.splitlines():
        if line.startswith("## "):
            direction, edge_type = line[3:].split(" ")[0], ""
        elif line.startswith("### "):
            edge_type = line[4:]
        elif edge_type and line.startswith("- ["):
            found.add((direction, edge_type, unquote(_links(line)[0]).removesuffix(".md").rsplit("/", 1)[1]))
    return found


def test_type_pages_name_incoming_edges_by_the_models_inverse(crawls: tuple[Crawl, Crawl]) -> None:
    team = crawls[0].pages["/types/Team.md"].text.split("## Edges in", 1)[1].split("## ", 1)[0]
    assert "- `members` (`member_of` edges) from [Person](/types/Person.md)" in team
    assert "member_of_incoming" not in team
    term = crawls[0].pages["/types/GlossaryTerm.md"].text.split("## Edges in", 1)[1].split("## ", 1)[0]
    assert "- `related_to_incoming` (`related_to` edges) from [GlossaryTerm]" in term  # no inverse declared
    assert "- `defined_in` (`defines` edges) from [Document]" in term


def test_type_pages_list_their_public_nodes_by_id(crawls: tuple[Crawl, Crawl], gen_instance: Instance) -> None:
    for name in gen_instance.model.node_types:
        page = crawls[0].pages[f"/types/{name}.md"].text
        listed = [unquote(u).removesuffix(".md").rsplit("/", 1)[1] for u in _links(page) if u.startswith("/nodes/")]
        public = sorted(n.id for n in gen_instance.store.iter_nodes(name) if n.visibility == "public")
        assert listed == public
        assert f"GET /api/nodes?type={name}" in page
        assert json.dumps(gen_instance.model.node_types[name].schema, indent=2, ensure_ascii=False) in page


def test_resource_pages_say_how_to_read_them_and_inline_the_schema(
    crawls: tuple[Crawl, Crawl], gen_instance: Instance
) -> None:
    model = crawls[0].pages["/resources/model.md"].text
    assert "`canon://model`" in model
    assert "`GET /api/resources/model`" in model
    assert "`resource_model`" in model
    content = model.split("```json\n", 1)[1].split("\n```", 1)[0]
    assert json.loads(content) == gen_instance.model.document
    template = crawls[0].pages["/resources/node.md"].text
    assert "URI template: `canon://nodes/{type}/{id}`" in template
    assert "`GET /api/resources/nodes/{type}/{id}`" in template
    changes = crawls[0].pages["/resources/changes.md"].text
    assert "```json" not in changes  # the change feed is never inlined


def test_llms_full_inlines_every_page_under_one_h1(crawls: tuple[Crawl, Crawl], gen_instance: Instance) -> None:
    full = crawls[0].pages["/llms-full.txt"].text
    assert re.findall(r"^# .*$", full, re.MULTILINE) == ["# northwind"]
    for tool in gen_instance.registry.tools:
        assert f"source: /tools/{tool.name}.md\n\n## {tool.name}\n" in full
    for name in gen_instance.model.node_types:
        assert f"source: /types/{name}.md\n\n## {name}\n" in full
    for prompt in PROMPTS:
        assert f"source: /prompts/{prompt.name}.md\n\n## {prompt.name}\n" in full
    nodes = re.findall(r"^source: /nodes/", full, re.MULTILINE)
    assert len(nodes) == surface.max_full_nodes


# -- HTTP ----------------------------------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_pages_carry_an_etag_and_answer_304_when_it_matches(gen_instance: Instance) -> None:
    async with asgi(gen_instance, surfaces=[surface]) as http:
        first = await http.get("/llms.txt")
        etag = first.headers["etag"]
        again = await http.get("/llms.txt", headers={"If-None-Match": etag})
        listed = await http.get("/llms.txt", headers={"If-None-Match": f'"other", W/{etag}'})
        stale = await http.get("/llms.txt", headers={"If-None-Match": '"other"'})
        head = await http.head("/types/Team.md")
        page = await http.get("/types/Team.md")

    assert first.status_code == 200
    assert first.headers["cache-control"] == "public, max-age=60"
    assert (again.status_code, again.content, again.headers["etag"]) == (304, b"", etag)
    assert listed.status_code == 304
    assert stale.status_code == 200
    assert stale.content == first.content
    assert head.status_code == 200
    assert head.content == b""
    assert head.headers["etag"] == page.headers["etag"]
    assert int(head.headers["content-length"]) == len(page.content)


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["/tools/no_such_tool.md", "/tools/get_node", "/tools/", "/types/owns.md",
                                  "/nodes/Team.md", "/nodes/Team/team-payments/x.md", "/nodes/Nope/team-payments.md",
                                  "/nodes/Service/team-payments.md", "/resources/nope.md", "/types/"])  # fmt: skip
async def test_unknown_pages_are_404_problems_that_point_at_llms_txt(gen_instance: Instance, path: str) -> None:
    async with asgi(gen_instance, surfaces=[surface]) as http:
        response = await http.get(path)
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert (problem["code"], problem["type"], problem["instance"]) == ("not_found", "urn:canon:problem:not_found", path)
    assert "/llms.txt" in problem["detail"]


@pytest.mark.anyio
async def test_only_get_and_head_are_served(gen_instance: Instance) -> None:
    async with asgi(gen_instance, surfaces=[surface]) as http:
        response = await http.post("/llms.txt", content=b"x")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, HEAD"
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == "method_not_allowed"


@pytest.mark.anyio
async def test_pages_are_read_through_the_dispatcher_as_the_anonymous_principal(fresh_instance: Instance) -> None:
    seen: list[tuple[str, str, str]] = []
    fresh_instance.dispatcher.audit_hooks.append(lambda r: seen.append((r.principal, r.surface, r.action)))
    admin = token(fresh_instance, "audited-admin", "admin")
    async with asgi(fresh_instance, surfaces=[surface]) as http:
        response = await http.get("/nodes/Team/team-payments.md", headers={"Authorization": f"Bearer {admin}"})
    assert response.status_code == 200
    assert seen
    assert set(seen) == {("anonymous", "llms", "tools/call")}


@pytest.mark.anyio
async def test_a_node_made_public_appears_on_the_next_request(fresh_instance: Instance) -> None:
    hidden = next(n for n in fresh_instance.store.iter_nodes("Service") if n.visibility == "restricted")
    neighbour = next(
        e.target for e in fresh_instance.store.iter_edges()
        if e.source == hidden.id and (n := fresh_instance.store.node(e.target)) and n.visibility == "public"
    )  # fmt: skip
    neighbour_page = f"/nodes/{fresh_instance.store.node(neighbour).type}/{neighbour}.md"  # type: ignore[union-attr]
    async with asgi(fresh_instance, surfaces=[surface]) as http:
        before = await http.get("/llms.txt")
        assert (await http.get(f"/nodes/Service/{hidden.id}.md")).status_code == 404
        assert hidden.id not in (await http.get(neighbour_page)).text

        for id, properties in [(hidden.id, dict(hidden.properties)),
                               ("svc:odd.id", {"name": "odd-id", "description": "An id a URL must encode.",
                                                "lifecycle": "experimental", "tier": 3})]:  # fmt: skip
            arguments = {"id": id, "type": "Service", "properties": properties, "visibility": "public"}
            result = fresh_instance.dispatcher.call_tool(LOCAL, "test", "upsert_node", arguments)
            assert result.error is None, result.error

        after = await http.get("/llms.txt", headers={"If-None-Match": before.headers["etag"]})
        page = await http.get(f"/nodes/Service/{hidden.id}.md")
        odd = await http.get("/nodes/Service/svc%3Aodd.id.md")
        neighbour_after = await http.get(neighbour_page)

    assert after.status_code == 200
    assert after.headers["etag"] != before.headers["etag"]
    urls = [link["url"] for link in parse_llms_file(after.text).sections["Nodes"]]
    assert f"/nodes/Service/{hidden.id}.md" in urls
    assert "/nodes/Service/svc%3Aodd.id.md" in urls
    assert page.status_code == 200
    assert page.text.startswith(f"# {_display(fresh_instance, hidden)}\n")
    assert odd.status_code == 200
    assert odd.text.startswith("# odd-id\n")
    assert f"/nodes/Service/{hidden.id}.md" in neighbour_after.text


# -- bounds and artifacts ------------------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_bounds_cut_the_lists_and_say_how_to_page_further(gen_instance: Instance) -> None:
    small = LlmsSurface(max_nodes=10, max_type_nodes=5, max_full_nodes=3, max_resource_chars=100)
    async with asgi(gen_instance, surfaces=[small]) as http:
        index = await http.get("/llms.txt")
        services = await http.get("/types/Service.md")
        full = await http.get("/llms-full.txt")
        model = await http.get("/resources/model.md")

    nodes = parse_llms_file(index.text).sections["Nodes"]
    assert len(nodes) == 10
    assert len({link["url"].split("/")[2] for link in nodes}) == 6  # shared: each type with public nodes has some
    listed = [u for u in _links(services.text) if u.startswith("/nodes/")]
    assert len(listed) == 5
    assert listed == sorted(listed)
    assert "the first 5 by id" in services.text
    assert "next_cursor" in services.text
    assert len(re.findall(r"^source: /nodes/", full.text, re.MULTILINE)) == 3
    assert "```json" not in model.text
    assert "larger than the 100 characters" in model.text


def test_share_gives_each_group_what_it_can_use() -> None:
    assert share([3, 100, 0, 50], 20) == [3, 9, 0, 8]
    assert share([3, 4], 20) == [3, 4]
    assert share([5, 5, 5], 2) == [1, 1, 0]
    assert sum(share([7, 1, 30, 2], 25)) == 25


def test_the_artifact_is_the_served_llms_txt_and_deterministic(
    crawls: tuple[Crawl, Crawl], gen_instance: Instance, fresh_instance: Instance
) -> None:
    def artifact(instance: Instance) -> str:
        host = host_for(instance, "llms", principal_of=lambda request: ANONYMOUS, watch=lambda *a, **k: None)  # type: ignore[arg-type,return-value]
        return dict(surface.artifacts(host))["llms.txt"]

    first = artifact(gen_instance)
    assert first == artifact(gen_instance) == artifact(fresh_instance)
    assert first == crawls[0].pages["/llms.txt"].text
