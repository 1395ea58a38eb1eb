"""What a model change does to every surface and to the stored data: the report behind `canon model diff`.

The report is computed from what the generators produce (`core.artifacts.generate_for`, the code
`canon generate` runs), never from the model documents alone, so it cannot disagree with the surfaces:

* `mcp` — the manifest: each tool's input schema (callers send it) and output schema (callers receive it), the
  resources and resource templates;
* `rest` — the OpenAPI document: each operation, its parameters and request body (input), its responses (output);
* `graphql` — the SDL, compared with graphql-core's own breaking/dangerous change rules;
* `llms` — llms.txt: the pages it links to.

Each difference is a `Finding` classified `breaking`, `needs-data-check` or `compatible` (`core.schema_diff`);
`DataImpact` counts the stored records the new model would refuse, with a sample.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from core.artifacts import generate_for
from core.errors import ValidationError
from core.model import Model
from core.operations import Operation, PutEdge, PutNode
from core.schema_diff import BREAKING, COMPATIBLE, Classification, Finding, diff_schema, worst
from core.store import Store
from core.store.common import EmptyView, record_pointer
from core.validation import indexed_problems, plan

__all__ = ["SURFACES", "DataImpact", "ModelDiff", "data_impact", "diff_artifacts", "diff_models"]

SURFACES = ("mcp", "rest", "graphql", "llms")
_ARTIFACTS = {"mcp": "manifest.json", "rest": "openapi.json", "graphql": "schema.graphql", "llms": "llms.txt"}


@dataclass(frozen=True)
class DataImpact:
    """How many stored records the new model refuses, and a sample of them: (record id, JSON pointer, message)."""

    checked: int
    refused: int
    sample: tuple[tuple[str, str, str], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"checked": self.checked, "refused": self.refused,
                "sample": [{"id": i, "pointer": p, "message": m} for i, p, m in self.sample]}  # fmt: skip


@dataclass(frozen=True)
class ModelDiff:
    old: str  # "name version"
    new: str
    findings: tuple[Finding, ...]
    data: DataImpact | None = None
    surfaces: tuple[str, ...] = field(default=SURFACES)

    def classification(self, surface: str | None = None) -> Classification:
        """The worst classification on `surface` (None: on any surface)."""
        return worst([f.classification for f in self.findings if surface in (None, f.surface)])

    def as_dict(self) -> dict[str, Any]:
        return {
            "old": self.old, "new": self.new, "classification": self.classification(),
            "surfaces": {s: self.classification(s) for s in self.surfaces},
            "findings": [f.as_dict() for f in self.findings],
            "data": self.data.as_dict() if self.data else None,
        }  # fmt: skip


def diff_models(old: Model, new: Model, store: Store | None = None) -> ModelDiff:
    """Generate every surface's artifacts for both models and classify every difference (and, given the store,
    check its data against `new`)."""
    findings = diff_artifacts(generate_for(old), generate_for(new))
    impact = data_impact(store, new) if store is not None else None
    return ModelDiff(f"{old.name} {old.version}", f"{new.name} {new.version}", tuple(findings), impact)


def diff_artifacts(old: Mapping[str, str], new: Mapping[str, str]) -> list[Finding]:
    """Every classified difference between two sets of generated artifacts (file name -> text)."""
    findings: list[Finding] = []
    for surface, name in _ARTIFACTS.items():
        if name in old and name in new and old[name] != new[name]:
            findings.extend(_DIFFERS[surface](old[name], new[name]))
    return findings


# -- MCP -----------------------------------------------------------------------------------------------------------
def _mcp(old_text: str, new_text: str) -> Iterator[Finding]:
    old, new = json.loads(old_text), json.loads(new_text)
    yield from _named("mcp", "tool", _by(old["tools"], "name"), _by(new["tools"], "name"), _tool)
    yield from _named("mcp", "resource", _by(old["resources"], "uri"), _by(new["resources"], "uri"), _annotations)
    yield from _named("mcp", "resource template", _by(old["resourceTemplates"], "uriTemplate"),
                      _by(new["resourceTemplates"], "uriTemplate"), _annotations)  # fmt: skip


def _tool(surface: str, where: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> Iterator[Finding]:
    yield from diff_schema(surface, f"{where}/inputSchema", old["inputSchema"], new["inputSchema"], "input")
    yield from diff_schema(surface, f"{where}/outputSchema", old.get("outputSchema"), new.get("outputSchema"),
                           "output")  # fmt: skip
    yield from _annotations(surface, where, old, new, skip={"inputSchema", "outputSchema"})


def _annotations(
    surface: str, where: str, old: Mapping[str, Any], new: Mapping[str, Any], skip: set[str] | None = None
) -> Iterator[Finding]:
    for key in sorted((set(old) | set(new)) - (skip or set())):
        if old.get(key) != new.get(key):
            yield Finding(surface, f"{where}/{key}", f"{key} changed", COMPATIBLE)


def _by(items: list[Mapping[str, Any]], key: str) -> dict[str, Mapping[str, Any]]:
    return {str(item[key]): item for item in items}


def _named(surface: str, kind: str, old: Mapping[str, Any], new: Mapping[str, Any], differ: Any) -> Iterator[Finding]:
    for name in sorted(set(old) | set(new)):
        where = f"{kind} {name}"
        if name not in new:
            yield Finding(surface, where, f"{kind} removed", BREAKING)
        elif name not in old:
            yield Finding(surface, where, f"{kind} added", COMPATIBLE)
        elif old[name] != new[name]:
            yield from differ(surface, where, old[name], new[name])


# -- REST ----------------------------------------------------------------------------------------------------------
_METHODS = ("get", "put", "post", "patch", "delete")


def _rest(old_text: str, new_text: str) -> Iterator[Finding]:
    old, new = json.loads(old_text), json.loads(new_text)
    ops_old, ops_new = _operations(old), _operations(new)
    roots = (old, new)

    def operation(surface: str, where: str, a: Mapping[str, Any], b: Mapping[str, Any]) -> Iterator[Finding]:
        yield from diff_schema(surface, f"{where} parameters", _parameters(a), _parameters(b), "input", roots)
        yield from diff_schema(surface, f"{where} requestBody", _body(a.get("requestBody")),
                               _body(b.get("requestBody")), "input", roots)  # fmt: skip
        for status in sorted(set(a.get("responses", {})) | set(b.get("responses", {}))):
            before, after = a.get("responses", {}).get(status), b.get("responses", {}).get(status)
            if before is None or after is None:
                yield Finding(surface, f"{where} {status}", f"response {'added' if before is None else 'removed'}",
                              COMPATIBLE)  # fmt: skip
            else:
                yield from diff_schema(surface, f"{where} {status}", _body(before), _body(after), "output", roots)
        yield from _annotations(surface, where, a, b, skip={"parameters", "requestBody", "responses"})

    yield from _named("rest", "operation", ops_old, ops_new, operation)
    yield from _components(old, new)


def _components(old: Mapping[str, Any], new: Mapping[str, Any]) -> Iterator[Finding]:
    """Named schemas, compared once by name, in both directions (a node type's schema is sent and received)."""
    before = old.get("components", {}).get("schemas", {})
    after = new.get("components", {}).get("schemas", {})
    for name in sorted(set(before) & set(after)):
        found: dict[tuple[str, str], Finding] = {}
        for direction in ("input", "output"):
            for f in diff_schema("rest", f"schema {name}", before[name], after[name], direction, (old, new)):
                key = (f.where, f.change)
                if key not in found or worst([found[key].classification, f.classification]) == f.classification:
                    found[key] = f
        yield from found.values()


def _operations(document: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {f"{method.upper()} {path}": item[method] for path, item in document.get("paths", {}).items()
            for method in _METHODS if method in item}  # fmt: skip


def _parameters(operation: Mapping[str, Any]) -> dict[str, Any]:
    """An operation's parameters as one object schema, so adding, removing or requiring one follows the
    input rules of a property."""
    parameters: list[Mapping[str, Any]] = operation.get("parameters", [])
    return {"type": "object",
            "properties": {f"{p['in']}:{p['name']}": p.get("schema", {}) for p in parameters},
            "required": [f"{p['in']}:{p['name']}" for p in parameters if p.get("required")]}  # fmt: skip


def _body(holder: Mapping[str, Any] | None) -> Any:
    if holder is None:
        return {}
    return holder.get("content", {}).get("application/json", {}).get("schema", {})


# -- GraphQL -------------------------------------------------------------------------------------------------------
def _graphql(old_text: str, new_text: str) -> Iterator[Finding]:
    from graphql import build_schema
    from graphql.utilities import find_breaking_changes, find_dangerous_changes

    old, new = build_schema(old_text), build_schema(new_text)
    for change in find_breaking_changes(old, new):
        yield Finding("graphql", change.type.name.lower(), change.description, BREAKING)
    for change in find_dangerous_changes(old, new):
        yield Finding("graphql", change.type.name.lower(), change.description, COMPATIBLE)
    if not any(True for _ in find_breaking_changes(old, new)) and old_text != new_text:
        yield Finding("graphql", "schema", "types, fields or descriptions added or changed", COMPATIBLE)


# -- llms.txt ------------------------------------------------------------------------------------------------------
_LINK = re.compile(r"\]\((/[^)\s]*)\)")


def _llms(old_text: str, new_text: str) -> Iterator[Finding]:
    old, new = set(_LINK.findall(old_text)), set(_LINK.findall(new_text))
    for page in sorted(old - new):
        yield Finding("llms", page, "page removed", BREAKING)
    for page in sorted(new - old):
        yield Finding("llms", page, "page added", COMPATIBLE)
    if old == new:
        yield Finding("llms", "/llms.txt", "text changed", COMPATIBLE)


_DIFFERS = {"mcp": _mcp, "rest": _rest, "graphql": _graphql, "llms": _llms}


# -- data ----------------------------------------------------------------------------------------------------------
def data_impact(store: Store, model: Model, sample: int = 10) -> DataImpact:
    """Check every stored node and edge against `model` (nodes first: a refused node would only repeat as "no such
    node" on its edges), as adopting it would; nothing is written."""
    nodes: list[Operation] = [PutNode(n) for n in store.iter_nodes()]
    edges: list[Operation] = [PutEdge(e) for e in store.iter_edges()]
    for ops in (nodes, nodes + edges):
        try:
            plan(model, ops, EmptyView(), base_revision=0, principal="system", now="1970-01-01T00:00:00Z")
        except ValidationError as exc:
            problems = list(indexed_problems(exc))
            refused = {p.index for p in problems}
            shown = tuple((record_pointer(ops[p.index]), p.problem.pointer, p.problem.message)
                          for p in problems[:sample])  # fmt: skip
            return DataImpact(len(ops), len(refused), shown)
    return DataImpact(len(nodes) + len(edges), 0)
