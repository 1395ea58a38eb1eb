"""The retrieval benchmark's query set and metrics (benchmarks/retrieval.py)."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest

from benchmarks.retrieval import BM25, KINDS, load_queries, ndcg, recall, reciprocal_rank
from core.lang.model import default_seed_path


def test_the_query_set_holds_at_least_60_queries_and_6_of_every_kind() -> None:
    queries = load_queries()
    kinds = Counter(q.kind for q in queries)
    assert len(queries) >= 60
    assert {kind: kinds[kind] for kind in KINDS if kinds[kind] < 6} == {}


def test_every_judged_id_is_a_node_of_the_sample_data() -> None:
    ids = {n["id"] for n in json.loads(default_seed_path().read_text(encoding="utf-8"))["nodes"]}
    unknown = {(q.text, id_) for q in load_queries() for id_ in q.judgements if id_ not in ids}
    assert unknown == set()


def test_every_query_has_a_best_answer() -> None:
    assert [q.text for q in load_queries() if 3 not in q.judgements.values()] == []


def test_ndcg_at_10_matches_a_hand_computed_example() -> None:
    judgements = {"a": 3, "b": 2, "c": 1}
    # ranked b, x, a: DCG = 2/log2(2) + 0 + 3/log2(4) = 2 + 1.5 = 3.5; ideal 3 + 2/log2(3) + 1/log2(4)
    ideal = 3 + 2 / math.log2(3) + 0.5
    assert ndcg(["b", "x", "a"], judgements) == pytest.approx(3.5 / ideal)
    assert ndcg(["a", "b", "c"], judgements) == pytest.approx(1.0)
    assert ndcg([], judgements) == 0.0


def test_ndcg_counts_only_the_first_ten_answers() -> None:
    assert ndcg([f"x{n}" for n in range(10)] + ["a"], {"a": 3}) == 0.0


def test_recall_at_10_is_the_share_of_judged_ids_found() -> None:
    assert recall(["c", "x", "a"], {"a": 3, "b": 2, "c": 1}) == pytest.approx(2 / 3)


def test_reciprocal_rank_is_that_of_the_first_grade_3_answer() -> None:
    judgements = {"a": 3, "b": 2, "d": 3}
    assert reciprocal_rank(["b", "x", "d", "a"], judgements) == pytest.approx(1 / 3)
    assert reciprocal_rank(["b", "x"], judgements) == 0.0


def test_bm25_ranks_the_document_with_the_rarer_query_word_first() -> None:
    bm25 = BM25({"one": "ledger service", "two": "service service", "three": "team"})
    assert bm25.rank("ledger service") == ["one", "two"]
    # hand-checked: idf(ledger) = ln(1 + (3 - 1 + 0.5) / (1 + 0.5)) = ln(8/3)
    assert bm25.idf["ledger"] == pytest.approx(math.log(8 / 3))


def test_a_query_of_an_unknown_kind_is_an_error_naming_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "q.json"
    path.write_text(json.dumps({"queries": [{"query": "x", "kind": "vibes", "judgements": {"a": 3}}]}))
    with pytest.raises(ValueError, match=r"query 0 \('x'\): unknown kind 'vibes'"):
        load_queries(path)
