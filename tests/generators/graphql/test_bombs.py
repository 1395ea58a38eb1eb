"""GraphQL bombs: documents built to make parsing or validation explode are refused quickly, and nobody else waits.

Each bomb is refused with `extensions.code` LIMIT_EXCEEDED within `REFUSED_WITHIN` seconds (in-process, through
the schema's own gate). Over a real uvicorn, where the event loop is the thing under test, another client's
`/healthz` keeps answering within `OTHERS_WITHIN` seconds while the heaviest bombs are processed.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import pytest
from websockets.sync.client import connect
from websockets.typing import Subprotocol

from core.seam.instance import Instance
from core.values.principal import LOCAL
from generators.graphql.bounds import (
    MAX_ALIASES,
    MAX_DEPTH,
    MAX_DOCUMENT,
    MAX_FRAGMENTS,
    MAX_NESTING,
    MAX_REPEAT,
    MAX_TOKENS,
    CanonSchema,
)
from generators.graphql.runtime import Runtime
from generators.graphql.schema import build_schema
from tests.generators.conftest import live
from tests.generators.graphql.test_schema import SURFACES, host_of

REFUSED_WITHIN = 2.0  # seconds, generous: the refusals measure in milliseconds
# seconds for another client's /healthz meanwhile; generous (a loaded 2-core machine), yet before the gate the
# 20-level bomb held every client for 11-24 s and the 40-level one for good
OTHERS_WITHIN = 2.0


def doubling(levels: int) -> str:
    """The fragment-doubling bomb: each fragment spreads the next one twice (2**levels fields as written)."""
    fragments = [f"fragment F{i} on Team {{ id ...F{i + 1} ...F{i + 1} }}" for i in range(levels)]
    return '{ get_node(id: "team-payments") { node { ...F0 } } } ' + " ".join(
        [*fragments, f"fragment F{levels} on Team {{ id }}"]
    )


def nested(field: str, levels: int) -> str:
    return (
        '{ get_node(id: "person-ada-okafor") { node { ... on Person { '
        + f"{field} {{ " * levels
        + "id"
        + " }" * (levels * (field.count("{") + 1) + 4)
    )


BOMBS: dict[str, tuple[str, str]] = {  # name: (document, the bound that refuses it)
    "fragments doubling 16 levels": (doubling(16), "repeat"),
    "fragments doubling 20 levels": (doubling(20), "repeat"),
    "fragments doubling 40 levels": (doubling(40), "repeat"),
    "aliases": (
        "{ " + " ".join(f"a{i}: describe_model {{ revision }}" for i in range(MAX_ALIASES + 1)) + " }",
        "aliases",
    ),
    "aliases through fragments": (
        "{ ...A0 } "
        + " ".join(
            f"fragment A{i} on Query {{ x: describe_model {{ revision }} ...A{i + 1} ...A{i + 1} }}" for i in range(12)
        )
        + " fragment A12 on Query { x: describe_model { revision } }",
        "aliases",
    ),
    "depth": (nested("reports_to(limit: 1) { items { node", MAX_DEPTH // 3 + 1), "depth"),
    "nesting": ("{ get_node(id: " + "[" * (MAX_NESTING * 2) + "]" * (MAX_NESTING * 2) + ") { revision } }", "nesting"),
    "wide selection of one field": ("{ " + "describe_model { revision } " * 1200 + "}", "repeat"),
    "tokens": ("{ " + "a " * (MAX_TOKENS + 1) + "}", "tokens"),
    "comments": ("{ __typename }\n" + "#\n" * (MAX_TOKENS + 1), "tokens"),
    "document size": ("{ __typename } #" + "x" * MAX_DOCUMENT, "document"),
    "fragment chain": (
        '{ get_node(id: "team-payments") { node { ...F0 } } } '
        + " ".join(f"fragment F{i} on Team {{ ...F{i + 1} }}" for i in range(MAX_FRAGMENTS + 1))
        + f" fragment F{MAX_FRAGMENTS + 1} on Team {{ id }}",
        "fragments",
    ),
}
HEAVIEST = ["fragments doubling 20 levels", "fragments doubling 40 levels", "wide selection of one field", "tokens"]


@pytest.fixture(scope="module")
def schema(gen_instance: Instance) -> CanonSchema:
    return build_schema(gen_instance.dispatcher.registry).schema


@pytest.fixture(scope="module")
def runtime(gen_instance: Instance) -> Runtime:
    return build_schema(gen_instance.dispatcher.registry).bind(host_of(gen_instance))


@pytest.mark.parametrize("name", BOMBS)
def test_a_bomb_is_refused_within_its_bound_in_milliseconds(schema: CanonSchema, runtime: Runtime, name: str,
                                                            caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    document, bound = BOMBS[name]
    started = time.perf_counter()
    result = anyio.run(lambda: schema.execute(document, context_value=runtime.context(principal=LOCAL)))
    elapsed = time.perf_counter() - started
    assert elapsed < REFUSED_WITHIN
    assert result.data is None
    assert result.errors is not None
    extensions = [e.extensions or {} for e in result.errors]
    assert {"code": "LIMIT_EXCEEDED", "limit": bound} in [{"code": x["code"], "limit": x["limit"]} for x in extensions]
    refusals = [r.getMessage() for r in caplog.records if r.name == "canon.graphql"]
    assert len(refusals) == 1
    assert bound in refusals[0]
    assert document[:40] not in refusals[0]


def test_the_repeat_bound_leaves_ordinary_merged_fragments_alone(schema: CanonSchema, runtime: Runtime) -> None:
    """Fields merged from a few fragments (what client tooling writes) stay well within `MAX_REPEAT`."""
    fragments = " ".join(f"fragment P{i} on Team {{ id properties {{ name }} }}" for i in range(MAX_REPEAT // 2))
    spreads = " ".join(f"...P{i}" for i in range(MAX_REPEAT // 2))
    document = '{ get_node(id: "team-payments") { node { ' + spreads + " } } } " + fragments
    result = anyio.run(lambda: schema.execute(document, context_value=runtime.context(principal=LOCAL)))
    assert result.errors is None
    assert result.data is not None
    assert result.data["get_node"]["node"]["id"] == "team-payments"


# -- the event loop under a bomb (real uvicorn) -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def served(gen_instance: Instance) -> Iterator[str]:
    with live(gen_instance, SURFACES) as base:
        yield base


def _while_bombed(base: str, document: str) -> tuple[float, float, dict[str, Any]]:
    """Send `document` and poll `/healthz` from another client until it is answered: the bomb's wall time,
    the slowest /healthz, and the bomb's answer."""
    answer: dict[str, Any] = {}
    done = threading.Event()

    def bomb() -> None:
        with httpx2.Client(base_url=base, timeout=60) as http:
            answer.update(http.post("/graphql", json={"query": document}).json())
        done.set()

    slowest = 0.0
    with httpx2.Client(base_url=base, timeout=10) as other:
        other.get("/healthz")  # the connection is open before the bomb goes off
        thread = threading.Thread(target=bomb)
        started = time.perf_counter()
        thread.start()
        while not done.is_set() and time.perf_counter() - started < 60:
            asked = time.perf_counter()
            assert other.get("/healthz").status_code == 200
            slowest = max(slowest, time.perf_counter() - asked)
        thread.join(timeout=60)
        return time.perf_counter() - started, slowest, answer


@pytest.mark.parametrize("name", HEAVIEST)
def test_another_client_is_answered_while_a_bomb_is_processed(served: str, name: str) -> None:
    elapsed, slowest, answer = _while_bombed(served, BOMBS[name][0])
    assert elapsed < REFUSED_WITHIN
    assert slowest < OTHERS_WITHIN
    assert [e["extensions"]["code"] for e in answer["errors"]][:1] == ["LIMIT_EXCEEDED"]


def test_a_bomb_sent_over_websocket_is_refused_with_its_bound(served: str) -> None:
    """A document that does not even parse is answered as an error message (it escaped the subscription)."""
    url = served.replace("http", "ws", 1) + "/graphql"
    with connect(url, subprotocols=[Subprotocol("graphql-transport-ws")]) as ws:
        ws.send(json.dumps({"type": "connection_init"}))
        assert json.loads(ws.recv(timeout=5))["type"] == "connection_ack"
        for n, name in enumerate(["tokens", "fragments doubling 40 levels"]):
            ws.send(json.dumps({"id": str(n), "type": "subscribe", "payload": {"query": BOMBS[name][0]}}))
            message = json.loads(ws.recv(timeout=REFUSED_WITHIN))
            assert message["type"] == "error"
            assert message["payload"][0]["extensions"]["limit"] == BOMBS[name][1]
