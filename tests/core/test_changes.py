"""The change feed (`core.seam.changes`): batches to subscribers, filtered streams to watchers, a pump that wakes on
commit, and the resource URIs a change touches. Real stores and indexes; the pump runs where a test says so."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest

from core.dispatch.access import sight_of
from core.seam.changes import Batch, ChangeFeed, uris_of
from core.seam.instance import Instance
from core.values.operations import DeleteNode, PutEdge, PutNode
from core.values.principal import ANONYMOUS, LOCAL, Principal
from core.values.records import Change, Edge, Node
from core.values.uris import CHANGES_URI, node_uri
from tests.mcp.conftest import open_copy, pumping

pytestmark = pytest.mark.anyio
READER = Principal("feed-reader", frozenset({"reader"}))
PAYMENTS = "team-payments"  # public in the seed


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def instance(seed_template: Path, tmp_path: Path) -> Iterator[Instance]:
    opened = open_copy(seed_template, tmp_path)
    yield opened
    opened.close()


def feed_of(instance: Instance, tick_s: float = 0.05) -> ChangeFeed:
    assert instance.index is not None
    return ChangeFeed(instance.index, tick_s=tick_s)


def rename(instance: Instance, name: str, id_: str = PAYMENTS) -> None:
    node = instance.store.node(id_)
    assert node is not None
    changed = dataclasses.replace(node, properties={**node.properties, "name": name})
    instance.store.commit([PutNode(changed)], principal=LOCAL.name)


async def delivered(instance: Instance, feed: ChangeFeed) -> None:
    """Sync the index and deliver, as one turn of the pump does."""
    assert instance.index is not None
    instance.index.sync()
    await feed.flush()


# -- watchers -----------------------------------------------------------------------------------------------------


async def test_a_watcher_hears_every_committed_change_in_order(instance: Instance) -> None:
    feed = feed_of(instance)
    heard: list[Change] = []
    async with pumping(feed), feed.watch(None) as changes:
        assert feed.watchers() == 1
        for n in range(3):
            await anyio.to_thread.run_sync(rename, instance, f"Payments {n}")
        with anyio.fail_after(10):
            async for change in changes:
                heard.append(change)
                if len(heard) == 3:
                    break
    assert feed.watchers() == 0
    assert [c.key for c in heard] == [PAYMENTS] * 3
    assert [c.revision for c in heard] == sorted(c.revision for c in heard)
    assert [c.after["properties"]["name"] for c in heard if c.after] == ["Payments 0", "Payments 1", "Payments 2"]


async def test_a_watcher_that_falls_behind_is_ended_not_left_to_grow(instance: Instance) -> None:
    feed = feed_of(instance)
    async with feed.watch(None, max_buffer=2) as changes:
        for n in range(3):
            rename(instance, f"P{n}")
        await delivered(instance, feed)
        got = [c.revision async for c in changes]  # ends: the stream was closed after the buffer filled
    assert len(got) == 2
    assert feed.watchers() == 0


async def test_a_change_committed_in_this_process_wakes_the_pump_without_waiting_for_its_tick(
    instance: Instance,
) -> None:
    feed = feed_of(instance, tick_s=3600)  # without the wake-up, delivery would wait an hour
    async with pumping(feed), feed.watch(None) as changes:
        await anyio.sleep(0)  # let the pump start and reach its wait
        for n in range(2):  # twice: the wake-up is re-armed after each delivery
            arguments = {"id": PAYMENTS, "type": "Team",
                         "properties": TEAM_PAYMENTS | {"mission": f"Moves money ({n})."}}  # fmt: skip
            await anyio.to_thread.run_sync(instance.dispatcher.call_tool, LOCAL, "test", "upsert_node", arguments)
            with anyio.fail_after(10):
                change = await changes.__anext__()
            assert change.key == PAYMENTS


async def test_a_watcher_of_one_uri_hears_only_the_changes_that_touch_it(instance: Instance) -> None:
    feed = feed_of(instance)
    async with feed.watch(None, node_uri("Team", PAYMENTS)) as payments, feed.watch(None, CHANGES_URI) as log:
        rename(instance, "Payments (watched)")
        rename(instance, "Billing (elsewhere)", "team-billing")
        await delivered(instance, feed)
        rename(instance, "Payments (again)")
        await delivered(instance, feed)
        with anyio.fail_after(10):
            mine = [await payments.__anext__() for _ in range(2)]
            every = [await log.__anext__() for _ in range(3)]
    assert [c.after["properties"]["name"] for c in mine if c.after] == ["Payments (watched)", "Payments (again)"]
    assert [c.key for c in every] == [PAYMENTS, "team-billing", PAYMENTS]


async def test_a_watcher_hears_only_the_changes_its_sight_sees_something_of(instance: Instance) -> None:
    secret = Node("svc-zz-secret", "Service", {"name": "zz-secret", "description": "Hidden.", "lifecycle": "production",
                                              "tier": 2}, "restricted", ("user:someone",))  # fmt: skip
    inside = dataclasses.replace(secret, id="svc-zz-inside", properties={**secret.properties, "name": "zz-inside"},
                                 visibility="internal", readers=())  # fmt: skip
    feed = feed_of(instance)
    async with feed.watch(sight_of(ANONYMOUS)) as anonymous, feed.watch(sight_of(READER)) as reader:
        instance.store.commit([PutNode(secret), PutNode(inside)], principal=LOCAL.name)
        instance.store.commit([PutEdge(Edge("depends_on", secret.id, inside.id, {"criticality": "soft"})),
                               PutEdge(Edge("owns", PAYMENTS, inside.id))], principal=LOCAL.name)  # fmt: skip
        instance.store.commit([DeleteNode(secret.id, cascade=True)], principal=LOCAL.name)
        rename(instance, "Payments (seen by all)")
        await delivered(instance, feed)
        with anyio.fail_after(10):
            by_reader, by_anonymous = await up_to_payments(reader), await up_to_payments(anonymous)
    assert by_reader == [inside.id, f"owns:{PAYMENTS}->{inside.id}", PAYMENTS]
    assert by_anonymous == [PAYMENTS]


async def up_to_payments(changes: AsyncIterator[Change]) -> list[str]:
    """The keys of the changes heard, up to the last one committed (the rename of team-payments)."""
    keys: list[str] = []
    async for change in changes:
        keys.append(change.key)
        if change.key == PAYMENTS:
            break
    return keys


# -- subscribers --------------------------------------------------------------------------------------------------


async def test_a_subscriber_gets_each_batch_with_the_uris_it_touches_and_what_came_or_went(instance: Instance) -> None:
    feed = feed_of(instance)
    batches: list[Batch] = []

    async def keep(batch: Batch) -> None:
        batches.append(batch)

    feed.subscribe(keep)
    rename(instance, "Payments 1")
    rename(instance, "Billing 1", "team-billing")
    rename(instance, "Payments 2")
    await delivered(instance, feed)
    await delivered(instance, feed)  # nothing new: no batch
    payments = instance.store.node(PAYMENTS)
    assert payments is not None
    new = dataclasses.replace(payments, id="team-zz-new", properties=TEAM_PAYMENTS | {"slug": "zz", "name": "ZZ"})
    instance.store.commit([PutNode(new)], principal="test")
    await delivered(instance, feed)

    assert len(batches) == 2
    assert [c.key for c in batches[0].changes] == [PAYMENTS, "team-billing", PAYMENTS]
    assert batches[0].uris == (node_uri("Team", PAYMENTS), node_uri("Team", "team-billing"), CHANGES_URI)
    assert (batches[0].model_changed, batches[0].nodes_came_or_went) == (False, False)
    assert batches[1].uris == (node_uri("Team", "team-zz-new"), CHANGES_URI)
    assert (batches[1].model_changed, batches[1].nodes_came_or_went) == (False, True)


async def test_a_failing_subscriber_does_not_cost_the_next_one_its_batch(instance: Instance) -> None:
    feed = feed_of(instance)
    heard: list[int] = []

    async def fail(batch: Batch) -> None:
        raise RuntimeError("a broken subscriber")

    async def keep(batch: Batch) -> None:
        heard.append(len(batch.changes))

    feed.subscribe(fail)
    feed.subscribe(keep)
    rename(instance, "Payments (despite it)")
    await delivered(instance, feed)
    assert heard == [1]


async def test_a_model_change_is_handed_on_only_once_the_new_model_is_served(instance: Instance) -> None:
    served: list[str] = []
    heard: list[tuple[bool, list[str]]] = []
    feed = feed_of(instance)
    feed.on_model_change = lambda: served.append("new model")

    async def keep(batch: Batch) -> None:
        heard.append((batch.model_changed, list(served)))

    feed.subscribe(keep)
    feed.collect([_model_change(instance.store.revision() + 1)])
    await feed.flush()
    assert heard == [(True, ["new model"])]


def _model_change(revision: int) -> Change:
    return Change(revision, "2026-12-01T00:00:00Z", "test", "model", "model", "model", None, None, {"version": "2"})


def test_the_uris_of_a_change_are_its_node_s_and_the_change_log_s() -> None:
    node = Change(7, "2026-12-01T00:00:00Z", "test", "put", "node", PAYMENTS, "Team", None, {"visibility": "public"})
    edge = dataclasses.replace(node, kind="edge", key=f"owns:{PAYMENTS}->svc-x", type="owns")
    assert uris_of(node) == (node_uri("Team", PAYMENTS), CHANGES_URI)
    assert uris_of(edge) == (CHANGES_URI,)
    assert uris_of(_model_change(8)) == (CHANGES_URI,)


TEAM_PAYMENTS = {"slug": "payments", "name": "Payments", "mission": "Moves money.", "area": "product"}
