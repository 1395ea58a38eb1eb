"""SQLite and PostgreSQL give the same search: for every query of the retrieval benchmark over the sample data,
and for the benchmark's synthetic queries over a synthetic store, the two backends' first ten hits are the same
nodes in the same order with the same scores and snippets, for an admin and for a reader."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.retrieval import SYNTHETIC_QUERIES, load_queries
from core.app.synthetic import write_synthetic
from core.index.search import parse_query, search
from core.lang.model import Model, default_seed_path
from core.store import Store, open_store
from core.store.interchange import import_path
from core.values.records import Sight
from tests.postgres_server import Server

READER = Sight(frozenset({"public", "internal"}), ("group:payments", "group:team-03"))


@pytest.fixture
def stores(tmp_path: Path, postgres_server: Server, model: Model) -> Iterator[tuple[Store, Store]]:
    url = postgres_server.new_database()
    pair = (open_store(tmp_path / "canon.db", model), open_store(url, model))
    yield pair
    for store in pair:
        store.close()
    postgres_server.drop_database(url)


def top(store: Store, model: Model, sight: Sight | None, text: str) -> list[tuple[Any, ...]]:
    hits = search(store, model, sight, parse_query("search", text), None).hits[:10]
    return [(h.node.id, round(h.score, 9), h.property, h.snippet) for h in hits]


def assert_agree(stores: tuple[Store, Store], model: Model, queries: list[str]) -> None:
    sqlite, postgresql = stores
    for sight in (None, READER):
        disagree = [q for q in queries if top(sqlite, model, sight, q) != top(postgresql, model, sight, q)]
        assert disagree == [], f"the backends rank these differently (sight {sight}): {disagree}"


def test_both_backends_rank_the_benchmark_queries_alike(stores: tuple[Store, Store], model: Model) -> None:
    for store in stores:
        import_path(store, default_seed_path(), principal="test:seed")
    assert_agree(stores, model, [q.text for q in load_queries()])


def test_both_backends_rank_a_synthetic_store_alike(stores: tuple[Store, Store], model: Model, tmp_path: Path) -> None:
    data = tmp_path / "synthetic.jsonl"
    write_synthetic(data, 3000)
    for store in stores:
        import_path(store, data, principal="test:synthetic")
    assert_agree(stores, model, list(SYNTHETIC_QUERIES))
