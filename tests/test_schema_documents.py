"""The JSON Schema documents canon ships are valid 2020-12 schemas, their $refs resolve, and the seed fits the model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema_specifications
import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from core.lang.model import check_model, default_model_path, default_seed_path, load_model
from core.store.interchange import import_path
from core.store.sqlite import SQLiteStore

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schema"
SCHEMA_FILES = sorted(SCHEMA_DIR.rglob("*.schema.json"))


def _load(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def _refs(node: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(JSON pointer of the object holding it, value) for every `$ref` in a document."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield path, value
            else:
                yield from _refs(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _refs(value, f"{path}/{i}")


def _registry() -> Registry[Any]:
    ours = Registry().with_resources(
        (doc["$id"], Resource.from_contents(doc, default_specification=DRAFT202012)) for doc in map(_load, SCHEMA_FILES)
    )
    return ours.combine(jsonschema_specifications.REGISTRY)


def test_schema_directory_holds_the_meta_default_and_config_schemas() -> None:
    names = {path.relative_to(SCHEMA_DIR).as_posix() for path in SCHEMA_FILES}
    assert {"meta/model.schema.json", "default/model.schema.json", "config/config.schema.json"} <= names


@pytest.mark.parametrize("path", SCHEMA_FILES, ids=lambda p: p.relative_to(SCHEMA_DIR).as_posix())
def test_every_schema_document_is_a_valid_draft_2020_12_schema(path: Path) -> None:
    document = _load(path)
    Draft202012Validator.check_schema(document)
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert isinstance(document["$id"], str)


def test_schema_documents_have_distinct_ids() -> None:
    ids = [_load(path)["$id"] for path in SCHEMA_FILES]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("path", SCHEMA_FILES, ids=lambda p: p.relative_to(SCHEMA_DIR).as_posix())
def test_every_ref_in_a_schema_document_resolves_against_its_id(path: Path) -> None:
    document = _load(path)
    resolver = _registry().resolver(base_uri=document["$id"])
    unresolved: list[tuple[str, str]] = []
    for at, ref in _refs(document):
        try:
            resolver.lookup(ref)
        except Unresolvable:
            unresolved.append((at, ref))
    assert unresolved == []


def test_the_model_meta_schema_references_the_draft_2020_12_meta_schema() -> None:
    document = _load(SCHEMA_DIR / "meta" / "model.schema.json")
    resolved = _registry().resolver(base_uri=document["$id"]).lookup("https://json-schema.org/draft/2020-12/schema")
    assert resolved.contents["$id"] == "https://json-schema.org/draft/2020-12/schema"


def test_default_model_has_no_problems() -> None:
    assert check_model(_load(default_model_path()), source=str(default_model_path())) == []


def test_default_model_declares_the_documented_node_and_edge_types() -> None:
    model = load_model()
    assert set(model.node_types) == {"Person", "Team", "Service", "System", "Decision", "Document", "GlossaryTerm"}
    assert {
        "member_of", "reports_to", "owns", "depends_on", "part_of", "decided_by", "supersedes", "affects",
        "documents", "defines", "related_to", "authored",
    } == set(model.edge_types)  # fmt: skip


def test_seed_imports_into_an_empty_store(store: SQLiteStore) -> None:
    report = import_path(store, default_seed_path(), principal="test:seed")
    stats = store.stats()
    assert report.nodes > 300
    assert report.edges > 1000
    assert (stats.nodes, stats.edges) == (report.nodes, report.edges)
    assert set(stats.nodes_by_type) == set(store.model.node_types)
    assert store.integrity_check() == "ok"
