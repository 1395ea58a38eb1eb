"""The registry: every tool and resource canon serves, as data. The one definition all surfaces map.

Tool definitions are JSON files in `schema/tools/` (name, title, description for an LLM reader, exact input
and output JSON Schemas, annotations, permission, whether the tool is advanced, how it runs, surface hints),
each checked against `schema/meta/tool.schema.json`; the parts that depend on the model are derived once by
`core.lang.schemas.derive`. The tools are listed in the order of `schema/tool-order.json`, then the unlisted ones by
name, so a new definition needs no position to be served and two never collide. Resources are defined here. The order
and content are deterministic for a given model, so generated surfaces and artifacts are reproducible.

The registry holds no behaviour: `core.tools` binds each tool name to its handler, and `core.dispatch.dispatcher` is
the one path every call takes.
"""

from __future__ import annotations

import copy
import difflib
import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from types import MappingProxyType
from typing import Any, Literal, cast

from jsonschema.protocols import Validator

from core.dispatch.examples import Examples, instructions
from core.lang.model import Model, deprecated_description
from core.lang.schema_checks import SchemaChecks
from core.lang.schemas import DIALECT, derive
from core.values.dialect import ecma_regex, schema_validator
from core.values.documents import pointer
from core.values.errors import UnknownToolError
from core.values.uris import (
    CHANGES_URI,
    MODEL_AT_TEMPLATE,
    MODEL_URI,
    NODE_AT_TEMPLATE,
    NODE_TEMPLATE,
    PROPOSAL_TEMPLATE,
    node_at_uri,
    node_uri,
    type_uri,
)

__all__ = [
    "Execution",
    "Permission",
    "QuickCheck",
    "Registry",
    "ResourceDefinition",
    "ToolDefinition",
    "build_registry",
    "check_definition",
    "in_order",
]

Permission = Literal["read", "write", "admin"]
Execution = Literal["worker", "walk", "point", "indexed"]  # how the dispatcher runs it (core.dispatch.dispatcher)
# icons of the resources the model gives none: the model, the change log, an edge type, any node
MODEL_ICON, CHANGES_ICON, EDGE_ICON, NODE_ICON, PROPOSAL_ICON = "🗺️", "🕒", "🔗", "📄", "📝"


READS_THE_LOG = frozenset({"at", "as_of", "since", "from"})  # inputs naming a point in the change log
PINS = ("at", "as_of")  # the inputs that pin a read to a past revision: a revision, or a time (core.dispatch.pinning)


@dataclass(frozen=True)
class ToolDefinition:
    name: str
    title: str
    description: str
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any]  # generic: nodes as {id, type, properties: object}, the same size for any model
    annotations: Mapping[str, bool]
    permission: Permission
    advanced: bool  # hidden from the agent profile's tools/list, still callable
    advanced_arguments: tuple[str, ...] = ()  # inputs the agent profile's tools/list leaves out, still accepted
    surface: Mapping[str, Any] = field(default_factory=dict[str, Any])
    icon: str | None = None
    execution: Execution = "worker"
    # the output schema with every node and edge typed by the model: what GraphQL maps and exact checks use
    typed_output_schema: Mapping[str, Any] = field(default_factory=dict[str, Any])

    @property
    def reads_the_log(self) -> bool:
        """Whether an input names a point in the change log (`at`, `as_of`, `since`, `from`): such a call can be
        `gone` when compaction has removed that point, whatever surface it came by."""
        return not READS_THE_LOG.isdisjoint(self.input_schema.get("properties", {}))

    @property
    def pins(self) -> tuple[str, ...]:
        """`PINS` when the tool's input takes them all (it reads at any past revision), else none: what dispatch
        resolves (`core.dispatch.pinning`), what GraphQL holds to one value per query, what the pages offer."""
        return PINS if set(PINS) <= set(self.input_schema.get("properties", {})) else ()

    def to_json(self) -> dict[str, Any]:
        """The definition as the manifest and generated artifacts carry it."""
        return (
            {
                "name": self.name,
                "title": self.title,
                "description": self.description,
                "inputSchema": self.input_schema,
                "outputSchema": self.output_schema,
                "annotations": dict(self.annotations),
                "permission": self.permission,
                "advanced": self.advanced,
                "surface": dict(self.surface),
            }
            | ({"icon": self.icon} if self.icon else {})
            | ({"advanced_arguments": list(self.advanced_arguments)} if self.advanced_arguments else {})
        )


@dataclass(frozen=True)
class ResourceDefinition:
    """A concrete resource (`uri`) or a template (`uri_template`)."""

    name: str
    title: str
    description: str
    mime_type: str
    uri: str | None = None
    uri_template: str | None = None
    subscribable: bool = False
    icon: str | None = None
    deprecated: bool = False  # the schema of a type the model deprecates

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "title": self.title, "description": self.description}
        out |= {"uri": self.uri} if self.uri else {"uriTemplate": self.uri_template}
        out |= {"mimeType": self.mime_type, "subscribable": self.subscribable}
        return out | {"deprecated": True} if self.deprecated else out


@dataclass(frozen=True)
class Registry:
    """Every definition for one model. Immutable: what calls look up per tool (the definition by name, the compiled
    input validator, the `QuickCheck`, the input defaults) is built with it, never filled in later; another model
    is another registry (`build_registry`)."""

    model: Model
    tools: tuple[ToolDefinition, ...]
    resources: tuple[ResourceDefinition, ...]
    templates: tuple[ResourceDefinition, ...]
    examples: Examples | None = None  # what descriptions name (the model's alone when None)
    _checks: Mapping[str, _ToolChecks] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_checks", MappingProxyType({t.name: _ToolChecks.of(t) for t in self.tools}))

    def tool(self, name: str) -> ToolDefinition:
        """The tool called `name`; `UnknownToolError` names the closest known tools otherwise."""
        return self._checked(name).tool

    def find(self, name: str) -> ToolDefinition | None:
        """The tool called `name`, or None."""
        found = self._checks.get(name)
        return None if found is None else found.tool

    def input_validator(self, name: str) -> Validator:
        """The compiled validator of a tool's input schema."""
        return self._checked(name).validator

    def quick_check(self, name: str) -> QuickCheck | None:
        """A shortcut past `input_validator` for arguments of plain values (see `QuickCheck`); None when the tool's
        input schema is beyond it."""
        return self._checked(name).quick

    def input_defaults(self, name: str) -> Mapping[str, Any]:
        """The defaults a tool's input schema declares for its top-level properties (what a caller may leave out).

        The mapping is shared, so a caller that changes what it holds copies it first."""
        return self._checked(name).defaults

    def _checked(self, name: str) -> _ToolChecks:
        found = self._checks.get(name)
        if found is None:
            raise UnknownToolError(name, difflib.get_close_matches(name, list(self._checks), n=3, cutoff=0.5))
        return found

    def instructions(self) -> str:
        """What an MCP server tells a client about itself: the model, its main types, a good first call."""
        return instructions(self.model, self.examples or Examples.of_model(self.model))

    def manifest(self) -> dict[str, Any]:
        """Every definition as one JSON document (what drift checks compare)."""
        return {
            "model": {"id": self.model.id, "name": self.model.name, "version": self.model.version},
            "tools": [t.to_json() for t in self.tools],
            "resources": [r.to_json() for r in self.resources],
            "resourceTemplates": [r.to_json() for r in self.templates],
        }


_ANNOTATIONS = frozenset({"description", "title", "default", "examples", "$comment"})
_ROOT = _ANNOTATIONS | {"$schema", "$id", "$defs", "type", "properties", "required", "additionalProperties"}
_PLAIN = _ANNOTATIONS | {"type", "enum", "minLength", "maxLength", "minimum", "maximum", "pattern"}
_IS_TYPE: dict[str, Callable[[Any], bool]] = {  # stricter than JSON Schema (1.0 is an integer there): never looser
    "string": lambda v: type(v) is str,
    "integer": lambda v: type(v) is int,
    "number": lambda v: type(v) in (int, float),
    "boolean": lambda v: type(v) is bool,
}


@dataclass(frozen=True)
class QuickCheck:
    """What a tool call's arguments need when each is a plain value, checked without the JSON Schema machinery.

    It covers a closed object schema (`additionalProperties: false`) whose properties use only `type` (string,
    integer, number, boolean), `enum` (of strings), `minLength`/`maxLength`, `minimum`/`maximum`, `pattern` and
    annotations. It only ever *accepts*: arguments it is unsure of (a property with any other keyword, a value
    it does not recognise) go to the full validator, which decides and names the problems. So a call of plain
    arguments skips the validator (about a quarter of a `get_node`), and no answer changes.
    """

    required: frozenset[str]
    checks: Mapping[str, Callable[[Any], bool]]  # the properties it covers

    @classmethod
    def of(cls, schema: Mapping[str, Any]) -> QuickCheck | None:
        if set(schema) - _ROOT or schema.get("type") != "object" or schema.get("additionalProperties") is not False:
            return None
        properties: Mapping[str, Any] = schema.get("properties", {})
        checks = {name: check for name, sub in properties.items() if (check := _plain(sub)) is not None}
        return cls(frozenset(schema.get("required", ())), checks)

    def __call__(self, arguments: Mapping[str, Any]) -> bool:
        """True: the arguments are valid. False: unsure (ask the validator)."""
        if not self.required <= arguments.keys():
            return False
        for name, value in arguments.items():
            check = self.checks.get(name)
            if check is None or not check(value):
                return False
        return True


def _plain(schema: Any) -> Callable[[Any], bool] | None:
    """A check accepting only values `schema` accepts, if `schema` uses only what `QuickCheck` covers."""
    if not isinstance(schema, Mapping) or set(cast("Mapping[str, Any]", schema)) - _PLAIN:
        return None
    sub = cast("Mapping[str, Any]", schema)
    kind, enum = sub.get("type"), sub.get("enum")
    if kind is None and enum is None:
        return None
    if enum is not None and not (isinstance(enum, list) and all(type(v) is str for v in cast("list[Any]", enum))):
        return None
    is_type = _IS_TYPE.get(kind) if isinstance(kind, str) else (_IS_TYPE["string"] if kind is None else None)
    if is_type is None or (enum is not None and kind not in (None, "string")):
        return None
    allowed = frozenset(cast("list[str]", enum)) if enum is not None else None
    low, high = sub.get("minimum"), sub.get("maximum")
    shortest, longest = sub.get("minLength", 0), sub.get("maxLength")
    pattern = ecma_regex(sub["pattern"]) if "pattern" in sub else None

    def check(value: Any) -> bool:
        if not is_type(value) or (allowed is not None and value not in allowed):
            return False
        if isinstance(value, str):
            return shortest <= len(value) and (longest is None or len(value) <= longest) and (
                pattern is None or pattern.search(value) is not None)  # fmt: skip
        if isinstance(value, bool):
            return True
        return (low is None or value >= low) and (high is None or value <= high)

    return check


def _json_of(name: str) -> Any:
    return json.loads(resources.files("schema").joinpath(name).read_text(encoding="utf-8"))


@dataclass(frozen=True)
class _ToolChecks:
    """What a call of one tool looks up, built with the registry: the definition, its compiled input validator,
    its `QuickCheck` and its input defaults."""

    tool: ToolDefinition
    validator: Validator
    quick: QuickCheck | None
    defaults: Mapping[str, Any]

    @classmethod
    def of(cls, tool: ToolDefinition) -> _ToolChecks:
        schema = tool.input_schema
        properties: Mapping[str, Any] = schema.get("properties", {})
        defaults = {key: sub["default"] for key, sub in properties.items() if "default" in sub}
        return cls(tool, schema_validator(schema), QuickCheck.of(schema), defaults)


def built_in_definitions() -> list[dict[str, Any]]:
    """canon's own tool definitions (`schema/tools/*.json`): what the built-in toolset of `canon.tools` carries."""
    folder = resources.files("schema").joinpath("tools")
    return [json.loads(f.read_text(encoding="utf-8")) for f in folder.iterdir() if f.name.endswith(".json")]


@functools.cache
def _definition_validator() -> Validator:
    return schema_validator(_json_of("meta/tool.schema.json"))


def check_definition(document: Mapping[str, Any]) -> None:
    """Raise `ValueError` naming the first problems of a tool definition against the tool meta-schema."""
    errors = _definition_validator().iter_errors(document)
    problems = sorted(f"{pointer(e.absolute_path) or '/'}: {e.message}" for e in errors)
    if problems:
        raise ValueError(f"tool definition {document.get('name', '?')!r}: {'; '.join(problems[:5])}")


SAME_AS = "x-canon-same-as"


def shared(documents: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The definitions with each `{"x-canon-same-as": "TOOL#/POINTER"}` replaced by that part of TOOL's definition
    (POINTER starts at `/inputSchema` or `/outputSchema`; that schema's `$defs` come along into the schema the marker
    sits in), so a schema two tools take (the operations of `write_batch` and `propose_changes`) is written once."""
    by_name = {d["name"]: d for d in documents}

    def resolve(schema: Mapping[str, Any], where: str) -> dict[str, Any]:
        carried: dict[str, Any] = {}

        def walk(node: Any) -> Any:
            if isinstance(node, dict):
                marker = node.get(SAME_AS)  # pyright: ignore[reportUnknownMemberType]
                if isinstance(marker, str):
                    tool, _, at = marker.partition("#")
                    source = by_name.get(tool)
                    part = at.split("/")[1:] if at.startswith("/") else []
                    if source is None or not part or part[0] not in ("inputSchema", "outputSchema"):
                        raise ValueError(f"{where}: {SAME_AS} {marker!r} names no part of a tool's schemas")
                    value: Any = source
                    for step in part:
                        if not isinstance(value, dict) or step not in value:
                            raise ValueError(f"{where}: {SAME_AS} {marker!r} names no part of a tool's schemas")
                        value = value[step]  # pyright: ignore[reportUnknownVariableType]
                    carried.update(source[part[0]].get("$defs", {}))
                    return walk(copy.deepcopy(value))  # pyright: ignore[reportUnknownArgumentType]
                return {k: walk(v) for k, v in node.items()}  # pyright: ignore[reportUnknownVariableType]
            if isinstance(node, list):
                return [walk(v) for v in node]  # pyright: ignore[reportUnknownVariableType]
            return node

        out: dict[str, Any] = walk(schema)
        if carried:
            out["$defs"] = {**carried, **out.get("$defs", {})}
        return out

    return [{**d, "inputSchema": resolve(d["inputSchema"], f"{d['name']}/inputSchema"),
             "outputSchema": resolve(d["outputSchema"], f"{d['name']}/outputSchema")} for d in documents]  # fmt: skip


def in_order(documents: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The definitions in serving order: those `schema/tool-order.json` lists, in its order; then the rest by name.
    A name defined twice, or listed and not defined, is an error."""
    by_name: dict[str, Mapping[str, Any]] = {}
    for document in documents:
        if by_name.setdefault(document["name"], document) is not document:
            raise ValueError(f"the tool {document['name']!r} is defined twice")
    listed: list[str] = _json_of("tool-order.json")["tools"]
    stale = [name for name in listed if name not in by_name]
    if stale or len(set(listed)) != len(listed):
        raise ValueError(f"schema/tool-order.json lists tools twice or without a definition: {stale}")
    return [by_name[n] for n in listed] + [by_name[n] for n in sorted(by_name.keys() - set(listed))]


def build_registry(model: Model, extra_tools: Sequence[Mapping[str, Any]] = (), examples: Examples | None = None,
                   *, checks: SchemaChecks | None = None,
                   definitions: Sequence[Mapping[str, Any]] | None = None) -> Registry:  # fmt: skip
    """Load the static tool definitions, derive their model-dependent parts, and define the resources.

    Descriptions name `examples` (the served data's, `Examples.of_store`; the model's alone by default).

    `definitions` are the tools to serve, in the file format (the installed toolsets', `core.tools.installed`);
    by default canon's own (`built_in_definitions`). `extra_tools` are more, added to those; each still needs a
    handler in the dispatcher. `checks` checks each derived schema (default: every one, now; see
    `core.lang.schema_checks` for one that remembers the passed ones between starts).
    """
    checks = checks or SchemaChecks()
    documents = shared(in_order([*(built_in_definitions() if definitions is None else definitions), *extra_tools]))
    for document in documents:
        check_definition(document)
    examples = examples or Examples.of_model(model)
    fill = examples.fill
    tools = tuple(
        ToolDefinition(
            name=d["name"],
            title=d["title"],
            description=fill(d["description"]),
            input_schema=derive(d["inputSchema"], model, fill=fill),
            output_schema=derive(d["outputSchema"], model, typed=False),
            typed_output_schema=derive(d["outputSchema"], model),
            annotations=d["annotations"],
            permission=d["permission"],
            advanced=d["advanced"],
            advanced_arguments=tuple(d.get("advanced_arguments", ())),
            surface=d.get("surface", {}),
            icon=d.get("icon"),
            execution=d["execution"],
        )
        for d in documents
    )
    for document, tool in zip(documents, tools, strict=True):  # a broken definition fails at start-up, not later
        # checked as derived before the served data's ids are filled into its descriptions: filling text in changes
        # no schema's validity, and the check is then remembered for every store on this model (core.lang.schema_checks)
        checks.check(derive(document["inputSchema"], model))
        checks.check(tool.output_schema)
        checks.check(tool.typed_output_schema)
    return Registry(model, tools, _resources(model), _templates(examples), examples)


def _resources(model: Model) -> tuple[ResourceDefinition, ...]:
    fixed = [
        ResourceDefinition(
            "model", "The model", "The whole model: a JSON Schema 2020-12 document declaring every node and edge type.",
            "application/schema+json", uri=MODEL_URI, icon=MODEL_ICON,
        ),
        ResourceDefinition(
            "changes", "Recent changes", "The latest 100 entries of the change log, newest last, with the revision "
            "to pass to get_changes to resume.", "application/json", uri=CHANGES_URI, subscribable=True,
            icon=CHANGES_ICON,
        ),
    ]  # fmt: skip
    for kind, types in (("node", model.node_types), ("edge", model.edge_types)):
        for name, t in types.items():
            description = deprecated_description(f"JSON Schema of the {name} {kind} type. {t.description}", t.schema)
            fixed.append(
                ResourceDefinition(
                    f"type-{name}", f"{name} schema", description, "application/schema+json", uri=type_uri(name),
                    icon=t.icon or (None if kind == "node" else EDGE_ICON), deprecated=t.deprecated,
                )
            )  # fmt: skip
    return tuple(fixed)


def _templates(examples: Examples) -> tuple[ResourceDefinition, ...]:
    return (
        ResourceDefinition(
            "node", "A node", "One node as JSON: the object get_node returns under `node` (get_node also gives the "
            "store revision it was read at; this resource does not). Subscribe to be told when it changes. "
            f"Example: {node_uri(examples.type, examples.id)}.", "application/json",
            uri_template=NODE_TEMPLATE, subscribable=True, icon=NODE_ICON,
        ),
        ResourceDefinition(
            "node-at", "A node at a revision", "One node as it was at a past store revision: what get_node with "
            "at returns under `node`, shown only to a caller who may read it then and now. Example: "
            f"{node_at_uri(examples.type, examples.id, 1)}.", "application/json",
            uri_template=NODE_AT_TEMPLATE, icon=NODE_ICON,
        ),
        ResourceDefinition(
            "proposal", "A proposal", "One proposal as JSON: what get_proposal returns (its operations and diff "
            "against the current revision as you may see them, whether it applies cleanly, its discussion). An MCP "
            "subscriber (and a GraphQL one) is told when it is revised, commented on or closed. "
            f"Example: {PROPOSAL_TEMPLATE.format(id='p-0123456789ab')}.", "application/json",
            uri_template=PROPOSAL_TEMPLATE, subscribable=True, icon=PROPOSAL_ICON,
        ),
        ResourceDefinition(
            "model-at", "The model at a revision", "The whole model as it was at a store revision: the model the "
            "store had applied by then (every applied model is kept; canon model log lists them). Example: "
            f"{MODEL_AT_TEMPLATE.format(revision=1)}.", "application/schema+json",
            uri_template=MODEL_AT_TEMPLATE, icon=MODEL_ICON,
        ),
    )  # fmt: skip


def type_schema(model: Model, name: str) -> dict[str, Any]:
    """A self-contained JSON Schema for one type: its definition plus the model's $defs it may reference."""
    return {"$schema": DIALECT, "$id": f"{model.id}/types/{name}", "$ref": f"#/$defs/{name}",
            "$defs": dict(model.document["$defs"])}  # fmt: skip
