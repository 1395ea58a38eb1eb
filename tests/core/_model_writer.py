"""Child process for tests/core/test_model_apply.py: commit one Team per iteration while a model is applied.

Usage: python -m tests.core._model_writer STORE WRITER WANTED [MAX]. Opens the store on the model recorded in it,
then commits Team `team-w<WRITER>-<i>`, odd iterations in the area `research` (valid only once the wider model is
applied), even ones in `product` (valid under both). After each commit returns it prints `ack <revision> <id>
<area>`; a write the store refuses prints `refused <id> <area>`. It stops after WANTED acknowledged `research`
writes, or after MAX iterations (default 20,000) so it cannot run forever.
"""

from __future__ import annotations

import sys

from core.store import open_existing_store
from core.values.errors import ValidationError
from core.values.operations import PutNode
from core.values.records import Node


def main() -> None:
    location, writer, wanted = sys.argv[1], sys.argv[2], int(sys.argv[3])
    limit = int(sys.argv[4]) if len(sys.argv) > 4 else 20_000
    store = open_existing_store(location)
    research = 0
    try:
        for i in range(limit):
            area = "research" if i % 2 else "product"
            properties = {"slug": f"w{writer}-{i}", "name": f"Writer {writer} {i}", "area": area,
                          "mission": "Write while the model changes."}  # fmt: skip
            node = Node(f"team-w{writer}-{i}", "Team", properties)
            try:
                result = store.commit([PutNode(node)], principal=f"test:writer-{writer}")
            except ValidationError:
                print(f"refused {node.id} {area}", flush=True)
                continue
            print(f"ack {result.revision} {node.id} {area}", flush=True)
            research += area == "research"
            if research >= wanted:
                break
    finally:
        store.close()


if __name__ == "__main__":
    main()
