"""The canonical model: a JSON Schema 2020-12 document whose $defs declare node and edge types.

`load_model` reads and checks a model file; `check_model` lists every problem with a JSON pointer; `Model`
holds the parsed types and one compiled validator per type. A model is immutable once loaded.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any, Literal, Protocol

from jsonschema import ValidationError
from jsonschema.protocols import Validator
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from core.lang.model_limits import limit_problems
from core.values.dialect import ecma_regex, schema_validator
from core.values.documents import load_document, pointer
from core.values.errors import ModelError, Problem
from core.values.records import Node, Visibility
from core.values.schema_fast_path import Accept, accepts

__all__ = [
    "DEPRECATED",
    "INCOMING_SUFFIX",
    "RENAMED_FROM",
    "SEARCH",
    "WORD_PATTERN",
    "Cardinality",
    "Checks",
    "Direction",
    "EdgeEnd",
    "EdgeType",
    "Model",
    "NodeType",
    "check_model",
    "default_model_path",
    "default_seed_path",
    "deprecated_description",
    "deprecation",
    "is_deprecated",
    "load_model",
    "meta_schema",
    "meta_schema_path",
    "parse_model",
    "property_renamed_from",
    "property_text",
    "search_weights",
    "searchable_text",
    "text_words",
    "word_impacts",
]


class Checks(Protocol):
    """Checks that may remember the passed ones (`core.schema_checks.SchemaChecks`, which imports this module: its
    digest covers the checks defined here, so this module names only what it calls)."""

    def once(self, kind: str, document: Any, check: Callable[[], None]) -> None:
        """Run `check` (which raises if `document` fails as a `kind`), unless `document` passed it before."""
        ...


_PASSED_HERE: set[bytes] = set()  # digests of the (kind, document) checks passed in this process


def once_here(kind: str, document: Any, check: Callable[[], None]) -> bool:
    """Run `check` (which raises if `document` fails as a `kind`) unless the same document passed it in this
    process (the checking code cannot change under a running process); whether it ran. A document that is no JSON
    (a YAML key that is no string) is checked every time."""
    try:
        text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        check()
        return True
    digest = hashlib.sha256(kind.encode() + b"\0" + text.encode()).digest()
    if digest in _PASSED_HERE:
        return False
    check()
    _PASSED_HERE.add(digest)
    return True


Cardinality = Literal["one-to-one", "one-to-many", "many-to-one", "many-to-many"]
Direction = Literal["out", "in"]
INCOMING_SUFFIX = "_incoming"  # an edge's name seen from its target when the model declares no inverse
NODE_FIELDS = frozenset(f.name for f in fields(Node))  # what a node shows beside its edges

DEPRECATED = "Deprecated in the model: still served, but do not build new uses on it."
RENAMED_FROM = (
    "x-canon-renamed-from"  # a type's or property's previous name (`core.lang.model_migration` moves the data)
)
SEARCH = "x-canon-search"  # a property's part in search: {"weight": n} (what a match in it counts) or {"exclude": true}

NODE_TYPE_NAME = ecma_regex(r"^[A-Z][A-Za-z0-9]*$")
EDGE_TYPE_NAME = ecma_regex(r"^[a-z][a-z0-9_]*$")


def _schema_file(*parts: str) -> Path:
    return Path(str(resources.files("schema").joinpath(*parts)))


def default_model_path() -> Path:
    """The model shipped with canon (a small software company)."""
    return _schema_file("default", "model.schema.json")


def default_seed_path() -> Path:
    """The seed data of the default model."""
    return _schema_file("default", "seed.json")


def meta_schema_path() -> Path:
    """The file of the meta-schema every model document must satisfy."""
    return _schema_file("meta", "model.schema.json")


def meta_schema() -> dict[str, Any]:
    """The meta-schema every model document must satisfy."""
    document: dict[str, Any] = json.loads(meta_schema_path().read_text(encoding="utf-8"))
    return document


class _TypeSchema:
    """What node and edge types read from their schema alike."""

    schema: Mapping[str, Any]

    @property
    def properties(self) -> Mapping[str, Any]:
        props: Mapping[str, Any] = self.schema["properties"]
        return props

    @property
    def renamed_from(self) -> str | None:
        """The type's previous name, when the model declares a rename (`x-canon-renamed-from`)."""
        return _renamed_from(self.schema)

    @property
    def deprecated(self) -> bool:
        """Whether the type is `deprecated` (JSON Schema meta-data): still served, marked so on every surface."""
        return is_deprecated(self.schema)

    @property
    def review_required(self) -> bool:
        """Whether the model says a write of this type waits for review (`"review": "required"` in its
        `x-canon-node` or `x-canon-edge`; `core.dispatch.review`)."""
        annotation = self.schema.get("x-canon-node", self.schema.get("x-canon-edge"))
        return isinstance(annotation, Mapping) and annotation.get("review") == "required"  # pyright: ignore[reportUnknownMemberType]


@dataclass(frozen=True)
class NodeType(_TypeSchema):
    name: str
    schema: Mapping[str, Any]
    key: str
    display: str
    description: str
    icon: str | None = None
    plural: str | None = None
    text: tuple[str, ...] = ()
    visibility: Visibility = "internal"  # what a new node gets when its write gives neither visibility nor readers
    readers: tuple[str, ...] = ()  # ... and its readers (only with visibility restricted)
    weights: tuple[tuple[str, float], ...] = ()  # what a match in each searched property weighs (`search_weights`)
    names: tuple[str, ...] = ()  # the properties whose values are other names of the node (`x-canon-search` names)


@dataclass(frozen=True)
class EdgeType(_TypeSchema):
    name: str
    schema: Mapping[str, Any]
    sources: frozenset[str]
    targets: frozenset[str]
    cardinality: Cardinality
    description: str
    inverse: str | None = None
    acyclic: bool = False
    icon: str | None = None

    @property
    def incoming_name(self) -> str:
        """The edge's name seen from its target: the model's `inverse` (`members` for `member_of`), else
        `<name>_incoming`. Every surface that names an edge from its target end names it so."""
        return self.inverse or self.name + INCOMING_SUFFIX

    @property
    def one_per_source(self) -> bool:
        """At most one edge of this type leaves a node."""
        return self.cardinality in ("many-to-one", "one-to-one")

    @property
    def one_per_target(self) -> bool:
        """At most one edge of this type enters a node."""
        return self.cardinality in ("one-to-many", "one-to-one")


def _renamed_from(schema: Any) -> str | None:
    value = schema.get(RENAMED_FROM) if isinstance(schema, Mapping) else None
    return value if isinstance(value, str) else None


def property_renamed_from(schema: Any) -> str | None:
    """A property's previous name, when its schema declares a rename (`x-canon-renamed-from`)."""
    return _renamed_from(schema)


def is_deprecated(schema: Any) -> bool:
    """Whether a type's or property's schema says `deprecated: true` (JSON Schema 2020-12 meta-data)."""
    return isinstance(schema, Mapping) and schema.get("deprecated") is True


def deprecation(schema: Any) -> str | None:
    """What every surface says of a deprecated type or property (`DEPRECATED`); None when it is not deprecated."""
    return DEPRECATED if is_deprecated(schema) else None


def deprecated_description(description: str, schema: Any) -> str:
    """`description`, led by `DEPRECATED` when `schema` is deprecated: how descriptions on every surface say it."""
    return f"{DEPRECATED} {description}" if is_deprecated(schema) else description


@dataclass(frozen=True)
class EdgeEnd:
    """An edge type seen from one node type: its name from there, the direction, and the types at the far end."""

    name: str
    edge: EdgeType
    direction: Direction
    far: tuple[str, ...]


@dataclass(frozen=True)
class Model:
    """A checked model: its document, its types, and a validator per type."""

    document: Mapping[str, Any]
    node_types: Mapping[str, NodeType]
    edge_types: Mapping[str, EdgeType]
    source: str = "<memory>"
    _validators: dict[str, Validator] = field(default_factory=dict[str, Validator], repr=False)
    _fast: dict[str, Accept | None] = field(default_factory=dict[str, "Accept | None"], repr=False)

    @property
    def id(self) -> str:
        return str(self.document["$id"])

    @property
    def name(self) -> str:
        return str(self.document["x-canon-model"]["name"])

    @property
    def version(self) -> str:
        return str(self.document["x-canon-model"]["version"])

    @cached_property
    def reviewed_types(self) -> frozenset[str]:
        """The node and edge types the model marks `"review": "required"` (`core.dispatch.review`)."""
        return frozenset(t.name for t in (*self.node_types.values(), *self.edge_types.values()) if t.review_required)

    @cached_property
    def canonical_json(self) -> str:
        """The document as canonical JSON (sorted keys, no spaces): what the store records and digests."""
        return json.dumps(self.document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @cached_property
    def digest(self) -> str:
        """sha256 of the canonical JSON: two models with the same digest are the same model."""
        return hashlib.sha256(self.canonical_json.encode()).hexdigest()

    @cached_property
    def registry(self) -> Registry[Any]:
        resource = Resource.from_contents(dict(self.document), default_specification=DRAFT202012)
        return Registry().with_resource(self.id, resource)

    def edge_ends(self, node_type: str) -> list[EdgeEnd]:
        """The edge types a node of `node_type` may have, as seen from it: those leaving it (named as the edge
        type), then those arriving (named by `EdgeType.incoming_name`), each in edge type order. `check_model`
        makes these names unique per node type and distinct from its properties and system fields."""
        ends = [EdgeEnd(e.name, e, "out", tuple(sorted(e.targets)))
                for e in self.edge_types.values() if node_type in e.sources]  # fmt: skip
        ends += [EdgeEnd(e.incoming_name, e, "in", tuple(sorted(e.sources)))
                 for e in self.edge_types.values() if node_type in e.targets]  # fmt: skip
        return ends

    @cached_property
    def edge_names(self) -> Mapping[str, tuple[str, Direction]]:
        """Every name an edge type is known by, to the edge type and the direction it means: the type's own name
        (`out`, from source to target), then each incoming name (`EdgeType.incoming_name`, `in`): `members` is
        `member_of` walked from its target. `check_model` makes every name name one edge end in the model."""
        names: dict[str, tuple[str, Direction]] = {e.name: (e.name, "out") for e in self.edge_types.values()}
        names |= {e.incoming_name: (e.name, "in") for e in self.edge_types.values()}
        return names

    def edge_named(self, name: str) -> tuple[EdgeType, Direction]:
        """The edge type `name` names and the direction it means (see `edge_names`): `("owns", "in")` for
        `owned_by`. Every surface that takes an edge name reads it so; raises `KeyError` for an unknown name."""
        edge, direction = self.edge_names[name]
        return self.edge_types[edge], direction

    def type_ref(self, name: str) -> str:
        """The absolute URI of a type's schema, for `$ref`."""
        return f"{self.id}#/$defs/{name}"

    def resolved(self, schema: Mapping[str, Any]) -> Mapping[str, Any]:
        """`schema` with its local `$ref`s (`#/$defs/Name`) followed, the referring schema's own keywords (its
        `description`) winning: what a property's schema says once its shared definition is read in. A `$ref`
        that points elsewhere is left as it is."""
        seen: set[str] = set()
        while isinstance(ref := schema.get("$ref"), str) and ref.startswith("#/$defs/") and ref not in seen:
            seen.add(ref)
            target = self.document.get("$defs", {}).get(ref.removeprefix("#/$defs/"))
            if not isinstance(target, Mapping):
                break
            schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}  # pyright: ignore[reportUnknownMemberType]
        return schema

    def validator(self, type_name: str) -> Validator:
        """The compiled validator of a node or edge type (built once, then reused)."""
        found = self._validators.get(type_name)
        if found is None:
            # Rooted at the document, then narrowed to the type: local $refs resolve against the document, and
            # validating skips the `$ref` lookup a `{"$ref": type_ref}` wrapper would pay on every call.
            root = schema_validator(self.document, self.registry)
            found = root.evolve(schema=self.document["$defs"][type_name])
            self._validators[type_name] = found
        return found

    def property_errors(self, type_name: str, properties: Mapping[str, Any]) -> Iterable[ValidationError]:
        """What is wrong with `properties` under the schema of a node or edge type: nothing when the type's quick
        check accepts them (`core.values.schema_fast_path`), else every error its validator finds."""
        if type_name not in self._fast:
            self._fast[type_name] = accepts(self.document["$defs"][type_name], self.document["$defs"])
        quick = self._fast[type_name]
        if quick is not None and quick(properties):
            return ()
        return self.validator(type_name).iter_errors(properties)


def load_model(path: Path | str | None = None, *, checks: Checks | None = None) -> Model:
    """Read and check a model file (JSON or YAML); `None` loads the embedded default model. With `checks`, a model
    document that passed before is not checked again."""
    file = Path(path) if path is not None else default_model_path()
    document, problems = load_document(file)
    if problems:
        raise ModelError(f"Cannot read the model {file}.", problems)
    return parse_model(document, source=str(file), checks=checks)


def parse_model(document: Any, *, source: str = "<memory>", checks: Checks | None = None) -> Model:
    """Check a model document and build a `Model`; raise `ModelError` listing every problem. A document that passed
    before is not checked again: in this process (`once_here`: a store reads its model at every open and every
    model change, a plan parses both sides), or with `checks` also across starts (`core.lang.schema_checks`)."""

    def check() -> None:
        problems = check_model(document, source=source)
        if problems:
            raise ModelError(f"The model {source} has {len(problems)} problem(s).", problems)

    if checks is None:
        once_here("model", document, check)
    else:
        checks.once("model", document, check)
    return _build(document, source)


def check_model(document: Any, *, source: str | None = None) -> list[Problem]:
    """Every problem of a model document, each with its JSON pointer; empty when the model is valid.

    The meta-schema's problems and canon's own checks are listed together: a definition the meta-schema refuses
    still gets every check whose inputs are well formed, so one run lists every problem. A document past one of
    `core.lang.model_limits`' bounds gets only those problems.
    """
    too_large = limit_problems(document)
    if too_large:  # nothing else is checked: every other check's cost grows with the document
        return sorted({Problem(p.pointer, p.message, source) for p in too_large})
    problems = _meta_problems(list(schema_validator(meta_schema()).iter_errors(document)))
    if _checkable(document):
        defs = {name: d for name, d in document["$defs"].items() if isinstance(d, dict)}
        problems += [*_semantic_problems(defs), *_ref_problems(document), *_cycle_problems(document)]
    return sorted({Problem(p.pointer, p.message, source) for p in problems})


SIMPLE_TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")


def _meta_problems(errors: list[ValidationError]) -> list[Problem]:
    """The meta-schema's errors, in words a model author acts on."""
    redundant = {pointer(e.absolute_path) for e in errors if e.validator == "const" and e.path and e.path[-1] == "type"}
    problems: list[Problem] = []
    for error in errors:
        at = pointer(error.absolute_path)
        if error.validator == "anyOf" and at in redundant:
            continue  # `type` of a type's schema: the "must be object" problem says all there is to say
        problems.append(Problem(at, _explain(error)))
    return problems


def _explain(error: ValidationError) -> str:
    last = error.path[-1] if error.path else None
    value = error.instance
    if error.validator == "anyOf" and last == "type" and isinstance(value, str):
        close = difflib.get_close_matches(value, SIMPLE_TYPES, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f" (one of {', '.join(SIMPLE_TYPES)})"
        return f"{value!r} is not a JSON Schema type{hint}"
    if error.validator == "const" and last == "type":
        return f'a node or edge type is "type": "object", not {json.dumps(value)}'
    if error.validator == "const" and last == "additionalProperties":
        return "additionalProperties must be false: a type declares every property it allows"
    if error.validator == "not" and isinstance(value, str) and isinstance(error.validator_value, dict):
        reserved: Any = error.validator_value.get("enum")
        if isinstance(reserved, list) and value in reserved:
            return f"property {value!r} shadows a system field ({', '.join(map(str, reserved))}); rename it"
    return error.message


def _checkable(document: Any) -> bool:
    return (
        isinstance(document, dict) and isinstance(document.get("$id"), str) and isinstance(document.get("$defs"), dict)
    )


def _object(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _names(value: Any) -> list[tuple[int, str]]:
    """The strings of a list with their indexes (a malformed list: the meta-schema reports it)."""
    return [(i, v) for i, v in enumerate(value) if isinstance(v, str)] if isinstance(value, list) else []


def _semantic_problems(defs: Mapping[str, Mapping[str, Any]]) -> Iterator[Problem]:
    """What the meta-schema cannot say: names, cross-references between types, key and display properties.

    Each check runs where its inputs are well formed, whatever else is wrong with the definition."""
    nodes = {name for name, d in defs.items() if "x-canon-node" in d}
    if not nodes:
        yield Problem("/$defs", "a model needs at least one node type (a definition with x-canon-node)")
    for name, definition in defs.items():
        at = pointer(["$defs", name])
        props = definition.get("properties")
        if isinstance(props, dict) and ("x-canon-node" in definition or "x-canon-edge" in definition):
            for i, required in _names(definition.get("required")):
                if required not in props:
                    yield Problem(f"{at}/required/{i}", f"required property {required!r} is not declared in properties")
        if "x-canon-node" in definition:
            yield from _node_problems(name, definition, at, props if isinstance(props, dict) else None, defs)
        elif "x-canon-edge" in definition:
            yield from _edge_problems(name, definition, at, nodes)
    yield from _edge_name_problems(defs)
    yield from _rename_problems(defs)


def _rename_problems(defs: Mapping[str, Mapping[str, Any]]) -> Iterator[Problem]:
    """A rename names a previous name that is gone from the model, and no two renames claim one previous name; so
    a model declares no chain or cycle of renames (each rename is one step, one model version)."""
    claimed: dict[str, str] = {}  # previous type name -> the type renamed from it
    for name, definition in defs.items():
        yield from _property_rename_problems(name, definition)
        old = _renamed_from(definition)
        if old is None:
            continue
        at = pointer(["$defs", name, RENAMED_FROM])
        if "x-canon-node" not in definition and "x-canon-edge" not in definition:
            yield Problem(at, f"{name} is neither a node nor an edge type; only types and properties are renamed")
        elif old in defs:
            yield Problem(at, f"{name} is renamed from {old!r}, which the model still defines; a model renames a "
                              "name it no longer has (rename in one step per model version)")  # fmt: skip
        elif old in claimed:
            yield Problem(at, f"{name} and {claimed[old]} are both renamed from {old!r}; only one can be")
        else:
            claimed[old] = name


def _property_rename_problems(name: str, definition: Mapping[str, Any]) -> Iterator[Problem]:
    props = _object(definition.get("properties"))
    claimed: dict[str, str] = {}
    for prop, schema in props.items():
        old = _renamed_from(schema)
        if old is None:
            continue
        at = pointer(["$defs", name, "properties", prop, RENAMED_FROM])
        if old in props:
            yield Problem(at, f"{name}.{prop} is renamed from {old!r}, which {name} still declares; a model renames "
                              "a name it no longer has (rename in one step per model version)")  # fmt: skip
        elif old in claimed:
            yield Problem(at, f"{name}.{prop} and {name}.{claimed[old]} are both renamed from {old!r}; only one can be")
        else:
            claimed[old] = prop


def _node_problems(
    name: str, definition: Mapping[str, Any], at: str, props: Mapping[str, Any] | None, defs: Mapping[str, Any]
) -> Iterator[Problem]:
    if not NODE_TYPE_NAME.search(name):
        yield Problem(at, f"node type name {name!r} must match {NODE_TYPE_NAME.pattern}")
    if props is None:
        return
    annotation = _object(definition["x-canon-node"])
    for role in ("key", "display"):
        value = annotation.get(role)
        if isinstance(value, str) and value not in props:
            yield Problem(f"{at}/x-canon-node/{role}", f"{value!r} is not a property of {name}")
    key = annotation.get("key")
    if isinstance(key, str) and key in props:
        if key not in [r for _, r in _names(definition.get("required"))]:
            yield Problem(f"{at}/x-canon-node/key", f"the key property {key!r} must be required")
        resolved = _resolve_local(_object(props[key]), defs)
        if isinstance(resolved, dict) and resolved.get("type") != "string":
            yield Problem(f"{at}/properties/{key}", f"the key property {key!r} must be of type string")
    for i, text in _names(annotation.get("text")):
        if text not in props:
            yield Problem(f"{at}/x-canon-node/text/{i}", f"{text!r} is not a property of {name}")
        elif not _is_text(props[text], defs):
            yield Problem(f"{at}/x-canon-node/text/{i}", f"{text!r} is neither a string nor an array of strings")
        elif _object(_object(props[text]).get(SEARCH)).get("exclude") is True:
            yield Problem(f"{at}/x-canon-node/text/{i}", f"{text!r} is listed in text but excluded from search")
    listed = {t for _, t in _names(annotation.get("text"))}
    display = annotation.get("display")
    for prop, schema in props.items():
        search = _object(schema).get(SEARCH)
        if search is None:
            continue
        where = f"{at}/properties/{prop}/{SEARCH}"
        if not _is_text(schema, defs):
            yield Problem(where, f"{name}.{prop} is neither a string nor an array of strings; only text is searched")
        elif listed and _object(search).keys() & {"weight", "names"} and prop not in listed | {key, display}:
            yield Problem(where, f"{name}.{prop} has a search weight or names but is not in x-canon-node's text list")
    defaults = _object(annotation.get("defaults"))
    if defaults.get("readers") and defaults.get("visibility") != "restricted":
        yield Problem(f"{at}/x-canon-node/defaults/readers", "default readers need the default visibility restricted")


def _edge_problems(name: str, definition: Mapping[str, Any], at: str, nodes: set[str]) -> Iterator[Problem]:
    if not EDGE_TYPE_NAME.search(name):
        yield Problem(at, f"edge type name {name!r} must match {EDGE_TYPE_NAME.pattern}")
    annotation = _object(definition["x-canon-edge"])
    for end in ("source", "target"):
        for i, type_name in _names(annotation.get(end)):
            if type_name not in nodes:
                yield Problem(f"{at}/x-canon-edge/{end}/{i}", f"{type_name!r} is not a node type of this model")


def _edge_name_problems(defs: Mapping[str, Any]) -> Iterator[Problem]:
    """An edge is named from its source by its type name and from its target by `EdgeType.incoming_name`; the
    GraphQL fields and llms pages of a node show these names beside its properties and system fields. Each name
    names one edge end in the whole model and shadows nothing of the node it is seen from."""
    edges = {name: _object(d["x-canon-edge"]) for name, d in defs.items() if "x-canon-edge" in d}
    owners = {name: name for name in edges}  # name -> the edge type it names
    for name, annotation in edges.items():
        inverse = annotation.get("inverse") if isinstance(annotation.get("inverse"), str) else None
        incoming = inverse or name + INCOMING_SUFFIX
        at = pointer(["$defs", name, "x-canon-edge", "inverse"]) if inverse else pointer(["$defs", name])
        label = f"inverse name {incoming!r}" if inverse else f"{name}'s incoming name {incoming!r} (no inverse)"
        if incoming in owners:
            yield Problem(at, f"{label} is already used by {owners[incoming]}; declare another inverse")
        else:
            owners[incoming] = name
        sources, targets = ([t for _, t in _names(annotation.get(end))] for end in ("source", "target"))
        yield from _shadowing(defs, sources, name, f"edge type name {name!r}", pointer(["$defs", name]))
        yield from _shadowing(defs, targets, incoming, label, at)


def _shadowing(defs: Mapping[str, Any], node_types: list[str], name: str, label: str, at: str) -> Iterator[Problem]:
    if name in NODE_FIELDS:
        yield Problem(at, f"{label} is a system field of every node; choose another name")
        return
    for node_type in node_types:
        if name in _object(_object(defs.get(node_type)).get("properties")):
            yield Problem(at, f"{label} is also a property of {node_type}; rename one of them")


def _resolve_local(schema: Mapping[str, Any], defs: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The schema a property's local `$ref` points to (None if it points nowhere)."""
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return defs.get(ref.removeprefix("#/$defs/"))
    return schema


def _ref_problems(document: Mapping[str, Any]) -> list[Problem]:
    """Every `$ref` in the document must resolve through a `referencing` registry."""
    resource = Resource.from_contents(dict(document), default_specification=DRAFT202012)
    resolver = Registry().with_resource(str(document["$id"]), resource).resolver(base_uri=str(document["$id"]))
    problems: list[Problem] = []
    for path, ref in _refs(document, []):
        try:
            resolver.lookup(ref)
        except Unresolvable:
            problems.append(Problem(pointer([*path, "$ref"]), f"$ref {ref!r} does not resolve"))
    return problems


def _cycle_problems(document: Mapping[str, Any]) -> list[Problem]:
    """A `$ref` that leads back to a schema it is reached from (`Loop` -> `Loop`, `A` -> `B` -> `A`, a node type
    used as one of its own properties' schemas) is refused, once per cycle, at the `$ref` that closes it.

    canon does not support recursive schemas: every surface spells a property's schema out (GraphQL types, the
    OpenAPI document, the llms pages), which a recursive one has no end to; and a record that holds records of
    its own type is what an edge type is for. Unresolvable `$ref`s are `_ref_problems`' to report."""
    resource = Resource.from_contents(dict(document), default_specification=DRAFT202012)
    root = Registry().with_resource(str(document["$id"]), resource).resolver(base_uri=str(document["$id"]))
    where = {id(node): path for path, node in _objects(document, [])}  # every object's path, to name it
    state: dict[int, bool] = {}  # id of a schema -> True while its refs are being followed, False once done
    problems: list[Problem] = []
    for name in document["$defs"]:
        start = document["$defs"][name]
        if not isinstance(start, dict) or id(start) in state:
            continue
        # depth-first through the `$ref`s, iteratively: the chain of refs can be as long as the model
        state[id(start)] = True
        chain: list[tuple[Any, Iterator[tuple[list[object], str]], Any]] = [
            (start, _applied_refs(start, ["$defs", name]), root)
        ]
        sites: list[list[object]] = []  # sites[i]: where chain[i] refers to chain[i + 1]
        while chain:
            schema, refs, resolver = chain[-1]
            step = next(refs, None)
            if step is None:
                state[id(schema)] = False
                chain.pop()
                del sites[len(chain) - 1 :]
                continue
            site, ref = step
            try:
                resolved = resolver.lookup(ref)
            except Unresolvable:
                continue
            target = resolved.contents
            if not isinstance(target, dict) or state.get(id(target)) is False:
                continue
            if state.get(id(target)) is True:
                first = [id(s) for s, _, _ in chain].index(id(target))
                names = " -> ".join(_schema_name(p) for p in [*sites[first:], site, where.get(id(target), [])])
                problems.append(Problem(pointer([*site, "$ref"]), f"$ref cycle {names}: a schema cannot contain "
                                        "itself (canon serves no recursive schema); link records of a type to "
                                        "each other with an edge type instead"))  # fmt: skip
                continue
            state[id(target)] = True
            sites.append(site)
            chain.append((target, _applied_refs(target, where.get(id(target), [])), resolved.resolver))
    return problems


_NOT_APPLIED = frozenset({"$defs", "definitions", "const", "enum", "default", "examples"})  # schemas kept for a
# `$ref`, or data: validating a schema does not follow a `$ref` written inside them
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "dependentSchemas"})  # name -> schema


def _applied_refs(schema: Any, path: list[object]) -> Iterator[tuple[list[object], str]]:
    """The `$ref`s validating `schema` follows, each with the path of the schema that holds it."""
    if isinstance(schema, list):
        for i, value in enumerate(schema):
            yield from _applied_refs(value, [*path, i])
        return
    if not isinstance(schema, dict):
        return
    for key, value in schema.items():
        if key == "$ref":
            if isinstance(value, str):
                yield path, value
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            for name, member in value.items():
                yield from _applied_refs(member, [*path, key, name])
        elif key not in _NOT_APPLIED:
            yield from _applied_refs(value, [*path, key])


def _objects(node: Any, path: list[object]) -> Iterator[tuple[list[object], Any]]:
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from _objects(value, [*path, key])
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _objects(value, [*path, i])


def _schema_name(path: list[object]) -> str:
    """A schema of the model as a model author names it: `Team`, `Team.properties.parent`."""
    parts = [str(p) for p in path]
    return ".".join(parts[1:] if parts[:1] == ["$defs"] else ["#", *parts]) or "#"


def _refs(node: Any, path: list[object]) -> Iterator[tuple[list[object], str]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield path, value
            else:
                yield from _refs(value, [*path, key])
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _refs(value, [*path, i])


def _build(document: Mapping[str, Any], source: str) -> Model:
    node_types: dict[str, NodeType] = {}
    edge_types: dict[str, EdgeType] = {}
    for name, definition in document["$defs"].items():
        if "x-canon-node" in definition:
            a = definition["x-canon-node"]
            props = definition["properties"]
            text = tuple(a.get("text") or _text_properties(props, document["$defs"]))
            node_types[name] = NodeType(
                name,
                definition,
                a["key"],
                a["display"],
                definition["description"],
                a.get("icon"),
                a.get("plural"),
                text,
                a.get("defaults", {}).get("visibility", "internal"),
                tuple(a.get("defaults", {}).get("readers", ())),
                search_weights(props, text, a["key"], a["display"], document["$defs"]),
                tuple(p for p in text if _object(_object(props.get(p)).get(SEARCH)).get("names") is True),
            )
        elif "x-canon-edge" in definition:
            a = definition["x-canon-edge"]
            edge_types[name] = EdgeType(
                name,
                definition,
                frozenset(a["source"]),
                frozenset(a["target"]),
                a["cardinality"],
                definition["description"],
                a.get("inverse"),
                bool(a.get("acyclic", False)),
                a.get("icon"),
            )
    return Model(document, dict(sorted(node_types.items())), dict(sorted(edge_types.items())), source)


def _text_properties(props: Mapping[str, Any], defs: Mapping[str, Any]) -> list[str]:
    """A type's searched properties when it names none: every string or array of strings not excluded from search."""
    return [
        name
        for name, schema in props.items()
        if _is_text(schema, defs) and _object(_object(schema).get(SEARCH)).get("exclude") is not True
    ]


def _is_text(schema: Any, defs: Mapping[str, Any]) -> bool:
    """Whether a property holds text: a string, or an array of strings (tags, synonyms, aliases)."""
    resolved = _object(_resolve_local(_object(schema), defs))
    if resolved.get("type") == "array":
        resolved = _object(_resolve_local(_object(resolved.get("items")), defs))
    return resolved.get("type") == "string"


def property_text(value: Any) -> str:
    """What a text property holds as text (what text search looks in): a string as it is, an array's strings one
    per line; '' for anything else. The stores' SQL renders it the same way (`sqlite_sql.property_text`)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(v for v in value if isinstance(v, str))  # pyright: ignore[reportUnknownVariableType]
    return ""


def searchable_text(properties: Mapping[str, Any], fields: Sequence[str]) -> str:
    """What a node's text search looks in: the `property_text` of each of its type's text properties, lowered by
    Python's `str.lower`, one per line. Each store's text index holds this."""
    return "\n".join(property_text(properties.get(f)).lower() for f in fields)


WORD_PATTERN = re.compile(r"[^\W_]+")  # a word: letters and digits (anything else separates)
_FIND_WORDS = WORD_PATTERN.findall
WORD_LENGTH = 48  # characters of a word the word index keeps (a longer one is cut: an id, a hash, a URL's path)
WORD_K1, WORD_B, WORD_AVERAGE = 1.2, 0.75, 12.0  # BM25's saturation, length norm and a weighted length taken as usual


def text_words(text: str) -> list[str]:
    """The lowered words of `text`, in order (letters and digits; anything else separates): what search matches."""
    return WORD_PATTERN.findall(text.lower())


def word_impacts(weights: Sequence[tuple[str, float]], properties: Mapping[str, Any]) -> dict[str, int]:
    """What the word index holds for one node: each word of its searched properties (`NodeType.weights`) and how
    much the node is about it (BM25's term weight without the idf: the word's weighted count, saturated, against
    the node's weighted length), in thousandths. Each store keeps these rows in the write's transaction; a search
    reads a word's nodes most-about-it first and ranks only those."""
    counts: dict[str, float] = {}
    get = counts.get
    length = 0.0
    for name, weight in weights:  # the rule word by word, without a call a word (ADR 0065: a third less time)
        value = properties.get(name)
        if value is None:
            continue
        tokens = _FIND_WORDS((value if isinstance(value, str) else property_text(value)).lower())
        if not tokens:
            continue
        length += weight * len(tokens)
        for token in tokens:
            if len(token) > WORD_LENGTH:
                token = token[:WORD_LENGTH]
            counts[token] = get(token, 0.0) + weight
    norm = WORD_K1 * (1 - WORD_B + WORD_B * length / WORD_AVERAGE)
    saturation = WORD_K1 + 1
    return {w: round(1000 * tf * saturation / (tf + norm)) for w, tf in counts.items()}


def search_weights(
    props: Mapping[str, Any], text: Sequence[str], key: str, display: str, defs: Mapping[str, Any]
) -> tuple[tuple[str, float], ...]:
    """What a match in each property weighs in search: the property's `x-canon-search` weight when it sets one;
    else the key and display properties 3, arrays of strings (tags, synonyms, aliases) 2, other text 1. The
    searched properties are the type's text ones, and its key and display ones."""
    out: dict[str, float] = {}
    for name in dict.fromkeys([*text, key, display]):
        schema = _object(props.get(name))
        weight = _object(schema.get(SEARCH)).get("weight")
        if isinstance(weight, int | float) and not isinstance(weight, bool):
            out[name] = float(weight)
        elif name in (key, display):
            out[name] = 3.0
        else:
            out[name] = 2.0 if _object(_resolve_local(schema, defs)).get("type") == "array" else 1.0
    return tuple(out.items())
