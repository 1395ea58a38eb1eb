"""The registry on the official SDK's low-level `Server`, for both protocol revisions.

Served: 2025-11-25 (initialize, sessions, resources/subscribe, logging/setLevel with `notifications/message`, see
`core.mcp.client_log`) and 2026-07-28 (server/discover, per-request `_meta`, subscriptions/listen, resultType,
caching hints), decided per request by the SDK, and no other revision (`core.mcp.revisions`). Each handler maps
one MCP method onto the dispatcher and its answer back; errors map in one table:

| canon                      | MCP                                                         |
|----------------------------|-------------------------------------------------------------|
| UnknownToolError           | JSON-RPC -32602, message naming the closest tools            |
| any other error of a tool  | CallToolResult isError=true, text = {"error": {...}}         |
| resource NotFoundError     | -32002 on 2025-11-25, -32602 on 2026-07-28                  |
| other resource/completion  | -32602 with the error's message (ForbiddenError included,    |
|                            | with data.code "forbidden")                                  |

Prompts (`core.dispatch.prompts`): prompts/list, prompts/get (rendered through the dispatcher, refusals mapped as for
resources) and completion/complete of their arguments; the list never changes, so its capability says so.

Every handler runs as the principal `principal_of` gives for the request (the transport decides: the local
principal on stdio, the bearer token's principal or anonymous on HTTP), so tools/list shows only the tools
that principal may call and every read goes through its sight.
"""

from __future__ import annotations

import base64
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

import anyio
import mcp_types as types
import pydantic_core
from mcp.server.caching import CacheHint
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.subscriptions import ListenHandler
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from core.dispatch.confirm import Asking, elicits_forms
from core.dispatch.dispatcher import ToolResult
from core.dispatch.prompts import PROMPTS, PromptDefinition, prompt, render
from core.dispatch.prompts import complete as complete_prompt
from core.dispatch.registry import ToolDefinition
from core.dispatch.resources import complete, read_resource
from core.dispatch.resources import list_resources as resource_page
from core.mcp.client_log import ClientLog
from core.mcp.events import EventFanout
from core.mcp.handshake import DISCOVER_CACHE_SCOPE, DISCOVER_TTL_MS, SERVER_INFO
from core.mcp.options import DEFAULT_OPTIONS, ServeOptions
from core.mcp.revisions import SUPPORTED_VERSIONS, Negotiate
from core.seam.snapshot import PerSnapshot, Snapshot
from core.values.errors import CanonError, NotFoundError, UnknownToolError
from core.values.principal import Principal

__all__ = ["DEFAULT_OPTIONS", "SUPPORTED_VERSIONS", "ServeOptions", "build_server"]

log = logging.getLogger("canon.mcp")
RESOURCE_NOT_FOUND_LEGACY = -32002
PrincipalOf = Callable[[ServerRequestContext[Any]], Principal]
Current = Callable[[], Snapshot]  # the current model's snapshot


def icon_of(glyph: str | None) -> list[types.Icon] | None:
    """An MCP icon for a model icon: URIs pass through, an emoji becomes a small SVG."""
    if not glyph:
        return None
    if glyph.startswith(("https:", "data:")):
        return [types.Icon(src=glyph)]
    svg = (
        '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64">'
        f'<text x="4" y="52" font-size="52">{glyph}</text></svg>'
    )
    src = "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()
    return [types.Icon(src=src, mime_type="image/svg+xml", sizes=["64x64"])]


def _tool(definition: ToolDefinition, prefix: str, lean: bool = False) -> types.Tool:
    """The MCP form of a tool. Its schemas name no `$schema`: JSON Schema 2020-12 is the dialect MCP assumes when a
    schema names none, in both revisions canon serves (2025-11-25, SEP-1613, and 2026-07-28). `lean` (the agent
    profile) also leaves out what only a program or a UI reads: the output schema (its results are then the JSON
    text alone, see `_call_result`), the hints that say what a client assumes anyway (`_told_hints`), the input
    schemas' size bounds (`_lean_schema`) and the tool's icon (the server's, in `serverInfo`, stands for its tools:
    ADR 0042). Neither profile repeats the title in the annotations (`title` is the one a client shows first)."""
    annotations = _told_hints(definition.annotations) if lean else definition.annotations
    return types.Tool(
        name=prefix + definition.name,
        title=definition.title,
        description=definition.description,
        input_schema=_lean_schema(_common_inputs(definition)) if lean else _wire_schema(definition.input_schema),
        output_schema=None if lean else _wire_schema(definition.output_schema),
        annotations=types.ToolAnnotations.model_validate(annotations),
        icons=None if lean else icon_of(definition.icon),
    )


def _wire_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in schema.items() if key != "$schema"}


# What the agent profile leaves out of an input schema: the bounds that guard the server (a cursor's 1,024
# characters, an array's 64 items, unique items, a map's key pattern, no arguments but the listed ones), which a
# caller never meets in use and the server still checks, with an error that names the bound or the argument.
# Leaving a constraint out only loosens what a client checks before it calls; `minimum`/`maximum` stay (a page's
# limit is worth knowing), and so do `enum`, `required` and each property's `pattern` (they say what a value means).
_GUARD_KEYWORDS = frozenset(
    "$schema minLength maxLength minItems maxItems uniqueItems minProperties maxProperties propertyNames".split()
)
_SCHEMA_MAPS = ("properties", "$defs", "patternProperties", "dependentSchemas")  # name -> subschema
_SCHEMA_LISTS = ("anyOf", "allOf", "oneOf", "prefixItems")  # [subschema]


# A `pattern` that only restates the grammar of a model's property names (a `fields` entry's) guards too: every name
# a caller takes from the model matches it, as with a map's key pattern.
_PROPERTY_NAME = "^[a-z][a-z0-9_]{0,63}$"


def _common_inputs(definition: ToolDefinition) -> Mapping[str, Any]:
    """The input schema without the tool's `advanced_arguments` (the agent profile's: still accepted, not listed)."""
    schema = definition.input_schema
    if not definition.advanced_arguments:
        return schema
    kept = {k: v for k, v in schema.get("properties", {}).items() if k not in definition.advanced_arguments}
    return {**schema, "properties": kept}


def _lean_schema(schema: Any) -> Any:
    """`schema` without the guard bounds `_GUARD_KEYWORDS` names, at every subschema (never inside a value such as
    an `enum`, a `default` or a `const`)."""
    if not isinstance(schema, Mapping):
        return schema  # a boolean schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _GUARD_KEYWORDS or (key == "additionalProperties" and value is False):
            continue
        if key == "pattern" and value == _PROPERTY_NAME:
            continue
        if key in _SCHEMA_MAPS and isinstance(value, Mapping):
            out[key] = {name: _lean_schema(sub) for name, sub in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_lean_schema(sub) for sub in value]
        elif key in ("items", "additionalProperties", "unevaluatedProperties", "unevaluatedItems", "contains", "not",
                     "if", "then", "else", "propertyNames"):  # fmt: skip
            out[key] = _lean_schema(value)
        else:
            out[key] = value
    return out


# what a client assumes of a hint left out (the revisions' ToolAnnotations); destructive and idempotent mean
# nothing for a read-only tool
_ASSUMED_HINTS = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": True}
_WRITE_HINTS = ("destructiveHint", "idempotentHint")


def _told_hints(annotations: Mapping[str, bool]) -> dict[str, bool]:
    """The hints a client would not assume by itself: the same meaning as `annotations`, fewer bytes."""
    read_only = annotations.get("readOnlyHint", False)
    return {key: value for key, value in annotations.items()
            if value != _ASSUMED_HINTS.get(key) and not (read_only and key in _WRITE_HINTS)}  # fmt: skip


class CanonServer(Server[Any]):
    """The SDK server, advertising list_changed on every transport.

    Legacy `initialize` over HTTP ignores the caller's NotificationOptions (SDK 2.3), so the defaults are
    fixed here rather than at each `create_initialization_options` call site. `calls` is how its `tools/call`
    handler calls a tool (set by `build_server`).
    """

    calls: ToolCalls

    def create_initialization_options(
        self, notification_options: Any = None, experimental_capabilities: Any = None, extensions: Any = None
    ) -> Any:
        self.instructions = self.calls.current().registry.instructions()  # they name the model being served now
        options = notification_options or NotificationOptions(tools_changed=True, resources_changed=True)
        return super().create_initialization_options(options, experimental_capabilities, extensions)


class ToolCalls:
    """`tools/call` on the dispatcher: for the SDK's handler, and for canon's own 2026-07-28 HTTP path
    (`core.mcp.fastpath.calls`), so both call a tool the same way."""

    def __init__(self, current: Current, surface: str, prefix: str, *, inline_searches: bool = False,
                 structured: bool = True) -> None:  # fmt: skip
        self.current = current
        self.structured = structured  # whether results carry structuredContent (their tools list an outputSchema)
        self.surface = surface
        self.prefix = prefix
        self.inline_searches = inline_searches  # one client: searches answered from indexes run on the loop too
        # per model: tool name -> whether its input schema declares x-mcp-header
        self._headers_of = PerSnapshot[dict[str, bool]](lambda snapshot: {})

    def name_of(self, called: str) -> str | None:
        """The registry's name for a tool called as `called`, which must be a name tools/list shows: with a prefix
        set, only the prefixed name (None for any other)."""
        if not called.startswith(self.prefix):
            return None
        return called[len(self.prefix) :]

    def tool_of(self, called: str, snapshot: Snapshot | None = None) -> ToolDefinition | None:
        """The tool called as `called` (a name tools/list shows) in `snapshot`'s registry (default: the current
        one), else None."""
        name = self.name_of(called)
        return None if name is None else (snapshot or self.current()).registry.find(name)

    async def call(self, principal: Principal, called: str, arguments: dict[str, Any], *,
                   tool: ToolDefinition | None = None, snapshot: Snapshot | None = None,
                   asking: Asking | None = None) -> ToolResult:  # fmt: skip
        """Call the tool as `principal`; raises UnknownToolError only. `tool` is the tool `called` names in
        `snapshot`, when the caller has just looked it up there (`tool_of`), so it is not looked up again. A point
        read runs right here unless something it needs is busy: the hop to a worker thread and back costs several
        times the read itself. `asking` (`asking_of`): the client can ask its person first, with this request's
        answers."""
        # the call finishes on the snapshot it starts with, whatever model change happens meanwhile
        if snapshot is None:
            snapshot, tool = self.current(), None  # a tool is only known in the snapshot it was looked up in
        dispatcher, received = snapshot.dispatcher, time.monotonic()
        name = self.name_of(called) if tool is None else tool.name
        if name is None:  # not a name tools/list shows; its hints are the listed names it is closest to
            raise dispatcher.unknown_tool(principal, called)
        result = dispatcher.call_tool_now(principal, self.surface, name, arguments, searches=self.inline_searches,
                                          tool=tool)  # fmt: skip
        if result is None:  # on a worker thread the current registry names the tool: the model may change meanwhile
            call = functools.partial(dispatcher.call_tool, received=received, asking=asking)  # its time counts the wait
            result = await anyio.to_thread.run_sync(call, principal, self.surface, name, arguments)
        return result

    def input_schema(self, called: str) -> Mapping[str, Any] | None:
        """What the SDK checks a 2026-07-28 HTTP call's Mcp-Param-* headers against (see `header_schema`)."""
        snapshot = self.current()
        tool = self.tool_of(called, snapshot)
        return None if tool is None else self.header_schema(tool, snapshot)

    def header_schema(self, tool: ToolDefinition, snapshot: Snapshot | None = None) -> Mapping[str, Any] | None:
        """`tool`'s input schema if it declares `x-mcp-header`, else None: only such a schema can fail the SDK's
        Mcp-Param-* check, so no other is handed over (the SDK would walk it on every call)."""
        headers_of = self._headers_of(snapshot or self.current())
        declares = headers_of.get(tool.name)
        if declares is None:
            declares = headers_of[tool.name] = _declares_headers(tool.input_schema)
        return tool.input_schema if declares else None


def asking_of(params: types.CallToolRequestParams, protocol_version: str) -> Asking | None:
    """Whether a `tools/call` may answer by asking the person at the client (`core.dispatch.confirm`): on MCP
    2026-07-28, when this request's `_meta` declares form elicitation; with the answers it carries
    (`inputResponses`, in their wire form). None otherwise: the call answers as on every other surface. Both the
    SDK's handler and canon's own HTTP path (`core.mcp.fastpath.calls`) decide it here."""
    if protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return None
    if not elicits_forms((params.meta or {}).get(types.CLIENT_CAPABILITIES_META_KEY)):
        return None
    answers = {key: value.model_dump(mode="json", by_alias=True, exclude_none=True)
               for key, value in (params.input_responses or {}).items()}  # fmt: skip
    return Asking(answers)


def _modern(ctx: ServerRequestContext[Any]) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def build_server(current: Current, fanout: EventFanout, principal_of: PrincipalOf,
                 options: ServeOptions = DEFAULT_OPTIONS, *, surface: str = "mcp",
                 single_client: bool = False) -> CanonServer:  # fmt: skip
    """An SDK server whose every handler is one dispatcher call, made for the caller `principal_of` names.

    `current` gives the model's snapshot (`core.seam.snapshot`); every handler reads it once, so a model change (which
    replaces the snapshot) is served from the next request on and a request finishes on the snapshot it started
    with. `single_client` (stdio): searches the store answers from its indexes run on
    the event loop when nothing else holds the store, as point reads always do.
    """
    prefix, lean = options.prefix, options.profile == "agent"
    converted = PerSnapshot[dict[str, types.Tool]](lambda snapshot: {})  # per model: tool name -> its MCP form

    def shown(tools: list[ToolDefinition]) -> list[ToolDefinition]:
        """Of the tools a caller may call, those its tools/list shows (the agent profile hides the advanced ones)."""
        return [t for t in tools if options.profile != "agent" or not t.advanced]

    def listed(principal: Principal) -> list[types.Tool]:
        """The tools this caller's tools/list shows, converted once."""
        snapshot = current()
        visible, forms = shown(snapshot.dispatcher.tools_for(principal, surface)), converted(snapshot)
        return [forms.get(t.name) or forms.setdefault(t.name, _tool(t, prefix, lean)) for t in visible]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        principal = principal_of(ctx)
        return types.ListToolsResult(tools=await anyio.to_thread.run_sync(listed, principal))

    calls = ToolCalls(current, surface, prefix, inline_searches=single_client, structured=not lean)

    client_log = ClientLog(fanout)

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> dict[str, Any]:
        principal, started = principal_of(ctx), time.perf_counter()
        try:
            result = await calls.call(principal, params.name, dict(params.arguments or {}),
                                      asking=asking_of(params, ctx.protocol_version))  # fmt: skip
        except UnknownToolError as exc:
            names = [prefix + t.name for t in shown(current().dispatcher.callable_tools(principal))]  # its tools/list
            close = [prefix + s for s in exc.suggestions if prefix + s in names]
            hint = f" Did you mean {', '.join(map(repr, close))}?" if close else f" Known tools: {', '.join(names)}."
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name!r}.{hint}") from None
        if not _modern(ctx):
            await client_log.call_done(ctx, result, time.perf_counter() - started)
        return _call_result(result, calls.structured)

    async def list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        cursor = params.cursor if params is not None else None
        entries, next_cursor = await _run(ctx, "resources/list", cursor or "", lambda c: resource_page(c, cursor))
        resources = [types.Resource(uri=e.uri or "", name=e.name, title=e.title, description=e.description,
                                    mime_type=e.mime_type, icons=icon_of(e.icon)) for e in entries]  # fmt: skip
        return types.ListResourcesResult(resources=resources, next_cursor=next_cursor)

    async def list_templates(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        templates = [
            types.ResourceTemplate(uri_template=t.uri_template or "", name=t.name, title=t.title,
                                   description=t.description, mime_type=t.mime_type, icons=icon_of(t.icon))
            for t in current().registry.templates
        ]  # fmt: skip
        return types.ListResourceTemplatesResult(resource_templates=templates)

    async def read(ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        content = await _run(ctx, "resources/read", uri, lambda c: read_resource(c, uri))
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=content.uri, mime_type=content.mime_type, text=content.text)]
        )

    async def subscribe(ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams) -> types.EmptyResult:
        uri = str(params.uri)
        await _run(ctx, "resources/subscribe", uri, lambda c: read_resource(c, uri))  # must exist, must be readable
        fanout.subscribe(ctx, uri)
        return types.EmptyResult()

    async def unsubscribe(ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        fanout.unsubscribe(ctx, str(params.uri))
        return types.EmptyResult()

    async def completion(ctx: ServerRequestContext[Any], params: types.CompleteRequestParams) -> types.CompleteResult:
        ref, arg = params.ref, params.argument
        if isinstance(ref, types.PromptReference):
            name = ref.name
            values, total, more = await _run(ctx, "completion/complete", name,
                                             lambda c: complete_prompt(c, name, arg.name, arg.value))  # fmt: skip
        else:
            template = ref.uri
            context = dict(params.context.arguments or {}) if params.context is not None else {}
            values, total, more = await _run(ctx, "completion/complete", template,
                                             lambda c: complete(c, template, arg.name, arg.value, context))  # fmt: skip
        return types.CompleteResult(completion=types.Completion(values=values, total=total, has_more=more))

    async def list_prompts(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[_prompt(p) for p in PROMPTS])

    async def get_prompt(ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams) -> types.GetPromptResult:
        name, arguments = params.name, dict(params.arguments or {})
        text = await _run(ctx, "prompts/get", name, lambda c: render(c, name, arguments, prefix))
        message = types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))
        return types.GetPromptResult(description=prompt(name).description, messages=[message])

    async def set_level(ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams) -> types.EmptyResult:
        client_log.set_level(ctx, params.level)  # the SDK serves this method on 2025-11-25 only
        return types.EmptyResult()

    async def discover(ctx: ServerRequestContext[Any], params: types.RequestParams | None) -> types.DiscoverResult:
        # logging is deprecated in 2026-07-28 and not served there (core.mcp.client_log): not advertised either; the
        # prompt list is the same for every model, so it never changes (the SDK would say it may)
        capabilities = server.get_capabilities(protocol_version=ctx.protocol_version)
        unchanging = types.PromptsCapability(list_changed=False)
        capabilities = capabilities.model_copy(update={"logging": None, "prompts": unchanging})
        return types.DiscoverResult(
            supported_versions=SUPPORTED_VERSIONS,
            capabilities=capabilities,
            instructions=current().registry.instructions(),
            ttl_ms=DISCOVER_TTL_MS,
            cache_scope=DISCOVER_CACHE_SCOPE,
        )

    async def _run(ctx: ServerRequestContext[Any], action: str, target: str, work: Callable[[Any], Any]) -> Any:
        principal, dispatcher = principal_of(ctx), current().dispatcher
        try:
            return await anyio.to_thread.run_sync(
                lambda: dispatcher.run(principal, surface, action, target, {"target": target}, work)
            )
        except NotFoundError as exc:
            if exc.kind == "resource":  # the one error whose code differs between the revisions
                code = types.INVALID_PARAMS if _modern(ctx) else RESOURCE_NOT_FOUND_LEGACY
                raise MCPError(code, str(exc), data={"uri": target}) from None
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        except CanonError as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc), data={"code": exc.code, "target": target}) from None

    async def readable(ctx: ServerRequestContext[Any], uris: list[str]) -> list[str]:
        """The URIs of a listen request this caller may read: a stream never carries another's resources."""
        allowed: list[str] = []
        for uri in uris:
            try:
                await _run(ctx, "subscriptions/listen", uri, lambda c, uri=uri: read_resource(c, uri))
                allowed.append(uri)
            except MCPError:
                continue  # not honoured: the client sees it missing from the acknowledged subscriptions
        return allowed

    private = CacheHint(ttl_ms=0, scope="private")  # results depend on the caller (visibility, roles)
    server = CanonServer(
        SERVER_INFO["name"],
        version=SERVER_INFO["version"],
        title=SERVER_INFO["title"],
        description=SERVER_INFO["description"],
        instructions=current().registry.instructions(),
        icons=[types.Icon.model_validate(icon) for icon in SERVER_INFO["icons"]],
        cache_hints={
            "tools/list": private,
            "resources/list": private,
            "resources/templates/list": private,
            "resources/read": private,
        },
        get_tool_input_schema=calls.input_schema,
        on_list_tools=list_tools,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
        on_subscriptions_listen=_HonestListen(ListenHandler(fanout.bus), readable),
        on_completion=completion,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )
    # without the SDK's own span per message: it names a tool as the client spelt it (anything a client sends);
    # canon's one span per call is core.ops.tracing's, with `[tracing] enabled`
    server.middleware.clear()
    server.middleware.append(Negotiate())
    server.middleware.append(_RememberLegacy(fanout))
    # registered here rather than as on_call_tool: it answers the result's wire form, a dict (see `_call_result`)
    server.add_request_handler("tools/call", types.CallToolRequestParams, call_tool)
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
    server.add_request_handler("server/discover", types.RequestParams, discover)
    server.calls = calls
    return server


def _prompt(definition: PromptDefinition) -> types.Prompt:
    arguments = [types.PromptArgument(name=a.name, description=a.description, required=True)
                 for a in definition.arguments]  # fmt: skip
    return types.Prompt(name=definition.name, title=definition.title, description=definition.description,
                        arguments=arguments)  # fmt: skip


def _call_result(result: ToolResult, structured: bool = True) -> dict[str, Any]:
    """A CallToolResult in its wire form, built directly rather than as a model the SDK would dump again.

    The object travels as JSON text, and also as structuredContent when `structured` (the tools were listed with
    an outputSchema): the revisions ask for the text copy of structured content (ADR 0032). The agent profile lists
    no output schemas, so its results carry the object once, as text.

    The text copy of the body is encoded by pydantic's encoder (the SDK's own), about four times faster than
    `json.dumps` on a page of nodes: compact, UTF-8, the same JSON value. The SDK still validates the dict
    against the protocol's result schema before sending it.
    """
    if result.asks is not None:  # MCP 2026-07-28's input-required result: the client asks, then calls again
        return {"resultType": "input_required", "inputRequests": dict(result.asks)}
    body = result.as_json()
    answer: dict[str, Any] = {"content": [{"type": "text", "text": pydantic_core.to_json(body).decode()}]}
    if structured and not result.is_error:
        answer["structuredContent"] = body
    # what the model's dump holds too; the SDK drops resultType on 2025-11-25, where the field does not exist
    return answer | {"isError": result.is_error, "resultType": "complete"}


def _declares_headers(schema: Any) -> bool:
    """Whether `x-mcp-header` appears anywhere in a schema."""
    if isinstance(schema, Mapping):
        mapping = cast("Mapping[str, Any]", schema)
        return "x-mcp-header" in mapping or any(_declares_headers(v) for v in mapping.values())
    if isinstance(schema, list):
        return any(_declares_headers(v) for v in cast("list[Any]", schema))
    return False


class _RememberLegacy:
    """Every 2025-11-25 connection that sends a request hears list_changed, whether or not it subscribed."""

    def __init__(self, fanout: EventFanout) -> None:
        self.fanout = fanout

    async def __call__(self, ctx: ServerRequestContext[Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.request_id is not None and not _modern(ctx) and ctx.method != "initialize":
            self.fanout.remember(ctx)
        return result


class _HonestListen:
    """The SDK's listen handler, honouring only what canon serves and the caller may read.

    The SDK acknowledges every requested kind; canon's prompt list never changes (`core.dispatch.prompts`), so it never
    offers its list_changed, and a resource subscription the caller may not read (or that does not exist) is dropped
    before the SDK sees it.
    """

    def __init__(self, inner: ListenHandler,
                 readable: Callable[[ServerRequestContext[Any], list[str]], Awaitable[list[str]]]) -> None:  # fmt: skip
        self.inner = inner
        self.readable = readable

    async def __call__(self, ctx: ServerRequestContext[Any], params: types.SubscriptionsListenRequestParams) -> Any:
        requested = params.notifications
        update: dict[str, Any] = {}
        if requested.prompts_list_changed:
            update["prompts_list_changed"] = None
        if requested.resource_subscriptions:
            update["resource_subscriptions"] = await self.readable(ctx, list(requested.resource_subscriptions))
        if update:
            params = params.model_copy(update={"notifications": requested.model_copy(update=update)})
        return await self.inner(ctx, params)
