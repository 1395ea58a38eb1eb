"""The write loop of tests/core/test_crash_safety.py, and its child process.

Each write is one batch of three changes: two Persons and a `reports_to` edge between them, so a batch half
applied shows (`missing_parts`). Run as `python _write_loop.py STORE [MAX]` (a SQLite path or a PostgreSQL URL):
after each commit returns it prints `ack <revision> <batch number>` and flushes, so every line the parent reads
is a write the store has promised to keep. It stops after MAX batches (default 10,000) so it cannot run forever
if the parent never kills it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from core.lang.model import load_model
from core.store import Store, open_store
from core.values.operations import Operation, PutEdge, PutNode
from core.values.records import Edge, Node

PRINCIPAL = "test:write-loop"


def _person(writer: str, number: int, part: str) -> Node:
    handle = f"loop-{writer}-{number:05d}-{part}"
    return Node(
        f"person-{handle}",
        "Person",
        {
            "email": f"{handle}@northwind.example",
            "name": f"Loop Person {writer} {number} {part}",
            "handle": handle,
            "title": "Engineer",
            "role": "engineer",
        },
    )


def batch(writer: str, number: int) -> list[Operation]:
    """Batch `number` of `writer`: two Persons, the first reporting to the second."""
    first, second = _person(writer, number, "a"), _person(writer, number, "b")
    return [PutNode(first), PutNode(second), PutEdge(Edge("reports_to", first.id, second.id))]


def batch_arguments(writer: str, number: int) -> dict[str, Any]:
    """`batch` as `write_batch`'s arguments (the body of `POST /api/batch`)."""
    first, second = _person(writer, number, "a"), _person(writer, number, "b")
    return {"operations": [
        {"op": "upsert_node", "id": first.id, "type": "Person", "properties": dict(first.properties)},
        {"op": "upsert_node", "id": second.id, "type": "Person", "properties": dict(second.properties)},
        {"op": "upsert_edge", "type": "reports_to", "source": first.id, "target": second.id},
    ]}  # fmt: skip


def batch_ids(writer: str, number: int) -> tuple[str, str]:
    """The ids of the two Persons of batch `number` of `writer` (the edge goes from the first to the second)."""
    return _person(writer, number, "a").id, _person(writer, number, "b").id


def missing_parts(store: Store, writer: str, number: int) -> list[str]:
    """What of batch `number` of `writer` the store lacks: [] when all of it is there."""
    first, second = batch_ids(writer, number)
    found = store.nodes([first, second])
    missing = [id_ for id_ in (first, second) if id_ not in found]
    if store.edge("reports_to", first, second) is None:
        missing.append(f"reports_to {first} -> {second}")
    return missing


def batches_present(store: Store, writer: str) -> list[int]:
    """The numbers of `writer`'s batches of which at least one part is in the store."""
    prefix = f"person-loop-{writer}-"
    return sorted({int(node.id[len(prefix) :].split("-")[0]) for node in store.iter_nodes("Person")
                   if node.id.startswith(prefix)})  # fmt: skip


def main(argv: Sequence[str]) -> None:
    store = open_store(argv[1], load_model())
    limit = int(argv[2]) if len(argv) > 2 else 10_000
    for number in range(limit):
        result = store.commit(batch("child", number), principal=PRINCIPAL)
        print(f"ack {result.revision} {number}", flush=True)
    store.close()


if __name__ == "__main__":
    main(sys.argv)
