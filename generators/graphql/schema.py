"""The GraphQL surface (strawberry), generated at start-up from the registry; every call goes through the dispatcher.

Served paths: `/graphql` (POST and GET queries, GraphiQL for a browser GET, subscriptions over WebSocket with the
graphql-transport-ws protocol) and `/schema.graphql` (the printed SDL). Names are the registry's, unchanged
(`StrawberryConfig(auto_camel_case=False)`):

* **Query**: one field per read tool (`readOnlyHint`), named as the tool, arguments exactly its input
  properties (non-null exactly when required, JSON Schema defaults as SDL defaults); and one field per
  resource, `resource_<name>` with every character that is not a name character replaced by `_`
  (`resource_model`, `resource_type_Person`, the template `resource_node(type, id)`), returning `Resource`
  (`uri`, `mimeType`, `text`: what MCP's resources/read returns).
* **Mutation**: one field per write tool. **Subscription**: one field per subscribable resource
  (`resource_changes`, `resource_node(type, id)`), fed by `host.watch(sight, uri)`: the change feed's events
  (`core.seam.changes`), the same MCP subscribers hear, filtered by the one rule for change events.
* **Node types** implement `interface Node`; each has `properties` typed from its JSON Schema and a field per
  edge end: `<edge>` (edges leaving the node) and the edge's inverse name (edges arriving; `<edge>_incoming`
  when the model declares none), each a cursor-paged page of `{node, edge, properties}` read through
  `get_neighbors` (depth 1) so visibility applies (`generators.graphql.edges`).

A root field's result, fully selected and with `__typename` dropped, is the tool's structured result, except
that GraphQL answers `null` for a field the JSON leaves out. An argument given as `null` counts as not given,
unless its schema accepts null. Errors carry `extensions.code` (canon's code, upper-cased) and
`extensions.problems` (JSON pointers); the failing root field is `null`.

This module builds the schema, once per registry (by content; the last `KEPT` kept) and without a host: every app
serving that registry shares it, and its resolvers reach the dispatcher through the request's app
(`generators.graphql.runtime`; ADR 0064). `generators.graphql.types` maps JSON Schema
to strawberry types; `generators.graphql.bounds` holds the bounds (depth, aliases, tokens, cost, subscriptions)
and the GraphQL form of errors; `generators.graphql.app` is the HTTP and WebSocket app.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import threading
from collections import OrderedDict
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any, Optional

import strawberry
from graphql import ASTValidationRule
from strawberry.schema.config import StrawberryConfig
from strawberry.types.unset import UNSET

from core.dispatch.access import change_for, sight_of
from core.dispatch.registry import Registry, ResourceDefinition, ToolDefinition
from core.lang.model import DEPRECATED
from core.lang.schema_diff import Finding
from core.seam.surfaces import ASGIApp, SurfaceHost
from core.values.errors import UnavailableError
from core.values.uris import PROPOSAL_TEMPLATE
from generators.graphql.app import asgi_app, local_assets
from generators.graphql.bounds import (
    MAX_COST,
    MAX_DEPTH,
    UNKNOWN_LIST,
    CanonSchema,
    budget_rule,
    canon_error,
)
from generators.graphql.compare import compare
from generators.graphql.edges import EdgeFields
from generators.graphql.gate import request_extensions
from generators.graphql.ide import scope_shows_ide
from generators.graphql.pinning import pinned
from generators.graphql.runtime import Runtime, call_tool, runtime_of
from generators.graphql.types import (
    Fallback,
    HashableDict,
    HashableList,
    Mapped,
    TypeMapper,
    argument,
    graphql_name,
    pascal,
    python_name,
)
from generators.naming import resource_field_name

__all__ = ["MAX_COST", "MAX_DEPTH", "Built", "GraphQLSurface", "build_schema", "local_assets", "surface"]


# -- calls through the dispatcher -------------------------------------------------------------------------------------
SELECTION_ARGUMENTS = frozenset(
    {"fields", "summary"}
)  # `core.lang.projection`'s arguments, which GraphQL does not take


# -- the schema -------------------------------------------------------------------------------------------------------
class Built:
    """A schema for one registry and what building it found out (fallbacks; the cost rule from the `limit`
    maxima). It holds no host: each app serving it binds its own (`bind`)."""

    def __init__(self, schema: CanonSchema, fallbacks: tuple[Fallback, ...], budget: type[ASTValidationRule]) -> None:
        self.schema = schema
        self.fallbacks = fallbacks
        self.budget = budget

    def bind(self, host: SurfaceHost) -> Runtime:
        """What one app serving this schema resolves through (`Runtime.context` gives its requests' context)."""
        return Runtime(host, self.budget)


def _params(keyword_only: bool = True) -> list[inspect.Parameter]:
    kind = inspect.Parameter.KEYWORD_ONLY if keyword_only else inspect.Parameter.POSITIONAL_OR_KEYWORD
    return [inspect.Parameter("info", kind, annotation=strawberry.Info)]


def _sign(function: Callable[..., Any], params: list[inspect.Parameter], returns: Any) -> None:
    """Give a generated resolver the signature strawberry reads its arguments and type from."""
    function.__signature__ = inspect.Signature(params, return_annotation=returns)  # type: ignore[attr-defined]
    function.__annotations__ = {p.name: p.annotation for p in params} | {"return": returns}


def _default(value: Any, mapped: Mapped) -> Any:
    converted = mapped.hydrate(value)
    if isinstance(converted, dict):
        return HashableDict(converted)  # pyright: ignore[reportUnknownArgumentType]
    if isinstance(converted, list):
        return HashableList(converted)  # pyright: ignore[reportUnknownArgumentType]
    return converted


class Builder:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.mapper = TypeMapper(registry.model)
        self.maxima: dict[tuple[str, str], int] = {}
        self._edges: EdgeFields | None = None

    # -- tools ---------------------------------------------------------------------------------------------------------
    def tool_field(self, tool: ToolDefinition, root_name: str) -> Any:
        schema = tool.input_schema
        required = set(schema.get("required", ()))
        params, spec, taken = _params(), list[tuple[str, str, Mapped, bool]](), set[str]()
        for prop, sub in schema.get("properties", {}).items():
            if prop in SELECTION_ARGUMENTS:  # a GraphQL selection set is the projection; results stay fully typed
                continue
            if not graphql_name(prop):
                raise ValueError(f"tool {tool.name!r}: input property {prop!r} is not a GraphQL name")
            mapped = self.mapper.map(sub, schema, pascal(tool.name) + pascal(prop), f"{tool.name}({prop}:)",
                                     output=False)  # fmt: skip
            null_ok = self.mapper.nullable_in(sub, schema)
            annotation = mapped.annotation if prop in required and not null_ok else Optional[mapped.annotation]  # noqa: UP045
            # a JSON-scalar default that is an object or list has no GraphQL literal (introspection would fail on
            # it): leave it out of the SDL; the tool applies its schema default all the same
            literal = not (mapped.json_fallback and isinstance(sub.get("default"), dict | list))
            default = (
                _default(sub["default"], mapped) if "default" in sub and prop not in required and literal else UNSET
            )
            py = python_name(prop, taken)
            params.append(inspect.Parameter(py, inspect.Parameter.KEYWORD_ONLY, default=default,
                                            annotation=argument(annotation, prop, sub.get("description"))))  # fmt: skip
            spec.append((prop, py, mapped, null_ok))
            if prop == "limit" and isinstance(sub.get("maximum"), int):
                self.maxima[(root_name, tool.name)] = sub["maximum"]
        typed = tool.typed_output_schema
        result = self.mapper.map(typed, typed, pascal(tool.name) + "Result", tool.name, output=True)
        name, pins = tool.name, set(tool.pins)

        async def resolve(info: strawberry.Info, **given: Any) -> Any:
            arguments: dict[str, Any] = {}
            for prop, py, mapped, null_ok in spec:
                value = given.get(py, UNSET)
                if value is UNSET or (value is None and not null_ok):
                    continue
                arguments[prop] = mapped.dehydrate(value)  # the dispatcher fills in what is left out, as on MCP
            if pins:  # one revision for the whole query (generators.graphql.pinning); root fields that differ: error
                pin = pinned(info, name)
                if not pins & set(arguments):
                    arguments.update({k: v for k, v in pin.items() if k in pins})
            return result.hydrate(await call_tool(info, name, arguments))

        _sign(resolve, params, Optional[result.annotation])  # noqa: UP045
        return strawberry.field(resolver=resolve, name=tool.name, description=tool.description)

    # -- edges ---------------------------------------------------------------------------------------------------------
    def edge_fields(self, node_type: str, classes: dict[str, Any]) -> dict[str, Any]:
        """The edge fields of one node type (see `generators.graphql.edges`), each bounded as get_neighbors."""
        neighbours = next((t for t in self.registry.tools if t.name == "get_neighbors"), None)
        if neighbours is None:
            return {}
        if self._edges is None:
            schemas = {"inputSchema": neighbours.input_schema, "outputSchema": neighbours.typed_output_schema}
            self._edges = EdgeFields(self.registry.model, self.mapper, call_tool, schemas)
        maximum: int = neighbours.input_schema.get("properties", {}).get("limit", {}).get("maximum", UNKNOWN_LIST)
        fields = self._edges.fields(node_type, classes)
        self.maxima.update({(node_type, name): maximum for name in fields})
        return fields

    # -- resources -----------------------------------------------------------------------------------------------------
    def resource_types(self) -> tuple[Any, Any]:
        resource = strawberry.type(type("Resource", (), {
            "__annotations__": {"uri": str, "mime_type": str, "text": str},
            "mime_type": strawberry.field(name="mimeType"),
        }), description="A resource's content, as MCP's resources/read returns it.")  # fmt: skip
        changes = next((t for t in self.registry.tools if t.name == "get_changes"), None)
        typed = changes.typed_output_schema if changes else {}
        schema = typed.get("properties", {}).get("items", {}).get("items")
        change = (self.mapper.map(schema, typed, "Change", "Change", output=True)
                  if isinstance(schema, Mapping) else Mapped(strawberry.scalars.JSON))  # fmt: skip
        update = strawberry.type(type("ResourceUpdate", (), {
            "__annotations__": {"uri": str, "revision": int, "change": change.annotation},
        }), description="A change to a subscribed resource: its URI, the change's revision and the change entry, "
                        "redacted for you as get_changes would show it.")  # fmt: skip
        self._change = change
        return resource, update

    def resource_field(self, entry: ResourceDefinition, resource: Any, taken: set[str]) -> tuple[str, Any, Any]:
        """A Query field for a resource (template variables as String! arguments); its name and URI builder."""
        name = resource_field_name(entry.name)
        while name in taken:
            name += "_"
        taken.add(name)
        variables = re.findall(r"\{(\w+)\}", entry.uri_template or "")
        params, py_names = _params(), list[str]()
        local: set[str] = set()
        for variable in variables:
            py = python_name(variable, local)
            py_names.append(py)
            described = argument(str, variable, f"{{{variable}}} in the URI.")
            params.append(inspect.Parameter(py, inspect.Parameter.KEYWORD_ONLY, annotation=described))

        def uri_of(given: Mapping[str, Any]) -> str:
            uri = entry.uri or entry.uri_template or ""
            for variable, py in zip(variables, py_names, strict=True):
                uri = uri.replace("{" + variable + "}", str(given[py]))
            return uri

        async def resolve(info: strawberry.Info, **given: Any) -> Any:
            runtime = runtime_of(info)
            content = await runtime.read(runtime.principal(info), uri_of(given))
            return resource(uri=content.uri, mime_type=content.mime_type, text=content.text)

        _sign(resolve, params, Optional[resource])  # noqa: UP045
        description = f"{entry.title}: {entry.description} ({entry.uri or entry.uri_template})"
        reason = DEPRECATED if entry.deprecated else None
        field = strawberry.field(resolver=resolve, name=name, description=description, deprecation_reason=reason)
        return name, field, (uri_of, params)

    def subscription_field(self, name: str, entry: ResourceDefinition, uri_of: Callable[[Mapping[str, Any]], str],
                           params: list[inspect.Parameter], update: Any) -> Any:  # fmt: skip
        change_type = self._change

        async def subscribe(info: strawberry.Info, **given: Any) -> AsyncGenerator[Any]:
            uri = uri_of(given)
            runtime = runtime_of(info)
            principal = runtime.principal(info)
            with runtime.subscription():
                sight = sight_of(principal)
                async with runtime.host.watch(sight, uri) as changes:  # watching before authorising: nothing is missed
                    await runtime.read(principal, uri, "resources/subscribe")  # must exist, must be readable
                    async for change in changes:
                        entry_json = change_for(sight, change)
                        yield update(uri=uri, revision=change.revision, change=change_type.hydrate(entry_json))

        _sign(subscribe, params, AsyncGenerator[update])
        description = f"Every change to {entry.uri or entry.uri_template}, as it is committed. {entry.description}"
        return strawberry.subscription(resolver=subscribe, name=name, description=description)

    def proposal_subscription(self, name: str, entry: ResourceDefinition, uri_of: Callable[[Mapping[str, Any]], str],
                              params: list[inspect.Parameter], resource: Any) -> Any:  # fmt: skip
        """A proposal's resource each time its state changes (revised, commented on, withdrawn, rejected, merged),
        read anew as the subscriber may read it: a proposal's state is no change-log entry (`ChangeFeed.hear`)."""

        async def subscribe(info: strawberry.Info, **given: Any) -> AsyncGenerator[Any]:
            uri = uri_of(given)
            runtime = runtime_of(info)
            principal = runtime.principal(info)
            feed = runtime.host.feed
            if feed is None:  # a host that only renders artifacts
                raise canon_error(UnavailableError("This server delivers no change events."))
            with runtime.subscription():
                async with feed.hear(uri) as heard:  # hearing before authorising: nothing is missed
                    await runtime.read(principal, uri, "resources/subscribe")  # must exist, must be readable
                    async for _ in heard:
                        content = await runtime.read(principal, uri)
                        yield resource(uri=content.uri, mime_type=content.mime_type, text=content.text)

        _sign(subscribe, params, AsyncGenerator[resource])
        description = (f"{entry.uri_template} each time the proposal changes (revised, commented on, withdrawn, "
                       "rejected, merged), as you may read it then.")  # fmt: skip
        return strawberry.subscription(resolver=subscribe, name=name, description=description)

    # -- all of it -----------------------------------------------------------------------------------------------------
    def build(self) -> Built:
        self.mapper.node_types(self.edge_fields)
        resource, update = self.resource_types()
        query: dict[str, Any] = {}
        mutation: dict[str, Any] = {}
        for tool in self.registry.tools:
            read_only = bool(tool.annotations.get("readOnlyHint", False))
            root = query if read_only else mutation
            root[tool.name] = self.tool_field(tool, "Query" if read_only else "Mutation")
        subscription: dict[str, Any] = {}
        taken = set(query)
        for entry in (*self.registry.resources, *self.registry.templates):
            name, query[name], (uri_of, params) = self.resource_field(entry, resource, taken)
            if entry.uri_template == PROPOSAL_TEMPLATE:  # a proposal's state changes are no change-log entries
                subscription[name] = self.proposal_subscription(name, entry, uri_of, params, resource)
            elif entry.subscribable:
                subscription[name] = self.subscription_field(name, entry, uri_of, params, update)
        named = (("Query", query), ("Mutation", mutation), ("Subscription", subscription))
        roots = {n: strawberry.type(type(n, (), fields)) if fields else None for n, fields in named}
        assert roots["Query"] is not None  # every registry has read tools and resources
        schema = CanonSchema(
            query=roots["Query"], mutation=roots["Mutation"], subscription=roots["Subscription"],
            types=self.mapper.extra_types, config=StrawberryConfig(auto_camel_case=False),
            extensions=request_extensions(),
        )  # fmt: skip
        return Built(schema, tuple(self.mapper.fallbacks), budget_rule(self.maxima))


KEPT = 8  # schemas kept, for the registries built last (a model change builds one; tests serve a few models)
_kept: OrderedDict[str, Built] = OrderedDict()
_kept_lock = threading.Lock()


def _fingerprint(registry: Registry) -> str:
    """Everything a schema is built from: the model's document (in its own order, which the SDL follows) and every
    tool and resource definition, with their descriptions (which may name the served data)."""
    described = (json.dumps(registry.model.document, ensure_ascii=False, default=repr), repr(registry.tools),
                 repr(registry.resources), repr(registry.templates))  # fmt: skip
    return hashlib.sha256("\0".join(described).encode()).hexdigest()


def build_schema(registry: Registry) -> Built:
    """The strawberry schema for `registry`, built once for each registry of the last `KEPT` (by content: the same
    model and tools, the same schema) and shared by every app serving one; resolvers reach the dispatcher through
    the request's app (`Built.bind`)."""
    key = _fingerprint(registry)
    with _kept_lock:
        found = _kept.get(key)
        if found is None:
            found = _kept[key] = Builder(registry).build()
            while len(_kept) > KEPT:
                _kept.popitem(last=False)
        _kept.move_to_end(key)
        return found


class GraphQLSurface:
    """The `graphql` surface: `/graphql` and `/schema.graphql`."""

    name: str = "graphql"
    cors: bool = True  # pages on allowed origins may query (core.http.cors); WebSockets follow the Origin rule
    paths: tuple[str, ...] = ("/graphql", "/schema.graphql")

    def page_shell(self, scope: Mapping[str, Any]) -> bool:
        """GraphiQL's page holds no data: served without a token even when anonymous access is off."""
        return scope_shows_ide(scope)

    def app(self, host: SurfaceHost, registry: Registry) -> ASGIApp:
        built = build_schema(registry)
        return asgi_app(built.schema, built.bind(host), host.surface_name or self.name)

    def artifacts(self, host: SurfaceHost) -> Mapping[str, str]:
        return {"schema.graphql": build_schema(host.registry).schema.as_str() + "\n"}

    def compare(self, old: Mapping[str, str], new: Mapping[str, str]) -> list[Finding]:
        return compare(old, new)


surface = GraphQLSurface()
