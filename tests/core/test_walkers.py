"""core.dispatch.walkers: graph walks answered by walk worker processes, with the serving process's answers, bounds and
visibility (the visibility of each walk is also checked both ways in tests/core/test_access.py)."""

from __future__ import annotations

import copy
import dataclasses
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from core.dispatch.dispatcher import Dispatcher, ToolResult
from core.dispatch.walkers import NICENESS, Walkers
from core.lang.model import parse_model
from core.ops.config import Config, load_config
from core.seam.instance import Instance, open_instance
from core.store import open_existing_store
from core.tools import HANDLERS
from core.values.errors import ForbiddenError, LimitExceededError, UnavailableError
from core.values.operations import PutEdge, PutNode
from core.values.principal import LOCAL, Principal
from core.values.records import Edge, Node

pytestmark = pytest.mark.both_backends

TEAM, SERVICE = "team-payments", "svc-checkout-api"
WALKS = [
    ("get_neighbors", {"id": SERVICE, "depth": 3, "limit": 50}),
    ("find_paths", {"source": SERVICE, "target": "team-leadership", "max_depth": 5, "limit": 20}),
    ("query_graph", {"match": [{"node": "p", "type": "Person"}, {"edge": "member_of", "from": "p", "to": "t"}],
                     "limit": 50}),
]  # fmt: skip
READER = Principal("bob", frozenset({"reader"}))
BOOT_S = 60.0  # loading a seeded store's graph takes well under a second; a shared machine may be slow
WAIT_S = 10.0


@pytest.fixture(scope="module")
def instance(module_store_location: str | Path) -> Iterator[Instance]:
    """A seeded instance whose walks run in one worker process."""
    opened = open_instance(Config(store=module_store_location, walk_workers=1))
    yield opened
    opened.close()


@pytest.fixture
def walkers(instance: Instance) -> Walkers:
    """The instance's worker pool, its worker started and ready (a test before may have replaced it)."""
    pool = instance.walkers
    assert pool is not None
    assert pool.ready(BOOT_S), "the walk worker did not start"
    return pool


def in_process(instance: Instance) -> Dispatcher:
    """The instance's dispatcher with its walks in this process."""
    return dataclasses.replace(instance.dispatcher, walkers=None)


def walk(dispatcher: Dispatcher, tool: str, arguments: dict[str, Any], **options: Any) -> ToolResult:
    return dispatcher.call_tool(LOCAL, "test", tool, arguments, **options)


def in_background(call: Any) -> tuple[threading.Thread, list[ToolResult]]:
    """Run `call()` in a thread; the list receives its result."""
    results: list[ToolResult] = []
    thread = threading.Thread(target=lambda: results.append(call()))
    thread.start()
    return thread, results


@pytest.mark.parametrize(("tool", "arguments"), WALKS, ids=[t for t, _ in WALKS])
@pytest.mark.parametrize("who", [LOCAL, READER], ids=["admin", "reader"])
def test_a_walk_answered_by_a_worker_equals_the_same_walk_run_in_the_serving_process(
    instance: Instance, walkers: Walkers, who: Principal, tool: str, arguments: dict[str, Any]
) -> None:
    answered = walkers.answered
    there = instance.dispatcher.call_tool(who, "test", tool, arguments)
    here = in_process(instance).call_tool(who, "test", tool, arguments)
    assert walkers.answered == answered + 1
    assert not there.is_error, there.as_json()
    assert there.as_json() == here.as_json()


def test_an_error_from_a_worker_reaches_the_caller_as_the_same_canon_error(
    instance: Instance, walkers: Walkers
) -> None:
    hidden = Node("svc-walkers-hidden", "Service", _service_properties("svc-walkers-hidden"), "restricted")
    instance.store.commit([PutNode(hidden)], principal="test")
    answered = walkers.answered
    there = instance.dispatcher.call_tool(READER, "test", "get_neighbors", {"id": hidden.id})
    assert walkers.answered == answered + 1
    assert isinstance(there.error, ForbiddenError)
    assert (
        there.as_json() == in_process(instance).call_tool(READER, "test", "get_neighbors", {"id": hidden.id}).as_json()
    )


def test_a_walk_in_a_worker_sees_a_write_committed_just_before_it(instance: Instance, walkers: Walkers) -> None:
    before = walk(instance.dispatcher, "get_neighbors", {"id": TEAM, "limit": 100})  # the worker is current
    assert before.value is not None
    added = Node("svc-walkers-new", "Service", _service_properties("svc-walkers-new"), "public")
    instance.store.commit([PutNode(added), PutEdge(Edge("owns", TEAM, added.id))], principal="test")

    after = walk(instance.dispatcher, "get_neighbors", {"id": TEAM, "limit": 100})

    assert after.value is not None
    assert added.id in {item["node"]["id"] for item in after.value["items"]}
    assert after.value["total"] == before.value["total"] + 1
    assert after.value["revision"] >= instance.store.revision()


def test_a_walk_held_in_a_worker_past_its_deadline_answers_the_time_bound_and_keeps_the_worker(
    instance: Instance, walkers: Walkers
) -> None:
    hurried = dataclasses.replace(instance.dispatcher, time_limit_s=0.5)
    hold = walkers.hold()
    received = time.monotonic()
    thread, results = in_background(lambda: walk(hurried, "get_neighbors", {"id": SERVICE}, received=received))
    assert hold.reached.wait(WAIT_S)
    pid = hold.pid
    _until(lambda: time.monotonic() > received + 0.5)  # its deadline has passed while the worker held it
    hold.release()
    thread.join(WAIT_S)

    (result,) = results
    assert isinstance(result.error, LimitExceededError), result.as_json()
    assert result.error.limit == "time_s"
    assert walkers.pids() == [pid]  # the worker answered in time: it stays


def test_a_worker_that_does_not_answer_by_the_deadline_is_replaced_and_the_call_answers_the_time_bound(
    instance: Instance, walkers: Walkers
) -> None:
    hurried = dataclasses.replace(instance.dispatcher, time_limit_s=0.2)
    hold = walkers.hold()  # never released: the worker answers nothing
    started = time.monotonic()

    result = walk(hurried, "find_paths", {"source": SERVICE, "target": TEAM})

    assert isinstance(result.error, LimitExceededError), result.as_json()
    assert result.error.limit == "time_s"
    assert time.monotonic() - started < WAIT_S
    assert hold.pid is not None
    assert not psutil.pid_exists(hold.pid) or psutil.Process(hold.pid).status() == psutil.STATUS_ZOMBIE
    assert walkers.ready(BOOT_S)
    assert hold.pid not in walkers.pids()
    assert walk(instance.dispatcher, "find_paths", {"source": SERVICE, "target": TEAM}).value is not None


def test_a_worker_killed_mid_walk_gives_a_clear_error_and_the_next_walk_is_answered(
    instance: Instance, walkers: Walkers
) -> None:
    hold = walkers.hold()
    thread, results = in_background(lambda: walk(instance.dispatcher, "get_neighbors", {"id": SERVICE}))
    assert hold.reached.wait(WAIT_S)
    assert hold.pid is not None
    os.kill(hold.pid, signal.SIGKILL)  # the worker this test's walk started
    hold.release()
    thread.join(WAIT_S)

    (result,) = results
    assert isinstance(result.error, UnavailableError), result.as_json()
    error = result.as_json()["error"]
    assert error["code"] == "unavailable"
    assert f"process {hold.pid}" in error["message"]
    assert "signal 9" in error["message"]
    assert walkers.ready(BOOT_S)
    answered = walkers.answered
    again = walk(instance.dispatcher, "get_neighbors", {"id": SERVICE})
    assert again.value is not None
    assert walkers.answered == answered + 1
    assert hold.pid not in walkers.pids()


def test_get_node_answers_while_a_walk_is_held_in_a_worker(instance: Instance, walkers: Walkers) -> None:
    hold = walkers.hold()
    thread, results = in_background(lambda: walk(instance.dispatcher, "get_neighbors", {"id": SERVICE}))
    try:
        assert hold.reached.wait(WAIT_S)
        read = walk(instance.dispatcher, "get_node", {"id": SERVICE})
        assert read.value is not None
        assert read.value["node"]["id"] == SERVICE
        assert not results  # the walk is still held
    finally:
        hold.release()
        thread.join(WAIT_S)
    (result,) = results
    assert result.value is not None


def test_a_worker_runs_at_a_lower_scheduling_priority_than_the_serving_process(walkers: Walkers) -> None:
    (pid,) = walkers.pids()
    assert psutil.Process(pid).nice() == min(19, os.nice(0) + NICENESS)


def test_closing_the_instance_stops_its_workers(module_store_location: str | Path) -> None:
    opened = open_instance(Config(store=module_store_location, walk_workers=2))
    pool = opened.walkers
    assert pool is not None
    assert pool.ready(BOOT_S)
    pids = pool.pids()
    assert len(pids) == 2
    opened.close()
    assert pool.pids() == []
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids)


@pytest.mark.sqlite_only("the setting, read from canon.toml, is the same for either backend")
def test_walk_workers_zero_runs_walks_in_the_serving_process(tmp_path: Path) -> None:
    (tmp_path / "canon.toml").write_text("[server]\nwalk_workers = 0\n", encoding="utf-8")
    config = load_config(tmp_path / "canon.toml", env={})
    assert config.walk_workers == 0
    opened = open_instance(dataclasses.replace(config, store=tmp_path / "canon.db"))
    try:
        assert opened.walkers is None
        assert walk(opened.dispatcher, "get_neighbors", {"id": SERVICE}).value is not None
    finally:
        opened.close()


def _service_properties(id_: str) -> dict[str, Any]:
    return {"name": id_, "description": id_, "lifecycle": "production", "tier": 2}


def _until(condition: Any, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition did not hold in time"
        time.sleep(0.01)


@pytest.mark.sqlite_only("the worker's check of the model does not depend on the store")
def test_a_walk_under_another_model_than_the_workers_runs_in_the_serving_process_until_it_reloads(
    tmp_path: Path,
) -> None:
    opened = open_instance(Config(store=tmp_path / "canon.db", walk_workers=1))
    try:
        document = copy.deepcopy(dict(opened.model.document))
        document["x-canon-model"]["version"] = "1.1.0"
        document["$defs"]["Team"]["properties"]["budget"] = {"description": "Yearly budget.", "type": "integer"}
        # another process changes the model; the worker, started after, opens the store on the new one
        elsewhere = open_existing_store(tmp_path / "canon.db")
        try:
            elsewhere.apply_model(parse_model(document, source="budget.schema.json"), principal="test")
        finally:
            elsewhere.close()
        pool = opened.walkers
        assert pool is not None
        assert pool.ready(BOOT_S)
        answered = pool.answered

        assert walk(opened.dispatcher, "get_neighbors", {"id": SERVICE}).value is not None
        assert pool.answered == answered  # this process still serves the model before: the walk ran here

        assert opened.reload_model()
        assert walk(opened.dispatcher, "get_neighbors", {"id": SERVICE}).value is not None
        assert pool.answered == answered + 1
    finally:
        opened.close()


@pytest.mark.sqlite_only("which handlers a worker runs does not depend on the store")
def test_a_worker_runs_only_the_walk_handlers_it_was_handed(walkers: Walkers) -> None:
    def elsewhere(ctx: object, arguments: dict[str, Any]) -> dict[str, Any]:
        return {}

    assert walkers.serves("get_neighbors", HANDLERS["get_neighbors"])  # the instance hands its pool canon's own
    assert not walkers.serves("get_neighbors", elsewhere)  # a tools folder's handler runs in the serving process
    assert not walkers.serves("regional_walk", elsewhere)
    mine = Walkers("unused.db", 1, {"regional_walk": elsewhere}, "tests.unused:TABLE")  # never started: no walk
    assert mine.serves("regional_walk", elsewhere)
    assert not mine.serves("get_neighbors", HANDLERS["get_neighbors"])


@pytest.mark.sqlite_only("the handlers' source is checked before any store is opened")
def test_a_pool_refuses_a_handlers_source_that_names_no_attribute() -> None:
    with pytest.raises(ValueError, match="module:attribute"):
        Walkers("unused.db", 1, HANDLERS, "core.tools")


def test_a_request_that_reaches_its_worker_late_keeps_the_call_s_deadline(instance: Instance) -> None:
    """The deadline travels as the serving process's own monotonic time (one clock for every process here), not as
    time left counted again from when the worker reads the request: a request delayed on its way (a busy machine)
    is answered `limit_exceeded`, unwalked."""
    from core.dispatch.walkers import WalkRequest, _run  # pyright: ignore[reportPrivateUsage]

    assert instance.index is not None
    arguments = {**instance.registry.input_defaults("get_neighbors"), "id": SERVICE}
    request = WalkRequest("get_neighbors", LOCAL, "test", arguments, time.monotonic() + 0.2, 0.2,
                          instance.index.revision, instance.store.model.digest)  # fmt: skip
    in_time = _run(
        None,  # type: ignore[arg-type]  (no hold: no pipe used)
        instance.store, instance.index, HANDLERS, dataclasses.replace(request, deadline=time.monotonic() + 60),
    )  # fmt: skip
    assert in_time[0] == "ok"
    time.sleep(0.25)  # the request on its way to the worker: past its deadline when read
    late = _run(None, instance.store, instance.index, HANDLERS, request)  # type: ignore[arg-type]  (no hold: no pipe used)
    assert late[0] == "error"
    assert late[1] is LimitExceededError
