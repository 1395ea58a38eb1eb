"""Change notifications, both eras: 2025-11-25 `resources/subscribe` and 2026-07-28 `subscriptions/listen`.

Every body runs against two targets: the server in this process (the test commits through the instance's own
store) and a real `canon serve` child process (the test process commits to the store file, as another process
would). "Not delivered" is proven without timing: a second subscribed URI is changed *after* the one that must
not be heard of, and notifications of one connection arrive in order, so when the second arrives the first
would already have.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp
import mcp_types as types
import pytest
from mcp.client.subscriptions import ResourcesListChanged, ResourceUpdated
from mcp.server.lowlevel.server import Server

from core.dispatch import proposals
from core.lang.model import load_model
from core.seam.changes import ChangeFeed
from core.store.sqlite import SQLiteStore
from core.values.operations import PutNode
from core.values.principal import Principal, Reviewers
from core.values.records import Node
from core.values.uris import CHANGES_URI, node_uri, proposal_uri
from tests.mcp.conftest import DEADLINE_S, LEGACY, MODERN, copy_store, open_copy, pumping, serve, serving, touch_node

pytestmark = pytest.mark.anyio

PAYMENTS, BILLING, SEARCH = "team-payments", "team-billing", "team-search"
LEADERSHIP = "team-leadership"
A, B = node_uri("Team", PAYMENTS), node_uri("Team", BILLING)


@dataclass
class Target:
    """Where the client connects, and how the test commits a change to a node of the server's store."""

    connect: Server[Any] | str
    commit: Callable[[str], int]
    create: Callable[[], int]
    feed: ChangeFeed | None = None  # in-process only: the pump the test must run
    on_store: Callable[[Callable[[Any], Any]], Any] = lambda work: None  # run `work` on the server's store

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        if self.feed is None:  # a child process runs its own pump
            yield
            return
        async with pumping(self.feed):
            yield

    async def touch(self, node_id: str) -> int:
        return await anyio.to_thread.run_sync(self.commit, node_id)


_created = itertools.count(1)


def _new_team(store: Any) -> int:
    """Create a Team (a new node: the resource list changes); return the store revision."""
    template = store.node(PAYMENTS)
    assert isinstance(template, Node)
    n = next(_created)
    properties = dict(template.properties) | {"slug": f"wire-{n}", "name": f"Wire {n}"}
    team = dataclasses.replace(template, id=f"team-wire-{n}", properties=properties, revision=0)
    result = store.commit([PutNode(team, expected_revision=0)], principal="test:wire")
    revision: int = result.revision
    return revision


def _in_file(path: Path, change: Callable[[SQLiteStore], int]) -> int:
    """As another process would: open the store file, commit, close it."""
    store = SQLiteStore.open(path, load_model())
    try:
        return change(store)
    finally:
        store.close()


@pytest.fixture(scope="module", params=["in-process", "other-process"])
def target(request: pytest.FixtureRequest, seed_template: Path, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Target]:  # fmt: skip
    """One target per module; the tests only add revisions, so they share it."""
    folder = tmp_path_factory.mktemp(request.param)
    if request.param == "in-process":
        instance = open_copy(seed_template, folder)
        try:
            served = serve(instance)
            yield Target(served.server, lambda node_id: touch_node(instance.store, node_id),
                         lambda: _new_team(instance.store), served.feed, lambda work: work(instance.store))  # fmt: skip
        finally:
            instance.close()
        return
    path = copy_store(seed_template, folder / "canon.db")
    with serving(path, cwd=folder) as process:
        yield Target(process.url, lambda node_id: _in_file(path, lambda s: touch_node(s, node_id)),
                     lambda: _in_file(path, _new_team), on_store=lambda work: _in_file(path, work))  # fmt: skip


class Notifications:
    """A 2025-11-25 client's message handler: the notifications it receives, in order."""

    def __init__(self) -> None:
        self._send, self._receive = anyio.create_memory_object_stream[types.ServerNotification](1000)

    async def __call__(self, message: Any) -> None:
        if isinstance(message, Exception):
            raise message
        self._send.send_nowait(message)

    async def next_update(self) -> str:
        """The URI of the next `notifications/resources/updated`, within the deadline."""
        with anyio.fail_after(DEADLINE_S):
            while True:
                message = await self._receive.receive()
                if isinstance(message, types.ResourceUpdatedNotification):
                    return str(message.params.uri)

    async def next_of(self, kind: type[types.ServerNotification]) -> types.ServerNotification:
        with anyio.fail_after(DEADLINE_S):
            while not isinstance(message := await self._receive.receive(), kind):
                pass
            return message

    def close(self) -> None:
        self._send.close()
        self._receive.close()


@contextlib.asynccontextmanager
async def watching(
    connect: Server[Any] | str, mode: str, uris: list[str]
) -> AsyncIterator[Callable[[], Awaitable[str]]]:
    """A client of `mode` subscribed to `uris`; yields a function giving the next updated URI it hears of.

    Over HTTP the modern client negotiates as clients do (`auto`: it probes `server/discover`).
    """
    notifications = Notifications()
    connect_mode = "auto" if mode == MODERN and isinstance(connect, str) else mode
    try:
        async with mcp.Client(connect, mode=connect_mode, message_handler=notifications) as client:  # type: ignore[arg-type]
            assert client.protocol_version == (LEGACY if mode == "legacy" else MODERN)
            if mode == "legacy":
                for uri in uris:
                    with pytest.warns(mcp.MCPDeprecationWarning):
                        await client.subscribe_resource(uri)
                yield notifications.next_update
                return
            async with client.listen(resource_subscriptions=uris) as subscription:
                assert subscription.honored.resource_subscriptions == uris

                async def next_update() -> str:
                    with anyio.fail_after(DEADLINE_S):
                        event = await anext(subscription)
                    assert isinstance(event, ResourceUpdated)
                    return event.uri

                yield next_update
    finally:
        notifications.close()


async def test_a_subscriber_hears_of_its_nodes_and_not_of_others(target: Target, revision: str) -> None:
    async with target.running(), watching(target.connect, revision, [A, B]) as next_update:
        await target.touch(SEARCH)  # not subscribed: must not be heard of
        await target.touch(PAYMENTS)
        assert await next_update() == A
        await target.touch(BILLING)
        assert await next_update() == B


async def test_a_client_that_never_subscribed_to_a_node_hears_nothing_of_it(target: Target, revision: str) -> None:
    async with (
        target.running(),
        watching(target.connect, revision, [A]) as next_of_a,
        watching(target.connect, revision, [B]) as next_of_b,
    ):
        await target.touch(PAYMENTS)
        await target.touch(BILLING)

        assert await next_of_a() == A
        assert await next_of_b() == B  # A was changed first: had it been sent to this client, it would be here
        await target.touch(BILLING)
        await target.touch(PAYMENTS)
        assert await next_of_a() == A  # and the other way round


async def test_a_proposal_subscriber_hears_of_each_of_its_state_changes(target: Target, revision: str) -> None:
    """A proposal's state is not in the change log: the feed follows the proposals' own stamps, in any process."""
    author, reviewer = Principal("agent-7", frozenset({"writer"})), Principal("rita", frozenset({"admin"}))
    patch = [{"op": "patch_node", "id": SEARCH, "properties": {}}]
    id_ = await anyio.to_thread.run_sync(target.on_store, lambda s: proposals.propose(s, author, patch, "t", "r").id)
    uri = proposal_uri(id_)
    marker = node_uri("Team", LEADERSHIP)  # a node no other test here touches (each touch lengthens its name)
    async with target.running(), watching(target.connect, revision, [uri, marker]) as next_update:
        await target.touch(LEADERSHIP)  # whatever was said of the proposal's creation comes before this
        while await next_update() != marker:
            pass
        await anyio.to_thread.run_sync(target.on_store, lambda s: proposals.comment(s, reviewer, id_, "Why?"))
        assert await next_update() == uri
        await anyio.to_thread.run_sync(
            target.on_store, lambda s: proposals.review(s, reviewer, id_, "reject", "No.", Reviewers())
        )
        assert await next_update() == uri
        await target.touch(LEADERSHIP)
        assert await next_update() == marker  # and nothing more of the proposal came in between


async def test_a_changes_subscriber_hears_of_every_change(target: Target, revision: str) -> None:
    async with target.running(), watching(target.connect, revision, [CHANGES_URI]) as next_update:
        await target.touch(SEARCH)
        assert await next_update() == CHANGES_URI


async def test_a_legacy_subscriber_hears_nothing_more_after_unsubscribing(target: Target) -> None:
    notifications = Notifications()
    try:
        async with target.running(), mcp.Client(target.connect, mode="legacy", message_handler=notifications) as client:
            with pytest.warns(mcp.MCPDeprecationWarning):
                await client.subscribe_resource(A)
            with pytest.warns(mcp.MCPDeprecationWarning):
                await client.subscribe_resource(B)
            await target.touch(PAYMENTS)
            assert await notifications.next_update() == A

            with pytest.warns(mcp.MCPDeprecationWarning):
                await client.unsubscribe_resource(A)
            await target.touch(PAYMENTS)
            await target.touch(BILLING)
            assert await notifications.next_update() == B  # not A: it was unsubscribed
    finally:
        notifications.close()


async def test_a_legacy_subscription_to_an_unknown_node_is_resource_not_found(target: Target) -> None:
    async with target.running(), mcp.Client(target.connect, mode="legacy") as client:
        with pytest.warns(mcp.MCPDeprecationWarning), pytest.raises(mcp.MCPError) as raised:
            await client.subscribe_resource(node_uri("Team", "team-nowhere"))

    assert raised.value.code == -32002


async def test_a_modern_listener_asking_for_list_changes_hears_that_a_node_was_created(target: Target) -> None:
    async with (
        target.running(),
        mcp.Client(target.connect, mode="2026-07-28") as client,
        client.listen(resources_list_changed=True) as subscription,
    ):
        await target.touch(SEARCH)  # a change, not a creation: the list is the same
        await anyio.to_thread.run_sync(target.create)
        with anyio.fail_after(DEADLINE_S):
            event = await anext(subscription)

    assert isinstance(event, ResourcesListChanged)


async def test_a_legacy_client_that_listed_resources_hears_that_a_node_was_created(target: Target) -> None:
    # list_changed is advertised at initialize (resources.listChanged: true), so every session that
    # listed the resources is told the list changed, whether or not it ever called tools/list or subscribe.
    notifications = Notifications()
    try:
        async with target.running(), mcp.Client(target.connect, mode="legacy", message_handler=notifications) as client:
            first = await client.list_resources()
            assert first.resources
            await anyio.to_thread.run_sync(target.create)
            message = await notifications.next_of(types.ResourceListChangedNotification)
    finally:
        notifications.close()

    assert isinstance(message, types.ResourceListChangedNotification)


async def test_a_write_through_the_write_tool_notifies_the_subscribers_of_that_node(
    seed_template: Path, tmp_path: Path, revision: str
) -> None:
    """The write path itself (tool → commit → index sync → fan-out), not a commit behind the server's back."""
    instance = open_copy(seed_template, tmp_path)
    try:
        served = serve(instance)  # the local principal: an admin, who may write
        current = instance.store.node(PAYMENTS)
        assert current is not None
        renamed = {**current.properties, "name": "Payments (renamed)"}
        async with (
            pumping(served.feed),
            watching(served.server, revision, [A, B]) as next_update,
            served.client(revision) as writer,
        ):
            result = await writer.call_tool("upsert_node", {"id": PAYMENTS, "type": "Team", "properties": renamed,
                                                            "expected_revision": current.revision})  # fmt: skip
            assert result.is_error is not True, result.content
            assert await next_update() == A
            deleted = await writer.call_tool("delete_edge", {"type": "owns", "source": BILLING,
                                                             "target": "svc-invoice-generator"})  # fmt: skip
            assert deleted.is_error is not True, deleted.content
            await anyio.to_thread.run_sync(touch_node, instance.store, BILLING)
            assert await next_update() == B  # an edge change names no node resource: B is the next one heard
    finally:
        instance.close()
