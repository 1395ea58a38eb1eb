"""A model is one snapshot (`core.seam.snapshot`): every surface serves the newest model after model changes in a row,
and a call that is running when the model changes finishes on the model it started with."""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp
import pytest

from core.http.app import build_app
from core.lang.model import Model, load_model, parse_model
from core.mcp.events import EventFanout
from core.mcp.server import build_server
from core.seam.changes import ChangeFeed
from core.seam.instance import Instance
from core.seam.surfaces import discover
from core.store.sqlite import SQLiteStore
from core.values.principal import LOCAL
from core.values.uris import type_uri
from tests.mcp.conftest import asgi_http, modern_request, open_copy

pytestmark = pytest.mark.anyio
ORIGINAL = load_model().version


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def instance(seed_template: Path, tmp_path: Path) -> Iterator[Instance]:
    opened = open_copy(seed_template, tmp_path)
    yield opened
    opened.close()


def _model(version: str, *properties: str) -> Model:
    """The embedded model at `version`, with more optional Team properties."""
    document: dict[str, Any] = copy.deepcopy(dict(load_model().document))
    for name in properties:
        document["$defs"]["Team"]["properties"][name] = {"type": "string", "description": f"The team's {name}."}
    document["x-canon-model"]["version"] = version
    return parse_model(document)


def _adopt_in_another_process(instance: Instance, model: Model) -> None:
    """What `canon model apply new.json` does in another process: the store applies the new model."""
    store = SQLiteStore.open_existing(Path(instance.store.location))
    try:
        store.apply_model(model, principal="admin")
    finally:
        store.close()


async def _listed_team_properties(http: httpx2.AsyncClient) -> set[str]:
    """Team's properties as MCP serves them: its type resource (the tools' output schemas are generic, ADR 0032)."""
    headers, body = modern_request("resources/read", {"uri": type_uri("Team")})
    answer = await http.post("/mcp", headers=headers, json=body)
    schema = json.loads(answer.json()["result"]["contents"][0]["text"])
    return set(schema["$defs"]["Team"]["properties"])


async def test_two_model_changes_in_a_row_are_served_by_mcp_rest_and_graphql(instance: Instance) -> None:
    async with asgi_http(instance) as http:
        listed_before = await _listed_team_properties(http)  # every surface has built for the first model
        openapi_before = (await http.get("/openapi.json")).text
        sdl_before = (await http.get("/schema.graphql")).text
        for model in (_model("1.1.0", "budget"), _model("1.2.0", "budget", "ledger")):  # no request in between
            await anyio.to_thread.run_sync(_adopt_in_another_process, instance, model)
            await anyio.to_thread.run_sync(instance.reload_model)  # what the change pump does when it sees it
        listed = await _listed_team_properties(http)
        openapi = (await http.get("/openapi.json")).text
        sdl = (await http.get("/schema.graphql")).text

    assert "ledger" not in listed_before
    assert '"ledger"' not in openapi_before
    assert "ledger" not in sdl_before
    assert {"budget", "ledger"} <= listed
    assert '"ledger"' in openapi
    assert "ledger" in sdl
    assert instance.model.version == "1.2.0"


def _swap_while_running(instance: Instance) -> None:
    """Adopt a new model so that it lands while the next call runs: the call's own index sync finds the model
    change (validation done, the tool not yet run) and the instance swaps its snapshot right there."""
    assert instance.index is not None
    remove: Callable[[], None] = lambda: None  # noqa: E731

    def swap(changes: list[Any]) -> None:
        if any(c.kind == "model" for c in changes):
            remove()
            instance.reload_model()

    remove = instance.index.add_listener(swap)
    _adopt_in_another_process(instance, _model("1.1.0", "budget"))


async def _described_on_mcp(instance: Instance) -> Callable[[], Awaitable[str]]:
    assert instance.index is not None
    server = build_server(lambda: instance.snapshot, EventFanout(ChangeFeed(instance.index)), lambda ctx: LOCAL)

    async def described() -> str:
        async with mcp.Client(server, mode="2026-07-28") as client:
            answer = await client.call_tool("describe_model", {})
        assert answer.structured_content is not None
        return answer.structured_content["model"]["version"]

    return described


async def _described_on_rest(instance: Instance) -> Callable[[], Awaitable[str]]:
    async def described() -> str:
        async with _http(instance) as http:
            answer = await http.get("/api/model")
        assert answer.status_code == 200, answer.text
        return answer.json()["model"]["version"]

    return described


async def _described_on_graphql(instance: Instance) -> Callable[[], Awaitable[str]]:
    async def described() -> str:
        async with _http(instance) as http:
            answer = await http.post("/graphql", json={"query": "{ describe_model { model { version } } }"})
        assert not answer.json().get("errors"), answer.text
        return answer.json()["data"]["describe_model"]["model"]["version"]

    return described


def _http(instance: Instance) -> httpx2.AsyncClient:
    """REST and GraphQL in-process, without the change pump (it would sync the index before the call does)."""
    app = build_app(instance, [s for s in discover() if s.name in ("rest", "graphql")])
    return httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1:8000")


@pytest.mark.parametrize("surface", [_described_on_mcp, _described_on_rest, _described_on_graphql])
async def test_a_call_running_when_the_model_changes_finishes_on_the_model_it_started_with(
    instance: Instance, surface: Callable[[Instance], Awaitable[Callable[[], Awaitable[str]]]]
) -> None:
    described = await surface(instance)
    _swap_while_running(instance)
    running = await described()
    following = await described()

    assert running == ORIGINAL  # validated on the first model, so run on it: never half one model, half the next
    assert following == "1.1.0"
    assert instance.model.version == "1.1.0"
