"""Checks remembered between starts (`core.lang.schema_checks`): a second start checks nothing that passed before, and a
changed schema or model is checked again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema import SchemaError

from core.dispatch.registry import build_registry
from core.lang.model import default_model_path, load_model
from core.lang.schema_checks import FOLDER, SchemaChecks
from core.ops.config import Config
from core.seam.instance import open_instance
from core.values.errors import ModelError


def test_a_second_build_on_the_same_cache_checks_nothing_and_gives_the_same_tools(tmp_path: Path) -> None:
    first = SchemaChecks(tmp_path)
    built = build_registry(load_model(checks=first), checks=first)
    second = SchemaChecks(tmp_path)
    rebuilt = build_registry(load_model(checks=second), checks=second)
    assert first.checked > len(built.tools)  # the model, and every tool's distinct input and output schemas
    assert second.checked == 0
    assert [t.to_json() for t in rebuilt.tools] == [t.to_json() for t in built.tools]


def test_a_registry_for_another_stores_data_finds_its_checks_remembered(tmp_path: Path) -> None:
    """Descriptions name the served data's ids (`core.dispatch.examples`), which differ from store to store; the checks
    do
    not depend on them, so a server on a new store of the same model starts without checking again."""
    from core.dispatch.examples import Examples

    model = load_model()
    first = SchemaChecks(tmp_path)
    build_registry(model, checks=first)
    other = Examples(type="Team", id="team-someone-else", edge="owns", target_type="Service", target="svc-other")
    second = SchemaChecks(tmp_path)
    described = build_registry(model, examples=other, checks=second)
    assert "team-someone-else" in json.dumps([t.to_json() for t in described.tools])
    assert second.checked == 0


def test_a_changed_model_file_is_checked_again_and_a_broken_one_still_fails(tmp_path: Path) -> None:
    document = json.loads(default_model_path().read_text(encoding="utf-8"))
    file = tmp_path / "model.json"
    file.write_text(json.dumps(document), encoding="utf-8")
    build_registry(load_model(file, checks=SchemaChecks(tmp_path)), checks=SchemaChecks(tmp_path))
    name = next(iter(document["$defs"]))
    document["$defs"][name]["description"] = "Changed since the last start."
    file.write_text(json.dumps(document), encoding="utf-8")
    again = SchemaChecks(tmp_path)
    load_model(file, checks=again)
    assert again.checked == 1
    document["$defs"][name]["type"] = "objekt"
    file.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(ModelError):
        load_model(file, checks=SchemaChecks(tmp_path))


def test_a_schema_that_failed_is_checked_again_at_every_start(tmp_path: Path) -> None:
    broken = {"type": "objekt"}
    for _ in range(2):
        checks = SchemaChecks(tmp_path)
        with pytest.raises(SchemaError):
            checks.check(broken)
        assert checks.checked == 0


def test_a_remembered_check_is_trusted_by_digest_so_only_an_identical_schema_skips_it(tmp_path: Path) -> None:
    SchemaChecks(tmp_path).check({"type": "object", "description": "a"})
    checks = SchemaChecks(tmp_path)
    checks.check({"type": "object", "description": "a"})
    checks.check({"description": "a", "type": "object"})  # the same document, keys in another order
    assert checks.checked == 0
    with pytest.raises(SchemaError):
        checks.check({"type": "objekt", "description": "a"})


def test_an_unwritable_cache_only_means_checking_every_time(tmp_path: Path) -> None:
    (tmp_path / FOLDER).write_text("a file where the folder would be", encoding="utf-8")
    for _ in range(2):
        checks = SchemaChecks(tmp_path)
        checks.check({"type": "object"})
        assert checks.checked == 1


def test_open_instance_remembers_its_checks_in_the_configured_cache(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    open_instance(Config(store=tmp_path / "canon.db", cache=cache)).close()
    remembered = sorted(p.name for p in (cache / FOLDER).iterdir())
    open_instance(Config(store=tmp_path / "canon.db", cache=cache)).close()
    assert remembered
    assert sorted(p.name for p in (cache / FOLDER).iterdir()) == remembered


def test_without_a_folder_a_schema_is_checked_once_per_process_and_a_failed_one_every_time() -> None:
    schema = {"type": "object", "properties": {"once-per-process-test": {"type": "string"}}}
    first, second = SchemaChecks(), SchemaChecks()
    first.check(schema)
    second.check(schema)
    assert (first.checked, second.checked) == (1, 0)
    broken = {"type": "object", "properties": {"x": {"type": 12}}}
    for checks in (first, second):
        with pytest.raises(SchemaError):
            checks.check(broken)


def test_a_registry_built_past_its_deadline_stops_before_its_next_check_and_remembers_nothing(tmp_path: Path) -> None:
    """What bounds a model plan's time: the registry of a new model checks every tool's schema, each in time."""

    def out_of_time() -> None:
        raise TimeoutError("the deadline has passed")

    checks = SchemaChecks(tmp_path, check_time=out_of_time)
    with pytest.raises(TimeoutError):
        build_registry(load_model(default_model_path()), checks=checks)
    assert checks.checked == 0
    assert not (tmp_path / FOLDER).exists()
    remembered = SchemaChecks(tmp_path)
    build_registry(load_model(default_model_path()), checks=remembered)
    assert remembered.checked > 0  # the same registry, in time: every check runs
    again = SchemaChecks(tmp_path, check_time=out_of_time)
    build_registry(load_model(default_model_path()), checks=again)  # checks remembered: no deadline is consulted
    assert again.checked == 0
