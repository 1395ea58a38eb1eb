"""Schemas derived from the model: typed node and edge envelopes, and the `x-canon-derive` markers.

Static tool schemas live in `schema/tools/`; where a schema depends on the model it holds a marker object
`{"x-canon-derive": KIND, ...}` that `derive` replaces, once, at start-up:

* `node-type` / `edge-type` — a string enum of the model's node / edge type names;
* `edge-name` — a string enum of every name an edge type is known by: its own, then its incoming name (`members`
  for `member_of`, `Model.edge_names`), where a tool walks edges and an incoming name means the other direction;
* `node` / `edge` — a node / edge of the model, in one of two forms (`derive`'s `typed`):

  - typed (what GraphQL maps and exact checks use): a `$ref` to the typed envelope of any node / edge. Envelopes
    are built from the model's own type schemas: the model's `$defs` are copied verbatim into the tool schema's
    `$defs` (so the model's local `$ref`s still resolve), next to `canon.*` definitions that wrap them, so a
    structured result validates exactly as the model validates the data. Its size grows with the model.
  - generic (what a tool's `outputSchema` is on MCP, REST and llms): `{id, type, properties: object, ...}`, the
    same few hundred bytes whatever the model; the exact schema of each type is one read away, at the type's
    resource (`core.values.uris.type_uri`) and in describe_model. It validates every result the typed form validates,
    and
    also the projected and summary forms of a node (`fields`, `summary`), which leave properties out.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from core.lang.model import EdgeType, Model, NodeType
from core.values.records import ID_PATTERN, VISIBILITIES
from core.values.uris import type_uri

__all__ = ["GENERIC_EDGE", "GENERIC_NODE", "derive", "edge_envelope", "node_envelope"]

DIALECT = "https://json-schema.org/draft/2020-12/schema"
_STAMP = {"type": "string", "description": "ISO 8601 UTC timestamp"}


GENERIC_NODE: dict[str, Any] = {
    "type": "object",
    "description": f"A node. Its exact schema per type: the resource {type_uri('{type}')}, or describe_model.",
    "required": ["id", "type"],
    "properties": {"id": {"type": "string"}, "type": {"type": "string"}, "properties": {"type": "object"}},
}
GENERIC_EDGE: dict[str, Any] = {
    "type": "object",
    "description": f"An edge from source to target. Its exact schema per type: {type_uri('{type}')}.",
    "required": ["type", "source", "target"],
    "properties": {"type": {"type": "string"}, "source": {"type": "string"}, "target": {"type": "string"},
                   "properties": {"type": "object"}},
}  # fmt: skip


def _envelope(type_name: str, head: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": [*required, "properties", "revision"],
        "properties": {
            **head,
            "properties": {"$ref": f"#/$defs/{type_name}"},
            "revision": {"type": "integer", "minimum": 1},
            "created_at": _STAMP,
            "updated_at": _STAMP,
            "updated_by": {"type": "string"},
        },
        "additionalProperties": False,
    }


def node_envelope(type_name: str) -> dict[str, Any]:
    """The schema of one node of `type_name` as every surface returns it."""
    head = {
        "id": {"type": "string", "pattern": ID_PATTERN},
        "type": {"const": type_name},
        "visibility": {"enum": list(VISIBILITIES)},
        "readers": {"type": "array", "items": {"type": "string"}},
    }
    return _envelope(type_name, head, ["id", "type", "visibility"])


def edge_envelope(type_name: str) -> dict[str, Any]:
    """The schema of one edge of `type_name` as every surface returns it."""
    head = {"type": {"const": type_name}, "source": {"type": "string"}, "target": {"type": "string"}}
    return _envelope(type_name, head, ["type", "source", "target"])


def _tagged(kind: str, names: list[str]) -> dict[str, Any]:
    """One record of any of `names`, told apart by its `type` (a tagged union).

    The same set as `oneOf` over the envelopes (each has a `const` type), but a validator checks only the branch
    whose type matches instead of every branch: an SDK client validating a `get_node` result against the output
    schema took 5.2 ms with `oneOf` over the seven node types; see docs/benchmarks.md. A model without types of
    this kind (no edge types) has no such record: the schema accepts none (an empty `allOf` or `enum` is invalid).
    """
    if not names:
        return {"not": {}, "description": f"This model defines no {kind} types."}
    return {
        "type": "object",
        "required": ["type"],
        "properties": {"type": {"enum": names}},
        "allOf": [{"if": {"properties": {"type": {"const": name}}}, "then": {"$ref": f"#/$defs/canon.{kind}.{name}"}}
                  for name in names],
    }  # fmt: skip


def _envelopes(model: Model) -> dict[str, Any]:
    defs: dict[str, Any] = copy.deepcopy(dict(model.document["$defs"]))
    defs["canon.Node"] = _tagged("node", list(model.node_types))
    defs["canon.Edge"] = _tagged("edge", list(model.edge_types))
    defs |= {f"canon.node.{name}": node_envelope(name) for name in model.node_types}
    defs |= {f"canon.edge.{name}": edge_envelope(name) for name in model.edge_types}
    return defs


def _type_names(schema: dict[str, Any], types: Mapping[str, NodeType] | Mapping[str, EdgeType],
                names: list[str] | None = None) -> dict[str, Any]:  # fmt: skip
    """A string enum of `names` (by default the type names); its description names the deprecated types (on every
    surface that shows it)."""
    named: dict[str, Any] = {**schema, "type": "string", "enum": list(types) if names is None else names}
    deprecated = [name for name, t in types.items() if t.deprecated]
    if deprecated:
        named["description"] = f"{schema.get('description', '')} Deprecated: {', '.join(deprecated)}.".lstrip()
    return named


def derive(schema: Mapping[str, Any], model: Model, *, typed: bool = True,
           fill: Callable[[str], str] | None = None) -> dict[str, Any]:  # fmt: skip
    """Replace the markers in a static schema; add the definitions a node or edge reference needs: the model's own
    (`typed`) or the generic node and edge (see the module docstring). `fill` rewrites every `description` (it
    puts in the served model's examples, `core.dispatch.examples`)."""
    uses_records = False

    def walk(node: Any) -> Any:
        nonlocal uses_records
        if isinstance(node, dict):
            marker = node.get("x-canon-derive")
            rest = {k: walk(v) for k, v in node.items() if k != "x-canon-derive"}
            if fill is not None and isinstance(rest.get("description"), str):
                rest["description"] = fill(rest["description"])
            if marker == "node-type":
                return _type_names(rest, model.node_types)
            if marker == "edge-type":
                return _type_names(rest, model.edge_types)
            if marker == "edge-name":
                return _type_names(rest, model.edge_types, list(model.edge_names))
            if marker in ("node", "edge"):
                uses_records = True
                return {**rest, "$ref": f"#/$defs/{_record_def(marker, typed)}"}
            if marker is not None:
                raise ValueError(f"unknown x-canon-derive marker {marker!r}")
            return rest
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    derived: dict[str, Any] = {"$schema": DIALECT, **walk(schema)}
    if uses_records:
        records = _envelopes(model) if typed else {"node": GENERIC_NODE, "edge": GENERIC_EDGE}
        derived["$defs"] = {**derived.get("$defs", {}), **records}
        derived["$defs"] = _reachable(derived)
    return derived


def _record_def(marker: str, typed: bool) -> str:
    if typed:
        return "canon.Node" if marker == "node" else "canon.Edge"
    return marker


def _reachable(schema: dict[str, Any]) -> dict[str, Any]:
    """The `$defs` a schema actually references (transitively), in their original order: no dead weight."""
    defs: dict[str, Any] = schema["$defs"]
    needed: set[str] = set()
    pending: list[Any] = [{k: v for k, v in schema.items() if k != "$defs"}]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                name = ref.removeprefix("#/$defs/").split("/")[0]
                if name not in needed and name in defs:
                    needed.add(name)
                    pending.append(defs[name])
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return {name: value for name, value in defs.items() if name in needed}
