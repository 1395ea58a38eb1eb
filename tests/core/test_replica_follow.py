"""A replica's change feed follows commits made by another process on the same PostgreSQL database.

The follower wakes on PostgreSQL's NOTIFY (sent in the write transaction, heard on a listening connection of the
process's own), so here its fallback tick is set far beyond the deadline: only a notice can deliver in time. A
commit whose notice is lost is still delivered, by the fallback tick, within its bound; a listening session that
is killed is replaced; a model change made elsewhere is served before it is heard of. The real-process version
of these promises is tests/mcp/test_replicas.py.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio
import psycopg
import pytest

from core.lang.model import Model
from core.ops.config import Config
from core.seam.changes import ChangeFeed
from core.seam.instance import Instance, open_instance
from core.store.pg_notices import APPLICATION_NAME
from core.store.postgres import PostgresStore
from core.values.records import Change
from core.values.uris import node_uri
from tests.core.test_store import changed_model, with_optional_team_budget
from tests.mcp.conftest import DEADLINE_S, pumping, touch_node
from tests.postgres_server import Server

pytestmark = pytest.mark.anyio

PAYMENTS = "team-payments"
NEVER_S = 600.0  # a fallback tick no test waits for: what arrives in time was woken by a notice


class Unannounced(PostgresStore):
    """A writer whose commits send no notice, as if the notice were lost on its way to the replicas."""

    @staticmethod
    def _announce(db: psycopg.Connection[Any], revision: int) -> None:
        return None


@contextmanager
def seeded(server: Server) -> Iterator[tuple[str, Instance]]:
    """A new database, and a seeded instance on it: the replica whose feed a test follows."""
    url = server.new_database()
    try:
        instance = open_instance(Config(store=url))
        try:
            yield url, instance
        finally:
            instance.close()
    finally:
        server.drop_database(url)


@pytest.fixture(scope="module")
def shared(postgres_server: Server) -> Iterator[tuple[str, Instance]]:
    """The module's database and replica: the tests only add revisions (one that changes the model has its own)."""
    with seeded(postgres_server) as made:
        yield made


@pytest.fixture(scope="module")
def database(shared: tuple[str, Instance]) -> str:
    return shared[0]


@pytest.fixture(scope="module")
def replica(shared: tuple[str, Instance]) -> Instance:
    return shared[1]


@pytest.fixture(scope="module")
def writer(database: str, replica: Instance, model: Model) -> Iterator[PostgresStore]:
    """Another process's store on the same database (opened after the replica seeded it)."""
    store = PostgresStore.open(database, model)
    yield store
    store.close()


def listening(database: str) -> list[tuple[int, str]]:
    """The sessions listening for canon's notices on `database`: (pid, last statement) each."""
    with psycopg.connect(database, autocommit=True) as db:
        rows = db.execute("SELECT pid, query FROM pg_stat_activity WHERE application_name = %s AND datname = "
                          "current_database()", (APPLICATION_NAME,)).fetchall()  # fmt: skip
    return [(int(pid), str(query)) for pid, query in rows]


async def until_listening(database: str, *, other_than: set[int] = frozenset()) -> int:  # type: ignore[assignment]
    """Wait, within the deadline, for one session to have run LISTEN (and none other than it); its pid."""
    with anyio.fail_after(DEADLINE_S):
        while True:
            sessions = [(pid, q) for pid, q in listening(database) if pid not in other_than]
            if len(sessions) == 1 and sessions[0][1].startswith("LISTEN"):
                return sessions[0][0]
            await anyio.sleep(0.01)


@asynccontextmanager
async def following(replica: Instance, database: str, fallback_s: float) -> AsyncGenerator[AsyncIterator[Change]]:
    """The replica's feed pumping, listening, and watching team-payments."""
    assert replica.index is not None
    feed = ChangeFeed(replica.index, fallback_s=fallback_s)
    async with pumping(feed), feed.watch(None, node_uri("Team", PAYMENTS)) as changes:
        await until_listening(database)
        yield changes


async def test_a_commit_by_another_process_wakes_the_replica_by_its_notice(
    replica: Instance, writer: PostgresStore, database: str
) -> None:
    async with following(replica, database, NEVER_S) as changes:
        revision = await anyio.to_thread.run_sync(touch_node, writer, PAYMENTS)
        with anyio.fail_after(DEADLINE_S):
            change = await anext(changes)
    assert (change.key, change.revision) == (PAYMENTS, revision)
    assert replica.index is not None
    assert replica.index.revision == revision
    with anyio.fail_after(DEADLINE_S):  # the pump stopped: its listening session is gone
        while listening(database):
            await anyio.sleep(0.01)


async def test_a_commit_whose_notice_is_lost_is_delivered_within_the_fallback_tick(
    replica: Instance, writer: PostgresStore, database: str, model: Model
) -> None:
    silent = Unannounced.open(database, model)
    try:
        async with following(replica, database, 0.5) as changes:
            started = time.monotonic()
            revision = await anyio.to_thread.run_sync(touch_node, silent, PAYMENTS)
            with anyio.fail_after(DEADLINE_S):
                change = await anext(changes)
            waited = time.monotonic() - started
    finally:
        silent.close()
    assert change.revision == revision
    assert waited < 0.5 + 1.0  # the tick's bound (0.5 s) and room for a busy machine


async def test_a_killed_listening_session_is_replaced_and_notices_wake_the_replica_again(
    replica: Instance, writer: PostgresStore, database: str
) -> None:
    async with following(replica, database, NEVER_S) as changes:
        killed = await until_listening(database)
        with psycopg.connect(database, autocommit=True) as db:
            db.execute("SELECT pg_terminate_backend(%s)", (killed,))
        await until_listening(database, other_than={killed})
        revision = await anyio.to_thread.run_sync(touch_node, writer, PAYMENTS)
        with anyio.fail_after(DEADLINE_S):
            while (change := await anext(changes)).revision != revision:
                pass
    assert change.key == PAYMENTS


async def test_a_model_change_made_by_another_process_is_served_by_the_replica_when_it_is_heard(
    postgres_server: Server,
) -> None:
    with seeded(postgres_server) as (database, replica):
        newer = changed_model(replica.model, with_optional_team_budget)
        assert replica.index is not None
        feed = ChangeFeed(replica.index, fallback_s=NEVER_S, on_model_change=replica.reload_model)
        async with pumping(feed), feed.watch(None) as changes:
            await until_listening(database)
            other = await anyio.to_thread.run_sync(PostgresStore.open_existing, database)
            try:
                await anyio.to_thread.run_sync(lambda: other.apply_model(newer, principal="user:admin"))
            finally:
                other.close()
            with anyio.fail_after(DEADLINE_S):
                change = await anext(changes)
            assert change.kind == "model"
            assert replica.model.version == newer.version  # served by the time anyone hears of it


def test_closing_the_store_ends_its_listening_sessions(database: str, model: Model) -> None:
    store = PostgresStore.open(database, model)
    store.notices(lambda: None)
    deadline = time.monotonic() + DEADLINE_S
    while not listening(database):
        assert time.monotonic() < deadline, "the store never listened"
        time.sleep(0.01)
    store.close()
    deadline = time.monotonic() + DEADLINE_S
    while listening(database):  # the server ends a session a moment after its client closed it
        assert time.monotonic() < deadline, "a listening session outlived its store"
        time.sleep(0.01)
