"""The word index a ranked search reads holds exactly the rows of the stored nodes, through every way of writing.

The oracle is `word_rows` over the nodes as they are stored: after single and batched puts and deletes, a failed
write, an import, a model change, a copy into a new store, a compaction, and opening a store whose index is
missing, the index's rows (`node_words`) are those, and its vocabulary holds every word among them. On both backends.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from core.lang.model import Model, default_seed_path, parse_model
from core.store import Store, copy_store, open_store
from core.store.interchange import import_path
from core.store.retention import Retention
from core.store.sql import SQLStore, word_rows
from core.store.sqlite import SQLiteStore
from core.values.errors import CanonError
from core.values.operations import DeleteNode, PutNode
from core.values.records import Node, Sight
from tests.old_schemas import set_schema_version, words_keyed_by_id

pytestmark = pytest.mark.both_backends


def rows(store: Store) -> list[tuple[Any, ...]]:
    """The index's rows with each node's number read back as its id (a number no node has reads as None)."""
    numbers = ("node_text_ids k ON k.docid = p.node", "k.id") if isinstance(store, SQLiteStore) else (
        "nodes k ON k.number = p.node", "k.id")  # fmt: skip
    sql = f"SELECT p.word, {numbers[1]}, p.type, p.impact FROM node_words p LEFT JOIN {numbers[0]}"
    return sorted((tuple(r) for r in store.rows(sql)), key=repr)


def assert_reopened_with(full: Any, location: str | Path, model: Model) -> None:
    """The store at `location`, opened again (migrating or rebuilding what it must), holds the word index `full`."""
    store = open_store(location, model)
    try:
        assert rows(store) == full
        assert_in_step(store, model)
    finally:
        store.close()


def index_names(store: Store) -> set[str]:
    sql = ("SELECT name FROM sqlite_master WHERE type = 'index'" if isinstance(store, SQLiteStore)
           else "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()")  # fmt: skip
    return {r[0] for r in store.rows(sql)}


def expected(store: Store, model: Model) -> list[tuple[Any, ...]]:
    return sorted(word_rows(model, store.iter_nodes()), key=repr)


def assert_in_step(store: Store, model: Model) -> None:
    held = rows(store)
    assert held == expected(store, model)
    vocabulary = {r[0]: r[1] for r in store.rows("SELECT word, reversed FROM vocabulary")}
    assert {r[0] for r in held} <= set(vocabulary)
    assert all(backwards == word[::-1] for word, backwards in vocabulary.items())


def team(id_: str, name: str, mission: str) -> Node:
    return Node(id_, "Team", {"slug": id_, "name": name, "mission": mission, "area": "product"})


def test_puts_and_deletes_change_the_index_in_their_commit(seeded_store: Store, model: Model) -> None:
    assert_in_step(seeded_store, model)
    seeded_store.commit([PutNode(team("team-q1", "Quokka Wrangling", "Wrangle quokkas"))], principal="test")
    assert ("quokka", "team-q1") in {(w, i) for w, i, *_ in rows(seeded_store)}
    seeded_store.commit([PutNode(team("team-q1", "Numbat Counting", "Count numbats")),
                         PutNode(team("team-d2", "Dingo Dancing", "Dance")), DeleteNode("team-d2"),
                         PutNode(team("team-w3", "Wombat Herding", "Herd wombats"))], principal="test")  # fmt: skip
    words = {(w, i) for w, i, *_ in rows(seeded_store)}
    assert ("quokka", "team-q1") not in words
    assert ("numbat", "team-q1") in words
    assert not any(i == "team-d2" for _, i in words)
    assert_in_step(seeded_store, model)
    seeded_store.commit([DeleteNode("team-q1")], principal="test")
    assert_in_step(seeded_store, model)


def test_a_failed_write_leaves_the_index_as_it_was(seeded_store: Store, model: Model) -> None:
    before = rows(seeded_store)
    with pytest.raises(CanonError):
        seeded_store.commit([PutNode(team("team-k4", "Kiwi", "Fly")), PutNode(Node("team-bad", "Team", {}))],
                            principal="test")  # fmt: skip
    assert rows(seeded_store) == before


def test_an_import_a_compaction_and_a_copy_keep_the_index_in_step(
    store: Store, model: Model, tmp_path: Path, store_location: str | Path
) -> None:
    import_path(store, default_seed_path(), principal="test:seed")
    assert_in_step(store, model)
    store.compact(Retention(changes_keep_revisions=10))
    assert_in_step(store, model)
    copy_store(store_location, tmp_path / "copy.db")
    copy = open_store(tmp_path / "copy.db", model)
    try:
        assert_in_step(copy, model)
        assert rows(copy) == rows(store)
    finally:
        copy.close()


def test_a_model_that_weighs_other_properties_rebuilds_the_index(seeded_store: Store, model: Model) -> None:
    document = model.document
    version = {**document["x-canon-model"], "version": "1.1.0"}
    node = {**document["$defs"]["Team"]["x-canon-node"], "text": ["slug"]}  # the mission is no longer searched
    other = parse_model({**document, "x-canon-model": version,
                         "$defs": {**document["$defs"], "Team": {**document["$defs"]["Team"], "x-canon-node": node}}},
                        source="test")  # fmt: skip
    seeded_store.apply_model(other, principal="test")
    assert_in_step(seeded_store, other)
    assert rows(seeded_store) != expected(seeded_store, model)


def test_a_store_whose_index_is_missing_builds_it_when_opened(
    seeded_store: Store, model: Model, store_location: str | Path
) -> None:
    full = rows(seeded_store)
    with seeded_store.unit_of_work() as work:
        work.execute("DELETE FROM node_words")
        work.execute("DELETE FROM meta WHERE key = 'text_index'")
    seeded_store.close()
    assert_reopened_with(full, store_location, model)


@pytest.mark.parametrize(
    "sight", [None, Sight(frozenset({"public"}), ()), Sight(frozenset({"internal"}), ("group:payments",))]
)
@pytest.mark.parametrize("types", [None, ["Service", "Team"]])
def test_each_prefix_gets_the_best_nodes_of_its_words_and_says_when_more_were_left(
    seeded_store: Store, sight: Sight | None, types: list[str] | None
) -> None:
    """The store's one-statement answer (PostgreSQL's) is the two-step one of the SQL base, cut flags included."""
    prefixes = ["pay", "ledger", "s", "zzqx", "team"]
    got = seeded_store.prefix_postings(prefixes, types, sight, 3)
    assert got == SQLStore.prefix_postings(cast("SQLStore", seeded_store), prefixes, types, sight, 3)
    assert got[0][1] or types is not None  # "pay": more than 3 nodes hold a word beginning with it
    assert got[2][1]  # "s": more than 32 words begin with it
    assert got[3] == ([], False)
    for (found, _), prefix in zip(got, prefixes, strict=True):
        assert all(word.startswith(prefix) for word, _, _ in found)


def test_a_rebuild_holds_the_same_rows_under_the_same_indexes(seeded_store: Store, model: Model) -> None:
    """The word index built anew in bulk (ADR 0065: rows first, indexes after; on PostgreSQL beside the live one,
    then swapped in) holds what the writes left, and leaves the index's indexes as the schema names them: twice,
    so a swap that left a name behind would fail the second time."""
    full, names = rows(seeded_store), index_names(seeded_store)
    assert {"node_words_rank", "vocabulary_reversed"} <= names
    for _ in range(2):
        cast("SQLStore", seeded_store).rebuild_word_index()
        assert rows(seeded_store) == full
        assert index_names(seeded_store) == names
    assert_in_step(seeded_store, model)
    seeded_store.commit([PutNode(team("team-q1", "Quokka Wrangling", "Wrangle quokkas"))], principal="test")
    seeded_store.commit([DeleteNode("team-q1")], principal="test")
    assert rows(seeded_store) == full


def test_a_store_whose_index_is_keyed_by_id_moves_its_rows_to_numbers_when_opened(
    seeded_store: Store, model: Model, store_location: str | Path
) -> None:
    """A store of the schema before ADR 0065 (rows under the node's id) is migrated with its rows as they were:
    the same words, types and impacts, each under its node's number."""
    full = rows(seeded_store)
    words_keyed_by_id(seeded_store, store_location)
    set_schema_version(store_location, sqlite=8, postgresql=6)
    assert_reopened_with(full, store_location, model)


def test_a_node_keeps_its_number_when_the_model_changes(seeded_store: Store, model: Model) -> None:
    """A word's equally-about nodes are read in number order (ADR 0065), and numbers are given in write order on
    both backends: a model change rebuilds the indexes without renumbering, so the backends keep agreeing."""
    sql = ("SELECT id, docid FROM node_text_ids" if isinstance(seeded_store, SQLiteStore)
           else "SELECT id, number FROM nodes")  # fmt: skip
    before = dict(seeded_store.rows(sql))
    assert sorted(before, key=before.__getitem__) != sorted(before)  # the seed is not written in id order
    document = model.document
    version = {**document["x-canon-model"], "version": "1.1.0"}
    node = {**document["$defs"]["Team"]["x-canon-node"], "text": ["slug"]}
    other = parse_model({**document, "x-canon-model": version,
                         "$defs": {**document["$defs"], "Team": {**document["$defs"]["Team"], "x-canon-node": node}}},
                        source="test")  # fmt: skip
    seeded_store.apply_model(other, principal="test")
    assert dict(seeded_store.rows(sql)) == before
    assert_in_step(seeded_store, other)


def test_an_import_of_many_nodes_builds_the_word_index_anew_after_it(
    store: Store, model: Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL an import that wrote a twentieth or more of the nodes (and at least `WORDS_COMPACT_MIN`)
    ends by building the word index anew, compact (ADR 0065): a new table, the same rows."""
    from core.store import postgres

    monkeypatch.setattr(postgres, "WORDS_COMPACT_MIN", 1)
    table = "SELECT 'node_words'::regclass::oid" if not isinstance(store, SQLiteStore) else "SELECT 1"
    before = store.rows(table)
    import_path(store, default_seed_path(), principal="test:seed")
    assert_in_step(store, model)
    if not isinstance(store, SQLiteStore):
        assert store.rows(table) != before
