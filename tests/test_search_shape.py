"""What a page of search hits holds: the summary form is each hit's id, type and name in rank order, and a default
page of it fits in a kilobyte on realistic queries; the hits per type (facets) are counted when asked, the same
with or without a cursor."""

from __future__ import annotations

import json
from typing import Any

import pytest

from core.seam.instance import Instance
from core.values.principal import Principal

ADMIN = Principal("root", frozenset({"admin"}))
QUERIES = ("payments ledger", "who owns the fraud rules", "double entry", "refund webhook", "SLO")


def call(instance: Instance, arguments: dict[str, Any]) -> dict[str, Any]:
    result = instance.dispatcher.call_tool(ADMIN, "test", "search", arguments)
    assert result.error is None, result.error
    assert result.value is not None
    return result.value


@pytest.mark.parametrize("text", QUERIES)
def test_a_summary_page_is_each_hits_id_type_and_name_in_rank_order(instance: Instance, text: str) -> None:
    full = call(instance, {"query": text})
    summary = call(instance, {"query": text, "summary": True})
    assert summary["items"] == [{k: h[k] for k in ("id", "type", "name")} for h in full["items"]]
    assert len(summary["items"]) == 10
    assert summary["total"] == full["total"]
    size = len(json.dumps(summary, ensure_ascii=False, separators=(",", ":")).encode())
    assert size <= 1024, (text, size)


def test_facets_are_counted_when_asked(instance: Instance) -> None:
    plain = call(instance, {"query": "payments", "limit": 5})
    assert "facets" not in plain
    counted = call(instance, {"query": "payments", "limit": 5, "facets": True})
    assert counted["items"] == plain["items"]
    assert sum(counted["facets"].values()) == counted["total"]
    assert counted["facets"]["Service"] >= 1
    after = call(instance, {"query": "payments", "limit": 5, "facets": True, "cursor": plain["next_cursor"]})
    assert after["facets"] == counted["facets"]  # a cursor of either holds for the other
