"""The proposal tools through the one dispatch path, on both backends: propose → revise → approve → merged, reject,
withdraw, the conflict rule, the review rule, what a reviewer who may not read a record is shown, a proposal made
invalid by a model change, two reviewers approving at once, and the audit log's links."""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.dispatch.resources import read_resource
from core.lang.model import Model, parse_model
from core.ops.config import Config
from core.seam.instance import Instance, open_instance
from core.values.audit import AuditQuery
from core.values.errors import NotFoundError
from core.values.principal import Principal
from core.values.uris import proposal_uri

pytestmark = pytest.mark.both_backends

AUTHOR = Principal("agent-7", frozenset({"writer"}), frozenset({"payments"}))  # may read the card vault
REVIEWER = Principal("rita", frozenset({"writer"}), frozenset({"reviewers"}))  # may not read the card vault
SECOND = Principal("ravi", frozenset({"writer"}), frozenset({"reviewers"}))
WRITER = Principal("wendy", frozenset({"writer"}))  # not a reviewer
BOSS = Principal("root", frozenset({"admin"}))  # a reviewer by role
PUBLIC = "team-leadership"  # a public team of the sample data
VAULT = "svc-card-vault"  # restricted to group:payments and group:security


@pytest.fixture
def instance(seeded_location: str | Path) -> Iterator[Instance]:
    opened = open_instance(Config(store=seeded_location, seed=False, walk_workers=0))
    yield opened
    opened.close()


def call(instance: Instance, who: Principal, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = instance.dispatcher.call_tool(who, "test", tool, arguments)
    assert result.error is None, (tool, result.error)
    assert result.value is not None
    return result.value


def refused(instance: Instance, who: Principal, tool: str, arguments: dict[str, Any]) -> str:
    """The error code of a call that must fail."""
    result = instance.dispatcher.call_tool(who, "test", tool, arguments)
    assert result.error is not None, (tool, result.value)
    return result.error.code


def patch(id_: str, **properties: Any) -> dict[str, Any]:
    return {"op": "patch_node", "id": id_, "properties": properties}


def propose(instance: Instance, *operations: dict[str, Any], who: Principal = AUTHOR) -> str:
    answer = call(instance, who, "propose_changes", {"title": "t", "rationale": "r", "operations": list(operations)})
    assert answer["state"] == "open"
    return str(answer["id"])


def test_propose_revise_approve_merges_once_and_the_next_read_sees_it(instance: Instance) -> None:
    before = instance.store.revision()
    answer = call(instance, AUTHOR, "propose_changes", {
        "title": "Mission", "rationale": "It changed.", "operations": [patch(PUBLIC, mission="First.")]})  # fmt: skip
    id_ = answer["id"]
    assert (answer["base_revision"], answer["touches"]) == (before, [f"node:{PUBLIC}"])
    assert instance.store.revision() == before  # proposing writes nothing to the graph

    call(instance, AUTHOR, "revise_proposal", {"id": id_, "operations": [patch(PUBLIC, mission="Second.")]})
    shown = call(instance, REVIEWER, "get_proposal", {"id": id_})
    assert shown["applies_cleanly"] is True
    (entry,) = shown["diff"]
    assert (entry["key"], entry["change"]) == (PUBLIC, "changed")
    assert entry["properties"]["mission"]["after"] == "Second."
    assert entry["properties"]["mission"]["before"] != "Second."
    assert shown["operations"] == [patch(PUBLIC, mission="Second.")]

    merged = call(instance, REVIEWER, "review_proposal", {"id": id_, "decision": "approve", "comment": "Good."})
    assert (merged["state"], merged["reviewer"]) == ("merged", "rita")
    assert merged["merge_revision"] == instance.store.revision() == before + 1
    node = call(instance, REVIEWER, "get_node", {"id": PUBLIC})["node"]
    assert node["properties"]["mission"] == "Second."
    assert node["updated_by"] == AUTHOR.name  # written as the author's
    assert refused(instance, SECOND, "review_proposal", {"id": id_, "decision": "approve"}) == "invalid"
    assert instance.store.revision() == before + 1  # merged once

    after = call(instance, AUTHOR, "get_proposal", {"id": id_})
    assert after["proposal"]["state"] == "merged"
    assert [c["decision"] for c in after["proposal"]["comments"]] == ["approve"]


def test_the_audit_log_links_author_reviewer_proposal_and_merge_revision(instance: Instance) -> None:
    id_ = propose(instance, patch(PUBLIC, mission="Audited."))
    merged = call(instance, BOSS, "review_proposal", {"id": id_, "decision": "approve"})
    records, _ = instance.store.audit_records(AuditQuery(target=proposal_uri(id_)), before=None, limit=10)
    steps = {(r["action"], r["principal"], r["revision"], r["surface"]) for r in records}
    assert steps == {("proposals/propose", AUTHOR.name, merged["merge_revision"] - 1, "test"),
                     ("proposals/merge", BOSS.name, merged["merge_revision"], "test")}  # fmt: skip


def test_reject_and_withdraw_close_a_proposal_without_writing(instance: Instance) -> None:
    before = instance.store.revision()
    rejected, withdrawn = propose(instance, patch(PUBLIC, mission="A.")), propose(instance, patch(PUBLIC, mission="B."))
    answer = call(instance, REVIEWER, "review_proposal", {"id": rejected, "decision": "reject", "comment": "No."})
    assert (answer["state"], answer["merge_revision"]) == ("rejected", None)
    assert refused(instance, REVIEWER, "withdraw_proposal", {"id": withdrawn}) == "forbidden"  # not its author
    assert call(instance, AUTHOR, "withdraw_proposal", {"id": withdrawn, "comment": "Later."})["state"] == "withdrawn"
    assert refused(instance, AUTHOR, "revise_proposal", {"id": withdrawn, "title": "again"}) == "invalid"
    assert instance.store.revision() == before
    closed = call(instance, AUTHOR, "find_proposals", {"author": AUTHOR.name})
    assert {p["id"]: p["state"] for p in closed["items"]} == {rejected: "rejected", withdrawn: "withdrawn"}


def test_a_node_changed_since_the_base_is_a_conflict_until_the_author_revises(instance: Instance) -> None:
    id_ = propose(instance, patch(PUBLIC, mission="Mine."))
    call(instance, WRITER, "patch_node", {"id": PUBLIC, "properties": {"mission": "Theirs."}})

    shown = call(instance, REVIEWER, "get_proposal", {"id": id_})
    assert shown["applies_cleanly"] is False
    assert shown["changed_since_base"] == [f"node:{PUBLIC}"]
    assert PUBLIC in shown["problem"]
    result = instance.dispatcher.call_tool(REVIEWER, "test", "review_proposal", {"id": id_, "decision": "approve"})
    assert result.error is not None
    assert result.error.code == "conflict"
    assert PUBLIC in str(result.error)
    assert call(instance, REVIEWER, "get_node", {"id": PUBLIC})["node"]["properties"]["mission"] == "Theirs."

    call(instance, AUTHOR, "revise_proposal", {"id": id_, "operations": [patch(PUBLIC, mission="Mine, again.")]})
    assert call(instance, REVIEWER, "review_proposal", {"id": id_, "decision": "approve"})["state"] == "merged"
    assert call(instance, REVIEWER, "get_node", {"id": PUBLIC})["node"]["properties"]["mission"] == "Mine, again."


def test_the_author_can_never_review_their_own_proposal_nor_can_a_writer_who_is_no_reviewer(
    instance: Instance,
) -> None:
    mine = propose(instance, patch(PUBLIC, mission="By the boss."), who=BOSS)  # an admin is a reviewer by role
    for decision in ("approve", "reject"):
        assert refused(instance, BOSS, "review_proposal", {"id": mine, "decision": decision}) == "forbidden"
    assert refused(instance, WRITER, "review_proposal", {"id": mine, "decision": "approve"}) == "forbidden"
    assert call(instance, WRITER, "comment_on_proposal", {"id": mine, "text": "Why?"})["comments"] == 1
    assert call(instance, BOSS, "get_proposal", {"id": mine})["proposal"]["state"] == "open"


def test_a_reviewer_who_may_not_read_a_touched_record_is_not_shown_it(instance: Instance) -> None:
    id_ = propose(instance, patch(PUBLIC, mission="Public part."), patch(VAULT, description="Secret part."))
    shown = call(instance, REVIEWER, "get_proposal", {"id": id_})
    assert [e["key"] for e in shown["diff"]] == [PUBLIC]
    assert shown["operations"] == [patch(PUBLIC, mission="Public part.")]
    assert shown["proposal"]["touches"] == [f"node:{PUBLIC}"]
    assert VAULT not in json.dumps(shown)
    assert "Secret part." not in json.dumps(shown)
    assert [e["key"] for e in call(instance, AUTHOR, "get_proposal", {"id": id_})["diff"]] == [PUBLIC, VAULT]
    assert call(instance, REVIEWER, "find_proposals", {"node": VAULT})["total"] == 0  # the filter tells nothing
    assert call(instance, AUTHOR, "find_proposals", {"node": VAULT})["total"] == 1
    # a reviewer merges only what it may itself read and write
    assert refused(instance, REVIEWER, "review_proposal", {"id": id_, "decision": "approve"}) == "forbidden"


def _shorter_team_names(model: Model) -> Model:
    document: dict[str, Any] = copy.deepcopy(dict(model.document))
    document["$defs"]["Team"]["properties"]["name"]["maxLength"] = 40
    document["x-canon-model"]["version"] = "9.0.0"
    return parse_model(document, source="model-9.0.0.json")


def test_a_proposal_a_model_change_made_invalid_says_so(instance: Instance) -> None:
    long_name = "Engineering Leadership and Architecture Review"  # 46 characters: fits 80, not 40
    id_ = propose(instance, patch(PUBLIC, name=long_name))
    assert call(instance, REVIEWER, "get_proposal", {"id": id_})["applies_cleanly"] is True
    instance.store.apply_model(_shorter_team_names(instance.store.model), principal="admin")

    shown = call(instance, REVIEWER, "get_proposal", {"id": id_})
    assert shown["applies_cleanly"] is False
    assert "/name" in shown["problem"]
    assert refused(instance, REVIEWER, "review_proposal", {"id": id_, "decision": "approve"}) == "invalid"
    assert call(instance, REVIEWER, "get_proposal", {"id": id_})["proposal"]["state"] == "open"


def test_an_invalid_proposal_is_refused_at_once_with_pointers_into_its_operations(instance: Instance) -> None:
    result = instance.dispatcher.call_tool(AUTHOR, "test", "propose_changes", {
        "title": "t", "rationale": "r",
        "operations": [patch(PUBLIC, mission="ok"), patch(PUBLIC, tier="not a property")]})  # fmt: skip
    assert result.error is not None
    assert result.error.code == "invalid"
    assert [p.pointer for p in getattr(result.error, "problems", ())] == ["/operations/1/properties"]
    assert call(instance, AUTHOR, "find_proposals", {})["total"] == 0


def test_find_proposals_pages_by_cursor_and_filters_by_state_author_and_node(instance: Instance) -> None:
    ids = [propose(instance, patch(PUBLIC, mission=f"M{i}.")) for i in range(5)]
    other = propose(instance, {"op": "patch_node", "id": "svc-checkout-api", "properties": {}}, who=WRITER)
    call(instance, AUTHOR, "withdraw_proposal", {"id": ids[0]})
    seen, cursor, pages = [], None, 0
    while True:
        paging = {"cursor": cursor} if cursor else {}
        page = call(instance, REVIEWER, "find_proposals", {"state": "open", "limit": 2, **paging})
        assert page["total"] == 5
        seen += [p["id"] for p in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert (seen, pages) == (sorted([*ids[1:], other]), 3)
    assert {p["id"] for p in call(instance, REVIEWER, "find_proposals", {"node": PUBLIC})["items"]} == set(ids)
    assert [p["id"] for p in call(instance, REVIEWER, "find_proposals", {"author": WRITER.name})["items"]] == [other]


def test_two_reviewers_approving_at_once_merge_once(instance: Instance, seeded_location: str | Path) -> None:
    """Two instances on one store (two connections, as two servers would), their approvals released together."""
    id_ = propose(instance, patch(PUBLIC, mission="Once."))
    before = instance.store.revision()
    other = open_instance(Config(store=seeded_location, seed=False, walk_workers=0))
    try:
        start = threading.Barrier(2)
        outcomes: dict[str, str] = {}

        def approve(on: Instance, who: Principal) -> None:
            start.wait(timeout=10)
            result = on.dispatcher.call_tool(who, "test", "review_proposal", {"id": id_, "decision": "approve"})
            outcomes[who.name] = "merged" if result.error is None else result.error.code

        threads = [threading.Thread(target=approve, args=(on, who)) for on, who in ((instance, REVIEWER),
                                                                                      (other, SECOND))]  # fmt: skip
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert sorted(outcomes.values()) == ["invalid", "merged"], outcomes
    finally:
        other.close()
    assert instance.store.revision() == before + 1
    changes = instance.store.changes(before, 10)
    assert [(c.key, c.principal) for c in changes] == [(PUBLIC, AUTHOR.name)]
    final = call(instance, AUTHOR, "get_proposal", {"id": id_})["proposal"]
    assert final["reviewer"] == next(name for name, outcome in outcomes.items() if outcome == "merged")
    assert final["merge_revision"] == before + 1


def _read(instance: Instance, who: Principal, uri: str) -> Any:
    content = instance.dispatcher.run(who, "test", "resources/read", uri, {}, lambda ctx: read_resource(ctx, uri))
    return json.loads(content.text)


def test_the_proposal_resource_is_get_proposals_answer_for_the_caller(instance: Instance) -> None:
    id_ = propose(instance, patch(PUBLIC, mission="Public part."), patch(VAULT, description="Secret part."))
    for who in (AUTHOR, REVIEWER):
        read, called = _read(instance, who, proposal_uri(id_)), call(instance, who, "get_proposal", {"id": id_})
        # a diff's planned after-states are stamped when planned: the same but for the time
        assert [(e["key"], e["properties"]) for e in read.pop("diff")] == [
            (e["key"], e["properties"]) for e in called.pop("diff")]  # fmt: skip
        assert read == called
    assert VAULT not in json.dumps(_read(instance, REVIEWER, proposal_uri(id_)))
    with pytest.raises(NotFoundError):
        _read(instance, REVIEWER, proposal_uri("p-000000000000"))


def test_a_writer_cannot_propose_a_change_to_a_record_it_may_not_read(instance: Instance) -> None:
    """Proposing runs the author's own write guard: a proposal is no way round visibility."""
    arguments = {"title": "t", "rationale": "r", "operations": [patch(VAULT, description="Mine now.")]}
    assert refused(instance, WRITER, "propose_changes", arguments) == "forbidden"
    assert call(instance, BOSS, "find_proposals", {})["total"] == 0
