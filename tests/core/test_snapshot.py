"""A model snapshot is immutable and replaced whole: what is built for one is built again for the next."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.dispatch.registry import build_registry
from core.seam.instance import Instance
from core.seam.snapshot import PerSnapshot, Snapshot
from tests.mcp.conftest import open_copy


@pytest.fixture(scope="module")
def instance(seed_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Instance]:
    """One instance for the module: nothing here changes its model."""
    opened = open_copy(seed_template, tmp_path_factory.mktemp("snapshot"))
    yield opened
    opened.close()


def test_evolving_a_snapshot_leaves_it_as_it_was_and_shares_everything_but_the_registry(instance: Instance) -> None:
    before = instance.snapshot
    after = before.evolve(build_registry(instance.model))
    assert before.dispatcher.registry is before.registry
    assert after.dispatcher.registry is after.registry is not before.registry
    shared = ("store", "index", "handlers", "audit_hooks", "audit", "priority", "walkers")
    assert all(getattr(after.dispatcher, name) is getattr(before.dispatcher, name) for name in shared)


def test_a_snapshot_its_dispatcher_and_its_registry_cannot_be_changed_in_place(instance: Instance) -> None:
    snapshot = instance.snapshot
    other = build_registry(instance.model)
    with pytest.raises(dataclasses.FrozenInstanceError):
        snapshot.registry = other  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        snapshot.dispatcher.registry = other  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        snapshot.registry.tools = ()  # type: ignore[misc]


def test_a_snapshot_refuses_a_dispatcher_over_another_registry(instance: Instance) -> None:
    with pytest.raises(ValueError, match="own registry"):
        Snapshot(build_registry(instance.model), instance.dispatcher)


def test_a_registry_holds_every_tools_checks_from_the_start(instance: Instance) -> None:
    registry = build_registry(instance.model)
    before = {t.name: (registry.input_validator(t.name), registry.quick_check(t.name)) for t in registry.tools}
    instance.dispatcher.call_tool(instance.config.local_principal(), "test", "find_nodes", {"type": "Team"})
    after = {t.name: (registry.input_validator(t.name), registry.quick_check(t.name)) for t in registry.tools}
    assert before == after  # the same objects: looked up, never filled in by a call


def test_what_is_built_per_snapshot_is_built_once_for_each_and_again_for_every_new_one(instance: Instance) -> None:
    built: list[Snapshot] = []

    def build(snapshot: Snapshot) -> str:
        built.append(snapshot)
        return snapshot.model.version

    derived = PerSnapshot(build)
    first = instance.snapshot
    assert derived(first) == derived(first) == first.model.version
    second = first.evolve(build_registry(instance.model))
    third = second.evolve(build_registry(instance.model))
    derived(second)
    derived(third)
    derived(third)
    assert built == [first, second, third]  # two changes in a row: each one built, none served from the last


def test_a_reload_without_a_model_change_keeps_the_snapshot(instance: Instance) -> None:
    before = instance.snapshot
    assert instance.reload_model() is False
    assert instance.snapshot is before
