"""Crashes leave the store consistent, on both backends: a process killed with SIGKILL leaves no partial import and
loses no acknowledged write, and writers across a PostgreSQL restart get a clear error, recover once it is back, and
lose nothing they were told was written; no batch is ever half applied and the change log has no gap."""

from __future__ import annotations

import logging
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio
import httpx2
import pytest

from core.app.synthetic import write_synthetic
from core.lang.model import Model, default_model_path
from core.ops.config import Config
from core.seam.changes import ChangeFeed
from core.seam.instance import open_instance
from core.store import Store, open_store
from core.store.sqlite import SQLiteStore
from core.values.audit import AuditQuery
from core.values.errors import StoreUnavailableError
from core.values.principal import LOCAL
from tests.core._write_loop import PRINCIPAL, batch, batch_arguments, batch_ids, batches_present, missing_parts
from tests.mcp.conftest import create_token, pumping, serving
from tests.postgres_server import Server

pytestmark = pytest.mark.both_backends

HERE = Path(__file__).resolve().parent
DEADLINE_S = 60.0


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("CANON_")}


def _stop(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=30)


def _assert_consistent(store: Store) -> None:
    """The change log numbers every change 1, 2, 3... with no gap, and (SQLite) the file is sound."""
    revisions = [change.revision for change in store.changes(0, 10**9)]
    assert revisions == list(range(1, len(revisions) + 1))
    assert store.revision() == len(revisions)
    if isinstance(store, SQLiteStore):
        assert store.integrity_check() == "ok"


def _assert_whole_batches(store: Store, writer: str, acknowledged: list[tuple[int, int]]) -> None:
    """Every acknowledged batch is there at its revision, and every batch that is there at all is whole."""
    numbers = sorted({number for _, number in acknowledged} | set(batches_present(store, writer)))
    assert {n: parts for n in numbers if (parts := missing_parts(store, writer, n))} == {}
    for revision, number in acknowledged:
        edge = store.edge("reports_to", *batch_ids(writer, number))
        assert edge is not None
        assert edge.revision == revision


@pytest.mark.slow
def test_sigkill_during_a_large_import_leaves_no_partial_import(
    store_location: str | Path, model: Model, tmp_path: Path
) -> None:
    data = tmp_path / "synthetic.jsonl"
    write_synthetic(data, 20_000)
    # --model given explicitly: a new store is not seeded, so it holds only what the import writes
    proc = subprocess.Popen(
        [sys.executable, "-m", "core.app.cli", "--model", str(default_model_path()), "--store", str(store_location),
         "import", str(data), "--progress"],
        cwd=tmp_path, env=_clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    seen = b""
    try:
        assert proc.stderr is not None
        fd = proc.stderr.fileno()
        deadline = time.monotonic() + DEADLINE_S
        while b"writing" not in seen:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no 'writing' progress within {DEADLINE_S} s; stderr so far: {seen[-500:]!r}"
            ready, _, _ = select.select([fd], [], [], remaining)
            if ready:
                chunk = os.read(fd, 65536)
                assert chunk, f"the import ended before writing anything; stderr: {seen[-500:]!r}"
                seen += chunk
        proc.send_signal(signal.SIGKILL)
        returncode = proc.wait(timeout=30)
    finally:
        _stop(proc)
        if proc.stderr is not None:
            proc.stderr.close()

    assert returncode == -signal.SIGKILL
    store = open_store(store_location, model)
    try:
        stats = store.stats()
        assert (stats.nodes, stats.edges) == (0, 0)
        assert [change.op for change in store.changes(0, 10)] == ["model"]  # the import left no change
        _assert_consistent(store)
    finally:
        store.close()


def _line_reader(stream: IO[str], lines: queue.Queue[str | None]) -> threading.Thread:
    """Feed `lines` from `stream` in a thread (None at the end), so the test can wait with a deadline."""

    def run() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _ack(line: str) -> tuple[int, int]:
    word, revision, number = line.split()
    assert word == "ack"
    return int(revision), int(number)


def test_sigkill_during_a_write_loop_loses_no_acknowledged_write_and_half_applies_no_batch(
    store_location: str | Path, model: Model, tmp_path: Path
) -> None:
    open_store(store_location, model).close()  # the model recorded before the child starts writing
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "_write_loop.py"), str(store_location)],
        cwd=tmp_path, env=_clean_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    acks: list[tuple[int, int]] = []
    lines: queue.Queue[str | None] = queue.Queue()
    try:
        assert proc.stdout is not None
        reader = _line_reader(proc.stdout, lines)
        deadline = time.monotonic() + DEADLINE_S
        while len(acks) < 100:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"only {len(acks)} acks within {DEADLINE_S} s"
            line = lines.get(timeout=remaining)
            assert line is not None, f"the writer exited after {len(acks)} acks (exit {proc.poll()})"
            acks.append(_ack(line))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        reader.join(timeout=30)
    finally:
        _stop(proc)
        if proc.stdout is not None:
            proc.stdout.close()

    # complete lines printed before the kill landed are acknowledged writes too
    while not lines.empty():
        line = lines.get_nowait()
        if line is None or not line.endswith("\n"):
            break
        acks.append(_ack(line))

    assert proc.returncode == -signal.SIGKILL
    store = open_store(store_location, model)
    try:
        _assert_whole_batches(store, "child", acks)
        assert store.revision() >= acks[-1][0]
        _assert_consistent(store)
    finally:
        store.close()


def _proposal_acks(proc: subprocess.Popen[str], lines: queue.Queue[str | None], wanted: int) -> list[list[str]]:
    """The child's lines (split) until `wanted` merges were acknowledged, then the kill, then the complete lines
    printed before it landed."""
    acks: list[list[str]] = []
    deadline = time.monotonic() + DEADLINE_S
    while sum(1 for a in acks if a[0] == "merged") < wanted:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"only {len(acks)} acks within {DEADLINE_S} s"
        line = lines.get(timeout=remaining)
        assert line is not None, f"the proposal loop exited after {len(acks)} acks (exit {proc.poll()})"
        acks.append(line.split())
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    while not lines.empty():
        line = lines.get_nowait()
        if line is None or not line.endswith("\n"):
            break
        acks.append(line.split())
    return acks


def test_sigkill_during_proposals_and_merges_loses_no_acknowledged_one_and_merges_all_or_nothing(
    store_location: str | Path, model: Model, tmp_path: Path
) -> None:
    """Issue 29: no acknowledged proposal, approval or merge is lost under SIGKILL, and a merge is all or nothing:
    a proposal is merged exactly when the whole of its batch is in the store, at its merge revision."""
    open_store(store_location, model).close()
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "_proposal_loop.py"), str(store_location)],
        cwd=tmp_path, env=_clean_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    lines: queue.Queue[str | None] = queue.Queue()
    try:
        assert proc.stdout is not None
        reader = _line_reader(proc.stdout, lines)
        acks = _proposal_acks(proc, lines, 40)
        reader.join(timeout=30)
    finally:
        _stop(proc)
        if proc.stdout is not None:
            proc.stdout.close()

    assert proc.returncode == -signal.SIGKILL
    proposed = {a[1]: int(a[2]) for a in acks if a[0] == "proposed"}
    merged = {a[1]: int(a[3]) for a in acks if a[0] == "merged"}
    store = open_store(store_location, model)
    try:
        stored = {row[0]: (row[1], row[2], row[3]) for row in
                  store.rows("SELECT id, state, title, merge_revision FROM proposals", ())}  # fmt: skip
        assert set(proposed) <= set(stored)  # every acknowledged proposal is there
        for id_, revision in merged.items():  # every acknowledged merge is merged, at its revision
            assert stored[id_][0] == "merged"
            assert stored[id_][2] == revision
        present = set(batches_present(store, "proposal"))
        for id_, (state, title, revision) in stored.items():
            number = int(title.removeprefix("round "))
            missing = missing_parts(store, "proposal", number)
            if state == "merged":  # all of it, written by its merge
                assert missing == [], (id_, missing)
                edge = store.edge("reports_to", *batch_ids("proposal", number))
                assert edge is not None
                assert edge.revision == revision
            else:  # nothing of it
                assert state == "open"
                assert number not in present, (id_, missing)
        assert present <= {int(t.removeprefix("round ")) for s, t, _ in stored.values() if s == "merged"}
        _assert_consistent(store)
    finally:
        store.close()


def test_sigkill_of_a_serving_replica_during_http_writes_loses_no_acknowledged_batch(
    store_location: str | Path, model: Model, tmp_path: Path
) -> None:
    open_store(store_location, model).close()  # the model recorded, nothing seeded
    token = create_token(tmp_path, "writer", "admin")
    acks: list[tuple[int, int]] = []
    failures: list[str] = []
    with serving(store_location, cwd=tmp_path) as replica:
        client = httpx2.Client(base_url=replica.base, headers={"Authorization": f"Bearer {token}"}, timeout=30)

        def write() -> None:
            for number in range(10_000):  # until the kill breaks the connection
                try:
                    answer = client.post("/api/batch", json=batch_arguments("http", number))
                except httpx2.TransportError:
                    return
                if answer.status_code != 200:
                    failures.append(f"{answer.status_code} {answer.text[:300]}")
                    return
                acks.append((answer.json()["revision"], number))

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        _wait_until(lambda: len(acks) >= 30 or bool(failures) or not writer.is_alive(), "30 acknowledged batches")
        replica.popen.send_signal(signal.SIGKILL)
        writer.join(timeout=DEADLINE_S)
        client.close()
    assert failures == []
    assert len(acks) >= 30
    assert replica.popen.returncode == -signal.SIGKILL
    store = open_store(store_location, model)
    try:
        _assert_whole_batches(store, "http", acks)
        _assert_consistent(store)
    finally:
        store.close()


# -- PostgreSQL restarted under writers ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def restartable_postgres() -> Iterator[Server]:
    """A PostgreSQL server of this module's own, since the tests restart it."""
    server = Server.start_own()
    yield server
    server.stop()


@dataclass
class _Writer:
    """A thread committing batch after batch until told to stop, noting each acknowledgement and each error."""

    store: Store
    name: str
    stop: threading.Event
    acks: list[tuple[int, int]] = field(default_factory=list[tuple[int, int]])
    unavailable: list[StoreUnavailableError] = field(default_factory=list[StoreUnavailableError])
    unexpected: list[BaseException] = field(default_factory=list[BaseException])
    thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name=f"writer-{self.name}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        number = 0
        while not self.stop.is_set():
            try:
                result = self.store.commit(batch(self.name, number), principal=PRINCIPAL)
                self.acks.append((result.revision, number))
            except StoreUnavailableError as exc:
                self.unavailable.append(exc)
            except Exception as exc:  # noqa: BLE001 - anything else is the failure this test looks for
                self.unexpected.append(exc)
                return
            number += 1


def _wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"not within {DEADLINE_S} s: {what}"
        time.sleep(0.01)  # polling with a deadline


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_writers_across_a_postgresql_restart_get_clear_errors_recover_and_lose_no_acknowledged_write(
    restartable_postgres: Server, model: Model, mode: str
) -> None:
    url = restartable_postgres.new_database(synchronous_commit=True)
    store = open_store(url, model)
    stop = threading.Event()
    writers = [_Writer(store, f"w{n}", stop) for n in range(3)]
    try:
        for writer in writers:
            writer.start()
        _wait_until(lambda: all(len(w.acks) >= 10 for w in writers), "every writer has written 10 batches")
        restartable_postgres.restart(mode)
        after = [len(w.acks) for w in writers]
        _wait_until(lambda: all(len(w.acks) >= n + 10 or w.unexpected for w, n in zip(writers, after, strict=True)),
                    "every writer has written 10 more batches after the restart")  # fmt: skip
    finally:
        stop.set()
        for writer in writers:
            assert writer.thread is not None
            writer.thread.join(timeout=DEADLINE_S)
        store.close()

    assert [repr(exc) for w in writers for exc in w.unexpected] == []
    for error in (exc for w in writers for exc in w.unavailable):
        assert error.code == "unavailable"
        assert error.path == store.location
    reopened = open_store(url, model)
    try:
        for writer in writers:
            _assert_whole_batches(reopened, writer.name, writer.acks)
        _assert_consistent(reopened)
    finally:
        reopened.close()
        restartable_postgres.drop_database(url)


def test_a_read_after_a_postgresql_restart_is_answered_on_a_fresh_connection(
    restartable_postgres: Server, model: Model
) -> None:
    url = restartable_postgres.new_database()
    store = open_store(url, model)
    try:
        revision = store.revision()
        restartable_postgres.restart("fast")  # every connection of the store's pool is dropped
        assert list(store.iter_nodes()) == []  # a streamed read: its BEGIN meets a dropped connection
        assert store.revision() == revision
        assert store.node("person-nobody") is None
        result = store.commit(batch("after", 0), principal=PRINCIPAL)
        assert result.revision == revision + 3
    finally:
        store.close()
        restartable_postgres.drop_database(url)


def test_the_change_feed_waits_out_a_postgresql_outage_with_one_warning_and_delivers_once_it_is_back(
    restartable_postgres: Server, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the server is down the pump keeps trying (each fallback tick) without a traceback per attempt: one
    warning when the outage starts, one when it ends, and the changes committed after it are delivered."""
    import core.store.postgres

    monkeypatch.setattr(core.store.postgres, "POOL_TIMEOUT_S", 0.5)  # each attempt meets the outage in 0.5 s, not 30
    url = restartable_postgres.new_database()
    instance = open_instance(Config(store=url, seed=False))
    assert instance.index is not None
    index = instance.index
    feed = ChangeFeed(index, fallback_s=0.02)
    attempts: list[bool] = []  # one per sync the pump made, and whether it reached the store
    sync = index.sync

    def counted_sync() -> Any:
        try:
            found = sync()
        except StoreUnavailableError:
            attempts.append(False)
            raise
        attempts.append(True)
        return found

    index.sync = counted_sync  # type: ignore[method-assign]

    async def outage() -> list[str]:
        async with pumping(feed), feed.watch(None) as changes:
            await anyio.to_thread.run_sync(restartable_postgres.stop_for_now)
            with anyio.fail_after(DEADLINE_S):
                while attempts.count(False) < 3:  # the pump met the outage several times
                    await anyio.sleep(0.01)
            await anyio.to_thread.run_sync(restartable_postgres.start_again)
            arguments = {"id": "team-after-outage", "type": "Team", "properties": {
                "name": "After", "slug": "after", "mission": "Exist after an outage.", "area": "platform"}}  # fmt: skip
            with anyio.fail_after(DEADLINE_S):  # the pool reconnects on its own schedule: a client tries again
                while (written := await anyio.to_thread.run_sync(
                        instance.dispatcher.call_tool, LOCAL, "test", "upsert_node", arguments)).is_error:  # fmt: skip
                    assert written.as_json()["error"]["code"] == "unavailable", written.as_json()
                    await anyio.sleep(0.1)
            with anyio.fail_after(DEADLINE_S):
                change = await changes.__anext__()
            return [change.key]

    caplog.set_level(logging.WARNING, logger="canon.changes")
    try:
        delivered = anyio.run(outage)
    finally:
        instance.close()
        restartable_postgres.drop_database(url)
    assert delivered == ["team-after-outage"]
    records = [r for r in caplog.records if r.name == "canon.changes"]
    assert [r.levelno for r in records] == [logging.WARNING, logging.WARNING], [r.getMessage() for r in records]
    assert "change events wait" in records[0].getMessage()
    assert "unavailable" in records[0].getMessage()
    assert "is back" in records[1].getMessage()


def test_tool_calls_after_a_postgresql_restart_are_answered_and_audited(restartable_postgres: Server) -> None:
    url = restartable_postgres.new_database()
    instance = open_instance(Config(store=url))  # seeded
    try:
        dispatcher = instance.dispatcher
        assert not dispatcher.call_tool(LOCAL, "test", "get_node", {"id": "svc-checkout-api"}).is_error
        restartable_postgres.restart("fast")
        read = dispatcher.call_tool(LOCAL, "test", "get_node", {"id": "svc-checkout-api"})
        assert read.as_json()["node"]["id"] == "svc-checkout-api"
        team = {
            "id": "team-after-restart",
            "type": "Team",
            "properties": {"name": "After", "slug": "after", "mission": "Exist after a restart.", "area": "platform"},
        }
        written = dispatcher.call_tool(LOCAL, "test", "upsert_node", team)
        assert written.as_json()["created"] is True
        assert instance.store.node("team-after-restart") is not None
    finally:
        instance.close()
    reopened = open_store(url, instance.store.model)
    try:
        outcomes = reopened.audit_records(AuditQuery(principal=LOCAL.name), before=None, limit=10)[0]
        assert [(r["target"], r["outcome"]) for r in reversed(outcomes)] == [
            ("get_node", "ok"), ("get_node", "ok"), ("upsert_node", "ok")]  # fmt: skip
    finally:
        reopened.close()
        restartable_postgres.drop_database(url)
