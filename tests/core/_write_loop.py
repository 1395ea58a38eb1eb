"""Child process for tests/core/test_crash_safety.py: commit one Person per iteration and acknowledge each.

Usage: python _write_loop.py STORE [MAX]. After each `commit` returns it prints `ack <revision> <node id>` and
flushes, so every line the parent reads is a write the store has promised to keep. It stops after MAX commits
(default 10,000) so it cannot run forever if the parent never kills it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from core.model import load_model
from core.operations import PutNode
from core.records import Node
from core.store.sqlite import SQLiteStore


def main() -> None:
    store = SQLiteStore.open(Path(sys.argv[1]), load_model())
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    for i in range(limit):
        node = Node(
            f"person-loop-{i:05d}",
            "Person",
            {
                "email": f"loop{i}@northwind.example",
                "name": f"Loop Person {i}",
                "handle": f"loop-{i}",
                "title": "Engineer",
                "role": "engineer",
            },
        )
        result = store.commit([PutNode(node)], principal="test:write-loop")
        print(f"ack {result.revision} {node.id}", flush=True)
    store.close()


if __name__ == "__main__":
    main()
