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
