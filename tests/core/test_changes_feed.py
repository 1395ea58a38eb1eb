"""get_changes pages are a snapshot: the first page fixes the revision and the total, later pages keep them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core.ops.config import Config
from core.seam.instance import open_instance
from core.values.principal import LOCAL, Principal

pytestmark = pytest.mark.both_backends

READER = Principal("feed-reader", frozenset({"reader"}))


def _ok(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.as_json()
    value: dict[str, Any] = result.value
    return value


def test_a_paged_feed_keeps_the_first_pages_revision_and_total_while_writes_land(store_location: str | Path) -> None:
    instance = open_instance(Config(store=store_location))
    try:
        d = instance.dispatcher
        for principal in (LOCAL, READER):
            start = instance.store.revision() - 30
            first = _ok(d.call_tool(principal, "test", "get_changes", {"since": start, "limit": 10}))
            team = instance.store.node("team-payments")
            assert team is not None
            renamed = {**team.properties, "name": f"Payments {principal.name}"}
            _ok(d.call_tool(LOCAL, "test", "upsert_node", {"id": team.id, "type": "Team", "properties": renamed}))

            pages = [first]
            while pages[-1]["next_cursor"] is not None:
                arguments = {"since": start, "limit": 10, "cursor": pages[-1]["next_cursor"]}
                pages.append(_ok(d.call_tool(principal, "test", "get_changes", arguments)))
            fresh = _ok(d.call_tool(principal, "test", "get_changes", {"since": first["revision"]}))

            items = [i for p in pages for i in p["items"]]
            assert {p["revision"] for p in pages} == {first["revision"]}
            assert {p["total"] for p in pages} == {first["total"]}
            assert len(items) == first["total"]
            assert all(start < i["revision"] <= first["revision"] for i in items)
            assert [i["key"] for i in fresh["items"]] == ["team-payments"]  # the write made meanwhile, next time
    finally:
        instance.close()
