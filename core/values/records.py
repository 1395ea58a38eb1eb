"""Nodes, edges and changes: the records the store keeps and every surface returns.

Records are frozen. Their JSON form (`to_json`) is the one every surface, the change log and export use; the
key order is fixed so exports are byte-stable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from core.values.dialect import ecma_regex

__all__ = [
    "ID_PATTERN",
    "VISIBILITIES",
    "Change",
    "Edge",
    "Node",
    "Sight",
    "Visibility",
    "edge_key",
    "parse_edge_key",
]

Visibility = Literal["public", "internal", "restricted"]
VISIBILITIES: tuple[Visibility, ...] = ("public", "internal", "restricted")
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
ID_RE = ecma_regex(ID_PATTERN)
READER_PATTERN = r"^(user|group):[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$"


@dataclass(frozen=True, slots=True)
class Sight:
    """Which records a caller may see: every node whose visibility is in `levels`, and restricted nodes that
    name one of `tags` among their readers. `core.dispatch.access.sight_of` builds it; `None` in its place means
    "sees everything" (admins), which lets readers skip the filter entirely.
    """

    levels: frozenset[str]
    tags: tuple[str, ...] = ()

    def sees(self, visibility: str, readers: tuple[str, ...] | list[str]) -> bool:
        if visibility in self.levels:
            return True
        return visibility == "restricted" and any(tag in readers for tag in self.tags)


def _frozen_props() -> Mapping[str, Any]:
    return {}


@dataclass(frozen=True, slots=True)
class Node:
    """A typed node. `properties` validate against the node type's schema; the rest are system fields."""

    id: str
    type: str
    properties: Mapping[str, Any] = field(default_factory=_frozen_props)
    visibility: Visibility = "internal"
    readers: tuple[str, ...] = ()
    revision: int = 0
    created_at: str | None = None
    updated_at: str | None = None
    updated_by: str | None = None

    def restamped(self, revision: int, created_at: str | None, updated_at: str | None, updated_by: str | None) -> Node:
        """This node with another revision and timestamps, as `dataclasses.replace` would make it, at a fraction of
        its cost (a write makes two of these per record, an import millions)."""
        return Node(self.id, self.type, self.properties, self.visibility, self.readers, revision, created_at,
                    updated_at, updated_by)  # fmt: skip

    def to_json(self, *, revision: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "type": self.type, "visibility": self.visibility}
        if self.readers:
            out["readers"] = list(self.readers)
        out["properties"] = dict(self.properties)
        if revision:
            out["revision"] = self.revision
        for name in ("created_at", "updated_at", "updated_by"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out


@dataclass(frozen=True, slots=True)
class Edge:
    """A typed, directed edge. There is at most one edge per (type, source, target)."""

    type: str
    source: str
    target: str
    properties: Mapping[str, Any] = field(default_factory=_frozen_props)
    revision: int = 0
    created_at: str | None = None
    updated_at: str | None = None
    updated_by: str | None = None

    @property
    def key(self) -> str:
        return edge_key(self.type, self.source, self.target)

    def restamped(self, revision: int, created_at: str | None, updated_at: str | None, updated_by: str | None) -> Edge:
        """This edge with another revision and timestamps (see `Node.restamped`)."""
        return Edge(self.type, self.source, self.target, self.properties, revision, created_at, updated_at, updated_by)

    def to_json(self, *, revision: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.type,
            "source": self.source,
            "target": self.target,
            "properties": dict(self.properties),
        }
        if revision:
            out["revision"] = self.revision
        for name in ("created_at", "updated_at", "updated_by"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out


def edge_key(type_: str, source: str, target: str) -> str:
    """The printable identity of an edge, e.g. `member_of:person-ada->team-payments`."""
    return f"{type_}:{source}->{target}"


def parse_edge_key(key: str) -> tuple[str, str, str]:
    """Split an edge key into (type, source, target); raise ValueError if it is not one."""
    type_, sep, rest = key.partition(":")
    source, arrow, target = rest.partition("->")
    if not (sep and arrow and type_ and source and target):
        raise ValueError(f"{key!r} is not an edge key of the form type:source->target")
    return type_, source, target


ChangeOp = Literal["put", "delete", "model"]


@dataclass(frozen=True, slots=True)
class Change:
    """One entry of the change log: one committed change to one node, edge or the model. `proposal`: the id of the
    proposal whose merge wrote it (None: a direct write, an import, a model change, or logged before the change
    log recorded proposals); `to_json` names it only when there is one."""

    revision: int
    at: str
    principal: str
    op: ChangeOp
    kind: Literal["node", "edge", "model"]
    key: str
    type: str | None
    before: Mapping[str, Any] | None
    after: Mapping[str, Any] | None
    proposal: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "revision": self.revision,
            "at": self.at,
            "principal": self.principal,
            "op": self.op,
            "kind": self.kind,
            "key": self.key,
            "type": self.type,
            "before": dict(self.before) if self.before is not None else None,
            "after": dict(self.after) if self.after is not None else None,
        }
        if self.proposal is not None:
            out["proposal"] = self.proposal
        return out
