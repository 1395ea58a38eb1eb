"""The REST surface's OpenAPI 3.1 document, built from the registry by hand (FastAPI and pydantic never touch it).

How a tool becomes an operation (`route_of`); `generators.rest.app` serves exactly these routes:

* method and path come from the tool's REST hint (`surface.rest`), under `/api`; a tool without one is
  `GET /api/tools/<name>` when read-only, else `POST`. GET is only ever used for read-only tools.
* `{name}` segments of the path are path parameters carrying that input property's schema.
* GET and DELETE: every other input property is a query parameter. Scalars and enums are sent as they are,
  arrays of scalars as repeated parameters (form, explode), anything else as one JSON-encoded parameter
  (`content: application/json`).
* PUT, POST and PATCH: every other input property is in the JSON body, whose schema is the input schema
  without the path parameters. Its media type is `application/json` unless the hint lists the ones it takes
  (`"media"`, e.g. patch_node's `application/merge-patch+json` and `application/json`); a route with such a
  list refuses any other Content-Type with 415.
* 200 carries the output schema (what MCP's structuredContent carries); errors are RFC 9457 problem+json.

Resources: a resource URI is `GET /api/resources/<its path>` (`core.values.uris.path_of`), a template keeps its
`{var}`s as path parameters, and `GET /api/resources` lists them a page at a time.

Schemas are the registry's, unchanged except that each one's `$defs` move into `components/schemas` with their
refs rewritten (`generators.rest.hoist`). Each operation records its input schema's top-level keywords
(`x-canon-input`) and where its definitions went (`x-canon-defs`), so `unhoist` (re-exported from
`generators.rest.hoist`) rebuilds the exact input and output schemas.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from core.dispatch.registry import Registry, ResourceDefinition, ToolDefinition
from core.values.uris import NODE_AT_TEMPLATE
from core.web import PROBLEM_MEDIA, STATUS
from generators.naming import API, resource_path, rest_route
from generators.rest.hoist import COMPONENTS, hoist, unhoist

__all__ = [
    "Param",
    "ResourceRoute",
    "ToolRoute",
    "openapi_document",
    "resource_routes",
    "route_of",
    "unhoist",
]

OPENAPI_VERSION = "3.1.1"
SCALARS = frozenset({"string", "integer", "number", "boolean", "null"})
COMPOSITION = ("$ref", "allOf", "anyOf", "oneOf", "not", "if", "properties", "items", "prefixItems")
SEGMENT = re.compile(r"\{([^{}/]+)\}")

Style = Literal["scalar", "array", "json"]


@dataclass(frozen=True)
class Param:
    """One path or query parameter and the input property it carries."""

    name: str
    location: Literal["path", "query"]
    style: Style
    schema: Mapping[str, Any]  # the property's exact schema
    required: bool


@dataclass(frozen=True)
class ToolRoute:
    tool: ToolDefinition
    method: str
    path: str  # full request path template, e.g. /api/nodes/{id}
    params: tuple[Param, ...]
    body: bool  # the properties that are not parameters come as a JSON body
    media: tuple[str, ...] = ("application/json",)  # the body's media types
    strict_media: bool = False  # the hint listed them: any other Content-Type is refused (415)

    @property
    def conditional(self) -> bool:
        """GET answers carry an ETag and honour If-None-Match."""
        return self.method == "GET"

    @property
    def takes_if_match(self) -> bool:
        return not self.tool.annotations.get("readOnlyHint", False) and "expected_revision" in _properties(
            self.tool.input_schema
        )

    @property
    def pages(self) -> bool:
        return "next_cursor" in _properties(self.tool.output_schema)


@dataclass(frozen=True)
class ResourceRoute:
    resource: ResourceDefinition | None  # None: the resource list
    path: str
    variables: tuple[str, ...] = ()


def _properties(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    found = schema.get("properties", {})
    return found if isinstance(found, Mapping) else {}


def style_of(schema: Mapping[str, Any]) -> Style:
    """How a property travels in a query string: as it is, repeated, or JSON-encoded."""
    if _scalar(schema):
        return "scalar"
    items = schema.get("items")
    if schema.get("type") == "array" and isinstance(items, Mapping) and _scalar(items):  # pyright: ignore[reportUnknownArgumentType]
        return "array"
    return "json"


def _scalar(schema: Mapping[str, Any]) -> bool:
    if any(keyword in schema for keyword in COMPOSITION):
        return False
    kind = schema.get("type")
    if isinstance(kind, str):
        return kind in SCALARS
    if isinstance(kind, list):
        return bool(kind) and all(k in SCALARS for k in kind)  # pyright: ignore[reportUnknownVariableType]
    values = schema.get("enum", [schema["const"]] if "const" in schema else None)
    return isinstance(values, list) and all(not isinstance(v, (dict, list)) for v in values)  # pyright: ignore[reportUnknownVariableType]


def route_of(tool: ToolDefinition) -> ToolRoute:
    """The operation a tool becomes (see the module docstring); a hint that cannot be served fails here."""
    method, path = rest_route(tool)
    properties = _properties(tool.input_schema)
    required = set(tool.input_schema.get("required", ()))
    params: list[Param] = []
    for name in SEGMENT.findall(path):
        if name not in properties:
            raise ValueError(f"tool {tool.name!r}: path parameter {name!r} is not an input property")
        params.append(Param(name, "path", style_of(properties[name]), properties[name], True))
    body = method in ("PUT", "POST", "PATCH")
    media = tuple(str(m).lower() for m in (tool.surface.get("rest") or {}).get("media", ()))
    if media and not body:
        raise ValueError(f"tool {tool.name!r}: a {method} route has no body to take {', '.join(media)}")
    if not body:
        taken = {p.name for p in params}
        params += [Param(n, "query", style_of(s), s, n in required) for n, s in properties.items() if n not in taken]
    return ToolRoute(tool, method, path, tuple(params), body, media or ("application/json",), bool(media))


def resource_routes(registry: Registry) -> list[ResourceRoute]:
    """The resource list, every concrete resource, then every template (so a concrete path wins)."""
    routes = [ResourceRoute(None, f"{API}/resources")]
    routes += [ResourceRoute(r, resource_path(r.uri or "")) for r in registry.resources]
    for template in registry.templates:
        path = resource_path(template.uri_template or "")
        routes.append(ResourceRoute(template, path, tuple(SEGMENT.findall(path))))
    return routes


# -- the document ------------------------------------------------------------------------------------------------------
_ERRORS: dict[str, tuple[str, str]] = {  # component name -> the problem code it answers (its status is the
    # HTTP host's, `core.http.STATUS`), when it is answered
    "BadRequest": (
        "invalid_arguments",
        "The input is invalid (failed the input schema or the model, malformed JSON, unknown parameter).",
    ),
    "Unauthorized": ("unauthorized", "The bearer token is not valid, or anonymous access is turned off."),
    "Forbidden": ("forbidden", "The caller's role may not call this, or may not see that record."),
    "NotFound": ("not_found", "No such node, edge, resource or path."),
    "Conflict": ("conflict", "The record is not at the expected revision (or the write conflicts with the graph)."),
    "PreconditionFailed": ("precondition_failed", "If-Match named a revision the record is no longer at."),
    "ContentTooLarge": ("too_large", "The request body is larger than the server accepts."),
    "UnsupportedMediaType": ("unsupported_media_type", "The body's Content-Type is not one the operation takes."),
    "Gone": ("gone", "The change log no longer holds changes after that revision; `oldest` names the first it keeps."),
    "LimitExceeded": ("limit_exceeded", "Valid input, but the query went past a bound (work or time); narrow it."),
}
_FIXED_SCHEMAS: dict[str, Any] = {
    "rest.Problem": {
        "type": "object",
        "description": "An RFC 9457 problem: what went wrong, with canon's error code and JSON pointers.",
        "required": ["type", "title", "status", "code"],
        "properties": {
            "type": {"type": "string"},
            "title": {"type": "string"},
            "status": {"type": "integer"},
            "detail": {"type": "string"},
            "instance": {"type": "string"},
            "code": {"type": "string", "description": "canon's error code, e.g. not_found or no_route."},
            "errors": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["pointer", "message"],
                    "properties": {"pointer": {"type": "string"}, "message": {"type": "string"}},
                },
            },
        },
    },
    "rest.Resource": {
        "type": "object",
        "required": ["name", "title", "description", "uri", "mimeType", "subscribable"],
        "properties": {
            "name": {"type": "string"},
            "title": {"type": "string"},
            "description": {"type": "string"},
            "uri": {"type": "string"},
            "mimeType": {"type": "string"},
            "subscribable": {"type": "boolean"},
        },
    },
    "rest.ResourceList": {
        "type": "object",
        "required": ["resources", "next_cursor"],
        "properties": {
            "resources": {"type": "array", "items": {"$ref": COMPONENTS + "rest.Resource"}},
            "next_cursor": {"type": ["string", "null"], "description": "Pass as cursor to get the next page."},
        },
    },
}
_CACHE_HEADERS = {
    "ETag": {"description": "Validator for If-None-Match.", "schema": {"type": "string"}},
    "Cache-Control": {"schema": {"type": "string"}},
}
_LINK = {"Link": {"description": 'The next page, as rel="next", when there is one.', "schema": {"type": "string"}}}


def _errors(*names: str) -> dict[str, Any]:
    return {str(STATUS[_ERRORS[n][0]]): {"$ref": f"#/components/responses/{n}"} for n in names}


def _parameter(param: Param, schema: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": param.name, "in": param.location, "required": param.required}
    if isinstance(schema.get("description"), str):
        out["description"] = schema["description"]
    if param.style == "json":
        return out | {"content": {"application/json": {"schema": schema}}}
    if param.style == "array":
        out |= {"style": "form", "explode": True}
    return out | {"schema": schema}


def _operation(route: ToolRoute, components: dict[str, Any]) -> dict[str, Any]:
    tool = route.tool
    input_body, input_defs = hoist(tool.input_schema, components)
    output, output_defs = hoist(tool.output_schema, components)
    properties: Mapping[str, Any] = input_body.get("properties", {})
    op: dict[str, Any] = {
        "operationId": tool.name,
        "summary": tool.title,
        "description": tool.description,
        "tags": [tool.permission],
    }
    if route.params:
        op["parameters"] = [_parameter(p, properties[p.name]) for p in route.params]
    if route.body:
        path_names = {p.name for p in route.params}
        body: dict[str, Any] = {k: v for k, v in input_body.items() if k not in ("properties", "required")}
        body["properties"] = {k: v for k, v in properties.items() if k not in path_names}
        required = [n for n in input_body.get("required", ()) if n not in path_names]
        if required:
            body["required"] = required
        op["requestBody"] = {"required": bool(required), "content": {m: {"schema": body} for m in route.media}}
    ok: dict[str, Any] = {
        "description": "The tool's structured result.",
        "content": {"application/json": {"schema": output}},
    }
    headers = (_CACHE_HEADERS if route.conditional else {}) | (_LINK if route.pages and route.method == "GET" else {})
    if headers:
        ok["headers"] = headers
    responses: dict[str, Any] = {"200": ok}
    if route.conditional:
        responses["304"] = {"$ref": "#/components/responses/NotModified"}
    names = ["BadRequest", "Unauthorized", "Forbidden", "NotFound"]
    if not tool.annotations.get("readOnlyHint", False):
        names.append("Conflict")
    if route.takes_if_match:
        names.append("PreconditionFailed")
    if route.body:
        names.append("ContentTooLarge")
    if route.strict_media:
        names.append("UnsupportedMediaType")
    if tool.reads_the_log:  # the change log may no longer reach back that far
        names.append("Gone")
    op["responses"] = responses | _errors(*names, "LimitExceeded")
    op["x-canon-tool"] = tool.name
    op["x-canon-annotations"] = dict(tool.annotations)
    op["x-canon-permission"] = tool.permission
    op["x-canon-input"] = {k: v for k, v in input_body.items() if k != "properties"}
    defs = {k: v for k, v in (("input", input_defs), ("output", output_defs)) if v}
    if defs:
        op["x-canon-defs"] = defs
    return op


def _resource_operation(route: ResourceRoute) -> dict[str, Any]:
    resource = route.resource
    if resource is None:
        return {
            "operationId": "list_resources",
            "summary": "List resources",
            "description": "Every resource the caller may read: the fixed ones, then one per node, a page at a time "
            "(as MCP resources/list). Pass next_cursor back as cursor for the next page.",
            "tags": ["resources"],
            "parameters": [{"name": "cursor", "in": "query", "required": False, "schema": {"type": "string"}}],
            "responses": {
                "200": {
                    "description": "One page of resources.",
                    "headers": _LINK,
                    "content": {"application/json": {"schema": {"$ref": COMPONENTS + "rest.ResourceList"}}},
                },
            }
            | _errors("BadRequest", "Unauthorized", "Forbidden"),
            "x-canon-action": "resources/list",
            "x-canon-permission": "read",
        }
    mime = resource.mime_type
    json_like = mime == "application/json" or mime.endswith("+json")
    op: dict[str, Any] = {
        "operationId": f"resource.{resource.name}",
        "summary": resource.title,
        "description": resource.description,
        "tags": ["resources"],
    }
    if resource.deprecated:
        op["deprecated"] = True
    if route.variables:
        op["parameters"] = [
            {"name": v, "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}}
            for v in route.variables
        ]
    body = {
        "description": f"The resource ({mime}).",
        "content": {mime: {"schema": {"type": "object" if json_like else "string"}}},
    }
    gone = ("Gone",) if resource.uri_template == NODE_AT_TEMPLATE else ()  # read from the change log, as `at` is
    op["responses"] = {"200": body} | _errors("Unauthorized", "Forbidden", "NotFound", *gone)
    op["x-canon-resource"] = resource.name
    op["x-canon-permission"] = "read"
    return op


def openapi_document(registry: Registry) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the REST surface for `registry`; the same registry gives the same document."""
    model = registry.model
    components: dict[str, Any] = copy.deepcopy(_FIXED_SCHEMAS)
    # the exact schema of every node and edge type, by its model name: tool results describe nodes generically
    hoist({"$defs": model.document["$defs"]}, components)
    paths: dict[str, dict[str, Any]] = {}
    for tool in registry.tools:
        route = route_of(tool)
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route, components)
    for resource_route in resource_routes(registry):
        paths.setdefault(resource_route.path, {})["get"] = _resource_operation(resource_route)
    responses: dict[str, Any] = {"NotModified": {"description": "The ETag in If-None-Match is still current."}}
    for name, (_, description) in _ERRORS.items():
        problem = {"schema": {"$ref": COMPONENTS + "rest.Problem"}}
        responses[name] = {"description": description, "content": {PROBLEM_MEDIA: problem}}
    description = str(model.document.get("description", ""))
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": f"canon: {model.name}",
            "version": model.version,
            "description": f"{description}\n\nGenerated from canon's tool registry; every call goes through the same "
            "dispatcher as MCP. Send a bearer token, or none to read public nodes anonymously.".lstrip(),
            "x-canon-model": {"id": model.id, "name": model.name, "version": model.version},
        },
        # no jsonSchemaDialect: OpenAPI 3.1's default (2020-12 plus its vocabulary) already fits, and Swagger UI 5
        # shows a warning box for any other value; each tool schema names its own $schema anyway
        "security": [{"bearer": []}, {}],
        "paths": paths,
        "components": {
            "schemas": components,
            "responses": responses,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": "A canon token (canon token create)."}
            },
        },
        "tags": [
            {"name": "read", "description": "Tools that only read."},
            {"name": "write", "description": "Tools that change the graph."},
            {"name": "admin", "description": "Tools for administrators."},
            {"name": "resources", "description": "The MCP resources, read over HTTP."},
        ],
    }
