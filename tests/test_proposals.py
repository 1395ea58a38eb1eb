"""Proposals (`core.dispatch.proposals`) on both backends: propose, revise, approve (merged), reject, withdraw,
conflict."""

from __future__ import annotations

from typing import Any

import pytest

from core.dispatch import proposals
from core.store import Store
from core.values.errors import ConflictError, ForbiddenError, NotFoundError, ValidationError
from core.values.operations import operations_of
from core.values.principal import Principal, Reviewers

pytestmark = pytest.mark.both_backends
AGENT = Principal("agent", frozenset({"writer"}))
REVIEWER = Principal("rita", frozenset({"writer"}), frozenset({"reviewers"}))
OTHER = Principal("rita2", frozenset({"writer"}), frozenset({"reviewers"}))
REVIEWERS = Reviewers()


def _a_node(store: Store) -> str:
    return next(n.id for n in store.iter_nodes() if n.visibility != "restricted" and "description" in n.properties)


def _patch(id_: str, name: str) -> list[dict[str, Any]]:
    return [{"op": "patch_node", "id": id_, "properties": {"description": name}}]


def test_propose_revise_approve_merges_once_with_the_author_as_writer(seeded_store: Store) -> None:
    id_ = _a_node(seeded_store)
    p = proposals.propose(seeded_store, AGENT, _patch(id_, "first"), "t", "because")
    assert p.state == "open"
    assert f"node:{id_}" in p.bases
    p = proposals.revise(seeded_store, AGENT, p.id, requested=_patch(id_, "second"))
    check = proposals.diff(seeded_store, p, REVIEWER)
    assert check.clean
    assert check.entries[0].properties["description"]["after"] == "second"
    with pytest.raises(ForbiddenError):
        proposals.review(seeded_store, AGENT, p.id, "approve", "mine", REVIEWERS)
    merged = proposals.review(seeded_store, REVIEWER, p.id, "approve", "ok", REVIEWERS)
    assert merged.state == "merged"
    assert merged.reviewer == "rita"
    assert merged.merge_revision is not None
    node = seeded_store.node(id_)
    assert node is not None
    assert node.properties["description"] == "second"
    assert node.updated_by == "agent"
    with pytest.raises(ValidationError):  # a second approval finds it closed: merged once
        proposals.review(seeded_store, OTHER, p.id, "approve", "me too", REVIEWERS)
    assert seeded_store.revision() == merged.merge_revision


def test_a_record_changed_since_the_base_is_a_conflict_naming_it(seeded_store: Store) -> None:
    id_ = _a_node(seeded_store)
    p = proposals.propose(seeded_store, AGENT, _patch(id_, "mine"), "t", "r")
    seeded_store.commit(operations_of(_patch(id_, "theirs")), principal="someone")
    check = proposals.diff(seeded_store, p, REVIEWER)
    assert not check.clean
    assert check.moved == (f"node:{id_}",)
    assert check.problem is not None
    assert id_ in check.problem
    with pytest.raises(ConflictError) as caught:
        proposals.review(seeded_store, REVIEWER, p.id, "approve", "ok", REVIEWERS)
    assert id_ in str(caught.value)
    assert proposals.get(seeded_store, p.id).state == "open"


def test_reject_and_withdraw_close_a_proposal_without_writing(seeded_store: Store) -> None:
    id_ = _a_node(seeded_store)
    before = seeded_store.revision()
    a = proposals.propose(seeded_store, AGENT, _patch(id_, "a"), "a", "r")
    b = proposals.propose(seeded_store, AGENT, _patch(id_, "b"), "b", "r")
    assert proposals.review(seeded_store, REVIEWER, a.id, "reject", "no", REVIEWERS).state == "rejected"
    with pytest.raises(ForbiddenError):
        proposals.withdraw(seeded_store, REVIEWER, b.id)
    assert proposals.withdraw(seeded_store, AGENT, b.id).state == "withdrawn"
    assert seeded_store.revision() == before
    page, total = proposals.find(seeded_store, AGENT, author="agent", node=id_)
    assert total == 2
    assert {p.state for p in page} == {"rejected", "withdrawn"}


def test_an_invalid_proposal_is_refused_at_once(seeded_store: Store) -> None:
    with pytest.raises(NotFoundError):  # the write path's own error, as write_batch answers it
        proposals.propose(seeded_store, AGENT, [{"op": "patch_node", "id": "no-such-node"}], "t", "r")
    assert proposals.find(seeded_store, AGENT)[1] == 0


def test_the_stores_unit_of_work_commits_its_block_or_nothing(seeded_store: Store) -> None:
    """`Store.unit_of_work` is one write transaction for the tables beside the graph: rolled back if it raises."""
    row = ("p-x", "t", "r", "agent", "open", 0, "[]", "{}", "[]", "now", "now", None, None)
    insert = "INSERT INTO proposals VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"

    def undone() -> None:
        with seeded_store.unit_of_work() as work:
            assert work.execute(insert, row) == 1
            assert work.rows("SELECT id FROM proposals") == [("p-x",)]  # read inside it: what it wrote so far
            raise RuntimeError("undo")

    with pytest.raises(RuntimeError):
        undone()
    assert list(seeded_store.rows("SELECT id FROM proposals")) == []
    with seeded_store.unit_of_work() as work:
        work.execute(insert, row)
    assert [tuple(r) for r in seeded_store.rows("SELECT id, state FROM proposals WHERE id = ?", ("p-x",))] == [
        ("p-x", "open")
    ]
