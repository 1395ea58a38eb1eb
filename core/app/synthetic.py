"""Deterministic synthetic graphs for the default model, for benchmarks and scale tests.

`synthetic_records(n, seed)` yields import records (JSON Lines form) for `n` nodes and about `3 n` edges, typed
like the default model and valid under it: the same `n` and `seed` always give the same bytes. The mix is
40% people, 20% services, 16% documents, 10% decisions, 10% glossary terms, 2% teams, 2% systems.
`synthetic_model(types)` is a model document of any number of node types, for measuring how sizes grow with it.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from core.store.interchange import output_format, write_file, write_records

__all__ = ["synthetic_model", "synthetic_records", "write_synthetic"]

MIX = (("Person", 0.40), ("Service", 0.20), ("Document", 0.16), ("Decision", 0.10), ("GlossaryTerm", 0.10),
       ("Team", 0.02), ("System", 0.02))  # fmt: skip
WORDS = (
    "checkout ledger payments oauth identity search index catalog pricing invoice billing refund fraud risk "
    "session token gateway cache queue stream kafka postgres redis schema events audit metrics tracing alerting "
    "deploy release rollout canary onboarding mobile web partner inventory shipping tax currency ranking"
).split()
AREAS = ("product", "platform", "data", "security", "operations")
ROLES = (
    "engineer",
    "engineering_manager",
    "product_manager",
    "designer",
    "data_scientist",
    "site_reliability_engineer",
    "security_engineer",
)
MAX_DECISIONS = 10_000
PREFIX = {"Person": "person", "Service": "svc", "Document": "doc", "Decision": "adr", "GlossaryTerm": "term",
          "Team": "team", "System": "sys"}  # fmt: skip


def _counts(n: int) -> dict[str, int]:
    counts = {t: max(1, int(n * share)) for t, share in MIX}
    if counts["Decision"] > MAX_DECISIONS:  # ADR numbers have four digits, and keys are unique
        counts["Document"] += counts["Decision"] - MAX_DECISIONS
        counts["Decision"] = MAX_DECISIONS
    counts["Person"] += n - sum(counts.values())  # exact total
    return counts


def _id(type_: str, i: int) -> str:
    return f"{PREFIX[type_]}-{i:07d}"


def _words(rng: random.Random, k: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(k))


def _visibility(rng: random.Random) -> dict[str, Any]:
    roll = rng.random()
    if roll < 0.4:
        return {"visibility": "public"}
    if roll < 0.9:
        return {"visibility": "internal"}
    return {"visibility": "restricted", "readers": [f"group:team-{rng.randrange(20):02d}"]}


def _properties(type_: str, i: int, rng: random.Random) -> dict[str, Any]:
    w = _words(rng, 3)
    if type_ == "Person":
        return {"email": f"user{i}@northwind.example", "name": f"Person {i} {w.split()[0].title()}",
                "handle": f"user-{i}", "title": f"Engineer, {w.split()[1]}", "role": rng.choice(ROLES),
                "level": rng.randint(1, 8), "skills": sorted(set(w.split()))}  # fmt: skip
    if type_ == "Team":
        return {"slug": f"team-{i:04d}", "name": f"Team {i}", "mission": f"Owns {w}.", "area": rng.choice(AREAS)}
    if type_ == "Service":
        return {"name": f"svc-{i}-{w.split()[0]}", "description": f"Handles {w} for the platform.",
                "lifecycle": "production", "tier": rng.randint(1, 3)}  # fmt: skip
    if type_ == "System":
        return {
            "slug": f"sys-{i:04d}",
            "name": f"System {i}",
            "description": f"The {w} system.",
            "lifecycle": "production",
        }
    if type_ == "Decision":
        return {"number": f"ADR-{i:04d}", "title": f"Use {w} ({i})", "status": "accepted",
                "date": f"20{20 + i % 6}-0{1 + i % 9}-1{i % 10}", "decision": f"We adopt {w}."}  # fmt: skip
    if type_ == "Document":
        return {
            "slug": f"doc-{i}",
            "title": f"Runbook {i}: {w}",
            "doc_type": "runbook",
            "summary": f"How to operate {w}.",
        }
    return {"term": f"Term {i} {w.split()[0]}", "definition": f"A word about {w}."}


def synthetic_records(n: int, seed: int = 0) -> Iterator[dict[str, Any]]:
    """Import records for `n` nodes (all nodes first, then edges); deterministic in (n, seed)."""
    rng = random.Random(seed)
    counts = _counts(n)
    for type_, count in counts.items():
        for i in range(count):
            yield {"kind": "node", "id": _id(type_, i), "type": type_, **_visibility(rng),
                   "properties": _properties(type_, i, rng)}  # fmt: skip
    yield from _edges(counts, rng)


def _edge(type_: str, source: str, target: str, **properties: Any) -> dict[str, Any]:
    return {"kind": "edge", "type": type_, "source": source, "target": target, "properties": properties}


def _edges(c: dict[str, int], rng: random.Random) -> Iterator[dict[str, Any]]:
    teams, people, services, systems = c["Team"], c["Person"], c["Service"], c["System"]
    for i in range(people):
        yield _edge("member_of", _id("Person", i), _id("Team", i % teams), role="member")
        if i:  # a tree of managers, eight reports each: acyclic by construction
            yield _edge("reports_to", _id("Person", i), _id("Person", (i - 1) // 8))
    for i in range(services):
        yield _edge("owns", _id("Team", rng.randrange(teams)), _id("Service", i))
        yield _edge("part_of", _id("Service", i), _id("System", rng.randrange(systems)))
        for j in sorted(rng.sample(range(services), k=min(3, services)) if services > 3 else []):
            if j != i:
                yield _edge(
                    "depends_on", _id("Service", i), _id("Service", j), criticality=rng.choice(("hard", "soft"))
                )
    for i in range(systems):
        yield _edge("owns", _id("Team", rng.randrange(teams)), _id("System", i))
    for i in range(c["Decision"]):
        adr = _id("Decision", i)
        yield _edge("decided_by", adr, _id("Person", rng.randrange(people)))
        yield _edge("affects", adr, _id("Service", rng.randrange(services)))
        yield _edge("authored", _id("Person", rng.randrange(people)), adr)
        if i % 2 == 1:  # disjoint pairs: one-to-one and acyclic
            yield _edge("supersedes", adr, _id("Decision", i - 1))
    for i in range(c["Document"]):
        doc = _id("Document", i)
        yield _edge("owns", _id("Team", rng.randrange(teams)), doc)
        yield _edge("documents", doc, _id("Service", rng.randrange(services)))
        yield _edge("documents", doc, _id("System", rng.randrange(systems)))
        yield _edge("authored", _id("Person", rng.randrange(people)), doc)
        yield _edge("defines", doc, _id("GlossaryTerm", rng.randrange(c["GlossaryTerm"])))
    terms = c["GlossaryTerm"]
    for i in range(terms if terms > 1 else 0):
        yield _edge("related_to", _id("GlossaryTerm", i), _id("GlossaryTerm", (i + 1) % terms))


def write_synthetic(path: Path, n: int, seed: int = 0) -> tuple[int, int]:
    """Write the synthetic graph in the format `path`'s extension names (JSON Lines streams); return (nodes, edges)."""
    kind = output_format(path)
    return write_file(path, lambda out: write_records(out, kind, synthetic_records(n, seed)))


def synthetic_model(types: int) -> dict[str, Any]:
    """A model document of `types` node types (`Kind000`, ...), each with a key, a display name and three more
    properties, and one edge type from each type to the next: what the context-budget benchmark grows a model
    with (benchmarks/context_budget.py)."""
    defs: dict[str, Any] = {}
    names = [f"Kind{i:03d}" for i in range(types)]
    for i, name in enumerate(names):
        defs[name] = {
            "type": "object",
            "description": f"Synthetic node type {i} of {types}.",
            "x-canon-node": {"key": "slug", "display": "name", "text": ["name", "summary"]},
            "properties": {
                "slug": {"type": "string", "pattern": "^[a-z0-9-]+$", "maxLength": 64, "description": "Its key."},
                "name": {"type": "string", "maxLength": 200, "description": "Its display name."},
                "summary": {"type": "string", "maxLength": 2000, "description": "What it is."},
                "rank": {"type": "integer", "minimum": 0, "description": "A number."},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 12},
            },
            "required": ["slug", "name"],
            "additionalProperties": False,
        }
    for i, name in enumerate(names):
        defs[f"links_{i:03d}"] = {
            "type": "object",
            "description": f"From {name} to the next type.",
            "x-canon-edge": {"source": [name], "target": [names[(i + 1) % types]], "cardinality": "many-to-many"},
            "properties": {},
            "additionalProperties": False,
        }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"urn:canon:model:synthetic-{types}",
        "title": f"Synthetic model of {types} node types",
        "x-canon-model": {"name": f"synthetic-{types}", "version": "1.0.0"},
        "$defs": defs,
    }
