"""What the tests of reads at a past revision through the tools share (`test_tools_at`, `test_past_finds_and_walks`):
the seeded store's team, person and a reader of the team's group, and a tool call through the dispatch path."""

from __future__ import annotations

from typing import Any

from core.seam.instance import Instance
from core.values.principal import LOCAL, Principal

__all__ = ["PERSON", "READER", "TEAM", "call", "ok"]

TEAM = "team-payments"
PERSON = "person-ada-okafor"
READER = Principal("gus", frozenset({"reader"}), frozenset({"payments"}))


def call(instance: Instance, name: str, arguments: dict[str, Any], principal: Principal = LOCAL) -> dict[str, Any]:
    """The tool's answer as JSON (an `error` member when it failed)."""
    return instance.dispatcher.call_tool(principal, "test", name, arguments).as_json()


def ok(instance: Instance, name: str, arguments: dict[str, Any], principal: Principal = LOCAL) -> dict[str, Any]:
    """The tool's answer, which must not be an error."""
    answer = call(instance, name, arguments, principal)
    assert "error" not in answer, answer
    return answer
