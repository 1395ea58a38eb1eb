"""What a model change does to every surface and to the stored data: the report behind `canon model diff`.

The report is computed from what the generators produce (`core.seam.rendering.render_model`: each model's
registry and every surface's artifacts of it, the code `canon generate` runs), never from the model documents
alone, so it cannot disagree with the surfaces. No store or instance is opened for it: the artifacts are a
function of the registry. Whoever
generates an artifact classifies its changes:

* `mcp` — core's manifest (the registry as MCP lists it): each tool's input schema (callers send it) and output
  schema (callers receive it), the resources and resource templates, compared here;
* every surface (`core.seam.surfaces`) that implements `compare` (REST: the OpenAPI document; GraphQL: the SDL;
  llms.txt: its pages) compares its own artifacts; a surface without it has each changed artifact reported as
  breaking.

Some write rules show in no artifact: an edge type's source and target types, cardinality, `acyclic`, and the
visibility a node type gives new nodes. They hold for writes on every surface, so they are compared on the models
themselves and reported under `WRITES` (a write accepted before and refused now is breaking; one refused before and
accepted now is compatible).

A rename the new model declares (`x-canon-renamed-from`, `core.lang.model_migration`) still removes the old name from
every surface that shows it (each surface reports that), and is listed once more as a rename under `WRITES`: a
write naming the old name is refused. The stored records move with it when the model is applied, so `DataImpact`
checks them as moved, and counts the records each rename moves.

Each difference is a `Finding` classified `compatible`, `needs-data-check` or `breaking` (`core.lang.schema_diff`, where
the classes and their order are defined); a surface, or the `WRITES` row, with no finding reads `none`: nothing its
callers meet changed. A surface that generates no artifact (the pages for people render per request) is no
row: nothing a caller relies on can change there. The old model's artifacts are generated at the new model's
version, so a version that rises is no change on any surface. `DataImpact` counts the stored records the new
model would refuse, with a sample.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from core.lang.model import Model
from core.lang.model_migration import Moved, Rename, declared_renames, renamed_edge, renamed_node
from core.lang.schema_diff import (
    BREAKING,
    COMPATIBLE,
    Classification,
    Finding,
    annotation_changes,
    diff_schema,
    keyed,
    named,
    worst,
)
from core.seam.rendering import MANIFEST, MCP, render_model
from core.seam.surfaces import Comparing, Surface, discover
from core.store import Store
from core.store.common import check_records
from core.values.records import Edge, Node

__all__ = [
    "WRITES",
    "DataImpact",
    "ModelDiff",
    "at_version",
    "diff_artifacts",
    "diff_models",
    "diff_renames",
    "diff_type_schemas",
    "diff_write_rules",
]

WRITES = "writes"  # the findings about write rules every surface enforces (`diff_write_rules`)


@dataclass(frozen=True)
class DataImpact:
    """How many stored records the new model refuses, and a sample of them: (record id, JSON pointer, message); and
    how many records each declared rename moves."""

    checked: int  # stored records: nodes and edges
    refused: int
    sample: tuple[tuple[str, str, str], ...] = ()
    moved: tuple[Moved, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"checked": self.checked, "refused": self.refused,
                "sample": [{"id": i, "pointer": p, "message": m} for i, p, m in self.sample],
                "moved": [m.as_dict() for m in self.moved]}  # fmt: skip


@dataclass(frozen=True)
class ModelDiff:
    old: str  # "name version"
    new: str
    findings: tuple[Finding, ...]
    surfaces: tuple[str, ...]  # every surface compared, `mcp` first
    data: DataImpact | None = None
    renames: tuple[Rename, ...] = ()  # the renames the new model declares against the old

    def classification(self, surface: str | None = None) -> Classification:
        """The worst classification on `surface` (None: on any surface)."""
        return worst([f.classification for f in self.findings if surface in (None, f.surface)])

    def as_dict(self) -> dict[str, Any]:
        return {
            "old": self.old, "new": self.new, "classification": self.classification(),
            "surfaces": {s: self.classification(s) for s in self.surfaces},
            "findings": [f.as_dict() for f in self.findings],
            "renames": [r.as_dict() for r in self.renames],
            "data": self.data.as_dict() if self.data else None,
        }  # fmt: skip


Progress = Callable[[str, int, int], None]
"""(phase, done, total): "rendering" the two models' artifacts, then "checking" the stored records."""


def diff_models(old: Model, new: Model, store: Store | None = None, surfaces: list[Surface] | None = None, *,
                check: Callable[[], None] | None = None, progress: Progress | None = None) -> ModelDiff:  # fmt: skip
    """Generate every surface's artifacts for both models and classify every difference (and, given the store,
    check its data against `new`), telling `progress` how far the two long phases are. `check` is called between
    the steps (a call's deadline: what it raises stops the diff)."""
    surfaces = discover() if surfaces is None else surfaces
    renames = declared_renames(old.document, new)
    tell = progress or _silent
    tell("rendering", 0, 2)
    before = render_model(at_version(old, new.version), surfaces, check)
    tell("rendering", 1, 2)
    after = render_model(new, surfaces, check)
    tell("rendering", 2, 2)
    findings = [*diff_artifacts(before, after, surfaces), *diff_type_schemas(old, new), *diff_write_rules(old, new),
                *diff_renames(renames)]  # fmt: skip
    if check is not None:
        check()
    impact = data_impact(store, new, renames=renames, progress=progress) if store is not None else None
    names = (*(owner for owner, files in after.items() if files or owner == MCP), WRITES)  # no artifact: no row
    return ModelDiff(f"{old.name} {old.version}", f"{new.name} {new.version}", tuple(findings), names, impact,
                     renames)  # fmt: skip


PROGRESS_EVERY = 1_000  # stored records checked between two reports to `progress`


def _silent(phase: str, done: int, total: int) -> None:
    """The progress callback of a caller that asked for none."""


def at_version(model: Model, version: str) -> Model:
    """`model` as if it had `version`: what its artifacts are compared as, since a version that rises is what every
    change has, and tells a caller nothing (the artifacts name it: OpenAPI's `info.version`, llms.txt's summary)."""
    if model.version == version:
        return model
    document = {**model.document, "x-canon-model": {**model.document["x-canon-model"], "version": version}}
    return replace(model, document=document, _validators={})


def diff_renames(renames: Sequence[Rename]) -> list[Finding]:
    """A declared rename, once per rename: writes naming the old name are refused (breaking), while the stored
    records move with it when the model is applied."""
    return [Finding(WRITES, f"{r.kind} {r.owner + '.' if r.owner else ''}{r.old}",
                    f"renamed to {r.new}; stored records move with it when the model is applied", BREAKING)
            for r in renames]  # fmt: skip


def diff_artifacts(
    old: Mapping[str, Mapping[str, str]], new: Mapping[str, Mapping[str, str]], surfaces: list[Surface]
) -> list[Finding]:
    """Every classified difference between two sets of generated artifacts (owner -> file name -> text): the
    manifest compared here, each surface's artifacts by the surface."""
    findings = _mcp(old[MCP][MANIFEST], new[MCP][MANIFEST])
    for surface in surfaces:
        if surface.name == MCP:  # the MCP surface's artifact is the manifest, compared just above
            continue
        before, after = old.get(surface.name, {}), new.get(surface.name, {})
        if before == after:
            continue
        if isinstance(surface, Comparing):
            findings.extend(surface.compare(before, after))
        else:
            findings.extend(Finding(surface.name, name, "artifact changed; this surface does not classify changes",
                                    BREAKING) for name in _changed(before, after))  # fmt: skip
    return findings


def _changed(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    return [name for name in sorted(set(before) | set(after)) if before.get(name) != after.get(name)]


# -- write rules ---------------------------------------------------------------------------------------------------
def diff_write_rules(old: Model, new: Model) -> list[Finding]:
    """The write rules of edge and node types present in both models that no generated artifact shows."""
    findings: list[Finding] = []
    for name in sorted(set(old.edge_types) & set(new.edge_types)):
        before, after = old.edge_types[name], new.edge_types[name]
        where = f"edge type {name}"
        if before.cardinality != after.cardinality:
            narrower = not _cardinality_within(before.cardinality, after.cardinality)
            findings.append(Finding(WRITES, where, f"cardinality {before.cardinality} -> {after.cardinality}",
                                    BREAKING if narrower else COMPATIBLE))  # fmt: skip
        for end, old_types, new_types in (("source", before.sources, after.sources),
                                          ("target", before.targets, after.targets)):  # fmt: skip
            if gone := ", ".join(sorted(old_types - new_types)):
                findings.append(Finding(WRITES, where, f"{end} types narrowed: {gone} no longer allowed", BREAKING))
            if added := ", ".join(sorted(new_types - old_types)):
                findings.append(Finding(WRITES, where, f"{end} types widened: {added} now allowed", COMPATIBLE))
        if before.acyclic != after.acyclic:
            findings.append(Finding(WRITES, where, "acyclic " + ("required" if after.acyclic else "no longer required"),
                                    BREAKING if after.acyclic else COMPATIBLE))  # fmt: skip
    for name in sorted(set(old.node_types) & set(new.node_types)):
        before_type, after_type = old.node_types[name], new.node_types[name]
        if (
            before_type.key != after_type.key
        ):  # a new uniqueness rule: two nodes sharing the new key's value are refused
            findings.append(Finding(WRITES, f"node type {name}", f"key property {before_type.key} -> {after_type.key}: "
                                    f"{after_type.key} must be unique within {name}", BREAKING))  # fmt: skip
        defaults = ((before_type.visibility, before_type.readers), (after_type.visibility, after_type.readers))
        if defaults[0] != defaults[1]:
            findings.append(Finding(WRITES, f"node type {name}", f"a new node's default visibility "
                                    f"{before_type.visibility} -> {after_type.visibility}", COMPATIBLE))  # fmt: skip
    return findings


def _cardinality_within(old: str, new: str) -> bool:
    """Whether every edge set `old` allows is one `new` allows too."""
    limits = {"one-to-one": (1, 1), "one-to-many": (2, 1), "many-to-one": (1, 2), "many-to-many": (2, 2)}
    return all(n >= o for o, n in zip(limits[old], limits[new], strict=True))


# -- MCP -----------------------------------------------------------------------------------------------------------
def _mcp(old_text: str, new_text: str) -> list[Finding]:
    if old_text == new_text:
        return []
    old, new = json.loads(old_text), json.loads(new_text)
    return [
        *named(MCP, "tool", keyed(old["tools"], "name"), keyed(new["tools"], "name"), _tool),
        *named(MCP, "resource", keyed(old["resources"], "uri"), keyed(new["resources"], "uri"), _described),
        *named(MCP, "resource template", keyed(old["resourceTemplates"], "uriTemplate"),
               keyed(new["resourceTemplates"], "uriTemplate"), _described),
    ]  # fmt: skip


def diff_type_schemas(old: Model, new: Model) -> list[Finding]:
    """The node and edge type schemas MCP serves (its type resources, `core.values.uris.type_uri`, which the tools'
    generic output schemas point to), compared once each in both directions: callers receive a type's
    properties and send them (upsert_node, patch_node, upsert_edge and write_batch validate `properties` against
    the same schema); the worse finding of the two is kept.

    What a type schema accepts is also a write rule of every surface (GraphQL takes `properties` as one JSON value,
    which its SDL does not describe, and the dispatcher validates it against the same schema), so the input
    findings are reported under `WRITES` as well."""
    return list(_type_schemas(old, new))


def _type_schemas(old: Model, new: Model) -> Iterator[Finding]:
    roots = (old.document, new.document)  # a type's schema references the model's $defs, helpers and types alike
    for name in sorted(_types(old) & _types(new)):
        found: dict[tuple[str, str], Finding] = {}
        schema = {"$ref": f"#/$defs/{name}"}  # as the type resources serve it (`core.dispatch.registry.type_schema`)
        for direction in ("input", "output"):
            for f in diff_schema(MCP, f"type {name}", schema, schema, direction, roots):
                key = (f.where, f.change)
                if key not in found or worst([found[key].classification, f.classification]) == f.classification:
                    found[key] = f
        yield from found.values()
        yield from diff_schema(WRITES, f"type {name} properties", schema, schema, "input", roots, annotations=False)


def _types(model: Model) -> set[str]:
    return {*model.node_types, *model.edge_types}


def _tool(surface: str, where: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> Iterator[Finding]:
    yield from diff_schema(surface, f"{where}/inputSchema", old["inputSchema"], new["inputSchema"], "input")
    yield from diff_schema(surface, f"{where}/outputSchema", old.get("outputSchema"), new.get("outputSchema"),
                           "output")  # fmt: skip
    yield from annotation_changes(surface, where, old, new, skip=frozenset({"inputSchema", "outputSchema"}))


def _described(surface: str, where: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> Iterator[Finding]:
    return annotation_changes(surface, where, old, new)


# -- data ----------------------------------------------------------------------------------------------------------
def data_impact(store: Store, model: Model, sample: int = 10, *, renames: Sequence[Rename] = (),
                progress: Progress | None = None) -> DataImpact:  # fmt: skip
    """Every stored record checked against `model` as adopting it would: moved by `renames` first
    (`core.lang.model_migration`), then checked (`core.store.common.check_records`, the check the store itself runs);
    nothing is written. `progress` hears "checking", so many of the stored records (nodes and edges)."""
    moved: Counter[Rename] = Counter()
    tell = progress or _silent
    stats = store.stats() if progress is not None else None
    total = stats.nodes + stats.edges if stats is not None else 0
    done = 0

    def counted() -> None:
        nonlocal done
        done += 1
        if done % PROGRESS_EVERY == 0:
            tell("checking", done, total)

    def nodes() -> Iterator[Node]:
        for node in store.iter_nodes():
            renamed, applied = renamed_node(renames, node)
            moved.update(applied)
            counted()
            yield renamed

    def edges() -> Iterator[Edge]:
        for edge in store.iter_edges():
            renamed, applied = renamed_edge(renames, edge)
            moved.update(applied)
            counted()
            yield renamed

    tell("checking", 0, total)
    check = check_records(model, nodes(), edges())
    tell("checking", done, max(done, total))
    return DataImpact(check.checked, check.refused, check.problems[:sample],
                      tuple(Moved(r, moved[r]) for r in renames))  # fmt: skip
