"""Prompts: ready-made requests an agent's user can pick, written from the served model and its data.

Three prompts, the same list for every model (so the list never changes; what changes is what they say):
`explain_node` (a node and its neighbourhood), `changes_since` (what changed since a revision) and `onboard_type`
(a path through one node type). `render` writes a prompt's message for the model being served: the node's type,
display name and edge types, the type's description, properties and edges, the current revision, and the tool
calls to make, named as the caller's tools/list names them (`prefix`). `complete` completes their arguments:
node ids by prefix, node type names by prefix. Both read through the caller's sight (`CallContext`), so a prompt
never names a node its caller may not read. Surfaces serve them through the dispatcher (`Dispatcher.run`); the
MCP surface is the one that lists them (`prompts/list`), and llms.txt names them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from core.dispatch.dispatcher import CallContext
from core.dispatch.resources import complete_ids, complete_types
from core.lang.model import Model
from core.values.errors import InvalidArgumentsError, NotFoundError, Problem
from core.values.uris import node_uri

__all__ = ["PROMPTS", "PromptArgument", "PromptDefinition", "complete", "prompt", "render"]
Completes = Literal["node", "type"]


@dataclass(frozen=True)
class PromptArgument:
    name: str
    description: str
    completes: Completes | None = None  # what `complete` offers for it


@dataclass(frozen=True)
class PromptDefinition:
    name: str
    title: str
    description: str
    arguments: tuple[PromptArgument, ...]  # every one required


PROMPTS: tuple[PromptDefinition, ...] = (
    PromptDefinition("explain_node", "Explain a node",
                     "Explain one node of the graph and its neighbourhood: what it is and what it connects to.",
                     (PromptArgument("id", "The node's id.", "node"),)),
    PromptDefinition("changes_since", "What changed since a revision",
                     "Summarise every change to the graph after a revision, grouped by type and operation.",
                     (PromptArgument("revision", "A revision number, e.g. one an earlier answer reported."),)),
    PromptDefinition("onboard_type", "Learn a node type",
                     "A path through one node type: what it means, its properties and edges, then real examples.",
                     (PromptArgument("type", "The node type's name.", "type"),)),
)  # fmt: skip


def prompt(name: str) -> PromptDefinition:
    """The prompt `name`; NotFoundError if there is none."""
    found = next((p for p in PROMPTS if p.name == name), None)
    if found is None:
        raise NotFoundError("prompt", name)
    return found


def render(ctx: CallContext, name: str, arguments: Mapping[str, str], prefix: str = "") -> str:
    """The user message of prompt `name` with `arguments`, for the caller of `ctx`."""
    definition = prompt(name)
    missing = [a.name for a in definition.arguments if not arguments.get(a.name)]
    if missing:
        raise InvalidArgumentsError(name, [Problem(f"/{m}", f"{m} is required") for m in missing])
    writer = {"explain_node": _explain_node, "changes_since": _changes_since, "onboard_type": _onboard_type}[name]
    return writer(ctx, arguments, prefix)


def complete(ctx: CallContext, name: str, argument: str, value: str) -> tuple[list[str], int, bool]:
    """Completion values for a prompt's argument: (values, total, whether there are more)."""
    spec = next((a for a in prompt(name).arguments if a.name == argument), None)
    if spec is None:
        raise NotFoundError("prompt argument", argument)
    if spec.completes == "node":
        return complete_ids(ctx, value)
    if spec.completes == "type":
        return complete_types(ctx.model, value)
    return [], 0, False


def _call(prefix: str, tool: str, arguments: Mapping[str, Any]) -> str:
    return f"`{prefix}{tool}` {json.dumps(arguments, ensure_ascii=False)}"


def _edges(model: Model, node_type: str) -> str:
    """One line per edge type a node of `node_type` may have: its name, direction and the types at the other end."""
    lines = [f"- `{e.name}` → {', '.join(sorted(e.targets))}" for e in model.edge_types.values()
             if node_type in e.sources]  # fmt: skip
    lines += [f"- `{e.name}` ← {', '.join(sorted(e.sources))}" for e in model.edge_types.values()
              if node_type in e.targets]  # fmt: skip
    return "\n".join(lines) or "- (none)"


def _explain_node(ctx: CallContext, arguments: Mapping[str, str], prefix: str) -> str:
    node_id = arguments["id"]
    node = ctx.view.node(node_id)
    if node is None:
        raise NotFoundError("node", node_id)
    ctx.readable(node)
    node_type = ctx.model.node_types[node.type]
    display = node.properties.get(node_type.display, node_id)
    return (
        f"Explain the {node.type} “{display}” (`{node_id}`, resource {node_uri(node.type, node_id)}) of the "
        f"{ctx.model.name} graph and its neighbourhood.\n\n"
        f"1. Read it: {_call(prefix, 'get_node', {'id': node_id})}.\n"
        f"2. Read what it connects to: {_call(prefix, 'get_neighbors', {'id': node_id, 'summary': True})}; "
        "follow `next_cursor` while `truncated` is true.\n"
        f"3. A {node.type} may have these edges:\n{_edges(ctx.model, node.type)}\n\n"
        f"Then say in a few sentences what it is ({node_type.description.rstrip('.')}), who owns or decided it, "
        "what it depends on and what depends on it, citing node ids."
    )


def _changes_since(ctx: CallContext, arguments: Mapping[str, str], prefix: str) -> str:
    text, now = arguments["revision"], ctx.view.latest()
    if not text.isdigit() or int(text) > now:
        problem = Problem("/revision", f"a revision is a whole number from 0 to {now}, not {text!r}")
        raise InvalidArgumentsError("changes_since", [problem])
    since = int(text)
    return (
        f"Summarise what changed in the {ctx.model.name} graph after revision {since} (now at revision {now}).\n\n"
        f"1. Read the changes: {_call(prefix, 'get_changes', {'since': since})}; follow `next_cursor` to the end.\n"
        "2. Group them by node or edge type and by operation (created, updated, deleted).\n"
        "3. For an updated node, say which properties changed (compare `before` and `after`).\n\n"
        "Name every node by its id, and end with the revision you read up to."
    )


def _onboard_type(ctx: CallContext, arguments: Mapping[str, str], prefix: str) -> str:
    name = arguments["type"]
    node_type = ctx.model.node_types.get(name)
    if node_type is None:
        raise NotFoundError("node type", name)
    required = set(node_type.schema.get("required", []))
    properties = ", ".join(f"`{p}`{' (required)' if p in required else ''}"
                           for p in node_type.schema.get("properties", {}))  # fmt: skip
    return (
        f"Teach me the {name} nodes of the {ctx.model.name} graph: {node_type.description}\n\n"
        f"Properties: {properties}. Each is shown by `{node_type.display}` and keyed by `{node_type.key}`.\n"
        f"Edges:\n{_edges(ctx.model, name)}\n\n"
        f"1. See a few: {_call(prefix, 'find_nodes', {'type': name, 'summary': True, 'limit': 5})}.\n"
        f"2. Read one in full with {_call(prefix, 'get_node', {'id': '<one of their ids>'})}.\n"
        f"3. Walk its edges with {_call(prefix, 'get_neighbors', {'id': '<its id>', 'summary': True})}.\n\n"
        f"Explain what a {name} is for, how it relates to the other types, and what a newcomer should read first."
    )
