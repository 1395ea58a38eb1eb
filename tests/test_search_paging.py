"""search pages one ranking: the next page reads the ranking the first page made (pinned to its revision), so
pages neither repeat nor skip a hit when the store changes between them; a cursor whose ranking is no longer
kept, once the store has moved on, is refused at /cursor."""

from __future__ import annotations

from typing import Any

from core.index.search import RANKINGS
from core.seam.instance import Instance
from core.values.principal import Principal

ADMIN = Principal("root", frozenset({"admin"}))
QUERY = {"query": "payments", "limit": 4}
NEWCOMER = {"id": "svc-payments", "type": "Service",
            "properties": {"name": "payments", "description": "Payments, payments and payments.",
                           "lifecycle": "production", "tier": 1}}  # fmt: skip


def call(instance: Instance, tool: str, arguments: dict[str, Any]) -> Any:
    return instance.dispatcher.call_tool(ADMIN, "test", tool, arguments)


def ids(page: dict[str, Any]) -> list[str]:
    return [item["id"] for item in page["items"]]


def test_the_pages_of_a_search_are_its_whole_ranking_in_order(instance: Instance) -> None:
    whole = ids(call(instance, "search", {**QUERY, "limit": 50}).value)
    pages: list[str] = []
    cursor = None
    for _ in range(20):
        page = call(instance, "search", {**QUERY, **({"cursor": cursor} if cursor else {})}).value
        pages += ids(page)
        if (cursor := page["next_cursor"]) is None:
            break
    assert pages == whole[: len(pages)]
    assert len(pages) == min(len(whole), 20 * QUERY["limit"])


def test_a_write_between_pages_changes_neither_the_next_page_nor_its_revision(instance: Instance) -> None:
    first = call(instance, "search", QUERY).value
    whole = ids(call(instance, "search", {**QUERY, "limit": 50}).value)
    assert call(instance, "upsert_node", NEWCOMER).value is not None  # a node named exactly as the query: first
    second = call(instance, "search", {**QUERY, "cursor": first["next_cursor"]}).value
    assert second["revision"] == first["revision"]
    assert ids(first) + ids(second) == whole[: 2 * QUERY["limit"]]
    assert ids(call(instance, "search", QUERY).value)[0] == "svc-payments"  # a new search sees the write


def test_a_cursor_whose_ranking_is_gone_after_a_write_is_refused_at_cursor(instance: Instance) -> None:
    first = call(instance, "search", QUERY).value
    assert call(instance, "upsert_node", NEWCOMER).value is not None
    for n in range(RANKINGS):  # other searches push the first one's ranking out
        call(instance, "search", {"query": f"payments {n}"})
    refused = call(instance, "search", {**QUERY, "cursor": first["next_cursor"]}).as_json()["error"]
    assert refused["code"] == "invalid_arguments"
    assert [p["pointer"] for p in refused["problems"]] == ["/cursor"]


def test_a_cursor_from_a_revision_the_store_has_not_reached_is_refused(instance: Instance) -> None:
    from core.values.paging import encode_cursor

    arguments = {**instance.registry.input_defaults("search"), **QUERY}
    cursor = encode_cursor("search", arguments, {"start": 4, "revision": 10**9})
    refused = call(instance, "search", {**QUERY, "cursor": cursor}).as_json()["error"]
    assert [p["pointer"] for p in refused["problems"]] == ["/cursor"]
