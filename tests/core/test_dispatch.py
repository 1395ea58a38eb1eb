"""The one dispatch path: look up, validate, execute under a time bound, audit, and answer with one JSON object."""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest

from core.dispatch.dispatcher import AuditRecord, CallContext, Dispatcher, ToolResult, handler, handlers_in
from core.dispatch.registry import build_registry
from core.dispatch.resources import read_resource
from core.ops.config import Config
from core.seam.instance import Instance, open_instance
from core.tools import HANDLERS
from core.values.audit import AuditQuery
from core.values.errors import LimitExceededError, NotFoundError, UnknownToolError
from core.values.json_values import MAX_DEPTH
from core.values.operations import PutNode
from core.values.principal import LOCAL, Principal

pytestmark = pytest.mark.both_backends
# `call_tool_now` answers on the event loop only when the store reads without waiting (`Store.uncontended`): the
# SQLite store can; the PostgreSQL store, whose every read waits on the network, always declines (the test below).
NOW_ON_SQLITE = pytest.mark.sqlite_only("call_tool_now answers only on a store that reads without waiting")

SERVICE = "svc-checkout-api"  # a node of the seed data


@pytest.fixture(scope="module")
def instance(module_store_location: str | Path) -> Iterator[Instance]:
    """A seeded instance shared by the module: every call here only reads."""
    opened = open_instance(Config(store=module_store_location))
    yield opened
    opened.close()


@pytest.fixture
def records() -> list[AuditRecord]:
    return []


@pytest.fixture
def dispatcher(instance: Instance, records: list[AuditRecord]) -> Dispatcher:
    """A dispatcher of its own per test, so the audit records are this test's only."""
    assert instance.index is not None
    fresh = Dispatcher(instance.registry, instance.store, instance.index, HANDLERS)
    fresh.audit_hooks.append(records.append)
    return fresh


def test_an_unknown_tool_raises_and_is_audited_as_unknown(dispatcher: Dispatcher, records: list[AuditRecord]) -> None:
    with pytest.raises(UnknownToolError) as caught:
        dispatcher.call_tool(LOCAL, "test", "get_nodes", {"id": SERVICE})

    assert caught.value.tool == "get_nodes"
    assert "get_node" in caught.value.suggestions
    [record] = records
    assert (record.action, record.target, record.outcome) == ("tools/call", "get_nodes", "unknown")


def test_an_unknown_tool_hints_only_at_tools_the_caller_may_call(dispatcher: Dispatcher) -> None:
    reader = Principal("user:ada", frozenset({"reader"}))
    with pytest.raises(UnknownToolError) as as_reader:
        dispatcher.call_tool(reader, "test", "upsert_nod", {})
    with pytest.raises(UnknownToolError) as as_admin:
        dispatcher.call_tool(LOCAL, "test", "upsert_nod", {})

    assert "upsert_node" in as_admin.value.suggestions
    assert "upsert_node" not in as_reader.value.suggestions  # a writer's tool: not on a reader's tools/list
    assert "upsert_node" not in str(as_reader.value)


def test_invalid_arguments_are_an_error_result_with_pointers_and_audited_as_invalid(
    dispatcher: Dispatcher, records: list[AuditRecord]
) -> None:
    result = dispatcher.call_tool(LOCAL, "test", "find_nodes", {"type": "Starship", "limit": 0})

    assert result.is_error
    assert result.value is None
    body = result.as_json()["error"]
    assert body["code"] == "invalid_arguments"
    assert body["tool"] == "find_nodes"
    assert {p["pointer"] for p in body["problems"]} == {"/type", "/limit"}
    assert all(isinstance(p["message"], str) and p["message"] for p in body["problems"])
    [record] = records
    assert (record.target, record.outcome) == ("find_nodes", "invalid")


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("tool", "arguments", "at"),
    [
        ("upsert_node", {"id": "team-x", "type": "Team", "properties": {"name": math.nan}}, "/properties/name"),
        ("find_nodes", {"type": "Service", "where": {"tier": {"gt": math.inf}}}, "/where/tier/gt"),
        ("find_nodes", {"type": "Service", "where": {"tier": -math.inf}}, "/where/tier"),
        ("get_changes", {"since": 2**63}, "/since"),
        ("find_nodes", {"type": "Service", "where": {"tier": {"in": [1, -(2**63) - 1]}}}, "/where/tier/in/1"),
        ("get_node", {"id": "svc-\ud800"}, "/id"),
        ("find_nodes", {"text": "\udfff tail"}, "/text"),
        ("upsert_node", {"id": "team-x", "type": "Team", "properties": {"\ud800": 1}}, "/properties"),
        (
            "find_nodes",
            {"type": "Service", "where": {"tier": {"in": _nested(2000)}}},
            "/where/tier/in" + "/0" * (MAX_DEPTH - 3),
        ),
    ],
    ids=["nan", "infinity", "-infinity", "2**63", "-2**63-1", "surrogate", "low-surrogate", "surrogate-key", "deep"],
)
def test_values_canon_cannot_hold_are_invalid_arguments_at_their_pointer(
    dispatcher: Dispatcher, records: list[AuditRecord], tool: str, arguments: dict[str, Any], at: str
) -> None:
    result = dispatcher.call_tool(LOCAL, "test", tool, arguments)

    body = result.as_json()["error"]
    assert body["code"] == "invalid_arguments"
    assert [p["pointer"] for p in body["problems"]] == [at]
    json.dumps(body).encode()  # the answer is sendable: no lone surrogate quoted back
    [record] = records
    assert record.outcome == "invalid"


def test_integers_at_the_ends_of_the_64_bit_range_are_arguments_like_any_other(dispatcher: Dispatcher) -> None:
    changes = dispatcher.call_tool(LOCAL, "test", "get_changes", {"since": 2**63 - 1})
    nodes = dispatcher.call_tool(LOCAL, "test", "find_nodes", {"type": "Service", "where": {"tier": {"gt": -(2**63)}}})

    assert changes.value is not None
    assert changes.value["total"] == 0
    assert nodes.value is not None
    assert nodes.value["total"] > 0


def test_arguments_are_validated_before_the_handler_runs(dispatcher: Dispatcher, records: list[AuditRecord]) -> None:
    # an empty id could only be "not found" if the handler ran; the schema refuses it first
    result = dispatcher.call_tool(LOCAL, "test", "get_node", {"id": ""})

    assert result.error is not None
    assert result.error.code == "invalid_arguments"
    assert [p["pointer"] for p in result.as_json()["error"]["problems"]] == ["/id"]
    assert records[-1].outcome == "invalid"


@pytest.mark.parametrize(
    "arguments",
    [{}, {"id": SERVICE, "colour": "blue"}],
    ids=["missing-required", "unknown-argument"],
)
def test_a_problem_with_the_arguments_object_itself_points_at_the_root(
    dispatcher: Dispatcher, arguments: dict[str, object]
) -> None:
    result = dispatcher.call_tool(LOCAL, "test", "get_node", arguments)

    assert result.error is not None
    assert result.error.code == "invalid_arguments"
    # RFC 6901: the whole document is "", while "/" would be a member named "" (core.values.documents.pointer agrees)
    assert [p["pointer"] for p in result.as_json()["error"]["problems"]] == [""]


def test_a_missing_node_is_a_not_found_result_audited_as_not_found(
    dispatcher: Dispatcher, records: list[AuditRecord]
) -> None:
    result = dispatcher.call_tool(LOCAL, "test", "get_node", {"id": "svc-does-not-exist"})

    assert isinstance(result.error, NotFoundError)
    body = result.as_json()["error"]
    assert body["code"] == "not_found"
    assert (body["kind"], body["key"]) == ("node", "svc-does-not-exist")
    [record] = records
    assert (record.target, record.outcome) == ("get_node", "not_found")


def test_a_successful_call_is_audited_with_who_where_what_and_how_long(
    dispatcher: Dispatcher, records: list[AuditRecord], instance: Instance
) -> None:
    caller = Principal("user:ada", frozenset({"reader"}))

    result = dispatcher.call_tool(caller, "rest", "get_node", {"id": SERVICE})

    assert not result.is_error
    [record] = records
    assert record.principal == "user:ada"
    assert record.surface == "rest"
    assert record.action == "tools/call"
    assert record.target == "get_node"
    assert record.outcome == "ok"
    assert record.revision == instance.store.revision()
    assert isinstance(record.duration_ms, float)
    assert record.duration_ms >= 0
    assert record.at.endswith("Z")
    assert len(record.arguments_digest) == 16
    assert set(record.arguments_digest) <= set("0123456789abcdef")


def test_the_audit_record_digests_the_arguments_without_carrying_them(
    dispatcher: Dispatcher, records: list[AuditRecord]
) -> None:
    dispatcher.call_tool(LOCAL, "test", "find_nodes", {"type": "Person", "text": "okafor"})
    dispatcher.call_tool(LOCAL, "test", "find_nodes", {"text": "okafor", "type": "Person"})
    dispatcher.call_tool(LOCAL, "test", "find_nodes", {"type": "Person", "text": "lindqvist"})

    first, same, other = records
    assert "okafor" not in json.dumps(asdict(first))
    assert "lindqvist" not in json.dumps(asdict(other))
    assert first.arguments_digest == same.arguments_digest  # key order does not matter
    assert first.arguments_digest != other.arguments_digest


def test_an_error_result_as_json_holds_only_the_error(dispatcher: Dispatcher) -> None:
    failed = dispatcher.call_tool(LOCAL, "test", "get_node", {"id": "svc-does-not-exist"})
    invalid = dispatcher.call_tool(LOCAL, "test", "get_node", {"id": ""})

    for result in (failed, invalid):
        assert set(result.as_json()) == {"error"}
        assert {"code", "message"} <= set(result.as_json()["error"])


def test_a_successful_result_as_json_is_the_value(dispatcher: Dispatcher) -> None:
    result = dispatcher.call_tool(LOCAL, "test", "get_node", {"id": SERVICE})

    assert result.error is None
    assert result.as_json() == result.value
    assert result.as_json()["node"]["id"] == SERVICE


DENSE_CALLS = [
    pytest.param(
        "find_paths", {"source": "person-ada-okafor", "target": "svc-search-api", "max_depth": 6}, id="find_paths"
    ),
    pytest.param(
        "query_graph",
        {
            "match": [
                {"node": "a", "type": "Person"},
                {"edge": "member_of", "from": "a", "to": "t"},
                {"edge": "member_of", "from": "b", "to": "t"},
                {"edge": "owns", "from": "t", "to": "s"},
            ],
            "return": ["t"],
        },
        id="query_graph",
    ),
    pytest.param("get_neighbors", {"id": "team-payments", "depth": 3}, id="get_neighbors"),
]


@pytest.mark.parametrize(("tool", "arguments"), DENSE_CALLS)
def test_a_call_past_the_wall_time_bound_is_a_limit_exceeded_result(
    instance: Instance, tool: str, arguments: dict[str, object]
) -> None:
    assert instance.index is not None
    unbounded = instance.dispatcher.call_tool(LOCAL, "test", tool, arguments)
    assert not unbounded.is_error  # the call itself is fine; only the bound below makes it fail
    records: list[AuditRecord] = []
    hurried = Dispatcher(instance.registry, instance.store, instance.index, HANDLERS, time_limit_s=0)
    hurried.audit_hooks.append(records.append)

    result = hurried.call_tool(LOCAL, "test", tool, arguments)

    assert isinstance(result.error, LimitExceededError)
    assert result.as_json()["error"]["code"] == "limit_exceeded"
    assert result.as_json()["error"]["limit"] == "time_s"
    assert [r.outcome for r in records] == ["limit"]


def test_a_time_limit_error_reports_the_time_spent_not_a_clock_reading(instance: Instance) -> None:
    assert instance.index is not None
    hurried = Dispatcher(instance.registry, instance.store, instance.index, HANDLERS, time_limit_s=0)

    started = time.monotonic()
    result = hurried.call_tool(LOCAL, "test", "get_neighbors", {"id": "team-payments", "depth": 3})
    elapsed = time.monotonic() - started

    assert isinstance(result.error, LimitExceededError)
    # `value` is seconds the query ran (at least the bound, at most the whole call), like work's `value` is work
    assert 0 <= result.error.value <= elapsed


def test_a_registry_with_a_tool_lacking_a_handler_is_refused(instance: Instance) -> None:
    assert instance.index is not None
    handlers = {name: handler for name, handler in HANDLERS.items() if name != "find_paths"}

    with pytest.raises(ValueError, match="find_paths"):
        Dispatcher(instance.registry, instance.store, instance.index, handlers)


def test_every_registered_tool_has_a_handler(instance: Instance) -> None:
    assert {t.name for t in instance.registry.tools} == set(HANDLERS)


def test_a_handler_bound_to_a_name_no_definition_has_is_refused(instance: Instance) -> None:
    assert instance.index is not None

    with pytest.raises(ValueError, match="get_nodes"):
        Dispatcher(instance.registry, instance.store, instance.index, {**HANDLERS, "get_nodes": HANDLERS["get_node"]})


def test_handlers_are_found_by_the_name_they_are_bound_to_and_bound_once() -> None:
    @handler("echo")
    def first(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
        return args

    @handler("echo")
    def second(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
        return args

    assert handlers_in([{"first": first, "again": first, "plain": len}]) == {"echo": first}
    with pytest.raises(ValueError, match="echo"):
        handlers_in([{"first": first}, {"second": second}])


@NOW_ON_SQLITE
def test_how_a_tool_runs_comes_from_its_definition(instance: Instance) -> None:
    assert instance.index is not None
    as_point = {**DEFINITION_OF_ECHO, "execution": "point"}
    registry = build_registry(instance.model, [as_point])
    dispatcher = Dispatcher(registry, instance.store, instance.index, {**HANDLERS, "echo": _echo})

    now = dispatcher.call_tool_now(LOCAL, "test", "echo", {"text": "hi"})
    assert now is not None
    assert now.value == {"text": "hi"}
    worker = build_registry(instance.model, [DEFINITION_OF_ECHO])
    declining = Dispatcher(worker, instance.store, instance.index, {**HANDLERS, "echo": _echo})
    assert declining.call_tool_now(LOCAL, "test", "echo", {"text": "hi"}) is None


DEFINITION_OF_ECHO: dict[str, Any] = {
    "execution": "worker", "name": "echo", "title": "Echo", "description": "Says its text back (a test tool).",
    "annotations": {"readOnlyHint": True}, "permission": "read", "advanced": False,
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "additionalProperties": False},
    "outputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
}  # fmt: skip


def _echo(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    return {"text": args["text"]}


def test_a_resource_read_takes_the_same_path_and_is_audited(
    dispatcher: Dispatcher, records: list[AuditRecord], instance: Instance
) -> None:
    uri = f"canon://nodes/Service/{SERVICE}"

    content = dispatcher.run(LOCAL, "mcp", "resources/read", uri, {"uri": uri}, lambda ctx: read_resource(ctx, uri))

    assert json.loads(content.text)["id"] == SERVICE
    [record] = records
    assert (record.action, record.target, record.surface, record.outcome) == ("resources/read", uri, "mcp", "ok")
    assert record.principal == LOCAL.name
    assert record.revision == instance.store.revision()


def test_a_failed_resource_read_raises_and_is_audited_with_its_outcome(
    dispatcher: Dispatcher, records: list[AuditRecord]
) -> None:
    uri = "canon://nodes/Service/svc-does-not-exist"

    with pytest.raises(NotFoundError) as caught:
        dispatcher.run(LOCAL, "mcp", "resources/read", uri, {"uri": uri}, lambda ctx: read_resource(ctx, uri))

    assert caught.value.kind == "resource"
    [record] = records
    assert (record.action, record.target, record.outcome) == ("resources/read", uri, "not_found")


def test_a_target_the_store_cannot_hold_is_audited_with_a_replacement_character(
    instance: Instance, dispatcher: Dispatcher, records: list[AuditRecord]
) -> None:
    """A URI or tool name as a client sent it may hold NUL or a lone surrogate, which PostgreSQL's text and UTF-8
    cannot hold: the record is written with U+FFFD in their place, on both backends (before, PostgreSQL's audit
    writer failed on the whole batch)."""
    uri = "canon://nodes/Team/team-payments/at/\x00"
    with pytest.raises(NotFoundError):
        dispatcher.run(LOCAL, "mcp", "resources/read", uri, {"uri": uri}, lambda ctx: read_resource(ctx, uri))
    with pytest.raises(UnknownToolError):
        dispatcher.call_tool(LOCAL, "test", "get_\ud800node", {})

    assert [r.target for r in records] == ["canon://nodes/Team/team-payments/at/\ufffd", "get_\ufffdnode"]
    instance.store.append_audit(records)
    kept, _ = instance.store.audit_records(AuditQuery(target="get_\ufffdnode"), before=None, limit=10)
    assert [r["target"] for r in kept] == ["get_\ufffdnode"]


def test_every_audit_hook_gets_every_record(instance: Instance) -> None:
    assert instance.index is not None
    first: list[AuditRecord] = []
    second: list[AuditRecord] = []
    dispatcher = Dispatcher(instance.registry, instance.store, instance.index, HANDLERS)
    dispatcher.audit_hooks.extend([first.append, second.append])

    dispatcher.call_tool(LOCAL, "test", "describe_model", {})
    dispatcher.call_tool(LOCAL, "test", "get_node", {"id": "svc-does-not-exist"})

    assert [r.outcome for r in first] == ["ok", "not_found"]
    assert first == second


# -- call_tool_now: a point read on the caller's thread, never waiting -----------------------------------------------
@NOW_ON_SQLITE
def test_call_tool_now_answers_a_point_read_as_call_tool_does(
    dispatcher: Dispatcher, records: list[AuditRecord]
) -> None:
    now = dispatcher.call_tool_now(LOCAL, "test", "get_node", {"id": SERVICE})
    later = dispatcher.call_tool(LOCAL, "test", "get_node", {"id": SERVICE})

    assert now is not None
    assert now.as_json() == later.as_json()
    assert [(r.target, r.outcome) for r in records] == [("get_node", "ok"), ("get_node", "ok")]


def test_call_tool_now_declines_a_tool_that_is_not_a_point_read(
    dispatcher: Dispatcher, records: list[AuditRecord]
) -> None:
    assert dispatcher.call_tool_now(LOCAL, "test", "find_nodes", {"type": "Service"}) is None
    assert dispatcher.call_tool_now(LOCAL, "test", "get_nodes", {"id": SERVICE}) is None  # unknown: call_tool says so
    assert records == []  # declined calls did nothing, so there is nothing to audit


@NOW_ON_SQLITE
def test_call_tool_now_runs_an_indexed_search_only_for_a_caller_that_asks(
    dispatcher: Dispatcher, records: list[AuditRecord]
) -> None:
    now = dispatcher.call_tool_now(LOCAL, "test", "find_nodes", {"type": "Service"}, searches=True)
    later = dispatcher.call_tool(LOCAL, "test", "find_nodes", {"type": "Service"})

    assert now is not None
    assert now.as_json() == later.as_json()
    assert dispatcher.call_tool_now(LOCAL, "test", "find_paths", {"source": SERVICE, "target": SERVICE},
                                    searches=True) is None  # a walk is neither  # fmt: skip
    assert [(r.target, r.outcome) for r in records] == [("find_nodes", "ok"), ("find_nodes", "ok")]


@contextmanager
def held_by_another_thread(hold: Callable[[], AbstractContextManager[object]]) -> Generator[None]:
    """Run `hold()` in another thread for the duration of the block."""
    holding, done = threading.Event(), threading.Event()

    def run() -> None:
        with hold():
            holding.set()
            done.wait(5)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        assert holding.wait(5)
        yield
    finally:
        done.set()
        thread.join(5)


@NOW_ON_SQLITE
def test_call_tool_now_declines_at_once_while_another_thread_changes_the_index(
    dispatcher: Dispatcher, records: list[AuditRecord], instance: Instance
) -> None:
    assert instance.index is not None
    with held_by_another_thread(instance.index.settled):  # a sync
        started = time.monotonic()
        assert dispatcher.call_tool_now(LOCAL, "test", "get_node", {"id": SERVICE}) is None
        assert time.monotonic() - started < 1  # declined, not waited for (the holder keeps it up to 5 s)
    assert records == []
    assert dispatcher.call_tool_now(LOCAL, "test", "get_node", {"id": SERVICE}) is not None  # free again


@NOW_ON_SQLITE
def test_call_tool_now_answers_while_another_thread_holds_the_store_connection(
    dispatcher: Dispatcher, instance: Instance
) -> None:
    with held_by_another_thread(instance.store.uncontended):  # a walk's store read, or a commit, on the connection
        result = dispatcher.call_tool_now(LOCAL, "test", "get_node", {"id": SERVICE})  # on a read connection
    assert result is not None
    assert result.value is not None
    assert result.value["node"]["id"] == SERVICE


@NOW_ON_SQLITE
def test_call_tool_now_answers_while_another_thread_walks_the_index(dispatcher: Dispatcher, instance: Instance) -> None:
    assert instance.index is not None
    with held_by_another_thread(instance.index.reading):  # a walk holds a view, no lock
        result = dispatcher.call_tool_now(LOCAL, "test", "get_node", {"id": SERVICE})
    assert result is not None
    assert result.value is not None
    assert result.value["node"]["id"] == SERVICE


@NOW_ON_SQLITE
def test_call_tool_now_declines_while_the_index_is_behind_the_store_and_call_tool_catches_up(
    store_location: str | Path,
) -> None:
    opened = open_instance(Config(store=store_location))
    try:
        node = opened.store.node(SERVICE)
        assert node is not None
        changed = replace(node, properties={**node.properties, "description": "Changed while the index looked away."})
        revision = opened.store.commit([PutNode(changed)], principal="test").revision  # the index has not seen it
        dispatcher = opened.dispatcher

        assert dispatcher.call_tool_now(LOCAL, "test", "get_node", {"id": SERVICE}) is None  # no replay on the caller
        result = dispatcher.call_tool(LOCAL, "test", "get_node", {"id": SERVICE})
        assert result.as_json()["revision"] == revision
        answered = dispatcher.call_tool_now(LOCAL, "test", "get_node", {"id": SERVICE})
        assert answered is not None
        assert answered.as_json()["node"]["properties"]["description"] == "Changed while the index looked away."
    finally:
        opened.close()


HEAVY_CALLS = [
    ("get_neighbors", {"id": SERVICE, "depth": 3}),
    ("find_paths", {"source": SERVICE, "target": "team-leadership", "max_depth": 6}),
    ("query_graph", {"match": [{"node": "p", "type": "Person"}, {"edge": "member_of", "from": "p", "to": "t"}]}),
]


@pytest.mark.parametrize(("tool", "arguments"), HEAVY_CALLS, ids=[t for t, _ in HEAVY_CALLS])
def test_a_heavy_read_that_waited_out_its_time_behind_a_sync_answers_the_time_bound(
    dispatcher: Dispatcher, instance: Instance, tool: str, arguments: dict[str, object]
) -> None:
    """The wall-time bound counts from when the surface received the call, so the time it spent waiting for a
    worker thread (here: its whole limit) and then behind another thread's sync is spent: it answers
    `limit_exceeded` (`time_s`) as soon as it can, without walking."""
    assert instance.index is not None
    answered: list[ToolResult] = []
    received = time.monotonic() - dispatcher.time_limit_s
    call = threading.Thread(target=lambda: answered.append(
        dispatcher.call_tool(LOCAL, "test", tool, arguments, received=received)))  # fmt: skip
    with held_by_another_thread(instance.index.settled):  # a sync under way: the call waits behind it
        call.start()
    call.join(10)
    assert not call.is_alive()
    (result,) = answered
    assert isinstance(result.error, LimitExceededError)
    assert result.error.limit == "time_s"
    fresh = dispatcher.call_tool(LOCAL, "test", tool, arguments)  # received now: the same call answers
    assert not isinstance(fresh.error, LimitExceededError) or fresh.error.limit != "time_s"


def test_a_walk_that_fails_gives_back_its_turn(dispatcher: Dispatcher) -> None:
    result = dispatcher.call_tool(LOCAL, "test", "get_neighbors", {"id": "no-such-node"})
    assert isinstance(result.error, NotFoundError)
    with dispatcher.priority.walk(time.monotonic()) as turn:  # free at once
        assert turn


def test_a_walk_that_cannot_get_its_turn_within_its_time_answers_the_time_bound(dispatcher: Dispatcher) -> None:
    """Walks take turns; the wait for one counts against the call's wall-time bound."""
    received = time.monotonic() - dispatcher.time_limit_s + 0.1  # 0.1 s left
    with held_by_another_thread(lambda: dispatcher.priority.walk(time.monotonic() + 60)):
        result = dispatcher.call_tool(LOCAL, "test", "get_neighbors", {"id": SERVICE}, received=received)
    assert isinstance(result.error, LimitExceededError)
    assert result.error.limit == "time_s"


def test_call_tool_now_answers_on_the_loop_only_where_the_store_reads_without_waiting(
    dispatcher: Dispatcher, records: list[AuditRecord], backend: str
) -> None:
    now = dispatcher.call_tool_now(LOCAL, "test", "get_node", {"id": SERVICE})
    assert (now is None) == (backend == "postgresql")  # PostgreSQL: declined, nothing done, nothing audited
    assert len(records) == (0 if now is None else 1)
    later = dispatcher.call_tool(LOCAL, "test", "get_node", {"id": SERVICE})
    assert later.value is not None
    assert later.value["node"]["id"] == SERVICE
