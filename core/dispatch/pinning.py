"""Which revision a read of the past is pinned to, one rule for every tool and surface.

A tool whose input takes both `at` (a revision) and `as_of` (an RFC 3339 time) reads at `at`, or at the last
revision logged at or before `as_of` (`Store.revision_at`, at the change log's precision: milliseconds, UTC).
Dispatch resolves `as_of` into `at` before the handler runs, so a handler, a walk worker and a page's cursor see
one revision, and the answer's `revision` says which. Both together is an error; a time older than the change log
keeps is the change feed's `gone`, naming the oldest revision kept.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from core.dispatch.registry import ToolDefinition
from core.store import Store
from core.values.errors import InvalidArgumentsError, Problem

__all__ = ["pin", "utc"]


def utc(value: str) -> str:
    """An RFC 3339 time as the change log writes it (UTC, milliseconds, Z), so text order is time order."""
    moment = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def pin(store: Store, tool: ToolDefinition, args: dict[str, Any]) -> dict[str, Any]:
    """`args` with `as_of` resolved to `at`, for a tool that takes both (`ToolDefinition.pins`; others: unchanged).
    A read at a proposal (`proposal`) reads no revision of the past: with `at` or `as_of` it is an error."""
    if tool.pins and "proposal" in args and ("at" in args or "as_of" in args):
        given = "/at" if "at" in args else "/as_of"
        raise InvalidArgumentsError(tool.name, [Problem(given, "give a revision or a proposal, not both")])
    if "as_of" not in args or not tool.pins:
        return args
    if "at" in args:
        problem = Problem("/as_of", "give at (a revision) or as_of (a time), not both")
        raise InvalidArgumentsError(tool.name, [problem])
    revision = store.revision_at(utc(args["as_of"]))
    return {**{k: v for k, v in args.items() if k != "as_of"}, "at": revision}
