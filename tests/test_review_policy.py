"""Which writes wait for review (`core.dispatch.review`), on both backends: every write tool, called by a writer who
may not write a reviewed type directly, writes nothing and answers the proposal it made instead; the admin, and the
groups `[proposals] direct_groups` names, write directly; the model's own `"review": "required"` counts as the
configuration does; a dry run is checked as before; the proposal merges as any other."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.dispatch.dispatcher import Dispatcher
from core.lang.model import default_model_path, load_model
from core.ops.config import Config
from core.seam.instance import Instance, open_instance
from core.store import open_existing_store
from core.values.errors import ConfigError, ReviewRequiredError
from core.values.principal import Principal

pytestmark = pytest.mark.both_backends
AGENT = Principal("agent", frozenset({"writer"}))
ADMIN = Principal("ada", frozenset({"admin"}))
TRUSTED = Principal("tom", frozenset({"writer"}), frozenset({"stewards"}))
REVIEWER = Principal("rita", frozenset({"writer"}), frozenset({"reviewers"}))
TEAM, SERVICE = "team-payments", "svc-checkout-api"

# each write tool, with arguments that touch a Team (the reviewed type) or an `owns` edge (from a Team)
WRITES: dict[str, dict[str, Any]] = {
    "upsert_node": {"id": "team-new", "type": "Team", "properties": {"slug": "new", "name": "New", "area": "product",
                                                                  "mission": "New."}},
    "patch_node": {"id": TEAM, "properties": {"mission": "Proposed."}},
    "delete_node": {"id": "team-billing", "cascade": True},
    "upsert_edge": {"type": "owns", "source": TEAM, "target": "svc-ledger-service"},
    "delete_edge": {"type": "owns", "source": TEAM, "target": SERVICE},
    "write_batch": {"operations": [{"op": "patch_node", "id": SERVICE, "properties": {"description": "Unreviewed."}},
                                   {"op": "patch_node", "id": TEAM, "properties": {"mission": "In a batch."}}]},
}  # fmt: skip


@pytest.fixture
def reviewed(seeded_location: str | Path) -> Iterator[Instance]:
    """Teams and `owns` edges wait for review; the `stewards` group writes them directly."""
    config = Config(store=seeded_location, review_types=("Team", "owns"), direct_groups=("stewards",))
    instance = open_instance(config)
    yield instance
    instance.close()


def _call(instance: Instance, who: Principal, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = instance.snapshot.dispatcher.call_tool(who, "test", tool, copy.deepcopy(args))
    assert not result.is_error, result.as_json()
    assert result.value is not None
    return result.value


@pytest.mark.parametrize("tool", list(WRITES))
def test_a_writer_s_write_of_a_reviewed_type_becomes_a_proposal_and_writes_nothing(
    reviewed: Instance, tool: str
) -> None:
    before = reviewed.store.revision()
    answer = _call(reviewed, AGENT, tool, WRITES[tool])
    assert reviewed.store.revision() == before  # nothing written, not even the batch's unreviewed Service
    proposal = answer["proposal"]
    assert proposal["state"] == "open"
    assert answer["revision"] == proposal["base_revision"] == before
    assert answer.get("changed", False) is False
    stored = _call(reviewed, REVIEWER, "get_proposal", {"id": proposal["id"]})
    assert stored["proposal"]["author"] == "agent"
    assert stored["proposal"]["title"].startswith(tool)
    expected = WRITES[tool]["operations"] if tool == "write_batch" else [{"op": tool, **WRITES[tool]}]
    assert [{k: v for k, v in op.items() if k in e} for op, e in zip(stored["operations"], expected,
                                                                       strict=True)] == expected  # fmt: skip
    assert stored["applies_cleanly"], stored["problem"]
    if tool == "write_batch":
        assert [r["changed"] for r in answer["results"]] == [False, False]
        assert answer["changes"] == 0


@pytest.mark.parametrize("who", [ADMIN, TRUSTED])
def test_the_admin_and_the_direct_groups_write_a_reviewed_type_directly(reviewed: Instance, who: Principal) -> None:
    answer = _call(reviewed, who, "patch_node", WRITES["patch_node"])
    assert "proposal" not in answer
    assert answer["changed"] is True
    assert reviewed.store.node(TEAM).properties["mission"] == "Proposed."  # type: ignore[union-attr]


def test_a_write_of_an_unreviewed_type_is_written_at_once(reviewed: Instance) -> None:
    answer = _call(reviewed, AGENT, "patch_node", {"id": SERVICE, "properties": {"description": "Direct."}})
    assert "proposal" not in answer
    assert answer["node"]["properties"]["description"] == "Direct."


def test_deleting_a_node_whose_cascade_deletes_a_reviewed_edge_becomes_a_proposal(reviewed: Instance) -> None:
    """A Service is not reviewed, but deleting it deletes the Team's `owns` edge to it."""
    before = reviewed.store.revision()
    answer = _call(reviewed, AGENT, "delete_node", {"id": "svc-refund-service", "cascade": True})
    assert "proposal" in answer
    assert reviewed.store.revision() == before
    assert reviewed.store.node("svc-refund-service") is not None


def test_a_dry_run_is_checked_as_before_and_writes_nothing(reviewed: Instance) -> None:
    answer = _call(reviewed, AGENT, "write_batch", {**WRITES["write_batch"], "dry_run": True})
    assert "proposal" not in answer
    assert answer["dry_run"] is True
    assert _call(reviewed, AGENT, "find_proposals", {})["total"] == 0


def test_an_invalid_reviewed_write_is_refused_as_write_batch_refuses_it_and_nothing_is_proposed(
    reviewed: Instance,
) -> None:
    result = reviewed.snapshot.dispatcher.call_tool(AGENT, "test", "write_batch", {"operations": [
        {"op": "patch_node", "id": TEAM, "properties": {"oncall": "not a boolean"}}]})  # fmt: skip
    assert result.error is not None
    assert result.as_json()["error"]["problems"][0]["pointer"].startswith("/operations/0/properties")
    assert _call(reviewed, AGENT, "find_proposals", {})["total"] == 0


def test_the_proposal_a_write_made_merges_when_a_reviewer_approves_it(reviewed: Instance) -> None:
    id_ = _call(reviewed, AGENT, "patch_node", WRITES["patch_node"])["proposal"]["id"]
    merged = _call(reviewed, REVIEWER, "review_proposal", {"id": id_, "decision": "approve", "comment": "Yes."})
    assert merged["state"] == "merged"
    node = reviewed.store.node(TEAM)
    assert node is not None
    assert node.properties["mission"] == "Proposed."
    assert node.updated_by == "agent"


def test_a_plugin_writing_through_the_commit_hears_that_review_is_required(reviewed: Instance) -> None:
    """The rule is the commit's, not the write tools': any handler's write of a reviewed type is held back."""
    from core.values.operations import operations_of

    dispatcher: Dispatcher = reviewed.snapshot.dispatcher
    ctx = dispatcher.context(AGENT, "test")
    with pytest.raises(ReviewRequiredError) as caught:
        ctx.commit(operations_of([{"op": "patch_node", "id": TEAM, "properties": {"mission": "x"}}]))
    assert caught.value.types == ("Team",)
    assert caught.value.code == "forbidden"


def test_the_model_s_review_annotation_marks_a_type_as_the_configuration_does(
    seeded_location: str | Path, tmp_path: Path
) -> None:
    document = json.loads(default_model_path().read_text(encoding="utf-8"))
    document["$defs"]["Team"]["x-canon-node"]["review"] = "required"
    document["x-canon-model"]["version"] = "1.1.0"
    model = tmp_path / "model.schema.json"
    model.write_text(json.dumps(document), encoding="utf-8")
    store = open_existing_store(seeded_location)  # the operator's path: `canon model apply`
    try:
        store.apply_model(load_model(model), principal="operator")
    finally:
        store.close()
    instance = open_instance(Config(store=seeded_location, model=model))
    try:
        assert instance.model.reviewed_types == frozenset({"Team"})
        assert "proposal" in _call(instance, AGENT, "patch_node", WRITES["patch_node"])
        assert "proposal" not in _call(instance, ADMIN, "patch_node", WRITES["patch_node"])
    finally:
        instance.close()


def test_a_review_type_the_model_does_not_have_is_a_configuration_error_naming_it(
    seeded_location: str | Path,
) -> None:
    with pytest.raises(ConfigError) as caught:
        open_instance(Config(store=seeded_location, review_types=("Teams",))).close()
    assert "'Teams'" in str(caught.value)
    assert caught.value.key == "proposals.review_types"
