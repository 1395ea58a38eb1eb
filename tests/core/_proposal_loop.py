"""The proposal loop of tests/core/test_crash_safety.py, and its child process.

Each round proposes one batch of `_write_loop.batch_arguments` (two Persons and a `reports_to` edge) as an agent and
prints `proposed <id> <number>` once the proposal is stored; two rounds in three a reviewer then approves it and the
loop prints `merged <id> <number> <merge revision>`, the third it stays open. Every line the parent reads is a
promise the store has made. Run as `python _proposal_loop.py STORE [MAX]`; it stops after MAX rounds (default
10,000) so it cannot run forever if the parent never kills it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: the repository's packages

from core.dispatch import proposals
from core.lang.model import load_model
from core.store import open_store
from core.values.principal import Principal, Reviewers
from tests.core._write_loop import batch_arguments

AUTHOR = Principal("agent", frozenset({"writer"}))
REVIEWER = Principal("rita", frozenset({"writer"}), frozenset({"reviewers"}))


def main(argv: Sequence[str]) -> None:
    store = open_store(argv[1], load_model())
    limit = int(argv[2]) if len(argv) > 2 else 10_000
    for number in range(limit):
        p = proposals.propose(store, AUTHOR, batch_arguments("proposal", number)["operations"], f"round {number}", "")
        print(f"proposed {p.id} {number}", flush=True)
        if number % 3 != 2:
            merged = proposals.review(store, REVIEWER, p.id, "approve", "ok", Reviewers())
            print(f"merged {p.id} {number} {merged.merge_revision}", flush=True)
    store.close()


if __name__ == "__main__":
    main(sys.argv)
