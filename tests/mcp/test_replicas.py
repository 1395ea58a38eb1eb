"""Three real `canon serve` replicas on one PostgreSQL database, directly and behind a real HAProxy.

A write through one replica is read at once on the others, and reaches the subscribers of the others: MCP resource
subscribers of both protocol revisions, GraphQL subscriptions over WebSocket. Each replica wakes on PostgreSQL's
NOTIFY and falls back to checking the change log every second, so a lost notice (its listening session killed)
delays a change by at most that bound. Behind HAProxy (docs/operations/examples/haproxy.cfg, run as it is),
2026-07-28 calls spread over the replicas, and a 2025-11-25 session stays on the replica that holds it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import time
from collections.abc import AsyncGenerator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import anyio
import httpx2
import mcp
import psycopg
import pytest
from mcp.client.streamable_http import streamable_http_client
from websockets.sync.client import connect as websocket

from core.store.pg_notices import APPLICATION_NAME
from core.values.uris import node_uri
from tests.load_balancer import REPLICA_HEADER, Balancer, balancing
from tests.mcp.conftest import DEADLINE_S, LEGACY, MODERN, Process, create_token, serving
from tests.mcp.test_subscriptions import watching
from tests.postgres_server import Server

pytestmark = pytest.mark.anyio

PAYMENTS = "team-payments"
PAYMENTS_URI = node_uri("Team", PAYMENTS)
FALLBACK_S = 1.0  # ChangeFeed's fallback tick where the store sends notices


@dataclass(frozen=True)
class Replicas:
    """Three `canon serve` on one database, and a writer's token (the replicas share the token file)."""

    database: str
    processes: tuple[Process, Process, Process]
    writer: str

    def write(self, replica: int) -> str:
        """Rename team-payments through replica `replica` (its REST surface), to a name it never had; the name."""
        name = f"Payments ({next(_names)})"
        rename_payments(self.processes[replica].base, self.writer, name)
        return name


_names = itertools.count(1)


def rename_payments(base: str, token: str, name: str) -> int:
    headers = {"Authorization": f"Bearer {token}"}
    with httpx2.Client(base_url=base, headers=headers, timeout=DEADLINE_S) as http:
        current = http.get(f"/api/nodes/{PAYMENTS}")
        assert current.status_code == 200, current.text
        properties = current.json()["node"]["properties"] | {"name": name}
        put = http.put(f"/api/nodes/{PAYMENTS}", json={"type": "Team", "properties": properties})
        assert put.status_code == 200, put.text
        revision: int = put.json()["revision"]
        return revision


def name_on(base: str) -> str:
    with httpx2.Client(base_url=base, timeout=DEADLINE_S) as http:
        answer = http.get(f"/api/nodes/{PAYMENTS}")
        assert answer.status_code == 200, answer.text
        name: str = answer.json()["node"]["properties"]["name"]
        return name


@pytest.fixture(scope="module")
def replicas(postgres_server: Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    folder = tmp_path_factory.mktemp("replicas")
    database = postgres_server.new_database()
    writer = create_token(folder, "replica-writer", "writer")
    try:
        with contextlib.ExitStack() as running:
            first = running.enter_context(serving(database, cwd=folder))  # creates and seeds the store
            starting = [serving(database, cwd=folder) for _ in range(2)]
            for context in starting:
                running.push(context.__exit__)
            with ThreadPoolExecutor(len(starting)) as pool:  # the other two start side by side
                others = list(pool.map(lambda context: context.__enter__(), starting))
            yield Replicas(database, (first, others[0], others[1]), writer)
    finally:
        postgres_server.drop_database(database)


@pytest.fixture(scope="module")
def balancer(replicas: Replicas) -> Iterator[Balancer]:
    with balancing([f"127.0.0.1:{p.port}" for p in replicas.processes]) as running:
        yield running


def listening_sessions(database: str) -> list[int]:
    with psycopg.connect(database, autocommit=True) as db:
        rows = db.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s AND datname = "
                          "current_database()", (APPLICATION_NAME,)).fetchall()  # fmt: skip
    return [int(r[0]) for r in rows]


# -- replicas on one database --------------------------------------------------------------------------------------
def test_a_write_through_one_replica_is_read_at_once_through_the_others(replicas: Replicas) -> None:
    name = replicas.write(0)
    assert [name_on(p.base) for p in replicas.processes[1:]] == [name, name]
    name = replicas.write(2)
    assert [name_on(p.base) for p in replicas.processes[:2]] == [name, name]


@pytest.mark.parametrize("mode", ["legacy", MODERN], ids=[LEGACY, MODERN])
async def test_a_resource_subscriber_on_one_replica_hears_of_a_write_through_another(
    replicas: Replicas, mode: str
) -> None:
    async with watching(replicas.processes[1].url, mode, [PAYMENTS_URI]) as next_update:
        await anyio.to_thread.run_sync(replicas.write, 0)
        assert await next_update() == PAYMENTS_URI


def test_a_graphql_subscription_on_a_third_replica_hears_a_write_through_the_first(replicas: Replicas) -> None:
    base = replicas.processes[2].base.replace("http://", "ws://")
    query = f'subscription {{ resource_node(type: "Team", id: "{PAYMENTS}") {{ uri change {{ after }} }} }}'
    with websocket(f"{base}/graphql", subprotocols=["graphql-transport-ws"], open_timeout=DEADLINE_S) as socket:  # type: ignore[list-item]
        socket.send(json.dumps({"type": "connection_init", "payload": {}}))
        assert json.loads(socket.recv(timeout=DEADLINE_S))["type"] == "connection_ack"
        socket.send(json.dumps({"id": "1", "type": "subscribe", "payload": {"query": query}}))
        # The subscription starts watching at some point after `subscribe` (the protocol says not when): write
        # until it hears one, so no sleep decides the outcome; each write is heard by the time the next is made.
        deadline, written, message = time.monotonic() + DEADLINE_S, set[str](), None
        while message is None and time.monotonic() < deadline:
            written.add(replicas.write(0))
            with contextlib.suppress(TimeoutError):
                message = json.loads(socket.recv(timeout=FALLBACK_S + 1))
        assert message is not None, "the subscription on the third replica heard no write through the first"
        assert message["type"] == "next", message
        heard = message["payload"]["data"]["resource_node"]
        assert heard["uri"] == PAYMENTS_URI
        assert heard["change"]["after"]["properties"]["name"] in written


async def test_a_replica_whose_listening_session_is_killed_still_delivers_within_the_fallback_bound(
    replicas: Replicas,
) -> None:
    listening = listening_sessions(replicas.database)
    assert len(listening) == 3  # one per replica, outside its pool
    async with watching(replicas.processes[1].url, MODERN, [PAYMENTS_URI]) as next_update:
        with psycopg.connect(replicas.database, autocommit=True) as db:
            for pid in listening:
                db.execute("SELECT pg_terminate_backend(%s)", (pid,))
        started = time.monotonic()
        await anyio.to_thread.run_sync(replicas.write, 0)
        assert await next_update() == PAYMENTS_URI
        assert time.monotonic() - started < FALLBACK_S + 2.0  # the fallback tick's bound, with room for a slow box
    with anyio.fail_after(DEADLINE_S):  # and each replica listens again, on a new session
        while len(renewed := listening_sessions(replicas.database)) != 3:
            await anyio.sleep(0.02)
    assert not set(renewed) & set(listening)


# -- behind HAProxy -------------------------------------------------------------------------------------------------
@contextlib.asynccontextmanager
async def client_through(balancer: Balancer, mode: str, answered: list[str]) -> AsyncGenerator[mcp.Client]:
    """An SDK client of `mode` through the balancer; `answered` collects which replica answered each request."""

    async def note(response: httpx2.Response) -> None:
        answered.append(response.headers.get(REPLICA_HEADER, "?"))

    http = httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=300), event_hooks={"response": [note]})
    async with http, mcp.Client(streamable_http_client(f"{balancer.base}/mcp", http_client=http), mode=mode) as client:  # pyright: ignore[reportArgumentType]
        yield client


async def test_modern_calls_through_haproxy_spread_over_the_replicas_and_all_succeed(balancer: Balancer) -> None:
    answered: list[str] = []
    async with client_through(balancer, "auto", answered) as client:
        assert client.protocol_version == MODERN
        for _ in range(12):
            result = await client.call_tool("get_node", {"id": PAYMENTS})
            assert not result.is_error
            assert result.structured_content is not None
            assert result.structured_content["node"]["id"] == PAYMENTS
    assert set(answered) <= {"a", "b", "c"}  # every answer came through HAProxy, from a replica
    assert len(set(answered)) > 1  # round robin (all three while their health checks pass): any replica answers


async def test_a_legacy_session_through_haproxy_stays_on_the_replica_that_holds_it(
    balancer: Balancer, replicas: Replicas
) -> None:
    answered: list[str] = []
    async with watching(f"{balancer.base}/mcp", "legacy", [PAYMENTS_URI]) as next_update:
        await anyio.to_thread.run_sync(replicas.write, 2)  # heard on the session's GET stream
        assert await next_update() == PAYMENTS_URI
    async with client_through(balancer, "legacy", answered) as client:
        assert client.protocol_version == LEGACY
        for _ in range(6):
            result = await client.call_tool("get_node", {"id": PAYMENTS})
            assert not result.is_error
    assert len(answered) >= 7  # initialize, initialized, six calls (and the GET stream)
    assert len(set(answered)) == 1, answered  # every request of the session reached the replica that holds it
