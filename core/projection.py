"""Shorter nodes on request: a property projection (`fields`) and a summary form (`summary`).

One rule for every surface, applied by the dispatcher to a read tool's result when its arguments ask for it:
`fields` keeps only the named properties of each node (the system fields stay); `summary` turns each node into
`{id, type, name}`, where `name` is the value of the type's display property, and each edge that reached a node
(a `get_neighbors` item's) into `{type, source, target}`, with its properties only when it has any; a search
hit, which names its node's id, type and name itself, drops its node in the summary form. A tool
offers them by declaring `fields` and `summary` in its input schema. Nodes are found where the read tools put
them: under `node`, as the items of a page, or under `node` in each item.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from core.model import Model

__all__ = ["shape"]


def shape(value: dict[str, Any], args: Mapping[str, Any], model: Model) -> dict[str, Any]:
    """`value` with each node projected as `args` asks (`value` itself when it asks for neither)."""
    fields: Sequence[str] | None = args.get("fields")
    summary = bool(args.get("summary"))
    if fields is None and not summary:
        return value

    def one(node: dict[str, Any]) -> dict[str, Any]:
        properties: Mapping[str, Any] = node.get("properties", {})
        if summary:
            node_type = model.node_types.get(node.get("type", ""))
            display = node_type.display if node_type is not None else "name"
            return {"id": node["id"], "type": node["type"], "name": properties.get(display)}
        assert fields is not None
        return {**node, "properties": {k: properties[k] for k in fields if k in properties}}

    out = dict(value)
    if isinstance(out.get("node"), dict):
        out["node"] = one(cast("dict[str, Any]", out["node"]))
    items = out.get("items")
    if isinstance(items, list):
        out["items"] = [_item(cast("dict[str, Any]", item), one, summary) for item in cast("list[Any]", items)]
    return out


def _item(item: dict[str, Any], one: Callable[[dict[str, Any]], dict[str, Any]], summary: bool) -> dict[str, Any]:
    if isinstance(item.get("node"), dict):
        if summary and "score" in item:
            return {k: v for k, v in item.items() if k != "node"}
        shaped = {**item, "node": one(item["node"])}
        if summary and isinstance(item.get("edge"), dict):
            shaped["edge"] = _edge_summary(cast("dict[str, Any]", item["edge"]))
        return shaped
    if "id" in item and "type" in item:
        return one(item)
    return item


def _edge_summary(edge: dict[str, Any]) -> dict[str, Any]:
    short = {key: edge[key] for key in ("type", "source", "target") if key in edge}
    return {**short, "properties": edge["properties"]} if edge.get("properties") else short
