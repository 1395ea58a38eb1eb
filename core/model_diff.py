"""What a model change does to every surface and to the stored data: the report behind `canon model diff`.

The report is computed from what the generators produce (`core.artifacts.generate_for`, the code
`canon generate` runs), never from the model documents alone, so it cannot disagree with the surfaces. Whoever
generates an artifact classifies its changes:

* `mcp` — core's manifest (the registry as MCP lists it): each tool's input schema (callers send it) and output
  schema (callers receive it), the resources and resource templates, compared here;
* every surface (`core.surfaces`) that implements `compare` (REST: the OpenAPI document; GraphQL: the SDL;
  llms.txt: its pages) compares its own artifacts; a surface without it has each changed artifact reported as
  breaking.

Each difference is a `Finding` classified `breaking`, `needs-data-check` or `compatible` (`core.schema_diff`);
`DataImpact` counts the stored records the new model would refuse, with a sample.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from core.artifacts import MANIFEST, MCP, generate_for
from core.model import Model
from core.schema_diff import (
    BREAKING,
    Classification,
    Finding,
    annotation_changes,
    diff_schema,
    keyed,
    named,
    worst,
)
from core.store import Store
from core.store.common import check_records
from core.surfaces import Comparing, Surface, discover

__all__ = ["DataImpact", "ModelDiff", "diff_artifacts", "diff_models"]


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
    surfaces: tuple[str, ...]  # every surface compared, `mcp` first
    data: DataImpact | None = None

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


def diff_models(old: Model, new: Model, store: Store | None = None, surfaces: list[Surface] | None = None) -> ModelDiff:
    """Generate every surface's artifacts for both models and classify every difference (and, given the store,
    check its data against `new`)."""
    surfaces = discover() if surfaces is None else surfaces
    before, after = generate_for(old, surfaces), generate_for(new, surfaces)
    findings = diff_artifacts(before, after, surfaces)
    impact = data_impact(store, new) if store is not None else None
    return ModelDiff(f"{old.name} {old.version}", f"{new.name} {new.version}", tuple(findings), tuple(after), impact)


def diff_artifacts(
    old: Mapping[str, Mapping[str, str]], new: Mapping[str, Mapping[str, str]], surfaces: list[Surface]
) -> list[Finding]:
    """Every classified difference between two sets of generated artifacts (owner -> file name -> text): the
    manifest compared here, each surface's artifacts by the surface."""
    findings = _mcp(old[MCP][MANIFEST], new[MCP][MANIFEST])
    for surface in surfaces:
        before, after = old.get(surface.name, {}), new.get(surface.name, {})
        if before == after:
            continue
        if isinstance(surface, Comparing):
            findings.extend(surface.compare(before, after))
        else:
            findings.extend(Finding(surface.name, name, "artifact changed; this surface does not classify changes",
                                    BREAKING) for name in sorted(set(before) | set(after))
                            if before.get(name) != after.get(name))  # fmt: skip
    return findings


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


def _tool(surface: str, where: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> Iterator[Finding]:
    yield from diff_schema(surface, f"{where}/inputSchema", old["inputSchema"], new["inputSchema"], "input")
    yield from diff_schema(surface, f"{where}/outputSchema", old.get("outputSchema"), new.get("outputSchema"),
                           "output")  # fmt: skip
    yield from annotation_changes(surface, where, old, new, skip=frozenset({"inputSchema", "outputSchema"}))


def _described(surface: str, where: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> Iterator[Finding]:
    return annotation_changes(surface, where, old, new)


# -- data ----------------------------------------------------------------------------------------------------------
def data_impact(store: Store, model: Model, sample: int = 10) -> DataImpact:
    """Every stored record checked against `model` as adopting it would (`core.store.common.check_records`, the
    check the store itself runs); nothing is written."""
    check = check_records(model, store.iter_nodes(), store.iter_edges())
    return DataImpact(check.checked, check.refused, check.problems[:sample])
