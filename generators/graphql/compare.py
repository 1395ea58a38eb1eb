"""What a model change does to GraphQL callers: the old and new SDL compared with graphql-core's own rules.

A breaking change (a field, type or enum value removed, a type or nullability changed so a query or its result
no longer fits) is breaking; a dangerous one (an enum value or union member added, an argument default changed)
and every other difference (types, fields, descriptions added) is compatible.
"""

from __future__ import annotations

from collections.abc import Mapping

from graphql import build_schema
from graphql.utilities import find_breaking_changes, find_dangerous_changes

from core.lang.schema_diff import BREAKING, COMPATIBLE, Finding

__all__ = ["SDL", "compare"]

SDL = "schema.graphql"


def compare(old: Mapping[str, str], new: Mapping[str, str]) -> list[Finding]:
    """Every classified difference between the two SDL documents (`schema.graphql`)."""
    if old[SDL] == new[SDL]:
        return []
    before, after = build_schema(old[SDL]), build_schema(new[SDL])
    breaking = [Finding("graphql", c.type.name.lower(), c.description, BREAKING)
                for c in find_breaking_changes(before, after)]  # fmt: skip
    dangerous = [Finding("graphql", c.type.name.lower(), c.description, COMPATIBLE)
                 for c in find_dangerous_changes(before, after)]  # fmt: skip
    if breaking or dangerous:
        return breaking + dangerous
    return [Finding("graphql", "schema", "types, fields or descriptions added or changed", COMPATIBLE)]
