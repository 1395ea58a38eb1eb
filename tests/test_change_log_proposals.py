"""The change log's entries carry the proposal id (issue 29, item 3; ADR 0062), on both backends: every entry a
merge writes names its proposal and no other entry does, on every surface that lists entries (get_changes over
dispatch, REST and GraphQL, the changes resource, the people's pages: the changes page and a node's history); a
store from before the column migrates with its old entries null; a copy keeps the ids. The leak rule: an entry's id
is shown exactly when the entry is (every reader of the change log may read every proposal's summary, ADR 0050), so
a merge touching only what a reader may not see shows that reader no entry and no id."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.dispatch import proposals
from core.dispatch.resources import read_resource
from core.ops.config import Config
from core.seam.instance import Instance, open_instance
from core.store import Store, open_existing_store
from core.values.operations import operations_of
from core.values.principal import Principal, Reviewers
from core.values.uris import CHANGES_URI
from tests.generators.conftest import asgi, token
from tests.old_schemas import drop_change_proposals, set_schema_version, words_keyed_by_id

pytestmark = pytest.mark.both_backends
AUTHOR = Principal("agent", frozenset({"writer"}), frozenset({"payments"}))
REVIEWER = Principal("rita", frozenset({"writer"}), frozenset({"reviewers", "payments"}))
READER = Principal("rob", frozenset({"reader"}))
TEAM, VAULT = "team-payments", "svc-card-vault"  # the vault is restricted to the payments group
BATCH: list[dict[str, Any]] = [
    {"op": "patch_node", "id": TEAM, "properties": {"mission": "Merged from a proposal."}},
    {"op": "upsert_node", "id": "team-new", "type": "Team", "visibility": "public",
     "properties": {"slug": "new", "name": "New", "area": "product", "mission": "New."}},
    {"op": "upsert_edge", "type": "documents", "source": "doc-reference-public-api", "target": "team-new"},
]  # fmt: skip


@pytest.fixture
def instance(seeded_location: str | Path, tmp_path: Path) -> Iterator[Instance]:
    opened = open_instance(Config(store=seeded_location, tokens=tmp_path / "tokens.json"))
    yield opened
    opened.close()


def _call(instance: Instance, who: Principal, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return instance.snapshot.dispatcher.call_tool(who, "test", tool, args).as_json()


def _merge(instance: Instance, operations: list[dict[str, Any]]) -> tuple[str, int]:
    """Propose `operations` as the author and approve them as the reviewer, through the tools: (id, merge revision)."""
    proposed = _call(instance, AUTHOR, "propose_changes", {"title": "t", "rationale": "r", "operations": operations})
    id_ = proposed["id"]
    merged = _call(instance, REVIEWER, "review_proposal", {"id": id_, "decision": "approve"})
    assert merged["state"] == "merged", merged
    return id_, merged["merge_revision"]


def test_every_entry_a_merge_writes_names_its_proposal_and_a_direct_write_none(instance: Instance) -> None:
    before = instance.store.revision()
    direct = _call(instance, AUTHOR, "patch_node", {"id": TEAM, "properties": {"mission": "Written directly."}})
    assert direct["changed"] is True
    id_, merged_at = _merge(instance, BATCH)

    logged = instance.store.changes(before, 100)
    assert [c.revision for c in logged] == list(range(before + 1, merged_at + 1))
    assert [c.proposal for c in logged] == [None] + [id_] * len(BATCH)
    assert "proposal" not in logged[0].to_json()  # a direct write's entry is as it always was

    answered = _call(instance, READER, "get_changes", {"since": before})["items"]
    assert [e.get("proposal") for e in answered] == [None, id_, id_, id_]
    assert "proposal" not in answered[0]
    assert _call(instance, READER, "get_proposal", {"id": id_})["proposal"]["merge_revision"] == merged_at


def test_the_change_at_one_revision_is_read_with_until(instance: Instance) -> None:
    id_, merged_at = _merge(instance, BATCH)
    (entry,) = _call(instance, READER, "get_changes", {"since": merged_at - 1, "until": merged_at})["items"]
    assert (entry["revision"], entry["proposal"]) == (merged_at, id_)
    window = {"since": merged_at - 3, "until": merged_at - 1, "limit": 1}
    answer = _call(instance, READER, "get_changes", window)
    assert (answer["total"], answer["revision"], answer["next_cursor"] is not None) == (2, merged_at - 1, True)
    rest = _call(instance, READER, "get_changes", {**window, "cursor": answer["next_cursor"]})
    assert [e["revision"] for e in rest["items"]] == [merged_at - 1]
    assert _call(instance, READER, "get_changes", {"since": 0, "until": merged_at + 1})["error"]["code"] == "not_found"
    wrong = _call(instance, READER, "get_changes", {"since": 5, "until": 4})["error"]
    assert wrong["code"] == "invalid_arguments"
    assert "/until" in str(wrong)


def test_an_entry_shows_its_proposal_only_to_who_may_see_the_entry(instance: Instance) -> None:
    """The leak rule: the id comes with the entry, and an entry hidden from a reader is not listed at all; what the
    id leads to (the proposal) shows that reader none of the hidden operations."""
    before = instance.store.revision()
    hidden, hidden_at = _merge(instance, [{"op": "patch_node", "id": VAULT, "properties": {"description": "Shh."}}])
    both = [{"op": "patch_node", "id": VAULT, "properties": {"description": "Again."}},
            {"op": "patch_node", "id": TEAM, "properties": {"mission": "Seen."}}]  # fmt: skip
    mixed, mixed_at = _merge(instance, both)

    everything = _call(instance, REVIEWER, "get_changes", {"since": before})["items"]
    assert [(e["key"], e["proposal"]) for e in everything] == [(VAULT, hidden), (VAULT, mixed), (TEAM, mixed)]

    seen = _call(instance, READER, "get_changes", {"since": before})
    assert [(e["key"], e["proposal"]) for e in seen["items"]] == [(TEAM, mixed)]
    assert seen["total"] == 1
    assert hidden not in str(seen)
    assert _call(instance, READER, "get_changes", {"since": hidden_at - 1, "until": hidden_at})["items"] == []
    shown = _call(instance, READER, "get_proposal", {"id": mixed})
    assert [op["id"] for op in shown["operations"]] == [TEAM]
    assert shown["proposal"]["touches"] == [f"node:{TEAM}"]
    assert VAULT not in str(shown)
    resource = instance.dispatcher.run(
        READER, "test", "resources/read", CHANGES_URI, {}, lambda ctx: read_resource(ctx, CHANGES_URI)
    )
    assert hidden not in resource.text
    assert mixed in resource.text
    assert mixed_at == hidden_at + 2


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_rest_graphql_and_the_pages_show_the_proposal(instance: Instance, anyio_backend: str) -> None:
    before = instance.store.revision()
    id_, merged_at = _merge(instance, BATCH)
    bearer = {"Authorization": "Bearer " + token(instance, "rob", "reader")}
    async with asgi(instance) as http:
        http.headers.update(bearer)
        rest = (await http.get("/api/changes", params={"since": before})).json()
        assert [e["proposal"] for e in rest["items"]] == [id_] * len(BATCH)
        one = (await http.get("/api/changes", params={"since": merged_at - 1, "until": merged_at})).json()
        assert [e["revision"] for e in one["items"]] == [merged_at]

        query = "query($since: Int!) { get_changes(since: $since) { items { revision proposal } } }"
        graphql = (await http.post("/graphql", json={"query": query, "variables": {"since": before - 1}})).json()
        assert "errors" not in graphql, graphql
        items = graphql["data"]["get_changes"]["items"]
        assert [e["proposal"] for e in items] == [None, *[id_] * len(BATCH)]

        link = f'<a href="/browse/proposals/{id_}">{id_}</a>'
        changes_page = await http.get("/browse/changes", params={"since": before - 1})
        assert changes_page.status_code == 200, changes_page.text
        assert changes_page.text.count(link) == len(BATCH)
        csv = await http.get("/browse/changes.csv", params={"since": before - 1})
        assert csv.status_code == 200, csv.text
        assert csv.text.splitlines()[0].endswith(",proposal")
        assert csv.text.count(id_) == len(BATCH)

        node_page = await http.get(f"/browse/nodes/{TEAM}")
        assert node_page.status_code == 200, node_page.text
        history = node_page.text.split('id="history-heading"', 1)[1]
        assert history.count(link) == 1  # the state the merge wrote; the earlier ones were written directly
        assert "Proposal" in history


def test_a_store_from_before_the_column_migrates_its_entries_null_and_then_records_merges(
    seeded_store: Store, store_location: str | Path
) -> None:
    """A store as canon left it before the column (SQLite schema 7, PostgreSQL 5; the word index then keyed by id,
    as before ADR 0065) is migrated through every later schema: its entries read as they were, with no id."""
    logged = seeded_store.changes(0, 1_000_000)
    words_keyed_by_id(seeded_store, store_location)
    drop_change_proposals(store_location)
    set_schema_version(store_location, sqlite=7, postgresql=5)
    with pytest.raises(Exception, match="schema version"):  # a read-only open refuses the old schema, named
        open_existing_store(store_location, read_only=True)

    reopened = open_existing_store(store_location)
    try:
        assert reopened.changes(0, 1_000_000) == logged
        assert all(c.proposal is None for c in logged)
        id_ = proposals.propose(reopened, AUTHOR, BATCH[:1], "t", "r").id
        merged = proposals.review(reopened, REVIEWER, id_, "approve", "", Reviewers())
        (entry,) = reopened.changes(merged.merge_revision - 1, 10)  # type: ignore[operator]
        assert entry.proposal == id_
    finally:
        reopened.close()


def test_a_merge_rolled_back_leaves_no_entry_naming_it(seeded_store: Store) -> None:
    """The id is written with the entries, in the merge's transaction: a merge refused as a conflict logs none."""
    p = proposals.propose(seeded_store, AUTHOR, BATCH[:1], "t", "r")
    seeded_store.commit(operations_of([{"op": "patch_node", "id": TEAM, "properties": {"mission": "Meanwhile."}}]),
                        principal="someone")  # fmt: skip
    with pytest.raises(Exception, match="changed since"):
        proposals.review(seeded_store, REVIEWER, p.id, "approve", "", Reviewers())
    assert all(c.proposal is None for c in seeded_store.changes(0, 1_000_000))
