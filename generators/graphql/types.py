"""JSON Schema 2020-12 -> strawberry types, for the generated GraphQL surface (`generators.graphql.schema`).

Every type is made at start-up from the registry with `type()` and `strawberry.type` (inputs with
`strawberry.input`); nothing here is written by hand for one model. What each schema becomes:

* `string`/`integer`/`number`/`boolean` -> `String`/`Int`/`Float`/`Boolean`; `["T", "null"]` and `anyOf` of `T` and
  `{"type": "null"}` -> nullable `T`;
  `const` -> the const's scalar; an array -> a list of its items.
* `enum` of strings that are all GraphQL names -> a GraphQL enum, one per value set (the first place a set is
  seen names it: the `$defs` name, else the property name, else owner + property); other enums -> `String`.
* an object with `properties` and `additionalProperties: false` -> an object (or input) type, fields named
  exactly as the JSON properties; field non-null exactly when required.
* `#/$defs/canon.Node` -> the `Node` interface, `canon.node.<T>` -> the node type `<T>`; `canon.Edge` and
  `canon.edge.<T>` -> one `Edge` type whose `properties` are JSON (typed edge properties of different edge
  types would clash in a selection with a fragment per type). Node properties that one name gives different
  types in different node types share one type (see `TypeMapper._shared_leaves`) for the same reason.
* anything else (maps, `oneOf`/`anyOf`, mixed `type` arrays, `{}`, objects with no properties) -> the `JSON`
  scalar, recorded in `TypeMapper.fallbacks` (which field, why). That stays safe: the dispatcher validates the
  raw input against the exact schema, GraphQL's types are only a first filter.

Values cross the boundary twice: `hydrate` turns dispatcher JSON into instances of the generated classes (an
interface field needs an instance to resolve its concrete type), `dehydrate` turns GraphQL input values (enum
members, input objects) back into JSON. A field absent from a JSON object reads as `null`.
"""

from __future__ import annotations

import enum
import json
import keyword
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Optional

import strawberry
from strawberry.scalars import JSON

from core.lang.model import Model, deprecated_description, deprecation

__all__ = [
    "Fallback",
    "Mapped",
    "NodeShapes",
    "TypeMapper",
    "graphql_name",
    "pascal",
    "python_name",
]

NAME = re.compile(r"^[_A-Za-z][_0-9A-Za-z]*$")
RESERVED_TYPE_NAMES = frozenset({"Query", "Mutation", "Subscription", "Node", "Edge", "JSON", "String", "Int",
                                 "Float", "Boolean", "ID", "Resource", "ResourceUpdate"})  # fmt: skip
UNSUPPORTED = ("oneOf", "anyOf", "allOf", "not", "if", "patternProperties", "dependentSchemas")
NODE_SYSTEM = ("id", "type", "visibility", "readers", "properties", "revision", "created_at", "updated_at",
               "updated_by")  # fmt: skip
EDGE_SYSTEM = ("type", "source", "target", "properties", "revision", "created_at", "updated_at", "updated_by")
VISIBILITIES = ("public", "internal", "restricted")
EDGE_DOC = "An edge: its type, ends and system fields; properties as JSON (one shape for every edge type)."


def graphql_name(name: str) -> bool:
    """Whether `name` can be a GraphQL field, argument or enum value name as it is."""
    return bool(NAME.match(name)) and not name.startswith("__") and name not in ("true", "false", "null")


def python_name(name: str, taken: set[str]) -> str:
    """A Python identifier for a GraphQL name (keywords and reserved parameter names get a `_` suffix)."""
    candidate = name if name.isidentifier() and not keyword.iskeyword(name) else re.sub(r"\W", "_", name) + "_"
    while candidate in taken or candidate in ("info", "root", "self") or keyword.iskeyword(candidate):
        candidate += "_"
    taken.add(candidate)
    return candidate


def pascal(name: str) -> str:
    """`get_node` -> `GetNode`, `type-Person` -> `TypePerson`, `canon.Node` -> `CanonNode`."""
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^0-9A-Za-z]+", name) if part)


class HashableDict(dict[str, Any]):
    """A dict default for a generated argument: `inspect.Parameter` hashes its default."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(json.dumps(self, sort_keys=True, default=str))


class HashableList(list[Any]):
    def __hash__(self) -> int:  # type: ignore[override]
        return hash(json.dumps(self, sort_keys=True, default=str))


def _property_of(where: str) -> str:
    """The property a place names: `find_nodes(type:)` -> `type`, `Person.role` -> `role`."""
    where = where.removesuffix("[]").removesuffix("[]")
    found = re.search(r"\((\w+):\)$", where)
    return found[1] if found else where.rsplit(".", 1)[-1]


def identity(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class Fallback:
    """A place where GraphQL cannot express the JSON Schema, so it carries the `JSON` scalar."""

    where: str
    why: str


@dataclass(frozen=True)
class Mapped:
    """A schema as a strawberry annotation (nullability not included), with its value conversions."""

    annotation: Any
    hydrate: Callable[[Any], Any] = identity  # JSON -> what strawberry resolves (outputs; input defaults)
    dehydrate: Callable[[Any], Any] = identity  # what strawberry parsed -> JSON (inputs)
    json_fallback: bool = False


def _or_null(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """`S` of `{"anyOf": [S, {"type": "null"}]}` (the portable spelling of a nullable `S`), with the schema's other
    keywords; None for any other schema."""
    branches: Any = schema.get("anyOf")
    if not isinstance(branches, list) or len(branches) != 2 or NULL not in branches:  # pyright: ignore[reportUnknownArgumentType]
        return None
    [real] = [b for b in branches if b != NULL]  # pyright: ignore[reportUnknownVariableType]
    return {**{k: v for k, v in schema.items() if k != "anyOf"}, **real}


NULL = {"type": "null"}


def _nullable(value: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda v: None if v is None else value(v)


def _listed(item: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda v: None if v is None else [item(x) for x in v]


@dataclass
class NodeShapes:
    """The generated node and edge classes, by canon type name (filled by `TypeMapper.node_types`)."""

    node_interface: Any = None
    edge_interface: Any = None
    nodes: dict[str, Any] = field(default_factory=dict[str, Any])
    edges: dict[str, Any] = field(default_factory=dict[str, Any])
    hydrate_node_by_type: dict[str, Callable[[Any], Any]] = field(default_factory=dict[str, Callable[[Any], Any]])
    hydrate_edge_by_type: dict[str, Callable[[Any], Any]] = field(default_factory=dict[str, Callable[[Any], Any]])

    def hydrate_node(self, value: Any) -> Any:
        return None if value is None else self.hydrate_node_by_type[value["type"]](value)

    def hydrate_edge(self, value: Any) -> Any:
        return None if value is None else self.hydrate_edge_by_type[value["type"]](value)


class TypeMapper:
    """Maps JSON Schemas to strawberry types, naming, sharing and recording fallbacks as it goes."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.used: set[str] = set(RESERVED_TYPE_NAMES)
        self.enums: dict[frozenset[str], Any] = {}
        self.objects: dict[str, Mapped] = {}
        self.fallbacks: list[Fallback] = []
        self.shapes = NodeShapes()
        self.extra_types: list[Any] = []  # concrete types only reachable through an interface
        self._overrides: dict[str, Mapped | None] = {}  # while mapping node properties: see `_shared_leaves`

    # -- names ---------------------------------------------------------------------------------------------------
    def unique(self, name: str) -> str:
        base = name if NAME.match(name) else "T" + pascal(name)
        candidate, n = base, 2
        while candidate in self.used:
            candidate, n = f"{base}{n}", n + 1
        self.used.add(candidate)
        return candidate

    def enum_of(self, values: Sequence[str], names: Sequence[str]) -> Any:
        """The GraphQL enum for a value set (made on first sight, named by the first free name in `names`)."""
        key = frozenset(values)
        found = self.enums.get(key)
        if found is None:
            name = next((n for n in names if n and n not in self.used and NAME.match(n)), None)
            name = self.unique(name or names[-1] or "Enum")
            self.used.add(name)
            found = strawberry.enum(enum.Enum(name, {v: v for v in values}))  # type: ignore[misc]
            self.enums[key] = found
        return found

    # -- schemas -------------------------------------------------------------------------------------------------
    def resolve(self, schema: Mapping[str, Any], root: Mapping[str, Any]) -> tuple[Mapping[str, Any], str | None]:
        """Follow a local `$ref` (siblings such as `description` kept); the `$defs` name it led to, if any."""
        ref = schema.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#/$defs/"):
            return schema, None
        name = ref.removeprefix("#/$defs/")
        target: Mapping[str, Any] = root.get("$defs", {}).get(name) or self.model.document.get("$defs", {})[name]
        merged = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        inner, inner_name = self.resolve(merged, root)
        return inner, inner_name or name

    def fallback(self, where: str, why: str) -> Mapped:
        self.fallbacks.append(Fallback(where, why))
        return Mapped(JSON, json_fallback=True)

    def nullable_in(self, schema: Mapping[str, Any], root: Mapping[str, Any]) -> bool:
        resolved, _ = self.resolve(schema, root)
        types = resolved.get("type")
        return (
            (isinstance(types, list) and "null" in types)
            or _or_null(resolved) is not None
            or (
                "enum" in resolved and None in resolved["enum"]  # pyright: ignore[reportUnknownMemberType]
            )
        )

    def map(self, schema: Mapping[str, Any], root: Mapping[str, Any], hint: str, where: str, *,
            output: bool) -> Mapped:  # fmt: skip
        """The GraphQL type of `schema` (nullability aside), as an output type or an input type."""
        ref = schema.get("$ref")
        if output and isinstance(ref, str):
            shaped = self._shaped(ref.removeprefix("#/$defs/"))
            if shaped is not None:
                return shaped
        resolved, def_name = self.resolve(schema, root)
        maybe = _or_null(resolved)
        if maybe is not None:  # nullability is the field's (`nullable_in`)
            return self.map(maybe, root, hint, where, output=output)
        if any(k in resolved for k in UNSUPPORTED):
            kind = next(k for k in UNSUPPORTED if k in resolved)
            return self.fallback(where, f"{kind} has no GraphQL equivalent")
        if "const" in resolved and "type" not in resolved:
            const = resolved["const"]
            return self._scalar({str: "string", bool: "boolean", int: "integer", float: "number"}.get(type(const)),
                                where, "a const of no scalar type")  # fmt: skip
        if "enum" in resolved:
            return self._enum(resolved, where, [def_name or "", pascal(_property_of(where)), hint])
        types = resolved.get("type")
        if isinstance(types, list):
            real = [t for t in types if t != "null"]  # pyright: ignore[reportUnknownVariableType]
            if len(real) != 1:  # pyright: ignore[reportUnknownArgumentType]
                return self.fallback(where, f"a value of several types {types}")
            types = real[0]
        if types == "array":
            items = resolved.get("items")
            if not isinstance(items, Mapping):
                return self.fallback(where, "an array of any items")
            item = self.map(items, root, hint, f"{where}[]", output=output)  # pyright: ignore[reportUnknownArgumentType]
            return Mapped(list[item.annotation], _listed(item.hydrate), _listed(item.dehydrate), item.json_fallback)
        if types == "object":
            return self._object(resolved, root, def_name or hint, where, output=output)
        return self._scalar(types if isinstance(types, str) else None, where, "no type")

    def _scalar(self, kind: str | None, where: str, why: str) -> Mapped:
        scalars: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool}
        if kind in scalars:
            return Mapped(scalars[kind])
        return self.fallback(where, why if kind is None else f"type {kind!r}")

    def _enum(self, schema: Mapping[str, Any], where: str, names: list[str]) -> Mapped:
        values: list[Any] = [v for v in schema["enum"] if v is not None]
        if not values or not all(isinstance(v, str) for v in values):
            return self.fallback(where, "an enum of non-string values")
        if not all(graphql_name(v) and not v.startswith("_") for v in values):
            return Mapped(str)  # e.g. "one-to-many": a String; the dispatcher checks the value
        members = self.enum_of(values, names)
        return Mapped(members, _nullable(members), _nullable(lambda m: m.value))

    def _object(self, schema: Mapping[str, Any], root: Mapping[str, Any], hint: str, where: str, *,
                output: bool) -> Mapped:  # fmt: skip
        properties: Mapping[str, Any] = schema.get("properties") or {}
        extra = schema.get("additionalProperties", True)
        if extra is not False:
            return self.fallback(where, "a map" if isinstance(extra, Mapping) else "an object of any properties")
        if not properties:
            return self.fallback(where, "an object with no properties")
        bad = [p for p in properties if not graphql_name(p)]
        if bad:
            return self.fallback(where, f"property names that are not GraphQL names: {bad}")
        key = json.dumps({"output": output, "schema": schema}, sort_keys=True, default=str)
        found = self.objects.get(key)
        if found is None:
            found = self._make_object(schema, root, hint + ("" if output else "Input"), where, output=output)
            self.objects[key] = found
        return found

    def _make_object(self, schema: Mapping[str, Any], root: Mapping[str, Any], hint: str, where: str, *,
                     output: bool) -> Mapped:  # fmt: skip
        name = self.unique(hint)
        required = set(schema.get("required", ()))
        annotations: dict[str, Any] = {}
        namespace: dict[str, Any] = {}
        fields: list[tuple[str, str, Mapped]] = []
        taken: set[str] = set()
        for prop, sub in schema["properties"].items():
            shared = output and prop in self._overrides
            mapped = self._overrides.get(prop) if shared else None
            if mapped is None:
                mapped = self.map(sub, root, name + pascal(prop), f"{name}.{prop}", output=output)
            py = python_name(prop, taken)
            optional = shared or prop not in required or self.nullable_in(sub, root)
            annotations[py] = Optional[mapped.annotation] if optional else mapped.annotation  # noqa: UP045
            default = None if output else strawberry.UNSET
            reason = deprecation(sub) if output else None  # an input field stays undeprecated: it is still taken
            namespace[py] = strawberry.field(name=prop, description=sub.get("description"), default=default,
                                             deprecation_reason=reason)  # fmt: skip
            fields.append((prop, py, mapped))
        cls = type(name, (), {"__annotations__": annotations, **namespace})
        decorate = strawberry.type if output else strawberry.input
        made = decorate(cls, description=schema.get("description"))

        def hydrate(value: Any) -> Any:
            return None if value is None else made(**{py: m.hydrate(value.get(p)) for p, py, m in fields if p in value})

        def dehydrate(value: Any) -> Any:
            if value is None:
                return None
            out: dict[str, Any] = {}
            for prop, py, mapped in fields:
                got = getattr(value, py)
                if got is not strawberry.UNSET:
                    out[prop] = mapped.dehydrate(got)
            return out

        return Mapped(made, hydrate, dehydrate)

    # -- nodes and edges -----------------------------------------------------------------------------------------
    def _shaped(self, def_name: str) -> Mapped | None:
        shapes = self.shapes
        if def_name == "canon.Node" and shapes.node_interface is not None:
            return Mapped(shapes.node_interface, shapes.hydrate_node)
        if def_name == "canon.Edge" and shapes.edge_interface is not None:
            return Mapped(shapes.edge_interface, shapes.hydrate_edge)
        kind, _, type_name = def_name.removeprefix("canon.").partition(".")
        if kind == "node" and type_name in shapes.nodes:
            return Mapped(shapes.nodes[type_name], shapes.hydrate_node)
        if kind == "edge" and shapes.edge_interface is not None:
            return Mapped(shapes.edge_interface, shapes.hydrate_edge)
        return None

    def node_types(self, edge_fields: Callable[[str, dict[str, Any]], dict[str, Any]]) -> None:
        """The `Node` interface with a type per model node type, and the `Edge` type.

        `edge_fields(node_type, classes)` gives the edge fields of a node type (name -> strawberry field); it is
        called once every class exists, so edge fields can return any node type (the graph has cycles).
        """
        visibility = self.enum_of(VISIBILITIES, ["Visibility"])
        self._enum(
            {"enum": sorted(self.model.node_types)}, "node types", ["NodeTypeName"]
        )  # the names they are known by
        self._enum({"enum": sorted(self.model.edge_types)}, "edge types", ["EdgeTypeName"])
        self._enum({"enum": list(self.model.edge_names)}, "edge names", ["EdgeName"])  # types and incoming names
        system: dict[str, Any] = {"id": str, "type": str, "visibility": visibility, "readers": Optional[list[str]],  # noqa: UP045
                                  "revision": int, "created_at": Optional[str], "updated_at": Optional[str],  # noqa: UP045
                                  "updated_by": Optional[str]}  # noqa: UP045  # fmt: skip
        node = type("Node", (), {"__annotations__": system, **dict.fromkeys(system)})
        self.shapes.node_interface = strawberry.interface(node, description="What every node has: its system fields.")
        edge_system: dict[str, Any] = {"type": str, "source": str, "target": str, "properties": JSON, "revision": int,
                                       "created_at": Optional[str], "updated_at": Optional[str],  # noqa: UP045
                                       "updated_by": Optional[str]}  # noqa: UP045  # fmt: skip
        edge = type("Edge", (), {"__annotations__": edge_system, **dict.fromkeys(edge_system)})
        self.shapes.edge_interface = strawberry.type(edge, description=EDGE_DOC)
        self.shapes.hydrate_edge_by_type.update(dict.fromkeys(self.model.edge_types, self._edge_hydrator(edge)))
        self.fallbacks.append(Fallback("Edge.properties", "one field for every edge type's properties"))
        shared = self._shared_leaves()
        pending: list[tuple[str, Any]] = []
        for name, node_type in self.model.node_types.items():
            cls_name = name if name not in self.used and NAME.match(name) else self.unique(name + "Node")
            self.used.add(cls_name)
            self._overrides = shared
            props = self.map(node_type.schema, self.model.document, cls_name + "Properties", f"{cls_name}.properties",
                             output=True)  # fmt: skip
            self._overrides = {}
            description = deprecated_description(node_type.description, node_type.schema)
            cls = type(cls_name, (node,), {"__annotations__": {"properties": props.annotation}, "properties": None,
                                          "__doc__": description})  # fmt: skip
            self.shapes.nodes[name] = cls
            self.shapes.hydrate_node_by_type[name] = self._system_hydrator(cls, props, NODE_SYSTEM, {"visibility"})
            pending.append((name, cls))
        for name, cls in pending:  # every class exists now: add the edge fields, then make them strawberry types
            for field_name, edge_field in edge_fields(name, self.shapes.nodes).items():
                setattr(cls, field_name, edge_field)
            made = strawberry.type(cls, description=cls.__doc__)
            self.extra_types.append(made)

    def _shared_leaves(self) -> dict[str, Mapped | None]:
        """Node properties that one name gives different types (or nullability) in different node types.

        A full selection with a fragment per node type selects `properties { status }` once per type, and GraphQL
        requires one shape for a name: such a property is nullable everywhere, and where its types differ it gets
        one type they share (`String`, `[String!]` or `JSON`; the value maps to None here when only its
        nullability differed)."""
        seen: dict[str, dict[str, Mapped]] = {}
        required: dict[str, set[bool]] = {}
        for node_type in self.model.node_types.values():
            for prop, sub in node_type.schema.get("properties", {}).items():
                mapped = self.map(sub, self.model.document, pascal(node_type.name) + pascal(prop), "", output=True)
                seen.setdefault(prop, {})[repr(mapped.annotation)] = mapped
                required.setdefault(prop, set()).add(prop in node_type.schema.get("required", ()))
        self.fallbacks[:] = [f for f in self.fallbacks if f.where]  # the look-ahead's own findings are not kept
        shared: dict[str, Mapped | None] = {}
        for prop, variants in seen.items():
            names = set(variants)
            if len(names) == 1:
                if len(required[prop]) > 1:
                    shared[prop] = None
            elif all(not n.startswith("list") and "JSON" not in n for n in names):
                shared[prop] = Mapped(str)
            elif all(n.startswith("list") and "JSON" not in n for n in names):
                shared[prop] = Mapped(list[str])
            else:
                shared[prop] = self.fallback(f"{prop} (node properties)", "different types in different node types")
        return shared

    @staticmethod
    def _edge_hydrator(made: Any) -> Callable[[Any], Any]:
        def hydrate(value: Mapping[str, Any]) -> Any:
            return made(**{n: value.get(n) for n in EDGE_SYSTEM if n in value})

        return hydrate

    @staticmethod
    def _system_hydrator(made: Any, props: Mapped, names: Sequence[str], enums: set[str]) -> Callable[[Any], Any]:
        def hydrate(value: Mapping[str, Any]) -> Any:
            kwargs = {n: value.get(n) for n in names if n in value}
            if "properties" in kwargs:
                kwargs["properties"] = props.hydrate(kwargs["properties"])
            return made(**kwargs)

        return hydrate


def argument(annotation: Any, name: str, description: str | None) -> Any:
    """An argument annotation that keeps the JSON name (`return`, `from`) whatever the Python name is."""
    return Annotated[annotation, strawberry.argument(name=name, description=description)]
