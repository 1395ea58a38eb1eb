"""Property-based fuzzing of the GraphQL surface: queries and mutations generated from its own SDL
(hypothesis-graphql) against the real server, as an admin, on a store of the test's own.

Every answer must be a 200 whose errors are canon errors (`extensions.code`) or GraphQL's own refusals of the
document (validation, bounds: no `path`); an error at a path without a code would be a resolver bug, a broken
non-null promise or a value GraphQL cannot serialise, and an unexpected exception shows as the masked message.
The runs are derandomised (fixed examples, no example database), so a failure reproduces.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import graphql
import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_graphql import mutations, nodes, queries

from core.seam.instance import Instance
from core.seam.surfaces import Surface
from generators.graphql.schema import surface
from tests.generators.conftest import live, token

CODES = {"INVALID_ARGUMENTS", "INVALID", "NOT_FOUND", "FORBIDDEN", "CONFLICT", "LIMIT_EXCEEDED"}
EXAMPLES = 100  # per operation type: 200 in all

JSON_VALUES: st.SearchStrategy[Any] = st.one_of(
    st.integers(-5, 5).map(nodes.Int),
    st.sampled_from(["", "Team", "x", "person-ada-okafor"]).map(nodes.String),
    st.booleans().map(nodes.Boolean),
    st.just(graphql.ObjectValueNode(fields=())),
    st.just(graphql.ListValueNode(values=())),
)
SETTINGS = settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])  # fmt: skip


@pytest.fixture(scope="module")
def server(seed_template: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx2.Client, str]]:
    from tests.generators.conftest import open_copy

    instance: Instance = open_copy(seed_template, tmp_path_factory.mktemp("fuzz"))
    try:
        with live(instance, list[Surface]([surface])) as base:
            secret = token(instance, "gq-fuzz", "admin")
            with httpx2.Client(base_url=base, headers={"Authorization": f"Bearer {secret}"}, timeout=30) as http:
                yield http, http.get("/schema.graphql").text
    finally:
        instance.close()


def check(http: httpx2.Client, query: str, outcomes: list[str]) -> None:
    response = http.post("/graphql", json={"query": query})
    assert response.status_code < 500, (query, response.text)
    body: dict[str, Any] = response.json()
    for error in body.get("errors", []):
        code = error.get("extensions", {}).get("code")
        assert "Unexpected error" not in error["message"], (query, error)
        if code is not None:
            assert code in CODES, (query, error)
        else:
            assert not error.get("path"), (query, error)  # a document refused, not a field that failed
    codes = sorted({e.get("extensions", {}).get("code", "GRAPHQL") for e in body.get("errors", [])})
    outcomes.append(",".join(codes) or "ok")


def test_generated_queries_get_canon_answers(server: tuple[httpx2.Client, str]) -> None:
    http, sdl = server

    outcomes: list[str] = []

    @given(queries(sdl, custom_scalars={"JSON": JSON_VALUES}))
    @SETTINGS
    def run(query: str) -> None:
        check(http, query, outcomes)

    run()
    assert len(outcomes) >= EXAMPLES // 2, Counter(outcomes)
    assert "ok" in outcomes, Counter(outcomes)


def test_generated_mutations_get_canon_answers(server: tuple[httpx2.Client, str]) -> None:
    http, sdl = server

    outcomes: list[str] = []

    @given(mutations(sdl, custom_scalars={"JSON": JSON_VALUES}))
    @SETTINGS
    def run(query: str) -> None:
        check(http, query, outcomes)

    run()
    assert len(outcomes) >= EXAMPLES // 2, Counter(outcomes)
    assert {"INVALID_ARGUMENTS", "NOT_FOUND"} & set(outcomes), Counter(outcomes)  # the dispatcher was reached
