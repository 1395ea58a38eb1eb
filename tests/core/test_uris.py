"""canon's resource URIs (`core.values.uris`): what the builders make, the parsers read back, and no other module spells
the scheme."""

from __future__ import annotations

from pathlib import Path

from core.values.uris import (
    CHANGES_URI,
    MODEL_URI,
    NODE_TEMPLATE,
    SCHEME,
    node_of,
    node_uri,
    path_of,
    type_of,
    type_uri,
)


def test_a_node_uri_reads_back_as_its_type_and_id_and_nothing_else_does() -> None:
    assert node_uri("Team", "team-payments") == "canon://nodes/Team/team-payments"
    assert node_of(node_uri("Team", "team-payments")) == ("Team", "team-payments")
    assert [node_of(u) for u in (MODEL_URI, CHANGES_URI, type_uri("Team"), "canon://nodes/Team", "canon://nodes/Team/",
                                 "canon://nodes/Team/a/b", "other://nodes/Team/a")] == [None] * 7  # fmt: skip


def test_a_type_uri_reads_back_as_its_name_and_nothing_else_does() -> None:
    assert type_uri("owns") == "canon://types/owns"
    assert type_of(type_uri("owns")) == "owns"
    assert [type_of(u) for u in (MODEL_URI, CHANGES_URI, node_uri("Team", "t"))] == [None] * 3


def test_the_path_of_a_uri_or_template_is_what_follows_the_scheme() -> None:
    assert (MODEL_URI, CHANGES_URI, NODE_TEMPLATE) == ("canon://model", "canon://changes", "canon://nodes/{type}/{id}")
    assert [path_of(u) for u in (MODEL_URI, type_uri("Team"), NODE_TEMPLATE)] == ["model", "types/Team",
                                                                                   "nodes/{type}/{id}"]  # fmt: skip


def test_no_module_of_core_or_generators_but_core_uris_spells_the_scheme() -> None:
    root = Path(__file__).resolve().parents[2]
    spelled = [str(p.relative_to(root)) for folder in ("core", "generators") for p in sorted((root / folder).rglob("*"))
               if p.is_file() and p.suffix in {".py", ".j2"} and SCHEME in p.read_text(encoding="utf-8")]  # fmt: skip
    assert spelled == ["core/values/uris.py"]
