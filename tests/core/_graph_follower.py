"""Child process for tests/core/test_graph.py: follow a store's change log until a node appears.

Usage: python _graph_follower.py STORE NODE_ID. Builds a `GraphIndex`, follows the change log every 0.05 s,
prints `ready`, then prints `seen <time.monotonic()>` as soon as NODE_ID is in the index's graph. It gives up
(exit 1) after 30 s so it cannot outlive a parent that forgot it.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from core.index.graph import GraphIndex
from core.lang.model import load_model
from core.store.sqlite import SQLiteStore
from core.values.records import Change


def main() -> int:
    store_path, node_id = Path(sys.argv[1]), sys.argv[2]
    store = SQLiteStore.open(store_path, load_model())
    index = GraphIndex.build(store)
    appeared = threading.Event()

    def on_changes(_changes: list[Change]) -> None:
        if node_id in index.graph:
            appeared.set()

    index.add_listener(on_changes)
    halt = index.follow(0.05)
    try:
        print("ready", flush=True)
        if not appeared.wait(30) and node_id not in index.graph:
            return 1
        print(f"seen {time.monotonic()}", flush=True)
        return 0
    finally:
        halt()
        store.close()


if __name__ == "__main__":
    sys.exit(main())
