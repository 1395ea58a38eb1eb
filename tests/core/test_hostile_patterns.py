"""A model's `pattern` cannot hold the server: every path that validates a value against it (writes, import, the
data check of a model change, the model check itself) answers in time linear in the value, on both backends.

Under Python's backtracking `re`, `^(a+)+$` against 28 `a`s and a `!` took 7.8 s and doubled with each character;
the values here are 5,000 characters long, which would take longer than the universe has existed."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.lang.model import Model, parse_model
from core.store import Store, open_store
from core.store.common import check_records
from core.store.interchange import import_path
from core.values.errors import ImportFileError, ModelError, ValidationError
from core.values.operations import PutNode
from core.values.records import Node

pytestmark = pytest.mark.both_backends
HOSTILE = ("^(a+)+$", "^([a-z]+-?)+$", "^(a|aa)+$")
VALUE = "a" * 5000 + "!"
CPU_S = 2.0  # per path; a backtracking engine would need hours, RE2 needs milliseconds


def hostile_model(model: Model, pattern: str) -> Model:
    document: dict[str, Any] = copy.deepcopy(dict(model.document))
    document["$defs"]["Team"]["properties"]["mission"]["pattern"] = pattern
    return parse_model(document, source="hostile.schema.json")


def team(mission: str) -> Node:
    return Node("team-x", "Team", {"slug": "x", "name": "X", "area": "product", "mission": mission})


@pytest.fixture(params=HOSTILE)
def hostile(request: pytest.FixtureRequest, store_location: str | Path, model: Model) -> Iterator[tuple[Model, Store]]:
    changed = hostile_model(model, request.param)
    opened = open_store(store_location, changed)
    yield changed, opened
    opened.close()


def test_a_write_against_a_catastrophic_pattern_is_refused_in_linear_time(hostile: tuple[Model, Store]) -> None:
    _, store = hostile
    start = time.process_time()
    with pytest.raises(ValidationError) as refused:
        store.commit([PutNode(team(VALUE))], principal="test")
    assert time.process_time() - start < CPU_S
    assert any(p.pointer.endswith("/mission") and "does not match" in p.message for p in refused.value.problems)
    assert store.commit([PutNode(team("aaaa"))], principal="test").revision > 0  # a value that matches is kept


def test_an_import_against_a_catastrophic_pattern_is_refused_in_linear_time(
    hostile: tuple[Model, Store], tmp_path: Path
) -> None:
    _, store = hostile
    data = tmp_path / "data.json"
    data.write_text(json.dumps({"nodes": [team(VALUE).to_json()]}))
    start = time.process_time()
    with pytest.raises(ImportFileError):
        import_path(store, data, principal="test")
    assert time.process_time() - start < CPU_S


def test_the_data_check_of_a_model_change_refuses_in_linear_time(hostile: tuple[Model, Store]) -> None:
    changed, _ = hostile
    start = time.process_time()
    check = check_records(changed, [team(VALUE)], [])
    assert time.process_time() - start < CPU_S
    assert check.refused == 1


@pytest.mark.parametrize("pattern", [r"^(?=.*[0-9]).+$", r"^(['\"]).*\1$"])
def test_a_model_whose_pattern_needs_backtracking_is_refused_naming_where(model: Model, pattern: str) -> None:
    with pytest.raises(ModelError) as refused:
        hostile_model(model, pattern)
    assert any("/Team/properties/mission/pattern" in p.pointer for p in refused.value.problems), refused.value.problems
