"""The REST surface: a FastAPI app whose routes are generated from the registry; every call goes through the one
dispatcher, as the caller the bearer token names.

How a tool becomes an operation (`generators.rest.openapi.route_of`, which also writes the OpenAPI document):

* method and path from the tool's REST hint, under `/api` (`GET /api/nodes/{id}` is get_node);
* `{name}` path segments, then (GET, DELETE) query parameters or (PUT, POST, PATCH) the JSON body, make up the
  arguments; a route whose hint lists its body's media types refuses a body of any other with 415 (and, for
  PATCH, says which in `Accept-Patch`). Query strings are text: each value is converted by its property's
  declared type (arrays are repeated parameters, objects one JSON-encoded parameter); unknown parameters go
  through, so the input schema's `additionalProperties: false` refuses them. The dispatcher validates
  everything; FastAPI derives and validates nothing (endpoints take only the request).
* 200 carries the tool's structured result (MCP's structuredContent); GET answers carry an ETag
  (`"<id>@<revision>"` for one node, else the store revision plus a digest of the body) and answer a matching
  If-None-Match with 304 (after the call, so it is authorised and audited); `Link: rel="next"` follows
  next_cursor. Writes accept `If-Match: "<revision>"` as expected_revision.
* Resources: `GET /api/resources/<the URI's path>` (`core.values.uris.path_of`) answers with the resource's own media
  type; `GET /api/resources` pages the list as MCP resources/list does.

Errors are RFC 9457 problem+json from the HTTP host's one table (`core.http.STATUS`):
invalid_arguments / invalid 400, forbidden 403, not_found 404, conflict 409 (412 when the caller sent If-Match),
limit_exceeded 422, a body of a media type the route does not take 415 (unsupported_media_type), an unknown path
404 (no_route), a wrong method 405 (method_not_allowed). 422 for limit_exceeded because the input was valid and
understood but the server declines the work: 400 would call the request malformed, 429 would invite a retry of
the same request, and a 5xx would blame the server. The host refuses a bad token (401), a foreign Host or Origin
(421, 403) and a body over `max_body_bytes` (413) before this app sees the request.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

import anyio.to_thread
from fastapi import FastAPI
from fastapi.telemetry import TelemetryConfig
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, Response

from core.dispatch.dispatcher import CallContext, error_json
from core.dispatch.registry import Registry
from core.dispatch.resources import list_resources, read_resource
from core.lang.schema_diff import Finding
from core.seam.surfaces import ASGIApp, SurfaceHost
from core.values.documents import parse_json
from core.values.errors import CanonError
from core.web import PROBLEM_MEDIA, STATUS, code_of_status, none_match, problem_body
from generators.rest.compare import compare
from generators.rest.docs import DOCS_PATH, docs_page, is_docs_page
from generators.rest.openapi import (
    SEGMENT,
    Param,
    ResourceRoute,
    ToolRoute,
    openapi_document,
    resource_routes,
    route_of,
)

__all__ = ["RestSurface", "build_app", "coerce", "document_text", "surface"]

log = logging.getLogger("canon.rest")

READ_HEADERS = {"Cache-Control": "private, no-cache", "Vary": "Authorization"}
NO_TELEMETRY: TelemetryConfig = {"tracing": False, "metrics": False, "logs": False, "operation_spans": False}
INTEGER = re.compile(r"-?[0-9]+")
NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
IF_MATCH = re.compile(r'"(?:[\x21\x23-\x7e]*@)?([0-9]{1,18})"')
ETAG_SAFE = re.compile(r"[\x21\x23-\x7e]+")

Endpoint = Callable[[Request], Awaitable[Response]]


class Refusal(Exception):
    """A request this surface answers with a problem itself, before (or instead of) dispatch."""

    def __init__(self, status: int, code: str, detail: str, errors: Sequence[Mapping[str, str]] = (),
                 headers: Mapping[str, str] | None = None, **extra: Any) -> None:  # fmt: skip
        super().__init__(detail)
        self.status, self.code, self.detail, self.errors, self.extra = status, code, detail, errors, extra
        self.headers = headers

    def response(self, request: Request) -> Response:
        return problem(request, self.status, self.code, self.detail, self.errors, self.extra, self.headers)


def problem(request: Request, status: int, code: str, detail: str, errors: Sequence[Mapping[str, str]] = (),
            extra: Mapping[str, Any] | None = None, headers: Mapping[str, str] | None = None) -> Response:  # fmt: skip
    """An RFC 9457 answer, as the HTTP host writes every problem (`core.http.problem_body`)."""
    content = problem_body(status, code, detail, request.url.path, errors, extra)
    return Response(content, status_code=status, media_type=PROBLEM_MEDIA, headers=dict(headers or {}))


def error_response(request: Request, error: CanonError, *, if_match: bool = False) -> Response:
    wire = error_json(error)
    status = STATUS.get(error.code, 500)
    if error.code == "conflict" and if_match:
        status = STATUS["precondition_failed"]
    errors = [{"pointer": str(p["pointer"]), "message": str(p["message"])} for p in wire.get("problems", ())]
    extra = {k: v for k, v in wire.items() if k not in ("code", "message", "problems")}
    return problem(request, status, error.code, str(error), errors, extra)


def _pointer(name: str) -> str:
    return "/" + name.replace("~", "~0").replace("/", "~1")


def _refuse(name: str, detail: str, message: str) -> Refusal:
    return Refusal(400, "invalid_arguments", detail, [{"pointer": _pointer(name), "message": message}])


# -- request -> arguments ---------------------------------------------------------------------------------------------
def coerce(schema: Mapping[str, Any], text: str) -> Any:
    """A query or path value as its declared JSON type; text that is no such value stays text (the schema says no)."""
    kinds = schema.get("type")
    if kinds is None:
        values = schema.get("enum", [schema["const"]] if "const" in schema else [])
        if text in values:
            return text
        return next((v for v in values if not isinstance(v, str) and json.dumps(v) == text), text)
    for kind in ("integer", "number", "boolean", "null") if isinstance(kinds, list) else (kinds,):
        if kind == "integer" and INTEGER.fullmatch(text):
            return int(text)
        if kind == "number" and NUMBER.fullmatch(text):
            number = float(text)
            if math.isfinite(number):
                return int(text) if INTEGER.fullmatch(text) else number
        if (kind == "boolean" and text in ("true", "false")) or (kind == "null" and text == "null"):
            return json.loads(text)
    return text


def _from_query(param: Param, values: list[str]) -> Any:
    if param.style == "array":
        items: Mapping[str, Any] = param.schema.get("items", {})
        return [coerce(items, v) for v in values]
    converted: list[Any] = []
    for value in values:
        if param.style != "json":
            converted.append(coerce(param.schema, value))
            continue
        try:
            converted.append(parse_json(value))
        except (ValueError, RecursionError) as exc:
            raise _refuse(
                param.name, f"Query parameter {param.name!r} is not valid JSON.", f"not JSON: {exc}"
            ) from None
    return converted[0] if len(converted) == 1 else converted


async def _body(request: Request, media: str | None) -> dict[str, Any]:
    """The JSON object in the body ({} when empty and no Content-Type declares one); refused when not UTF-8 JSON
    (an empty body under a JSON media type included: it is not JSON) or not an object. (The host refused a body
    over `max_body_bytes` before this app saw the request.)"""
    try:
        data = await request.body()
    except ClientDisconnect:
        raise Refusal(400, "invalid_arguments", "The client went away before the body was complete.") from None
    if not data.strip() and media is None:
        return {}
    try:
        value = parse_json(data)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError too
        raise Refusal(400, "invalid_arguments", f"The request body is not UTF-8 JSON: {exc}",
                      [{"pointer": "", "message": "not JSON"}]) from None  # fmt: skip
    if not isinstance(value, dict):
        raise Refusal(400, "invalid_arguments", "The request body must be a JSON object.",
                      [{"pointer": "", "message": "is not of type 'object'"}])  # fmt: skip
    return value  # pyright: ignore[reportUnknownVariableType]


def _media_type(request: Request) -> str | None:
    """The body's media type, without parameters, lower-cased; None when the request names none."""
    declared = request.headers.get("content-type")
    return declared.split(";", 1)[0].strip().lower() if declared is not None else None


def _unsupported(route: ToolRoute, media: str | None) -> Refusal:
    takes = ", ".join(route.media)
    what = f"Content-Type {media!r}" if media is not None else "a body without a Content-Type"
    headers = {"Accept-Patch": takes} if route.method == "PATCH" else None
    return Refusal(415, "unsupported_media_type", f"{route.tool.name} takes {takes}, not {what}.",
                   [{"pointer": "", "message": f"Content-Type must be one of {takes}"}], headers)  # fmt: skip


async def arguments_of(request: Request, route: ToolRoute) -> dict[str, Any]:
    """The tool arguments a request carries: path parameters, then query parameters or the JSON body."""
    by_name = {p.name: p for p in route.params}
    arguments: dict[str, Any] = {p.name: coerce(p.schema, request.path_params[p.name])
                                 for p in route.params if p.location == "path"}  # fmt: skip
    grouped: dict[str, list[str]] = {}
    for name, value in request.query_params.multi_items():
        grouped.setdefault(name, []).append(value)
    for name, values in grouped.items():
        param = by_name.get(name)
        if route.body or (param is not None and param.location == "path"):
            where = "the path" if param is not None else "the JSON body"
            raise _refuse(name, f"{name!r} is not a query parameter of {route.tool.name}; send it in {where}.",
                          "not a query parameter")  # fmt: skip
        arguments[name] = _from_query(param, values) if param else values[0] if len(values) == 1 else values
    if route.body:
        media = _media_type(request)
        if route.strict_media and media is not None and media not in route.media:
            raise _unsupported(route, media)
        body = await _body(request, media)
        if route.strict_media and media is None and body:
            raise _unsupported(route, media)
        for name in arguments:
            if name in body and body[name] != arguments[name]:
                raise _refuse(name, f"{name!r} differs between the path and the body.", "differs from the path")
        arguments = body | arguments
    return arguments


def _if_match(request: Request, route: ToolRoute, arguments: dict[str, Any]) -> bool:
    """Apply `If-Match: "<revision>"` (or an ETag `"<id>@<revision>"`) as expected_revision; True if present."""
    header = request.headers.get("if-match")
    if header is None or route.tool.annotations.get("readOnlyHint", False):  # a read has nothing to precondition
        return False
    found = IF_MATCH.fullmatch(header.strip())
    if not route.takes_if_match or found is None:
        raise Refusal(400, "invalid_arguments", f"{route.tool.name} takes If-Match only as one strong ETag, "
                      '"<revision>" or "<id>@<revision>".' if route.takes_if_match else
                      f"{route.tool.name} does not take If-Match.")  # fmt: skip
    revision = int(found[1])
    if arguments.setdefault("expected_revision", revision) != revision:
        raise _refuse("expected_revision", "If-Match and expected_revision disagree.", "differs from If-Match")
    return True


# -- answers -----------------------------------------------------------------------------------------------------------
def etag_of(value: Mapping[str, Any], body: str) -> str | None:
    """One node's `"<id>@<revision>"`, else `"r<store revision>-<digest>"` (the digest keeps it honest for
    answers that change without a write, like the audit log)."""
    node = value.get("node")
    if isinstance(node, dict) and "revision" in node and ETAG_SAFE.fullmatch(str(node.get("id", ""))):  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        return f'"{node["id"]}@{node["revision"]}"'
    if "revision" not in value:
        return None
    return f'"r{value["revision"]}-{hashlib.sha256(body.encode()).hexdigest()[:16]}"'


def _next_link(request: Request, cursor: str, query: Sequence[tuple[str, str]] = ()) -> str:
    """The next page's link: the path, the query parameters `query` names, then the cursor. Never the request's
    own query string, which can be as long as the host lets a URL be (a `Link` line over 64 KiB is refused by
    clients and proxies): `query` is built from the arguments the call validated, bounded by the tool's schema."""
    return f'<{request.url.path}?{urlencode([*query, ("cursor", cursor)])}>; rel="next"'


def _query_of(route: ToolRoute, arguments: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The query parameters that send `arguments` again, as `arguments_of` reads them (the cursor left out)."""
    query: list[tuple[str, str]] = []
    for param in route.params:
        if param.location != "query" or param.name == "cursor" or param.name not in arguments:
            continue
        value = arguments[param.name]
        values: list[Any] = list(value) if param.style == "array" else [value]  # pyright: ignore[reportUnknownArgumentType]
        for one in values:
            text = json.dumps(one, ensure_ascii=False) if param.style == "json" or not isinstance(one, str) else one
            query.append((param.name, text))
    return query


def _success(request: Request, route: ToolRoute, arguments: Mapping[str, Any], value: dict[str, Any]) -> Response:
    body = json.dumps(value, ensure_ascii=False)
    headers = dict(READ_HEADERS) if route.tool.annotations.get("readOnlyHint", False) else {}
    if route.conditional:
        tag = etag_of(value, body)
        if tag is not None:
            headers["ETag"] = tag
            if none_match(request.headers.get("if-none-match"), tag):
                return Response(status_code=304, headers=headers)
    cursor = value.get("next_cursor")
    if route.method == "GET" and isinstance(cursor, str):
        headers["Link"] = _next_link(request, cursor, _query_of(route, arguments))
    return Response(body, media_type="application/json", headers=headers)


# -- endpoints ---------------------------------------------------------------------------------------------------------
def _guarded(endpoint: Endpoint) -> Endpoint:
    """The surface's outer boundary: a refusal is its problem, anything unexpected a logged 500 (never a trace)."""

    @functools.wraps(endpoint)
    async def guarded(request: Request) -> Response:
        try:
            return await endpoint(request)
        except Refusal as refusal:
            return refusal.response(request)
        except Exception:
            log.exception("REST %s %s failed", request.method, request.url.path)
            return problem(request, 500, "internal", "The server failed to answer; the error is in its log.")

    return guarded


def _tool_endpoint(host: SurfaceHost, route: ToolRoute) -> Endpoint:
    async def endpoint(request: Request) -> Response:
        arguments = await arguments_of(request, route)
        if_match = _if_match(request, route, arguments)
        call = functools.partial(host.call_tool, host.principal_of(request), route.tool.name, arguments,
                                 received=time.monotonic())  # fmt: skip
        try:
            result = await anyio.to_thread.run_sync(call)
        except CanonError as exc:  # the tool left the registry since this app was built
            return error_response(request, exc)
        if result.error is not None:
            return error_response(request, result.error, if_match=if_match)
        assert result.value is not None
        return _success(request, route, arguments, result.value)

    return endpoint


def _resource_endpoint(host: SurfaceHost, route: ResourceRoute) -> Endpoint:
    """The resource list (`route.resource` None) or one resource, read on the dispatcher's path."""

    async def run(request: Request, action: str, target: str, work: Callable[[CallContext], Any]) -> Any:
        principal = host.principal_of(request)
        return await anyio.to_thread.run_sync(lambda: host.run(principal, action, target, work))

    async def listing(request: Request) -> Response:
        cursor = request.query_params.get("cursor") or None
        entries, next_cursor = await run(request, "resources/list", cursor or "", lambda c: list_resources(c, cursor))
        body = {"resources": [e.to_json() for e in entries], "next_cursor": next_cursor}
        headers = READ_HEADERS | ({"Link": _next_link(request, next_cursor)} if next_cursor else {})
        return Response(json.dumps(body, ensure_ascii=False), media_type="application/json", headers=headers)

    async def reading(request: Request) -> Response:
        assert route.resource is not None
        template = route.resource.uri or route.resource.uri_template or ""
        uri = SEGMENT.sub(lambda m: str(request.path_params[m[1]]), template)
        content = await run(request, "resources/read", uri, lambda ctx: read_resource(ctx, uri))
        return Response(content.text, media_type=content.mime_type, headers=READ_HEADERS)

    async def endpoint(request: Request) -> Response:
        allowed = ("cursor",) if route.resource is None else ()
        for key in request.query_params:
            if key not in allowed:
                raise _refuse(key, f"{key!r} is not a query parameter of this resource.", "not a query parameter")
        try:
            return await (listing if route.resource is None else reading)(request)
        except CanonError as exc:
            return error_response(request, exc)

    return endpoint


def _by_method(endpoints: Mapping[str, Endpoint]) -> Endpoint:
    async def endpoint(request: Request) -> Response:
        return await endpoints[request.method](request)

    return endpoint


async def _http_error(request: Request, exc: Exception) -> Response:
    """Unknown paths (404, no_route) and methods (405, method_not_allowed) as problems, like every other answer."""
    if not isinstance(exc, HTTPException):
        return problem(request, 500, "internal", "The server failed to answer; the error is in its log.")
    status, headers = exc.status_code, exc.headers
    detail = f"No {request.method} {request.url.path} here." if status in (404, 405) else exc.detail
    return problem(request, status, code_of_status(status), detail, headers=headers)


def document_text(registry: Registry, base_url: str = "") -> str:
    """The OpenAPI document exactly as `/openapi.json` serves it and `canon generate` writes it; with a `base_url`
    (`[server] public_url` or `root_path`), its `servers` names it."""
    document = openapi_document(registry)
    if base_url:
        document = {"openapi": document["openapi"], "servers": [{"url": base_url}], **document}
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def build_app(host: SurfaceHost, registry: Registry) -> FastAPI:
    """The REST app for `registry`: one route per tool and resource, plus /openapi.json and /docs."""
    # FastAPI's own telemetry off: its spans and logs carry request paths, queries and validation errors (node ids,
    # argument values); canon's spans are core.ops.tracing's (docs/operations/observability.md)
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None, redirect_slashes=False, telemetry=NO_TELEMETRY)
    app.add_exception_handler(HTTPException, _http_error)
    by_path: dict[str, dict[str, Endpoint]] = {}  # one route per path, so a 405 names every method it takes
    for tool in registry.tools:
        route = route_of(tool)
        by_path.setdefault(route.path, {})[route.method] = _tool_endpoint(host, route)
    for path, endpoints in by_path.items():
        app.add_api_route(path, _guarded(_by_method(endpoints)), methods=list(endpoints), include_in_schema=False,
                          response_model=None)  # fmt: skip
    for resource_route in resource_routes(registry):
        app.add_api_route(resource_route.path, _guarded(_resource_endpoint(host, resource_route)), methods=["GET"],
                          include_in_schema=False, response_model=None)  # fmt: skip
    base = host.settings.base_url  # where this server is reached: its OpenAPI `servers`, the docs page's links
    text = document_text(registry, base)

    async def openapi(request: Request) -> Response:
        return Response(text, media_type="application/json")

    async def docs(request: Request) -> HTMLResponse:
        title = f"canon: {registry.model.name} REST API"
        return HTMLResponse(docs_page(title, base, token_form=not host.settings.anonymous))

    app.add_api_route("/openapi.json", openapi, methods=["GET"], include_in_schema=False, response_model=None)
    app.add_api_route(DOCS_PATH, docs, methods=["GET"], include_in_schema=False, response_model=None)
    return app


class RestSurface:
    """The REST surface as core's `Surface` protocol sees it."""

    name: str = "rest"
    cors: bool = True  # pages on allowed origins may call the API (core.http.cors)
    paths: tuple[str, ...] = ("/api/", "/openapi.json", DOCS_PATH)

    def page_shell(self, scope: Mapping[str, Any]) -> bool:
        """`/docs` holds no data: served without a token even when anonymous access is off (`core.seam.surfaces`)."""
        return is_docs_page(scope)

    def app(self, host: SurfaceHost, registry: Registry) -> ASGIApp:
        return build_app(host, registry)

    def artifacts(self, host: SurfaceHost) -> Mapping[str, str]:
        return {"openapi.json": document_text(host.registry, host.settings.base_url)}

    def compare(self, old: Mapping[str, str], new: Mapping[str, str]) -> list[Finding]:
        return compare(old, new)


surface = RestSurface()
