"""A registry's artifacts alone (`core.seam.rendering`), and the model planner the composition root hands in
(`core.seam.model_apply.Planner`, `core.dispatch.planning`): no store, file or second instance."""

from __future__ import annotations

import copy
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest

import core.seam.instance
import core.seam.rendering
import core.store.sqlite
from core.app.artifacts import generate_by_owner
from core.dispatch.dispatcher import Dispatcher
from core.dispatch.registry import build_registry
from core.index.graph import GraphIndex
from core.lang.model import Model, parse_model
from core.seam.model_apply import Planner
from core.seam.model_diff import diff_models
from core.seam.rendering import render_model
from core.store import Store
from core.store.empty import EmptyStore
from core.tools import Toolset
from core.values.errors import StoreError, UnavailableError
from core.values.operations import put_node
from core.values.principal import LOCAL


def _changed(model: Model, version: str) -> Model:
    document: dict[str, Any] = copy.deepcopy(dict(model.document))
    document["x-canon-model"]["version"] = version
    document["$defs"]["Team"]["properties"]["budget"] = {"description": "Yearly budget.", "type": "integer"}
    return parse_model(document, source="budget.schema.json")


def test_a_registry_s_artifacts_alone_are_what_canon_generate_makes_of_the_model_on_a_new_store(
    model: Model, tmp_path: Path
) -> None:
    """The planner renders over the empty graph; `canon generate` opens a store on the model file (not the
    embedded one, so unseeded), written as a store records it (canonical JSON): the same bytes, file for file."""
    changed = _changed(model, "1.1.0")
    path = tmp_path / "budget.schema.json"
    path.write_text(changed.canonical_json, encoding="utf-8")
    assert render_model(changed) == generate_by_owner(path)


def test_render_model_keeps_the_last_models_by_their_document_and_never_serves_another_model_s(
    model: Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kept artifacts are found by the model's document (canonical JSON, so the order of its keys does not
    matter) and the surfaces: a changed model is rendered afresh, a kept one is not, and only the last `KEPT`
    are kept."""
    rendered: list[str] = []
    real = core.seam.rendering.render

    def counted(registry: Any, *args: Any) -> Any:
        rendered.append(registry.model.version)
        return real(registry, *args)

    monkeypatch.setattr(core.seam.rendering, "_kept", OrderedDict())
    monkeypatch.setattr(core.seam.rendering, "render", counted)
    first, changed = render_model(model), render_model(_changed(model, "1.1.0"))
    assert rendered == [model.version, "1.1.0"]
    assert "budget" in changed["rest"]["openapi.json"]
    assert "budget" not in first["rest"]["openapi.json"]
    reordered = parse_model(dict(reversed(list(copy.deepcopy(dict(model.document)).items()))), source="x.json")
    again = render_model(reordered)
    assert again == first
    assert rendered == [model.version, "1.1.0"]  # kept: not rendered again
    again["rest"]["openapi.json"] = "changed by a caller"
    assert render_model(model) == first  # each caller gets its own copy
    monkeypatch.setattr(core.seam.rendering, "KEPT", 2)
    render_model(_changed(model, "1.2.0"))  # kept: the embedded model and 1.2.0
    render_model(_changed(model, "1.3.0"))  # the embedded model, the least recently used, makes room
    assert render_model(model) == first
    assert rendered == [model.version, "1.1.0", "1.2.0", "1.3.0", model.version]


def test_a_model_diff_opens_no_store_and_no_instance(model: Model, monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a model diff opened a store or an instance")

    monkeypatch.setattr(core.seam.instance, "open_instance", refused)
    monkeypatch.setattr(core.store.sqlite.SQLiteStore, "open", refused)
    report = diff_models(model, _changed(model, "1.2.0"))
    assert report.classification() == "compatible"
    assert {"mcp", "rest", "graphql", "llms"} <= set(report.surfaces)


def test_the_empty_graph_answers_nothing_and_refuses_every_write(model: Model) -> None:
    store = EmptyStore(model)
    assert (store.revision(), store.node("x"), store.stats().nodes) == (0, None, 0)
    with pytest.raises(StoreError, match="stores nothing"):
        store.commit([put_node("t-1", "Team", {"name": "A"})], principal="test")


def test_apply_model_plans_with_the_planner_handed_in_and_refuses_without_one(
    seeded_store: Store, model: Model
) -> None:
    document = dict(_changed(model, "1.3.0").document)
    without = Dispatcher(build_registry(model), seeded_store, GraphIndex.build(seeded_store), Toolset().all_handlers())
    refused = without.call_tool(LOCAL, "test", "apply_model", {"model": document, "dry_run": True})
    assert isinstance(refused.error, UnavailableError)

    handed = Dispatcher(build_registry(model), seeded_store, GraphIndex.build(seeded_store),
                        Toolset().all_handlers(), planner=Planner(seeded_store))  # fmt: skip
    planned = handed.call_tool(LOCAL, "test", "apply_model", {"model": document, "dry_run": True})
    assert planned.value is not None, planned.error
    assert (planned.value["applied"], planned.value["plan"]["classification"]) == (False, "compatible")
    assert seeded_store.model.version == model.version  # a dry run
