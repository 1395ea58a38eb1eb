"""`[tracing] enabled`: one OpenTelemetry span per dispatched call, named and attributed from fixed sets only."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.ops.config import Config
from core.seam.instance import Instance, open_instance
from core.values.errors import UnknownToolError
from core.values.principal import ANONYMOUS, LOCAL
from tests.conftest import copy_store
from tests.otel import exported


def opened(template: Path, folder: Path, *, tracing: bool) -> Instance:
    folder.mkdir(parents=True, exist_ok=True)
    config = Config(store=copy_store(template, folder / "canon.db"), tokens=folder / "tokens.json")
    return open_instance(dataclasses.replace(config, tracing=tracing))


@pytest.fixture
def traced(seed_template: Path, tmp_path: Path) -> Iterator[Instance]:
    exporter = exported()
    instance = opened(seed_template, tmp_path / "store", tracing=True)
    exporter.clear()
    yield instance
    instance.close()


def test_each_dispatched_call_is_one_span_with_its_surface_tool_outcome_and_revision(traced: Instance) -> None:
    node = next(n for n in traced.store.iter_nodes() if n.visibility == "public")
    dispatcher = traced.dispatcher
    assert not dispatcher.call_tool(LOCAL, "mcp-stdio", "get_node", {"id": node.id}).is_error
    assert dispatcher.call_tool(ANONYMOUS, "rest", "get_node", {"id": "no-such-node"}).is_error
    with pytest.raises(UnknownToolError):
        dispatcher.call_tool(LOCAL, "graphql", "get_nod", {})
    spans = exported().get_finished_spans()
    assert [s.name for s in spans] == ["tools/call get_node", "tools/call get_node", "tools/call"]
    attributes = [dict(s.attributes or {}) for s in spans]
    revision = traced.store.revision()
    assert attributes == [
        {"canon.surface": "mcp-stdio", "canon.action": "tools/call", "canon.tool": "get_node",
         "canon.outcome": "ok", "canon.revision": revision},
        {"canon.surface": "rest", "canon.action": "tools/call", "canon.tool": "get_node",
         "canon.outcome": "not_found", "canon.revision": revision},
        {"canon.surface": "graphql", "canon.action": "tools/call", "canon.tool": "",
         "canon.outcome": "unknown", "canon.revision": revision},
    ]  # fmt: skip
    assert all(s.end_time is not None and s.start_time is not None and s.end_time >= s.start_time for s in spans)


def test_without_tracing_configured_no_span_is_made(seed_template: Path, tmp_path: Path) -> None:
    exporter = exported()
    instance = opened(seed_template, tmp_path / "store", tracing=False)
    try:
        exporter.clear()
        instance.dispatcher.call_tool(LOCAL, "mcp-stdio", "describe_model", {})
    finally:
        instance.close()
    assert exporter.get_finished_spans() == ()
