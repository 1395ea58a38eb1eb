"""Shorter nodes on request: a projection (`fields`) and a summary form (`summary`).

One rule for every surface, applied by the dispatcher to a read tool's result when its arguments ask for it:
`fields` keeps only the named properties of each node, and leaves out each record's metadata (`METADATA`:
`revision`, `created_at`, `updated_at`, `updated_by`, of a node and of the edge that reached it) unless `fields`
names it too (`["name", "revision"]`); a record's identity (`id`, `type`, an edge's `source` and `target`) and
its access (`visibility`, `readers`) stay. No property can bear a metadata name (the model refuses one that
shadows a system field). `summary` turns each node into `{id, type, name}`, where `name` is the value of the
type's display property, and each edge that reached a node (a `get_neighbors` item's) into
`{type, source, target}`, with its properties only when it has any; a search hit, which names its node's id, type
and name itself, is that in the summary form (its score, match and node left out; the order is the ranking), so
a page of ten fits in about a kilobyte. A tool offers them by declaring `fields` and `summary` in
its input schema. Nodes are found where the read tools put them: under `node`, as the items of a page, under
`node` in each item, or listed once under `nodes` (query_graph, whose items bind variables to their ids).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from core.lang.model import Model

__all__ = ["METADATA", "shape"]

METADATA = ("revision", "created_at", "updated_at", "updated_by")  # a record's metadata, left out by `fields`


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
        return {**_unasked(node, fields), "properties": {k: properties[k] for k in fields if k in properties}}

    def edge(record: dict[str, Any]) -> dict[str, Any]:
        return _edge_summary(record) if summary else _unasked(record, fields or ())

    out = dict(value)
    if isinstance(out.get("node"), dict):
        out["node"] = one(cast("dict[str, Any]", out["node"]))
    items = out.get("items")
    if isinstance(items, list):
        out["items"] = [_item(cast("dict[str, Any]", item), one, edge, summary) for item in cast("list[Any]", items)]
    nodes = out.get("nodes")
    if isinstance(nodes, list):
        out["nodes"] = [one(cast("dict[str, Any]", node)) for node in cast("list[Any]", nodes)]
    return out


def _unasked(record: dict[str, Any], fields: Sequence[str]) -> dict[str, Any]:
    """`record` without the metadata `fields` does not name."""
    return {k: v for k, v in record.items() if k not in METADATA or k in fields}


Shaper = Callable[[dict[str, Any]], dict[str, Any]]


def _item(item: dict[str, Any], one: Shaper, edge: Shaper, summary: bool) -> dict[str, Any]:
    if isinstance(item.get("node"), dict):
        if summary and "score" in item:  # a search hit: its node's summary, in rank order
            return {k: item[k] for k in ("id", "type", "name")}
        shaped = {**item, "node": one(item["node"])}
        if isinstance(item.get("edge"), dict):
            shaped["edge"] = edge(cast("dict[str, Any]", item["edge"]))
        return shaped
    if "id" in item and "type" in item and isinstance(item.get("properties"), dict):  # a node, not a binding
        return one(item)
    return item


def _edge_summary(edge: dict[str, Any]) -> dict[str, Any]:
    short = {key: edge[key] for key in ("type", "source", "target") if key in edge}
    return {**short, "properties": edge["properties"]} if edge.get("properties") else short
