"""Reads at a proposal (`proposal` on get_node, find_nodes and get_neighbors; `core.dispatch.proposal_view`), on both
backends: the graph as it would be if the open proposal were merged, nothing written; what a caller may not read
now, or would not be able to read as proposed, stays hidden; what a read at a proposal does not answer is refused
naming the argument; a closed or unknown proposal is an error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.dispatch import proposals
from core.ops.config import Config
from core.seam.instance import Instance, open_instance
from core.values.principal import Principal, Reviewers
from tests.conftest import walking_in_a_worker
from tests.generators.conftest import asgi, token

pytestmark = pytest.mark.both_backends
AGENT = Principal("agent", frozenset({"writer"}))
READER = Principal("rob", frozenset({"reader"}))
PAYMENTS = Principal("pam", frozenset({"reader"}), frozenset({"payments"}))
REVIEWER = Principal("rita", frozenset({"writer"}), frozenset({"reviewers"}))
TEAM, SERVICE, VAULT = "team-payments", "svc-refund-service", "svc-card-vault"
NEW = {"op": "upsert_node", "id": "team-new", "type": "Team", "visibility": "public",
       "properties": {"slug": "new", "name": "New", "area": "product", "mission": "New."}}  # fmt: skip
OPERATIONS: list[dict[str, Any]] = [
    {"op": "patch_node", "id": TEAM, "properties": {"mission": "Proposed."}},
    NEW,
    {"op": "delete_edge", "type": "owns", "source": TEAM, "target": SERVICE},
    {"op": "upsert_edge", "type": "documents", "source": "doc-reference-public-api", "target": "team-new"},
    {"op": "patch_node", "id": "doc-guide-sso-setup", "readers": ["group:security"], "visibility": "restricted"},
]


@pytest.fixture
def instance(seeded_location: str | Path, tmp_path: Path) -> Iterator[Instance]:
    opened = open_instance(Config(store=seeded_location, tokens=tmp_path / "tokens.json"))
    yield opened
    opened.close()


@pytest.fixture
def proposal(instance: Instance) -> str:
    return proposals.propose(instance.store, AGENT, OPERATIONS, "A new team", "Because.").id


def _call(instance: Instance, who: Principal, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return instance.snapshot.dispatcher.call_tool(who, "test", tool, args).as_json()


def test_a_read_at_a_proposal_shows_the_graph_as_if_merged_and_writes_nothing(
    instance: Instance, proposal: str
) -> None:
    before = instance.store.revision()
    at = {"proposal": proposal}
    assert _call(instance, READER, "get_node", {"id": TEAM, **at})["node"]["properties"]["mission"] == "Proposed."
    assert _call(instance, READER, "get_node", {"id": TEAM})["node"]["properties"]["mission"] != "Proposed."
    assert _call(instance, READER, "get_node", {"id": "team-new", **at})["node"]["type"] == "Team"
    assert _call(instance, READER, "get_node", {"id": "team-new"})["error"]["code"] == "not_found"

    teams = _call(instance, READER, "find_nodes", {"type": "Team", "limit": 100, **at})
    now = _call(instance, READER, "find_nodes", {"type": "Team", "limit": 100})
    assert teams["total"] == now["total"] + 1
    assert [n["id"] for n in teams["items"]] == sorted([n["id"] for n in now["items"]] + ["team-new"])
    assert teams["revision"] == before

    owned = _call(instance, READER, "get_neighbors", {"id": TEAM, "edge_types": ["owns"], "limit": 100, **at})
    owned_now = _call(instance, READER, "get_neighbors", {"id": TEAM, "edge_types": ["owns"], "limit": 100})
    assert {i["node"]["id"] for i in owned_now["items"]} - {i["node"]["id"] for i in owned["items"]} == {SERVICE}
    documented = _call(instance, READER, "get_neighbors", {"id": "team-new", "limit": 100, **at})
    assert [(i["node"]["id"], i["edge"]["type"]) for i in documented["items"]] == [
        ("doc-reference-public-api", "documents")
    ]
    assert instance.store.revision() == before


def test_a_read_at_a_proposal_hides_what_the_caller_may_not_read_now_or_as_proposed(
    instance: Instance, proposal: str
) -> None:
    at = {"proposal": proposal}
    # made restricted by the proposal: hidden from a reader outside its group, as proposed
    assert _call(instance, READER, "get_node", {"id": "doc-guide-sso-setup"})["node"]["visibility"] != "restricted"
    assert _call(instance, READER, "get_node", {"id": "doc-guide-sso-setup", **at})["error"]["code"] == "forbidden"
    # restricted now: hidden at a proposal too, shown to its group
    assert _call(instance, READER, "get_node", {"id": VAULT, **at})["error"]["code"] == "forbidden"
    assert _call(instance, PAYMENTS, "get_node", {"id": VAULT, **at})["node"]["id"] == VAULT
    services = _call(instance, READER, "find_nodes", {"type": "Service", "limit": 100, **at})
    assert VAULT not in {n["id"] for n in services["items"]}
    assert VAULT in {n["id"] for n in _call(instance, PAYMENTS, "find_nodes",
                                            {"type": "Service", "limit": 100, **at})["items"]}  # fmt: skip
    neighbours = _call(instance, READER, "get_neighbors", {"id": TEAM, "limit": 100, **at})
    assert VAULT not in {i["node"]["id"] for i in neighbours["items"]}


def test_what_a_read_at_a_proposal_does_not_answer_is_refused_naming_the_argument(
    instance: Instance, proposal: str
) -> None:
    at = {"proposal": proposal}
    refused = _call(instance, READER, "find_nodes", {"type": "Team", "where": {"area": "product"}, **at})
    assert refused["error"]["code"] == "invalid_arguments"
    assert refused["error"]["problems"][0]["pointer"] == "/where"
    deep = _call(instance, READER, "get_neighbors", {"id": TEAM, "depth": 2, **at})
    assert deep["error"]["problems"][0]["pointer"] == "/depth"
    both = _call(instance, READER, "get_node", {"id": TEAM, "at": 1, **at})
    assert both["error"]["code"] == "invalid_arguments"
    assert both["error"]["problems"][0]["pointer"] == "/at"
    hostile = _call(instance, READER, "get_node", {"id": TEAM, "proposal": "p-' OR 1=1 --"})
    assert hostile["error"]["problems"][0]["pointer"] == "/proposal"


def test_a_closed_or_unknown_proposal_is_an_error(instance: Instance, proposal: str) -> None:
    assert _call(instance, READER, "get_node", {"id": TEAM, "proposal": "p-000000000000"})["error"]["code"] == (
        "not_found"
    )
    proposals.review(instance.store, REVIEWER, proposal, "approve", "ok", Reviewers())
    closed = _call(instance, READER, "get_node", {"id": TEAM, "proposal": proposal})
    assert closed["error"]["code"] == "invalid"
    assert "merged" in closed["error"]["message"]
    assert _call(instance, READER, "get_node", {"id": TEAM})["node"]["properties"]["mission"] == "Proposed."


def test_a_neighbours_read_at_a_proposal_runs_here_even_where_walks_run_in_a_worker(
    seeded_location: str | Path,
) -> None:
    """A walk worker reads the store's views; the proposal's view is this process's dry run, so it is read here."""
    with walking_in_a_worker(seeded_location) as instance:
        id_ = proposals.propose(instance.store, AGENT, OPERATIONS, "A new team", "Because.").id
        args = {"id": "team-new", "limit": 100}
        documented = _call(instance, READER, "get_neighbors", {**args, "proposal": id_})
        assert [i["node"]["id"] for i in documented["items"]] == ["doc-reference-public-api"]
        assert _call(instance, READER, "get_neighbors", {"id": TEAM, "limit": 5})["items"]  # the worker answers one


@pytest.mark.anyio
async def test_a_read_at_a_proposal_is_the_same_on_rest_and_graphql(instance: Instance, proposal: str) -> None:
    async with asgi(instance) as http:
        http.headers["Authorization"] = "Bearer " + token(instance, "rob", "reader")
        rest = await http.get(f"/api/nodes/{TEAM}", params={"proposal": proposal})
        assert rest.status_code == 200, rest.text
        assert rest.json()["node"]["properties"]["mission"] == "Proposed."
        query = '{ get_node(id: "%s", proposal: "%s") { revision node { id ... on Team { properties { mission } } } } }'
        graphql = (await http.post("/graphql", json={"query": query % (TEAM, proposal)})).json()
        assert graphql["data"]["get_node"]["node"]["properties"]["mission"] == "Proposed.", graphql
        # an edge field under a read at a proposal reads at the proposal too (GraphQL's one pin per query)
        edges = ('{ get_node(id: "%s", proposal: "%s") { node { ... on Team { owns(limit: 100) '
                 "{ items { node { id } } } } } } }")  # fmt: skip
        owned = (await http.post("/graphql", json={"query": edges % (TEAM, proposal)})).json()
        ids = {i["node"]["id"] for i in owned["data"]["get_node"]["node"]["owns"]["items"]}
        assert SERVICE not in ids
        assert ids
        refused = await http.get("/api/nodes", params={"type": "Team", "text": "x", "proposal": proposal})
        assert refused.status_code == 400
        assert refused.json()["errors"][0]["pointer"] == "/text"
