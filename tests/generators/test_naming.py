"""The names one surface prints about another (generators/naming.py) are the names the other surface serves."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from core.dispatch.registry import build_registry
from core.lang.model import load_model
from generators.naming import resource_field_name, resource_path, rest_route
from generators.rest.openapi import openapi_document

REGISTRY = build_registry(load_model())
SDL = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "schema.graphql").read_text(encoding="utf-8")


def test_a_tools_rest_hint_is_its_method_and_path_under_api() -> None:
    assert rest_route(REGISTRY.tool("get_node")) == ("GET", "/api/nodes/{id}")


def test_a_tool_without_a_hint_is_get_when_read_only_else_post_under_api_tools() -> None:
    read = dataclasses.replace(REGISTRY.tool("get_node"), surface={})
    write = dataclasses.replace(REGISTRY.tool("upsert_node"), surface={})
    assert rest_route(read) == ("GET", "/api/tools/get_node")
    assert rest_route(write) == ("POST", "/api/tools/upsert_node")


@pytest.mark.parametrize(("tool", "method"), [("upsert_node", "GET"), ("get_node", "TRACE")])
def test_a_hint_rest_cannot_serve_fails_when_the_route_is_named(tool: str, method: str) -> None:
    unservable = dataclasses.replace(REGISTRY.tool(tool), surface={"rest": {"method": method, "path": "/x"}})
    with pytest.raises(ValueError, match=method):
        rest_route(unservable)


def test_every_named_rest_route_and_resource_path_is_an_operation_of_the_openapi_document() -> None:
    paths = openapi_document(REGISTRY)["paths"]
    for tool in REGISTRY.tools:
        method, path = rest_route(tool)
        assert method.lower() in paths[path], tool.name
    for resource in (*REGISTRY.resources, *REGISTRY.templates):
        assert "get" in paths[resource_path(str(resource.uri or resource.uri_template))], resource.name


def test_every_resources_named_graphql_field_is_in_the_schema() -> None:
    for resource in (*REGISTRY.resources, *REGISTRY.templates):
        assert f"  {resource_field_name(resource.name)}" in SDL, resource.name
