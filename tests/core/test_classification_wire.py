"""What an admin is told about a model change, on the wire and against the stored data, on both backends: a dry run
of `apply_model` over MCP and over REST (`POST /api/model`) gives the same plan, and the data check refuses exactly
the stored records the plan says may not fit. Small model pairs from `test_classification.py`; uvicorn on 127.0.0.1
and the official MCP SDK client."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from core.ops.config import Config
from core.seam.instance import Instance, open_instance
from core.store import is_database_url
from core.values.operations import PutNode
from core.values.records import Node
from tests.core.test_classification import Document, code_pattern, hosted, without_tape
from tests.generators.conftest import live, token
from tests.mcp.conftest import connect

pytestmark = [pytest.mark.anyio, pytest.mark.both_backends]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def served(store_location: str | Path, tmp_path: Path) -> Iterator[Instance]:
    """A store on the hosted model holding one service (on SSD)."""
    model_file = tmp_path / "hosted.schema.json"
    model_file.write_text(json.dumps(hosted().document), encoding="utf-8")
    store = store_location if is_database_url(str(store_location)) else tmp_path / "canon.db"
    opened = open_instance(Config(store=store, model=model_file, tokens=tmp_path / "tokens.json"))
    opened.store.commit([PutNode(Node("svc-archive", "Service", {"code": "S000001", "storage": "ssd"}))],
                        principal="test")  # fmt: skip
    yield opened
    opened.close()


async def _dry_runs(instance: Instance, document: Document) -> tuple[Any, httpx2.Response]:
    """A dry run of `document`, over MCP (the tool result) and over REST (the response)."""
    secret = token(instance, "ada", "admin")
    arguments = {"model": document, "dry_run": True}
    with live(instance) as base:
        async with connect(f"{base}/mcp", "auto", secret) as client:
            result = await client.call_tool("apply_model", arguments)
        async with httpx2.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {secret}"}, timeout=60) as http:
            answer = await http.post("/api/model", json=arguments)
    return result, answer


async def _plans(instance: Instance, document: Document) -> tuple[dict[str, Any], dict[str, Any]]:
    """The dry-run plan for `document`, asked over MCP and over REST."""
    result, answer = await _dry_runs(instance, document)
    assert not result.is_error, result.content
    assert answer.status_code == 200, answer.text
    assert result.structured_content is not None
    assert result.structured_content["applied"] is False
    return result.structured_content["plan"], answer.json()["plan"]


def _rows(plan: dict[str, Any]) -> dict[str, str]:
    return {row: plan["surfaces"][row] for row in ("mcp", "rest", "writes")}


CASES: list[tuple[str, Callable[[Document], None], str, str]] = [
    # id, change, version, expected on the mcp, rest and writes rows
    ("an enum narrowed in a shared helper", without_tape, "2.0.0", "breaking"),
    ("a widened quantifier", code_pattern("^S[0-9]{6,8}$"), "1.1.0", "compatible"),
    ("a pattern canon cannot order", code_pattern("^S([0-9][0-9]){3}[0-9]*$"), "1.1.0", "needs-data-check"),
    ("a version only", lambda d: None, "1.0.1", "none"),
]


@pytest.mark.parametrize(("change", "version", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
async def test_mcp_and_rest_give_the_same_plan_for_a_model_change(
    served: Instance, change: Callable[[Document], None], version: str, expected: str
) -> None:
    on_mcp, on_rest = await _plans(served, dict(hosted(change, version).document))
    assert on_mcp == on_rest
    assert _rows(on_mcp) == dict.fromkeys(("mcp", "rest", "writes"), expected), on_mcp["findings"]
    assert on_mcp["data"]["refused"] == 0


async def test_the_data_check_refuses_the_record_holding_the_value_a_shared_helper_dropped(served: Instance) -> None:
    served.store.commit([PutNode(Node("svc-tape", "Service", {"code": "S000002", "storage": "tape"}))],
                        principal="test")  # fmt: skip
    result, answer = await _dry_runs(served, dict(hosted(without_tape, "2.0.0").document))
    assert result.is_error
    error = json.loads(result.content[0].text)["error"]
    assert answer.status_code == 400, answer.text
    assert error["code"] == answer.json()["code"] == "invalid"
    pointers = [p["pointer"] for p in error["problems"]]
    assert pointers == [p["pointer"] for p in answer.json()["errors"]] == ["/model/nodes/svc-tape/properties/storage"]
