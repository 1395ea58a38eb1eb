"""Several OS processes writing one store through the write tools: no lost update, no lost acknowledged write.

Each child process opens its own instance on the shared store (a file, or a database: the module runs on both
backends) and writes through its dispatcher, as a server process would; it reports every write the tool
acknowledged as JSON on stdout. The parent checks those acknowledgements against the change log and the change
log against the stored state.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from core.ops.config import Config
from core.seam.instance import Instance, open_instance
from core.store import Store
from core.values.principal import LOCAL
from core.values.records import Change

pytestmark = pytest.mark.both_backends

REPO = Path(__file__).resolve().parents[2]
PROCESSES = 4
INCREMENTS = 25
COUNTER = "team-counter"
PREFIX = "counter "  # Team.mission is a free string (at most 500 characters): it carries the counter
TIMEOUT_S = 120

CHILD = r"""
import json, sys
from core.ops.config import Config
from core.seam.instance import open_instance
from core.values.principal import Principal

store, name, mode, count, ids = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:]
PREFIX = "counter "
principal = Principal(name, frozenset({"writer"}))
instance = open_instance(Config(store=store))
acks, conflicts = [], 0


def call(tool, arguments):
    return instance.dispatcher.call_tool(principal, "stress", tool, arguments)


def read(id):
    result = call("get_node", {"id": id})
    if result.value is None:
        raise SystemExit(f"get_node failed: {result.as_json()}")
    return result.value["node"]


def team(id, value):
    slug = id.removeprefix("team-")
    return {"slug": slug, "name": slug, "mission": f"{PREFIX}{value}", "area": "platform"}


try:
    node = read(ids[0]) if mode == "increment" else None  # every process reads the same revision first
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("no go")
    attempt = 0
    while len(acks) < count:
        attempt += 1
        if mode == "increment":  # optimistic concurrency: read, compute, write if unchanged, else read again
            value = int(node["properties"]["mission"].removeprefix(PREFIX)) + 1
            arguments = {"id": node["id"], "type": "Team", "properties": team(node["id"], value),
                         "expected_revision": node["revision"]}
        else:  # blind writes, no expected revision, round-robin over this process's own nodes
            id, value = ids[attempt % len(ids)], attempt
            arguments = {"id": id, "type": "Team", "properties": team(id, value)}
        result = call("upsert_node", arguments)
        if result.value is not None:
            acks.append({"id": arguments["id"], "revision": result.value["revision"], "value": value,
                         "node_revision": result.value["node"]["revision"]})
        elif result.error is not None and result.error.code == "conflict" and mode == "increment":
            conflicts += 1
        else:
            raise SystemExit(f"unexpected result: {result.as_json()}")
        if mode == "increment":
            node = read(ids[0])
finally:
    instance.close()
print(json.dumps({"principal": name, "acks": acks, "conflicts": conflicts}), flush=True)
"""


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("CANON_")}


def run_writers(
    store_location: str | Path, mode: str, count: int, ids_of: Sequence[Sequence[str]]
) -> list[dict[str, Any]]:
    """Start one child per entry of `ids_of`, let all of them get ready, then start them at once; their reports."""
    procs: list[subprocess.Popen[str]] = []
    try:
        for i, ids in enumerate(ids_of):
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", CHILD, str(store_location), f"stress-{i}", mode, str(count), *ids],
                    cwd=REPO,
                    env=_clean_env(),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        for proc in procs:  # every child has opened its instance (and, incrementing, read the counter)
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line == "ready\n", f"child not ready: {line!r} {proc.communicate(timeout=TIMEOUT_S)}"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        reports: list[dict[str, Any]] = []
        for proc in procs:
            out, err = proc.communicate(timeout=TIMEOUT_S)
            assert proc.returncode == 0, err
            report: dict[str, Any] = json.loads(out.splitlines()[-1])
            reports.append(report)
        return reports
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)


def replay(changes: Sequence[Change]) -> tuple[dict[str, Mapping[str, Any]], dict[str, Mapping[str, Any]]]:
    """The nodes and edges the change log describes: each change applied to an empty state, in order.

    Each change's `before` must be exactly what the log left there (the state after the previous change to
    the same record), so a change computed from a stale state would show up here.
    """
    nodes: dict[str, Mapping[str, Any]] = {}
    edges: dict[str, Mapping[str, Any]] = {}
    for change in changes:
        if change.kind == "model":
            continue
        table = nodes if change.kind == "node" else edges
        assert table.get(change.key) == change.before, f"revision {change.revision}: before is not the last after"
        if change.after is None:
            del table[change.key]
        else:
            table[change.key] = change.after
    return nodes, edges


def assert_log_is_the_state(store: Store) -> None:
    """Revisions 1..n without gaps, in order; replaying the log gives the stored nodes and edges exactly."""
    changes = store.changes(0, 1_000_000)
    assert [c.revision for c in changes] == list(range(1, store.revision() + 1))
    nodes, edges = replay(changes)
    assert nodes == {n.id: n.to_json() for n in store.iter_nodes()}
    assert edges == {e.key: e.to_json() for e in store.iter_edges()}


def team(id: str, value: int) -> dict[str, Any]:
    slug = id.removeprefix("team-")
    return {"slug": slug, "name": slug, "mission": f"{PREFIX}{value}", "area": "platform"}


@pytest.fixture
def instance(store_location: str | Path) -> Iterator[Instance]:
    """The parent's instance on a new seeded store the children share."""
    opened = open_instance(Config(store=store_location))
    yield opened
    opened.close()


def test_conflicting_increments_from_several_processes_lose_no_update(
    instance: Instance, store_location: str | Path
) -> None:
    created = instance.dispatcher.call_tool(
        LOCAL, "test", "upsert_node", {"id": COUNTER, "type": "Team", "properties": team(COUNTER, 0)}
    )
    assert created.value is not None, created.as_json()
    start = created.value["revision"]

    reports = run_writers(store_location, "increment", INCREMENTS, [[COUNTER]] * PROCESSES)

    store = instance.store
    acks = {ack["revision"]: (report["principal"], ack) for report in reports for ack in report["acks"]}
    assert len(acks) == PROCESSES * INCREMENTS  # every acknowledged write has a revision of its own
    # all processes read the counter at the same revision before any wrote, so all but one conflicted at least once
    assert sum(report["conflicts"] for report in reports) >= PROCESSES - 1
    # every acknowledged write is in the log: that revision, that process, that state
    logged = {c.revision: c for c in store.changes(0, 1_000_000)}
    assert set(acks) <= set(logged)
    for revision, (principal, ack) in acks.items():
        change = logged[revision]
        assert (change.op, change.kind, change.key, change.principal) == ("put", "node", COUNTER, principal)
        assert change.after is not None
        assert change.after["properties"]["mission"] == f"{PREFIX}{ack['value']}"
        assert change.after["revision"] == ack["node_revision"] == revision
    # no lost update: every write incremented the state the previous write left, up to N x M
    counter_changes = store.changes(start, 1_000_000)
    assert [c.revision for c in counter_changes] == sorted(acks)  # nothing else was written, nothing unacknowledged
    values = [int(c.after["properties"]["mission"].removeprefix(PREFIX)) for c in counter_changes if c.after]
    assert values == list(range(1, PROCESSES * INCREMENTS + 1))
    final = store.node(COUNTER)
    assert final is not None
    assert final.properties["mission"] == f"{PREFIX}{PROCESSES * INCREMENTS}"
    assert final.revision == store.revision() == max(acks)
    assert {principal for principal, _ in acks.values()} == {f"stress-{i}" for i in range(PROCESSES)}
    assert_log_is_the_state(store)


def test_blind_writes_to_distinct_nodes_from_several_processes_are_all_kept(
    instance: Instance, store_location: str | Path
) -> None:
    start = instance.store.revision()
    ids_of = [[f"team-blind-{i}-{k}" for k in range(3)] for i in range(PROCESSES)]

    reports = run_writers(store_location, "blind", INCREMENTS, ids_of)

    store = instance.store
    acks = [(report["principal"], ack) for report in reports for ack in report["acks"]]
    assert len(acks) == PROCESSES * INCREMENTS
    assert len({ack["revision"] for _, ack in acks}) == len(acks)
    logged = {c.revision: c for c in store.changes(0, 1_000_000)}
    assert {ack["revision"] for _, ack in acks} <= set(logged)
    last: dict[str, dict[str, Any]] = {}
    for principal, ack in acks:
        change = logged[ack["revision"]]
        assert (change.key, change.principal) == (ack["id"], principal)
        assert change.after is not None
        assert change.after["properties"] == team(ack["id"], ack["value"])
        assert change.after["revision"] == ack["node_revision"] == ack["revision"]
        if ack["id"] not in last or ack["revision"] > last[ack["id"]]["revision"]:
            last[ack["id"]] = ack
    assert [c.revision for c in store.changes(start, 1_000_000)] == sorted(ack["revision"] for _, ack in acks)
    assert set(last) == {id for ids in ids_of for id in ids}
    for id, ack in last.items():  # each node holds its last acknowledged write
        node = store.node(id)
        assert node is not None
        assert (node.revision, node.properties) == (ack["revision"], team(id, ack["value"]))
    for principal, _ in acks:  # each process's own writes were acknowledged in the order it made them
        mine = [ack for p, ack in acks if p == principal]
        assert [a["revision"] for a in mine] == sorted(a["revision"] for a in mine)
    assert_log_is_the_state(store)
