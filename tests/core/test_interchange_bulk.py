"""A bulk import on each backend: streamed batch by batch in bounded memory, and still all or nothing."""

from __future__ import annotations

import json
import tracemalloc
from dataclasses import replace
from pathlib import Path

import pytest

from core.app.synthetic import write_synthetic
from core.store import Store
from core.store.interchange import import_path
from core.values.errors import ImportFileError

pytestmark = pytest.mark.both_backends

BATCH = 50  # small batches, so a few hundred records span many of them


def traced_peak(store: Store, path: Path) -> int:
    """The peak of Python's traced allocations during a dry run of importing `path` (which writes every record
    in its transaction, then rolls it back), in bytes."""
    tracemalloc.start()
    try:
        report = import_path(store, path, principal="test", dry_run=True, batch=BATCH)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert report.nodes > 0
    return peak


def test_an_import_four_times_larger_peaks_far_below_four_times_the_memory(store: Store, tmp_path: Path) -> None:
    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    write_synthetic(small, 150)
    write_synthetic(large, 600)
    first, second = traced_peak(store, small), traced_peak(store, large)
    assert second < 2 * first, (first, second)  # what grows is a 64-bit digest per record


def test_a_bad_record_deep_in_a_large_file_aborts_the_whole_import_and_is_named(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "graph.jsonl"
    write_synthetic(path, 150)
    lines = path.read_text(encoding="utf-8").splitlines()
    edge = json.loads(lines[-3])
    lines[-3] = json.dumps({**edge, "target": "nobody-here"})  # an edge to a node no batch holds
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    before = store.revision(), replace(store.stats(), size_bytes=0)  # a rolled-back write may leave space used
    with pytest.raises(ImportFileError) as caught:
        import_path(store, path, principal="test", batch=BATCH)
    assert [(p.file, p.line, p.pointer) for p in caught.value.problems] == [(str(path), len(lines) - 2, "/target")]
    assert "nobody-here" in caught.value.problems[0].message
    assert (store.revision(), replace(store.stats(), size_bytes=0)) == before


def person(i: int, **properties: object) -> dict[str, object]:
    return {"kind": "node", "id": f"p{i}", "type": "Person",
            "properties": {"email": f"p{i}@x.example", "name": f"P {i}", "handle": f"p-{i}", "title": "Engineer",
                           "role": "engineer", **properties}}  # fmt: skip


def decision(i: int) -> dict[str, object]:
    properties = {"number": f"ADR-000{i}", "title": "T", "status": "accepted", "date": "2026-01-02"}
    return {"kind": "node", "id": f"d{i}", "type": "Decision", "properties": properties}


def edge(type_: str, source: str, target: str) -> dict[str, object]:
    return {"kind": "edge", "type": type_, "source": source, "target": target}


# a record refused by each check an import makes, and the (pointer, message) the refusal carries
REFUSED: list[tuple[dict[str, object], str, str]] = [
    (person(10, level=99), "/properties/level", "99 is greater than the maximum of 8"),
    (person(11, handle="Not A Slug"), "/properties/handle", "'Not A Slug' does not match '^[a-z0-9][a-z0-9-]*$'"),
    (person(12, email="nobody"), "/properties/email", "'nobody' is not a 'email'"),
    (person(13, skills=["kafka", "kafka"]), "/properties/skills", "['kafka', 'kafka'] has non-unique elements"),
    (person(14, shoe_size=44), "/properties", "'shoe_size' is not allowed (allowed: active, email, handle, level, "
     "location, name, role, skills, start_date, timezone, title)"),
    (person(15, email="p1@x.example"), "/properties/email", "Person 'p1' already has email 'p1@x.example'"),
    (person(16, name="a\x00b"), "/properties/name", "the text holds the NUL character (U+0000), which canon does "
     "not store"),
    (edge("reports_to", "p1", "nobody"), "/target", "No node with id 'nobody'."),
    (edge("reports_to", "p2", "p4"), "/target", "'p2' already has a reports_to edge (to 'p3'); at most one is allowed"),
    (edge("reports_to", "p4", "p2"), "/target", "a reports_to edge from 'p4' to 'p2' would close a cycle"),
    (edge("supersedes", "d3", "d2"), "/source", "'d2' already has an incoming supersedes edge (from 'd1'); at most "
     "one is allowed"),
    (edge("authored", "d1", "d2"), "/source", "a authored edge cannot start at a Decision (allowed: Person)"),
]  # fmt: skip


@pytest.mark.parametrize("batch", [1, 3, 5000])
def test_each_check_refuses_its_record_with_its_message_and_pointer_whatever_the_batch(
    store: Store, tmp_path: Path, batch: int
) -> None:
    good = [*(person(i) for i in range(1, 5)), *(decision(i) for i in range(1, 4)), edge("reports_to", "p2", "p3"),
            edge("reports_to", "p3", "p4"), edge("supersedes", "d1", "d2")]  # fmt: skip
    records = [*good, *(r for r, _, _ in REFUSED)]
    path = tmp_path / "graph.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    before = store.revision()
    with pytest.raises(ImportFileError) as caught:
        import_path(store, path, principal="test", batch=batch)
    lines = {id(r): n for n, r in enumerate(records, start=1)}
    expected = [(lines[id(r)], at, message) for r, at, message in REFUSED]
    assert sorted((p.line, p.pointer, p.message) for p in caught.value.problems) == sorted(expected)
    assert store.revision() == before  # all or nothing
