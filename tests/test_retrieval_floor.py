"""The floor `search` must keep on the retrieval benchmark's query set (benchmarks/retrieval.py), on both backends.

Fails (with each query's nDCG@10, reciprocal rank and first answers, worst first) when ranking regresses below
nDCG@10 0.80 or MRR 0.80 over the whole set.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from benchmarks.retrieval import load_queries, per_query, run, summary
from core.ops.config import Config
from core.seam.instance import Instance, open_instance

pytestmark = pytest.mark.both_backends

NDCG_FLOOR = 0.80
MRR_FLOOR = 0.80


@pytest.fixture(scope="module")
def sample(module_store_location: object) -> Iterator[Instance]:
    opened = open_instance(Config(store=module_store_location))  # type: ignore[arg-type]
    yield opened
    opened.close()


def test_search_keeps_the_ndcg_and_mrr_floor_on_the_query_set(sample: Instance) -> None:
    if sample.dispatcher.registry.find("search") is None:
        pytest.fail("the search tool is not registered")
    rows = run(sample, load_queries(), ["search"])
    figures = summary(rows)
    if figures["ndcg@10"] < NDCG_FLOOR or figures["mrr"] < MRR_FLOOR:
        pytest.fail(
            f"search: nDCG@10 {figures['ndcg@10']} (floor {NDCG_FLOOR}), MRR {figures['mrr']} (floor {MRR_FLOOR})\n"
            + per_query(rows)
        )
