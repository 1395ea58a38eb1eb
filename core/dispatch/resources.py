"""Reading, listing and completing the registry's resources; every surface serves them through these.

URIs (`core.values.uris`): the model (now, and at any past revision, from the store's model history), each type's
schema,
the latest changes, one per node, whose JSON is exactly `get_node`'s `node`, and one per proposal, whose JSON is
exactly `get_proposal`'s answer (`core.dispatch.proposals.answer`). The list holds the fixed resources
first, then every node in id order, one page at a time.
Everything is read through the caller's sight: nodes it may not see are not listed or completed, reading one is
a `ForbiddenError`, and the changes resource shows the latest entries as `get_changes` would show them to that
caller.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from core.dispatch.access import change_for
from core.dispatch.dispatcher import CallContext
from core.dispatch.registry import ResourceDefinition, type_schema
from core.lang.model import Model
from core.store import NodeQuery
from core.values.errors import NotFoundError
from core.values.paging import decode_cursor, encode_cursor
from core.values.uris import (
    CHANGES_URI,
    MODEL_AT_TEMPLATE,
    MODEL_URI,
    NODE_AT_TEMPLATE,
    NODE_TEMPLATE,
    model_at_of,
    node_at_of,
    node_of,
    node_uri,
    proposal_of,
    type_of,
)

__all__ = ["ResourceContent", "complete", "complete_ids", "complete_types", "list_resources", "read_resource"]

PAGE = 100
MAX_COMPLETIONS = 100


@dataclass(frozen=True)
class ResourceContent:
    uri: str
    mime_type: str
    text: str


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=1)


def read_resource(ctx: CallContext, uri: str) -> ResourceContent:
    """The content of a resource; `NotFoundError` (kind "resource") when there is no such resource."""
    model = ctx.model
    if uri == MODEL_URI:
        return ResourceContent(uri, "application/schema+json", _json(model.document))
    name = type_of(uri)
    if name is not None and (name in model.node_types or name in model.edge_types):
        return ResourceContent(uri, "application/schema+json", _json(type_schema(model, name)))
    if uri == CHANGES_URI:
        revision = ctx.view.latest()
        changes = ctx.view.feed(max(0, revision - PAGE), PAGE, sight=ctx.sight, until=revision)
        items = [change_for(ctx.sight, c) for c in changes]
        return ResourceContent(uri, "application/json", _json({"items": items, "revision": revision}))
    revision = model_at_of(uri)
    if revision is not None:
        try:
            past = ctx.view.model_at(revision)
        except NotFoundError:
            raise NotFoundError("resource", uri) from None
        return ResourceContent(uri, "application/schema+json", _json(past.document))
    then = node_at_of(uri)
    if then is not None:  # as get_node with at reads it: the store's view then, under the rule for the past
        node = ctx.view.at(then[2]).node(then[1], sight=ctx.sight)
        if node is not None and node.type == then[0]:
            return ResourceContent(uri, "application/json", _json(node.to_json()))
        raise NotFoundError("resource", uri)
    proposal = proposal_of(uri)
    if proposal is not None:
        try:
            return ResourceContent(uri, "application/json", _json(ctx.proposals.answer(proposal, ctx.principal)))
        except NotFoundError:
            raise NotFoundError("resource", uri) from None
    named = node_of(uri)
    if named is not None:
        node = ctx.view.node(named[1])
        if node is not None and node.type == named[0]:
            return ResourceContent(uri, "application/json", _json(ctx.readable(node).to_json()))
    raise NotFoundError("resource", uri)


def list_resources(ctx: CallContext, cursor: str | None) -> tuple[list[ResourceDefinition], str | None]:
    """One page of resources: the registry's fixed ones, then one per node (id order), as concrete definitions."""
    arguments = {"cursor": cursor} if cursor else {}
    shapes = ({"fixed": int}, {"after": str})
    position: dict[str, Any] = decode_cursor("resources/list", arguments, *shapes) or {"fixed": 0}
    entries: list[ResourceDefinition] = []
    fixed: tuple[ResourceDefinition, ...] = ctx.registry.resources
    start = int(position.get("fixed", len(fixed)))
    entries += fixed[start : start + PAGE]
    if start + PAGE < len(fixed):
        return entries, encode_cursor("resources/list", {}, {"fixed": start + PAGE})
    room = PAGE - len(entries)
    if room == 0:  # the fixed resources filled the page: the nodes start on the next one
        _, total = ctx.view.find(NodeQuery(sight=ctx.sight), after=None, limit=0)
        return entries, encode_cursor("resources/list", {}, {"after": ""}) if total else None
    nodes, _ = ctx.view.find(NodeQuery(sight=ctx.sight), after=position.get("after"), limit=room + 1)
    more = len(nodes) > room
    for node in nodes[:room]:
        node_type = ctx.model.node_types[node.type]
        title = str(node.properties.get(node_type.display, node.id))
        entries.append(ResourceDefinition(node.id, title, f"{node.type}: {title}", "application/json",
                                          uri=node_uri(node.type, node.id), subscribable=True,
                                          icon=node_type.icon))  # fmt: skip
    next_cursor = encode_cursor("resources/list", {}, {"after": nodes[room - 1].id}) if more else None
    return entries, next_cursor


def complete(
    ctx: CallContext, template: str, argument: str, value: str, context: dict[str, str]
) -> tuple[list[str], int, bool]:
    """Completion values for a template argument: node types by prefix, node ids by prefix (within a type), the
    revisions of the model history by prefix."""
    if template == MODEL_AT_TEMPLATE and argument == "revision":
        revisions = [str(e.revision) for e in reversed(ctx.view.model_history()) if str(e.revision).startswith(value)]
        return revisions[:MAX_COMPLETIONS], len(revisions), len(revisions) > MAX_COMPLETIONS
    if template not in (NODE_TEMPLATE, NODE_AT_TEMPLATE):
        raise NotFoundError("resource template", template)
    if argument == "revision" and template == NODE_AT_TEMPLATE:  # any revision the change log keeps: none to list
        return [], 0, False
    if argument == "type":
        return complete_types(ctx.model, value)
    if argument == "id":
        return complete_ids(ctx, value, context.get("type"))
    raise NotFoundError("template argument", argument)


def complete_types(model: Model, value: str) -> tuple[list[str], int, bool]:
    """Node type names starting with `value` (any case): (values, total, whether there are more)."""
    names = [n for n in model.node_types if n.lower().startswith(value.lower())]
    return names[:MAX_COMPLETIONS], len(names), len(names) > MAX_COMPLETIONS


def complete_ids(ctx: CallContext, value: str, node_type: str | None = None) -> tuple[list[str], int, bool]:
    """Ids starting with `value` of the nodes the caller may read (of `node_type`, when it is a type)."""
    known = node_type if node_type in ctx.model.node_types else None
    nodes, total = ctx.view.find(NodeQuery(known, id_prefix=value or None, sight=ctx.sight), after=None,
                                 limit=MAX_COMPLETIONS)  # fmt: skip
    return [n.id for n in nodes], total, total > len(nodes)
