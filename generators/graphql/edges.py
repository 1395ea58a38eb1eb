"""Edge fields of the generated GraphQL node types: a page of one edge type's edges, seen from one end.

On each node type, every end `Model.edge_ends` lists is a field named as the model names it (the edge type's
name where edges leave the node; `EdgeType.incoming_name` where they arrive: the model's `inverse`, else
`<edge>_incoming`). The field takes `limit` and `cursor` and returns `<Name>Page`, the pagination contract every
list keeps (`items`, `total`, `truncated`, `next_cursor`, `limit`, `revision`); each item is `<Name>Item`:

* `node`: the node at the far end (its type, or `Node` when the edge type allows several);
* `edge`: the edge record (type, source, target, revision, times; `properties` as JSON);
* `properties`: the edge's properties typed from the edge type's schema (only when it declares some).

A field is one `get_neighbors` call through the dispatcher (depth 1, that direction, that edge type): what the
caller may see, the bounds, the cursor checks and the audit are the tool's, as on every surface.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Optional

import strawberry

from core.lang.model import EdgeEnd, Model, deprecation
from generators.graphql.pinning import pinned
from generators.graphql.types import Mapped, TypeMapper, argument, pascal

__all__ = ["EDGE_LIMIT", "EdgeFields"]

EDGE_LIMIT = 10  # default `limit` of an edge field (the dispatcher bounds it as get_neighbors does)
EDGE_LIMIT_DOC = f"At most this many items (default {EDGE_LIMIT}; bounded as get_neighbors' limit)."
PAGE_FIELDS = ("total", "truncated", "next_cursor", "limit", "revision")

Call = Callable[[strawberry.Info, str, dict[str, Any]], Awaitable[dict[str, Any]]]


class EdgeFields:
    """Makes the edge fields of every node type; one page and item type per edge end, shared by the node types
    that see it."""

    def __init__(self, model: Model, mapper: TypeMapper, call: Call, neighbours: Mapping[str, Any]) -> None:
        self.model = model
        self.mapper = mapper
        self.call = call
        self.inputs: Mapping[str, Any] = neighbours.get("inputSchema", {}).get("properties", {})
        self.outputs: Mapping[str, Any] = neighbours.get("outputSchema", {}).get("properties", {})
        self._pages: dict[tuple[str, str], tuple[Any, Callable[[Any], Any]]] = {}
        self._properties: dict[str, Mapped | None] = {}

    def fields(self, node_type: str, classes: Mapping[str, Any]) -> dict[str, Any]:
        """The edge fields of `node_type` (name -> strawberry field); `classes` holds every node class."""
        return {end.name: self._field(end, *self._page(end, classes)) for end in self.model.edge_ends(node_type)}

    # -- types ---------------------------------------------------------------------------------------------------
    def _edge_properties(self, edge: str) -> Mapped | None:
        """The typed properties of an edge type, or None when it declares none."""
        if edge not in self._properties:
            schema = self.model.edge_types[edge].schema
            typed = None
            if schema.get("properties"):
                typed = self.mapper.map(schema, self.model.document, pascal(edge) + "Properties",
                                        f"{edge}.properties", output=True)  # fmt: skip
            self._properties[edge] = typed
        return self._properties[edge]

    def _page(self, end: EdgeEnd, classes: Mapping[str, Any]) -> tuple[Any, Callable[[Any], Any]]:
        key = (end.edge.name, end.direction)
        if key not in self._pages:
            self._pages[key] = self._make_page(end, classes)
        return self._pages[key]

    def _make_page(self, end: EdgeEnd, classes: Mapping[str, Any]) -> tuple[Any, Callable[[Any], Any]]:
        shapes, edge = self.mapper.shapes, end.edge.name
        far = classes[end.far[0]] if len(end.far) == 1 else shapes.node_interface
        props = self._edge_properties(edge)
        fields: dict[str, Any] = {"node": far, "edge": shapes.edge_interface}
        if props is not None:
            fields["properties"] = props.annotation
        side = "leaving" if end.direction == "out" else "arriving at"
        item = self._type(pascal(end.name) + "Item", fields, {
            "node": "The node at the other end.",
            "edge": "The edge record: type, source, target, revision and times; its properties as JSON.",
            "properties": f"The edge's properties, typed as {edge} declares them.",
        }, f"A {edge} edge {side} the node, with the node at its other end.")  # fmt: skip
        described = {n: self.outputs.get(n, {}).get("description") for n in PAGE_FIELDS}
        page_fields = {"items": list[item], "total": int, "truncated": bool, "next_cursor": Optional[str],  # noqa: UP045
                       "limit": int, "revision": int}  # fmt: skip
        page = self._type(pascal(end.name) + "Page", page_fields, described,
                          f"One page of the {edge} edges {side} a node, nearest id first.")  # fmt: skip

        def hydrate(value: Mapping[str, Any]) -> Any:
            items = [item(node=shapes.hydrate_node(i["node"]), edge=shapes.hydrate_edge(i["edge"]),
                          **({"properties": props.hydrate(i["edge"].get("properties", {}))} if props else {}))
                     for i in value["items"]]  # fmt: skip
            return page(items=items, **{n: value[n] for n in PAGE_FIELDS})

        return page, hydrate

    def _type(self, name: str, annotations: dict[str, Any], docs: Mapping[str, str | None], description: str) -> Any:
        namespace = {n: strawberry.field(name=n, description=docs.get(n)) for n in annotations}
        cls = type(self.mapper.unique(name), (), {"__annotations__": annotations, **namespace})
        return strawberry.type(cls, description=description)

    # -- the field -----------------------------------------------------------------------------------------------
    def _field(self, end: EdgeEnd, page: Any, hydrate: Callable[[Any], Any]) -> Any:
        call, edge, direction = self.call, end.edge.name, end.direction

        async def resolve(root: Any, info: strawberry.Info, limit: int = EDGE_LIMIT, cursor: str | None = None) -> Any:
            arguments: dict[str, Any] = {"id": root.id, "direction": direction, "edge_types": [edge], "depth": 1,
                                         "limit": limit}  # fmt: skip
            if cursor is not None:
                arguments["cursor"] = cursor
            arguments.update(pinned(info, "get_neighbors"))  # under a read of the past, read at its revision
            return hydrate(await call(info, "get_neighbors", arguments))

        positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
        cursor_doc = self.inputs.get("cursor", {}).get("description")
        params = [inspect.Parameter("root", positional, annotation=Any),
                  inspect.Parameter("info", positional, annotation=strawberry.Info),
                  inspect.Parameter("limit", positional, default=EDGE_LIMIT,
                                    annotation=argument(int, "limit", EDGE_LIMIT_DOC)),
                  inspect.Parameter("cursor", positional, default=None,
                                    annotation=argument(Optional[str], "cursor", cursor_doc))]  # noqa: UP045  # fmt: skip
        resolve.__signature__ = inspect.Signature(params, return_annotation=page)  # type: ignore[attr-defined]
        resolve.__annotations__ = {p.name: p.annotation for p in params} | {"return": page}
        what = "leaving this node" if direction == "out" else "arriving at this node"
        named = "" if end.name == edge else f" ({end.name}: {edge} seen from its target)"
        description = f"The {edge} edges {what}{named}, a page at a time, as get_neighbors sees them."
        return strawberry.field(resolver=resolve, name=end.name, description=description,
                                deprecation_reason=deprecation(end.edge.schema))  # fmt: skip
