"""Applying a model: the store's one explicit model change (`Store.apply_model`), its history, the rule of which
changes may be applied (`core.seam.model_apply`), the `apply_model` tool, and writers in other processes that keep
writing while a model is applied."""

from __future__ import annotations

import copy
import json
import logging
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from core.dispatch.dispatcher import Dispatcher
from core.dispatch.registry import build_registry
from core.dispatch.resources import complete, read_resource
from core.index.graph import GraphIndex
from core.lang.model import Model, parse_model
from core.lang.model_limits import MAX_PROPERTIES
from core.seam.instance import Instance
from core.seam.model_apply import Planner, apply_plan, plan_apply
from core.store import Store, copy_store, is_database_url, open_existing_store
from core.store.common import check_records
from core.tools import Toolset
from core.values.errors import LimitExceededError, ModelError, NotFoundError, ValidationError
from core.values.operations import PutNode
from core.values.principal import LOCAL, Principal
from core.values.records import Node
from core.values.uris import MODEL_AT_TEMPLATE, model_at_uri
from tests.conftest import REPO

pytestmark = pytest.mark.both_backends

DEADLINE_S = 120.0
WRITERS = 3
STARTED = 20  # lines each writer prints before the model is applied


def changed(model: Model, version: str, change: Callable[[dict[str, Any]], None]) -> Model:
    document: dict[str, Any] = copy.deepcopy(dict(model.document))
    change(document)
    document["x-canon-model"]["version"] = version
    return parse_model(document, source=f"model-{version}.json")


def with_team_budget(document: dict[str, Any]) -> None:
    document["$defs"]["Team"]["properties"]["budget"] = {"type": "integer", "description": "Yearly budget."}


def with_research_area(document: dict[str, Any]) -> None:
    document["$defs"]["Team"]["properties"]["area"]["enum"].append("research")


def with_shorter_team_names(document: dict[str, Any]) -> None:
    document["$defs"]["Team"]["properties"]["name"]["maxLength"] = 60


def team(id: str, **properties: Any) -> Node:
    slug = id.removeprefix("team-")
    return Node(id, "Team", {"slug": slug, "name": slug.upper(), "mission": "Test.", "area": "product", **properties})


# -- the store operation ---------------------------------------------------------------------------------------------
def test_applying_a_model_keeps_every_model_in_the_history_readable_at_its_revision(
    seeded_store: Store, model: Model
) -> None:
    first = seeded_store.revision()
    newer = changed(model, "1.1.0", with_team_budget)
    revision = seeded_store.apply_model(newer, principal="admin", summary={"classification": "compatible"})

    history = seeded_store.model_history()
    assert [(e.version, e.principal) for e in history] == [("1.0.0", "system"), ("1.1.0", "admin")]
    assert history[-1].revision == revision == first + 1
    assert history[-1].summary == {"classification": "compatible"}
    assert seeded_store.model_at(first).digest == model.digest
    assert seeded_store.model_at(revision).digest == newer.digest
    assert seeded_store.model_at(revision + 100).digest == newer.digest
    with pytest.raises(NotFoundError):
        seeded_store.model_at(0)
    (change,) = seeded_store.changes(first, 10)
    assert (change.kind, change.principal) == ("model", "admin")


def test_applying_the_same_model_again_changes_nothing(seeded_store: Store, model: Model) -> None:
    before = seeded_store.revision()
    assert seeded_store.apply_model(model, principal="admin") == before
    assert seeded_store.revision() == before
    assert len(seeded_store.model_history()) == 1


def test_a_model_planned_against_a_model_another_process_replaced_is_refused(
    seeded_store: Store, store_location: str | Path, model: Model
) -> None:
    other = open_existing_store(store_location)
    try:
        other.apply_model(changed(model, "1.1.0", with_team_budget), principal="other")
    finally:
        other.close()
    before = seeded_store.revision()
    with pytest.raises(ModelError):
        seeded_store.apply_model(changed(model, "1.2.0", with_research_area), principal="admin",
                                 replaces=model.digest)  # fmt: skip
    assert seeded_store.revision() == before
    assert seeded_store.stored_model().version == "1.1.0"


def test_a_write_is_validated_under_the_model_another_process_applied_a_moment_before(
    seeded_store: Store, store_location: str | Path, model: Model
) -> None:
    with pytest.raises(ValidationError):  # no budget in the store's model yet
        seeded_store.commit([PutNode(team("team-early", budget=5))], principal="test")
    other = open_existing_store(store_location)
    try:
        other.apply_model(changed(model, "1.1.0", with_team_budget), principal="other")
    finally:
        other.close()
    # this store object still holds the old model, but the write validates under the one recorded now
    seeded_store.commit([PutNode(team("team-late", budget=5))], principal="test")
    node = seeded_store.node("team-late")
    assert node is not None
    assert node.properties["budget"] == 5


def test_copying_a_store_keeps_its_model_history(seeded_store: Store, model: Model, tmp_path: Path) -> None:
    seeded_store.apply_model(changed(model, "1.1.0", with_team_budget), principal="admin")
    expected = seeded_store.model_history()
    copy_store(seeded_store.location, tmp_path / "copy.db")
    copied = open_existing_store(tmp_path / "copy.db", read_only=True)
    try:
        assert copied.model_history() == expected
        assert copied.model_at(expected[0].revision).digest == model.digest
    finally:
        copied.close()


# -- the rule of which changes may be applied (the same on every backend: planned on one) ---------------------------
@pytest.mark.sqlite_only
def test_a_breaking_change_needs_a_major_version_or_allow_breaking(seeded_store: Store, model: Model) -> None:
    before = seeded_store.revision()
    narrower = changed(model, "1.1.0", with_shorter_team_names)
    plan = plan_apply(seeded_store, narrower)
    assert plan.diff.classification() == "breaking"
    with pytest.raises(ModelError) as caught:
        apply_plan(seeded_store, plan, principal="admin")
    assert [p.pointer for p in caught.value.problems] == ["/x-canon-model/version"]
    assert seeded_store.revision() == before
    assert apply_plan(seeded_store, plan, principal="admin", allow_breaking=True) == before + 1
    major = changed(narrower, "2.0.0", lambda d: d["$defs"]["Team"]["properties"]["name"].update(maxLength=50))
    assert apply_plan(seeded_store, plan_apply(seeded_store, major), principal="admin") == before + 2


@pytest.mark.sqlite_only
def test_a_model_stored_records_do_not_fit_is_refused_naming_them(seeded_store: Store, model: Model) -> None:
    def required_budget(document: dict[str, Any]) -> None:
        with_team_budget(document)
        document["$defs"]["Team"]["required"].append("budget")

    before = seeded_store.revision()
    with pytest.raises(ModelError) as caught:
        apply_plan(seeded_store, plan_apply(seeded_store, changed(model, "2.0.0", required_budget)), principal="a")
    teams = {n.id for n in seeded_store.iter_nodes("Team")}
    assert caught.value.problems
    assert all(any(t in p.pointer for t in teams) for p in caught.value.problems)
    assert seeded_store.revision() == before


# -- the apply_model tool ---------------------------------------------------------------------------------------------
@pytest.mark.sqlite_only
def test_apply_model_dry_run_returns_the_plan_and_changes_nothing(instance: Instance, model: Model) -> None:
    before = instance.store.revision()
    newer = changed(model, "1.1.0", with_team_budget)
    result = instance.dispatcher.call_tool(LOCAL, "test", "apply_model", {"model": newer.document, "dry_run": True})
    assert result.error is None, result.error
    assert result.value is not None
    assert (result.value["applied"], result.value["revision"]) == (False, before)
    assert result.value["plan"]["classification"] == "compatible"
    assert instance.store.revision() == before


@pytest.mark.sqlite_only
def test_apply_model_applies_for_an_admin_and_the_instance_then_serves_it(instance: Instance, model: Model) -> None:
    newer = changed(model, "1.1.0", with_team_budget)
    result = instance.dispatcher.call_tool(LOCAL, "test", "apply_model", {"model": newer.document})
    assert result.error is None, result.error
    assert result.value is not None
    assert result.value["applied"] is True
    assert instance.store.stored_model().digest == newer.digest
    assert instance.reload_model() is True  # what the change feed does when it sees the change
    assert "budget" in instance.model.node_types["Team"].properties
    (entry,) = [e for e in instance.store.model_history() if e.version == "1.1.0"]
    assert entry.principal == LOCAL.name
    assert entry.summary is not None
    assert entry.summary["classification"] == "compatible"


@pytest.mark.sqlite_only
def test_a_model_switch_is_logged_once_naming_the_old_and_new_model(
    instance: Instance, model: Model, caplog: pytest.LogCaptureFixture
) -> None:
    newer = changed(model, "1.1.0", with_team_budget)
    result = instance.dispatcher.call_tool(LOCAL, "test", "apply_model", {"model": newer.document})
    assert result.error is None, result.error

    with caplog.at_level(logging.INFO, logger="canon.model"):
        assert instance.reload_model() is True
        assert instance.reload_model() is False  # nothing changed since: nothing logged

    (line,) = [r.getMessage() for r in caplog.records if r.name == "canon.model"]
    assert line.startswith(f"model {model.name} {model.version} -> {newer.name} 1.1.0")
    assert instance.store.location in line


@pytest.mark.sqlite_only
def test_apply_model_is_forbidden_to_a_writer(instance: Instance, model: Model) -> None:
    writer = Principal("wendy", frozenset({"writer"}))
    newer = changed(model, "1.1.0", with_team_budget)
    result = instance.dispatcher.call_tool(writer, "test", "apply_model", {"model": newer.document})
    assert result.error is not None
    assert result.error.code == "forbidden"
    assert instance.store.stored_model().digest == model.digest


@pytest.mark.sqlite_only
def test_apply_model_refusals_point_into_the_model_argument(instance: Instance, model: Model) -> None:
    narrower = changed(model, "1.1.0", with_shorter_team_names)
    result = instance.dispatcher.call_tool(LOCAL, "test", "apply_model", {"model": narrower.document})
    assert isinstance(result.error, ValidationError)
    assert [p.pointer for p in result.error.problems] == ["/model/x-canon-model/version"]
    assert instance.store.stored_model().digest == model.digest


# -- writers in other processes while a model is applied --------------------------------------------------------------
class Writer:
    """One `_model_writer` child and the lines it printed, read by a thread as they come."""

    def __init__(self, location: str | Path, number: int, wanted: int) -> None:
        command = [sys.executable, "-m", "tests.core._model_writer", str(location), str(number), str(wanted)]
        self.process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.started = threading.Event()  # set once it has printed STARTED lines
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.split("\n")[0])
            if len(self.lines) >= STARTED:
                self.started.set()

    def finish(self, deadline: float) -> list[list[str]]:
        self.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        self.reader.join(timeout=max(0.1, deadline - time.monotonic()))
        assert self.process.returncode == 0
        return [line.split() for line in self.lines]


@pytest.fixture
def writers(seeded_store: Store, store_location: str | Path) -> Iterator[list[Writer]]:
    started = [Writer(store_location, number, wanted=20) for number in range(WRITERS)]
    yield started
    for writer in started:
        if writer.process.poll() is None:
            writer.process.kill()
        writer.process.wait()
        writer.reader.join(timeout=DEADLINE_S)
        assert writer.process.stdout is not None
        writer.process.stdout.close()


def test_writers_in_other_processes_validate_every_write_under_the_model_current_at_its_revision(
    seeded_store: Store, model: Model, writers: list[Writer]
) -> None:
    """Each writer process opened the store before the apply and keeps its store object: its `research` writes are
    refused until the wider model is applied and accepted from then on, none acknowledged before it, and every
    acknowledged write is stored."""
    deadline = time.monotonic() + DEADLINE_S
    for writer in writers:  # every writer has written under the first model
        assert writer.started.wait(timeout=max(0.1, deadline - time.monotonic())), "a writer did not start writing"
    wider = changed(model, "1.1.0", with_research_area)
    applied_at = seeded_store.apply_model(wider, principal="admin")
    results = [w.finish(deadline) for w in writers]

    for lines in results:
        research = [line[0] for line in lines if line[-1] == "research"]
        assert "refused" in research  # written under the first model...
        first_ack = research.index("ack")  # ...then under the second: refused, refused, ..., ack, ack, ...
        assert set(research[first_ack:]) == {"ack"}, research
        for line in lines:
            if line[0] != "ack":
                continue
            revision, id, area = int(line[1]), line[2], line[3]
            if area == "research":
                assert revision > applied_at
            stored = seeded_store.node(id)
            assert stored is not None, f"acknowledged {id} is lost"
            assert stored.properties["area"] == area
    check = check_records(seeded_store.stored_model(), seeded_store.iter_nodes(), seeded_store.iter_edges())
    assert check.refused == 0


# -- the model history as a resource -----------------------------------------------------------------------------------
@pytest.mark.sqlite_only
def test_the_model_at_a_revision_resource_serves_each_applied_model_and_completes_revisions(
    instance: Instance, model: Model
) -> None:
    first = instance.store.revision()
    applied = instance.store.apply_model(changed(model, "1.1.0", with_team_budget), principal="admin")

    def read(uri: str) -> dict[str, Any]:
        content = instance.dispatcher.run(LOCAL, "test", "resources/read", uri, {}, lambda c: read_resource(c, uri))
        return json.loads(content.text)

    before, after = read(model_at_uri(first)), read(model_at_uri(applied))
    assert before["x-canon-model"]["version"] == "1.0.0"
    assert after["x-canon-model"]["version"] == "1.1.0"
    assert "budget" in after["$defs"]["Team"]["properties"]
    with pytest.raises(NotFoundError):
        read(model_at_uri(0))
    context = instance.dispatcher.context(LOCAL, "test")
    values, total, _ = complete(context, MODEL_AT_TEMPLATE, "revision", "", {})
    assert values == [str(applied), str(history_start(instance))]
    assert total == 2


def history_start(instance: Instance) -> int:
    return instance.store.model_history()[0].revision


def _without_history(location: str | Path) -> None:
    """Make the store what it was before the model history: SQLite schema 3, PostgreSQL schema 1 (without what
    the later schemas add too: the change log's indexes by record, the proposals, the word index, the change log's
    proposal column)."""
    past_indexes = ("changes_key", "changes_source", "changes_target")
    if is_database_url(location):
        with psycopg.connect(str(location), autocommit=True) as db:
            db.execute("DROP TABLE model_history")
            db.execute("DROP TABLE proposals")
            db.execute("DROP TABLE node_words")
            db.execute("DROP TABLE vocabulary")
            db.execute("ALTER TABLE changes DROP COLUMN proposal")
            for index in past_indexes:
                db.execute(f"DROP INDEX {index}")
            db.execute("ALTER TABLE nodes DROP COLUMN number")  # the word index's node numbers (schema 7)
            db.execute("DELETE FROM canon_schema WHERE version >= 2")
        return
    with sqlite3.connect(location) as db:
        db.execute("DROP TABLE model_history")
        db.execute("DROP TABLE proposals")
        db.execute("DROP TABLE node_words")
        db.execute("DROP TABLE vocabulary")
        for index in past_indexes:
            db.execute(f"DROP INDEX {index}")
        db.execute("ALTER TABLE changes DROP COLUMN proposal")
        db.execute("PRAGMA user_version = 3")
    db.close()


def test_a_store_from_before_the_history_starts_it_with_its_recorded_model(
    seeded_store: Store, store_location: str | Path, model: Model
) -> None:
    """The migration records the store's model at its last model change, by its principal."""
    newer = changed(model, "1.1.0", with_team_budget)
    applied = seeded_store.apply_model(newer, principal="admin")
    seeded_store.close()
    _without_history(store_location)

    reopened = open_existing_store(store_location)
    try:
        (entry,) = reopened.model_history()
        assert (entry.revision, entry.version, entry.principal, entry.summary) == (applied, "1.1.0", "admin", None)
        assert reopened.model_at(applied).digest == newer.digest
    finally:
        reopened.close()


def test_the_data_check_counts_nodes_and_edges_whether_or_not_a_node_is_refused(
    seeded_store: Store, model: Model
) -> None:
    """One unit for the data line: every stored record, nodes and edges, also when a node is refused (issue 25)."""
    records = sum(1 for _ in seeded_store.iter_nodes()) + sum(1 for _ in seeded_store.iter_edges())

    def required_budget(document: dict[str, Any]) -> None:
        with_team_budget(document)
        document["$defs"]["Team"]["required"].append("budget")

    compatible = plan_apply(seeded_store, changed(model, "1.1.0", with_team_budget)).diff.data
    refusing = plan_apply(seeded_store, changed(model, "2.0.0", required_budget)).diff.data
    assert compatible is not None
    assert refusing is not None
    assert (compatible.checked, compatible.refused) == (records, 0)
    assert refusing.checked == records
    assert refusing.refused > 0


def test_a_changed_key_property_is_a_breaking_write_rule_and_the_data_check_refuses_clashes(
    seeded_store: Store, model: Model
) -> None:
    """Another key property is a new uniqueness rule: the writes row says breaking, and two stored nodes sharing
    the new key's value are refused (issue 25)."""

    def key_on_name(document: dict[str, Any]) -> None:
        document["$defs"]["Team"]["x-canon-node"]["key"] = "name"

    teams = list(seeded_store.iter_nodes("Team"))
    first, second = teams[0], teams[1]
    seeded_store.commit([PutNode(Node(second.id, "Team", {**second.properties, "name": first.properties["name"]},
                                      visibility=second.visibility, readers=second.readers))],
                        principal="test")  # fmt: skip
    plan = plan_apply(seeded_store, changed(model, "2.0.0", key_on_name))
    assert plan.diff.classification("writes") == "breaking"
    assert any("key property" in f.change for f in plan.diff.findings if f.surface == "writes")
    assert plan.diff.data is not None
    assert plan.diff.data.refused == 1


# -- bounds: cycles, size and the call's time ------------------------------------------------------------------------
def _dispatcher(store: Store, model: Model, time_limit_s: float = 60.0) -> Dispatcher:
    """The dispatch path on `store` (of either backend), with the call time bound `time_limit_s`, and the model
    planner a composition root hands in (`core.seam.model_apply.Planner`)."""
    return Dispatcher(build_registry(model), store, GraphIndex.build(store), Toolset().all_handlers(),
                      time_limit_s=time_limit_s, planner=Planner(store))  # fmt: skip


def _with_team_parent(document: dict[str, Any]) -> None:
    document["$defs"]["Team"]["properties"]["parent"] = {"$ref": "#/$defs/Team", "description": "A cycle."}


def test_apply_model_of_a_ref_cycle_is_invalid_naming_the_cycle_and_changes_nothing(
    seeded_store: Store, model: Model
) -> None:
    document = copy.deepcopy(dict(model.document))
    _with_team_parent(document)
    document["x-canon-model"]["version"] = "1.1.0"
    before = seeded_store.revision()
    result = _dispatcher(seeded_store, model).call_tool(LOCAL, "test", "apply_model", {"model": document})
    assert isinstance(result.error, ValidationError), result
    problems = result.error.problems
    assert [p.pointer for p in problems] == ["/model/$defs/Team/properties/parent/$ref"]
    assert "Team.properties.parent -> Team" in problems[0].message
    assert seeded_store.revision() == before


def test_apply_model_of_a_model_over_a_bound_is_invalid_naming_the_bound(seeded_store: Store, model: Model) -> None:
    document = copy.deepcopy(dict(model.document))
    document["$defs"]["Team"]["properties"] |= {f"p{i}": {"type": "string"} for i in range(MAX_PROPERTIES)}
    document["x-canon-model"]["version"] = "1.1.0"
    result = _dispatcher(seeded_store, model).call_tool(LOCAL, "test", "apply_model", {"model": document})
    assert isinstance(result.error, ValidationError), result
    assert [p.pointer for p in result.error.problems] == ["/model/$defs/Team/properties"]
    assert f"at most {MAX_PROPERTIES}" in result.error.problems[0].message


def test_apply_model_past_its_time_bound_is_limit_exceeded_and_applies_nothing(
    seeded_store: Store, model: Model
) -> None:
    """A bound no plan fits in (a nanosecond): the deadline has passed by the first check, whatever the machine."""
    before, history = seeded_store.revision(), seeded_store.model_history()
    newer = changed(model, "1.1.0", with_team_budget)
    result = _dispatcher(seeded_store, model, time_limit_s=1e-9).call_tool(
        LOCAL, "test", "apply_model", {"model": newer.document}
    )
    assert isinstance(result.error, LimitExceededError), result
    assert result.error.limit == "time_s"
    assert "nothing was changed" in str(result.error)
    assert seeded_store.revision() == before
    assert seeded_store.model_history() == history
    assert seeded_store.stored_model().digest == model.digest


def test_a_deadline_passed_in_the_apply_transaction_rolls_the_whole_change_back(
    seeded_store: Store, store_location: str | Path, model: Model
) -> None:
    """The store calls `check` in its transaction, once everything is written and before the commit: another
    connection still reads the old model then, and what `check` raises leaves the store as it was."""
    before, history = seeded_store.revision(), seeded_store.model_history()
    newer = changed(model, "1.1.0", with_team_budget)
    seen: list[str] = []

    def deadline_passed() -> None:
        other = open_existing_store(store_location, read_only=True)
        try:
            seen.append(other.stored_model().digest)
        finally:
            other.close()
        raise LimitExceededError("out of time", limit="time_s", value=0)

    plan = plan_apply(seeded_store, newer)
    with pytest.raises(LimitExceededError):
        apply_plan(seeded_store, plan, principal="admin", check=deadline_passed)
    assert seen == [model.digest]  # the check ran before the commit
    assert seeded_store.model.digest == model.digest
    assert seeded_store.revision() == before
    assert seeded_store.model_history() == history
    reopened = open_existing_store(store_location)
    try:
        assert reopened.stored_model().digest == model.digest
        assert reopened.revision() == before
    finally:
        reopened.close()
