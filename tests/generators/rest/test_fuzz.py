"""Property-based run of the REST surface from its own OpenAPI document (schemathesis) against real uvicorn.

Every operation gets a fixed number of generated requests, valid and invalid, from a fixed seed (deterministic,
no example database on disk), as an admin (who may call everything, writes included, on a store of this
module's own) and anonymously (who is refused most things). Each answer must not be a server error, must have
a documented status and content type, must fit its documented schema, and invalid input must be refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from core.dispatch.registry import build_registry
from core.lang.model import load_model
from core.seam.instance import Instance
from generators.rest.app import surface
from generators.rest.openapi import openapi_document
from tests.generators.conftest import live, open_copy, token

EXAMPLES = 15
CONFIG = schemathesis.Config.from_dict({
    "seed": 1,
    "generation": {"max-examples": EXAMPLES, "deterministic": True, "with-security-parameters": False},
    "phases": {"stateful": {"enabled": False}},
})  # fmt: skip
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          negative_data_rejection]  # fmt: skip


@dataclass(frozen=True)
class Target:
    url: str
    admin: str
    document: dict[str, Any]  # what the server should serve: its descriptions name the fuzzed store's data


@pytest.fixture(scope="module")
def fuzzed(seed_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    instance: Instance = open_copy(seed_template, tmp_path_factory.mktemp("fuzzed"))
    admin = token(instance, "fuzzer", "admin")
    try:
        with live(instance, surfaces=[surface]) as url:
            yield Target(url, admin, openapi_document(instance.registry))
    finally:
        instance.close()


DOCUMENT = openapi_document(build_registry(load_model()))  # the default model, as the fuzzed store has (its
# descriptions name no data: they do not change what is fuzzed)
schema = schemathesis.openapi.from_dict(DOCUMENT, config=CONFIG)
SLOW_IS_FINE = [HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large]  # real HTTP per example
SETTINGS = settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
                    suppress_health_check=SLOW_IS_FINE)  # fmt: skip


@schema.parametrize()
@SETTINGS
def test_rest_as_admin(case: schemathesis.Case, fuzzed: Target) -> None:
    case.call_and_validate(base_url=fuzzed.url, headers={"Authorization": f"Bearer {fuzzed.admin}"}, checks=CHECKS)


@schema.parametrize()
@SETTINGS
def test_rest_anonymously(case: schemathesis.Case, fuzzed: Target) -> None:
    case.call_and_validate(base_url=fuzzed.url, checks=CHECKS)


def test_the_fuzzed_document_is_the_one_the_server_serves(fuzzed: Target) -> None:
    served = httpx2.get(f"{fuzzed.url}/openapi.json").json()
    assert served == fuzzed.document
    assert _strip(served) == _strip(DOCUMENT)


def _strip(value: Any) -> Any:
    """`value` without its descriptions: what the fuzzed schema and the served one must agree on."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k != "description"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value
