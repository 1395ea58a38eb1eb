"""`Node.restamped` and `Edge.restamped` keep every field but the revision and timestamps they set."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest

from core.values.records import Edge, Node

STAMPED = ("revision", "created_at", "updated_at", "updated_by")


@pytest.mark.parametrize(
    ("record", "kept"),
    [(Node("n-1", "Team", {"name": "N"}, "restricted", ("group:a",), 3, "c", "u", "b"),
      ("id", "type", "properties", "visibility", "readers")),
     (Edge("owns", "a", "b", {"since": "2020"}, 3, "c", "u", "b"), ("type", "source", "target", "properties"))],
)  # fmt: skip
def test_a_restamped_record_is_what_replace_makes_of_it(record: Node | Edge, kept: tuple[str, ...]) -> None:
    assert {f.name for f in fields(record)} == {*kept, *STAMPED}  # a new field: make restamped keep it, then add it
    restamped = record.restamped(7, "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z", "someone")
    expected = replace(record, revision=7, created_at="2026-01-01T00:00:00.000Z",
                       updated_at="2026-01-02T00:00:00.000Z", updated_by="someone")  # fmt: skip
    assert restamped == expected
