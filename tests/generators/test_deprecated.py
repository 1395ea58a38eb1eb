"""`deprecated: true` (JSON Schema 2020-12 meta-data) on a node type, an edge type or a property shows on every
surface: OpenAPI `deprecated`, GraphQL `@deprecated`, MCP descriptions and type resources, llms pages; and
deprecating is a compatible model change."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import graphql
import mcp
import pytest

from core.lang.model import DEPRECATED, Model, load_model, parse_model
from core.mcp.events import EventFanout
from core.mcp.server import DEFAULT_OPTIONS, build_server
from core.ops.config import Config
from core.seam.changes import ChangeFeed
from core.seam.instance import Instance, open_instance
from core.seam.model_diff import diff_models
from core.seam.rendering import render_model
from core.store import open_existing_store
from core.values.principal import LOCAL
from tests.conftest import copy_store
from tests.generators.conftest import asgi, token


def deprecating(model: Model) -> Model:
    """The embedded model with Team, member_of and Person.title deprecated (a minor version)."""
    document: dict[str, Any] = copy.deepcopy(dict(model.document))
    document["x-canon-model"]["version"] = "1.1.0"
    defs = document["$defs"]
    defs["Team"]["deprecated"] = True
    defs["member_of"]["deprecated"] = True
    defs["Person"]["properties"]["title"]["deprecated"] = True
    return parse_model(document, source="deprecating.schema.json")


@pytest.fixture(scope="module")
def deprecated_model() -> Model:
    return deprecating(load_model())


@pytest.fixture(scope="module")
def deprecated_instance(
    seed_template: Path, deprecated_model: Model, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Instance]:
    folder = tmp_path_factory.mktemp("deprecated")
    model_file = folder / "model.schema.json"
    model_file.write_text(deprecated_model.canonical_json, encoding="utf-8")
    config = Config(store=copy_store(seed_template, folder / "canon.db"), model=model_file,
                    tokens=folder / "tokens.json")  # fmt: skip
    store = open_existing_store(config.store)
    try:
        store.apply_model(deprecated_model, principal="test")  # a model changes only by apply
    finally:
        store.close()
    instance = open_instance(config)
    yield instance
    instance.close()


@pytest.fixture(scope="module")
def artifacts(deprecated_model: Model) -> dict[str, dict[str, str]]:
    return render_model(deprecated_model)


@pytest.mark.anyio
async def test_openapi_marks_deprecated_schemas_properties_and_type_resources(deprecated_instance: Instance) -> None:
    async with asgi(deprecated_instance) as http:
        document = (await http.get("/openapi.json")).json()
    schemas = document["components"]["schemas"]
    assert schemas["Team"]["deprecated"] is True
    assert schemas["member_of"]["deprecated"] is True
    assert schemas["Person"]["properties"]["title"]["deprecated"] is True
    assert "deprecated" not in schemas["Person"]
    assert "deprecated" not in schemas["Person"]["properties"]["name"]
    assert document["paths"]["/api/resources/types/Team"]["get"]["deprecated"] is True
    assert "deprecated" not in document["paths"]["/api/resources/types/Person"]["get"]


def test_graphql_sdl_marks_deprecated_fields(artifacts: dict[str, dict[str, str]]) -> None:
    schema = graphql.build_schema(artifacts["graphql"]["schema.graphql"])

    def reason(type_name: str, field: str) -> str | None:
        found = schema.get_type(type_name)
        assert isinstance(found, graphql.GraphQLObjectType), type_name
        return found.fields[field].deprecation_reason

    assert reason("PersonProperties", "title") == DEPRECATED
    assert reason("PersonProperties", "name") is None
    assert reason("Person", "member_of") == DEPRECATED
    assert reason("Team", "members") == DEPRECATED
    assert reason("Team", "owns") is None
    assert reason("Query", "resource_type_Team") == DEPRECATED
    assert reason("Query", "resource_type_Person") is None
    team = schema.get_type("Team")
    assert team is not None
    assert str(team.description).startswith(DEPRECATED)


@pytest.mark.anyio
async def test_mcp_lists_deprecated_types_in_descriptions_and_serves_them_in_type_resources(
    deprecated_instance: Instance,
) -> None:
    assert deprecated_instance.index is not None
    server = build_server(lambda: deprecated_instance.snapshot, EventFanout(ChangeFeed(deprecated_instance.index)),
                          lambda ctx: LOCAL, DEFAULT_OPTIONS)  # fmt: skip
    async with mcp.Client(server) as client:  # pyright: ignore[reportArgumentType]
        resources = {r.name: r for r in (await client.list_resources()).resources}
        tools = {t.name: t for t in (await client.list_tools()).tools}
        content = await client.read_resource(str(resources["type-Team"].uri))
    assert str(resources["type-Team"].description).startswith(DEPRECATED)
    assert str(resources["type-member_of"].description).startswith(DEPRECATED)
    assert not str(resources["type-Person"].description).startswith(DEPRECATED)
    type_parameter = tools["find_nodes"].input_schema["properties"]["type"]
    assert "Deprecated: Team." in type_parameter["description"]
    schema = json.loads(content.contents[0].text)  # type: ignore[union-attr]
    assert schema["$defs"]["Team"]["deprecated"] is True


@pytest.mark.anyio
async def test_llms_pages_say_deprecated(deprecated_instance: Instance) -> None:
    async with asgi(deprecated_instance) as http:
        team = (await http.get("/types/Team.md")).text
        person = (await http.get("/types/Person.md")).text
        index = (await http.get("/llms.txt")).text
    assert DEPRECATED in team.split("##")[0]  # under the title
    (title_line,) = [line for line in person.splitlines() if line.startswith("- `title`")]
    assert DEPRECATED in title_line
    assert DEPRECATED not in person.split("##")[0]
    (member_of_line,) = [line for line in person.splitlines() if line.startswith("- `member_of`")]
    assert DEPRECATED in member_of_line
    (team_link,) = [line for line in index.splitlines() if "(/types/Team.md)" in line]
    assert DEPRECATED in team_link


def test_deprecating_a_type_edge_type_or_property_is_compatible_on_every_surface(deprecated_model: Model) -> None:
    report = diff_models(load_model(), deprecated_model)
    assert report.findings
    assert report.classification() == "compatible", [f for f in report.findings if f.classification != "compatible"]


@pytest.mark.anyio
async def test_the_pages_mark_deprecated_parts(deprecated_instance: Instance) -> None:
    """The pages for people (issue 28): the model page marks the deprecated type, edge type and property (and no
    other), as do the home page, the type's table, a node's properties and edges, and the edit form's field."""
    mark = '<span class="deprecated">deprecated</span>'
    admin = {"Authorization": "Bearer " + token(deprecated_instance, "deprecated-admin", "admin")}
    async with asgi(deprecated_instance) as http:
        model, home, team, person, edit = [(await http.get(path, headers=admin)).text for path in (
            "/browse/model", "/browse/", "/browse/types/Team", "/browse/nodes/person-ada-okafor",
            "/browse/nodes/person-ada-okafor/edit")]  # fmt: skip
    assert f'<a href="/browse/types/Team">Team</a> {mark}</h2>' in model
    assert '<a href="/browse/types/Person">Person</a></h2>' in model
    assert f'<th scope="row">title <span class="required">required</span> {mark}</th>' in model
    assert re.search(r'<th scope="row">name <span class="required">required</span></th>', model)
    assert re.search(rf'<th scope="row">member_of {mark}', model)
    assert re.search(rf'<th scope="row">owns(?! {mark})', model)
    assert model.count(mark) == 3
    assert f'<a href="/browse/types/Team">Team</a> {mark}</th>' in home
    assert f"<h1>Team {mark}</h1>" in team
    assert re.search(rf'<th scope="row">title {mark}</th>', person)
    assert re.search(rf'<h3 id="edge-out-member_of">member_of <span class="count">1</span>.*{mark}', person)
    assert f'<label for="p-title">title <span class="required">required</span> {mark}</label>' in edit
    assert '<label for="p-name">name <span class="required">required</span></label>' in edit
