"""`/metrics`: a scrape in Prometheus text form whose counters move with calls on every surface, and gauges of
live state; protected, it answers only an admin token; switched off, it is not there."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from core.http.app import build_app
from core.ops.config import Config
from core.seam.instance import Instance, open_instance
from tests.conftest import copy_store
from tests.generators.conftest import token
from tests.mcp.conftest import LEGACY_HEADERS, initialize_body, modern_request


def opened(template: Path, folder: Path, **settings: Any) -> Instance:
    """A copy of the seeded store with `settings` (Config fields) and a token file of its own."""
    folder.mkdir(parents=True, exist_ok=True)
    config = Config(store=copy_store(template, folder / "canon.db"), tokens=folder / "tokens.json")
    return open_instance(dataclasses.replace(config, **settings))


@pytest.fixture
def instance(seed_template: Path, tmp_path: Path) -> Iterator[Instance]:
    opened_ = opened(seed_template, tmp_path / "store")
    yield opened_
    opened_.close()


@contextlib.asynccontextmanager
async def served(instance: Instance) -> AsyncGenerator[httpx2.AsyncClient]:
    app = build_app(instance)
    async with app.router.lifespan_context(app):
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as http:
            yield http


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape, by name and labels (parsed by Prometheus's own text parser)."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}  # fmt: skip


def calls(scrape: dict[tuple[str, tuple[tuple[str, str], ...]], float], surface: str, tool: str,
          outcome: str = "ok") -> float:  # fmt: skip
    labels = (("action", "tools/call"), ("outcome", outcome), ("surface", surface), ("tool", tool))
    return scrape.get(("canon_calls_total", labels), 0.0)


def public_node(instance: Instance) -> str:
    return next(n.id for n in instance.store.iter_nodes() if n.visibility == "public")


@pytest.mark.anyio
async def test_a_scrape_parses_and_its_call_counters_move_with_calls_on_mcp_and_rest(instance: Instance) -> None:
    node = public_node(instance)
    async with served(instance) as http:
        before = samples((await http.get("/metrics")).text)
        headers, body = modern_request("tools/call", {"name": "get_node", "arguments": {"id": node}})
        assert (await http.post("/mcp", headers=headers, json=body)).status_code == 200
        assert (await http.get(f"/api/nodes/{node}")).status_code == 200
        assert (await http.get("/api/nodes/no-such-node")).status_code == 404
        answer = await http.get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=")
    after = samples(answer.text)
    assert calls(after, "mcp-http", "get_node") == calls(before, "mcp-http", "get_node") + 1
    assert calls(after, "rest", "get_node") == calls(before, "rest", "get_node") + 1
    assert calls(after, "rest", "get_node", "not_found") == calls(before, "rest", "get_node", "not_found") + 1
    timed = ("canon_call_duration_seconds_count", (("action", "tools/call"), ("surface", "rest"), ("tool", "get_node")))
    assert after[timed] == before.get(timed, 0.0) + 2


@pytest.mark.anyio
async def test_the_gauges_read_the_store_the_index_and_the_open_sessions_when_scraped(instance: Instance) -> None:
    async with served(instance) as http:
        before = samples((await http.get("/metrics")).text)
        opened_session = await http.post("/mcp", headers=LEGACY_HEADERS, json=initialize_body())
        assert opened_session.status_code == 200
        after = samples((await http.get("/metrics")).text)
    revision = float(instance.store.revision())
    assert after[("canon_store_revision", ())] == revision
    assert after[("canon_index_revision", ())] == revision
    assert after[("canon_index_sync_lag_revisions", ())] == 0
    assert ("canon_audit_queue_depth", ()) in after
    assert (before[("canon_mcp_sessions", ())], after[("canon_mcp_sessions", ())]) == (0, 1)
    for gauge in ("canon_mcp_listen_streams", "canon_mcp_get_streams", "canon_change_watches"):
        assert after[(gauge, ())] == 0


@pytest.mark.anyio
async def test_protected_metrics_answer_only_a_bearer_token_with_the_admin_role(
    seed_template: Path,
    tmp_path: Path,
) -> None:
    instance = opened(seed_template, tmp_path / "store", metrics_protected=True)
    try:
        reader, admin = token(instance, "ada", "reader"), token(instance, "root", "admin")
        async with served(instance) as http:
            anonymous = await http.get("/metrics")
            as_reader = await http.get("/metrics", headers={"Authorization": f"Bearer {reader}"})
            as_admin = await http.get("/metrics", headers={"Authorization": f"Bearer {admin}"})
            other_routes = await http.get("/healthz")
    finally:
        instance.close()
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"].startswith("Bearer")
    assert as_reader.status_code == 403
    assert as_reader.headers["content-type"] == "application/problem+json"
    assert "canon_calls" not in anonymous.text + as_reader.text
    assert as_admin.status_code == 200
    assert ("canon_store_revision", ()) in samples(as_admin.text)
    assert other_routes.status_code == 200, "protecting the metrics protects nothing else"


@pytest.mark.anyio
async def test_metrics_switched_off_are_not_served_and_count_nothing(
    seed_template: Path,
    tmp_path: Path,
) -> None:
    instance = opened(seed_template, tmp_path / "store", metrics=False)
    try:
        async with served(instance) as http:
            answer = await http.get("/metrics")
        hooks = list(instance.dispatcher.audit_hooks)
    finally:
        instance.close()
    assert answer.status_code == 404
    assert hooks == []
