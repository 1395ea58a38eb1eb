"""Renames declared in a model (`x-canon-renamed-from`): how a model declares them, and the data move adopting the
model makes on every backend (`core.lang.model_migration`), keeping ids, edges, the change log and the audit log."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from core.lang.conditions import Condition
from core.lang.model import Model, check_model, parse_model
from core.lang.model_migration import Rename, declared_renames, renamed_edge, renamed_node
from core.seam.model_diff import WRITES, diff_models
from core.store import NodeQuery, Store, open_existing_store
from core.values.audit import AuditQuery, AuditRecord
from core.values.errors import ModelError
from core.values.records import Edge, Node

pytestmark = pytest.mark.both_backends

Change = Callable[[dict[str, Any]], None]


# -- model documents with renames ----------------------------------------------------------------------------------
def rename_type(document: dict[str, Any], old: str, new: str) -> None:
    """Rename a node or edge type in `document` the way an author does: move the definition, declare the old name,
    and name the new type wherever edge types named the old one."""
    defs: dict[str, Any] = document["$defs"]
    definition = defs.pop(old)
    definition["x-canon-renamed-from"] = old
    defs[new] = definition
    for other in defs.values():
        edge = other.get("x-canon-edge")
        if edge is not None:
            for end in ("source", "target"):
                edge[end] = [new if t == old else t for t in edge[end]]


def rename_property(document: dict[str, Any], type_name: str, old: str, new: str) -> None:
    """Rename a property of a type: move its schema, declare the old name, and follow it in required, key, display
    and text."""
    definition = document["$defs"][type_name]
    props: dict[str, Any] = definition["properties"]
    definition["properties"] = {(new if k == old else k): v for k, v in props.items()}
    definition["properties"][new] = {**props[old], "x-canon-renamed-from": old}
    if "required" in definition:
        definition["required"] = [new if r == old else r for r in definition["required"]]
    node = definition.get("x-canon-node")
    if node is not None:
        for role in ("key", "display"):
            if node[role] == old:
                node[role] = new
        if "text" in node:
            node["text"] = [new if t == old else t for t in node["text"]]


def evolved(model: Model, version: str, *changes: Change) -> Model:
    document = copy.deepcopy(dict(model.document))
    document["x-canon-model"]["version"] = version
    for change in changes:
        change(document)
    return parse_model(document, source=f"renamed-{version}.schema.json")


def team_to_squad(document: dict[str, Any]) -> None:
    rename_type(document, "Team", "Squad")


def member_of_to_belongs_to(document: dict[str, Any]) -> None:
    rename_type(document, "member_of", "belongs_to")


def slug_to_code(type_name: str) -> Change:
    return lambda document: rename_property(document, type_name, "slug", "code")


def title_to_job_title(document: dict[str, Any]) -> None:
    rename_property(document, "Person", "title", "job_title")


def role_to_membership(document: dict[str, Any]) -> None:
    rename_property(document, "member_of", "role", "membership")


@pytest.fixture
def adopt(store_location: str | Path) -> Iterator[Callable[[Model], Store]]:
    """Open the test's store and apply a new model to it (with its renames); closes what it opened."""
    opened: list[Store] = []

    def open_on(model: Model) -> Store:
        opened.append(open_existing_store(store_location))
        opened[-1].apply_model(model, principal="user:admin")
        return opened[-1]

    yield open_on
    for store in opened:
        store.close()


def text_query(store: Store, type_name: str, text: str) -> list[str]:
    """The ids of the nodes of `type_name` whose text properties (as the store's model names them) contain `text`."""
    fields = {name: t.text for name, t in store.model.node_types.items()}
    found, _ = store.find_nodes(NodeQuery(type=type_name, text=text, text_fields=fields), after=None, limit=500)
    return [n.id for n in found]


def by_key(store: Store, type_name: str, value: str) -> list[str]:
    """The ids of the nodes of `type_name` whose key property (as the store's model names it) is `value`: found
    through the store's key column, which adopting a model recomputes."""
    key = store.model.node_types[type_name].key
    query = NodeQuery(type=type_name, conditions=(Condition(key, "eq", value),))
    return [n.id for n in store.find_nodes(query, after=None, limit=5)[0]]


def edges_of(store: Store) -> set[tuple[str, str, str]]:
    return {(e.type, e.source, e.target) for e in store.iter_edges()}


# -- node types ----------------------------------------------------------------------------------------------------
def test_a_node_type_rename_moves_every_node_keeping_ids_properties_and_edges(
    seeded_store: Store, model: Model, adopt: Callable[[Model], Store]
) -> None:
    teams = {n.id: n for n in seeded_store.iter_nodes("Team")}
    edges = edges_of(seeded_store)
    renamed = adopt(evolved(model, "2.0.0", team_to_squad))
    assert list(renamed.iter_nodes("Team")) == []
    squads = {n.id: n for n in renamed.iter_nodes("Squad")}
    assert squads.keys() == teams.keys()
    for id, squad in squads.items():
        assert (squad.properties, squad.revision, squad.created_at) == (
            teams[id].properties, teams[id].revision, teams[id].created_at)  # fmt: skip
    assert edges_of(renamed) == edges
    assert renamed.stats().nodes == seeded_store.stats().nodes


def test_a_renamed_node_type_is_found_by_its_key_and_its_text(
    seeded_store: Store, model: Model, adopt: Callable[[Model], Store]
) -> None:
    team = next(seeded_store.iter_nodes("Team"))
    renamed = adopt(evolved(model, "2.0.0", team_to_squad))
    assert by_key(renamed, "Squad", str(team.properties["slug"])) == [team.id]
    assert team.id in text_query(renamed, "Squad", str(team.properties["name"]))


def test_the_change_log_and_the_audit_log_run_on_through_a_rename(
    seeded_store: Store, model: Model, adopt: Callable[[Model], Store]
) -> None:
    record = AuditRecord("2026-01-01T00:00:00.000Z", "user:a", "mcp-stdio", "tools/call", "get_node", "x", "ok", 1, 1.0)
    seeded_store.append_audit([record])
    before = seeded_store.revision()
    history = seeded_store.changes(0, before + 10)
    teams = len(list(seeded_store.iter_nodes("Team")))
    renamed = adopt(evolved(model, "2.0.0", team_to_squad))
    assert renamed.revision() == before + 1
    assert renamed.changes(0, before + 10)[:before] == history  # every earlier change kept, unchanged
    (change,) = renamed.changes(before, 10)
    assert (change.op, change.kind, change.principal) == ("model", "model", "user:admin")
    assert change.after is not None
    assert change.after["version"] == "2.0.0"
    # the entry says what the rename moved: a reader of the change feed need not diff the two models
    assert change.after["renamed"] == [{"kind": "node type", "from": "Team", "to": "Squad", "type": None,
                                        "records": teams}]  # fmt: skip
    records, total = renamed.audit_records(AuditQuery(principal="user:a"), before=None, limit=10)
    assert total == 1
    assert records[0]["target"] == "get_node"


# -- edge types and properties -------------------------------------------------------------------------------------
def test_an_edge_type_rename_moves_every_edge_with_its_properties(
    seeded_store: Store, model: Model, adopt: Callable[[Model], Store]
) -> None:
    members = {(e.source, e.target): e.properties for e in seeded_store.iter_edges() if e.type == "member_of"}
    assert members
    renamed = adopt(evolved(model, "2.0.0", member_of_to_belongs_to))
    moved = {(e.source, e.target): e.properties for e in renamed.iter_edges() if e.type == "belongs_to"}
    assert moved == members
    assert not [e for e in renamed.iter_edges() if e.type == "member_of"]


def test_a_property_rename_moves_its_values_and_leaves_the_others(
    seeded_store: Store, model: Model, adopt: Callable[[Model], Store]
) -> None:
    people = {n.id: dict(n.properties) for n in seeded_store.iter_nodes("Person")}
    renamed = adopt(evolved(model, "2.0.0", title_to_job_title))
    for person in renamed.iter_nodes("Person"):
        before = people[person.id]
        assert dict(person.properties) == {**{k: v for k, v in before.items() if k != "title"},
                                           "job_title": before["title"]}  # fmt: skip
    someone = next(iter(people.values()))
    found = renamed.nodes(text_query(renamed, "Person", someone["title"]))
    assert found
    assert all(someone["title"].lower() in str(n.properties).lower() for n in found.values())


def test_renaming_a_key_property_keeps_lookups_by_key(
    seeded_store: Store, model: Model, adopt: Callable[[Model], Store]
) -> None:
    teams = {str(n.properties["slug"]): n.id for n in seeded_store.iter_nodes("Team")}
    renamed = adopt(evolved(model, "2.0.0", slug_to_code("Team")))
    assert {slug: by_key(renamed, "Team", slug) for slug in teams} == {s: [i] for s, i in teams.items()}
    assert all("slug" not in n.properties for n in renamed.iter_nodes("Team"))


def test_an_edge_property_rename_moves_the_values_on_edges(
    seeded_store: Store, model: Model, adopt: Callable[[Model], Store]
) -> None:
    roles = {(e.source, e.target): e.properties.get("role") for e in seeded_store.iter_edges() if e.type == "member_of"}
    renamed = adopt(evolved(model, "2.0.0", role_to_membership))
    after = {(e.source, e.target): e for e in renamed.iter_edges() if e.type == "member_of"}
    assert {k: e.properties.get("membership") for k, e in after.items()} == roles
    assert all("role" not in e.properties for e in after.values())


def test_a_type_and_its_property_renamed_together_move_in_one_model_change(
    seeded_store: Store, model: Model, adopt: Callable[[Model], Store]
) -> None:
    slugs = {n.id: n.properties["slug"] for n in seeded_store.iter_nodes("Team")}
    before = seeded_store.revision()
    renamed = adopt(evolved(model, "2.0.0", team_to_squad, slug_to_code("Squad")))
    assert {n.id: n.properties["code"] for n in renamed.iter_nodes("Squad")} == slugs
    assert renamed.revision() == before + 1


def test_a_rename_already_applied_moves_nothing_when_a_later_model_keeps_it(
    seeded_store: Store, model: Model, adopt: Callable[[Model], Store]
) -> None:
    adopt(evolved(model, "2.0.0", team_to_squad)).close()
    squads = {n.id: n for n in seeded_store.iter_nodes("Squad")}

    def mission_optional(document: dict[str, Any]) -> None:
        document["$defs"]["Squad"]["required"].remove("mission")

    later = adopt(evolved(model, "2.1.0", team_to_squad, mission_optional))
    assert {n.id: n for n in later.iter_nodes("Squad")} == squads
    assert declared_renames(later.stored_model().document, later.model) == ()


# -- refusals roll back the move -----------------------------------------------------------------------------------
def test_a_rename_whose_data_the_new_model_refuses_changes_nothing(
    seeded_store: Store, model: Model, adopt: Callable[[Model], Store]
) -> None:
    def squads_need_budget(document: dict[str, Any]) -> None:
        document["$defs"]["Squad"]["properties"]["budget"] = {"description": "Budget.", "type": "integer"}
        document["$defs"]["Squad"]["required"].append("budget")

    revision, teams = seeded_store.revision(), sorted(n.id for n in seeded_store.iter_nodes("Team"))
    with pytest.raises(ModelError):
        adopt(evolved(model, "2.0.0", team_to_squad, squads_need_budget))
    assert sorted(n.id for n in seeded_store.iter_nodes("Team")) == teams
    assert list(seeded_store.iter_nodes("Squad")) == []
    assert seeded_store.revision() == revision
    assert seeded_store.stored_model().digest == model.digest


def test_a_rename_onto_a_name_the_store_still_has_is_refused_naming_where(
    seeded_store: Store, model: Model, adopt: Callable[[Model], Store]
) -> None:
    def handle_from_title(document: dict[str, Any]) -> None:
        person = document["$defs"]["Person"]
        del person["properties"]["title"]
        person["required"].remove("title")
        person["x-canon-node"]["text"].remove("title")
        person["properties"]["handle"]["x-canon-renamed-from"] = "title"

    with pytest.raises(ModelError) as caught:
        adopt(evolved(model, "2.0.0", handle_from_title))
    (problem,) = caught.value.problems
    assert problem.pointer == "/$defs/Person/properties/handle/x-canon-renamed-from"
    assert seeded_store.stored_model().digest == model.digest


# -- the renames in memory agree with the store's move -------------------------------------------------------------
def test_renaming_records_in_memory_gives_what_the_store_holds_after_the_move(
    seeded_store: Store, model: Model, adopt: Callable[[Model], Store]
) -> None:
    new = evolved(model, "2.0.0", team_to_squad, slug_to_code("Squad"), title_to_job_title, role_to_membership,
                  member_of_to_belongs_to)  # fmt: skip
    renames = declared_renames(model.document, new)
    expected_nodes: dict[str, Node] = {n.id: renamed_node(renames, n)[0] for n in seeded_store.iter_nodes()}
    expected_edges: list[Edge] = [renamed_edge(renames, e)[0] for e in seeded_store.iter_edges()]
    renamed = adopt(new)
    assert {n.id: (n.type, dict(n.properties)) for n in renamed.iter_nodes()} == {
        i: (n.type, dict(n.properties)) for i, n in expected_nodes.items()}  # fmt: skip
    assert sorted((e.type, e.source, e.target, sorted(e.properties.items())) for e in renamed.iter_edges()) == sorted(
        (e.type, e.source, e.target, sorted(e.properties.items())) for e in expected_edges)  # fmt: skip


# -- declaring renames (no store) ----------------------------------------------------------------------------------
@pytest.mark.sqlite_only
def test_declared_renames_list_types_then_properties_under_their_new_type(model: Model) -> None:
    new = evolved(model, "2.0.0", team_to_squad, slug_to_code("Squad"), member_of_to_belongs_to)
    assert declared_renames(model.document, new) == (
        Rename("node type", "Team", "Squad", "nodes"),
        Rename("edge type", "member_of", "belongs_to", "edges"),
        Rename("property", "slug", "code", "nodes", "Squad"),
    )


def _problems(model: Model, *changes: Change) -> dict[str, str]:
    document = copy.deepcopy(dict(model.document))
    for change in changes:
        change(document)
    return {p.pointer: p.message for p in check_model(document)}


@pytest.mark.sqlite_only
def test_a_type_renamed_from_a_name_the_model_still_defines_is_a_problem_at_the_annotation(model: Model) -> None:
    def person_from_team(document: dict[str, Any]) -> None:
        document["$defs"]["Person"]["x-canon-renamed-from"] = "Team"

    problems = _problems(model, person_from_team)
    assert list(problems) == ["/$defs/Person/x-canon-renamed-from"]
    assert "'Team'" in problems["/$defs/Person/x-canon-renamed-from"]


@pytest.mark.sqlite_only
def test_two_types_renamed_from_one_name_is_a_problem(model: Model) -> None:
    def both_from_crew(document: dict[str, Any]) -> None:
        document["$defs"]["Person"]["x-canon-renamed-from"] = "Crew"
        document["$defs"]["Team"]["x-canon-renamed-from"] = "Crew"

    assert list(_problems(model, both_from_crew)) == ["/$defs/Team/x-canon-renamed-from"]


@pytest.mark.sqlite_only
def test_a_chain_of_renames_in_one_model_is_a_problem(model: Model) -> None:
    def chain(document: dict[str, Any]) -> None:  # Crew -> Team -> Squad in one step
        rename_type(document, "Team", "Squad")
        document["$defs"]["Team"] = copy.deepcopy(document["$defs"]["Squad"])
        document["$defs"]["Team"]["x-canon-renamed-from"] = "Crew"

    assert "/$defs/Squad/x-canon-renamed-from" in _problems(model, chain)


@pytest.mark.sqlite_only
def test_a_property_renamed_from_a_property_its_type_still_declares_is_a_problem(model: Model) -> None:
    def name_from_handle(document: dict[str, Any]) -> None:
        document["$defs"]["Person"]["properties"]["name"]["x-canon-renamed-from"] = "handle"

    assert list(_problems(model, name_from_handle)) == ["/$defs/Person/properties/name/x-canon-renamed-from"]


@pytest.mark.sqlite_only
def test_a_rename_that_is_no_valid_name_is_a_meta_schema_problem(model: Model) -> None:
    def lowercase_node_type(document: dict[str, Any]) -> None:
        document["$defs"]["Team"]["x-canon-renamed-from"] = "crew"

    def helper_renamed(document: dict[str, Any]) -> None:
        document["$defs"]["Slug"]["x-canon-renamed-from"] = "Handle"

    assert "/$defs/Team/x-canon-renamed-from" in _problems(model, lowercase_node_type)
    assert list(_problems(model, helper_renamed)) == ["/$defs/Slug/x-canon-renamed-from"]


# -- canon model diff ----------------------------------------------------------------------------------------------
@pytest.mark.sqlite_only
def test_model_diff_reports_a_rename_with_the_records_it_moves_and_breaks_the_renamed_surfaces(
    seeded_store: Store, model: Model
) -> None:
    new = evolved(model, "2.0.0", team_to_squad, title_to_job_title)
    teams = sum(1 for _ in seeded_store.iter_nodes("Team"))
    people = sum(1 for n in seeded_store.iter_nodes("Person") if "title" in n.properties)
    report = diff_models(model, new, seeded_store).as_dict()
    assert report["renames"] == [
        {"kind": "node type", "from": "Team", "to": "Squad", "type": None},
        {"kind": "property", "from": "title", "to": "job_title", "type": "Person"},
    ]
    assert report["data"]["refused"] == 0
    assert [m["records"] for m in report["data"]["moved"]] == [teams, people]
    writes = [f for f in report["findings"] if f["surface"] == WRITES and f["change"].startswith("renamed to")]
    assert {f["where"]: f["classification"] for f in writes} == {
        "node type Team": "breaking", "property Person.title": "breaking"}  # fmt: skip
    assert {s: report["surfaces"][s] for s in ("mcp", "rest", "graphql")} == dict.fromkeys(
        ("mcp", "rest", "graphql"), "breaking")  # fmt: skip


@pytest.mark.sqlite_only
def test_model_diff_without_the_rename_refuses_the_stored_records_of_the_old_name(
    seeded_store: Store, model: Model
) -> None:
    def team_gone(document: dict[str, Any]) -> None:
        team_to_squad(document)
        del document["$defs"]["Squad"]["x-canon-renamed-from"]

    report = diff_models(model, evolved(model, "2.0.0", team_gone), seeded_store)
    assert report.renames == ()
    assert report.data is not None
    assert report.data.refused == sum(1 for _ in seeded_store.iter_nodes("Team"))


# -- a running server follows a rename applied elsewhere --------------------------------------------------------------
def test_a_server_follows_a_type_rename_applied_by_another_process_with_its_graph_index(
    tmp_path: Path, model: Model
) -> None:
    """The records move to the new type name in the applying transaction, without a change each: a running
    server that hears of the model change loads its graph index again, so walks and counts use the new name."""
    from core.ops.config import Config
    from core.seam.instance import open_instance
    from core.values.principal import Principal

    config = Config(store=tmp_path / "canon.db", tokens=tmp_path / "tokens.json", walk_workers=0)
    server = open_instance(config)  # seeded with the sample data
    try:
        team = next(server.store.iter_nodes("Team")).id
        elsewhere = open_existing_store(config.store)
        try:
            elsewhere.apply_model(evolved(model, "2.0.0", team_to_squad), principal="user:admin")
        finally:
            elsewhere.close()
        assert server.reload_model()
        assert server.index is not None
        assert server.index.graph.nodes[team]["type"] == "Squad"
        admin = Principal("ada", frozenset({"admin"}))
        described = server.dispatcher.call_tool(admin, "test", "describe_model", {}).as_json()
        counts = {t["name"]: t["count"] for t in described["node_types"]}
        assert counts["Squad"] > 0  # the index's counts, by the new name
        neighbours = server.dispatcher.call_tool(admin, "test", "get_neighbors", {"id": team}).as_json()
        assert neighbours["total"] > 0
    finally:
        server.close()
