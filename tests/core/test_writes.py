"""The write tools through the dispatch path: every test writes to a store of its own (a copy of a seeded store)."""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from core.dispatch.dispatcher import ToolResult
from core.dispatch.registry import Registry, build_registry, type_schema
from core.index.graph import GraphIndex
from core.lang.model import Model, parse_model
from core.ops.config import Config
from core.seam.instance import Instance, open_instance
from core.store import Store, open_existing_store, open_store
from core.store.interchange import import_path
from core.values.principal import ANONYMOUS, LOCAL, Principal
from core.values.records import Change, edge_key

TEAM = "team-payments"  # public
CASCADE = "team-billing"  # public, 22 edges, every one between nodes WRITER can see
PERSON = "person-ada-okafor"  # internal; member_of team-payments (role lead)
SERVICE = "svc-checkout-api"  # public
HIDDEN = "svc-fraud-scoring"  # restricted to group:payments, group:ml, group:security
HIDDEN_EDGE = ("depends_on", SERVICE, HIDDEN)
MEMBERSHIP = ("member_of", PERSON, TEAM)
NEW = "team-quasar"  # not in the seed data

WRITER = Principal("wendy", frozenset({"writer"}), frozenset({"ops"}))
READER = Principal("rita", frozenset({"reader"}), frozenset({"payments"}))
PAYMENTS_WRITER = Principal("pat", frozenset({"writer"}), frozenset({"payments"}))
WRITE_TOOLS = ("upsert_node", "patch_node", "delete_node", "upsert_edge", "delete_edge", "write_batch")
PROPOSAL_WRITES = {  # writes to a proposal, not to the graph -> (destructive, idempotent); a merge is review_proposal's
    "propose_changes": (False, False),  # each call opens a new proposal
    "revise_proposal": (False, True),  # the same revision twice leaves the same proposal
    "withdraw_proposal": (True, False),  # closes it for good
    "comment_on_proposal": (False, False),  # each call adds a comment
    "review_proposal": (True, False),  # closes it, and an approval merges
}


# -- fixtures and helpers -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def seeded_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store seeded once for the module; each test copies it (seeding every test's store would be slow)."""
    path = tmp_path_factory.mktemp("seeded") / "canon.db"
    open_instance(Config(store=path)).close()
    return path


@pytest.fixture(scope="module")
def registry(model: Model) -> Registry:
    """Building a registry takes about a second and depends only on the model: the module shares one."""
    return build_registry(model)


def open_copy(file: Path, tmp_path: Path, model: Model, registry: Registry) -> Instance:
    """An instance on a copy of a store file; what `open_instance` opens for an existing store, without
    parsing the model and building the registry again for every test."""
    path = tmp_path / "canon.db"
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{file}{suffix}").exists():
            shutil.copyfile(f"{file}{suffix}", f"{path}{suffix}")
    opened_store = open_store(path, model)
    opened = Instance(Config(store=path), model, opened_store, GraphIndex.build(opened_store), registry=registry)
    assert opened_store.stats().nodes == 377  # a copy of the seeded store, not a fresh empty one
    return opened


@pytest.fixture
def instance(seeded_file: Path, tmp_path: Path, model: Model, registry: Registry) -> Iterator[Instance]:
    opened = open_copy(seeded_file, tmp_path, model, registry)
    yield opened
    opened.close()


@pytest.fixture
def store(instance: Instance) -> Store:
    return instance.store


def index_of(instance: Instance) -> GraphIndex:
    assert instance.index is not None
    return instance.index


def call(instance: Instance, name: str, arguments: dict[str, Any], principal: Principal = LOCAL) -> ToolResult:
    return instance.dispatcher.call_tool(principal, "test", name, arguments)


def ok(instance: Instance, name: str, arguments: dict[str, Any], principal: Principal = LOCAL) -> dict[str, Any]:
    result = call(instance, name, arguments, principal)
    assert result.value is not None, result.as_json()
    return result.value


def error(instance: Instance, name: str, arguments: dict[str, Any], principal: Principal = LOCAL) -> dict[str, Any]:
    result = call(instance, name, arguments, principal)
    assert result.is_error, result.as_json()
    body: dict[str, Any] = result.as_json()["error"]
    return body


def team(slug: str, **extra: Any) -> dict[str, Any]:
    """Valid Team properties (slug, name, mission and area are required)."""
    return {"slug": slug, "name": slug.title(), "mission": f"The {slug} team's mission.", "area": "platform", **extra}


def service(name: str) -> dict[str, Any]:
    return {"name": name, "description": f"The {name} service.", "lifecycle": "production", "tier": 2}


def node_json(store: Store, id: str) -> dict[str, Any]:
    node = store.node(id)
    assert node is not None, id
    return node.to_json()


def changes_since(store: Store, revision: int) -> list[Change]:
    return store.changes(revision, 100_000)


def incident(store: Store, id: str) -> set[str]:
    return {e.key for e in store.iter_edges() if id in (e.source, e.target)}


def edge_args(edge: tuple[str, str, str], **extra: Any) -> dict[str, Any]:
    type_, source, target = edge
    return {"type": type_, "source": source, "target": target, **extra}


def stored_edge_revision(store: Store, edge: tuple[str, str, str]) -> int:
    found = store.edge(*edge)
    assert found is not None
    return found.revision


# -- upsert_node --------------------------------------------------------------------------------------------------


def test_upsert_node_creates_a_node_and_logs_one_change(instance: Instance, store: Store) -> None:
    before = store.revision()

    value = ok(instance, "upsert_node", {"id": NEW, "type": "Team", "properties": team("quasar")}, WRITER)

    stored = node_json(store, NEW)
    assert (value["created"], value["changed"], value["revision"]) == (True, True, before + 1)
    assert value["node"] == stored
    assert stored["properties"] == team("quasar")
    assert (stored["revision"], stored["visibility"], stored["updated_by"]) == (before + 1, "internal", "wendy")
    [change] = changes_since(store, before)
    assert (change.revision, change.op, change.kind, change.key, change.type) == (
        before + 1,
        "put",
        "node",
        NEW,
        "Team",
    )
    assert change.principal == "wendy"
    assert change.before is None
    assert change.after == stored


def test_upsert_node_replaces_all_properties_of_an_existing_node(instance: Instance, store: Store) -> None:
    old = node_json(store, TEAM)
    before = store.revision()
    properties = team("payments", name="Payments & Ledger")  # drops slack_channel, oncall, founded and tags

    value = ok(instance, "upsert_node", {"id": TEAM, "type": "Team", "properties": properties}, WRITER)

    stored = node_json(store, TEAM)
    assert (value["created"], value["changed"], value["revision"]) == (False, True, before + 1)
    assert value["node"] == stored
    assert stored["properties"] == properties  # replaced, not merged
    assert stored["created_at"] == old["created_at"]
    assert (stored["revision"], stored["updated_by"]) == (before + 1, "wendy")
    [change] = changes_since(store, before)
    assert (change.op, change.key, change.principal) == ("put", TEAM, "wendy")
    assert change.before == old
    assert change.after == stored


def test_upsert_node_identical_to_the_stored_node_changes_nothing(instance: Instance, store: Store) -> None:
    current = node_json(store, TEAM)
    before = store.revision()
    arguments = {"id": TEAM, "type": "Team", "properties": current["properties"], "visibility": "public"}

    value = ok(instance, "upsert_node", arguments, WRITER)
    again = ok(instance, "upsert_node", {**arguments, "expected_revision": current["revision"]}, WRITER)

    for answer in (value, again):
        assert (answer["created"], answer["changed"], answer["revision"]) == (False, False, before)
        assert answer["node"] == current
    assert store.revision() == before
    assert changes_since(store, before) == []
    assert node_json(store, TEAM) == current  # not even updated_at moved


# -- keeping visibility and readers -------------------------------------------------------------------------------


def test_a_new_node_without_visibility_is_internal(instance: Instance, store: Store) -> None:
    ok(instance, "upsert_node", {"id": NEW, "type": "Team", "properties": team("quasar")})

    assert (node_json(store, NEW)["visibility"], node_json(store, NEW).get("readers")) == ("internal", None)


def test_readers_without_visibility_make_a_node_restricted(instance: Instance, store: Store) -> None:
    value = ok(
        instance, "upsert_node", {"id": NEW, "type": "Team", "properties": team("quasar"), "readers": ["group:ops"]}
    )

    stored = node_json(store, NEW)
    assert (stored["visibility"], stored["readers"]) == ("restricted", ["group:ops"])
    assert value["node"] == stored


def test_replacing_a_node_without_visibility_or_readers_keeps_them(instance: Instance, store: Store) -> None:
    readers = ["group:ops", "user:someone"]
    ok(instance, "upsert_node", {"id": NEW, "type": "Team", "properties": team("quasar"), "readers": readers})
    before = store.revision()

    value = ok(instance, "upsert_node", {"id": NEW, "type": "Team", "properties": team("quasar", oncall=True)}, WRITER)

    stored = node_json(store, NEW)
    assert (stored["visibility"], stored["readers"], stored["properties"]["oncall"]) == ("restricted", readers, True)
    assert value["node"] == stored
    [change] = changes_since(store, before)
    assert change.after is not None
    assert (change.after["visibility"], change.after["readers"]) == ("restricted", readers)


def test_replacing_the_public_seed_team_without_visibility_keeps_it_public(instance: Instance, store: Store) -> None:
    ok(instance, "upsert_node", {"id": TEAM, "type": "Team", "properties": team("payments")}, WRITER)

    assert node_json(store, TEAM)["visibility"] == "public"  # not reset to the default for new nodes


def test_giving_a_visibility_replaces_visibility_and_readers(instance: Instance, store: Store) -> None:
    ok(instance, "upsert_node", {"id": NEW, "type": "Team", "properties": team("quasar"), "readers": ["group:ops"]})

    ok(instance, "upsert_node", {"id": NEW, "type": "Team", "properties": team("quasar"), "visibility": "public"})

    stored = node_json(store, NEW)
    assert (stored["visibility"], stored.get("readers")) == ("public", None)
    assert index_of(instance).graph.nodes[NEW]["visibility"] == "public"


# -- patch_node ---------------------------------------------------------------------------------------------------


def test_patch_node_changes_only_what_it_names_and_keeps_every_other_property(instance: Instance, store: Store) -> None:
    stored = node_json(store, TEAM)
    before = store.revision()

    value = ok(instance, "patch_node", {"id": TEAM, "properties": {"name": "Payments & Ledger", "tags": None}}, WRITER)

    after = node_json(store, TEAM)
    expected = {k: v for k, v in stored["properties"].items() if k != "tags"} | {"name": "Payments & Ledger"}
    assert after["properties"] == expected  # mission, area, slack_channel, oncall, founded: all still there
    assert (after["visibility"], after["created_at"], after["updated_by"]) == ("public", stored["created_at"], "wendy")
    assert value == {"node": after, "changed": True, "revision": before + 1}
    [change] = changes_since(store, before)
    assert (change.op, change.key, change.principal, change.before, change.after) == (
        "put",
        TEAM,
        "wendy",
        stored,
        after,
    )


def test_patch_node_that_changes_nothing_writes_nothing(instance: Instance, store: Store) -> None:
    stored = node_json(store, TEAM)
    before = store.revision()

    value = ok(instance, "patch_node", {"id": TEAM, "properties": {"name": stored["properties"]["name"], "nope": None}})
    empty = ok(instance, "patch_node", {"id": TEAM})

    assert value == empty == {"node": stored, "changed": False, "revision": before}
    assert store.revision() == before


@pytest.mark.parametrize("batch", [False, True], ids=["tool", "write_batch"])
def test_patching_a_node_that_does_not_exist_is_not_found_and_writes_nothing(
    instance: Instance, store: Store, batch: bool
) -> None:
    before = store.revision()
    patch = {"id": NEW, "properties": {"name": "Quasar"}}
    first = {"op": "upsert_node", "id": "team-pulsar", "type": "Team", "properties": team("pulsar")}

    body = error(instance, *(("write_batch", {"operations": [first, {"op": "patch_node", **patch}]}) if batch else
                             ("patch_node", patch)), WRITER)  # fmt: skip

    assert (body["code"], body["kind"], body["key"]) == ("not_found", "node", NEW)
    assert store.revision() == before
    assert store.node("team-pulsar") is None


def test_a_patch_sees_the_node_as_the_batch_left_it(instance: Instance, store: Store) -> None:
    """The patch applies inside the write transaction to the state it commits on: here, the batch's own
    earlier operations, which a patch computed before the commit would undo."""
    operations = [
        {"op": "upsert_node", "id": NEW, "type": "Team", "properties": team("quasar", oncall=True)},
        {"op": "patch_node", "id": NEW, "properties": {"name": "Quasar One"}},
        {"op": "patch_node", "id": NEW, "properties": {"oncall": None}, "visibility": "public"},
    ]

    value = ok(instance, "write_batch", {"operations": operations}, WRITER)

    assert node_json(store, NEW)["properties"] == team("quasar") | {"name": "Quasar One"}
    assert node_json(store, NEW)["visibility"] == "public"
    assert [r["op"] for r in value["results"]] == ["upsert_node", "patch_node", "patch_node"]
    assert all(r["changed"] and r["key"] == NEW for r in value["results"])


def test_patch_node_replaces_visibility_and_readers_only_when_given(instance: Instance, store: Store) -> None:
    ok(instance, "patch_node", {"id": TEAM, "visibility": "restricted", "readers": ["group:ops"]})
    ok(instance, "patch_node", {"id": TEAM, "properties": {"oncall": False}})
    kept = node_json(store, TEAM)

    ok(instance, "patch_node", {"id": TEAM, "visibility": "internal", "readers": None})

    assert (kept["visibility"], kept["readers"]) == ("restricted", ["group:ops"])
    assert (node_json(store, TEAM)["visibility"], node_json(store, TEAM).get("readers")) == ("internal", None)
    assert index_of(instance).graph.nodes[TEAM]["visibility"] == "internal"


def test_making_a_restricted_node_public_without_removing_its_readers_names_the_readers(
    instance: Instance, store: Store
) -> None:
    before = store.revision()

    body = error(instance, "patch_node", {"id": HIDDEN, "visibility": "public"})

    assert (body["code"], [p["pointer"] for p in body["problems"]]) == ("invalid", ["/readers"])
    assert store.revision() == before


def test_a_patched_write_is_audited_like_every_write(instance: Instance, store: Store) -> None:
    records: list[Any] = []
    instance.dispatcher.audit_hooks.append(records.append)

    value = ok(instance, "patch_node", {"id": TEAM, "properties": {"oncall": False}}, WRITER)

    [record] = [r for r in records if r.target == "patch_node"]
    assert (record.principal, record.action, record.outcome, record.revision) == (
        "wendy", "tools/call", "ok", value["revision"])  # fmt: skip


# -- the model's default visibility per type ----------------------------------------------------------------------

SERVICE_READERS = ["group:ops", "user:wendy"]


@pytest.fixture(scope="module")
def defaults_model(model: Model) -> Model:
    """The default model, where a new Team is public and a new Service restricted to ops and wendy by default."""
    document = copy.deepcopy(dict(model.document))
    document["$defs"]["Team"]["x-canon-node"]["defaults"] = {"visibility": "public"}
    document["$defs"]["Service"]["x-canon-node"]["defaults"] = {"visibility": "restricted", "readers": SERVICE_READERS}
    document["x-canon-model"] = {**document["x-canon-model"], "version": "1.1.0"}  # a changed model is a new version
    return parse_model(document, source="defaults.schema.json")


@pytest.fixture(scope="module")
def defaults_registry(defaults_model: Model) -> Registry:
    return build_registry(defaults_model)


@pytest.fixture(scope="module")
def defaults_file(
    seeded_file: Path, tmp_path_factory: pytest.TempPathFactory, defaults_model: Model, defaults_registry: Registry
) -> Path:
    """The seeded store (every seed node already has its visibility), having applied `defaults_model`."""
    folder = tmp_path_factory.mktemp("defaults")
    path = folder / "canon.db"
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{seeded_file}{suffix}").exists():
            shutil.copyfile(f"{seeded_file}{suffix}", f"{path}{suffix}")
    store = open_existing_store(path)
    try:
        store.apply_model(defaults_model, principal="test")  # the one way a store's model changes
    finally:
        store.close()
    return path


@pytest.fixture
def defaults(
    defaults_file: Path, tmp_path: Path, defaults_model: Model, defaults_registry: Registry
) -> Iterator[Instance]:
    opened = open_copy(defaults_file, tmp_path, defaults_model, defaults_registry)
    yield opened
    opened.close()


def _create_on(path: str, instance: Instance, tmp_path: Path, id: str, type: str, props: dict[str, Any]) -> None:
    """Create a node on a write path, giving neither visibility nor readers."""
    if path == "upsert_node":
        ok(instance, "upsert_node", {"id": id, "type": type, "properties": props})
    elif path == "write_batch":
        ok(
            instance,
            "write_batch",
            {"operations": [{"op": "upsert_node", "id": id, "type": type, "properties": props}]},
        )
    else:
        file = tmp_path / "new.jsonl"
        file.write_text(json.dumps({"kind": "node", "id": id, "type": type, "properties": props}) + "\n")
        import_path(instance.store, file, principal="importer")


WRITE_PATHS = ["upsert_node", "write_batch", "import"]


@pytest.mark.parametrize("path", WRITE_PATHS)
def test_a_new_node_given_no_visibility_takes_its_types_default_on_every_write_path(
    defaults: Instance, tmp_path: Path, path: str
) -> None:
    _create_on(path, defaults, tmp_path, NEW, "Team", team("quasar"))
    _create_on(path, defaults, tmp_path, "svc-quasar-api", "Service", service("quasar-api"))
    person = {"email": "zed@example.org", "name": "Zed", "handle": "zed", "title": "Engineer", "role": "engineer"}
    _create_on(path, defaults, tmp_path, "person-zed", "Person", person)

    team_node, service_node = node_json(defaults.store, NEW), node_json(defaults.store, "svc-quasar-api")
    assert (team_node["visibility"], team_node.get("readers")) == ("public", None)
    assert (service_node["visibility"], service_node["readers"]) == ("restricted", SERVICE_READERS)
    assert node_json(defaults.store, "person-zed")["visibility"] == "internal"  # Person declares no default


@pytest.mark.parametrize("path", WRITE_PATHS)
def test_a_visibility_or_readers_given_on_create_win_over_the_types_default(
    defaults: Instance, tmp_path: Path, path: str
) -> None:
    if path == "import":
        file = tmp_path / "new.jsonl"
        records = [{"kind": "node", "id": NEW, "type": "Team", "properties": team("quasar"), "visibility": "internal"},
                   {"kind": "node", "id": "svc-quasar-api", "type": "Service", "properties": service("quasar-api"),
                    "readers": ["group:payments"]}]  # fmt: skip
        file.write_text("".join(json.dumps(r) + "\n" for r in records))
        import_path(defaults.store, file, principal="importer")
    else:
        writes = [{"op": "upsert_node", "id": NEW, "type": "Team", "properties": team("quasar"),
                   "visibility": "internal"},
                  {"op": "upsert_node", "id": "svc-quasar-api", "type": "Service",
                   "properties": service("quasar-api"), "readers": ["group:payments"]}]  # fmt: skip
        for w in writes if path == "upsert_node" else []:
            ok(defaults, "upsert_node", {k: v for k, v in w.items() if k != "op"})
        if path == "write_batch":
            ok(defaults, "write_batch", {"operations": writes})

    assert node_json(defaults.store, NEW)["visibility"] == "internal"
    assert node_json(defaults.store, "svc-quasar-api")["readers"] == ["group:payments"]


@pytest.mark.parametrize("path", [*WRITE_PATHS, "patch_node"])
def test_existing_nodes_keep_their_visibility_whatever_the_types_default(
    defaults: Instance, tmp_path: Path, path: str
) -> None:
    """Adopting the model changes no stored node, and neither does rewriting one without a visibility."""
    public, hidden = node_json(defaults.store, SERVICE), node_json(defaults.store, HIDDEN)
    assert (public["visibility"], hidden["visibility"]) == ("public", "restricted")  # Service's default: restricted

    for node in (public, hidden):
        if path == "patch_node":
            ok(defaults, "patch_node", {"id": node["id"], "properties": {"tier": 3}})
        else:
            _create_on(path, defaults, tmp_path, node["id"], "Service", node["properties"] | {"tier": 3})

    for node in (public, hidden):
        after = node_json(defaults.store, node["id"])
        assert (after["visibility"], after.get("readers"), after["properties"]["tier"]) == (
            node["visibility"], node.get("readers"), 3)  # fmt: skip


def test_describe_model_and_the_type_resource_show_each_types_default(defaults: Instance) -> None:
    types = {t["name"]: t for t in ok(defaults, "describe_model", {})["node_types"]}

    assert (types["Team"]["default_visibility"], "default_readers" in types["Team"]) == ("public", False)
    assert (types["Service"]["default_visibility"], types["Service"]["default_readers"]) == (
        "restricted", SERVICE_READERS)  # fmt: skip
    assert types["Person"]["default_visibility"] == "internal"
    annotation = type_schema(defaults.model, "Service")["$defs"]["Service"]["x-canon-node"]
    assert annotation["defaults"] == {"visibility": "restricted", "readers": SERVICE_READERS}


# -- delete_node --------------------------------------------------------------------------------------------------


def test_delete_node_without_edges_deletes_it_and_logs_one_change(instance: Instance, store: Store) -> None:
    ok(instance, "upsert_node", {"id": NEW, "type": "Team", "properties": team("quasar")})
    old = node_json(store, NEW)
    before = store.revision()

    value = ok(instance, "delete_node", {"id": NEW}, WRITER)

    assert value == {"id": NEW, "deleted_edges": 0, "revision": before + 1}
    assert store.node(NEW) is None
    [change] = changes_since(store, before)
    assert (change.revision, change.op, change.kind, change.key, change.type) == (
        before + 1,
        "delete",
        "node",
        NEW,
        "Team",
    )
    assert (change.principal, change.before, change.after) == ("wendy", old, None)


def test_delete_node_with_edges_is_refused_without_cascade(instance: Instance, store: Store) -> None:
    edges = incident(store, CASCADE)
    before = store.revision()

    body = error(instance, "delete_node", {"id": CASCADE}, WRITER)

    assert body["code"] == "invalid"
    [problem] = body["problems"]
    assert problem["pointer"] == "/id"
    assert f"has {len(edges)} edge(s)" in problem["message"]
    assert "cascade" in problem["message"]
    assert store.revision() == before
    assert store.node(CASCADE) is not None
    assert incident(store, CASCADE) == edges


def test_delete_node_with_cascade_deletes_each_edge_first_then_the_node(instance: Instance, store: Store) -> None:
    old = node_json(store, CASCADE)
    edges = {e.key: e.to_json() for e in store.iter_edges() if CASCADE in (e.source, e.target)}
    assert len(edges) > 10
    before = store.revision()

    value = ok(instance, "delete_node", {"id": CASCADE, "cascade": True}, WRITER)

    assert value == {"id": CASCADE, "deleted_edges": len(edges), "revision": before + len(edges) + 1}
    changes = changes_since(store, before)
    assert [c.revision for c in changes] == list(range(before + 1, before + len(edges) + 2))
    *edge_changes, node_change = changes
    assert {c.key: c.before for c in edge_changes} == edges
    assert all((c.op, c.kind, c.after, c.principal) == ("delete", "edge", None, "wendy") for c in edge_changes)
    assert (node_change.op, node_change.kind, node_change.key, node_change.before) == ("delete", "node", CASCADE, old)
    assert store.node(CASCADE) is None
    assert incident(store, CASCADE) == set()


# -- upsert_edge and delete_edge ----------------------------------------------------------------------------------


def test_upsert_edge_creates_then_replaces_an_edge(instance: Instance, store: Store) -> None:
    edge = ("depends_on", SERVICE, "svc-search-api")
    assert store.edge(*edge) is None
    before = store.revision()

    created = ok(instance, "upsert_edge", edge_args(edge, properties={"criticality": "soft"}), WRITER)
    replaced = ok(instance, "upsert_edge", edge_args(edge, properties={"criticality": "hard"}), WRITER)

    stored = store.edge(*edge)
    assert stored is not None
    assert (created["created"], created["changed"], created["revision"]) == (True, True, before + 1)
    assert (replaced["created"], replaced["changed"], replaced["revision"]) == (False, True, before + 2)
    assert replaced["edge"] == stored.to_json()
    assert (stored.properties, stored.revision, stored.updated_by) == ({"criticality": "hard"}, before + 2, "wendy")
    first, second = changes_since(store, before)
    assert (first.op, first.kind, first.key, first.type, first.principal) == (
        "put",
        "edge",
        edge_key(*edge),
        "depends_on",
        "wendy",
    )
    assert (first.before, first.after) == (None, created["edge"])
    assert (second.before, second.after) == (created["edge"], stored.to_json())


def test_upsert_edge_identical_to_the_stored_edge_changes_nothing(instance: Instance, store: Store) -> None:
    stored = store.edge(*MEMBERSHIP)
    assert stored is not None
    before = store.revision()

    value = ok(instance, "upsert_edge", edge_args(MEMBERSHIP, properties=dict(stored.properties)), WRITER)

    assert value == {"edge": stored.to_json(), "created": False, "changed": False, "revision": before}
    assert store.revision() == before


def test_delete_edge_deletes_it_and_logs_one_change(instance: Instance, store: Store) -> None:
    stored = store.edge(*MEMBERSHIP)
    assert stored is not None
    before = store.revision()

    value = ok(instance, "delete_edge", edge_args(MEMBERSHIP), WRITER)

    assert value == {"key": edge_key(*MEMBERSHIP), "revision": before + 1}
    assert store.edge(*MEMBERSHIP) is None
    [change] = changes_since(store, before)
    assert (change.op, change.kind, change.key, change.principal) == ("delete", "edge", edge_key(*MEMBERSHIP), "wendy")
    assert (change.before, change.after) == (stored.to_json(), None)


# -- validation ---------------------------------------------------------------------------------------------------

INVALID: list[tuple[str, dict[str, Any], list[str], str]] = [
    (
        "upsert_node",
        {"id": NEW, "type": "Team", "properties": team("quasar", name="", area="galaxy")},
        ["/properties/area", "/properties/name"],
        "'galaxy' is not one of",
    ),
    (
        "upsert_node",
        {"id": NEW, "type": "Team", "properties": {"slug": "quasar", "name": "Quasar", "area": "data"}},
        ["/properties"],
        "'mission' is a required property",
    ),
    (
        "upsert_node",
        {"id": NEW, "type": "Team", "properties": team("quasar", tags=["Not A Tag"])},
        ["/properties/tags/0"],
        "does not match",
    ),
    ("upsert_node", {"id": NEW, "type": "Team", "properties": team("payments")}, ["/properties/slug"], TEAM),
    ("upsert_node", {"id": TEAM, "type": "Service", "properties": service("payments")}, ["/type"], "cannot change"),
    (
        "upsert_node",
        {"id": NEW, "type": "Team", "properties": team("quasar"), "visibility": "public", "readers": ["group:ops"]},
        ["/readers"],
        "only allowed on restricted nodes",
    ),
    (
        "patch_node",
        {"id": TEAM, "properties": {"mission": None, "area": "galaxy", "oncall": "yes"}},
        ["/properties/area", "/properties/mission", "/properties/oncall"],
        "Team requires 'mission'; a patch cannot remove it",
    ),
    ("patch_node", {"id": TEAM, "readers": ["group:ops"]}, ["/readers"], "only allowed on restricted nodes"),
    ("patch_node", {"id": TEAM, "properties": {"slug": "search"}}, ["/properties/slug"], "team-search"),
    ("delete_node", {"id": "team-nobody"}, ["/id"], "No node with id 'team-nobody'"),
    (
        "upsert_edge",
        edge_args(("member_of", PERSON, "team-nobody"), properties={"role": "lead"}),
        ["/target"],
        "No node",
    ),
    ("upsert_edge", edge_args(("member_of", TEAM, TEAM), properties={"role": "lead"}), ["/source"], "cannot start"),
    ("upsert_edge", edge_args(MEMBERSHIP, properties={"role": "boss"}), ["/properties/role"], "'boss' is not one of"),
    ("upsert_edge", edge_args(MEMBERSHIP), ["/properties"], "'role' is a required property"),
    (
        "upsert_edge",
        edge_args(("member_of", PERSON, "team-search"), properties={"role": "lead"}),
        ["/target"],
        "at most one is allowed",
    ),
    ("delete_edge", edge_args(("member_of", PERSON, "team-search")), [""], "No edge"),
    (
        "upsert_node",
        {"id": NEW, "type": "Team", "properties": team("quasar", founded="yesterday")},
        ["/properties/founded"],
        "is not a 'date'",
    ),
    (
        "write_batch",
        {
            "operations": [
                {
                    "op": "upsert_node",
                    "id": "svc-quasar",
                    "type": "Service",
                    "properties": service("quasar") | {"repository": "https://exa mple.org/quasar"},
                }
            ]
        },
        ["/operations/0/properties/repository"],
        "is not a 'uri'",  # it passes the model's pattern ^https:// ; the uri format is what refuses it
    ),
]


@pytest.mark.parametrize(
    ("name", "arguments", "pointers", "fragment"),
    INVALID,
    ids=[f"{name}-{'+'.join(pointers) or 'root'}-{i}" for i, (name, _, pointers, _) in enumerate(INVALID)],
)
def test_invalid_writes_name_every_problem_by_pointer_and_write_nothing(
    instance: Instance, store: Store, name: str, arguments: dict[str, Any], pointers: list[str], fragment: str
) -> None:
    nodes = {n.id: n for n in store.iter_nodes()}
    before = store.revision()

    body = error(instance, name, arguments, WRITER)

    assert body["code"] == "invalid"
    assert sorted(p["pointer"] for p in body["problems"]) == pointers
    assert any(fragment in p["message"] for p in body["problems"]), body["problems"]
    assert "nothing was written" in body["message"]
    assert store.revision() == before
    assert {n.id: n for n in store.iter_nodes()} == nodes


def test_arguments_outside_the_input_schema_are_refused_before_any_write(instance: Instance, store: Store) -> None:
    before = store.revision()

    body = error(instance, "upsert_node", {"id": "not an id", "type": "Starship", "properties": {}})

    assert body["code"] == "invalid_arguments"
    assert sorted(p["pointer"] for p in body["problems"]) == ["/id", "/type"]
    assert store.revision() == before


@pytest.mark.parametrize("tool", ["upsert_node", "write_batch"])
def test_an_id_with_a_trailing_newline_is_refused_before_any_write(instance: Instance, store: Store, tool: str) -> None:
    before = store.revision()
    arguments: dict[str, Any] = {"id": f"{NEW}\n", "type": "Team", "properties": team("quasar")}
    if tool == "write_batch":
        arguments = {"operations": [{"op": "upsert_node", **arguments}]}

    body = error(instance, tool, arguments)

    assert body["code"] == "invalid_arguments"
    assert [p["pointer"] for p in body["problems"]] == ["/id" if tool == "upsert_node" else "/operations/0/id"]
    assert store.revision() == before
    assert store.node(f"{NEW}\n") is None


# -- conflicts ----------------------------------------------------------------------------------------------------

Target = Callable[[Store], tuple[str, dict[str, Any], str, int]]
"""A write naming an expected revision, from the store: (tool, arguments without it, conflicting key, current)."""


def _node_target(store: Store) -> tuple[str, dict[str, Any], str, int]:
    return (
        "upsert_node",
        {"id": TEAM, "type": "Team", "properties": team("payments")},
        TEAM,
        node_json(store, TEAM)["revision"],
    )


def _delete_node_target(store: Store) -> tuple[str, dict[str, Any], str, int]:
    return "delete_node", {"id": CASCADE, "cascade": True}, CASCADE, node_json(store, CASCADE)["revision"]


def _edge_target(store: Store) -> tuple[str, dict[str, Any], str, int]:
    arguments = edge_args(MEMBERSHIP, properties={"role": "manager"})
    return "upsert_edge", arguments, edge_key(*MEMBERSHIP), stored_edge_revision(store, MEMBERSHIP)


def _delete_edge_target(store: Store) -> tuple[str, dict[str, Any], str, int]:
    return "delete_edge", edge_args(MEMBERSHIP), edge_key(*MEMBERSHIP), stored_edge_revision(store, MEMBERSHIP)


def _patch_target(store: Store) -> tuple[str, dict[str, Any], str, int]:
    return "patch_node", {"id": TEAM, "properties": {"oncall": False}}, TEAM, node_json(store, TEAM)["revision"]


TARGETS: dict[str, Target] = {
    "upsert_node": _node_target,
    "patch_node": _patch_target,
    "delete_node": _delete_node_target,
    "upsert_edge": _edge_target,
    "delete_edge": _delete_edge_target,
}


def _with_expected(name: str, arguments: dict[str, Any], expected: int, *, batch: bool) -> tuple[str, dict[str, Any]]:
    """The call to make: the tool itself, or write_batch with a valid new node first and then the operation."""
    if not batch:
        return name, {**arguments, "expected_revision": expected}
    first = {"op": "upsert_node", "id": NEW, "type": "Team", "properties": team("quasar")}
    return "write_batch", {"operations": [first, {"op": name, **arguments, "expected_revision": expected}]}


@pytest.mark.parametrize("batch", [False, True], ids=["tool", "write_batch"])
@pytest.mark.parametrize("tool", list(TARGETS))
def test_a_stale_expected_revision_is_a_conflict_naming_the_current_revision(
    instance: Instance, store: Store, tool: str, batch: bool
) -> None:
    name, arguments, key, current = TARGETS[tool](store)
    stale = current - 1
    before = store.revision()
    nodes = {n.id: n for n in store.iter_nodes()}

    body = error(instance, *_with_expected(name, arguments, stale, batch=batch), WRITER)

    assert body["code"] == "conflict"
    assert (body["key"], body["expected"], body["actual"]) == (key, stale, current)
    assert f"is at revision {current}" in body["message"]
    assert f"expected revision {stale}" in body["message"]
    assert store.revision() == before
    assert {n.id: n for n in store.iter_nodes()} == nodes  # NEW from the batch's first operation is not there


@pytest.mark.parametrize("batch", [False, True], ids=["tool", "write_batch"])
@pytest.mark.parametrize("tool", list(TARGETS))
def test_the_current_expected_revision_is_accepted(instance: Instance, store: Store, tool: str, batch: bool) -> None:
    name, arguments, key, current = TARGETS[tool](store)
    before = store.revision()

    ok(instance, *_with_expected(name, arguments, current, batch=batch), WRITER)

    assert store.revision() > before
    assert key in {c.key for c in changes_since(store, before)}


def test_expected_revision_zero_creates_a_node_only_once(instance: Instance, store: Store) -> None:
    arguments = {"id": NEW, "type": "Team", "properties": team("quasar"), "expected_revision": 0}

    created = ok(instance, "upsert_node", arguments, WRITER)
    body = error(instance, "upsert_node", {**arguments, "properties": team("quasar", oncall=True)}, WRITER)

    assert created["created"] is True
    assert body["code"] == "conflict"
    assert (body["expected"], body["actual"]) == (0, created["revision"])
    assert f"is at revision {created['revision']}" in body["message"]
    assert node_json(store, NEW)["properties"] == team("quasar")


def test_expected_revision_zero_creates_an_edge_only_once(instance: Instance, store: Store) -> None:
    edge = ("depends_on", SERVICE, "svc-search-api")

    created = ok(instance, "upsert_edge", edge_args(edge, properties={"criticality": "soft"}, expected_revision=0))
    body = error(instance, "upsert_edge", edge_args(edge, properties={"criticality": "hard"}, expected_revision=0))

    assert (body["code"], body["expected"], body["actual"]) == ("conflict", 0, created["revision"])
    stored = store.edge(*edge)
    assert stored is not None
    assert stored.properties == {"criticality": "soft"}


def test_expected_revision_of_a_missing_node_is_a_conflict_saying_it_does_not_exist(
    instance: Instance, store: Store
) -> None:
    before = store.revision()

    body = error(
        instance, "upsert_node", {"id": NEW, "type": "Team", "properties": team("quasar"), "expected_revision": 7}
    )

    assert (body["code"], body["key"], body["expected"], body["actual"]) == ("conflict", NEW, 7, 0)
    assert "does not exist" in body["message"]
    assert store.node(NEW) is None
    assert store.revision() == before


# -- write_batch --------------------------------------------------------------------------------------------------


def _quasar_batch() -> list[dict[str, Any]]:
    """A new team, a new person in it, a new service it owns: later operations need the earlier ones."""
    person = {
        "email": "zed@northwind.example",
        "name": "Zed Quasar",
        "handle": "zed-quasar",
        "title": "Engineer",
        "role": "engineer",
    }
    return [
        {"op": "upsert_node", "id": NEW, "type": "Team", "properties": team("quasar")},
        {"op": "upsert_node", "id": "person-zed-quasar", "type": "Person", "properties": person},
        {"op": "upsert_edge", "type": "member_of", "source": "person-zed-quasar", "target": NEW,
         "properties": {"role": "lead"}},
        {"op": "upsert_node", "id": "svc-quasar-api", "type": "Service", "properties": service("quasar-api")},
        {"op": "upsert_edge", "type": "owns", "source": NEW, "target": "svc-quasar-api"},
    ]  # fmt: skip


def test_write_batch_later_operations_see_earlier_ones(instance: Instance, store: Store) -> None:
    before = store.revision()

    value = ok(instance, "write_batch", {"operations": _quasar_batch()}, WRITER)

    keys = [NEW, "person-zed-quasar", "member_of:person-zed-quasar->team-quasar", "svc-quasar-api",
            "owns:team-quasar->svc-quasar-api"]  # fmt: skip
    ops = [o["op"] for o in _quasar_batch()]
    assert value == {
        "results": [
            {"op": op, "key": key, "changed": True, "revision": before + i}
            for i, (op, key) in enumerate(zip(ops, keys, strict=True), start=1)
        ],
        "changes": 5,
        "revision": before + 5,
        "dry_run": False,
    }
    changes = changes_since(store, before)
    assert [(c.revision, c.key, c.principal) for c in changes] == [
        (before + i, key, "wendy") for i, key in enumerate(keys, start=1)
    ]
    assert store.edge("member_of", "person-zed-quasar", NEW) is not None
    assert store.edge("owns", NEW, "svc-quasar-api") is not None


def test_write_batch_with_one_bad_operation_writes_nothing(instance: Instance, store: Store) -> None:
    operations = _quasar_batch()
    operations.insert(3, {"op": "upsert_node", "id": "team-nova", "type": "Team", "properties": team("nova", name="")})
    operations.append({"op": "delete_edge", **edge_args(MEMBERSHIP)})  # valid on its own
    before = store.revision()
    count = store.stats().changes

    body = error(instance, "write_batch", {"operations": operations}, WRITER)

    assert body["code"] == "invalid"
    assert [p["pointer"] for p in body["problems"]] == ["/operations/3/properties/name"]
    assert store.revision() == before
    assert store.stats().changes == count
    assert all(store.node(id) is None for id in (NEW, "person-zed-quasar", "svc-quasar-api", "team-nova"))
    assert store.edge(*MEMBERSHIP) is not None


def test_write_batch_reports_every_problem_at_once_with_operation_pointers(instance: Instance, store: Store) -> None:
    operations = [
        {"op": "upsert_node", "id": NEW, "type": "Team", "properties": team("quasar")},
        {"op": "upsert_node", "id": "team-nova", "type": "Team", "properties": team("nova", name="", area="x")},
        {"op": "upsert_edge", **edge_args(MEMBERSHIP, properties={"role": "boss"})},
        {"op": "delete_node", "id": CASCADE},
        {"op": "delete_edge", **edge_args(("member_of", PERSON, NEW))},
        {"op": "upsert_edge", **edge_args(("owns", NEW, "svc-nowhere"))},
    ]
    before = store.revision()

    body = error(instance, "write_batch", {"operations": operations}, WRITER)

    assert body["code"] == "invalid"
    assert sorted(p["pointer"] for p in body["problems"]) == [
        "/operations/1/properties/area",
        "/operations/1/properties/name",
        "/operations/2/properties/role",
        "/operations/3/id",
        "/operations/4",
        "/operations/5/target",
    ]
    assert "The batch has 6 problem(s)" in body["message"]
    assert store.revision() == before
    assert store.node(NEW) is None


def test_write_batch_dry_run_checks_everything_and_writes_nothing(instance: Instance, store: Store) -> None:
    before = store.revision()

    value = ok(instance, "write_batch", {"operations": _quasar_batch(), "dry_run": True}, WRITER)

    assert value == {
        "results": [
            {"op": o["op"], "key": o.get("id") or edge_key(o["type"], o["source"], o["target"]), "changed": False}
            for o in _quasar_batch()
        ],
        "changes": 0,
        "revision": before,
        "dry_run": True,
    }
    assert store.revision() == before
    assert store.node(NEW) is None
    assert index_of(instance).revision == before


def test_write_batch_dry_run_still_reports_problems_and_conflicts(instance: Instance, store: Store) -> None:
    bad = _quasar_batch()
    bad[2]["properties"] = {"role": "lead", "since": "yesterday"}
    stale = [{"op": "delete_edge", **edge_args(MEMBERSHIP), "expected_revision": 1}]
    before = store.revision()

    problems = error(instance, "write_batch", {"operations": bad, "dry_run": True})
    conflict = error(instance, "write_batch", {"operations": stale, "dry_run": True})

    assert [p["pointer"] for p in problems["problems"]] == ["/operations/2/properties/since"]
    assert (conflict["code"], conflict["actual"]) == ("conflict", stored_edge_revision(store, MEMBERSHIP))
    assert store.revision() == before


def test_write_batch_cascade_counts_every_edge_and_reports_the_nodes_last_revision(
    instance: Instance, store: Store
) -> None:
    edges = incident(store, CASCADE)
    before = store.revision()

    value = ok(instance, "write_batch", {"operations": [{"op": "delete_node", "id": CASCADE, "cascade": True}]})

    last = before + len(edges) + 1
    assert value == {
        "results": [{"op": "delete_node", "key": CASCADE, "changed": True, "revision": last}],
        "changes": len(edges) + 1,
        "revision": last,
        "dry_run": False,
    }


def test_write_batch_reports_each_operations_own_change(instance: Instance, store: Store) -> None:
    """Per the output schema, `changed` says whether *the operation* changed anything and `revision` is *its*
    change, even when several operations of the batch name the same node."""
    first = {"op": "upsert_node", "id": NEW, "type": "Team", "properties": team("quasar")}
    second = {**first, "properties": team("quasar", oncall=True)}
    before = store.revision()

    value = ok(instance, "write_batch", {"operations": [first, second, second]})

    assert value["changes"] == 2  # the third operation finds the node exactly like this already
    assert [c.revision for c in changes_since(store, before)] == [before + 1, before + 2]
    assert value["results"] == [
        {"op": "upsert_node", "key": NEW, "changed": True, "revision": before + 1},
        {"op": "upsert_node", "key": NEW, "changed": True, "revision": before + 2},
        {"op": "upsert_node", "key": NEW, "changed": False},
    ]


# -- every result fits its output schema --------------------------------------------------------------------------

SCHEMA_CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "upsert_node-created": ("upsert_node", {"id": NEW, "type": "Team", "properties": team("quasar")}),
    "upsert_node-restricted": (
        "upsert_node",
        {"id": NEW, "type": "Team", "properties": team("quasar"), "readers": ["group:ops", "user:wendy"]},
    ),
    "upsert_node-replaced": ("upsert_node", {"id": TEAM, "type": "Team", "properties": team("payments")}),
    "patch_node": ("patch_node", {"id": TEAM, "properties": {"oncall": False, "tags": None}}),
    "patch_node-unchanged": ("patch_node", {"id": TEAM, "properties": {"oncall": True}}),
    "delete_node-cascade": ("delete_node", {"id": CASCADE, "cascade": True}),
    "upsert_edge-created": ("upsert_edge", edge_args(("depends_on", SERVICE, "svc-search-api"),
                                                     properties={"criticality": "soft"})),
    "upsert_edge-unchanged": ("upsert_edge", edge_args(("reports_to", PERSON, "person-mateus-carvalho"))),
    "delete_edge": ("delete_edge", edge_args(MEMBERSHIP)),
    "write_batch": ("write_batch", {"operations": _quasar_batch()}),
    "write_batch-dry_run": ("write_batch", {"operations": _quasar_batch(), "dry_run": True}),
}  # fmt: skip


@pytest.mark.parametrize("case", list(SCHEMA_CASES))
def test_every_write_result_validates_against_the_tools_output_schema(instance: Instance, case: str) -> None:
    name, arguments = SCHEMA_CASES[case]
    schema = instance.registry.tool(name).output_schema
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)

    errors = [f"{e.json_path}: {e.message}" for e in validator.iter_errors(ok(instance, name, arguments))]

    assert errors == []


def test_an_unchanged_upsert_node_result_validates_too(instance: Instance, store: Store) -> None:
    current = node_json(store, TEAM)
    schema = instance.registry.tool("upsert_node").output_schema
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)

    value = ok(instance, "upsert_node", {"id": TEAM, "type": "Team", "properties": current["properties"]})

    assert value["changed"] is False
    assert [e.message for e in validator.iter_errors(value)] == []


# -- the index and change listeners see a write at once -----------------------------------------------------------

INDEX_CASES: dict[str, tuple[str, dict[str, Any], Callable[[GraphIndex], bool]]] = {
    "upsert_node": (
        "upsert_node",
        {"id": NEW, "type": "Team", "properties": team("quasar"), "readers": ["group:ops"]},
        lambda index: NEW in index.graph and index.graph.nodes[NEW]["visibility"] == "restricted",
    ),
    "patch_node": (
        "patch_node", {"id": TEAM, "visibility": "internal"},
        lambda index: index.graph.nodes[TEAM]["visibility"] == "internal",
    ),
    "delete_node": ("delete_node", {"id": CASCADE, "cascade": True}, lambda index: CASCADE not in index.graph),
    "upsert_edge": (
        "upsert_edge",
        edge_args(("depends_on", SERVICE, "svc-search-api"), properties={"criticality": "soft"}),
        lambda index: index.graph.has_edge(SERVICE, "svc-search-api", key="depends_on"),
    ),
    "delete_edge": (
        "delete_edge", edge_args(MEMBERSHIP), lambda index: not index.graph.has_edge(PERSON, TEAM, key="member_of")
    ),
    "write_batch": (
        "write_batch",
        {"operations": _quasar_batch()},
        lambda index: index.graph.has_edge(NEW, "svc-quasar-api", key="owns") and "person-zed-quasar" in index.graph,
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(INDEX_CASES))
def test_the_index_and_its_listeners_have_the_write_when_the_call_returns(
    instance: Instance, store: Store, case: str
) -> None:
    name, arguments, reflected = INDEX_CASES[case]
    index = index_of(instance)
    assert not reflected(index)
    heard: list[list[Change]] = []
    index.add_listener(heard.append)
    before = store.revision()

    value = ok(instance, name, arguments, WRITER)

    changes = changes_since(store, before)
    assert changes
    assert heard == [changes]  # told once, with exactly the write's changes
    assert index.revision == value["revision"] == changes[-1].revision
    assert reflected(index)
    assert set(index.graph.edges(keys=True)) == {(s, t, type_) for type_, s, t in store.iter_topology()}
    assert set(index.graph.nodes) == {n.id for n in store.iter_nodes()}
    stats = store.stats()
    assert (+index.node_counts, +index.edge_counts) == (stats.nodes_by_type, stats.edges_by_type)


def test_a_refused_write_tells_no_listener(instance: Instance, store: Store) -> None:
    heard: list[list[Change]] = []
    index_of(instance).add_listener(heard.append)

    error(instance, "delete_node", {"id": CASCADE})
    error(instance, "upsert_node", {"id": TEAM, "type": "Team", "properties": team("payments"), "expected_revision": 1})

    assert heard == []


# -- who may write ------------------------------------------------------------------------------------------------

ONE_OF_EACH: dict[str, dict[str, Any]] = {
    "upsert_node": {"id": NEW, "type": "Team", "properties": team("quasar")},
    "patch_node": {"id": TEAM, "properties": {"oncall": False}},
    "delete_node": {"id": CASCADE, "cascade": True},
    "upsert_edge": edge_args(MEMBERSHIP, properties={"role": "manager"}),
    "delete_edge": edge_args(MEMBERSHIP),
    "write_batch": {"operations": _quasar_batch()},
}


@pytest.mark.parametrize("principal", [READER, ANONYMOUS], ids=["reader", "anonymous"])
@pytest.mark.parametrize("name", WRITE_TOOLS)
def test_a_caller_without_the_writer_role_is_forbidden(
    instance: Instance, store: Store, name: str, principal: Principal
) -> None:
    before = store.revision()

    body = error(instance, name, ONE_OF_EACH[name], principal)

    assert (body["code"], body["kind"], body["key"]) == ("forbidden", "tool", name)
    assert "writer role" in body["message"]
    assert store.revision() == before


@pytest.mark.parametrize("name", WRITE_TOOLS)
def test_a_writer_may_call_every_write_tool(instance: Instance, store: Store, name: str) -> None:
    before = store.revision()

    ok(instance, name, ONE_OF_EACH[name], WRITER)

    assert {c.principal for c in changes_since(store, before)} == {"wendy"}


def test_only_writers_and_admins_are_offered_the_write_tools(instance: Instance) -> None:
    def listed(principal: Principal) -> set[str]:
        return {t.name for t in instance.dispatcher.tools_for(principal, "test")} & set(WRITE_TOOLS)

    assert listed(READER) == set()
    assert listed(ANONYMOUS) == set()
    assert listed(WRITER) == set(WRITE_TOOLS)
    assert listed(LOCAL) == set(WRITE_TOOLS)


HIDDEN_WRITES: dict[str, dict[str, Any]] = {
    "upsert_node": {"id": HIDDEN, "type": "Service", "properties": service("fraud-scoring")},
    "patch_node": {"id": HIDDEN, "properties": {"tier": 2}},
    "delete_node": {"id": HIDDEN, "cascade": True},
    "upsert_edge": edge_args(HIDDEN_EDGE, properties={"criticality": "soft"}),
    "delete_edge": edge_args(HIDDEN_EDGE),
    "write_batch": {
        "operations": [
            {"op": "upsert_node", "id": NEW, "type": "Team", "properties": team("quasar")},
            {"op": "upsert_edge", "type": "owns", "source": NEW, "target": HIDDEN},
        ]
    },
}


@pytest.mark.parametrize("name", WRITE_TOOLS)
def test_a_writer_may_not_write_a_restricted_node_it_cannot_see(instance: Instance, store: Store, name: str) -> None:
    hidden = node_json(store, HIDDEN)
    assert hidden["visibility"] == "restricted"
    assert "group:ops" not in hidden["readers"]
    before = store.revision()

    body = error(instance, name, HIDDEN_WRITES[name], WRITER)

    assert body["code"] == "forbidden"
    assert HIDDEN in body["message"]
    assert store.revision() == before
    assert node_json(store, HIDDEN) == hidden
    assert store.edge(*HIDDEN_EDGE) is not None


@pytest.mark.parametrize("principal", [PAYMENTS_WRITER, LOCAL], ids=["writer-among-its-readers", "admin"])
@pytest.mark.parametrize("name", WRITE_TOOLS)
def test_a_reader_of_the_restricted_node_or_an_admin_may_write_it(
    instance: Instance, store: Store, name: str, principal: Principal
) -> None:
    if name == "write_batch":  # owns: at most one team per service, so free the service first
        ok(instance, "delete_edge", {"type": "owns", "source": TEAM, "target": HIDDEN})
    before = store.revision()

    ok(instance, name, HIDDEN_WRITES[name], principal)

    assert {c.principal for c in changes_since(store, before)} == {principal.name}


def test_a_writer_may_not_delete_edges_it_cannot_see_by_cascading(instance: Instance, store: Store) -> None:
    """`delete_edge` of SERVICE -> HIDDEN is forbidden to WRITER (see above); deleting SERVICE with cascade
    must not delete that edge either, since access.py promises a caller changes only edges between nodes it
    can see."""
    assert store.edge(*HIDDEN_EDGE) is not None
    before = store.revision()

    result = call(instance, "delete_node", {"id": SERVICE, "cascade": True}, WRITER)

    assert store.edge(*HIDDEN_EDGE) is not None, "cascade deleted an edge to a node the writer cannot see"
    assert result.error is not None
    assert result.error.code == "forbidden"
    assert store.revision() == before


# -- annotations --------------------------------------------------------------------------------------------------


def test_the_write_tools_are_exactly_the_tools_that_need_the_write_permission(instance: Instance) -> None:
    changing = {t.name for t in instance.registry.tools if not t.annotations["readOnlyHint"]}
    assert changing == {*WRITE_TOOLS, *PROPOSAL_WRITES, "apply_model"}  # and the admin's model change
    assert {t.name for t in instance.registry.tools if t.permission == "write"} == {*WRITE_TOOLS, *PROPOSAL_WRITES}


@pytest.mark.parametrize("name", sorted(PROPOSAL_WRITES))
def test_proposal_tool_annotations(instance: Instance, name: str) -> None:
    destructive, idempotent = PROPOSAL_WRITES[name]
    assert dict(instance.registry.tool(name).annotations) == {
        "readOnlyHint": False, "destructiveHint": destructive, "idempotentHint": idempotent, "openWorldHint": False,
    }  # fmt: skip


@pytest.mark.parametrize("name", WRITE_TOOLS)
def test_write_tool_annotations(instance: Instance, name: str) -> None:
    assert dict(instance.registry.tool(name).annotations) == {
        "readOnlyHint": False,
        "destructiveHint": True,  # replacing or deleting loses what was there
        "idempotentHint": name != "write_batch",
        "openWorldHint": False,
    }


@pytest.mark.parametrize("name", [n for n in WRITE_TOOLS if n != "write_batch"])
def test_repeating_an_idempotent_write_has_no_further_effect(instance: Instance, store: Store, name: str) -> None:
    assert instance.registry.tool(name).annotations["idempotentHint"] is True
    before = store.revision()
    ok(instance, name, ONE_OF_EACH[name], WRITER)
    after_first = store.revision()
    assert after_first > before
    nodes = {n.id: n for n in store.iter_nodes()}
    edges = {e.key: e for e in store.iter_edges()}

    call(instance, name, ONE_OF_EACH[name], WRITER)  # a repeated delete is refused (nothing to delete)

    assert store.revision() == after_first
    assert {n.id: n for n in store.iter_nodes()} == nodes
    assert {e.key: e for e in store.iter_edges()} == edges


def test_repeating_a_batch_can_write_again_so_it_is_not_idempotent(instance: Instance, store: Store) -> None:
    assert instance.registry.tool("write_batch").annotations["idempotentHint"] is False
    create = {"op": "upsert_node", "id": NEW, "type": "Team", "properties": team("quasar")}
    batch = {"operations": [create, {"op": "delete_node", "id": NEW}]}
    before = store.revision()

    ok(instance, "write_batch", batch)
    ok(instance, "write_batch", batch)

    assert store.revision() == before + 4
